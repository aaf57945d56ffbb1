#!/usr/bin/env bash
# The first thing to run: builds, then `gpufeed train` — a small CNN trained
# by the naive synchronous loop and by gpufeed's prefetching loader, side by
# side (images/s, input stall, device utilization, held-out accuracy).
#
#   bench/demo.sh [train options]    the training demo (default)
#   bench/demo.sh bench [options]    the input-pipeline bench instead
#
# The training data (train/ + val/, 10 classes of 500x375 JPEGs) is made once
# and cached: by `gpufeed train` itself under
# ${XDG_CACHE_HOME:-~/.cache}/gpufeed/train-data, or here in
# $GPUFEED_DEMO_DATA when that is set ($GPUFEED_DEMO_PER_CLASS train images
# per class, a quarter of that, at least 2, for validation).
#
# It builds the gpufeed program alone in build-release (a release build:
# the speed a trainer gets, assertions off), apart from the tests' build/
# (debugoptimized, assertions on); GPUFEED_DEMO_PROGRAM=PATH runs a gpufeed
# program built already instead (CI: the device check's release build).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gpufeed
if [ -n "${GPUFEED_DEMO_PROGRAM:-}" ]; then
    g=$GPUFEED_DEMO_PROGRAM
else
    [ -d build-release ] || meson setup build-release --buildtype=release -Dtests=false >/dev/null
    meson compile -C build-release src/cli/gpufeed >/dev/null
    g=build-release/src/cli/gpufeed
fi

# make_set DIR SUBDIR SEED PER_CLASS: one ImageFolder, once.
make_set() {
    if [ ! -f "$1/.complete-$2" ]; then
        rm -rf "${1:?}/$2"
        "$g" make-dataset "$1/$2" --classes 10 --per-class "$4" --seed "$3"
        touch "$1/.complete-$2"
    fi
}

if [ "${1:-}" = bench ]; then
    shift
    data=${GPUFEED_DEMO_DATA:-$cache/demo-data}
    make_set "$data" images 0 "${GPUFEED_DEMO_PER_CLASS:-100}"
    exec "$g" bench --input-only --data "$data/images" "$@"
fi

if [ -n "${GPUFEED_DEMO_DATA:-}" ]; then
    per=${GPUFEED_DEMO_PER_CLASS:-200}
    val=$((per / 4 < 2 ? 2 : per / 4))
    make_set "$GPUFEED_DEMO_DATA" train 0 "$per"
    make_set "$GPUFEED_DEMO_DATA" val 1 "$val"
    exec "$g" train --data "$GPUFEED_DEMO_DATA" "$@"
fi
exec "$g" train "$@"

#!/usr/bin/env bash
# The main job until the demo trainer lands: build, make the synthetic data
# set once (cached), and run the input-pipeline bench on it.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${GPUFEED_DEMO_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufeed/demo-data}
[ -d build ] || meson setup build >/dev/null
meson compile -C build >/dev/null
if [ ! -f "$data/.complete" ]; then
    rm -rf "$data"
    build/bench/gpufeed make-dataset "$data" --classes 10 --per-class "${GPUFEED_DEMO_PER_CLASS:-100}"
    touch "$data/.complete"
fi
build/bench/gpufeed bench --input-only --data "$data" "$@"

#!/usr/bin/env bash
# The library as a user installs it: `meson install`, then gpufeed.h,
# libgpufeed and gpufeed.pc from C and from C++, linked shared and static
# (pkg-config --static must name everything libgpufeed.a needs). Each
# consumer reads a data set made by the installed `gpufeed`, and all must
# print the same batches.
#
#   tests/install.sh BUILD_DIR
# shellcheck disable=SC2046,SC2086 # pkg-config's flags are meant to split
set -euo pipefail
build=${1:?usage: tests/install.sh BUILD_DIR}
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root

meson install -C "$build" --destdir "$root" --quiet >/dev/null
pc=$(find "$root" -name gpufeed.pc)
[ -n "$pc" ] || { echo "install: no gpufeed.pc was installed" >&2; exit 1; }
export PKG_CONFIG_PATH=${pc%/*} PKG_CONFIG_SYSROOT_DIR=$root
libdir=$(pkg-config --variable=libdir gpufeed)
export LD_LIBRARY_PATH=$libdir

gpufeed=$(find "$root" -path '*/bin/gpufeed')
"$gpufeed" make-dataset "$tmp/data" --classes 3 --per-class 5 --size 40x30 >/dev/null

cflags=$(pkg-config --cflags gpufeed)
warn=(-Wall -Wextra -Wpedantic -Werror)
cc -std=c11 "${warn[@]}" "$src/consumer.c" $cflags $(pkg-config --libs gpufeed) -o "$tmp/c-shared"
c++ -x c++ -std=c++11 "${warn[@]}" "$src/consumer.c" $cflags $(pkg-config --libs gpufeed) \
    -o "$tmp/cxx-shared"
cc -std=c11 "${warn[@]}" "$src/consumer.c" $cflags \
    $(pkg-config --static --libs gpufeed | sed 's/-lgpufeed\b/-l:libgpufeed.a/') -o "$tmp/c-static"
if ldd "$tmp/c-static" | grep -q libgpufeed; then
    echo "install: the static consumer still loads libgpufeed.so" >&2
    exit 1
fi

want=
for c in c-shared cxx-shared c-static; do
    out=$("$tmp/$c" "$tmp/data" 15 3)
    echo "$c: $out"
    want=${want:-$out}
    [ "$out" = "$want" ] || { echo "install: $c delivered other batches" >&2; exit 1; }
done

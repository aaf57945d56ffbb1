#!/bin/sh
# The darknet comparison of bench/README.md: makes (once) a set of large
# square JPEGs, where darknet's loader (a whole-image OpenCV decode and
# float conversion per sample) costs more than small.cfg's compute, then
# runs the two loaders alternately, REPEAT times each, and prints one JSON
# line per run. Usage: run.sh BUILD_DIR [REPEAT [SIZE_PX [extra options]]]
set -eu
build=${1:?usage: run.sh BUILD_DIR [REPEAT [SIZE_PX [options]]]}
repeat=${2:-2}
size=${3:-32}
[ $# -gt 3 ] && shift 3 || shift $#
data=${GPUFEED_DARKNET_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufeed-darknet-800q50}
g=$build/src/cli/gpufeed
dn=$build/bench/darknet/gpufeed-darknet
if [ ! -d "$data/val" ]; then
    "$g" make-dataset "$data/train" --classes 10 --per-class 40 --size 800x800 --quality 50 \
        --seed 1 >/dev/null
    "$g" make-dataset "$data/val" --classes 10 --per-class 20 --size 800x800 --quality 50 \
        --seed 2 >/dev/null
fi
i=0
while [ $i -lt "$repeat" ]; do
    for loader in darknet gpufeed; do
        "$dn" --train "$data/train" --val "$data/val" --loader $loader --size "$size" \
            --images 3200 --alone 10 --json "$@" 2>/dev/null
    done
    i=$((i + 1))
done

#!/bin/sh
# The darknet comparison of bench/README.md: on data.sh's set (made once),
# runs the two loaders alternately, REPEAT times each, and prints one JSON
# line per run. Usage: run.sh BUILD_DIR [REPEAT [SIZE_PX [extra options]]]
set -eu
build=${1:?usage: run.sh BUILD_DIR [REPEAT [SIZE_PX [options]]]}
repeat=${2:-2}
size=${3:-32}
[ $# -gt 3 ] && shift 3 || shift $#
g=$build/src/cli/gpufeed
dn=$build/bench/darknet/gpufeed-darknet
. "$(dirname "$0")/data.sh"
i=0
while [ $i -lt "$repeat" ]; do
    for loader in darknet gpufeed; do
        "$dn" --train "$data/train" --val "$data/val" --loader $loader --size "$size" \
            --images 3200 --alone 10 --json "$@" 2>/dev/null
    done
    i=$((i + 1))
done

#!/bin/bash
# Two gpufeed programs (an old build and a new one) on the same command,
# alternated (old, new, old, new, ...) after one untimed run of each: each
# run's CPU seconds (user + system, the kernel's accounting of the whole
# process) and wall seconds, the medians, and the median of the new/old
# ratios pair by pair, which cancels a drift of the machine's speed.
# A refactor or a check on the hot path is "no slower" when that ratio
# sits at 1 within its spread.
#
#   bench/builds.sh OLD_GPUFEED NEW_GPUFEED ARGS...
#   RUNS=5 bench/builds.sh /tmp/old/src/cli/gpufeed build-release/src/cli/gpufeed \
#       bench --input-only --data 'set/train-{000000..000031}.tar' --threads 2 \
#       --image-size 224 --batch-size 64 --epochs 2 --transform train
#
# Environment: RUNS (5 pairs). Output goes nowhere; a run that fails stops it.
set -eu
[ $# -ge 3 ] || { echo "usage: bench/builds.sh OLD_GPUFEED NEW_GPUFEED ARGS..." >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
me=builds.sh
. "$here/lib.sh"
old=$1 new=$2
shift 2
RUNS=${RUNS:-5}
work_dir ""

run() { # PROGRAM NAME ARGS...: a run, its "cpu wall" appended to $WORK/NAME
    local g=$1 name=$2
    shift 2
    /usr/bin/time -f '%U %S %e' -o "$WORK/t" "$g" "$@" >/dev/null 2>"$WORK/err" ||
        { cat "$WORK/err" >&2; echo "$me: $g failed" >&2; exit 1; }
    awk '{ printf "%.3f %.3f\n", $1 + $2, $3 }' "$WORK/t" >>"$WORK/$name"
}

run "$old" warm "$@"
run "$new" warm "$@"
for _ in $(seq "$RUNS"); do
    run "$old" old "$@"
    run "$new" new "$@"
done
col() { awk -v c="$2" '{ print $c }' "$WORK/$1" | tr '\n' ' '; }
pairs() { paste -d ' ' "$WORK/new" "$WORK/old" | awk -v c="$1" '{ printf "%.4f ", $c / $(c + 2) }'; }
printf '%-5s %9s %9s\n' "" "CPU s" "wall s"
for b in old new; do
    printf '%-5s %9s %9s   (CPU: %s)\n' "$b" "$(col $b 1 | median)" "$(col $b 2 | median)" "$(col $b 1)"
done
printf 'new/old, pair by pair: CPU %s (%s), wall %s (%s)\n' \
    "$(pairs 1 | median)" "$(pairs 1)" "$(pairs 2 | median)" "$(pairs 2)"

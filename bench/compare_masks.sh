#!/bin/sh
# Images with their segmentation masks, gpufeed against the PyTorch
# DataLoader on the same tar shards (bench/add_masks.py's: KEY.jpg, KEY.cls,
# KEY.seg.png): bench/gpufeed_masks.py (gpufeed.Loader with
# fields=("jpg", "cls", "seg.png:mask"), THREADS decode threads) against
# bench/torch_masks.py (a Dataset reading each sample by offset, PIL
# decodes, torchvision's functional joint crop and flip, THREADS workers),
# the same batch, output size and training transform, uint8 out, every
# batch touched. The target: gpufeed >= 2.5x torch.
#
#   bench/compare_masks.sh DATA      # a directory of train-*.tar
#
# Environment: PYTHON (default /usr/bin/python3, where Debian's
# python3-torch lives), GPUFEED (a build's gpufeed binary: its build's
# python/ is put on PYTHONPATH when `import gpufeed` fails without it),
# THREADS (2), SIZE (224), BATCH (64), EPOCHS (3 a run: each rate is over
# the epochs after the first), RUNS (3: timed pairs, alternating).
# The page cache is warmed and each loader gets an untimed one-epoch run
# first: the comparison is CPU, not disk. Prints each pair's rates and
# ratio, the medians, and the median of the pair-by-pair ratios (which
# holds when a shared machine's speed drifts between runs: the two runs of
# a pair share it).
set -eu

usage() { echo "usage: $0 DATA (a directory of train-*.tar with .seg.png masks)" >&2; exit 2; }
[ $# -eq 1 ] || usage
DATA=$1
[ -d "$DATA" ] || { echo "compare_masks.sh: $DATA: not a directory" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2}
SIZE=${SIZE:-224}
BATCH=${BATCH:-64}
EPOCHS=${EPOCHS:-3}
RUNS=${RUNS:-3}
me=compare_masks.sh
. "$here/lib.sh"

set -- "$DATA"/train-*.tar
[ -f "$1" ] || { echo "compare_masks.sh: no train-*.tar in $DATA" >&2; exit 2; }
tar -tf "$1" | grep -q '\.seg\.png$' ||
    { echo "compare_masks.sh: $1 has no .seg.png member (bench/add_masks.py SRC $DATA)" >&2; exit 2; }
"$PYTHON" -c 'import torch, torchvision, PIL, numpy' 2>/dev/null || {
    echo "$me: $PYTHON lacks torch/torchvision/PIL/numpy (apt-get install -y python3-torch python3-torchvision python3-pil)" >&2
    exit 2
}
# the gpufeed module: importable already, else the build's beside GPUFEED
if ! "$PYTHON" -c 'import gpufeed' 2>/dev/null; then
    find_gpufeed
    PYTHONPATH=$(cd "$(dirname "$GPUFEED")/../.." && pwd)/python${PYTHONPATH:+:$PYTHONPATH}
    export PYTHONPATH
    "$PYTHON" -c 'import gpufeed' 2>/dev/null ||
        { echo "$me: no gpufeed module for $PYTHON (PYTHONPATH=$PYTHONPATH)" >&2; exit 2; }
fi

gf() {
    "$PYTHON" "$here/gpufeed_masks.py" "$DATA" --threads "$THREADS" --image-size "$SIZE" \
        --batch-size "$BATCH" --epochs "$1"
}
pt() {
    "$PYTHON" "$here/torch_masks.py" "$DATA" --workers "$THREADS" --image-size "$SIZE" \
        --batch-size "$BATCH" --epochs "$1"
}
sps() { "$PYTHON" -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read())["samples_per_s"])'; }

samples=$(for f in "$@"; do tar -tf "$f"; done | grep -c '\.seg\.png$')
echo "data: $DATA ($# shards, $samples samples with masks), threads/workers $THREADS, ${SIZE}x${SIZE}, batch $BATCH, train transform, $EPOCHS epochs a run (rate over epochs 2..$EPOCHS)"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
# Warm the page cache, then one untimed epoch of each loader.
cat "$@" > /dev/null
gf 1 > /dev/null
pt 1 > /dev/null

gs=""; ts=""; rs=""
i=1
while [ "$i" -le "$RUNS" ]; do
    # each run whole before Python parses it: a parser piped beside the
    # run takes its cores
    g=$(gf "$EPOCHS"); g=$(echo "$g" | sps); t=$(pt "$EPOCHS"); t=$(echo "$t" | sps)
    r=$(ratio "$g" "$t")
    echo "run $i: gpufeed $g samples/s, torch $t samples/s, ratio ${r}x"
    gs="$gs $g"; ts="$ts $t"; rs="$rs $r"
    i=$((i + 1))
done
gm=$(echo "$gs" | median); tm=$(echo "$ts" | median)
echo "gpufeed  $gm samples/s (median of $RUNS)"
echo "torch    $tm samples/s (median of $RUNS)"
echo "ratio    $(ratio "$gm" "$tm")x (the medians' ratio, gpufeed / torch)"
echo "ratio    $(echo "$rs" | median | xargs printf '%.2f')x (median of the pairs' ratios; target >= 2.5)"
echo "load     $(cut -d' ' -f1-3 /proc/loadavg) (after)"

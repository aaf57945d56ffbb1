#!/bin/sh
# Compares gpufeed's input pipeline with the PyTorch DataLoader on the same
# files: `gpufeed bench --input-only` against bench/torch_loader.py, same
# batch size, output size and training transform (random-resized-crop +
# flip, uint8), same number of workers/threads.
#
#   bench/compare_torch.sh DIR
#
# Environment: GPUFEED (the gpufeed binary; default build-cli/src/cli/gpufeed,
# then build/src/cli/gpufeed, then PATH), PYTHON (default /usr/bin/python3,
# where Debian's python3-torch lives), THREADS (2), SIZE (224), BATCH (64),
# RUNS (3: timed runs of each, alternating; the median is reported).
# Each loader gets an untimed warm-up pass first, after the files have been
# read once so the page cache is warm: the comparison is CPU, not disk.
set -eu

usage() { echo "usage: $0 DIR" >&2; exit 2; }
[ $# -eq 1 ] || usage
DIR=$1
[ -d "$DIR" ] || { echo "compare_torch.sh: $DIR: not a directory" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2}
SIZE=${SIZE:-224}
BATCH=${BATCH:-64}
RUNS=${RUNS:-3}
me=compare_torch.sh
. "$here/lib.sh"
find_gpufeed
"$PYTHON" -c 'import torch, torchvision, PIL' 2>/dev/null || {
    echo "compare_torch.sh: $PYTHON lacks torch/torchvision/PIL (apt-get install -y python3-torch python3-torchvision python3-pil)" >&2
    exit 2
}

gf() {
    "$GPUFEED" bench --input-only --data "$DIR" --threads "$THREADS" \
        --image-size "$SIZE" --batch-size "$BATCH" --transform train --json
}
pt() {
    "$PYTHON" "$here/torch_loader.py" "$DIR" --workers "$THREADS" \
        --image-size "$SIZE" --batch-size "$BATCH" --transform train --json
}
ips() { "$PYTHON" -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read())["images_per_s"])'; }

echo "data: $DIR ($(find "$DIR" -type f | wc -l) files), threads/workers $THREADS, ${SIZE}x${SIZE}, batch $BATCH, train transform"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
# Warm the page cache, then one untimed pass of each loader.
find "$DIR" -type f -exec cat {} + > /dev/null
gf > /dev/null
pt > /dev/null

gs=""; ts=""
i=1
while [ "$i" -le "$RUNS" ]; do
    # each run whole before Python parses it: a parser piped beside the
    # run (Python starts in about 0.05 CPU-s) takes its cores
    g=$(gf); g=$(echo "$g" | ips); t=$(pt); t=$(echo "$t" | ips)
    echo "run $i: gpufeed $g images/s, torch $t images/s"
    gs="$gs $g"; ts="$ts $t"
    i=$((i + 1))
done
gm=$(echo "$gs" | median); tm=$(echo "$ts" | median)
echo "gpufeed  $gm images/s (median of $RUNS)"
echo "torch    $tm images/s (median of $RUNS)"
echo "ratio    $(ratio "$gm" "$tm")x (gpufeed / torch)"

#!/bin/sh
# What each `gpufeed prepare` setting costs in accuracy: the same model,
# epochs and seeds trained on the originals and on each prepared set, every
# model evaluated on the original held-out images (the files a deployed
# model would see; the prepared set is the training input only).
#
#   bench/prepare_accuracy.sh TRAIN VAL [WORK]
#
# TRAIN, VAL: ImageFolders (make-dataset sets in the issue's runs).
# WORK: where the prepared sets go (default a temporary directory, removed).
# Environment: GPUFEED, PYTHON (/usr/bin/python3), SEEDS ("0 1 2"), EPOCHS
# (3), SIZE (96: the CPU's crop; 224 on a GPU), WIDTH (16), BATCH (64),
# THREADS (2), SETTINGS (as bench/prepare_speed.sh), TRAIN_WIDTH (8: gpufeed
# train's --model-width, fixed so every run computes alike); the gpufeed
# module installed, or built beside GPUFEED (BUILD/python). Per setting
# and seed one python/train_torch.py run (its gpufeed loader, SIZE crops)
# and one `gpufeed train --loader gpufeed` run (its own model, 60 px
# crops); the held-out accuracy after the last epoch, mean and sample sd.
set -eu

usage() { echo "usage: $0 TRAIN VAL [WORK]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
TRAIN=$1 VAL=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
PYTHON=${PYTHON:-/usr/bin/python3}
SEEDS=${SEEDS:-"0 1 2"}
EPOCHS=${EPOCHS:-3}
SIZE=${SIZE:-96}
WIDTH=${WIDTH:-16}
BATCH=${BATCH:-64}
THREADS=${THREADS:-2}
TRAIN_WIDTH=${TRAIN_WIDTH:-8}
SETTINGS=${SETTINGS:-"jpeg256:--max-side 256 --quality 90;raw256:--max-side 256 --format raw"}
me=prepare_accuracy.sh
. "$here/lib.sh"
find_gpufeed
work_dir "${3:-}"
export GF_NO_PROGRESS=1
# the gpufeed module: installed, else the build's beside GPUFEED
if ! "$PYTHON" -c 'import gpufeed' 2>/dev/null; then
    PYTHONPATH=$(cd "$(dirname "$GPUFEED")/../.." && pwd)/python${PYTHONPATH:+:$PYTHONPATH}
    export PYTHONPATH
fi

accuracy() {
    "$PYTHON" "$root/python/train_torch.py" --cli "$GPUFEED" --loaders gpufeed --train "$1" \
        --val "$VAL" --seed "$2" --epochs "$EPOCHS" --image-size "$SIZE" --width "$WIDTH" \
        --batch-size "$BATCH" --threads "$THREADS" --json 2>/dev/null |
        "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["loaders"]["gpufeed"]["val_accuracy"][-1])'
}
train_accuracy() {
    "$GPUFEED" train --train-data "$1" --val-data "$VAL" --loader gpufeed --seed "$2" \
        --epochs "$EPOCHS" --model-width "$TRAIN_WIDTH" --threads "$THREADS" --json 2>/dev/null |
        "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["epochs"][-1]["accuracy"])'
}
stats() {
    tr ' ' '\n' | grep . | awk '{v[NR] = $1; s += $1} END {m = s / NR; for (i = 1; i <= NR; i++) d += (v[i] - m) ^ 2
        printf "%.1f%% +- %.1f", 100 * m, (NR > 1) ? 100 * sqrt(d / (NR - 1)) : 0}'
}

echo "train: $TRAIN, val (originals): $VAL; ${SIZE}x${SIZE}, width $WIDTH, $EPOCHS epochs, batch $BATCH, seeds $SEEDS"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
sets="originals=$TRAIN"
old_ifs=$IFS
IFS=';'
for s in $SETTINGS; do
    IFS=$old_ifs
    name=${s%%:*}; opts=${s#*:}
    rm -rf "${WORK:?}/$name"
    # shellcheck disable=SC2086 # opts is a list of options
    "$GPUFEED" prepare "$TRAIN" "$WORK/$name" $opts --threads "$THREADS" >/dev/null
    sets="$sets;$name=$(pattern "$WORK/$name")"
    IFS=';'
done
for s in $sets; do
    IFS=$old_ifs
    name=${s%%=*}; data=${s#*=}
    accs=""; taccs=""
    for seed in $SEEDS; do
        accs="$accs $(accuracy "$data" "$seed")"
        taccs="$taccs $(train_accuracy "$data" "$seed")"
    done
    printf '  %-10s train_torch.py %s (runs:%s)   gpufeed train %s (runs:%s)\n' "$name" \
        "$(echo "$accs" | stats)" "$accs" "$(echo "$taccs" | stats)" "$taccs"
    IFS=';'
done
IFS=$old_ifs

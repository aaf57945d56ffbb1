#!/bin/sh
# What `gpufeed prepare` buys and costs: the loader's rate on the original
# files and on prepared sets, the PyTorch DataLoader's on the originals,
# prepare's own rate at 1 and N threads, and the bytes per image.
#
#   bench/prepare_speed.sh SRC [WORK]
#
# SRC: an ImageFolder (make-dataset's 500x375 JPEGs in the issue's runs).
# WORK: where the prepared sets go (default a temporary directory, removed).
# Environment: GPUFEED, PYTHON (/usr/bin/python3), THREADS (2), SIZE (224),
# BATCH (64), EPOCHS (3: per timed run; a loader's first epoch also pays
# its one-time costs, first touches of the ring and the decoders' scratch,
# which a training run spreads over all its epochs), RUNS (3: alternated
# timed runs, medians), SETTINGS (the
# prepared sets, as NAME:prepare-options;...; default
# "jpeg256:--max-side 256 --quality 90;raw256:--max-side 256 --format raw").
# Random-resized-crop + flip, uint8, page cache warm (read once, one
# untimed pass each): the comparison is CPU, not disk.
set -eu

usage() { echo "usage: $0 SRC [WORK]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
SRC=$1
[ -d "$SRC" ] || { echo "prepare_speed.sh: $SRC: not a directory" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2}
SIZE=${SIZE:-224}
BATCH=${BATCH:-64}
RUNS=${RUNS:-3}
EPOCHS=${EPOCHS:-3}
SETTINGS=${SETTINGS:-"jpeg256:--max-side 256 --quality 90;raw256:--max-side 256 --format raw"}
me=prepare_speed.sh
. "$here/lib.sh"
find_gpufeed
work_dir "${2:-}"
export GF_NO_PROGRESS=1

field() { "$PYTHON" -c 'import json,sys; v=json.loads(sys.stdin.read())[sys.argv[1]]; print("%.1f" % v if isinstance(v, float) else v)' "$1"; }
# bytes per image in a prepared set, from its manifest
per_image() {
    "$PYTHON" -c 'import json,sys; m=json.load(open(sys.argv[1]+"/manifest.json"))
print("%.0f" % (sum(s["bytes"] for s in m["shards"]) / max(m["samples"], 1)))' "$1"
}
# A command's --json to a file, then its field NAME: a reader piped beside
# the run (Python starts in about 0.05 CPU-s, a twentieth of a raw run's)
# would take the cores the run is timed on, most from the shortest runs.
json_field() {
    name=$1; shift
    "$@" --json >"$WORK/out.json" || { cat "$WORK/out.json" >&2; exit 1; }
    field "$name" <"$WORK/out.json"
}
gf() {
    json_field images_per_s "$GPUFEED" bench --input-only --data "$1" --threads "$THREADS" \
        --image-size "$SIZE" --batch-size "$BATCH" --epochs "$EPOCHS" --transform train
}
pt() {
    json_field images_per_s "$PYTHON" "$here/torch_loader.py" "$1" --workers "$THREADS" \
        --image-size "$SIZE" --batch-size "$BATCH" --epochs "$EPOCHS" --transform train
}

n_src=$(find "$SRC" -type f | wc -l)
src_bytes=$(find "$SRC" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s / NR}')
echo "source: $SRC ($n_src files, $src_bytes bytes/image), threads $THREADS, ${SIZE}x${SIZE}, batch $BATCH, $EPOCHS epochs a run, train transform"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- prepare each setting; the first one's rate at 1 and N threads, alternated ----
names=""
old_ifs=$IFS
IFS=';'
for s in $SETTINGS; do
    IFS=$old_ifs
    name=${s%%:*}; opts=${s#*:}
    rm -rf "${WORK:?}/$name"
    # shellcheck disable=SC2086 # opts is a list of options
    r=$(json_field samples_per_s "$GPUFEED" prepare "$SRC" "$WORK/$name" $opts --threads "$THREADS")
    echo "prepare $name ($opts): $r samples/s at $THREADS threads, $(per_image "$WORK/$name") bytes/image"
    if [ -z "$names" ]; then first_opts=$opts; fi
    names="$names $name"
    IFS=';'
done
IFS=$old_ifs
one=""; many=""
i=1
while [ "$i" -le "$RUNS" ]; do
    for t in 1 "$THREADS"; do
        rm -rf "$WORK/scaling"
        # shellcheck disable=SC2086
        r=$(json_field samples_per_s "$GPUFEED" prepare "$SRC" "$WORK/scaling" $first_opts --threads "$t")
        if [ "$t" = 1 ]; then one="$one $r"; else many="$many $r"; fi
    done
    i=$((i + 1))
done
rm -rf "$WORK/scaling"
r1=$(echo "$one" | median); rn=$(echo "$many" | median)
echo "prepare ($first_opts), medians of $RUNS alternated: $r1 samples/s at 1 thread, $rn at $THREADS: $(ratio "$rn" "$r1")x = $(ratio "$rn" "$(awk -v a="$r1" -v t="$THREADS" 'BEGIN {print a * t}')") x threads x single"

# ---- warm caches, one untimed pass each, then alternated timed runs ----
find "$SRC" "$WORK" -type f -exec cat {} + >/dev/null
gf "$SRC" >/dev/null
pt "$SRC" >/dev/null
for name in $names; do gf "$(pattern "$WORK/$name")" >/dev/null; done

orig=""; torch=""
for name in $names; do eval "r_$name=''"; done
i=1
while [ "$i" -le "$RUNS" ]; do
    o=$(gf "$SRC"); t=$(pt "$SRC")
    line="run $i: originals $o, torch $t"
    orig="$orig $o"; torch="$torch $t"
    for name in $names; do
        v=$(gf "$(pattern "$WORK/$name")")
        eval "r_$name=\"\$r_$name $v\""
        line="$line, $name $v"
    done
    echo "$line images/s"
    i=$((i + 1))
done
om=$(echo "$orig" | median); tm=$(echo "$torch" | median)
echo "medians of $RUNS (images/s):"
echo "  gpufeed, originals     $om"
echo "  torch DataLoader ($THREADS workers), originals  $tm"
for name in $names; do
    m=$(eval "echo \$r_$name" | median)
    echo "  gpufeed, $name  $m  = $(ratio "$m" "$om")x the originals, $(ratio "$m" "$tm")x the DataLoader"
done

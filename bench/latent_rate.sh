#!/bin/sh
# Latents alone (bench/make_latents.py's shards: KEY.latent.npy, a float16
# (4, 32, 32), and KEY.cls): gpufeed's rate against the rate at which the
# same shards' bytes can be read out of the page cache at all.
#
#   bench/latent_rate.sh DATA      # a directory of train-*.tar
#
# (a) the page cache: the shards are read once (warmed), then each run
#     reads all of them EPOCHS times over with cat into /dev/null (read(2)
#     of 128 KiB), READERS cats at once (xargs -P, each a share of the
#     list): samples/s = samples x EPOCHS / seconds, and bytes/s the same
#     way. With READERS=1 it is what one core gets from read(2) alone,
#     nothing made of the bytes: the ceiling of a loader that reads them.
# (b) gpufeed: bench/gpufeed_latents.py, gpufeed.Loader(fields=("latent.npy",))
#     on the CPU, THREADS threads, batch BATCH, EPOCHS epochs (its rate over
#     the epochs after the first), every batch touched.
# In turn, RUNS times after one untimed run of each; per pair the ratio
# (b)/(a), then the medians and the median of the ratios (target >= 0.8).
# With CLI=1 each run also times `gpufeed bench --input-only --fields
# latent.npy` (GPUFEED's binary) as a third row.
#
# Environment: PYTHON (/usr/bin/python3), GPUFEED (a build's gpufeed: its
# build's python/ goes on PYTHONPATH when `import gpufeed` fails without
# it), THREADS (2), BATCH (256), EPOCHS (3), RUNS (3), READERS (1), CLI (0).
set -eu

usage() { echo "usage: $0 DATA (a directory of train-*.tar of .latent.npy)" >&2; exit 2; }
[ $# -eq 1 ] || usage
DATA=$1
[ -d "$DATA" ] || { echo "latent_rate.sh: $DATA: not a directory" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2}
BATCH=${BATCH:-256}
EPOCHS=${EPOCHS:-3}
RUNS=${RUNS:-3}
READERS=${READERS:-1}
CLI=${CLI:-0}
me=latent_rate.sh
. "$here/lib.sh"

set -- "$DATA"/train-*.tar
[ -f "$1" ] || { echo "$me: no train-*.tar in $DATA" >&2; exit 2; }
samples=$(for f in "$@"; do tar -tf "$f"; done | grep -c '\.latent\.npy$' || true)
[ "$samples" -gt 0 ] || { echo "$me: no .latent.npy member in $DATA (bench/make_latents.py $DATA)" >&2; exit 2; }
bytes=$(cat "$@" | wc -c)
avail=$(awk '/^MemAvailable:/ { printf "%.0f", $2 * 1024 }' /proc/meminfo)
[ "$bytes" -lt "$((avail / 2))" ] ||
    echo "$me: warning: the shards ($bytes bytes) are over half the memory available ($avail): the page cache may not hold them" >&2

need_module() {
    "$PYTHON" -c 'import gpufeed' 2>/dev/null && return
    find_gpufeed
    PYTHONPATH=$(cd "$(dirname "$GPUFEED")/../.." && pwd)/python${PYTHONPATH:+:$PYTHONPATH}
    export PYTHONPATH
    "$PYTHON" -c 'import gpufeed' 2>/dev/null ||
        { echo "$me: no gpufeed module for $PYTHON (PYTHONPATH=$PYTHONPATH)" >&2; exit 2; }
}
need_module
[ "$CLI" = 0 ] || find_gpufeed

now() { date +%s.%N; }
# (a): the seconds EPOCHS passes of cat over the shards take: the shards
# listed EPOCHS times, cut into READERS runs of one cat each (a cat's start,
# about 10 ms on a busy small machine, is paid READERS times, not per shard)
cache_s() {
    per=$(( ($# * EPOCHS + READERS - 1) / READERS ))
    t0=$(now)
    e=1
    while [ "$e" -le "$EPOCHS" ]; do printf '%s\n' "$@"; e=$((e + 1)); done |
        xargs -P "$READERS" -n "$per" cat > /dev/null
    t1=$(now)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }'
}
gf() {
    "$PYTHON" "$here/gpufeed_latents.py" "$DATA" --threads "$THREADS" --batch-size "$BATCH" \
        --epochs "$1"
}
cli() {
    "$GPUFEED" bench --input-only --data "$pat" --fields latent.npy --threads "$THREADS" \
        --batch-size "$BATCH" --epochs "$1" --device cpu --json
}
first=$(basename "$1" .tar); last=$(eval "basename \"\${$#}\" .tar")
pat="$DATA/train-{${first#train-}..${last#train-}}.tar"
key() { "$PYTHON" -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b > 0) ? a / b : 0 }'; }

echo "data: $DATA ($# shards, $samples samples, $bytes bytes: $(div "$bytes" "$samples") a sample), $EPOCHS epochs a run"
echo "page cache: $READERS reader(s) (cat); gpufeed: $THREADS threads, batch $BATCH, fields latent.npy, device cpu"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
# Warm the page cache, then one untimed run of each.
cat "$@" > /dev/null
cache_s "$@" > /dev/null
gf 1 > /dev/null
[ "$CLI" = 0 ] || cli 1 > /dev/null

cs=""; gs=""; rs=""; ls=""; ks=""
i=1
while [ "$i" -le "$RUNS" ]; do
    s=$(cache_s "$@")
    c=$(div "$((samples * EPOCHS))" "$s")
    g=$(gf "$EPOCHS"); g=$(echo "$g" | key samples_per_s)
    r=$(awk -v a="$g" -v b="$c" 'BEGIN { printf "%.3f", (b > 0) ? a / b : 0 }')
    line="run $i: page cache $c samples/s ($(awk -v a="$((bytes * EPOCHS))" -v b="$s" 'BEGIN { printf "%.0f", a / b }') bytes/s), gpufeed $g samples/s, ratio $r"
    cs="$cs $c"; gs="$gs $g"; rs="$rs $r"
    if [ "$CLI" != 0 ]; then
        k=$(cli "$EPOCHS"); k=$(echo "$k" | key images_per_s)
        line="$line; CLI $k samples/s ($(ratio "$k" "$c"))"
        ks="$ks $k"; ls="$ls $(awk -v a="$k" -v b="$c" 'BEGIN { printf "%.3f", (b > 0) ? a / b : 0 }')"
    fi
    echo "$line"
    i=$((i + 1))
done
cm=$(echo "$cs" | median); gm=$(echo "$gs" | median)
per=$(awk -v a="$bytes" -v b="$samples" 'BEGIN { print a / b }')
echo "page cache  $cm samples/s, $(awk -v r="$cm" -v p="$per" 'BEGIN { printf "%.0f", r * p }') bytes/s (median of $RUNS)"
echo "gpufeed     $gm samples/s, $(awk -v r="$gm" -v p="$per" 'BEGIN { printf "%.0f", r * p }') bytes/s of shard (median of $RUNS)"
[ "$CLI" = 0 ] || echo "CLI         $(echo "$ks" | median) samples/s (median of $RUNS), $(echo "$ls" | median | xargs printf '%.2f') of the page cache's (median of the pairs)"
echo "ratio       $(ratio "$gm" "$cm") (the medians' ratio, gpufeed / page cache)"
echo "ratio       $(echo "$rs" | median | xargs printf '%.2f') (median of the pairs' ratios; target >= 0.8)"
echo "load        $(cut -d' ' -f1-3 /proc/loadavg) (after)"

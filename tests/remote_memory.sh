#!/usr/bin/env bash
# Streaming a remote set ten times larger than the shard buffers' budget
# keeps memory within it: the peak RSS of a run over nginx exceeds the
# same run's over the local shards by at most the budget and one shard
# (a shard is started while the buffers hold less than the budget), never
# by the set. Run under tests/remote/servers.sh --need http.
#   remote_memory.sh GPUFEED
set -euo pipefail
gpufeed=$1
cd "$GF_TEST_TMPDIR"
fail() { echo "remote_memory: FAIL: $*" >&2; exit 1; }

# 16 shards of about 2.5 MB (500x375 JPEGs), 40 MB in all.
"$gpufeed" make-dataset set --classes 4 --per-class 100 --shards 16 --seed 3 >/dev/null
pat="train-{000000..000015}.tar"
"$gpufeed" index "set/$pat" >/dev/null
cp set/*.tar set/*.idx "$GF_TEST_HTTP_ROOT/"
set_bytes=$(cat set/*.tar | wc -c)
shard_max=$(stat -c %s set/*.tar | sort -n | tail -1)
budget=$((3 << 20))
peak() {
    "$gpufeed" bench --input-only --data "$1" --order shards --threads 1 --image-size 32 \
        --batch-size 16 --epochs 2 --remote-buffer-bytes $budget --prefetch-shards 3 \
        --shard-window 1 --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_rss_bytes"])'
}
local_peak=$(peak "set/$pat")
remote_peak=$(peak "$GF_TEST_HTTP_URL/$pat")
extra=$((remote_peak - local_peak))
allowed=$((budget + shard_max + (2 << 20)))
echo "  set $((set_bytes >> 20)) MiB, budget $((budget >> 20)) MiB, largest shard $((shard_max >> 10)) KiB:" \
    "peak RSS local $((local_peak >> 20)) MiB, remote $((remote_peak >> 20)) MiB (+$((extra >> 10)) KiB, allowed $((allowed >> 10)) KiB)"
[ "$set_bytes" -ge $((10 * budget)) ] || fail "the set is not ten times the budget"
[ "$extra" -le "$allowed" ] || fail "remote reads held $extra bytes more than local ones (allowed $allowed)"
echo "remote_memory: ok"

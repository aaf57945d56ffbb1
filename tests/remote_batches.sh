#!/usr/bin/env bash
# Remote shards against real servers (run under tests/remote/servers.sh):
# the same batches, byte for byte, from local shards, nginx over HTTP and
# HTTPS, and Swift's S3 API, at 1 and 2 threads, across a seek into the
# middle of a shard and across an elastic resume (2 ranks' state on 3);
# faults injected by the proxy either survived with the same batches or
# reported naming the URL; no credential in any output.
#   remote_batches.sh GPUFEED REMOTE_BATCHES
set -euo pipefail
gpufeed=$1 rb=$2
work=$GF_TEST_TMPDIR/rb
mkdir -p "$work"
cd "$work"
fail() { echo "remote_batches: FAIL: $*" >&2; exit 1; }

"$gpufeed" make-dataset set --classes 3 --per-class 12 --size 80x60 --seed 7 --shards 4 >/dev/null
"$gpufeed" index "set/train-{000000..000003}.tar" >/dev/null
shards="train-{000000..000003}.tar"
cp set/*.tar set/*.idx "$GF_TEST_HTTP_ROOT/"
for f in set/*.tar set/*.idx; do "$GF_TEST_S3_PUT" "$f" "rb/$(basename "$f")"; done
s3=s3://$GF_TEST_S3_BUCKET/rb/$shards
export AWS_ENDPOINT_URL_S3=$GF_TEST_S3_ENDPOINT

# hash= ... of one run (run in $(...): its whole output is left in $work/last)
run() {
    "$rb" "$@" >"$work/last" 2>&1 || { cat "$work/last" >&2; fail "remote_batches $*"; }
    if grep -q "$AWS_SECRET_ACCESS_KEY" "$work/last"; then fail "the secret in the output of $*"; fi
    sed -n 's/^\(hash=[0-9a-f]*\) .*/\1/p' "$work/last"
}
same() { # what, want, got
    [ "$2" = "$3" ] || fail "$1: $3, want $2"
    echo "  $1: $3"
}

# Remote data reads in the shard order by default (order auto); local
# shards in the global order, so they are asked for the shard order here.
local1=$(RB_ORDER=shards run "set/$shards" 1 2)
same "local, 2 threads" "$local1" "$(RB_ORDER=shards run "set/$shards" 2 4)"
same "http, 1 thread" "$local1" "$(run "$GF_TEST_HTTP_URL/$shards" 1 2)"
same "http, 2 threads" "$local1" "$(run "$GF_TEST_HTTP_URL/$shards" 2 4)"
same "https (the test's CA), 2 threads" "$local1" \
    "$(RB_CA_FILE=$GF_TEST_CA_FILE run "$GF_TEST_HTTPS_URL/$shards" 2 4)"
same "s3, 1 thread" "$local1" "$(run "$s3" 1 2)"
same "s3, 2 threads" "$local1" "$(run "$s3" 2 4)"
seek_local=$(RB_ORDER=shards run "set/$shards" 1 2 1 7)
same "http, seek into a shard" "$seek_local" "$(run "$GF_TEST_HTTP_URL/$shards" 2 4 1 7)"
same "s3, seek into a shard" "$seek_local" "$(run "$s3" 2 4 1 7)"
# Elastic resume: a 2-rank state at epoch 0, position 7 (mid batch, mid
# shard) taken by 3 ranks, the shard order's rest and the next epoch.
for r in 0 1 2; do
    el_local=$(RB_ORDER=shards RB_SET="rank=$r world=3" RB_STATE=2 run "set/$shards" 1 2 0 7)
    grep -q "^note: resumed a 2-rank state on 3 ranks at epoch 0, sample 14 of 36" "$work/last" ||
        { cat "$work/last"; fail "elastic resume: no note"; }
    same "http, rank $r of 3 resuming 2 ranks' state" "$el_local" \
        "$(RB_SET="rank=$r world=3" RB_STATE=2 run "$GF_TEST_HTTP_URL/$shards" 2 4 0 7)"
done

# A mix of a local folder and remote shards (issue 41): the same batches
# as the same two sources local, in the shard order (order auto for a mix
# naming a remote source) and the global one, across a seek mid-epoch.
"$gpufeed" make-dataset folder --classes 2 --per-class 9 --size 64x48 --seed 3 >/dev/null
for order in shards global; do
    mix_local=$(RB_ORDER=$order run "mix:2=folder|1=set/$shards" 1 2)
    if [ $order = shards ]; then
        same "mix of a folder and http shards (order auto)" "$mix_local" \
            "$(run "mix:2=folder|1=$GF_TEST_HTTP_URL/$shards" 2 4)"
    fi
    same "mix of a folder and http shards, order $order" "$mix_local" \
        "$(RB_ORDER=$order run "mix:2=folder|1=$GF_TEST_HTTP_URL/$shards" 2 4)"
    same "mix of a folder and s3 shards, order $order" "$mix_local" \
        "$(RB_ORDER=$order run "mix:2=folder|1=$s3" 2 4)"
    mix_seek=$(RB_ORDER=$order run "mix:2=folder|1=set/$shards" 1 2 1 11)
    same "mix, http, seek mid-epoch, order $order" "$mix_seek" \
        "$(RB_ORDER=$order run "mix:2=folder|1=$GF_TEST_HTTP_URL/$shards" 2 4 1 11)"
done
# Elastic resume of a mix: a 2-rank state taken by 3 ranks, as local.
for r in 0 1 2; do
    el_mix=$(RB_ORDER=shards RB_SET="rank=$r world=3" RB_STATE=2 run "mix:2=folder|1=set/$shards" 1 2 0 7)
    grep -q "^note: resumed a 2-rank state on 3 ranks at epoch 0" "$work/last" ||
        { cat "$work/last"; fail "elastic resume of a mix: no note"; }
    same "mix with http shards, rank $r of 3 resuming 2 ranks' state" "$el_mix" \
        "$(RB_SET="rank=$r world=3" RB_STATE=2 run "mix:2=folder|1=$GF_TEST_HTTP_URL/$shards" 2 4 0 7)"
done
# verify walks a mix with a remote source whole: every sample once.
"$gpufeed" verify --data folder --data "$GF_TEST_HTTP_URL/$shards" --weights 5,1 >"$work/v" 2>&1 ||
    { cat "$work/v"; fail "verify of a mix with http shards"; }
grep -q "54 samples, 0 bad" "$work/v" || { cat "$work/v"; fail "verify of a mix: not 54 samples"; }
echo "  verify, a folder and http shards: 54 samples, 0 bad"
# A mix's samples read one at a time (train's synchronous loop, through
# gf_index_read): the folder's from disk, the shards' over http.
"$gpufeed" train --train-data folder --train-data "$GF_TEST_HTTP_URL/$shards" --mix-labels source \
    --val-data "set/$shards" --loader sync --epochs 1 --image-size 32 --model-width 2 \
    --batch-size 8 >"$work/t" 2>&1 || { cat "$work/t"; fail "train's sync loop over a mix with http shards"; }
echo "  train's sync loop, a folder and http shards: read one at a time"
# Two remote sources, http and s3, beside each other: as both local.
same "mix of http and s3 shards" "$(RB_ORDER=shards run "mix:1=set/$shards|3=set/$shards" 1 2)" \
    "$(run "mix:1=$GF_TEST_HTTP_URL/$shards|3=$s3" 2 4)"

# The global order: a ranged GET a sample, the same batches as local.
global_local=$(RB_ORDER=global run "set/$shards" 1 2)
same "global order, http" "$global_local" "$(RB_ORDER=global run "$GF_TEST_HTTP_URL/$shards" 2 4)"
same "global order, s3" "$global_local" "$(RB_ORDER=global run "$s3" 2 4)"
grep -q "requests=7[0-9] " "$work/last" || { cat "$work/last"; fail "global order: not a request a sample"; }

# https without the test's CA: refused, naming the URL.
if "$rb" "$GF_TEST_HTTPS_URL/$shards" 1 2 >"$work/tls" 2>&1; then
    fail "https verified a certificate the system does not trust"
fi
grep -q "$GF_TEST_HTTPS_URL" "$work/tls" || { cat "$work/tls"; fail "TLS failure without the URL"; }
echo "  https without the CA: refused ($(head -c 160 "$work/tls"))"

# Faults, through the proxy: survived with the same batches.
ctl=$GF_TEST_PROXY_CONTROL
rule() { curl -sf -X POST "$ctl/rule?$1" >/dev/null; }
fired() { curl -sf "$ctl/fired?id=$1"; }
proxy=$GF_TEST_PROXY_HTTP_URL/$shards
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000001.tar&fault=reset_after&bytes=20000"
rule "match=train-000002.tar&fault=status&code=503&times=2"
out=$(RB_STALL_S=1 run "$proxy" 2 4)
same "http through resets and a 503 burst" "$local1" "$out"
grep -q "retries=[3-9]" "$work/last" || { cat "$work/last"; fail "retries not counted"; }
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000003.tar&fault=stall_after&bytes=10000&seconds=4"
same "http through a stall (remote_stall_s 1)" "$local1" "$(RB_STALL_S=1 run "$proxy" 2 4)"
grep -q "retries=[1-9]" "$work/last" || { cat "$work/last"; fail "the stall was not retried"; }

# An object replaced during the run (global order: many requests a
# shard): the changed one is an error naming the URL, the rest read.
# The first request sees another ETag than every later one.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000001.tar&fault=change_object&times=1"
RB_ORDER=global "$rb" "$proxy" 1 1 >"$work/changed" 2>&1 || true
grep -q "error: train-000001.tar:.*$GF_TEST_PROXY_HTTP_URL/train-000001.tar: the object changed" "$work/changed" ||
    { cat "$work/changed"; fail "a changed object not reported with the URL"; }
echo "  a changed object: $(grep -m1 'object changed' "$work/changed")"

# Issue 37, hostile answers: each survived with the same batches or
# refused naming the URL, never another member's bytes under a label.
# A 206 naming other bytes than asked (every time): refused.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000001.tar&fault=range_shift&bytes=512&times=0"
RB_ORDER=global RB_SET="remote_retries=1" timeout 60 "$rb" "$proxy" 1 1 >"$work/shifted" 2>&1 || true
grep -q "error: train-000001.tar:.*$GF_TEST_PROXY_HTTP_URL/train-000001.tar: the server answered bytes" "$work/shifted" ||
    { cat "$work/shifted"; fail "a 206 for another range taken as the range asked for"; }
echo "  a 206 for another range: $(grep -m1 'answered bytes' "$work/shifted" | head -c 200)"
# A resume answered from byte 0, once: asked again, the same batches.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000002.tar&fault=stall_after&bytes=20000&seconds=3&then=close"
rule "match=train-000002.tar&fault=range_from_zero&skip=1"
same "a resume answered from byte 0" "$local1" "$(RB_STALL_S=1 run "$proxy" 2 4)"
# A resume answered by another object without ETag or Last-Modified:
# started over, the same batches.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000003.tar&fault=stall_after&bytes=20000&seconds=3&then=close"
rule "match=train-000003.tar&fault=strip_validators&skip=1"
same "a resume without the object's ETag" "$local1" "$(RB_STALL_S=1 run "$proxy" 2 4)"
# A body trickled a byte a second, a head that never ends: stalls under
# remote_stall_s=2, reported within the retries, not waited on for ever.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000001.tar&fault=trickle&bytes=1000&rate=1&times=0"
rule "match=train-000002.tar&fault=endless_head&times=0"
t0=$(date +%s)
RB_STALL_S=2 RB_SET="remote_retries=1" timeout 60 "$rb" "$proxy" 2 4 >"$work/slow" 2>&1 || true
took=$(($(date +%s) - t0))
grep -q "error: train-000001.tar:.*train-000001.tar: under 1024 bytes in 2 s" "$work/slow" ||
    { cat "$work/slow"; fail "a trickled body not a stall (${took} s)"; }
grep -q "error: train-000002.tar:.*train-000002.tar: under 1024 bytes in 2 s" "$work/slow" ||
    { cat "$work/slow"; fail "a head that never ends not a stall (${took} s)"; }
[ "$took" -le 30 ] || fail "trickle and endless head: ${took} s"
echo "  a trickle and an endless head: stalls, reported in ${took} s"
# The open's sidecar fetches obey the same settings.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000000.idx&fault=endless_head&times=0"
t0=$(date +%s)
RB_STALL_S=2 RB_SET="remote_retries=1" timeout 60 "$rb" "$proxy" 2 4 >"$work/sidecar" 2>&1 &&
    fail "an open whose sidecar never answers succeeded"
took=$(($(date +%s) - t0))
grep -q "train-000000.idx: under 1024 bytes in 2 s after 0 bytes (2 tries)" "$work/sidecar" ||
    { cat "$work/sidecar"; fail "a silent sidecar at open (${took} s)"; }
[ "$took" -le 30 ] || fail "a silent sidecar at open: ${took} s"
echo "  a silent sidecar at open: failed in ${took} s: $(grep -m1 'idx' "$work/sidecar" | head -c 160)"
# The overall deadline (remote_deadline_s): a body trickled at 2 KiB/s
# beats the stall rule (1 KiB in remote_stall_s=2) but would take many
# times remote_deadline_s=3: the request fails past the deadline, naming
# the URL and the deadline, in a bounded time (one shard, twice: an epoch
# each), never taken for a stall.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000001.tar&fault=trickle&bytes=0&rate=2048&times=0"
t0=$(date +%s)
RB_STALL_S=2 RB_SET="remote_deadline_s=3" timeout 60 "$rb" "$proxy" 2 4 >"$work/deadline" 2>&1 || true
took=$(($(date +%s) - t0))
grep -q "error: train-000001.tar:.*$GF_TEST_PROXY_HTTP_URL/train-000001.tar: the deadline passed: not done within 3 s (remote_deadline_s), 1 tries, after [1-9]" "$work/deadline" ||
    { cat "$work/deadline"; fail "a trickle past the deadline (${took} s)"; }
if grep -q "under 1024 bytes" "$work/deadline"; then cat "$work/deadline"; fail "a 2 KiB/s trickle taken for a stall"; fi
[ "$took" -lt 15 ] || { cat "$work/deadline"; fail "a trickle past the deadline: ${took} s"; }
echo "  a trickle past remote_deadline_s=3: ${took} s, $(grep -m1 -o 'the deadline passed.*' "$work/deadline")"
# And at open: a sidecar trickled so (400 samples: a ~20 KiB sidecar,
# ~10 s at 2 KiB/s) fails the open, naming the sidecar and the deadline.
"$gpufeed" make-dataset many --classes 2 --per-class 200 --size 16x16 --seed 5 --shards 1 >/dev/null
"$gpufeed" index many/train-000000.tar >/dev/null
[ "$(stat -c %s many/train-000000.idx)" -gt 12288 ] || fail "many: a sidecar of $(stat -c %s many/train-000000.idx) bytes"
mkdir -p "$GF_TEST_HTTP_ROOT/many"
cp many/train-000000.tar many/train-000000.idx "$GF_TEST_HTTP_ROOT/many/"
many=$GF_TEST_PROXY_HTTP_URL/many/train-000000.tar
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=many/train-000000.idx&fault=trickle&bytes=0&rate=2048&times=0"
t0=$(date +%s)
RB_STALL_S=2 RB_SET="remote_deadline_s=3" timeout 60 "$rb" "$many" 1 2 >"$work/deadline.open" 2>&1 &&
    { cat "$work/deadline.open"; fail "an open whose sidecar trickles past the deadline succeeded"; }
took=$(($(date +%s) - t0))
grep -q "^open: .*$GF_TEST_PROXY_HTTP_URL/many/train-000000.idx: the deadline passed: not done within 3 s (remote_deadline_s), 1 tries" "$work/deadline.open" ||
    { cat "$work/deadline.open"; fail "a sidecar trickled past the deadline at open (${took} s)"; }
[ "$took" -lt 15 ] || fail "a sidecar trickled past the deadline at open: ${took} s"
echo "  a sidecar trickled past remote_deadline_s=3 at open: failed in ${took} s: $(grep -m1 -o 'many/train-000000.idx: .*' "$work/deadline.open")"
# And `gpufeed index URL`: its fetches obey --remote-stall-s and
# --remote-deadline-s (the shard, ~1 MB, trickled).
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=many/train-000000.tar&fault=trickle&bytes=0&rate=2048&times=0"
t0=$(date +%s)
timeout 60 "$gpufeed" index "$many" --out slowidx --remote-stall-s 2 --remote-deadline-s 3 >"$work/deadline.index" 2>&1 &&
    { cat "$work/deadline.index"; fail "gpufeed index of a shard trickled past the deadline succeeded"; }
took=$(($(date +%s) - t0))
grep -q "$many: the deadline passed: not done within 3 s (remote_deadline_s), 1 tries" "$work/deadline.index" ||
    { cat "$work/deadline.index"; fail "gpufeed index past the deadline (${took} s)"; }
[ "$took" -lt 15 ] && [ ! -e slowidx/train-000000.idx ] || fail "gpufeed index past the deadline: ${took} s, or a sidecar written"
echo "  gpufeed index of a trickled shard, --remote-deadline-s 3: failed in ${took} s: $(grep -m1 -o 'many/train-000000.tar: .*' "$work/deadline.index")"
# `gpufeed index URL` of a shard that claims 1 TB: refused at once.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000000.tar&fault=claim_size&bytes=1099511627776&times=0"
timeout 60 "$gpufeed" index "$GF_TEST_PROXY_HTTP_URL/train-000000.tar" --out claim >"$work/claim" 2>&1 &&
    fail "a shard claiming 1 TB indexed"
grep -q "train-000000.tar: the server says the object is 1099511627776 bytes" "$work/claim" ||
    { cat "$work/claim"; fail "a shard claiming 1 TB"; }
n=$(curl -sf "$ctl/count?path=/train-000000.tar")
[ "$n" -le 1 ] || fail "a shard claiming 1 TB: $n requests"
echo "  a shard claiming 1 TB: refused after $n request: $(head -c 160 "$work/claim")"

# A shard that is gone: its samples reported naming the URL, the rest read.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000002.tar&fault=status&code=404&times=0"
"$rb" "$proxy" 2 4 >"$work/gone" 2>&1 || true
grep -q "error: train-000002.tar:.*$GF_TEST_PROXY_HTTP_URL/train-000002.tar: HTTP 404" "$work/gone" ||
    { cat "$work/gone"; fail "a 404 shard's samples not reported with the URL"; }
echo "  a 404 shard: $(grep -c '^error:' "$work/gone") samples reported, e.g. $(grep -m1 '^error:' "$work/gone")"
# A shard that failed once (an outage that passed) is tried again by the
# next epoch: its 9 members lost once at most, not in both epochs.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=train-000002.tar&fault=status&code=404&times=1"
"$rb" "$proxy" 2 4 >"$work/once" 2>&1 || true
lost=$(grep -c '^error:' "$work/once" || true)
[ "$lost" -ge 1 ] && [ "$lost" -le 9 ] ||
    { cat "$work/once"; fail "a shard that failed once: $lost samples lost over 2 epochs"; }
echo "  a 404 once: $lost samples lost, the next epoch read the shard"
# A shard larger than max_file_bytes (a sample's bound, not a shard's):
# read whole all the same in the shard order.
same "http, shards over max_file_bytes" "$local1" \
    "$(RB_SET="max_file_bytes=40000" run "$GF_TEST_HTTP_URL/$shards" 2 4)"

# A seek while every shard is still being fetched (each GET 400 ms late):
# the shards dropped are fetched again, once each, not once a batch.
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=.tar&fault=latency&ms=400&times=0"
same "seek while the shards are fetched" "$seek_local" "$(RB_PAUSE_MS=100 run "$proxy" 2 4 1 7)"
req=$(sed -n 's/.* requests=\([0-9]*\) .*/\1/p' "$work/last")
[ "$req" -le 8 ] || { cat "$work/last"; fail "seek while fetching: $req requests for 4 shards"; }
echo "  seek while fetching: $req requests"

# The global order within a small read budget: samples over its per-buffer
# share, many requests at once; the ranged GETs wait for the budget (they
# used to bypass it, and its count then wrapped below zero).
"$gpufeed" make-dataset big --classes 2 --per-class 8 --size 900x700 --seed 3 --shards 2 >/dev/null
"$gpufeed" index "big/train-{000000..000001}.tar" >/dev/null
mkdir -p "$GF_TEST_HTTP_ROOT/big" && cp big/*.tar big/*.idx "$GF_TEST_HTTP_ROOT/big/"
small="read_budget_bytes=1048576 queue_depth=32"
big_local=$(RB_ORDER=global RB_SET="$small" run "big/train-{000000..000001}.tar" 2 4)
same "global order in a 1 MiB read budget" "$big_local" \
    "$(RB_ORDER=global RB_SET="$small" run "$GF_TEST_HTTP_URL/big/train-{000000..000001}.tar" 2 4)"
peak=$(sed -n 's/.* read_peak=\([0-9]*\).*/\1/p' "$work/last")
[ "${#peak}" -lt 10 ] && [ "$peak" -le $((4 << 20)) ] || { cat "$work/last"; fail "read budget: a peak of $peak bytes"; }
echo "  read budget 1 MiB: peak $peak bytes"

# gf_close, and gf_seek, while every request waits out a retry's backoff
# (503 for ever), and while a transfer is stalled mid-body: nothing is
# left behind (the sanitizer builds check the handles and buffers).
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=.tar&fault=status&code=503&times=0"
out=$(RB_PAUSE_MS=300 RB_BATCHES=0 "$rb" "$proxy" 2 4 2>&1) || { echo "$out"; fail "close in a backoff"; }
out=$(RB_PAUSE_MS=300 RB_BATCHES=0 "$rb" "$proxy" 2 4 1 7 2>&1) || { echo "$out"; fail "seek in a backoff"; }
curl -sf -X POST "$ctl/clear" >/dev/null
rule "match=.tar&fault=stall_after&bytes=10000&seconds=5&times=0"
out=$(RB_PAUSE_MS=300 RB_BATCHES=1 RB_STALL_S=1 "$rb" "$proxy" 2 4 2>&1) ||
    { echo "$out"; fail "close in a stall"; }
echo "  close and seek in a backoff, close in a stall: clean"
# Two shards of one size and the same keys (000000..000007), other pixels
# and labels, their sidecars swapped on the server (issue 37): each
# sidecar is true to the other's layout, so offsets and member headers
# pass; the shard order fetches a shard whole and checks it against its
# sidecar's shard_crc32c= before any sample of it is decoded. Fail: the
# run stops naming the shard and the sidecar; skip: their samples are
# errors naming both, and only the third shard's 8 a epoch are delivered;
# a copy in the shard cache is checked as well (the CRC its trailer held).
python3 - <<'PY'
import io, os, tarfile
os.makedirs("tie", exist_ok=True)
for name, base in (("t-000000", 0), ("t-000001", 1), ("t-000002", 2)):
    with tarfile.open(f"tie/{name}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
        for i in range(8):
            label = (i + 3 * base) % 8
            ppm = b"P6\n8 8\n255\n" + bytes([(40 * base + 25 * i) % 256]) * 192
            for ext, data in (("ppm", ppm), ("cls", str(label).encode())):
                m = tarfile.TarInfo(f"{i:06d}.{ext}")
                m.size, m.mtime = len(data), 1700000000
                t.addfile(m, io.BytesIO(data))
PY
"$gpufeed" index "tie/t-{000000..000002}.tar" >/dev/null
[ "$(stat -c %s tie/t-000000.tar)" = "$(stat -c %s tie/t-000001.tar)" ] || fail "tie: shards of two sizes"
mkdir -p "$GF_TEST_HTTP_ROOT/tie"
cp tie/*.tar tie/*.idx "$GF_TEST_HTTP_ROOT/tie/"
tie="$GF_TEST_HTTP_URL/tie/t-{000000..000002}.tar"
# first with the right sidecars, into a cache: a hit is checked as well
RB_CACHE_DIR=$work/tiec "$rb" "$tie" 2 4 >"$work/tie.ok" 2>&1 ||
    { cat "$work/tie.ok"; fail "tie: the right sidecars"; }
grep -q "samples=48 errors=0 .* cache_misses=3" "$work/tie.ok" || { cat "$work/tie.ok"; fail "tie: not cached"; }
cp tie/t-000001.idx "$GF_TEST_HTTP_ROOT/tie/t-000000.idx"
cp tie/t-000000.idx "$GF_TEST_HTTP_ROOT/tie/t-000001.idx"
if RB_SET="on_shard_error=fail" "$rb" "$tie" 2 4 >"$work/tie.fail" 2>&1; then
    cat "$work/tie.fail"; fail "swapped sidecars: the run succeeded (wrong labels delivered)"
fi
grep -Eq "$GF_TEST_HTTP_URL/tie/t-00000[01]\.tar: CRC32C [0-9a-f]{8}, but its index sidecar $GF_TEST_HTTP_URL/tie/t-00000[01]\.idx records shard_crc32c=[0-9a-f]{8}: written for another shard" "$work/tie.fail" ||
    { cat "$work/tie.fail"; fail "swapped sidecars, on_shard_error=fail: not named"; }
echo "  swapped sidecars, fail: $(grep -m1 -o 'tie/t-00000[01]\.tar: CRC32C.*' "$work/tie.fail" | head -c 160)"
RB_SET="on_shard_error=skip" "$rb" "$tie" 2 4 >"$work/tie.skip" 2>&1 ||
    { cat "$work/tie.skip"; fail "swapped sidecars, on_shard_error=skip: the run failed"; }
grep -q "^hash=[0-9a-f]* batches=[0-9]* samples=16 errors=32 " "$work/tie.skip" ||
    { cat "$work/tie.skip"; fail "swapped sidecars, skip: not c's 16 samples and 32 errors"; }
for k in t-000000 t-000001; do
    grep -q "tie/$k.tar: CRC32C .* sidecar $GF_TEST_HTTP_URL/tie/$k.idx records" "$work/tie.skip" ||
        { cat "$work/tie.skip"; fail "swapped sidecars, skip: $k not named"; }
done
echo "  swapped sidecars, skip: $(grep -o 'samples=16 errors=32' "$work/tie.skip"), both named"
if RB_CACHE_DIR=$work/tiec RB_SET="on_shard_error=fail" "$rb" "$tie" 2 4 >"$work/tie.hit" 2>&1; then
    cat "$work/tie.hit"; fail "swapped sidecars, cached shards: the run succeeded (wrong labels delivered)"
fi
grep -Eq "tie/t-00000[01]\.tar: CRC32C [0-9a-f]{8}, but its index sidecar .*/tie/t-00000[01]\.idx records" "$work/tie.hit" ||
    { cat "$work/tie.hit"; fail "swapped sidecars, cached shards: not named"; }
echo "  swapped sidecars, shards in the cache: refused, named"
# The global order reads each sample by a ranged GET, never the shard
# whole: each image's member_crc32c= catches the swap there (skip: the two
# shards' 16 samples are errors naming shard, member and both CRCs; fail:
# the run stops so).
RB_ORDER=global "$rb" "$tie" 2 4 >"$work/tie.global" 2>&1 ||
    { cat "$work/tie.global"; fail "swapped sidecars, global order, skip: the run failed"; }
grep -q "^hash=[0-9a-f]* batches=[0-9]* samples=16 errors=32 " "$work/tie.global" ||
    { cat "$work/tie.global"; fail "swapped sidecars, global order: not c's 16 samples and 32 errors"; }
for k in t-000000 t-000001; do
    grep -Eq "tie/$k\.tar: member '00000[0-7]\.ppm': its index sidecar records member_crc32c [0-9a-f]{8}, the bytes read give [0-9a-f]{8}: the sidecar is another shard's" "$work/tie.global" ||
        { cat "$work/tie.global"; fail "swapped sidecars, global order: $k not named"; }
done
if RB_ORDER=global RB_ON_ERROR=fail "$rb" "$tie" 2 4 >"$work/tie.gfail" 2>&1; then
    cat "$work/tie.gfail"; fail "swapped sidecars, global order, fail: the run succeeded (wrong labels delivered)"
fi
grep -Eq "tie/t-00000[01]\.tar: member '00000[0-7]\.ppm': its index sidecar records member_crc32c [0-9a-f]{8}, the bytes read give" "$work/tie.gfail" ||
    { cat "$work/tie.gfail"; fail "swapped sidecars, global order, fail: not named"; }
echo "  swapped sidecars, global order: $(grep -o 'samples=16 errors=32' "$work/tie.global"), refused under fail"
# A remote sidecar that records neither shard_crc32c= nor member_crc32c=
# (an older gpufeed's, or hand-written) ties nothing to its shard: the
# open refuses it, naming its URL, why, and the command that writes one;
# so the swap above with such sidecars is refused in either order, never
# served with every label wrong. One without either CRC alone is refused
# as well (the shard order checks the one, the global order the other).
mkdir -p "$GF_TEST_HTTP_ROOT/untied"
cp tie/*.tar "$GF_TEST_HTTP_ROOT/untied/"
strip() { sed "1s/ $1=[0-9a-f,]*//" "$2"; }
for k in t-000000 t-000001 t-000002; do
    strip member_crc32c "tie/$k.idx" | strip shard_crc32c /dev/stdin >"$GF_TEST_HTTP_ROOT/untied/$k.idx"
done
head -n 1 "$GF_TEST_HTTP_ROOT/untied/t-000000.idx" | grep -q '^v1\.2 8 shard_bytes=[0-9]* labels=[0-9,]*$' ||
    fail "untied: $(head -n 1 "$GF_TEST_HTTP_ROOT/untied/t-000000.idx")"
untied="$GF_TEST_HTTP_URL/untied/t-{000000..000002}.tar"
refused() { # WHAT OUT SIDECAR LACKS: the open refused, naming the sidecar, why and the fix
    grep -q "^open: .*$3: records $4 (an older gpufeed's, or hand-written): nothing ties it to its shard, so beside another shard it could label every sample wrong; write one with .gpufeed index ${3%.idx}.tar --out DIR. and upload it beside the shard" "$2" ||
        { cat "$2"; fail "$1: not refused naming $3"; }
    if grep -q '^hash=' "$2"; then cat "$2"; fail "$1: batches delivered"; fi
}
"$rb" "$untied" 2 4 >"$work/untied" 2>&1 && { cat "$work/untied"; fail "untied sidecars: opened"; }
refused "untied sidecars" "$work/untied" "$GF_TEST_HTTP_URL/untied/t-000000.idx" \
    "neither shard_crc32c= nor member_crc32c="
echo "  untied sidecars, refused at open: $(grep -m1 -o 'untied/t-000000.idx: records.*' "$work/untied" | head -c 240)"
cp "$GF_TEST_HTTP_ROOT/untied/t-000000.idx" "$work/untied0.idx"
cp "$GF_TEST_HTTP_ROOT/untied/t-000001.idx" "$GF_TEST_HTTP_ROOT/untied/t-000000.idx"
cp "$work/untied0.idx" "$GF_TEST_HTTP_ROOT/untied/t-000001.idx"
for order in shards global; do
    RB_ORDER=$order "$rb" "$untied" 2 4 >"$work/untied.$order" 2>&1 &&
        { cat "$work/untied.$order"; fail "untied sidecars swapped, order $order: opened"; }
    refused "untied sidecars swapped, order $order" "$work/untied.$order" \
        "$GF_TEST_HTTP_URL/untied/t-000000.idx" "neither shard_crc32c= nor member_crc32c="
done
echo "  untied sidecars swapped: refused at open, order shards and global"
strip member_crc32c tie/t-000000.idx >"$GF_TEST_HTTP_ROOT/untied/t-000000.idx"
"$rb" "$untied" 2 4 >"$work/untied.m" 2>&1 && { cat "$work/untied.m"; fail "no member_crc32c=: opened"; }
refused "no member_crc32c=" "$work/untied.m" "$GF_TEST_HTTP_URL/untied/t-000000.idx" "no member_crc32c="
strip shard_crc32c tie/t-000000.idx >"$GF_TEST_HTTP_ROOT/untied/t-000000.idx"
"$rb" "$untied" 2 4 >"$work/untied.s" 2>&1 && { cat "$work/untied.s"; fail "no shard_crc32c=: opened"; }
refused "no shard_crc32c=" "$work/untied.s" "$GF_TEST_HTTP_URL/untied/t-000000.idx" "no shard_crc32c="
echo "  a sidecar without member_crc32c=, or without shard_crc32c=: refused at open"
echo "remote_batches: ok"

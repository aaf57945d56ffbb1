#!/usr/bin/env bash
# The CLI and Python faces on remote shards (run under tests/remote/servers.sh
# --need http,https,proxy): bench's verdict names the network when every
# request is 300 ms late and not when none is; verify reads every shard in
# one run and lists a shard answering 404 by its URL; train takes URL
# patterns; Python reads https with ca_file= and reports the remote stats;
# settings --json lists the remote settings.
#   remote_faces.sh GPUFEED PYTHONPATH_DIR
set -euo pipefail
g=$1 pydir=$2
work=$GF_TEST_TMPDIR/faces
mkdir -p "$work"
cd "$work"
fail() { echo "remote_faces: FAIL: $*" >&2; exit 1; }
# A key's value in --json output (a string whole, commas and all).
jget() {
    printf '%s\n' "$2" | grep -o "\"$1\": *\(\"[^\"]*\"\|[^,}]*\)" | tail -n 1 | sed 's/^[^:]*: *//; s/"//g'
}

"$g" make-dataset set --classes 2 --per-class 48 --size 160x120 --seed 3 --shards 4 >/dev/null
"$g" index "set/train-{000000..000003}.tar" >/dev/null
cp set/*.tar set/*.idx "$GF_TEST_HTTP_ROOT/"
pat='train-{000000..000003}.tar'
ctl=$GF_TEST_PROXY_CONTROL
curl -sf -X POST "$ctl/clear" >/dev/null

# bench: one shard held (--shard-window 1 --prefetch-shards 1), so each
# fetch is waited for.
# 80 ms of compute a batch of 8 is several times the input through the
# proxy without latency (~20 ms here), and a fraction of it with 300 ms a
# request: compute-bound without, input-bound by the network with.
set -- --data "$GF_TEST_PROXY_HTTP_URL/$pat" --device cpu --image-size 32 --threads 1 \
    --batch-size 8 --epochs 2 --compute-ms 80 --shard-window 1 --prefetch-shards 1
json=$("$g" bench "$@" --json) || fail "bench: $json"
for k in remote_requests remote_retries remote_bytes remote_wait_s remote_wait_fraction input_cause; do
    printf '%s' "$json" | grep -q "\"$k\":" || fail "bench --json lacks $k: $json"
done
[ "$(jget remote_requests "$json")" -gt 0 ] || fail "no remote request counted: $json"
[ "$(jget input_cause "$json")" != network ] || fail "no latency, yet the network verdict: $json"
echo "  bench, no latency: $(jget verdict "$json") (cause $(jget input_cause "$json"))," \
     "remote wait $(jget remote_wait_fraction "$json") of the run"
curl -sf -X POST "$ctl/rule?match=&fault=latency&ms=300&times=0" >/dev/null
# 20 ms of compute: the delay, not a near tie, decides the verdict.
set -- --data "$GF_TEST_PROXY_HTTP_URL/$pat" --device cpu --image-size 32 --threads 1 \
    --batch-size 8 --epochs 2 --compute-ms 20 --shard-window 1 --prefetch-shards 1
json=$("$g" bench "$@" --json) || fail "bench with latency: $json"
[ "$(jget verdict "$json")" = input-bound ] && [ "$(jget input_cause "$json")" = network ] ||
    fail "300 ms a request must be input-bound by the network: $json"
case $(jget recommendation "$json") in
*--prefetch-shards*--remote-connections*) ;;
*) fail "the network's advice: $(jget recommendation "$json")" ;;
esac
# Shards fetched again each epoch: the cache is advised; decode threads not.
case $(jget recommendation "$json") in *--cache-dir*) ;; *) fail "advice without --cache-dir: $json" ;; esac
case $(jget recommendation "$json") in *--threads*) fail "advice: $json" ;; esac
echo "  bench, 300 ms a request: $(jget recommendation "$json")"
out=$("$g" bench "$@") || fail "bench (human): $out"
printf '%s\n' "$out" | grep -q '^  remote .* requests .* retries, .* MB fetched; the decoders waited for remote shards' ||
    fail "the human output lacks the remote line: $out"
printf '%s\n' "$out" | grep -q 'recommendation: input-bound by .*: waiting for remote shards' ||
    fail "the human verdict does not name the network: $out"
curl -sf -X POST "$ctl/clear" >/dev/null

# verify: every shard and member in one run; a 404 shard's members BAD
# naming its URL, exit 1.
out=$("$g" verify --data "$GF_TEST_HTTP_URL/$pat") || fail "verify over http: $out"
printf '%s\n' "$out" | grep -q '^96 samples, 0 bad' || fail "verify over http: $out"
printf '%s\n' "$out" | grep -q '^shards: 4 good' || fail "verify over http: $out"
curl -sf -X POST "$ctl/rule?match=train-000002.tar&fault=status&code=404&times=0" >/dev/null
rc=0; out=$("$g" verify --data "$GF_TEST_PROXY_HTTP_URL/$pat") || rc=$?
[ "$rc" -eq 1 ] || fail "verify with a 404 shard: exit $rc: $out"
[ "$(printf '%s\n' "$out" | grep -c "^BAD $GF_TEST_PROXY_HTTP_URL/train-000002.tar:.*: $GF_TEST_PROXY_HTTP_URL/train-000002.tar: HTTP 404")" -eq 24 ] ||
    fail "the 404 shard's 24 members not each listed with the URL: $out"
printf '%s\n' "$out" | grep -q '^96 samples, 24 bad' || fail "verify with a 404 shard: $out"
printf '%s\n' "$out" | grep -q "^UNREAD $GF_TEST_PROXY_HTTP_URL/train-000002.tar: HTTP 404 .* (24 members)\$" ||
    fail "the 404 shard not named once as UNREAD: $out"
printf '%s\n' "$out" | grep -q '^shards: 3 good, 1 unread, 0 damaged' || fail "the shards line: $out"
json=$("$g" verify --json --data "$GF_TEST_PROXY_HTTP_URL/$pat") && fail "verify --json: exit 0"
printf '%s' "$json" | grep -q "\"unread_shards\": \[{\"path\": \"$GF_TEST_PROXY_HTTP_URL/train-000002.tar\", \"reason\": \"HTTP 404[^\"]*\", \"members\": 24}\]" ||
    fail "verify --json's unread_shards: $json"
echo "  verify, a 404 shard: $(printf '%s\n' "$out" | grep -m1 '^UNREAD')"
curl -sf -X POST "$ctl/clear" >/dev/null

# train: the demo on URL patterns (--data is an ImageFolder root).
out=$("$g" train --train-data "$GF_TEST_HTTP_URL/$pat" --val-data "$GF_TEST_HTTPS_URL/$pat" \
      --ca-file "$GF_TEST_CA_FILE" --epochs 1 --image-size 32 --batch-size 16 --json) ||
    fail "train on URLs: $out"
[ "$(jget train_samples "$out")" = 96 ] || fail "train on URLs: $out"
[ "$(jget remote_requests "$out")" -gt 0 ] || fail "train's gpufeed row lacks the remote requests: $out"
echo "  train: ok (96 train samples, val over https, $(jget remote_requests "$out") requests)"

# --cache-dir: a second bench reads every shard from the cache.
cdir=$GF_TEST_TMPDIR/faces-cache
for i in 1 2; do
    out=$("$g" bench --input-only --data "$GF_TEST_HTTP_URL/$pat" --cache-dir "$cdir" --epochs 1 \
          --image-size 32 --batch-size 16 --json) || fail "bench --cache-dir: $out"
done
[ "$(jget cache_misses "$out")" = 0 ] && [ "$(jget cache_hits "$out")" -ge 4 ] ||
    fail "bench --cache-dir, a second run: $out"
echo "  bench --cache-dir: a second run, $(jget cache_hits "$out") shards from the cache"

# settings --json: the remote rows.
out=$("$g" settings --json)
for k in remote_connections prefetch_shards remote_buffer_bytes remote_stall_s remote_retries remote_deadline_s cache_bytes; do
    printf '%s' "$out" | grep -q "\"$k\"" || fail "settings --json lacks $k"
done

# Python: https with ca_file=, the remote stats.
[ -n "$pydir" ] || { echo "  python: not built, left out"; echo "remote_faces: ok"; exit 0; }
PYTHONPATH=$pydir /usr/bin/python3 - "$GF_TEST_HTTPS_URL/$pat" "$GF_TEST_CA_FILE" \
    "$GF_TEST_TMPDIR/py-cache" <<'PY' || fail "python"
import sys, gpufeed
url, ca = sys.argv[1], sys.argv[2]
l = gpufeed.Loader(data=url, ca_file=ca, batch_size=8, height=32, width=32, device="cpu", epochs=1)
for _ in l:
    pass
st = l.stats()
assert st["samples"] == 96, st
assert st["remote_requests"] > 0 and st["remote_bytes"] > 0, st
assert "remote_wait_s" in st and "remote_retries" in st, st
try:
    for _ in gpufeed.Loader(data=url, batch_size=8, height=32, width=32, device="cpu", epochs=1):
        pass
    raise SystemExit("https without the CA was trusted")
except gpufeed.Error as e:
    assert url.split("/train-")[0] in str(e), e
print("  python: https with ca_file=, %d remote requests" % st["remote_requests"])
for run in (1, 2):
    # Closed before the next opens: its cache writer may still be writing
    # the last shards until then, and the second run would miss them.
    with gpufeed.Loader(data=url, ca_file=ca, cache_dir=sys.argv[3], batch_size=8, height=32,
                        width=32, device="cpu", epochs=1) as l:
        for _ in l:
            pass
        st = l.stats()
assert st["cache_hits"] == 4 and st["cache_misses"] == 0 and st["cache_warning"] == "", st
print("  python: cache_dir=, a second run: %d shards from the cache" % st["cache_hits"])
PY
echo "remote_faces: ok"

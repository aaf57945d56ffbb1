#!/bin/sh
# The remote fixtures themselves, with the curl CLI alone (meson test
# remote_fixtures: servers.sh -- this): nginx serves whole files and ranges
# over HTTP and HTTPS (verified with the test CA, refused without it);
# Swift's S3 API serves what s3put.sh uploaded, whole and ranged, SigV4
# signed, and refuses a wrong secret; the fault proxy passes both through
# unchanged, keeps connections alive, and each fault fires as many times as
# asked, no more. Run under servers.sh (all four).
set -eu
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
unset CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR http_proxy HTTP_PROXY no_proxy NO_PROXY
W=$GF_TEST_TMPDIR/check
mkdir -p "$W"
N=300000 # several 64 KiB relay pieces
head -c $N /dev/urandom >"$GF_TEST_HTTP_ROOT/shard-000000.tar"
cp "$GF_TEST_HTTP_ROOT/shard-000000.tar" "$W/whole"
tail -c +101 "$W/whole" | head -c 100 >"$W/r100-199"
s3() { curl --netrc-file "$GF_TEST_S3_NETRC" --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"; }
# get NAME URL [curl args]: the body in $W/NAME, the head in $W/NAME.h; curl's status echoed
get() { name=$1 url=$2; shift 2; rc=0
    curl -sS -o "$W/$name" -D "$W/$name.h" "$@" "$url" 2>"$W/$name.err" || rc=$?; echo $rc; }
status_of() { head -n 1 "$W/$1.h" | cut -d' ' -f2; }
same() { cmp -s "$W/$1" "$W/$2" || fail "$3: the bytes differ from $2"; }
whole_and_range() { # LABEL BASE [curl args]: BASE/shard-000000.tar whole, and bytes 100-199
    label=$1 base=$2; shift 2
    [ "$(get w "$base/shard-000000.tar" "$@")" = 0 ] && [ "$(status_of w)" = 200 ] ||
        fail "$label whole: $(cat "$W/w.err") $(head -n 1 "$W/w.h" 2>/dev/null)"
    same w whole "$label whole"
    [ "$(get r "$base/shard-000000.tar" -r 100-199 "$@")" = 0 ] && [ "$(status_of r)" = 206 ] ||
        fail "$label range: $(cat "$W/r.err") $(head -n 1 "$W/r.h" 2>/dev/null)"
    grep -qi '^content-range: bytes 100-199/300000' "$W/r.h" || fail "$label range: no Content-Range"
    same r r100-199 "$label range"
    ok "$label: whole, and bytes=100-199 as a 206"
}

# nginx, HTTP and HTTPS.
whole_and_range http "$GF_TEST_HTTP_URL"
whole_and_range https "$GF_TEST_HTTPS_URL" --cacert "$GF_TEST_CA_FILE"
whole_and_range "https (localhost)" "https://localhost:${GF_TEST_HTTPS_URL##*:}" --cacert "$GF_TEST_CA_FILE"
rc=$(get n "$GF_TEST_HTTPS_URL/shard-000000.tar")
[ "$rc" = 60 ] || fail "https without the CA: curl said $rc, not 60 (unverified certificate)"
ok "https without the CA: refused (curl 60)"
grep -q '"GET /shard-000000.tar HTTP/1.1" 206 100 "bytes=100-199"' "$GF_TEST_HTTP_LOG" ||
    fail "the access log has no ranged request"
ok "the access log records ranges"

# Swift, S3 API.
head -c $N /dev/urandom >"$W/obj"
"$GF_TEST_S3_PUT" "$W/obj" train/shard-000000.tar || fail "s3put.sh"
cp "$W/obj" "$W/whole"
tail -c +101 "$W/whole" | head -c 100 >"$W/r100-199"
whole_and_range s3 "$GF_TEST_S3_ENDPOINT/$GF_TEST_S3_BUCKET/train" \
    --netrc-file "$GF_TEST_S3_NETRC" --aws-sigv4 "aws:amz:$AWS_REGION:s3" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD'
printf 'machine 127.0.0.1 login %s password wrong\n' "$AWS_ACCESS_KEY_ID" >"$W/bad.netrc"
get b "$GF_TEST_S3_ENDPOINT/$GF_TEST_S3_BUCKET/train/shard-000000.tar" --netrc-file "$W/bad.netrc" \
    --aws-sigv4 "aws:amz:$AWS_REGION:s3" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' >/dev/null
[ "$(status_of b)" = 403 ] && grep -q SignatureDoesNotMatch "$W/b" || fail "a wrong secret: $(status_of b), not 403"
ok "s3: a wrong secret is 403 SignatureDoesNotMatch"
get m "$GF_TEST_S3_ENDPOINT/$GF_TEST_S3_BUCKET/train/none.tar" --netrc-file "$GF_TEST_S3_NETRC" \
    --aws-sigv4 "aws:amz:$AWS_REGION:s3" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' >/dev/null
[ "$(status_of m)" = 404 ] || fail "a missing key: $(status_of m), not 404"
ok "s3: a missing key is 404"

# The proxy, no fault: the same bytes; SigV4 signed for the proxy's address verifies at Swift.
C=$GF_TEST_PROXY_CONTROL
ctl() { curl -fsS -X POST "$C/$1" >"$W/ctl" || fail "control $1"; sed -n 's/.*"id": \([0-9]*\).*/\1/p' "$W/ctl"; }
fired() { curl -fsS "$C/fired?id=$1"; }
count() { curl -fsS "$C/count?path=${1:-}"; }
whole_and_range "proxy s3" "$GF_TEST_PROXY_S3_ENDPOINT/$GF_TEST_S3_BUCKET/train" \
    --netrc-file "$GF_TEST_S3_NETRC" --aws-sigv4 "aws:amz:$AWS_REGION:s3" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD'
cp "$GF_TEST_HTTP_ROOT/shard-000000.tar" "$W/whole"
tail -c +101 "$W/whole" | head -c 100 >"$W/r100-199"
whole_and_range "proxy http" "$GF_TEST_PROXY_HTTP_URL"
[ "$(count /shard-000000.tar)" = 2 ] && [ "$(count "/$GF_TEST_S3_BUCKET/train/shard-000000.tar")" = 2 ] ||
    fail "the proxy's counts: $(curl -sS "$C")"
ok "proxy: counts requests per path"
: >"$GF_TEST_HTTP_LOG"
U=$GF_TEST_PROXY_HTTP_URL/shard-000000.tar
curl -fsS -o /dev/null -o /dev/null "$U" "$U" || fail "two requests on one connection"
[ "$(cut -d' ' -f8 "$GF_TEST_HTTP_LOG" | tr '\n' ' ')" = "1 2 " ] ||
    fail "keep-alive: nginx saw $(cat "$GF_TEST_HTTP_LOG")"
ok "proxy: keep-alive to the upstream (two requests, one nginx connection)"

head -c 8388608 /dev/urandom >"$GF_TEST_HTTP_ROOT/big.tar"
i=0; while [ $i -lt 16 ]; do
    curl -fsS -o "$W/p$i" "$GF_TEST_PROXY_HTTP_URL/big.tar" & i=$((i + 1))
done
wait
i=0; while [ $i -lt 16 ]; do
    cmp -s "$W/p$i" "$GF_TEST_HTTP_ROOT/big.tar" || fail "16 at once through the proxy: copy $i differs"
    rm -f "$W/p$i"; i=$((i + 1))
done
ok "proxy: 16 connections at once, 8 MiB each, whole"

# Faults: each as many times as asked.
ctl clear >/dev/null
id=$(ctl "rule?match=shard-000000&fault=reset_after&bytes=1000")
rc=$(get x "$U")
size=$(wc -c <"$W/x")
[ "$rc" != 0 ] && [ "$size" -lt $N ] || fail "reset_after: curl $rc, $size bytes"
[ "$(get y "$U")" = 0 ] && same y whole "after the reset" && [ "$(fired "$id")" = 1 ] ||
    fail "reset_after fired $(fired "$id") times"
ok "reset_after 1000: curl $rc with $size bytes, once; the next request whole"

id=$(ctl "rule?match=shard-000000&fault=status&code=503&times=3")
for i in 1 2 3 4; do get s "$U" >/dev/null; echo "$(status_of s)"; done | tr '\n' ' ' >"$W/codes"
[ "$(cat "$W/codes")" = "503 503 503 200 " ] && [ "$(fired "$id")" = 3 ] || fail "a 503 burst: $(cat "$W/codes")"
same s whole "after the burst"
ok "status 503 x3: 503 503 503 then 200"

t_plain=$(curl -fsS -o /dev/null -w '%{time_starttransfer}' "$U")
id=$(ctl "rule?match=shard-000000&fault=latency&ms=300&times=0")
t_slow=$(curl -fsS -o /dev/null -w '%{time_starttransfer}' "$U")
curl -fsS -o /dev/null "$U"
[ "$(fired "$id")" = 2 ] && awk -v s="$t_slow" 'BEGIN { exit !(s >= 0.3) }' ||
    fail "latency 300 ms: first byte at $t_slow s (plain $t_plain s), fired $(fired "$id")"
ok "latency 300 ms on every request: first byte at $t_slow s (plain $t_plain s)"
ctl clear >/dev/null

id=$(ctl "rule?match=shard-000000&fault=stall_after&bytes=1000&seconds=1")
t=$(curl -fsS -o "$W/st" -w '%{time_total}' "$U") || fail "stall_after: curl failed"
same st whole "stall_after (continue)"
awk -v s="$t" 'BEGIN { exit !(s >= 1) }' || fail "stall_after 1 s: took $t s"
id2=$(ctl "rule?match=shard-000000&fault=stall_after&bytes=1000&seconds=0.2&then=close")
rc=$(get sc "$U")
[ "$rc" = 18 ] && [ "$(wc -c <"$W/sc")" = 1000 ] && [ "$(fired "$id")" = 1 ] && [ "$(fired "$id2")" = 1 ] ||
    fail "stall_after then close: curl $rc, $(wc -c <"$W/sc") bytes"
ok "stall_after 1000 bytes: 1 s then the rest ($t s); then=close: 1000 bytes, curl 18"

id=$(ctl "rule?match=shard-000000&fault=change_object")
get c "$U" >/dev/null
get d "$U" >/dev/null
e_real=$(grep -i '^etag:' "$W/d.h") e_changed=$(grep -i '^etag:' "$W/c.h")
[ "$e_real" != "$e_changed" ] && [ "$(wc -c <"$W/c")" = $N ] && [ "$(fired "$id")" = 1 ] ||
    fail "change_object: $e_changed vs $e_real"
[ "$(cmp -l "$W/c" "$W/whole" | wc -l)" = 1 ] && cmp -l "$W/c" "$W/whole" | grep -q '^ *1 ' ||
    fail "change_object: not the first byte alone changed"
same d whole "after change_object"
ok "change_object: another ETag ($e_changed), byte 1 flipped, once"

S=$GF_TEST_PROXY_S3_ENDPOINT/$GF_TEST_S3_BUCKET/train/shard-000000.tar
id=$(ctl "rule?match=/$GF_TEST_S3_BUCKET/&fault=status&code=503&times=2")
for i in 1 2 3; do s3 -sS -o /dev/null -w '%{http_code} ' "$S"; done >"$W/codes"
[ "$(cat "$W/codes")" = "503 503 200 " ] || fail "s3 through the proxy, a 503 burst: $(cat "$W/codes")"
id=$(ctl "rule?match=/$GF_TEST_S3_BUCKET/&fault=reset_after&bytes=5000")
rc=0; s3 -sS -o "$W/sx" "$S" 2>/dev/null || rc=$?
[ "$rc" != 0 ] && [ "$(fired "$id")" = 1 ] || fail "s3 through the proxy, reset_after: curl $rc"
ok "s3 through the proxy: 503 x2 then 200; a reset (curl $rc)"
ctl clear >/dev/null
[ "$(count)" = 0 ] || fail "clear left counts"
echo "remote fixtures: all checks passed"

#!/usr/bin/env bash
# `gpufeed index URL... --out DIR` against real servers (run under
# tests/remote/servers.sh): shards uploaded without sidecars to nginx
# (HTTP, HTTPS) and Swift's S3 API are indexed remotely into sidecars
# byte-identical to those of the local copies; uploaded beside the shards,
# they open the remote set; a set written by `gpufeed prepare` opens
# remotely as uploaded, with no re-indexing; failures name the URL and the
# HTTP status, never the secret.
#   remote_index.sh GPUFEED
set -euo pipefail
gpufeed=$1
work=$GF_TEST_TMPDIR/ri
mkdir -p "$work"
cd "$work"
fail() { echo "remote_index: FAIL: $*" >&2; exit 1; }
nosecret() { if grep -q "$AWS_SECRET_ACCESS_KEY" "$1"; then fail "the secret in $1"; fi; }
export AWS_ENDPOINT_URL_S3=$GF_TEST_S3_ENDPOINT

"$gpufeed" make-dataset set --classes 3 --per-class 12 --size 80x60 --seed 7 --shards 4 >/dev/null
shards="train-{000000..000003}.tar"
ls set/*.idx >/dev/null 2>&1 && rm set/*.idx
cp -r set loc
"$gpufeed" index "loc/$shards" >/dev/null
mkdir -p "$GF_TEST_HTTP_ROOT/ri"
cp set/*.tar "$GF_TEST_HTTP_ROOT/ri/"
for f in set/*.tar; do "$GF_TEST_S3_PUT" "$f" "ri/$(basename "$f")"; done

same_as_local() { # DIR
    for f in loc/*.idx; do
        cmp "$f" "$1/$(basename "$f")" || fail "$1/$(basename "$f") differs from the local sidecar"
    done
    echo "  $1: 4 sidecars, byte-identical to the local ones"
}

# http, https (the test's CA), s3: remote sidecars = local sidecars
"$gpufeed" index --out h "$GF_TEST_HTTP_URL/ri/$shards" >out.h || fail "index http: $(cat out.h)"
grep -q '^gpufeed index: 4 shards indexed (36 samples, 72 members), 0 up to date, 0 failed' out.h ||
    fail "http summary: $(cat out.h)"
grep -q "upload the sidecars beside the shards: copy h/\*.idx to where the server serves $GF_TEST_HTTP_URL/ri/ from" out.h ||
    fail "http hint: $(cat out.h)"
same_as_local h
"$gpufeed" index --out hs --ca-file "$GF_TEST_CA_FILE" "$GF_TEST_HTTPS_URL/ri/$shards" >out.hs 2>&1 ||
    fail "index https: $(cat out.hs)"
same_as_local hs
"$gpufeed" index --out s3 "s3://$GF_TEST_S3_BUCKET/ri/$shards" >out.s3 2>&1 || fail "index s3: $(cat out.s3)"
nosecret out.s3
grep -q "aws s3 cp s3/ s3://$GF_TEST_S3_BUCKET/ri/ --recursive --exclude '\*' --include '\*.idx'" out.s3 ||
    fail "s3 hint: $(cat out.s3)"
same_as_local s3

# failures: the URL and the status, nothing written
if "$gpufeed" index --out miss "$GF_TEST_HTTP_URL/ri/nothere.tar" >out.miss 2>&1; then
    fail "index of a missing object succeeded"
fi
grep -q "$GF_TEST_HTTP_URL/ri/nothere.tar: HTTP 404" out.miss || fail "404: $(cat out.miss)"
[ ! -e miss/nothere.idx ] || fail "a sidecar written for a missing object"
echo "  missing: $(grep -m1 nothere out.miss)"
if "$gpufeed" index --out tls "$GF_TEST_HTTPS_URL/ri/train-000000.tar" >out.tls 2>&1; then
    fail "https verified a certificate the system does not trust"
fi
grep -q "$GF_TEST_HTTPS_URL/ri/train-000000.tar: " out.tls || fail "TLS failure: $(cat out.tls)"
if AWS_SECRET_ACCESS_KEY=wrong-$AWS_SECRET_ACCESS_KEY "$gpufeed" index --out bad \
    "s3://$GF_TEST_S3_BUCKET/ri/train-000000.tar" >out.403 2>&1; then
    fail "s3 with a wrong secret succeeded"
fi
nosecret out.403
grep -q "s3://$GF_TEST_S3_BUCKET/ri/train-000000.tar: HTTP 403 SignatureDoesNotMatch: " out.403 ||
    fail "403 without the store's reason: $(cat out.403)"
echo "  wrong secret: $(grep -m1 403 out.403)"
# a wrong region: the store names the right one (<Region>), followed as
# the AWS SDKs do, the same sidecar
AWS_REGION=eu-west-1 "$gpufeed" index --out reg "s3://$GF_TEST_S3_BUCKET/ri/train-000000.tar" \
    >out.reg 2>&1 || fail "s3 in a wrong region: $(cat out.reg)"
nosecret out.reg
cmp loc/train-000000.idx reg/train-000000.idx || fail "s3 in a wrong region: another sidecar"
echo "  wrong region (eu-west-1): followed to the store's, the same sidecar"

# the sidecars uploaded: the remote sets open, every sample there
cp h/*.idx "$GF_TEST_HTTP_ROOT/ri/"
for f in s3/*.idx; do "$GF_TEST_S3_PUT" "$f" "ri/$(basename "$f")"; done
opens() { # WHAT DATA [ARGS]: verify reads every sample
    local what=$1 data=$2
    shift 2
    "$gpufeed" verify --data "$data" --json "$@" >out.v 2>&1 || fail "$what: verify: $(cat out.v)"
    grep -q '"samples": *36' out.v || fail "$what: samples: $(cat out.v)"
    nosecret out.v
    echo "  $what: opens, 36 samples"
}
opens "http, indexed remotely" "$GF_TEST_HTTP_URL/ri/$shards"
opens "s3, indexed remotely" "s3://$GF_TEST_S3_BUCKET/ri/$shards"
AWS_REGION=eu-west-1 opens "s3 in a wrong region, followed" "s3://$GF_TEST_S3_BUCKET/ri/$shards"

# a prepared set opens remotely as written (its sidecars carry labels=)
"$gpufeed" prepare "set/$shards" prep >/dev/null 2>&1 || fail "prepare"
head -n 1 prep/train-000000.idx | grep -q '^v1\.2 [0-9]* shard_bytes=[0-9]* shard_crc32c=[0-9a-f]\{8\} labels=[0-9,]* member_crc32c=[0-9a-f,]*$' ||
    fail "prepare's sidecar: $(head -n 1 prep/train-000000.idx)"
mkdir -p "$GF_TEST_HTTP_ROOT/prep"
cp prep/*.tar prep/*.idx "$GF_TEST_HTTP_ROOT/prep/"
n=$(ls prep/*.tar | wc -l)
last=$(printf '%06d' $((n - 1)))
opens "prepared set over http, not re-indexed" "$GF_TEST_HTTP_URL/prep/train-{000000..$last}.tar"
# and its sidecars are what `gpufeed index` writes for them, labels included
mkdir -p previdx
"$gpufeed" index --out previdx "prep/train-{000000..$last}.tar" >/dev/null
for f in prep/*.idx; do
    [ "$(head -n 1 "$f")" = "$(head -n 1 "previdx/$(basename "$f")")" ] ||
        fail "prepare's first line differs from index's: $(head -n 1 "$f")"
done
# An object shorter than a tar header: the range past its end gets what
# there is, refused at once (it used to be retried as cut short, ~3 s).
head -c 100 /dev/urandom >"$GF_TEST_HTTP_ROOT/ri/tiny.tar"
"$gpufeed" index "$GF_TEST_HTTP_URL/ri/tiny.tar" --out tiny >"$work/tiny" 2>&1 && fail "a 100-byte object indexed"
grep -q "tiny.tar: offset 0: truncated header: 100 bytes left" "$work/tiny" || { cat "$work/tiny"; fail "a 100-byte object"; }
n=$(grep -c 'GET /ri/tiny.tar' "$GF_TEST_HTTP_LOG")
[ "$n" -le 2 ] || fail "a 100-byte object: $n requests (retried as if cut short)"
echo "  a 100-byte object: refused after $n requests: $(head -c 120 "$work/tiny")"
echo "remote_index: ok"

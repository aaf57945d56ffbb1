#!/bin/sh
# Uploads FILE as KEY into GF_TEST_S3_BUCKET at GF_TEST_S3_ENDPOINT (the Swift
# servers.sh started), SigV4-signed: tests/remote/s3put.sh FILE KEY
# The access key (test:tester) has a colon, which `curl --user` would split
# at, so the credentials go in a netrc; curl 7.88 adds no
# x-amz-content-sha256 of its own and Swift answers 400 without one. KEY is
# sent as written: keep to [A-Za-z0-9._/-] (others need percent-encoding,
# and SigV4 signs the encoded form).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 FILE KEY" >&2; exit 2; }
case $2 in *[!A-Za-z0-9._/-]*) echo "s3put.sh: key '$2': only [A-Za-z0-9._/-]" >&2; exit 2;; esac
netrc=$(mktemp)
trap 'rm -f "$netrc"' EXIT
printf 'machine 127.0.0.1 login %s password %s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$netrc"
curl -sS --fail-with-body -o /dev/null --netrc-file "$netrc" --aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:s3" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T "$1" "$GF_TEST_S3_ENDPOINT/$GF_TEST_S3_BUCKET/$2"

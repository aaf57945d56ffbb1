#!/bin/sh
# The CLI end to end: make-dataset, verify (clean, then with bad files),
# bench --json. Usage: cli.sh PATH/TO/gpufeed
set -eu
g=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$g" --version | grep -q '^gpufeed [0-9]' || fail "--version"
"$g" no-such-command 2>/dev/null && fail "unknown command must fail"

d=$tmp/data
"$g" make-dataset "$d" --classes 3 --per-class 6 --size 96x72 --seed 1 >/dev/null
[ "$(find "$d" -name '*.jpg' | wc -l)" -eq 18 ] || fail "make-dataset wrote the wrong count"
"$g" make-dataset "$d" --classes 3 --per-class 6 --size 96x72 2>/dev/null &&
    fail "make-dataset must refuse a non-empty directory"

out=$("$g" verify --data "$d") || fail "verify on a clean set: $out"
echo "$out" | grep -q '^18 samples, 0 bad$' || fail "verify summary: $out"

printf 'not a jpeg' >"$d/class_01/img_00002.jpg"
: >"$d/class_02/img_00003.jpg"
set +e
out=$("$g" verify --data "$d" 2>&1)
rc=$?
json=$("$g" verify --data "$d" --json)
set -e
[ $rc -eq 1 ] || fail "verify with bad files must exit 1, got $rc"
echo "$out" | grep -q 'BAD .*class_01/img_00002.jpg: ' || fail "verify names the text file: $out"
echo "$out" | grep -q 'BAD .*class_02/img_00003.jpg: .*empty' || fail "verify names the empty file: $out"
echo "$out" | grep -q '^18 samples, 2 bad$' || fail "verify summary with bad files: $out"
echo "$json" | grep -q '"samples": *18' || fail "verify --json samples: $json"
echo "$json" | grep -q '"bad": *2' || fail "verify --json bad: $json"
echo "$json" | grep -q '"bad_samples": *\[' || fail "verify --json list: $json"

json=$("$g" bench --input-only --data "$d" --threads 2 --image-size 32 --batch-size 4 --json)
for k in images_per_s single_thread_images_per_s efficiency threads prefetch_depth \
         batch_size stall_fraction reader decoder errors samples; do
    echo "$json" | grep -q "\"$k\":" || fail "bench --json lacks $k: $json"
done
echo "$json" | grep -q '"samples": *16' || fail "bench delivered the wrong count: $json"
echo "$json" | grep -q '"errors": *2' || fail "bench counted the wrong errors: $json"
echo "cli: ok"

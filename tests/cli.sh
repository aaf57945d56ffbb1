#!/bin/sh
# The CLI end to end: make-dataset, verify (clean, then with bad files),
# bench --json, train --json. Usage: cli.sh PATH/TO/gpufeed
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

# train: a tiny train/ + val/ set, one epoch, both loops, one JSON object.
t=$tmp/train-data
"$g" make-dataset "$t/train" --classes 2 --per-class 8 --size 64x48 --seed 0 >/dev/null
"$g" make-dataset "$t/val" --classes 2 --per-class 4 --size 64x48 --seed 1 >/dev/null
json=$("$g" train --data "$t" --epochs 1 --batch-size 4 --image-size 16 --model-width 2 \
       --threads 1 --device cpu --json) || fail "train: $json"
for k in device modes loader images_per_s step_ms stall_fraction device_utilization \
         cpu_utilization compute_alone epochs loss accuracy weights_checksum; do
    echo "$json" | grep -q "\"$k\":" || fail "train --json lacks $k: $json"
done
echo "$json" | grep -q '"loader": *"sync"' || fail "train --json lacks the sync row: $json"
echo "$json" | grep -q '"loader": *"gpufeed"' || fail "train --json lacks the gpufeed row: $json"
[ "$(echo "$json" | wc -l)" -eq 1 ] || fail "train --json must print one line: $json"
"$g" train --data "$tmp/data" 2>/dev/null && fail "train without train/ and val/ must fail"
echo "cli: ok"

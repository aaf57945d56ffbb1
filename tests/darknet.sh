#!/bin/sh
# gpufeed-darknet end to end on a tiny set: both loaders train darknet's
# classifier (the loss falls) on the same number of images, and --json
# reports both. 77 = skipped: built without the darknet package.
# Usage: darknet.sh PATH/TO/gpufeed PATH/TO/gpufeed-darknet
set -eu
g=$1
dn=$2
[ -n "$dn" ] && [ -x "$dn" ] || { echo "gpufeed-darknet not built (no darknet package)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$g" make-dataset "$tmp/train" --classes 10 --per-class 24 --size 64x64 --seed 1 >/dev/null
"$g" make-dataset "$tmp/val" --classes 10 --per-class 4 --size 64x64 --seed 2 >/dev/null
out=$("$dn" --train "$tmp/train" --val "$tmp/val" --images 960 --batch 32 --interval 6 \
      --check --json 2>"$tmp/err") || { cat "$tmp/err" >&2; fail "the run or its check: $out"; }
echo "$out"
n=$(echo "$out" | grep -o '"images":960,' | wc -l)
[ "$n" -eq 3 ] || fail "both loaders must report 960 images: $out"
echo "$out" | grep -q '"loader":"darknet".*"loader":"gpufeed"' || fail "a loader is missing"

# darknet labels by substring: a class folder named inside another's path is refused.
mkdir -p "$tmp/bad/class_02/class_01" && cp -r "$tmp/train/class_01" "$tmp/bad/class_01" &&
    cp "$tmp/train/class_02/img_00000.jpg" "$tmp/bad/class_02/class_01/"
"$dn" --train "$tmp/bad" --val "$tmp/bad" --images 32 --batch 32 >/dev/null 2>"$tmp/err" &&
    fail "a path matching two darknet labels must be refused"
grep -q "2 labels match" "$tmp/err" || fail "the refusal must say why: $(cat "$tmp/err")"
echo ok

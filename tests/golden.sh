#!/bin/sh
# Golden checksums of delivered batches (tests/golden.c) against
# tests/golden-DECODER.txt, recorded before the house refactor: behaviour
# unchanged means these lines never change. DECODER is the build's JPEG
# decoder (turbo, or stb without libjpeg-turbo: their pixels differ). To
# record anew after a change that is meant to change batches:
# GOLDEN_RECORD=1, and say why in the commit.
#   golden.sh GPUFEED GOLDEN turbo|stb
set -eu
gpufeed=$1 golden=$2 decoder=$3
expected=$(dirname "$0")/golden-$decoder.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make() { set_=$1; shift; "$gpufeed" make-dataset "$work/$set_" --classes 3 --per-class 10 --size 80x60 --seed 7 "$@" >/dev/null; }
make jpg
make png --format png
"$gpufeed" make-dataset "$work/shards" --classes 3 --per-class 10 --size 80x60 --seed 7 --shards 3 >/dev/null
cp -r "$work/jpg" "$work/bad"
# Damaged files: cut in half, not an image, empty.
f=$work/bad/class_00/img_00001.jpg
head -c $(($(wc -c <"$f") / 2)) "$f" >"$f.tmp" && mv "$f.tmp" "$f"
printf 'not an image at all' >"$work/bad/class_01/img_00002.jpg"
: >"$work/bad/class_02/img_00003.jpg"
"$golden" "$work" >"$work/got.txt"
if [ "${GOLDEN_RECORD:-0}" = 1 ]; then
    cp "$work/got.txt" "$expected"
    echo "recorded $expected"
    exit 0
fi
diff -u "$expected" "$work/got.txt"
# The shards again through sidecars from gpufeed index: the same batches.
# (A sidecar is taken only where the shard's headers agree with it, so a
# header spoiled after indexing is seen: tests/test_tar.c.)
"$gpufeed" index "$work/shards/train-{000000..000002}.tar" >/dev/null
"$golden" "$work" >"$work/got-idx.txt"
diff -u "$expected" "$work/got-idx.txt"
echo "golden: $(wc -l <"$work/got.txt") cases, batches as recorded"

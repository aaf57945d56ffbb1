#!/bin/sh
# Data sets mixed by weight from the command line: --data more than once
# with --weights (bench's per-source lines and --json "sources", verify
# walking every source, --mix-epoch and --mix-labels from the settings
# table), and the options' own mistakes named by option with exit 2.
# Usage: cli_mix.sh PATH/TO/gpufeed
set -eu
g=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

a=$tmp/a b=$tmp/b
"$g" make-dataset "$a" --classes 4 --per-class 6 --size 48x40 --seed 1 >/dev/null # 24
"$g" make-dataset "$b" --classes 2 --per-class 4 --size 48x40 --seed 2 >/dev/null # 8
small="--input-only --threads 1 --image-size 32 --batch-size 4 --device cpu"

# One epoch of a 0.75/0.25 mix: an epoch is the sizes summed (cycle), each
# source's samples its own index range, the shares near the weights, and
# the sources' samples all that was delivered.
json=$("$g" bench $small --data "$a" --data "$b" --weights 0.75,0.25 --json) ||
    fail "bench over a mix: $json"
printf '%s\n' "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d["sources"]
assert len(s) == 2, s
assert d["samples"] == 32 == sum(x["samples"] for x in s), d
assert [x["size"] for x in s] == [24, 8] and [x["first_index"] for x in s] == [0, 24], s
assert [x["n_classes"] for x in s] == [4, 2] and [x["label_offset"] for x in s] == [0, 4], s
assert abs(s[0]["weight"] - 0.75) < 1e-9 and abs(s[1]["weight"] - 0.25) < 1e-9, s
assert abs(s[0]["samples"] - 24) <= 4, s  # within a few samples of the weights
assert abs(sum(x["share"] for x in s) - 1) < 1e-9, s
assert s[0]["data"].endswith("/a") and s[1]["data"].endswith("/b"), s
' || fail "bench --json sources over a mix: $json"
out=$("$g" bench $small --data "$a" --data "$b" --weights 3,1) || fail "bench over a mix: $out"
echo "$out" | grep -q "^  source 0 .*/a: [0-9]* samples, [0-9.]*% (weight 75.0%), waited [0-9.]* s$" ||
    fail "bench names source 0 with its share and weight: $out"
echo "$out" | grep -q "^  source 1 .*/b: [0-9]* samples, [0-9.]*% (weight 25.0%), waited" ||
    fail "bench names source 1: $out"
# Not a mix: no source lines, one source in JSON, its weight all.
out=$("$g" bench $small --data "$a") || fail "bench: $out"
echo "$out" | grep -q "source 0" && fail "bench prints sources of one data set: $out"
"$g" bench $small --data "$a" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)["sources"]
assert len(s) == 1 and s[0]["weight"] == 1 and s[0]["size"] == 24, s
' || fail "bench --json sources of one data set"
# The library's own text as one --data is the same mix (default weights 1).
one=$("$g" bench $small --data "mix:1=$a|1=$b" --json | python3 -c '
import json, sys; print([x["samples"] for x in json.load(sys.stdin)["sources"]])')
two=$("$g" bench $small --data "$a" --data "$b" --json | python3 -c '
import json, sys; print([x["samples"] for x in json.load(sys.stdin)["sources"]])')
[ "$one" = "$two" ] || fail "--data 'mix:...' and two --data: $one, $two"

# --mix-epoch and --mix-labels are settings-table options of every loader
# command; first: the epoch ends when b (the smaller, drawn as often) is
# exhausted, before the sizes' sum.
n=$("$g" bench $small --data "$a" --data "$b" --mix-epoch first --mix-labels source --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["samples"])') ||
    fail "bench --mix-epoch first"
[ "$n" -lt 32 ] && [ "$n" -ge 8 ] || fail "--mix-epoch first: an epoch of $n samples"
out=$("$g" bench $small --data "$a" --data "$b" --mix-epoch sometimes 2>&1) &&
    fail "--mix-epoch sometimes must fail"
echo "$out" | grep -q -- "--mix-epoch" || fail "--mix-epoch sometimes: $out"

# The options' mistakes, named by option, exit 2 (usage).
usage() { # expect-in-message args...
    want=$1
    shift
    set +e
    out=$("$g" "$@" 2>&1)
    rc=$?
    set -e
    [ $rc -eq 2 ] || fail "$* must exit 2, got $rc: $out"
    echo "$out" | grep -q -- "$want" || fail "$*: no '$want' in: $out"
}
usage "--weights: 1 weight for 2 --data" bench $small --data "$a" --data "$b" --weights 1
usage "--weights: 3 weights for 2 --data" verify --data "$a" --data "$b" --weights 1,2,3
usage "--weights: 'x' is not a positive number" bench $small --data "$a" --data "$b" --weights 1,x
usage "--weights: '0' is not a positive number" bench $small --data "$a" --data "$b" --weights 0,1
usage "--weights: '-1' is not a positive number" verify --data "$a" --data "$b" --weights=-1,1
usage "--weights: 'inf' is not a positive number" bench $small --data "$a" --data "$b" --weights inf,1
usage "--weights weighs the data sets of a mix" bench $small --data "$a" --weights 1
usage "--data '$a|x': a data set in a mix cannot have '|'" bench $small --data "$a|x" --data "$b"
usage "a mix cannot be one of a mix's data sets" verify --data "mix:1=$a" --data "$b"
usage "--train-data more than once" train --data "$a" --data "$b"
usage "is a mix: prepare each of its data sets on its own" prepare "mix:1=$a|1=$b" "$tmp/prepared"
usage "--weights: 1 weight for 2 --train-data" train --train-data "$a" --train-data "$b" \
    --val-data "$a" --weights 1

# verify walks every source: a bad file in the second is found, every
# sample of both counted.
printf 'not a jpeg' >"$b/class_01/img_00002.jpg"
set +e
out=$("$g" verify --data "$a" --data "$b" 2>&1)
rc=$?
json=$("$g" verify --data "$a" --data "$b" --weights 9,1 --json)
set -e
[ $rc -eq 1 ] || fail "verify over a mix with a bad file must exit 1, got $rc: $out"
echo "$out" | grep -q "^BAD .*class_01/img_00002.jpg: " || fail "verify names the bad file: $out"
echo "$out" | grep -q '^32 samples, 1 bad$' || fail "verify over a mix checks both whole: $out"
printf '%s\n' "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["samples"] == 32 and d["bad"] == 1, d
assert d["bad_samples"][0]["path"].endswith("class_01/img_00002.jpg"), d
' || fail "verify --json over a mix (the weights do not change what is checked): $json"

echo "cli_mix: ok"

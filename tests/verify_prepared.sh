#!/bin/sh
# gpufeed verify on a set gpufeed prepare wrote, as the folder or as its
# shards' pattern: a clean set matches its manifest (exit 0); a flipped
# byte, a deleted or an extra shard, an edited classes.txt (or a FIFO in
# its place) or a cut manifest are MISMATCH lines naming the file (exit 1), the members still
# decoded; a changed source is a CHANGED warning naming it, one not
# reachable a NOTE (exit 0 for both); a folder with a manifest.json of
# another kind is still an ImageFolder.
# Usage: verify_prepared.sh PATH/TO/gpufeed
set -eu
g=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export GF_NO_PROGRESS=1
cd "$tmp"

# verify DATA: its output in out.txt, its exit status in $rc
run() {
    set +e
    "$g" verify --data "$@" >out.txt 2>err.txt
    rc=$?
    set -e
}

"$g" make-dataset src --classes 3 --per-class 8 --size 96x64 --seed 5 >/dev/null
"$g" prepare src set --shard-samples 5 --max-side 48 >/dev/null || fail "prepare"
cp -r set clean

# ---- a clean set, as the folder and as the pattern ----
run set
[ $rc -eq 0 ] || fail "a clean set verifies (rc $rc): $(cat out.txt err.txt)"
grep -q '^manifest set/manifest.json: matched: 5 shards .*24 samples.*source unchanged$' out.txt ||
    fail "says the manifest matched: $(cat out.txt)"
grep -q '^24 samples, 0 bad$' out.txt || fail "the folder's members are decoded: $(cat out.txt)"
! grep -q '^MISMATCH\|^CHANGED' out.txt || fail "nothing differs: $(cat out.txt)"
run 'set/train-{000000..000004}.tar'
[ $rc -eq 0 ] && grep -q '^manifest set/manifest.json: matched' out.txt ||
    fail "the pattern is checked against the manifest too: $(cat out.txt)"
"$g" verify --data set --json >out.json || fail "--json on a clean set"
python3 - out.json <<'EOF' || fail "JSON of a clean set: $(cat out.json)"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["manifest"]
assert d["samples"] == 24 and m["matched"] and m["readable"], m
assert m["shards"] == m["shards_matched"] == 5 and m["classes_matched"], m
assert m["source"] == "unchanged" and m["source_data"] == "src" and m["mismatches"] == [], m
EOF

# ---- a flipped byte in a shard ----
cp -r clean flip
python3 -c "
p = 'flip/train-000002.tar'
b = bytearray(open(p, 'rb').read()); b[700] ^= 0x10; open(p, 'wb').write(b)"
run flip
[ $rc -eq 1 ] || fail "a flipped byte fails verify (rc $rc): $(cat out.txt)"
grep -q '^MISMATCH flip/train-000002.tar: SHA-256 differs from the manifest' out.txt ||
    fail "names the shard and why: $(cat out.txt)"
grep -q '^manifest flip/manifest.json: 1 mismatch (4 of 5 shards matched' out.txt ||
    fail "sums it up: $(cat out.txt)"
grep -q ' samples, .* bad$' out.txt || fail "the members are still decoded: $(cat out.txt)"
run 'flip/train-{000000..000004}.tar'
[ $rc -eq 1 ] && grep -q '^MISMATCH flip/train-000002.tar: SHA-256' out.txt ||
    fail "the pattern form catches it too (rc $rc): $(cat out.txt)"
"$g" verify --data flip --json >out.json && fail "--json exits 1 too"
python3 - out.json <<'EOF' || fail "JSON of a flipped byte: $(cat out.json)"
import json, sys
m = json.load(open(sys.argv[1]))["manifest"]
assert not m["matched"] and m["shards_matched"] == 4, m
assert [x["path"] for x in m["mismatches"]] == ["flip/train-000002.tar"], m
assert "SHA-256 differs" in m["mismatches"][0]["reason"], m
EOF

# ---- a deleted shard; an extra one; classes.txt edited ----
cp -r clean del
rm del/train-000003.tar
run del
[ $rc -eq 1 ] || fail "a deleted shard fails verify (rc $rc)"
grep -q '^MISMATCH del/train-000003.tar: missing .*the manifest lists it, 5 samples' out.txt ||
    fail "names the missing shard: $(cat out.txt)"
grep -q '^19 samples, 0 bad$' out.txt || fail "the shards that are there are decoded: $(cat out.txt)"
cp -r clean extra
cp extra/train-000004.tar extra/train-000005.tar
echo "a class too many" >>extra/classes.txt
run extra
[ $rc -eq 1 ] || fail "an extra shard fails verify (rc $rc)"
grep -q '^MISMATCH extra/train-000005.tar: not in the manifest' out.txt ||
    fail "names the extra shard: $(cat out.txt)"
grep -q '^MISMATCH extra/classes.txt: 4 lines, the manifest lists 3 classes' out.txt ||
    fail "classes.txt is compared: $(cat out.txt)"

# ---- a FIFO where classes.txt was: reported, never waited on ----
cp -r clean fifo
rm fifo/classes.txt
mkfifo fifo/classes.txt
set +e
timeout 60 "$g" verify --data fifo >out.txt 2>err.txt
rc=$?
set -e
[ $rc -eq 1 ] || fail "a FIFO for classes.txt fails verify, without hanging (rc $rc): $(cat out.txt err.txt)"
grep -q '^MISMATCH fifo/classes.txt' out.txt || fail "names the FIFO: $(cat out.txt)"

# ---- a manifest cut short ----
cp -r clean cut
head -c 600 clean/manifest.json >cut/manifest.json
run cut
[ $rc -eq 1 ] || fail "a cut manifest fails verify (rc $rc)"
grep -q '^MISMATCH cut/manifest.json: cannot be read as JSON (byte [0-9]*: .*): cut short' out.txt ||
    fail "says the manifest is cut short: $(cat out.txt)"
grep -q '^24 samples, 0 bad$' out.txt || fail "the shards beside it are decoded: $(cat out.txt)"

# ---- the source: changed (a warning), not reachable (a note) ----
cp src/class_00/img_00001.jpg src/class_02/extra.jpg
run set
[ $rc -eq 0 ] || fail "a changed source is a warning, not a failure (rc $rc)"
grep -q '^CHANGED src: source changed since prepare: 25 samples in 3 classes now, 24 in 3' out.txt ||
    fail "names the changed folder: $(cat out.txt)"
grep -q '^manifest set/manifest.json: matched: .*source changed' out.txt || fail "summary: $(cat out.txt)"
rm src/class_02/extra.jpg
mv src src.moved
run set
[ $rc -eq 0 ] && grep -q '^NOTE src: source not reachable' out.txt ||
    fail "an unreachable source is a note (rc $rc): $(cat out.txt)"
mv src.moved src
# a set prepared from tar shards records each shard's size and mtime
"$g" prepare 'clean/train-{000000..000004}.tar' again --format raw >/dev/null || fail "prepare from shards"
run again
[ $rc -eq 0 ] && grep -q 'source unchanged' out.txt || fail "shards source unchanged: $(cat out.txt)"
printf 'x' >>clean/train-000001.tar
touch -d '2001-01-01 00:00:00' clean/train-000004.tar
run again
[ $rc -eq 0 ] || fail "changed source shards are a warning (rc $rc)"
grep -q '^CHANGED clean/train-000001.tar: source changed since prepare: [0-9]* bytes, prepare read' out.txt ||
    fail "names the grown source shard: $(cat out.txt)"
grep -q '^CHANGED clean/train-000004.tar: source changed since prepare: modified 2001-01-01' out.txt ||
    fail "names the touched source shard: $(cat out.txt)"

# ---- a manifest.json of another kind: the folder is an ImageFolder ----
echo '{"format": "something else"}' >src/manifest.json
"$g" verify --data src --json >out.json || fail "an ImageFolder with its own manifest.json"
python3 -c "import json,sys; d=json.load(open('out.json')); assert d['samples'] == 24 and d['manifest'] is None, d" ||
    fail "not taken for a prepared set: $(cat out.json)"
echo "verify_prepared.sh: ok"

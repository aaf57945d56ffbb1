#!/bin/sh
# gpufeed prepare end to end: the same bytes at 1 and 2 threads; a run
# killed (kill -9, from its test hook GF_PREPARE_STOP_AFTER=K: after K
# samples written) and run again gives those bytes too, and no partial
# shard ever has a final name; labels per key are the source's (classes.txt
# in torchvision's ImageFolder order); raw members are binary PPM of the
# stated size (never enlarged, aspect kept, the shorter side rounded half
# up); bad source files are listed; the loader reads the set through its
# sidecars, and ignores with a warning one that does not match; gpufeed
# index on a prepared shard writes its sidecar's bytes; a source
# shard key whose .cls is no label is said, or under --on-error fail refused.
# Usage: prepare.sh PATH/TO/gpufeed
set -eu
g=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export GF_NO_PROGRESS=1

src=$tmp/src
"$g" make-dataset "$src" --classes 3 --per-class 8 --size 160x120 --seed 3 >/dev/null
printf 'not an image' >"$src/class_01/img_00002.jpg"
: >"$src/class_02/img_00005.jpg"
opts="--shard-samples 5 --max-side 64"

# ---- the same bytes whatever the thread count ----
"$g" prepare "$src" "$tmp/a" $opts --threads 1 --json >"$tmp/a.json" ||
    fail "prepare --threads 1: $(cat "$tmp/a.json")"
"$g" prepare "$src" "$tmp/b" $opts --threads 2 >"$tmp/b.txt" || fail "prepare --threads 2"
for f in "$tmp"/a/* "$tmp"/a/.prepare-journal; do
    cmp -s "$f" "$tmp/b/${f##*/}" || fail "${f##*/} differs between 1 and 2 threads"
done
[ "$(ls "$tmp/a" | wc -l)" -eq "$(ls "$tmp/b" | wc -l)" ] || fail "different file sets"
[ "$(ls "$tmp"/a/train-*.tar | wc -l)" -eq 5 ] || fail "22 samples by 5 make 5 shards"
[ "$(ls "$tmp"/a/train-*.idx | wc -l)" -eq 5 ] || fail "a sidecar per shard"
# each sidecar's first line: DALI's "v1.2 N", then member_crc32c= the
# CRC32C of each line's image member, in line order
python3 - "$tmp"/a/train-*.idx <<'EOF' || fail "member_crc32c= of the prepared sidecars"
import sys
table = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    table.append(c)
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = table[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
assert crc32c(b"123456789") == 0xE3069283
for idx in sys.argv[1:]:
    lines = open(idx).read().splitlines()
    head = lines[0].split()
    assert head[0] == "v1.2" and int(head[1]) == len(lines) - 1, head
    crcs = [t for t in head if t.startswith("member_crc32c=")]
    assert len(crcs) == 1, head
    crcs = crcs[0][len("member_crc32c="):].split(",")
    shard = open(idx[:-4] + ".tar", "rb").read()
    assert len(crcs) == len(lines) - 1, (idx, len(crcs))
    for line, want in zip(lines[1:], crcs):
        t = line.split()
        assert len(t) % 4 == 0, line
        ext, off, size = t[0], int(t[1]), int(t[2])
        assert ext not in ("cls", "key") and len(want) == 8, line
        assert crc32c(shard[off:off + size]) == int(want, 16), (idx, line, want)
EOF
# one writer of that text: gpufeed index on the prepared shards gives the
# same sidecar bytes
mkdir "$tmp/reidx"
cp "$tmp"/a/train-*.tar "$tmp/reidx/"
"$g" index "$tmp/reidx/train-{000000..000004}.tar" >/dev/null || fail "gpufeed index of prepared shards"
for f in "$tmp"/a/train-*.idx; do
    cmp -s "$f" "$tmp/reidx/${f##*/}" || fail "${f##*/}: gpufeed index writes other bytes than prepare"
done

# ---- bad source files: in the summary and the manifest ----
grep -q '^BAD .*class_01/img_00002.jpg: ' "$tmp/b.txt" || fail "text summary names the bad file: $(cat "$tmp/b.txt")"
grep -q '^BAD .*class_02/img_00005.jpg: .*empty' "$tmp/b.txt" || fail "names the empty file"
python3 - "$tmp/a.json" "$tmp/a/manifest.json" "$tmp/a" <<'EOF' || fail "summary or manifest"
import hashlib, json, sys
summary, manifest, out = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
for d in (summary, manifest):
    assert d["samples"] == 22 and d["bad"] == 2, d
    bad = sorted(b["path"] for b in d["bad_samples"])
    assert bad == ["class_01/img_00002.jpg", "class_02/img_00005.jpg"], bad
assert summary["shards"] == 5 and summary["samples_per_s"] > 0
assert manifest["gpufeed_version"] and manifest["source"]["kind"] == "folder"
assert manifest["settings"]["max_side"] == 64 and manifest["settings"]["shard_samples"] == 5
assert [s["samples"] for s in manifest["shards"]] == [5, 5, 5, 5, 2]
for s in manifest["shards"]:
    data = open(out + "/" + s["file"], "rb").read()
    assert len(data) == s["bytes"] and hashlib.sha256(data).hexdigest() == s["sha256"], s
EOF

# ---- labels per key are the source's; classes in ImageFolder order ----
python3 - "$tmp/a" "$src" <<'EOF' || fail "labels or classes"
import glob, os, sys, tarfile
out, src = sys.argv[1], sys.argv[2]
classes = sorted(e.name for e in os.scandir(src) if e.is_dir())   # torchvision's find_classes
assert open(out + "/classes.txt").read().split("\n")[:-1] == classes
seen = []
for shard in sorted(glob.glob(out + "/train-*.tar")):
    members = {}
    with tarfile.open(shard) as t:
        for m in t.getmembers():
            key, ext = m.name.split(".", 1)
            members.setdefault(key, {})[ext] = t.extractfile(m).read()
    for key, parts in members.items():
        assert set(parts) == {"jpg", "cls", "key"}, (key, parts.keys())
        path = parts["key"].decode()
        assert int(parts["cls"]) == classes.index(path.split("/")[0]), (key, path)
        assert key == path.rsplit(".", 1)[0].replace("/", "_"), (key, path)
        seen.append(path)
assert len(seen) == 22 and seen == sorted(seen), seen   # the source's index order
EOF

# ---- a folder as people have them: a hidden class, a link to the root ----
h=$tmp/human
"$g" make-dataset "$h" --classes 2 --per-class 2 --size 32x24 --seed 1 >/dev/null
mkdir "$h/.ipynb_checkpoints"
cp "$h/class_01/img_00000.jpg" "$h/.ipynb_checkpoints/x.jpg"
ln -s .. "$h/class_00/up"
"$g" prepare "$h" "$tmp/h" --format raw >/dev/null 2>"$tmp/h.err" ||
    fail "prepare a folder with a hidden class: $(cat "$tmp/h.err")"
grep -q "warning: left out .*class_00/up.*: a link to a directory outside its class" "$tmp/h.err" ||
    fail "prepare names the link out of its class: $(cat "$tmp/h.err")"
python3 - "$tmp/h" "$h" <<'EOF' || fail "labels of a folder with a hidden class and a link"
import glob, os, sys, tarfile
out, src = sys.argv[1], sys.argv[2]
classes = sorted(e.name for e in os.scandir(src) if e.is_dir())   # torchvision's find_classes
assert classes[0] == ".ipynb_checkpoints"
assert open(out + "/classes.txt").read().split("\n")[:-1] == classes
got = {}
for shard in sorted(glob.glob(out + "/train-*.tar")):
    with tarfile.open(shard) as t:
        parts = {}
        for m in t.getmembers():
            key, ext = m.name.split(".", 1)
            parts.setdefault(key, {})[ext] = t.extractfile(m).read()
    for p in parts.values():
        got[p["key"].decode()] = int(p["cls"])
want = {".ipynb_checkpoints/x.jpg": 0, "class_00/img_00000.jpg": 1, "class_00/img_00001.jpg": 1,
        "class_01/img_00000.jpg": 2, "class_01/img_00001.jpg": 2}
assert got == want, got
EOF

# ---- killed and run again: the same bytes, never a partial under a final name ----
for k in 5 7 21; do
    c=$tmp/kill$k
    set +e
    GF_PREPARE_STOP_AFTER=$k "$g" prepare "$src" "$c" $opts --threads 2 >/dev/null 2>&1
    rc=$?
    set -e
    [ $rc -eq 137 ] || fail "the hook should kill -9 the run after $k samples (rc $rc)"
    done_shards=$(grep -c '^shard ' "$c/.prepare-journal" || true)
    [ "$(ls "$c" | grep -c '\.tar$')" -eq "$done_shards" ] ||
        fail "after a kill at $k: only the shards the journal records have final names"
    ls "$c" | grep -q '\.tar\.partial$' || fail "after a kill at $k: the partial shard is .partial"
    [ ! -e "$c/manifest.json" ] || fail "a killed run has no manifest"
    "$g" prepare "$src" "$c" $opts --threads 1 >/dev/null || fail "resume after $k"
    for f in "$tmp"/a/* "$tmp"/a/.prepare-journal; do
        cmp -s "$f" "$c/${f##*/}" || fail "${f##*/} differs after a kill at $k and a resume"
    done
    ! ls "$c" | grep -q partial || fail "a resumed run leaves no partial file"
done
"$g" prepare "$src" "$tmp/a" $opts --threads 2 >/dev/null || fail "a finished run again"
"$g" prepare "$src" "$tmp/a" --shard-samples 6 --max-side 64 2>"$tmp/err" &&
    fail "other settings into a finished OUT must be refused"
grep -q 'other settings' "$tmp/err" || fail "refusal says why: $(cat "$tmp/err")"

# ---- OUT inside SRC (or reached through a link into it), SRC inside OUT: refused at once ----
ln -s "$src" "$tmp/srclink"
for out in "$src/out" "$src/class_00/deeper/out/" "$tmp/srclink/o" "$src"; do
    set +e
    "$g" prepare "$src" "$out" $opts >/dev/null 2>"$tmp/err"
    rc=$?
    set -e
    [ $rc -eq 2 ] || fail "OUT $out inside SRC: exit 2, got $rc: $(cat "$tmp/err")"
    grep -q "OUT $out is inside SRC $src: " "$tmp/err" || fail "the refusal names both: $(cat "$tmp/err")"
    [ ! -e "$src/out" ] && [ ! -e "$src/o" ] && [ ! -e "$src/class_00/deeper" ] ||
        fail "OUT $out inside SRC: something was written"
done
mkdir -p "$tmp/so/src" && cp -r "$src"/* "$tmp/so/src/"
"$g" prepare "$tmp/so/src" "$tmp/so" $opts >/dev/null 2>"$tmp/err" && fail "SRC inside OUT must be refused"
grep -q "SRC $tmp/so/src is inside OUT $tmp/so: " "$tmp/err" || fail "the refusal names both: $(cat "$tmp/err")"

# ---- links planted at the names prepare writes: never written through ----
set +e
GF_PREPARE_STOP_AFTER=7 "$g" prepare "$src" "$tmp/ln" $opts --threads 1 >/dev/null 2>&1
set -e
printf 'keep me\n' >"$tmp/outside"
for p in train-000001.tar.partial train-000001.idx.partial train-000004.tar.partial \
         manifest.json.partial classes.txt.partial; do
    rm -f "$tmp/ln/$p" && ln -s "$tmp/outside" "$tmp/ln/$p"
done
"$g" prepare "$src" "$tmp/ln" $opts >/dev/null 2>"$tmp/err" || fail "resume past planted links: $(cat "$tmp/err")"
[ "$(cat "$tmp/outside")" = "keep me" ] || fail "a link at a partial name was written through"
for f in "$tmp"/a/* "$tmp"/a/.prepare-journal; do
    cmp -s "$f" "$tmp/ln/${f##*/}" || fail "${f##*/} differs after links were planted"
done
[ -z "$(find "$tmp/ln" -type l)" ] || fail "links left in OUT: $(ls -la "$tmp/ln")"
rm -rf "$tmp/lj" && cp -r "$tmp/a" "$tmp/lj"
rm "$tmp/lj/.prepare-journal" && ln -s "$tmp/outside" "$tmp/lj/.prepare-journal"
"$g" prepare "$src" "$tmp/lj" $opts >/dev/null 2>"$tmp/err" && fail "a link as the journal must be refused"
grep -q "lj/.prepare-journal: Too many levels of symbolic links" "$tmp/err" || fail "the refusal names the journal: $(cat "$tmp/err")"
[ "$(cat "$tmp/outside")" = "keep me" ] || fail "a link at the journal's name was written through"

# ---- a damaged journal: refused, naming it, the line and why; never a crash ----
set +e
GF_PREPARE_STOP_AFTER=12 "$g" prepare "$src" "$tmp/jk" $opts --threads 1 >/dev/null 2>&1
set -e
grep -q '^shard 5 11 ' "$tmp/jk/.prepare-journal" || fail "the kill at 12: $(cat "$tmp/jk/.prepare-journal")"
for edit in 's/^shard 5 11 /shard 5 999 /:line 5: damaged: a shard.s range empty or past the source.s count' \
            's/^shard 5 11 /shard 4 11 /:line 5: damaged: a shard not starting where the last one ended' \
            's/^shard 5 11 5 /shard 5 11 9 /:line 5: damaged: a shard.s counts not its range.s' \
            's/^bad 10 /bad 99999 /:line 4: damaged: a bad sample past the source.s count' \
            '$a done 999:line 6: damaged: .done. at another count than the source.s'; do
    rm -rf "$tmp/jc" && cp -r "$tmp/jk" "$tmp/jc"
    sed -i "${edit%%:*}" "$tmp/jc/.prepare-journal"
    set +e
    "$g" prepare "$src" "$tmp/jc" $opts >/dev/null 2>"$tmp/err"
    rc=$?
    set -e
    [ $rc -eq 2 ] || fail "a journal edited by '${edit%%:*}': exit 2, got $rc: $(cat "$tmp/err")"
    grep -q "jc/.prepare-journal: ${edit#*:} (remove .*jc to start over)" "$tmp/err" ||
        fail "a journal edited by '${edit%%:*}': the error: $(cat "$tmp/err")"
done

# ---- a full disk (a file size limit: EFBIG; a full disk's ENOSPC takes the same
# path), on a resumed run holding the journal's shards: an error naming the file,
# nothing half-written under a final name, all freed (ASan's leak check); a rerun
# finishes the same bytes ----
rm -rf "$tmp/full" && cp -r "$tmp/jk" "$tmp/full"
set +e
(trap '' XFSZ; ulimit -f 16; exec "$g" prepare "$src" "$tmp/full" $opts --threads 1 >/dev/null 2>"$tmp/err")
rc=$?
set -e
[ $rc -eq 2 ] || fail "a full disk: exit 2, got $rc: $(cat "$tmp/err")"
grep -q "full/train-000002.tar.partial: File too large" "$tmp/err" || fail "a full disk: the error: $(cat "$tmp/err")"
[ ! -e "$tmp/full/train-000002.tar" ] || fail "a full disk left a shard under its final name"
"$g" prepare "$src" "$tmp/full" $opts >/dev/null || fail "a rerun after a full disk"
for f in "$tmp"/a/* "$tmp"/a/.prepare-journal; do
    cmp -s "$f" "$tmp/full/${f##*/}" || fail "${f##*/} differs after a full disk and a rerun"
done

# ---- raw: binary PPM, capped, never enlarged, aspect kept ----
tall=$tmp/tall
"$g" make-dataset "$tall" --classes 1 --per-class 2 --size 120x160 --seed 4 >/dev/null
check_ppm() { # OUT W H
    python3 - "$@" <<'EOF'
import glob, sys, tarfile
out, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    from PIL import Image
except ImportError:
    Image = None
n = 0
for shard in glob.glob(out + "/train-*.tar"):
    with tarfile.open(shard) as t:
        for m in t.getmembers():
            if not m.name.endswith(".ppm"):
                continue
            data = t.extractfile(m).read()
            head = b"P6\n%d %d\n255\n" % (w, h)
            assert data.startswith(head) and len(data) == len(head) + w * h * 3, data[:20]
            if Image:
                import io
                im = Image.open(io.BytesIO(data))
                im.load()
                assert im.size == (w, h) and im.mode == "RGB", (im.size, im.mode)
            n += 1
assert n > 0, "no .ppm member"
EOF
}
"$g" prepare "$tall" "$tmp/r1" --format raw --max-side 64 >/dev/null || fail "raw 64"
check_ppm "$tmp/r1" 48 64 || fail "120x160 at --max-side 64 is 48x64 PPM"
"$g" prepare "$tall" "$tmp/r2" --format raw --max-side 1000 >/dev/null || fail "raw 1000"
check_ppm "$tmp/r2" 120 160 || fail "--max-side 1000 never enlarges 120x160"
"$g" prepare "$tall" "$tmp/r3" --format raw --max-side 100 >/dev/null || fail "raw 100"
check_ppm "$tmp/r3" 75 100 || fail "120x160 at --max-side 100 is 75x100"
"$g" prepare "$tall" "$tmp/r4" --format auto --max-side 64 --raw-max-bytes 9216 >/dev/null
check_ppm "$tmp/r4" 48 64 || fail "auto stores 48x64x3 = 9216 bytes raw at --raw-max-bytes 9216"
"$g" prepare "$tall" "$tmp/r5" --format auto --max-side 64 --raw-max-bytes 9215 >/dev/null
[ "$(tar tf "$tmp/r5/train-000000.tar" | grep -c '\.jpg$')" -eq 2 ] || fail "auto: JPEG above it"

# ---- --keep-original copies JPEGs that need no downscale, bit for bit ----
"$g" prepare "$tall" "$tmp/k" --keep-original --json >"$tmp/k.json" || fail "keep-original"
grep -q '"original": 2' "$tmp/k.json" || fail "keep-original counts: $(cat "$tmp/k.json")"
mkdir "$tmp/kx" && tar xf "$tmp/k/train-000000.tar" -C "$tmp/kx"
cmp -s "$tmp/kx/class_00_img_00001.jpg" "$tall/class_00/img_00001.jpg" ||
    fail "--keep-original changed the bytes"

# ---- on-error fail stops at the first bad file, naming it ----
set +e
"$g" prepare "$src" "$tmp/f" $opts --on-error fail >/dev/null 2>"$tmp/err"
rc=$?
set -e
[ $rc -eq 1 ] || fail "--on-error fail exits 1, got $rc"
grep -q 'class_01/img_00002.jpg' "$tmp/err" || fail "names the file: $(cat "$tmp/err")"

# ---- the loader reads the set, through its sidecars ----
set_pat="$tmp/a/train-{000000..000004}.tar"
json=$("$g" verify --data "$set_pat" --json) || fail "verify the prepared set: $json"
echo "$json" | grep -q '"samples": 22' || fail "verify count: $json"
echo "$json" | grep -q '"dataset_warnings": 0' || fail "sidecars matched: $json"
"$g" bench --input-only --data "$set_pat" --batch-size 8 >/dev/null 2>&1 ||
    fail "bench --input-only on the prepared set"
# The folder itself names the set, as its shards' pattern would.
samples() { sed -n 's/.*"samples": \([0-9]*\).*/\1/p'; }
by_pat=$("$g" bench --input-only --data "$set_pat" --batch-size 2 --epochs 1 --json | samples)
by_dir=$("$g" bench --input-only --data "$tmp/a" --batch-size 2 --epochs 1 --json | samples) ||
    fail "bench --data OUT (the prepared folder)"
[ "$by_pat" = 22 ] && [ "$by_dir" = 22 ] || fail "samples by pattern $by_pat, by folder $by_dir"
cp -r "$tmp/a" "$tmp/gap" && rm "$tmp/gap/train-000002.tar"
"$g" bench --input-only --data "$tmp/gap" >/dev/null 2>"$tmp/err" &&
    fail "a prepared folder missing a shard must be refused"
grep -q "gap: has a manifest.json but not one run of shards .*train-000004.tar (4 " "$tmp/err" ||
    fail "the refusal names the folder and the run: $(cat "$tmp/err")"
cp "$tmp/a/manifest.json" "$tall/" # an ImageFolder with a manifest of its own stays one
"$g" bench --input-only --data "$tall" --batch-size 2 --epochs 1 >/dev/null ||
    fail "an ImageFolder holding a manifest.json"
rm "$tall/manifest.json"
cp -r "$tmp/a" "$tmp/s"
sed -i '1s/shard_bytes=/shard_bytes=9/' "$tmp/s/train-000001.idx"
json=$("$g" verify --data "$tmp/s/train-{000000..000004}.tar" --json)
echo "$json" | grep -q '"samples": 22' || fail "a bad sidecar loses no sample: $json"
echo "$json" | grep -q 'index sidecar ignored.*train-000001.idx.*another size' ||
    fail "a sidecar that does not match is ignored with a warning: $json"

# ---- a prepared set prepared again (tar shards as the source): same labels ----
"$g" prepare "$set_pat" "$tmp/t" --format raw >/dev/null || fail "prepare from shards"
python3 - "$tmp/a" "$tmp/t" <<'EOF' || fail "labels from shards"
import glob, sys, tarfile
def labels(out):
    d = {}
    for shard in sorted(glob.glob(out + "/train-*.tar")):
        with tarfile.open(shard) as t:
            for m in t.getmembers():
                if m.name.endswith(".cls"):
                    d[m.name.split(".")[0]] = int(t.extractfile(m).read())
    return d
a, t = labels(sys.argv[1]), labels(sys.argv[2])
assert a == t and len(a) == 22, (a, t)
EOF
# ---- a source shard's key whose .cls is no label: said, or under fail refused ----
python3 - "$src/class_00/img_00000.jpg" "$tmp/neg.tar" <<'EOF'
import io, sys, tarfile
img = open(sys.argv[1], "rb").read()
with tarfile.open(sys.argv[2], "w", format=tarfile.USTAR_FORMAT) as t:
    for name, data in (("good.jpg", img), ("good.cls", b"1"), ("neg.jpg", img), ("neg.cls", b"-1")):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
EOF
rc=0
"$g" prepare "$tmp/neg.tar" "$tmp/negf" --on-error fail >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] || fail "prepare --on-error fail over a key without a label: exit $rc, not 2"
grep -q "neg.tar: offset [0-9]*: key 'neg': member 'neg.cls': .cls is not a non-negative decimal integer (on_error = fail)" \
    "$tmp/err" || fail "the refusal names the shard and the member: $(cat "$tmp/err")"
[ ! -e "$tmp/negf/train-000000.tar" ] || fail "a refused source wrote a shard"
"$g" prepare "$tmp/neg.tar" "$tmp/negs" >/dev/null 2>"$tmp/err" ||
    fail "prepare (skip) over a key without a label: $(cat "$tmp/err")"
grep -q "warning: left out .*neg.tar:neg: offset [0-9]*: key skipped: .cls is not" "$tmp/err" ||
    fail "under skip the key left out is said: $(cat "$tmp/err")"
[ "$(tar tf "$tmp/negs/train-000000.tar" | grep -c '\.cls$')" -eq 1 ] || fail "one sample kept"
echo "prepare.sh: ok"

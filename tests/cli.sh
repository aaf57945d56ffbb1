#!/bin/sh
# The CLI end to end: make-dataset, verify (clean, then with bad files),
# bench --json, train --json, index. Usage: cli.sh PATH/TO/gpufeed
# [PATH/TO/remote_batches] (its batch hashes: index --fields' sidecars)
set -eu
g=$1
tmp=$(mktemp -d)
tests_dir=$(dirname "$0")
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
# What gf_verify decides itself is no option of verify: never taken and ignored.
for opt in "--mean 3" "--shuffle=1" "--scale-min 0.5" "--device-id 1" "--drop-last=1"; do
    out=$("$g" verify --data "$d" $opt 2>&1) && fail "verify took $opt: $out"
    echo "$out" | grep -q "unknown option '${opt%% *}'" || fail "verify $opt: $out"
done

# A folder as people have them: a hidden class (Jupyter's), and a link that
# would make the whole tree class_00's. Verify names what is left out.
h=$tmp/human
"$g" make-dataset "$h" --classes 2 --per-class 2 --size 32x24 --seed 1 >/dev/null
mkdir "$h/.ipynb_checkpoints"
cp "$h/class_00/img_00000.jpg" "$h/.ipynb_checkpoints/x.jpg"
ln -s .. "$h/class_00/up"
out=$("$g" verify --data "$h" 2>&1) || fail "verify on a folder with a link out: $out"
json=$("$g" verify --data "$h" --json)
echo "$out" | grep -q "^SKIPPED .*class_00/up: a link to a directory outside its class folder" ||
    fail "verify names the link out of its class: $out"
echo "$out" | grep -q '^1 entries left out of the folder' || fail "verify counts it: $out"
echo "$out" | grep -q '^5 samples, 0 bad$' || fail "verify: the hidden class's sample, no other: $out"
echo "$json" | grep -q '"dataset_warnings": *1' || fail "verify --json dataset_warnings: $json"
echo "$json" | grep -q '"dataset_warning": *"class_00/up: a link' || fail "verify --json warning: $json"
echo "$out" | grep -q '(SKIPPED; --folder-walk torchvision takes them, loops aside)$' ||
    fail "verify points to --folder-walk: $out"
# --folder-walk torchvision walks links out as torchvision does; class_00/up
# leads back into its own walk, a loop: named, not followed, in both.
out=$("$g" verify --data "$h" --folder-walk torchvision 2>&1) || fail "verify --folder-walk torchvision: $out"
json=$("$g" verify --data "$h" --folder-walk torchvision --json)
echo "$out" | grep -q "^SKIPPED .*class_00/up: a link back into its own walk (a loop): not walked" ||
    fail "verify --folder-walk torchvision names the loop: $out"
echo "$out" | grep -q '^1 links back into their own walk (loops) not followed$' ||
    fail "verify --folder-walk torchvision counts the loop: $out"
echo "$out" | grep -q '^5 samples, 0 bad$' || fail "verify --folder-walk torchvision: $out"
echo "$json" | grep -q '"folder_walk": *"torchvision"' || fail "verify --json folder_walk: $json"

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

# Strictness: a JPEG whose scan ends in a stray marker (libjpeg warns
# "Corrupt JPEG data: ..."), and entries that are not regular files (a
# FIFO, a directory, a link to /dev/zero and to itself): verify reads whole
# files by default, names each, and says which mode ran; lenient counts the
# warning instead. The non-regular ones are bad in every mode.
s=$tmp/strict
"$g" make-dataset "$s" --classes 1 --per-class 3 --size 96x72 --seed 2 >/dev/null
j=$s/class_00/img_00001.jpg
n=$(wc -c <"$j")
printf '\377\323' | dd of="$j" bs=1 seek=$((n - 16)) conv=notrunc 2>/dev/null
mkfifo "$s/class_00/fifo.jpg"
mkdir "$s/class_00/dir.jpg"
ln -s /dev/zero "$s/class_00/zero.jpg"
ln -s loop.jpg "$s/class_00/loop.jpg"
set +e
out=$(timeout 60 "$g" verify --data "$s" 2>&1)
rc=$?
json=$(timeout 60 "$g" verify --data "$s" --json)
ljson=$(timeout 60 "$g" verify --data "$s" --json --strictness lenient)
lout=$(timeout 60 "$g" verify --data "$s" --strictness lenient 2>&1)
set -e
[ $rc -eq 1 ] || fail "verify with non-regular entries must exit 1, got $rc: $out"
echo "$out" | grep -q 'BAD .*class_00/fifo.jpg: not a regular file: a FIFO$' || fail "verify names the FIFO: $out"
echo "$out" | grep -q 'BAD .*class_00/dir.jpg: not a regular file: a directory$' || fail "verify names the directory: $out"
echo "$out" | grep -q 'BAD .*class_00/zero.jpg: not a regular file: a character device$' || fail "verify names the device: $out"
echo "$out" | grep -q 'BAD .*class_00/loop.jpg: .*symbolic links' || fail "verify names the loop: $out"
echo "$json" | grep -q '"strictness": *"whole"' || fail "verify --json says the mode: $json"
echo "$ljson" | grep -q '"strictness": *"lenient"' || fail "verify --json says lenient: $ljson"
if "$g" doctor --no-bandwidth 2>/dev/null | grep -q 'JPEG *libjpeg-turbo'; then
    echo "$out" | grep -q 'BAD .*class_00/img_00001.jpg: corrupt JPEG data: ' || fail "verify names the warned JPEG: $out"
    echo "$out" | grep -q '^7 samples, 5 bad$' || fail "verify summary, strict: $out"
    echo "$ljson" | grep -q '"bad": *4' || fail "lenient: the warned JPEG is not bad: $ljson"
    echo "$ljson" | grep -q '"decode_warnings": *1' || fail "lenient counts the warning: $ljson"
    echo "$ljson" | grep -q '"warned_samples": *\[{"path": *"[^"]*class_00/img_00001.jpg", *"reason": *"corrupt JPEG data: ' ||
        fail "lenient --json names the warned JPEG: $ljson"
    echo "$lout" | grep -q '^WARN .*class_00/img_00001.jpg: corrupt JPEG data: ' || fail "lenient names the warned JPEG: $lout"
fi
[ "$(echo "$json" | grep -o '"path"' | wc -l)" -eq "$(echo "$json" | sed -n 's/.*"bad": *\([0-9]*\).*/\1/p')" ] ||
    fail "verify --json lists each bad file once: $json"

json=$("$g" bench --input-only --data "$d" --threads 2 --image-size 32 --batch-size 4 --json)
for k in images_per_s single_thread_images_per_s efficiency threads prefetch_depth \
         batch_size stall_fraction reader decoder errors samples; do
    echo "$json" | grep -q "\"$k\":" || fail "bench --json lacks $k: $json"
done
echo "$json" | grep -q '"samples": *16' || fail "bench delivered the wrong count: $json"
echo "$json" | grep -q '"errors": *2' || fail "bench counted the wrong errors: $json"
# --augment comes from the settings table: the recipe runs, a bad stage is named
"$g" bench --input-only --data "$d" --threads 2 --image-size 32 --batch-size 4 \
    --augment 'ta_wide; jitter brightness=0.4; erase p=0.5' >/dev/null || fail "bench --augment"
out=$("$g" bench --input-only --data "$d" --augment 'ta_wide; blur' 2>&1) &&
    fail "bench --augment blur must fail"
echo "$out" | grep -q "augment: no stage blur" || fail "bench --augment blur: $out"

# Tar shards: the same 18 images in 3 WebDataset-style shards.
sh=$tmp/shards
"$g" make-dataset "$sh" --shards 3 --classes 3 --per-class 6 --size 96x72 --seed 1 >/dev/null ||
    fail "make-dataset --shards"
for k in 0 1 2; do
    [ -f "$sh/train-00000$k.tar" ] || fail "make-dataset --shards did not write train-00000$k.tar"
done
[ "$(ls "$sh" | wc -l)" -eq 3 ] || fail "make-dataset --shards wrote more than the shards: $(ls "$sh")"
"$g" make-dataset "$sh" --shards 3 --classes 3 --per-class 6 --size 96x72 2>/dev/null &&
    fail "make-dataset --shards must refuse a non-empty directory"
# --fields comes from the settings table: a field the keys lack leaves no sample, named
out=$("$g" verify --data "$sh/train-{000000..000002}.tar" --fields 'jpg,cls,txt' 2>&1) &&
    fail "verify --fields txt of shards without captions must fail"
echo "$out" | grep -q "no samples in 3 shard(s) .*no .txt member" || fail "verify --fields: $out"
"$g" verify --data "$sh/train-{000000..000002}.tar" --fields 'jpg;png,cls' >/dev/null ||
    fail "verify --fields 'jpg;png,cls'"
# Every declared field of every sample is checked (tests/fields_set.py):
# a clean set passes; one key of each damage is BAD, named by its member,
# with its field and why, counted, and the exit status is 1.
fs=$tmp/fields
mkdir -p "$fs/clean" "$fs/damaged"
python3 "$tests_dir/fields_set.py" "$fs/clean"
python3 "$tests_dir/fields_set.py" "$fs/damaged" damaged
spec='png,cls,txt,latent.npy,seg.png:mask,boxes.npy:boxes'
if ! "$g" doctor --no-bandwidth 2>/dev/null | grep -q 'PNG *libspng'; then
    # masks need libspng: refused by name at open; the rest without them
    out=$("$g" verify --data "$fs/clean/s-{0..1}.tar" --fields "$spec" 2>&1) &&
        fail "verify --fields with a mask, no libspng: not refused"
    echo "$out" | grep -q "field 'seg.png': a mask needs libspng" ||
        fail "verify --fields with a mask, no libspng: $out"
    spec='png,cls,txt,latent.npy,boxes.npy:boxes'
fi
out=$("$g" verify --data "$fs/clean/s-{0..1}.tar" --fields "$spec") ||
    fail "verify --fields on a clean set: $out"
echo "$out" | grep -q '^6 samples, 0 bad$' || fail "verify --fields, clean: $out"
set +e
out=$("$g" verify --data "$fs/damaged/s-{0..1}.tar" --fields "$spec" 2>&1)
rc=$?
json=$("$g" verify --data "$fs/damaged/s-{0..1}.tar" --fields "$spec" --json)
set -e
[ $rc -eq 1 ] || fail "verify --fields with damaged members must exit 1, got $rc: $out"
masks="rgbseg\.seg\.png: field 'seg\.png': mask: RGB PNG|smallseg\.seg\.png: field 'seg\.png': mask: 8x6 PNG for a 16x12 image"
bad=7
case $spec in *mask*) ;; *) masks='' bad=5 ;; esac
IFS='|'
for want in "badtxt\.txt: field 'txt': not UTF-8 at byte 3 of 7" \
    "badshape\.latent\.npy: field 'latent\.npy': float32 (3, 2), the field's is float32 (2, 3)" \
    "huge\.latent\.npy: field 'latent\.npy': npy: shape (1000000, 1000000) claims" \
    $masks \
    "nanbox\.boxes\.npy: field 'boxes\.npy': boxes row 0: y1 is nan" \
    "nonpy\.latent\.npy: field 'latent\.npy': no \.latent\.npy member"; do
    echo "$out" | grep -q "^BAD $fs/damaged/s-[01]\.tar:$want" || fail "verify --fields names $want: $out"
done
unset IFS
echo "$out" | grep -q "^13 samples, $bad bad\$" || fail "verify --fields summary: $out"
echo "$json" | grep -q "\"bad\": *$bad" || fail "verify --fields --json bad: $json"
echo "$json" | grep -q '"path": *"[^"]*s-0\.tar:nonpy\.latent\.npy"' ||
    fail "verify --fields --json names the key: $json"
if command -v tar >/dev/null 2>&1; then
    n=$(for k in 0 1 2; do tar -tf "$sh/train-00000$k.tar"; done | grep -c '^class_0[0-2]_img_0000[0-5]\.\(jpg\|cls\)$')
    [ "$n" -eq 36 ] || fail "tar lists $n of the 36 members"
fi
if command -v python3 >/dev/null 2>&1; then
    python3 - "$sh" "$d" <<'PY' || fail "python tarfile cannot read the shards"
import sys, tarfile, glob
sh = sys.argv[1]
keys = {}
for f in sorted(glob.glob(sh + "/train-*.tar")):
    with tarfile.open(f) as t:
        for m in t.getmembers():
            assert m.isfile(), m.name
            keys.setdefault(m.name.rsplit(".", 1)[0], {})[m.name.rsplit(".", 1)[1]] = t.extractfile(m).read()
assert len(keys) == 18, len(keys)
for k, v in keys.items():
    assert v["cls"] == str(int(k.split("_")[1])).encode(), (k, v["cls"])
    assert v["jpg"][:2] == b"\xff\xd8", k
PY
fi
src="$sh/train-{000000..000002}.tar"
out=$("$g" verify --data "$src") || fail "verify on clean shards: $out"
echo "$out" | grep -q '^18 samples, 0 bad$' || fail "verify summary on shards: $out"
json=$("$g" bench --input-only --data "$src" --threads 2 --image-size 32 --batch-size 4 --json) ||
    fail "bench on shards: $json"
echo "$json" | grep -q '"samples": *18' || fail "bench on shards delivered the wrong count: $json"
echo "$json" | grep -q '"single_thread_files": *18' || fail "bench on shards: single-thread samples: $json"
echo "$json" | grep -q '"errors": *0' || fail "bench on shards counted errors: $json"
# The shard order, by the table's own options: every sample once.
json=$("$g" bench --input-only --data "$src" --threads 2 --image-size 32 --batch-size 4 \
    --order shards --shard-window 2 --json) || fail "bench --order shards: $json"
echo "$json" | grep -q '"samples": *18' || fail "bench --order shards delivered the wrong count: $json"
out=$("$g" bench --input-only --data "$d" --order shards 2>&1) &&
    fail "bench --order shards on an ImageFolder must fail"
echo "$out" | grep -q 'order shards needs tar shards' ||
    fail "bench --order shards on an ImageFolder: $out"
# A damaged member (its JPEG marker overwritten in place): one bad sample,
# named shard:member. The first member's data starts at byte 512.
printf 'XXXX' | dd of="$sh/train-000001.tar" bs=1 seek=512 conv=notrunc 2>/dev/null
set +e
out=$("$g" verify --data "$src" 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] || fail "verify with a damaged member must exit 1, got $rc: $out"
echo "$out" | grep -q "^BAD $sh/train-000001\.tar:class_0[0-2]_img_0000[0-5]\.jpg: " ||
    fail "verify names the damaged member: $out"
echo "$out" | grep -q '^18 samples, 1 bad$' || fail "verify summary with a damaged member: $out"
# A shard cut mid-member is a malformed archive: verify lists it (exit 1),
# naming the shard and the offset, and checks the rest; under
# --on-shard-error fail the index refuses it (exit 2). (Off a 512-byte
# boundary: a tar cut on one is a shorter valid archive.)
size=$(wc -c <"$sh/train-000002.tar")
dd if="$sh/train-000002.tar" of="$tmp/cut.tar" bs=1 count=$((size / 2 + 100)) 2>/dev/null
mv "$tmp/cut.tar" "$sh/train-000002.tar"
set +e
out=$("$g" verify --data "$src" 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] || fail "verify on a cut shard must exit 1, got $rc: $out"
echo "$out" | grep -q "^DAMAGED $sh/train-000002\.tar: offset [0-9]*: " || fail "verify names the cut shard: $out"
set +e
out=$("$g" verify --data "$src" --on-shard-error fail 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] || fail "verify --on-shard-error fail on a cut shard must exit 2, got $rc: $out"
echo "$out" | grep -q 'train-000002\.tar: offset [0-9]*: ' || fail "verify names the cut shard: $out"

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
# With no --model-width the CPU path calibrates too: the width is the first
# tried whose step is >= factor x the input per batch (or the widest tried),
# and the JSON says so; a set with no full batch to time keeps width 7.
json=$("$g" train --data "$t" --epochs 1 --batch-size 4 --image-size 16 --threads 1 \
       --device cpu --loader gpufeed --json) || fail "train, calibrated: $json"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
k = d["calibration"]
assert d["width_calibrated"] is True and k["input_threads"] == 1 and k["input_ms"] > 0, d
steps = [w["step_ms"] for w in k["widths"]]
reached = [s >= k["factor"] * k["input_ms"] for s in steps]
assert d["model_width"] == k["widths"][-1]["width"] and k["step_ms"] == steps[-1], k
assert not any(reached[:-1]) and k["met"] == reached[-1], k
' || fail "train: the calibrated width is not the narrowest that reaches the factor: $json"
json=$("$g" train --data "$t" --epochs 1 --batch-size 32 --image-size 16 --threads 1 \
       --device cpu --loader gpufeed --json) || fail "train, too few batches: $json"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["width_calibrated"] is False and d["model_width"] == 7 and "calibration" not in d, d
assert d["width_note"].startswith("fewer samples than a batch"), d
' || fail "train: a set too small to time must keep width 7 and say why: $json"

# train on any source: --train-data a list file or the shards gpufeed
# prepare wrote, --val-data the folder; both loops (the synchronous one
# reads through the index). The sets are named, with their counts; a
# class-count mismatch and a second way to name the data are usage errors.
(cd "$tmp" && k=0 && for c in $(ls train-data/train); do
    for f in train-data/train/"$c"/*.jpg; do echo "$f $k"; done
    k=$((k + 1))
done) >"$tmp/train.txt"
tn="--epochs 1 --batch-size 4 --image-size 16 --model-width 2 --threads 1 --device cpu"
json=$("$g" train --train-data "$tmp/train.txt" --val-data "$t/val" $tn --json) ||
    fail "train on a list file: $json"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
want = {"train_data": sys.argv[1], "val_data": sys.argv[2], "train_samples": 16,
        "val_samples": 8, "classes": 2}
assert {k: d[k] for k in want} == want and "data" not in d, d
assert [m["samples"] for m in d["modes"]] == [16, 16], d["modes"]
assert all(0 <= e["accuracy"] <= 1 for e in d["epochs"]), d["epochs"]
' "$tmp/train.txt" "$t/val" || fail "train on a list file: $json"
GF_NO_PROGRESS=1 "$g" prepare "$t/train" "$tmp/prep" --max-side 48 --shard-samples 6 >/dev/null ||
    fail "prepare for train"
shards="$tmp/prep/train-{000000..000002}.tar"
out=$("$g" train --train-data "$shards" --val-data "$t/val" $tn) || fail "train on shards: $out"
echo "$out" | grep -qx 'gpufeed train  (16 train / 8 val images, 2 classes)' ||
    fail "train on shards, counts: $out"
echo "$out" | grep -qxF "  train data  $shards" || fail "train on shards names them: $out"
echo "$out" | grep -qxF "  val data    $t/val" || fail "train on shards names val: $out"
echo "$out" | grep -q '^  gpufeed  epoch 1/1 ' || fail "train on shards, gpufeed epoch: $out"
usage_refused() { # $1: text the error must hold, then train's arguments
    text=$1
    shift
    rc=0
    err=$("$g" train "$@" $tn 2>&1 >/dev/null) || rc=$?
    [ $rc -eq 2 ] || fail "train $*: exit $rc, want 2: $err"
    case $err in *"$text"*) ;; *) fail "train $*: the error must say '$text': $err" ;; esac
}
"$g" make-dataset "$tmp/val3" --classes 3 --per-class 1 --size 32x32 >/dev/null
usage_refused "the training set $shards has 2 classes (largest label + 1), the validation set $tmp/val3 has 3 (class folders)" \
    --train-data "$shards" --val-data "$tmp/val3"
usage_refused "--data $t names the training and validation sets itself" \
    --data "$t" --train-data "$tmp/train.txt" --val-data "$t/val"
usage_refused "--train-data needs --val-data" --train-data "$tmp/train.txt"
usage_refused "validation set $tmp/no-such-{0..1}.tar: $tmp/no-such-0.tar: " \
    --train-data "$tmp/train.txt" --val-data "$tmp/no-such-{0..1}.tar"

# --allreduce nccl: refused with the reason where it cannot run (built
# without NCCL, --device cpu, no library, no CUDA device), never a crash.
tr="$g train --data $t --epochs 1 --batch-size 4 --image-size 16 --model-width 2 --threads 1"
rc=0
err=$($tr --allreduce nccl --device cpu 2>&1 >/dev/null) || rc=$?
[ $rc -eq 2 ] || fail "--allreduce nccl --device cpu: exit $rc, want 2: $err"
echo "$err" | grep -q -- "--allreduce nccl" || fail "--allreduce nccl --device cpu: $err"
err=$(GPUFEED_NCCL_LIBRARY=$tmp/no-such-libnccl.so $tr --allreduce nccl 2>&1 >/dev/null) &&
    fail "--allreduce nccl with a missing library must fail"
case $err in
*"built without NCCL"* | *"$tmp/no-such-libnccl.so"*) ;;
*) fail "--allreduce nccl with a missing library must name it: $err" ;;
esac
if [ -z "$(nvidia-smi -L 2>/dev/null)" ]; then # no GPU: refused, whatever the library
    $tr --allreduce nccl >/dev/null 2>&1 && fail "--allreduce nccl without a CUDA device must fail"
fi
rc=0
"$g" train --allreduce rings 2>/dev/null || rc=$?
[ $rc -eq 2 ] || fail "--allreduce rings must be a usage error (exit $rc)"

# doctor: reports and exits 0 with or without a GPU; the last line is the
# summary; --json is one object with the same facts.
out=$("$g" doctor) || fail "doctor must exit 0: $out"
echo "$out" | tail -n 1 | grep -Eq '^(ok|missing): ' || fail "doctor summary line: $out"
json=$("$g" doctor --json --no-bandwidth) || fail "doctor --json must exit 0: $json"
for k in cuda io_uring decoders cores summary; do
    echo "$json" | grep -q "\"$k\":" || fail "doctor --json lacks $k: $json"
done
[ "$(echo "$json" | wc -l)" -eq 1 ] || fail "doctor --json must print one line: $json"
if command -v python3 >/dev/null 2>&1; then
    echo "$json" | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["summary"].split(":")[0] in ("ok", "missing"), d' ||
        fail "doctor --json does not parse: $json"
fi
"$g" doctor --no-such-option 2>/dev/null && fail "doctor with a bad option must fail"
# train --resume refuses what it cannot continue (exit 2, saying why): a
# checkpoint with bytes after its end, one made on another data set, and
# --epochs at or below the epochs it has done. A good one resumes.
ck=$tmp/ck
tr1="train --data $t --batch-size 4 --image-size 16 --model-width 2 --threads 1 --device cpu --loader gpufeed"
"$g" $tr1 --epochs 1 --checkpoint "$ck" >/dev/null || fail "train --checkpoint"
"$g" $tr1 --epochs 2 --resume "$ck" --json >"$tmp/ck.data.json" ||
    fail "train --resume of a good checkpoint"
# With no --model-width, --resume goes on at the checkpoint's width.
tr0="train --data $t --batch-size 4 --image-size 16 --threads 1 --device cpu --loader gpufeed --json"
w=$("$g" $tr0 --epochs 1 --checkpoint "$ck.cal" | python3 -c 'import json, sys; print(json.load(sys.stdin)["model_width"])') ||
    fail "train --checkpoint, calibrated"
json=$("$g" $tr0 --epochs 2 --resume "$ck.cal") || fail "train --resume, calibrated: $json"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["model_width"] == int(sys.argv[1]) and d["width_note"].startswith("--resume"), d
' "$w" || fail "train --resume must take the checkpoint's width $w: $json"
resume_refused() { # $1: what, $2: text the error must hold, then the command's arguments
    what=$1 text=$2
    shift 2
    rc=0
    err=$("$g" "$@" 2>&1 >/dev/null) || rc=$?
    [ $rc -eq 2 ] || fail "$what: exit $rc, want 2: $err"
    case $err in *"$text"*) ;; *) fail "$what: the error must say '$text': $err" ;; esac
}
# --stop-after: stopped inside the first epoch (2 of its 4 steps) as a
# preempted job, exit 0 saying so; its checkpoint resumes there, to the
# weights of a run that did not stop ($tmp/ck.data.json: 2 epochs, resumed
# at the epoch's end; tests/mpi.sh checks that against 2 straight).
"$g" $tr1 --epochs 2 --stop-after 2 --checkpoint "$ck.mid" --json >"$tmp/ck.mid.json" ||
    fail "train --stop-after 2: $(cat "$tmp/ck.mid.json")"
"$g" $tr1 --epochs 2 --resume "$ck.mid" --json >"$tmp/ck.midr.json" ||
    fail "train --resume of a --stop-after checkpoint: $(cat "$tmp/ck.midr.json")"
python3 - "$tmp/ck.data.json" "$tmp/ck.mid.json" "$tmp/ck.midr.json" <<'EOF' || fail "--stop-after, --resume"
import json, sys
a, s, b = (json.load(open(p)) for p in sys.argv[1:])
assert s["stopped"] and s["stopped_epoch"] == 0 and s["stopped_position"] == 8, s
assert s["epochs"] == [] and s["modes"][-1]["steps"] == 2, s
assert not b["stopped"] and b["start_epoch"] == 0 and b["start_position"] == 8, b
assert len(b["epochs"]) == 2 and b["modes"][-1]["steps"] == 6, b
assert a["weights_checksum"] == b["weights_checksum"], (a["weights_checksum"], b["weights_checksum"])
EOF
out=$("$g" $tr1 --epochs 2 --stop-after 1) || fail "train --stop-after 1: $out"
case $out in *"stopped after 1 step (--stop-after): inside epoch 1/2, at sample 4"*) ;;
*) fail "train --stop-after 1 must say where it stopped: $out" ;; esac
for bad in "--stop-after 0" "--stop-after x" "--stop-after 3 --loader both"; do
    rc=0
    "$g" $tr1 $bad >/dev/null 2>&1 || rc=$?
    [ $rc -eq 2 ] || fail "train $bad: exit $rc, want 2"
done
resume_refused "--epochs 1 on a 1-epoch checkpoint" "1 epochs are done already; --epochs 1 trains none" \
    $tr1 --epochs 1 --resume "$ck"
cp "$ck" "$ck.long" && printf 'x' >>"$ck.long"
resume_refused "trailing bytes" "bytes after the checkpoint's end" $tr1 --epochs 2 --resume "$ck.long"
t2=$tmp/train-data-2
"$g" make-dataset "$t2/train" --classes 2 --per-class 8 --size 64x48 --seed 5 >/dev/null
cp -r "$t/val" "$t2/val"
mv "$t2/train/class_0000" "$t2/train/class_0000x" 2>/dev/null ||
    mv "$t2/train/$(ls "$t2/train" | head -n 1)" "$t2/train/renamed"
resume_refused "another data set" "saved on another data set" \
    train --data "$t2" --batch-size 4 --image-size 16 --model-width 2 --threads 1 --device cpu \
    --loader gpufeed --epochs 2 --resume "$ck"
# The checkpoint records the training set, not how it was named: --data's
# train/ resumes as --train-data, to the same weights; the same images as
# shards are other paths, another set.
trs="--batch-size 4 --image-size 16 --model-width 2 --threads 1 --device cpu --loader gpufeed"
"$g" train --train-data "$t/train" --val-data "$t/val" $trs --epochs 2 --resume "$ck" --json \
    >"$tmp/ck.split.json" || fail "train --resume with --train-data: $(cat "$tmp/ck.split.json")"
python3 - "$tmp/ck.data.json" "$tmp/ck.split.json" <<'EOF' || fail "--resume with --train-data is not the --data run"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["weights_checksum"] == b["weights_checksum"] and b["start_epoch"] == 1, (a, b)
EOF
resume_refused "the same images as shards" "the training set $shards has 16 samples" \
    train --train-data "$shards" --val-data "$t/val" $trs --epochs 2 --resume "$ck"

# verify when every sample is bad (no batch at all): each file is listed
# once and the exit is 1, as when one good file is present; --json too.
ab=$tmp/all-bad
"$g" make-dataset "$ab" --classes 2 --per-class 40 --size 32x32 --seed 3 >/dev/null
for f in "$ab"/class_0*/img_000*.jpg; do printf 'not a jpeg' >"$f"; done
: >"$ab/class_00/img_00001.jpg"
head -c 100 "$d/class_00/img_00000.jpg" >"$ab/class_01/img_00002.jpg"
set +e
out=$("$g" verify --data "$ab" 2>&1)
rc=$?
json=$("$g" verify --data "$ab" --json)
jrc=$?
set -e
[ $rc -eq 1 ] || fail "verify with every sample bad must exit 1, got $rc: $out"
[ $jrc -eq 1 ] || fail "verify --json with every sample bad must exit 1, got $jrc: $json"
echo "$out" | grep -q '^80 samples, 80 bad$' || fail "verify summary, every sample bad: $out"
[ "$(echo "$out" | grep -c '^BAD ')" -eq 80 ] || fail "verify lists every bad file: $out"
[ "$(echo "$out" | grep '^BAD ' | sed 's/: .*//' | sort -u | wc -l)" -eq 80 ] ||
    fail "verify lists each bad file once: $out"
echo "$out" | grep -q "^BAD $ab/class_00/img_00001.jpg: .*empty" || fail "verify names the empty file: $out"
echo "$out" | grep -q "^BAD $ab/class_01/img_00002.jpg: .*truncated" || fail "verify names the cut file: $out"
if command -v python3 >/dev/null 2>&1; then
    echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
paths = [b["path"] for b in d["bad_samples"]]
assert d["samples"] == 80 and d["bad"] == d["samples"], d
assert len(paths) == 80 and len(set(paths)) == 80, paths
' || fail "verify --json, every sample bad: $json"
fi

# Names printed safely: a file whose name holds a newline, a carriage
# return, an escape sequence and a byte that is not UTF-8 is one escaped
# line of verify's text (it can neither erase nor forge a line), and its
# exact bytes in --json (the byte as \u00ff). Error lines escape too.
# (printf, not echo: dash's echo would read the backslashes.)
q=$tmp/names
"$g" make-dataset "$q" --classes 1 --per-class 2 --size 32x32 --seed 4 >/dev/null
printf 'not a jpeg' >"$q/class_00/$(printf 'a\nBAD forged\r\033[2Kb\377.jpg')"
set +e
out=$("$g" verify --data "$q" 2>&1)
json=$("$g" verify --data "$q" --json)
err=$("$g" verify --data "$q/no$(printf '\033')where" 2>&1)
set -e
[ "$(printf '%s\n' "$out" | wc -l)" -eq 2 ] || fail "verify prints a name on one line: $out"
printf '%s\n' "$out" | grep -qF "BAD $q/class_00/a\nBAD forged\r\033[2Kb\xff.jpg: " ||
    fail "verify escapes the name: $out"
printf '%s\n' "$out" | grep -q '^3 samples, 1 bad$' || fail "verify summary, odd name: $out"
case "$out$err" in
*"$(printf '\r')"* | *"$(printf '\033')"*) fail "a control byte reached the terminal: $out $err" ;;
esac
printf '%s\n' "$err" | grep -qF "$q/no\033where" || fail "an error line escapes the name: $err"
if command -v python3 >/dev/null 2>&1; then
    printf '%s\n' "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
want = sys.argv[1].encode() + b"/class_00/a\nBAD forged\r\x1b[2Kb\xff.jpg"
assert [b["path"].encode("latin-1") for b in d["bad_samples"]] == [want], d
' "$q" || fail "verify --json keeps the name's bytes: $json"
fi

# verify under a launcher (SLURM_PROCID/NTASKS are set in every sbatch
# step, OMPI_COMM_WORLD_* under mpirun) still checks the whole data set;
# --rank/--world check one share, and the summary says so.
for env in "SLURM_PROCID=1 SLURM_NTASKS=4" "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=4"; do
    set +e
    out=$(env $env "$g" verify --data "$ab" 2>&1)
    rc=$?
    set -e
    [ $rc -eq 1 ] || fail "verify under $env must exit 1, got $rc: $out"
    echo "$out" | grep -q '^80 samples, 80 bad$' || fail "verify under $env checks everything: $out"
    [ "$(echo "$out" | grep -c '^BAD ')" -eq 80 ] || fail "verify under $env lists every file: $out"
done
set +e
out=$(SLURM_PROCID=1 SLURM_NTASKS=4 "$g" verify --data "$ab" --rank 1 --world 4 2>&1)
json=$(SLURM_PROCID=0 SLURM_NTASKS=2 "$g" verify --data "$ab" --rank 1 --world 4 --json)
set -e
echo "$out" | grep -q '^20 samples, 20 bad (rank 1 of 4: its share only)$' ||
    fail "verify --rank 1 --world 4 names the share: $out"
[ "$(echo "$out" | grep -c '^BAD ')" -eq 20 ] || fail "verify --rank 1 --world 4 lists its share: $out"
echo "$json" | grep -q '"bad": *20, *"rank": *1, *"world": *4' || fail "verify --json names the share: $json"
"$g" verify --data "$ab" --rank 1 2>/dev/null && fail "verify --rank without --world must fail"
"$g" verify --data "$ab" --rank 4 --world 4 2>/dev/null && fail "verify --rank 4 --world 4 must fail"

# ImageFolder extensions: torchvision's by default, so a .gif and a .tga
# (real images, built here) are left out and counted; --extensions all
# takes them. A .tif is in torchvision's list: a bad sample, named as an
# unsupported format.
hexw() { for h in $(echo "$1" | sed 's/../& /g'); do printf "\\$(printf %o "0x$h")"; done; }
x=$tmp/ext
"$g" make-dataset "$x" --classes 2 --per-class 3 --size 32x32 --seed 4 >/dev/null
hexw 47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b >"$x/class_00/a.gif"
hexw 000002000000000000000000010001001800ff8000 >"$x/class_01/b.TGA"
hexw 49492a0008000000 >"$x/class_01/c.tif"
set +e
out=$("$g" verify --data "$x" 2>&1)
rc=$?
json=$("$g" verify --data "$x" --json)
aout=$("$g" verify --data "$x" --extensions all 2>&1)
set -e
[ $rc -eq 1 ] || fail "verify with a .tif must exit 1, got $rc: $out"
echo "$out" | grep -q "^BAD $x/class_01/c.tif: TIFF: not a supported format$" || fail "verify names the TIFF: $out"
echo "$out" | grep -q "^left out of the folder: 1 .gif, 1 .tga (not in torchvision's list; --extensions all takes them)$" ||
    fail "verify says which extensions it skipped: $out"
echo "$out" | grep -q '^7 samples, 1 bad$' || fail "verify summary, torchvision's extensions: $out"
echo "$json" | grep -q '"extensions": *"torchvision", *"skipped_extensions": *{".gif": *1, *".tga": *1, *".psd": *0, *".pnm": *0, *".pbm": *0, *"other": *0}' ||
    fail "verify --json counts the skipped extensions: $json"
echo "$aout" | grep -q '^9 samples, 1 bad$' || fail "verify --extensions all takes the .gif and .tga: $aout"
echo "$aout" | grep -q 'left out' && fail "verify --extensions all left files out: $aout"
# WebP: make-dataset --format webp (lossy) as a folder and webp-lossless
# as shards, verified whole, and read by bench; a build without libwebp
# refuses the format with its reason.
w=$tmp/webp
set +e
err=$("$g" make-dataset "$w" --format webp --classes 3 --per-class 4 --size 96x72 --seed 3 2>&1 >/dev/null)
rc=$?
set -e
if [ $rc -ne 0 ]; then
    echo "$err" | grep -q 'this build has no WebP encoder' || fail "make-dataset --format webp: $err"
else
    [ "$(find "$w" -name '*.webp' | wc -l)" -eq 12 ] || fail "make-dataset --format webp wrote the wrong count"
    head -c 4 "$w/class_00/img_00000.webp" | grep -q RIFF || fail "make-dataset --format webp: not RIFF"
    out=$("$g" verify --data "$w") || fail "verify on a webp set: $out"
    echo "$out" | grep -q '^12 samples, 0 bad$' || fail "verify summary on webp: $out"
    json=$("$g" bench --input-only --data "$w" --threads 1 --image-size 32 --batch-size 4 --json) ||
        fail "bench on webp: $json"
    echo "$json" | grep -q '"samples": *12' || fail "bench on webp delivered the wrong count: $json"
    echo "$json" | grep -q '"errors": *0' || fail "bench on webp counted errors: $json"
    ws=$tmp/webp-shards
    "$g" make-dataset "$ws" --format webp-lossless --shards 2 --classes 3 --per-class 4 --size 96x72 \
        --seed 3 >/dev/null || fail "make-dataset --format webp-lossless --shards"
    if command -v tar >/dev/null 2>&1; then
        n=$(for k in 0 1; do tar -tf "$ws/train-00000$k.tar"; done | grep -c '^class_0[0-2]_img_0000[0-3]\.\(webp\|cls\)$')
        [ "$n" -eq 24 ] || fail "tar lists $n of the 24 webp shard members"
    fi
    json=$("$g" verify --data "$ws/train-{000000..000001}.tar" --json) || fail "verify on webp shards: $json"
    echo "$json" | grep -q '"samples": *12' || fail "verify on webp shards: samples: $json"
    echo "$json" | grep -q '"bad": *0' || fail "verify on webp shards: bad: $json"
    # A cut file is named as one.
    f=$w/class_01/img_00002.webp
    head -c $(($(wc -c <"$f") / 2)) "$f" >"$tmp/cut.webp" && mv "$tmp/cut.webp" "$f"
    set +e
    out=$("$g" verify --data "$w" 2>&1)
    rc=$?
    set -e
    [ $rc -eq 1 ] || fail "verify with a cut webp must exit 1, got $rc: $out"
    echo "$out" | grep -q 'BAD .*class_01/img_00002.webp: WebP: premature end of data (truncated?)$' ||
        fail "verify names the cut webp: $out"
    echo "$out" | grep -q '^12 samples, 1 bad$' || fail "verify summary with a cut webp: $out"
fi

# One damaged file of each class (tests/damaged_set.py: JPEG scan and cut,
# PNG CRCs, deflate, Adler-32 and cut, GIF/BMP/TGA/PNM/PSD cut or with
# header nonsense, WebP cut, a FIFO, a directory, a TIFF) among good ones:
# verify --json lists each damaged file once with its error in every
# strictness (or, in lenient, among warned_samples), and no good file.
ds=$tmp/damaged
"$g" make-dataset "$ds-src/j" --classes 1 --per-class 1 --size 64x48 >/dev/null
"$g" make-dataset "$ds-src/p" --classes 1 --per-class 1 --size 64x48 --format png >/dev/null
dflags=$("$g" doctor --json --no-bandwidth | python3 -c 'import json, sys; d = json.load(sys.stdin)["decoders"]
print(" ".join(f for f, k in (("--turbo", "libjpeg_turbo"), ("--spng", "libspng"), ("--webp", "libwebp")) if d[k]))')
webp=
if echo "$dflags" | grep -q -- --webp; then
    "$g" make-dataset "$ds-src/w" --classes 1 --per-class 1 --size 64x48 --format webp >/dev/null
    webp=$ds-src/w/class_00/img_00000.webp
fi
python3 "$tests_dir/damaged_set.py" make "$ds" "$ds-src/j/class_00/img_00000.jpg" \
    "$ds-src/p/class_00/img_00000.png" $webp
for m in whole strict lenient; do
    set +e
    timeout 60 "$g" verify --data "$ds" --extensions all --strictness $m --json >"$tmp/ds-$m.json"
    rc=$?
    set -e
    [ $rc -eq 1 ] || fail "verify --strictness $m on the damaged set must exit 1, got $rc"
    python3 "$tests_dir/damaged_set.py" check "$ds" $m "$tmp/ds-$m.json" $dflags || fail "damaged set, $m"
done

# Damaged shards among good ones (issue 19): one cut mid-data, one cut
# mid-header, one zero bytes, one with a bad header checksum, one a JPEG
# renamed .tar. verify lists each once, with its offset and counts, checks
# the good ones, sums them up and exits 1; bench warns once per shard.
dm=$tmp/damaged-shards
"$g" make-dataset "$dm" --classes 2 --per-class 8 --size 64x48 --shards 8 --seed 3 >/dev/null
python3 - "$dm" "$ds-src/j/class_00/img_00000.jpg" <<'PY' || fail "could not damage the shards"
import sys, tarfile
d, jpg = sys.argv[1], sys.argv[2]
def path(k): return "%s/train-%06d.tar" % (d, k)
def header_at(k, n):  # offset of the n-th member's header
    with tarfile.open(path(k)) as t:
        return t.getmembers()[n].offset
at = {k: header_at(k, 2) for k in (1, 2, 4)}  # before any file is rewritten
raw = open(path(1), "rb").read()
open(path(1), "wb").write(raw[:at[1] + 512 + 100])                # mid-data of member 2
raw = open(path(2), "rb").read()
open(path(2), "wb").write(raw[:at[2] + 200])                      # mid-header of member 2
open(path(3), "wb").close()                                       # zero bytes
raw = bytearray(open(path(4), "rb").read())
raw[at[4] + 10] ^= 1                                              # checksum of member 2
open(path(4), "wb").write(raw)
open(path(5), "wb").write(open(jpg, "rb").read())                 # a JPEG
PY
dsrc="$dm/train-{000000..000007}.tar"
set +e
out=$("$g" verify --data "$dsrc" 2>&1)
rc=$?
json=$("$g" verify --data "$dsrc" --json)
set -e
[ $rc -eq 1 ] || fail "verify on damaged shards must exit 1, got $rc: $out"
[ "$(echo "$out" | grep -c '^DAMAGED ')" -eq 5 ] || fail "verify lists 5 damaged shards: $out"
echo "$out" | grep -q "^shards: 3 good, 5 damaged (4 members lost)$" || fail "shards summary: $out"
echo "$out" | grep -q "^DAMAGED $dm/train-000003.tar: offset 0: zero bytes" || fail "zero-byte shard: $out"
echo "$out" | grep -q "^DAMAGED $dm/train-000005.tar: offset 0: not a tar archive: the file starts like a JPEG image; 0 members kept, 1 lost$" ||
    fail "JPEG shard: $out"
python3 - "$json" "$dm" <<'PY' || fail "verify --json on damaged shards: $json"
import json, sys
j, d = json.loads(sys.argv[1]), sys.argv[2]
got = {x["path"]: (x["error"], x["kept"], x["lost"]) for x in j["damaged_shards"]}
want = {
    d + "/train-000001.tar": ("GF_ETRUNC", 2, 1),
    d + "/train-000002.tar": ("GF_ETRUNC", 2, 1),
    d + "/train-000003.tar": ("GF_EEMPTY", 0, 0),
    d + "/train-000004.tar": ("GF_ECORRUPT", 2, 1),
    d + "/train-000005.tar": ("GF_ECORRUPT", 0, 1),
}
assert got == want, got
assert len(j["damaged_shards"]) == 5 and j["shards"] == 8 and j["shards_damaged"] == 5
assert j["shard_members_lost"] == 4 and j["bad"] == 0
assert j["samples"] == 3 * 2 + 3, j["samples"]  # 2 whole shards of 2 + 1 per cut one
PY
err=$("$g" bench --input-only --data "$dsrc" --threads 1 --image-size 32 --batch-size 4 --json 2>&1 >/dev/null)
[ "$(echo "$err" | grep -c '^gpufeed bench: warning: damaged shard ')" -eq 5 ] ||
    fail "bench warns once per damaged shard: $err"
set +e
out=$("$g" bench --input-only --data "$dsrc" --threads 1 --image-size 32 --on-error fail 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] && echo "$out" | grep -q "train-000001.tar: offset [0-9]*: member size" ||
    fail "bench --on-error fail names the first damaged shard: $rc $out"

# Every shard damaged (none keeps a sample): verify still lists each one
# and exits 1, in text and JSON; the loader itself refuses the set.
ad=$tmp/all-damaged
mkdir "$ad"
printf 'x' >"$ad/a.tar"
: >"$ad/b.tar"
head -c 700 "$d/class_00/img_00000.jpg" >"$ad/c.tar"
set +e
out=$("$g" verify --data "$ad/a.tar,$ad/b.tar,$ad/c.tar" 2>&1)
rc=$?
json=$("$g" verify --data "$ad/a.tar,$ad/b.tar,$ad/c.tar" --json 2>/dev/null)
jrc=$?
set -e
[ $rc -eq 1 ] && [ $jrc -eq 1 ] || fail "verify on all-damaged shards must exit 1, got $rc/$jrc: $out"
[ "$(echo "$out" | grep -c '^DAMAGED ')" -eq 3 ] || fail "verify lists each damaged shard: $out"
echo "$out" | grep -q 'c.tar: offset 0: not a tar archive: the file starts like a JPEG image' ||
    fail "verify names the JPEG posing as a shard: $out"
echo "$out" | grep -q '^shards: 3 damaged (2 members lost), none with a sample$' || fail "all-damaged summary: $out"
echo "$json" | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["shards_damaged"] == 3 and len(d["damaged_shards"]) == 3, d' ||
    fail "verify --json on all-damaged shards: $json"

# The loader settings are the library's table (gpufeed settings lists it):
# every row is an option of the loader commands, both spellings of a choice
# work, and a refusal is the library's reason under the option's name.
json=$("$g" settings --json --dtype f16 --layout nchw --max-pixels 1000 --copy-streams slot \
       --scale-min 0.5 --std 2,3 --shuffle=no) || fail "settings --json: $json"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
want = {"dtype": "float16", "layout": "nchw", "max_pixels": "1000", "copy_stream_per_slot": "1",
        "scale_min": "0.5", "std": "2,3,1,1", "shuffle": "0", "batch_size": "64"}
assert {k: d[k] for k in want} == want, d
' || fail "settings --json after options: $json"
# One value is every channel's: --mean 128 is (128, 128, 128), not (128, 0, 0).
json=$("$g" settings --json --mean 128) || fail "settings --json --mean 128: $json"
echo "$json" | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["mean"] == "128,128,128,128", d' ||
    fail "--mean 128 must set every channel: $json"
# Each command takes every row (its default given back) but the choices it
# makes itself; a row added to the table is taken by all three.
own_choices=" verify:seed verify:epochs verify:batch_size verify:prefetch_depth verify:io "
own_choices="$own_choices verify:decoder verify:transform verify:on_error verify:device "
own_choices="$own_choices verify:dtype verify:layout verify:autotune train:io train:decoder "
own_choices="$own_choices train:transform train:on_error train:rank train:world train:dtype "
own_choices="$own_choices train:layout train:extensions bench:rank bench:world verify:shuffle "
own_choices="$own_choices verify:height verify:width train:height train:width train:channels "
own_choices="$own_choices train:mean train:std train:drop_last "
own_choices="$own_choices verify:drop_last verify:scale_min verify:scale_max verify:ratio_min "
own_choices="$own_choices verify:ratio_max verify:flip_prob verify:device_id verify:mean verify:std "
own_choices="$own_choices verify:flip_on_device verify:pinned_max_bytes verify:device_max_bytes "
own_choices="$own_choices verify:max_threads verify:copy_stream_per_slot "
for row in $("$g" settings --json | python3 -c 'import json, sys; print(" ".join(f"{k}={v}" for k, v in json.load(sys.stdin).items()))'); do
    name=${row%%=*}
    opt=--$(echo "$name" | tr _ -)=${row#*=}
    for cmd in bench verify train; do
        case "$own_choices" in
        *" $cmd:$name "*) "$g" $cmd "$opt" --help >/dev/null 2>&1 && fail "$cmd takes $opt: not its own choice?" ;;
        *) "$g" $cmd "$opt" --help >/dev/null || fail "$cmd does not take the setting $opt" ;;
        esac
    done
done
err=$("$g" bench --input-only --data "$d" --batch-size 0 2>&1) && fail "bench --batch-size 0 must fail"
[ "$err" = "gpufeed bench: --batch-size: 0 is out of range 1..65536" ] || fail "batch size refusal: $err"
err=$("$g" bench --input-only --data "$d" --scale-min nan 2>&1) && fail "bench --scale-min nan must fail"
[ "$err" = "gpufeed bench: --scale-min: nan is out of range (0, 1]" ] || fail "scale refusal: $err"
err=$("$g" bench --input-only --data "$d" --dtype float64 2>&1) && fail "bench --dtype float64 must fail"
echo "$err" | grep -q -- "--dtype: 'float64' is not one of uint8, float32, float16, bfloat16 (also u8, f32, f16, bf16)$" ||
    fail "dtype refusal: $err"
err=$("$g" bench --input-only --data "$d" --epochs 0 2>&1) && fail "bench --epochs 0 without --batches must fail"
echo "$err" | grep -q -- "--epochs 0 (unbounded) needs --batches N" || fail "unbounded bench: $err"
out=$(RANK=1 WORLD_SIZE=two "$g" bench --input-only --data "$d" --threads 1 --image-size 16 2>&1) &&
    fail "bench under RANK=1 WORLD_SIZE=two must fail"
echo "$out" | grep -q "WORLD_SIZE='two' is not a whole number" || fail "malformed launcher: $out"

# index: sidecars beside the shards, the loader takes them; idempotent,
# --force, --out, a damaged shard named while the others are written, a
# leftover temporary file never taken, remote sources' argument errors.
sh=$tmp/ishards
"$g" make-dataset "$sh" --classes 3 --per-class 6 --size 48x36 --seed 3 --shards 3 >/dev/null
pat="$sh/train-{000000..000002}.tar"
out=$("$g" index "$pat") || fail "index: $out"
echo "$out" | grep -q '^gpufeed index: 3 shards indexed (18 samples, 36 members), 0 up to date, 0 failed' ||
    fail "index summary: $out"
head -n 1 "$sh/train-000000.idx" | grep -q '^v1\.2 6 shard_bytes=[0-9]* shard_crc32c=[0-9a-f]\{8\} labels=[0-9,]* member_crc32c=\([0-9a-f]\{8\},\)\{5\}[0-9a-f]\{8\}$' ||
    fail "index first line: $(head -n 1 "$sh/train-000000.idx")"
json=$("$g" verify --data "$pat" --json) || fail "verify through sidecars: $json"
echo "$json" | grep -q '"samples": *18' || fail "index: samples: $json"
echo "$json" | grep -q '"dataset_warnings": *0' || fail "index: sidecars taken: $json"
out=$("$g" index "$pat") || fail "index again: $out"
echo "$out" | grep -q ' 0 shards indexed .* 3 up to date' || fail "index is idempotent: $out"
cp "$sh/train-000001.idx" "$tmp/before.idx"
touch -d '2001-01-01' "$sh/train-000001.idx"
out=$("$g" index "$pat") || fail "index an old sidecar: $out"
echo "$out" | grep -q ' 1 shards indexed .* 2 up to date' || fail "an older sidecar is rewritten: $out"
cmp -s "$sh/train-000001.idx" "$tmp/before.idx" || fail "index rewrites the same bytes"
# one written before shard_crc32c= (newer than its shard) gains it
sed -i '1s/ shard_crc32c=[0-9a-f]*//' "$sh/train-000002.idx"
out=$("$g" index "$pat") || fail "index a sidecar without shard_crc32c=: $out"
echo "$out" | grep -q ' 1 shards indexed .* 2 up to date' || fail "a sidecar without the digest is rewritten: $out"
head -n 1 "$sh/train-000002.idx" | grep -q ' shard_crc32c=[0-9a-f]\{8\} ' || fail "the digest not written back"
# and one written before member_crc32c= gains that
sed -i '1s/ member_crc32c=[0-9a-f,]*//' "$sh/train-000002.idx"
out=$("$g" index "$pat") || fail "index a sidecar without member_crc32c=: $out"
echo "$out" | grep -q ' 1 shards indexed .* 2 up to date' || fail "a sidecar without member digests is rewritten: $out"
head -n 1 "$sh/train-000002.idx" | grep -q ' member_crc32c=[0-9a-f,]\{53\}$' || fail "the member digests not written back"
out=$("$g" index --force "$pat") || fail "index --force: $out"
echo "$out" | grep -q ' 3 shards indexed .* 0 up to date' || fail "--force rewrites: $out"
out=$("$g" index --out "$tmp/idx" "$sh/train-000000.tar,$sh/train-000002.tar") || fail "--out: $out"
cmp -s "$tmp/idx/train-000000.idx" "$sh/train-000000.idx" && [ -f "$tmp/idx/train-000002.idx" ] ||
    fail "--out writes the same sidecars there"
# a leftover temporary file (a killed run) is never taken: the headers are
rm "$sh/train-000002.idx"
head -c 40 "$sh/train-000001.idx" >"$sh/train-000002.idx.tmp.Ab12Cd"
json=$("$g" verify --data "$pat" --json) || fail "verify with a leftover: $json"
echo "$json" | grep -q '"samples": *18' || fail "a leftover temporary file: $json"
echo "$json" | grep -q '"dataset_warnings": *0' || fail "a leftover temporary file is not read: $json"
# a damaged shard: named with its reason, exit 1, the others written
head -c 3000 "$sh/train-000001.tar" >"$tmp/cut.tar" && mv "$tmp/cut.tar" "$sh/train-000001.tar"
rm -f "$sh"/*.idx
set +e
out=$("$g" index "$pat" 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] || fail "index of a damaged shard exits 1, got $rc: $out"
echo "$out" | grep -q 'gpufeed index: .*train-000001.tar: offset [0-9]*: .*no sidecar written' ||
    fail "index names the damaged shard: $out"
[ -f "$sh/train-000000.idx" ] && [ -f "$sh/train-000002.idx" ] && [ ! -f "$sh/train-000001.idx" ] ||
    fail "index writes the other shards' sidecars"
# index --fields: a set without images (KEY.latent.npy + KEY.cls, as
# bench/make_latents.py writes it, the .cls first in odd keys), of which
# the default schema takes no key, gets its sidecars under the loader's
# fields: text as an independent writer (Python, below) makes it, the
# member CRC the latent's whichever comes first; the loader takes them
# (no warning) with the same batches as without them in both orders, and
# checks their member CRCs (a latent byte flipped is refused by name).
# Without --fields an image set's sidecars are that writer's text too,
# byte for byte: today's format, unchanged.
rb=${2:-}
if command -v python3 >/dev/null 2>&1; then
    ls=$tmp/latents
    python3 - "$ls" <<'PY' || fail "writing the latent shards"
import io, os, struct, sys, tarfile
dst = sys.argv[1]
os.makedirs(dst)
def npy(i):
    head = b"{'descr': '<f2', 'fortran_order': False, 'shape': (4, 6, 6), }"
    head += b" " * (64 - 10 - len(head) - 1) + b"\n"
    vals = b"".join(struct.pack("<e", float((k + i) % 97) / 4) for k in range(4 * 6 * 6))
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + vals
n = 0
for s in range(2):
    with tarfile.open(os.path.join(dst, "train-%06d.tar" % s), "w",
                      format=tarfile.USTAR_FORMAT) as t:
        for j in range(10):
            parts = [("latent.npy", npy(n)), ("cls", str(n % 3).encode())]
            if n % 2:
                parts.reverse()
            for ext, data in parts:
                info = tarfile.TarInfo("sample_%08d.%s" % (n, ext))
                info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
                t.addfile(info, io.BytesIO(data))
            n += 1
PY
    # The sidecar a shard should get, from Python's tarfile and a CRC32C
    # of its own: every member on its key's line, labels from the .cls (0
    # without one), member_crc32c= of the line's image, else of its first
    # member but the .cls.
    cat >"$tmp/want_idx.py" <<'PY'
import sys, tarfile
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
IMG = {"jpg", "jpeg", "png", "webp", "bmp", "ppm", "pgm", "pnm", "pbm", "tif", "tiff", "gif"}
path = sys.argv[1]
data = open(path, "rb").read()
lines, labels, crcs = [], [], []
with tarfile.open(path) as t:
    keys = []
    for m in t.getmembers():
        key, ext = m.name.split(".", 1)
        if not keys or keys[-1][0] != key:
            keys.append((key, []))
        keys[-1][1].append((ext, m.offset_data, m.size, m.name))
for key, ms in keys:
    lines.append(" ".join("%s %d %d %s" % m for m in ms))
    cls = [m for m in ms if m[0] == "cls"]
    labels.append(int(data[cls[0][1]:cls[0][1] + cls[0][2]]) if cls else 0)
    img = [m for m in ms if m[0].lower() in IMG] or [m for m in ms if m[0] != "cls"]
    crcs.append("%08x" % crc32c(data[img[0][1]:img[0][1] + img[0][2]]))
sys.stdout.write("v1.2 %d shard_bytes=%d shard_crc32c=%08x labels=%s member_crc32c=%s\n"
                 % (len(lines), len(data), crc32c(data), ",".join(map(str, labels)),
                    ",".join(crcs)) + "".join(l + "\n" for l in lines))
PY
    lpat="$ls/train-{000000..000001}.tar"
    out=$("$g" index "$lpat" 2>&1) && fail "index of an image-less set without --fields: $out"
    echo "$out" | grep -q 'no image member' || fail "index without --fields, no image: $out"
    out=$("$g" index --fields latent.npy,cls "$lpat") || fail "index --fields: $out"
    echo "$out" | grep -q '^gpufeed index: 2 shards indexed (20 samples, 40 members), 0 up to date, 0 failed' ||
        fail "index --fields summary: $out"
    for s in 0 1; do
        python3 "$tmp/want_idx.py" "$ls/train-00000$s.tar" >"$tmp/want.idx"
        cmp -s "$tmp/want.idx" "$ls/train-00000$s.idx" ||
            fail "index --fields: train-00000$s.idx: $(diff "$tmp/want.idx" "$ls/train-00000$s.idx" | head -c 600)"
    done
    head -n 1 "$ls/train-000000.idx" | grep -q ' labels=0,1,2,0,1,2,0,1,2,0 ' ||
        fail "index --fields: labels: $(head -n 1 "$ls/train-000000.idx")"
    # a bad spec is a usage error, named once
    out=$("$g" index --fields 'jpg,jpg' "$lpat" 2>&1) && fail "index --fields jpg,jpg: $out"
    echo "$out" | grep -q -- "--fields: fields 'jpg,jpg'" || fail "index --fields jpg,jpg: $out"
    # the image set: without --fields, the writer's text byte for byte
    "$g" index --force "$sh/train-000000.tar" >/dev/null || fail "index --force train-000000"
    python3 "$tmp/want_idx.py" "$sh/train-000000.tar" >"$tmp/want.idx"
    cmp -s "$tmp/want.idx" "$sh/train-000000.idx" ||
        fail "index of an image set: $(diff "$tmp/want.idx" "$sh/train-000000.idx" | head -c 600)"
    if [ -n "$rb" ]; then
        mkdir "$ls/bare"
        cp "$ls"/*.tar "$ls/bare/"
        hashes() { # the hash and the warnings of one run
            o=$(RB_SET="fields=latent.npy,cls" "$rb" "$@" 2>&1) || fail "remote_batches $*: $o"
            echo "$o" | grep -q '^error:\|^open:' && fail "remote_batches $*: $o"
            echo "$o" | sed -n 's/^\(hash=[0-9a-f]*\) .* \(keys_skipped=[0-9]* dataset_warnings=[0-9]*\) .*/\1 \2/p'
        }
        for order in global shards; do
            export RB_ORDER=$order
            want=$(hashes "$ls/bare/train-{000000..000001}.tar" 1 2)
            case $want in hash=*' keys_skipped=0 dataset_warnings=0') ;; *) fail "latents, $order, no sidecars: $want";; esac
            got=$(hashes "$lpat" 2 4)
            [ "$got" = "$want" ] || fail "latents, $order, sidecars beside (taken: no warning): $got, want $want"
        done
        unset RB_ORDER
        # indexed without a label field: the lines leave the .cls out, so
        # a loader with one never takes labels=0 for them; it reads the
        # headers instead (the sidecar refused: a warning), the same batches
        mkdir "$ls/nolabel"
        cp -p "$ls"/*.tar "$ls/nolabel/"
        "$g" index --fields latent.npy "$ls/nolabel/train-{000000..000001}.tar" >/dev/null ||
            fail "index --fields latent.npy"
        grep -q ' cls ' "$ls/nolabel/train-000000.idx" &&
            fail "index without a label field lists the .cls: $(sed -n 2p "$ls/nolabel/train-000000.idx")"
        want=$(RB_ORDER=shards hashes "$ls/bare/train-{000000..000001}.tar" 1 2)
        got=$(RB_ORDER=shards hashes "$ls/nolabel/train-{000000..000001}.tar" 1 2)
        [ "${got%% *}" = "${want%% *}" ] || fail "latents with .cls over label-less sidecars: $got, want $want"
        case $got in *' dataset_warnings=0') fail "label-less sidecars taken by a loader with labels: $got";; esac
        # the sidecar's member CRC is checked: a latent byte flipped
        mkdir "$ls/flip"
        cp -p "$ls"/*.tar "$ls"/*.idx "$ls/flip/"
        python3 -c '
import sys
f = open(sys.argv[1], "r+b"); f.seek(512 + 200); b = f.read(1); f.seek(512 + 200); f.write(bytes([b[0] ^ 1]))
' "$ls/flip/train-000000.tar"
        touch -r "$ls/train-000000.tar" "$ls/flip/train-000000.tar"
        out=$(RB_SET="fields=latent.npy,cls" RB_ORDER=shards "$rb" "$ls/flip/train-{000000..000001}.tar" 1 2 2>&1) &&
            fail "latents: a flipped byte not refused: $out"
        echo "$out" | grep -q "member 'sample_00000000.latent.npy': its index sidecar records member_crc32c" ||
            fail "latents: a flipped byte not caught by the sidecar's CRC: $out"
    fi
fi

# remote shards: --out is required (a sidecar cannot be written beside
# them), --ca-file must name a readable file, userinfo is never echoed, and
# a failed fetch names the URL (tests/remote_index.sh has the rest)
set +e
out=$("$g" index "https://example.com/train-000000.tar" 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] && echo "$out" | grep -q 'https://example.com/train-000000.tar: .*cannot be written beside it: give --out DIR' ||
    fail "index of a URL without --out: $rc $out"
set +e
out=$("$g" index --out "$tmp/ridx" --ca-file "$tmp/no-such.pem" "https://example.com/train-000000.tar" 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] && echo "$out" | grep -q -- '--ca-file .*no-such.pem: No such file' ||
    fail "index --ca-file of a missing file: $rc $out"
set +e
out=$("$g" index --out "$tmp/ridx" --ca-file "" "https://example.com/train-000000.tar" 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] && echo "$out" | grep -q -- '--ca-file needs a PEM file' || fail "index --ca-file '': $rc $out"
set +e
out=$("$g" index --out "$tmp/ridx" --remote-deadline-s -1 "https://example.com/train-000000.tar" 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] && echo "$out" | grep -q -- '--remote-deadline-s: -1 is out of range 0 (' ||
    fail "index --remote-deadline-s -1: $rc $out"
set +e
out=$("$g" index --out "$tmp/ridx" "https://user:s3cr3t@example.com/train-000000.tar" 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] && echo "$out" | grep -q 'user name or password' && ! echo "$out" | grep -q s3cr3t ||
    fail "index of a URL with userinfo: $rc $out"
set +e
out=$("$g" index --out "$tmp/ridx" --remote-retries 0 "http://127.0.0.1:1/train-{000000..000001}.tar" 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] && [ "$(echo "$out" | grep -c 'http://127.0.0.1:1/train-00000[01].tar: .*no sidecar written')" -eq 2 ] &&
    echo "$out" | grep -q ' 0 shards indexed .* 2 failed' && [ -z "$(ls "$tmp/ridx")" ] ||
    fail "index of an unreachable URL names it, writes nothing: $rc $out"
# two shards of one name into one --out: the second is refused, not overwritten over
mkdir -p "$tmp/other"
cp "$sh/train-000000.tar" "$tmp/other/train-000000.tar"
set +e
out=$("$g" index --out "$tmp/dup" "$sh/train-000000.tar" "$tmp/other/train-000000.tar" 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q 'other/train-000000.tar: not indexed: .*dup/train-000000.idx was written for another shard' ||
    fail "index of two shards of one name into one --out: $rc $out"
"$g" index 2>/dev/null && fail "index without shards must fail"
"$g" index "$sh/x.jpg" 2>/dev/null && fail "index of a non-shard must fail"

echo "cli: ok"

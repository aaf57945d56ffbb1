#!/usr/bin/env bash
# settings.fields on remote shards (issue 39), against nginx and Swift's S3
# API (run under tests/remote/servers.sh --need http,s3): shards with
# KEY.jpg, .cls, .txt, .latent.npy and .seg.png, their sidecars from
# `gpufeed index`, give over HTTP and over S3 the same batches, byte for
# byte (pixels, labels, indices and every field's bytes), as the same loader
# on the local copies (the headers scanned; and their sidecars beside them),
# in the global and the shard order, with and without an image, across a
# seek; the image-less list refused in the global order over both; a key
# lacking a field skipped alike; the shard order from the cache over both;
# a set with no image member at all over HTTP, its sidecars from index
# --fields; a sidecar listing a member the shard does not hold refused by
# name (HTTP).
#   remote_fields.sh GPUFEED REMOTE_BATCHES
set -euo pipefail
gpufeed=$1 rb=$2
work=$GF_TEST_TMPDIR/rf
mkdir -p "$work"
cd "$work"
fail() { echo "remote_fields: FAIL: $*" >&2; exit 1; }

"$gpufeed" make-dataset src --classes 3 --per-class 8 --size 80x60 --seed 7 --shards 3 >/dev/null
# The fields after each .cls, in the standard library alone: a caption, a
# float16 (4, 6, 6) latent (np.save's bytes) and an 8-bit PNG mask of the
# image's size. Key class_01_img_00003 has no caption: skipped under
# fields naming txt, local and remote alike.
/usr/bin/python3 - src set <<'EOF'
import glob, io, os, struct, sys, tarfile, zlib
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
def npy(i):
    head = b"{'descr': '<f2', 'fortran_order': False, 'shape': (4, 6, 6), }"
    head += b" " * (64 - 10 - len(head) - 1) + b"\n"
    vals = b"".join(struct.pack("<e", float((k + i) % 97) / 4) for k in range(4 * 6 * 6))
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + vals
def png(i, w=80, h=60):
    raw = b"".join(b"\x00" + bytes((x // 10 + 8 * (y // 10) + i) % 32 for x in range(w))
                   for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for path in sorted(glob.glob(os.path.join(src, "train-*.tar"))):
    with tarfile.open(path) as s, \
            tarfile.open(os.path.join(dst, os.path.basename(path)), "w",
                         format=tarfile.USTAR_FORMAT) as d:
        for m in s.getmembers():
            d.addfile(m, s.extractfile(m))
            key, ext = m.name.split(".", 1)
            if ext != "cls":
                continue
            i = int(key.rsplit("_", 1)[1])
            extra = [("latent.npy", npy(i)), ("seg.png", png(i))]
            if key != "class_01_img_00003":
                extra.insert(0, ("txt", ("a caption of %s \u2014 caf\u00e9" % key).encode()))
            for suffix, data in extra:
                info = tarfile.TarInfo("%s.%s" % (key, suffix))
                info.size, info.mtime, info.mode = len(data), m.mtime, 0o644
                d.addfile(info, io.BytesIO(data))
EOF
shards="train-{000000..000002}.tar"
mkdir -p bare
cp set/*.tar bare/ # local copies without sidecars: the headers alone
"$gpufeed" index "set/$shards" >/dev/null
cp set/*.tar set/*.idx "$GF_TEST_HTTP_ROOT/"
http=$GF_TEST_HTTP_URL/$shards
for f in set/*.tar set/*.idx; do "$GF_TEST_S3_PUT" "$f" "rf/$(basename "$f")"; done
s3=s3://$GF_TEST_S3_BUCKET/rf/$shards
export AWS_ENDPOINT_URL_S3=$GF_TEST_S3_ENDPOINT

# hash= ... of one run (its whole output left in $work/last)
run() {
    "$rb" "$@" >"$work/last" 2>&1 || { cat "$work/last" >&2; fail "remote_batches $*"; }
    grep -q "^error:" "$work/last" && { cat "$work/last" >&2; fail "sample errors in $*"; }
    if grep -q "$AWS_SECRET_ACCESS_KEY" "$work/last"; then fail "the secret in the output of $*"; fi
    sed -n 's/^\(hash=[0-9a-f]*\) .* \(keys_skipped=[0-9]* dataset_warnings=[0-9]*\) .*/\1 \2/p' "$work/last"
}
same() { # what, want, got
    [ "$2" = "$3" ] || fail "$1: $3, want $2"
    echo "  $1: $3"
}

all="jpg,cls,txt,latent.npy,seg.png:mask"
for fields in "$all" "latent.npy,txt" "jpg;png,cls,seg.png:mask"; do
    export RB_SET="fields=$fields"
    for order in global shards; do
        export RB_ORDER=$order
        want=$(run "bare/$shards" 1 2)
        if [ "$fields" = latent.npy,txt ] && [ $order = global ]; then
            # no image, no member CRC to tie a ranged read to its shard
            "$rb" "$http" 1 2 >"$work/last" 2>&1 && fail "$fields, global, http: not refused"
            grep -q "without an image field, remote shards are read in the shard order" \
                "$work/last" || { cat "$work/last" >&2; fail "$fields, global: other refusal"; }
            echo "  $fields, global, http: refused (the shard order only)"
            "$rb" "$s3" 1 2 >"$work/last" 2>&1 && fail "$fields, global, s3: not refused"
            grep -q "without an image field, remote shards are read in the shard order" \
                "$work/last" || { cat "$work/last" >&2; fail "$fields, global, s3: other refusal"; }
            echo "  $fields, global, s3: refused (the shard order only)"
            continue
        fi
        case $fields in *txt*) case $want in *keys_skipped=1\ dataset_warnings=1) ;; *) fail "$fields: the key without .txt not skipped: $want";; esac;; esac
        same "$fields, $order, local with sidecars" "$want" "$(run "set/$shards" 2 4)"
        same "$fields, $order, http, 1 thread" "$want" "$(run "$http" 1 2)"
        same "$fields, $order, http, 2 threads" "$want" "$(run "$http" 2 4)"
        [ "$order" = global ] &&
            ! grep -q "requests=[0-9]* " "$work/last" && fail "no requests counted"
        same "$fields, $order, s3, 1 thread" "$want" "$(run "$s3" 1 2)"
        same "$fields, $order, s3, 2 threads" "$want" "$(run "$s3" 2 4)"
        [ "$order" = global ] &&
            ! grep -q "requests=[0-9]* " "$work/last" && fail "s3: no requests counted"
        seek=$(run "bare/$shards" 1 2 1 7)
        same "$fields, $order, http, seek into a shard" "$seek" "$(run "$http" 2 4 1 7)"
        same "$fields, $order, s3, seek into a shard" "$seek" "$(run "$s3" 2 4 1 7)"
    done
done
unset RB_SET RB_ORDER

# A set without images (KEY.cls + KEY.latent.npy, the images, captions and
# masks dropped), its sidecars from `gpufeed index --fields latent.npy,cls`
# (the default schema takes no key of it): over HTTP in the shard order,
# the same batches as the local headers, and as the local shards with
# those sidecars beside them (taken: no warning).
/usr/bin/python3 - set lat <<'EOF2'
import glob, os, sys, tarfile
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for path in sorted(glob.glob(os.path.join(src, "train-*.tar"))):
    with tarfile.open(path) as s, tarfile.open(os.path.join(dst, os.path.basename(path)), "w",
                                               format=tarfile.USTAR_FORMAT) as d:
        for m in s.getmembers():
            if m.name.split(".", 1)[1] in ("cls", "latent.npy"):
                d.addfile(m, s.extractfile(m))
EOF2
mkdir -p lat/bare "$GF_TEST_HTTP_ROOT/lat"
cp lat/*.tar lat/bare/
"$gpufeed" index "lat/$shards" >/dev/null 2>&1 && fail "latents: indexed without --fields"
"$gpufeed" index --fields latent.npy,cls "lat/$shards" >/dev/null || fail "latents: index --fields"
cp lat/*.tar lat/*.idx "$GF_TEST_HTTP_ROOT/lat/"
export RB_SET="fields=latent.npy,cls" RB_ORDER=shards
want=$(run "lat/bare/$shards" 1 2)
case $want in *" keys_skipped=0 dataset_warnings=0") ;; *) fail "latents, local: $want";; esac
same "latents, shards, local with --fields sidecars" "$want" "$(run "lat/$shards" 2 4)"
same "latents, shards, http, 1 thread" "$want" "$(run "$GF_TEST_HTTP_URL/lat/$shards" 1 2)"
same "latents, shards, http, 2 threads" "$want" "$(run "$GF_TEST_HTTP_URL/lat/$shards" 2 4)"
same "latents, shards, http, seek into a shard" "$(run "lat/bare/$shards" 1 2 1 7)" \
    "$(run "$GF_TEST_HTTP_URL/lat/$shards" 2 4 1 7)"
unset RB_SET RB_ORDER

# The shard order from the cache: the same fields again.
export RB_SET="fields=$all" RB_ORDER=shards
want=$(run "bare/$shards" 1 2)
same "cached run 1" "$want" "$(RB_CACHE_DIR=$work/cache run "$http" 2 4)"
same "cached run 2" "$want" "$(RB_CACHE_DIR=$work/cache run "$http" 2 4)"
grep -q "cache_hits=[1-9]" "$work/last" || { cat "$work/last"; fail "the second run not from the cache"; }
same "s3, cached run 1" "$want" "$(RB_CACHE_DIR=$work/cache.s3 run "$s3" 2 4)"
same "s3, cached run 2" "$want" "$(RB_CACHE_DIR=$work/cache.s3 run "$s3" 2 4)"
grep -q "cache_hits=[1-9]" "$work/last" || { cat "$work/last"; fail "s3: the second run not from the cache"; }
unset RB_SET RB_ORDER

# A sidecar listing a member the shard does not hold: shard 1 served with
# its first caption renamed (same size, same offsets: KEY.tx2), its old
# sidecar beside it.
key=$(/usr/bin/python3 - set/train-000001.tar "$GF_TEST_HTTP_ROOT/train-000001.tar" <<'EOF'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
at = data.index(b".txt\0")
data[at:at + 4] = b".tx2"
h = at - at % 512
# the header's checksum, as tar computes it (the field as spaces)
data[h + 148:h + 156] = b" " * 8
data[h + 148:h + 156] = b"%06o\0 " % sum(data[h:h + 512])
open(sys.argv[2], "wb").write(data)
print(data[h:at].decode())
EOF
)
RB_SET="fields=$all" RB_ORDER=global "$rb" "$http" 1 2 >"$work/renamed" 2>&1 || true
grep -q "error: train-000001.tar:$key.jpg: .*$key.txt" "$work/renamed" ||
    { cat "$work/renamed"; fail "global order: a member the shard does not hold not refused by name"; }
echo "  global order, a listed member the shard lacks: $(grep -m1 '^error:' "$work/renamed" | head -c 300)"
RB_SET="fields=$all" RB_ORDER=shards "$rb" "$http" 1 2 >"$work/renamed" 2>&1 || true
grep -q "error: .*train-000001.tar.*shard_crc32c" "$work/renamed" ||
    { cat "$work/renamed"; fail "shard order: a shard unlike its sidecar not refused"; }
echo "  shard order, the same shard: $(grep -m1 '^error:' "$work/renamed" | head -c 300)"
echo "remote_fields: ok"

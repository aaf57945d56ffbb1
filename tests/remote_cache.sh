#!/usr/bin/env bash
# The local shard cache (settings.cache_dir) against real servers (run
# under tests/remote/servers.sh): the same batches with it as without,
# from nginx and Swift's S3 API; a second run reads every shard from it
# (one one-byte request a shard, to learn its ETag), also in the same
# process while the first loader is still open; an object whose ETag
# changed is fetched again; the directory stays under its cap, and a cap
# under one shard streams through; a read-only or full directory streams
# with a warning; a killed writer leaves no copy a later run trusts.
#   remote_cache.sh GPUFEED REMOTE_BATCHES
set -euo pipefail
gpufeed=$1 rb=$2
work=$GF_TEST_TMPDIR/rc
mkdir -p "$work"
cd "$work"
fail() { echo "remote_cache: FAIL: $*" >&2; exit 1; }

"$gpufeed" make-dataset set --classes 3 --per-class 12 --size 80x60 --seed 7 --shards 4 >/dev/null
"$gpufeed" index "set/train-{000000..000003}.tar" >/dev/null
shards="train-{000000..000003}.tar"
cp set/*.tar set/*.idx "$GF_TEST_HTTP_ROOT/"
for f in set/*.tar set/*.idx; do "$GF_TEST_S3_PUT" "$f" "rc/$(basename "$f")"; done
export AWS_ENDPOINT_URL_S3=$GF_TEST_S3_ENDPOINT
http=$GF_TEST_HTTP_URL/$shards
s3=s3://$GF_TEST_S3_BUCKET/rc/$shards

# One run; its whole output left in $work/last.
run() {
    "$rb" "$@" >"$work/last" 2>&1 || { cat "$work/last" >&2; fail "remote_batches $*"; }
}
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$work/last"; }
hash() { sed -n 's/^hash=\([0-9a-f]*\) .*/\1/p' "$work/last"; }
expect() { # what, field, want
    local got
    got=$(field "$2")
    [ "$got" = "$3" ] || { cat "$work/last"; fail "$1: $2=$got, want $3"; }
}
same_hash() { # what
    [ "$(hash)" = "$want" ] || { cat "$work/last"; fail "$1: other batches than the local shards'"; }
}
# Every copy under a final name is byte for byte its shard, then the
# cache's 16-byte trailer (its checksum).
copies_whole() { # dir what
    local f s n=0
    for f in "$1"/*-*-train-*.tar; do
        [ -e "$f" ] || continue
        s="set/train-${f##*-train-}"
        [ "$(stat -c %s "$f")" = $(($(stat -c %s "$s") + 16)) ] && cmp -s -n "$(stat -c %s "$s")" "$f" "$s" ||
            fail "$2: $f is not its shard"
        n=$((n + 1))
    done
    echo "$n"
}

RB_ORDER=shards run "set/$shards" 2 4
want=$(hash)
echo "  local shards: hash $want"

# A first run fills the cache (every shard a miss), a second reads it.
RB_CACHE_DIR=$work/c1 run "$http" 2 4
same_hash "http, cache filling"
expect "http, cache filling" cache_hits 0
expect "http, cache filling" cache_misses 4
[ "$(copies_whole c1 "after a run")" = 4 ] || { ls -la c1; fail "not every shard was cached"; }
RB_CACHE_DIR=$work/c1 run "$http" 1 2
same_hash "http, from the cache"
expect "http, from the cache" cache_hits 4
expect "http, from the cache" cache_misses 0
expect "http, from the cache: one one-byte request a shard" requests 4
echo "  http: 4 shards cached by a first run; a second read them from the cache ($(grep -o 'requests=[0-9]*' last))"

# Two loaders of one process on one cache, one epoch each: the second
# opened after the first's end while the first is still open (Python's
# last batch, left in the loop variable, keeps a closed Loader open),
# after the first's gf_close, or beside it from the start. A run's end
# (GF_EOF, as gf_close) comes once the shards it fetched are in the
# cache: the second reads all 4 from it; two writers at once each keep
# caching. Without that each is a race, lost most times: five tries each.
for mode in open closed both; do
    for try in 1 2 3 4 5; do
        rm -rf c9
        RB_CACHE_DIR=$work/c9 RB_SET=epochs=1 RB_AGAIN=$mode run "$http" 2 4
        ! grep -q cache_warning last || { cat last; fail "two loaders ($mode): a cache warning"; }
        [ "$mode" = both ] || grep -q '^again: cache_hits=4 cache_misses=0$' last ||
            { cat last; fail "a second loader ($mode, try $try): not every shard from the cache"; }
        [ "$(copies_whole c9 "two loaders ($mode)")" = 4 ] || { ls -la c9; fail "two loaders ($mode): not every shard cached"; }
    done
done
echo "  two loaders in one process: the second, opened after the first's end (open or closed), read every shard from the cache; side by side, both cached"

RB_CACHE_DIR=$work/c2 run "$s3" 2 4
same_hash "s3, cache filling"
RB_CACHE_DIR=$work/c2 run "$s3" 2 4
same_hash "s3, from the cache"
expect "s3, from the cache" cache_hits 4
echo "  s3: the same"

# nginx's ETag is the file's mtime and size: a touched shard is another
# object, fetched again (and cached anew); the others stay hits.
touch -d '+1 hour' "$GF_TEST_HTTP_ROOT/train-000002.tar"
RB_CACHE_DIR=$work/c1 run "$http" 2 4
same_hash "http, one object's ETag changed"
expect "http, one object's ETag changed" cache_hits 3
expect "http, one object's ETag changed" cache_misses 1
echo "  an object with a new ETag: fetched again, the other 3 from the cache"

# A copy cut short under its final name (which the writer never leaves)
# is not trusted: its size is not the shard's.
victim=$(ls c1/*-train-000001.tar)
head -c 1000 "set/train-000001.tar" >"$victim"
RB_CACHE_DIR=$work/c1 run "$http" 2 4
same_hash "http, a cut copy in the cache"
expect "http, a cut copy in the cache" cache_misses 1
echo "  a cut copy under a final name: fetched again"

# A copy damaged in place, its size kept (garbage; one byte flipped in a
# member's data): never served, said naming the file and the URL, dropped
# and fetched again (then cached whole anew).
damaged() { # what shard
    local victim
    victim=$(ls c1/*-train-$2.tar)
    RB_CACHE_DIR=$work/c1 run "$http" 2 4
    same_hash "http, $1"
    expect "http, $1" cache_misses 1
    expect "http, $1" cache_hits 3
    grep -q "^cache_warning: cache $work/$victim: damaged (not its checksum), dropped; $GF_TEST_HTTP_URL/train-$2.tar" last ||
        { cat last; fail "$1: no warning naming $victim and its URL"; }
    [ -e "$victim" ] || fail "$1: not cached anew"
    copies_whole c1 "$1" >/dev/null
}
victim=$(ls c1/*-train-000000.tar)
head -c "$(stat -c %s "$victim")" /dev/urandom >"$victim.new" && mv "$victim.new" "$victim"
damaged "same-size garbage in the cache" 000000
victim=$(ls c1/*-train-000003.tar)
off=$((512 + 200)) # the first member's data: 80x60 images, each far over 200 bytes
byte=$(od -An -tu1 -j$off -N1 "$victim" | tr -d ' ')
printf "\\$(printf %03o $((byte ^ 0x20)))" | dd of="$victim" bs=1 seek=$off conv=notrunc status=none
cmp -s "$victim" "set/train-000003.tar" -n $((off + 1)) && fail "the byte was not flipped"
damaged "one byte flipped in a cached member" 000003
echo "  a damaged copy (garbage of its size; one byte flipped): dropped with a warning, fetched again"

# The cap: at most cap bytes after a run; under one shard, nothing kept.
shard_bytes=$(stat -c %s set/train-000000.tar)
cap=$((shard_bytes * 5 / 2))
RB_CACHE_DIR=$work/c3 RB_SET="cache_bytes=$cap" run "$http" 2 4
same_hash "http, cap of 2.5 shards"
total=$(du -cb c3/*-train-*.tar | tail -1 | cut -f1)
[ "$total" -le "$cap" ] && [ "$total" -gt 0 ] || { ls -la c3; fail "cache of $total bytes under a cap of $cap"; }
echo "  cap $cap bytes: the cache holds $total ($(ls c3 | wc -l) shards)"
RB_CACHE_DIR=$work/c4 RB_SET="cache_bytes=1000" run "$http" 2 4
same_hash "http, cap under one shard"
[ -z "$(ls -A c4)" ] || { ls -la c4; fail "a cap under one shard kept something"; }
echo "  cap under one shard: streamed, nothing kept"

# A full file system (writes fail: here a file size limit, EFBIG; a
# full disk's ENOSPC takes the same path): streams, says why, leaves
# nothing half-written.
(trap '' XFSZ; ulimit -f 8; RB_CACHE_DIR=$work/c5 "$rb" "$http" 2 4 >"$work/last" 2>&1) ||
    { cat "$work/last"; fail "a full cache failed the run"; }
same_hash "http, cache writes failing"
grep -q "^cache_warning: cache $work/c5: writing: File too large; shards are streamed without it" last ||
    { cat last; fail "no warning for a cache that cannot be written"; }
[ -z "$(ls -A c5)" ] || { ls -la c5; fail "failed writes left files"; }
echo "  writes failing: $(grep '^cache_warning' last)"

# A read-only cache directory: EROFS on a read-only bind mount where this
# machine allows one, else EACCES as another user.
mkdir -p c6
ro_run() {
    if unshare -m true 2>/dev/null; then
        unshare -m bash -c 'mount --bind -o ro "$1" "$1" && shift && exec "$@"' _ "$work/c6" \
            env RB_CACHE_DIR="$work/c6" "$rb" "$http" 2 4
    elif [ "$(id -u)" != 0 ]; then
        chmod 555 c6 && RB_CACHE_DIR=$work/c6 "$rb" "$http" 2 4
    else
        return 77
    fi
}
rc=0
ro_run >"$work/last" 2>&1 || rc=$?
if [ $rc = 77 ]; then
    echo "  read-only directory: not checked (root without mount namespaces)"
else
    [ $rc = 0 ] || { cat last; fail "a read-only cache failed the run"; }
    same_hash "http, read-only cache"
    grep -q "^cache_warning: cache $work/c6: creating a file: \(Read-only file system\|Permission denied\)" last ||
        { cat last; fail "no warning for a read-only cache"; }
    echo "  read-only: $(grep '^cache_warning' last)"
fi

# bench prints the warning with the directory's name escaped: an ESC in
# it never reaches the terminal raw. (A file in the way: no directory.)
esc=$(printf '\033')
: >"$work/f${esc}[31m"
"$gpufeed" bench --input-only --data "$http" --cache-dir "$work/f${esc}[31m/c" --epochs 1 \
    --image-size 32 --batch-size 4 >last 2>&1 || { cat -v last; fail "bench with an unusable cache"; }
grep -qF "cache warning      cache $work/f\033[31m/c: creating the directory: Not a directory" last ||
    { cat -v last; fail "bench's cache warning, escaped"; }
! grep -q "$esc" last || { cat -v last; fail "an ESC from the cache directory's name reached the output raw"; }
echo "  bench: $(grep 'cache warning' last)"

# Killed at random points while it fills a cache: whatever is under a
# final name is whole, and a later run gives the same batches.
for i in 1 2 3 4 5 6; do
    RB_CACHE_DIR=$work/c7 RB_PAUSE_MS=$((RANDOM % 40)) "$rb" "$http" 2 4 >/dev/null 2>&1 &
    pid=$!
    sleep "0.0$((RANDOM % 10))"
    kill -9 $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    copies_whole c7 "after kill $i" >/dev/null
done
mkdir -p c7 # (a kill may come before the loader makes it)
head -c 777 set/train-000003.tar >"c7/.tmp-999999-0" # a killed writer's
RB_CACHE_DIR=$work/c7 run "$http" 2 4
same_hash "http, after killed writers"
n=$(copies_whole c7 "after the last run")
echo "  6 kills while filling: $n whole copies, no partial one trusted"

# Only remote shards in the shard order are cached; else said, not ignored.
for bad in "set/$shards" "RB_ORDER=global"; do
    if [ "$bad" = RB_ORDER=global ]; then
        RB_ORDER=global RB_CACHE_DIR=$work/c8 "$rb" "$http" 2 4 >last 2>&1 && fail "cache with global order"
    else
        RB_ORDER=shards RB_CACHE_DIR=$work/c8 "$rb" "$bad" 2 4 >last 2>&1 && fail "cache with local data"
    fi
    grep -q "cache_dir: " last || { cat last; fail "no reason for refusing cache_dir"; }
    echo "  refused: $(head -c 150 last)"
done
echo "remote_cache: ok"

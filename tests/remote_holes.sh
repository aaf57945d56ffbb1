#!/usr/bin/env bash
# Bad samples in remote shards read whole (the shard order), on_error =
# skip: a bad sample is replaced by the next good one of the sampler's
# order. A replacement whose shard is already here (or already failed) is
# bad at once, as it is taken: it must be replaced in turn, not leave its
# batch a sample short. Each run's batches, sample by sample, equal those
# of the same shards read locally with the same seed, at 1 and 4 threads
# and depths 1 to 4, every batch full but each epoch's last, every good
# sample delivered once an epoch (run under tests/remote/servers.sh).
#   remote_holes.sh GPUFEED REMOTE_BATCHES
set -euo pipefail
gpufeed=$1 rb=$2
work=$GF_TEST_TMPDIR/rh
mkdir -p "$work"
cd "$work"
fail() { echo "remote_holes: FAIL: $*" >&2; exit 1; }

# 4 shards of 12 samples, PPM: most 8x8 (203 bytes), some 24x24 (1741
# bytes: over max_file_bytes=1000, so bad in either reader). garbled/:
# the same shards, shard 2's images replaced by bytes of no format.
python3 - <<'PY'
import io, os, tarfile
big = 0
for d in ("set", "garbled"):
    os.makedirs(d, exist_ok=True)
    for k in range(4):
        with tarfile.open(f"{d}/t-{k:06d}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
            for i in range(12):
                n = k * 12 + i
                side = 24 if (n * 5 + 3) % 7 < 2 else 8
                big += d == "set" and side == 24
                img = f"P6\n{side} {side}\n255\n".encode() + bytes(
                    (n * 29 + j * 7) % 256 for j in range(side * side * 3))
                if d == "garbled" and k == 2:
                    img = b"X" * len(img)
                for ext, data in (("ppm", img), ("cls", str(n % 3).encode())):
                    m = tarfile.TarInfo(f"{i:06d}.{ext}")
                    m.size, m.mtime = len(data), 1700000000
                    t.addfile(m, io.BytesIO(data))
open("big", "w").write(f"{big}\n")
PY
shards="t-{000000..000003}.tar"
"$gpufeed" index "set/$shards" >/dev/null
mkdir -p "$GF_TEST_HTTP_ROOT/set" "$GF_TEST_HTTP_ROOT/gone"
cp set/*.tar set/*.idx "$GF_TEST_HTTP_ROOT/set/"
# gone/: shard 2 missing on the server (404), its sidecar there.
cp set/*.idx "$GF_TEST_HTTP_ROOT/gone/"
cp set/t-00000[013].tar "$GF_TEST_HTTP_ROOT/gone/"
big=$(cat big)
[ "$big" -ge 8 ] && [ "$big" -le 20 ] || fail "the set: $big samples over max_file_bytes"

# A run's batches ("batch EPOCH POSITION COUNT: INDEX...") to OUT.
#   run OUT DATA THREADS DEPTH (RB_ORDER, RB_SET from the environment)
run() {
    local out=$1
    shift
    RB_INDICES=1 "$rb" "$@" >"$work/last" 2>&1 || { cat "$work/last" >&2; fail "remote_batches $*"; }
    grep -q '^hash=' "$work/last" || { cat "$work/last" >&2; fail "remote_batches $*: no end"; }
    grep '^batch ' "$work/last" >"$out"
}
# Every batch full but each epoch's last, good samples each once an
# epoch, 2 epochs of them: FILE GOOD
full() {
    awk -v good="$2" -v b=5 -v f="$1" '
        { split($0, h, ":"); split(h[1], w, " "); e = w[2]; c = w[4] + 0
          n = split(h[2], ix, " ")
          if (n != c) { print f ": " c " samples, " n " indices: " $0; bad = 1 }
          if (e in last && last[e] < b) { print f ": epoch " e ": a batch of " last[e] " before its end"; bad = 1 }
          last[e] = c; got[e] += c
          for (i = 1; i <= n; i++) if (seen[e, ix[i]]++) { print f ": epoch " e ": sample " ix[i] " twice"; bad = 1 } }
        END { ne = 0
              for (e in got) { ne++
                  if (got[e] != good) { print f ": epoch " e ": " got[e] " samples, want " good; bad = 1 } }
              if (ne != 2) { print f ": " ne " epochs"; bad = 1 }
              exit bad }' "$1" || fail "$1: not full batches of every good sample"
}
same() { # WHAT WANT GOT: the files of two runs
    cmp -s "$2" "$3" || { diff "$2" "$3" | head -20 >&2; fail "$1: other batches than $2"; }
    echo "  $1: $(wc -l <"$3") batches, the same"
}

# A member over max_file_bytes: bad as its cell is taken once its shard
# is here.
export RB_SET="max_file_bytes=1000"
good=$((48 - big))
RB_ORDER=shards run big.local "set/$shards" 1 1
full big.local "$good"
RB_ORDER=shards run big.local4 "set/$shards" 4 4
same "over max_file_bytes, local, 4 threads, depth 4" big.local big.local4
for td in "1 1" "1 4" "4 2" "4 4"; do
    set -- $td
    run "big.http.$1.$2" "$GF_TEST_HTTP_URL/set/$shards" "$1" "$2"
    full "big.http.$1.$2" "$good"
    same "over max_file_bytes, http, $1 threads, depth $2" big.local "big.http.$1.$2"
done
# The global order (a ranged GET a sample): the same as local too.
RB_ORDER=global run big.glocal "set/$shards" 1 2
full big.glocal "$good"
RB_ORDER=global run big.ghttp "$GF_TEST_HTTP_URL/set/$shards" 4 4
same "over max_file_bytes, global order, http" big.glocal big.ghttp
unset RB_SET

# A shard the server does not have: failed, each of its samples bad at
# once as it is taken; locally its images are bytes of no format.
good=36
RB_ORDER=shards run gone.local "garbled/$shards" 1 1
full gone.local "$good"
for td in "1 1" "1 4" "4 2" "4 4"; do
    set -- $td
    run "gone.http.$1.$2" "$GF_TEST_HTTP_URL/gone/$shards" "$1" "$2"
    full "gone.http.$1.$2" "$good"
    same "a 404 shard, http, $1 threads, depth $2" gone.local "gone.http.$1.$2"
done
grep -q "error: t-000002.tar:.*$GF_TEST_HTTP_URL/gone/t-000002.tar: HTTP 404" "$work/last" ||
    { cat "$work/last"; fail "the 404 shard's samples not reported with the URL"; }
RB_ORDER=global run gone.glocal "garbled/$shards" 1 2
RB_ORDER=global run gone.ghttp "$GF_TEST_HTTP_URL/gone/$shards" 4 4
full gone.ghttp "$good"
same "a 404 shard, global order, http" gone.glocal gone.ghttp
echo "remote_holes: ok"

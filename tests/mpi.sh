#!/bin/sh
# gpufeed train, data-parallel over 2 MPI ranks on this machine, and
# checkpoint/resume (single process). Usage: mpi.sh PATH/TO/gpufeed PATH/TO/mpirun
# [DEVICE (cpu; cuda on a cudaemu build: each rank its own emulated GPU)]
#  - the ranks' first-epoch samples (--dump-indices) are disjoint and their
#    union is the epoch (48 samples, 2 ranks, batch 4: nothing dropped);
#  - both ranks end with identical weights (rank_checksums), with the
#    gpufeed loader and the synchronous loop;
#  - the same on shards gpufeed prepare wrote (--train-data, --val-data):
#    equal shares, identical weights, both loops;
#  - 2 epochs straight == 1 epoch, --checkpoint, --resume to 2 epochs
#    (single process, and 2 ranks), and == --stop-after inside the first
#    epoch, --checkpoint, --resume to 2 epochs (a stop as a preemption);
#  - elastic resume across mpirun launches: --stop-after inside the first
#    epoch on W ranks, --resume on W' ranks (2 -> 1, 2 -> 3, 1 -> 2,
#    4 -> 3): the note said once, and the first epoch's samples of both
#    launches (--dump-indices) each delivered once, all of them where the
#    rest divides into full batches (train's ranks read drop_last).
set -eu
g=$1
mpirun=$2
device=${3:-cpu}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Root in containers and CI; more ranks than the machine has slots; no
# ptrace-based single copy (containers often forbid it).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI's own allocations (MCA components, unloaded at MPI_Finalize)
# look leaked to LeakSanitizer: no leak checking in the ranks (the single
# process runs below keep it). mpi N COMMAND...: COMMAND on N ranks.
mpi() {
    np=$1
    shift
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        "$mpirun" -np "$np" --oversubscribe -x ASAN_OPTIONS "$@"
}

d=$tmp/data
"$g" make-dataset "$d/train" --classes 4 --per-class 12 --size 96x72 --seed 0 >/dev/null
"$g" make-dataset "$d/val" --classes 4 --per-class 4 --size 96x72 --seed 1 >/dev/null
opts="--batch-size 4 --image-size 32 --model-width 4 --device $device --threads 1 --json"
common="--data $d $opts"

# field NAME JSON: the text of a JSON array field, without brackets and quotes
field() { echo "$2" | sed -n "s/.*\"$1\": *\[\([^]]*\)\].*/\1/p" | tr -d '" '; }
scalar() { echo "$2" | sed -n "s/.*\"$1\": *\"\{0,1\}\([^\",}]*\)\"\{0,1\}[,}].*/\1/p"; }
same_pair() { # "a,b" -> a == b, both non-empty
    a=${1%%,*}
    b=${1#*,}
    [ -n "$a" ] && [ "$a" = "$b" ]
}

# 1. Two ranks, the gpufeed loader: shares and weights.
json=$(mpi 2 "$g" train $common --epochs 1 --loader gpufeed --dump-indices "$tmp/idx") ||
    fail "mpirun train: $json"
[ "$(echo "$json" | wc -l)" -eq 1 ] || fail "only rank 0 may print: $json"
[ "$(scalar world "$json")" = 2 ] || fail "world != 2: $json"
[ "$(scalar device "$json")" = "$device" ] || fail "device != $device: $json"
[ "$(scalar allreduce "$json")" = mpi ] || fail "without NCCL the ranks sum over MPI: $json"
[ "$(field rank_samples "$json")" = "24,24" ] || fail "rank_samples: $json"
sums=$(field rank_checksums "$json")
same_pair "$sums" || fail "ranks ended with different weights: $sums"
[ "${sums%%,*}" = "$(scalar weights_checksum "$json")" ] || fail "weights_checksum: $json"
[ -s "$tmp/idx.rank0" ] && [ -s "$tmp/idx.rank1" ] || fail "--dump-indices wrote no files"
[ "$(wc -l <"$tmp/idx.rank0")" -eq 24 ] || fail "rank 0 read $(wc -l <"$tmp/idx.rank0") samples"
[ "$(wc -l <"$tmp/idx.rank1")" -eq 24 ] || fail "rank 1 read $(wc -l <"$tmp/idx.rank1") samples"
dup=$(sort -n "$tmp/idx.rank0" "$tmp/idx.rank1" | uniq -d | wc -l)
[ "$dup" -eq 0 ] || fail "the ranks share $dup samples"
seq 0 47 >"$tmp/all"
sort -n "$tmp/idx.rank0" "$tmp/idx.rank1" | cmp -s - "$tmp/all" ||
    fail "the union of the ranks' samples is not the epoch (0..47)"
hashes=$(field rank_samples_hash "$json")
[ "${hashes%%,*}" != "${hashes#*,}" ] || fail "rank_samples_hash: the same on both ranks: $json"

# 2. Two ranks, both loops (the synchronous one shards its own order).
json=$(mpi 2 "$g" train $common --epochs 1 --loader both) || fail "mpirun train --loader both: $json"
same_pair "$(field rank_checksums "$json")" || fail "--loader both: ranks differ: $json"

# 2b. Two ranks on prepared shards: each its share, the same weights.
GF_NO_PROGRESS=1 "$g" prepare "$d/train" "$tmp/prep" --max-side 48 --shard-samples 20 >/dev/null ||
    fail "prepare"
json=$(mpi 2 "$g" train $opts --train-data "$tmp/prep/train-{000000..000002}.tar" \
       --val-data "$d/val" --epochs 1 --loader both) || fail "mpirun train on shards: $json"
[ "$(field rank_samples "$json")" = "24,24" ] || fail "shards: rank_samples: $json"
same_pair "$(field rank_checksums "$json")" || fail "shards: ranks differ: $json"

# 3. Checkpoint/resume, one process: 2 epochs straight == 1 + resume 1.
json=$("$g" train $common --epochs 2 --loader gpufeed) || fail "train 2 epochs: $json"
straight=$(scalar weights_checksum "$json")
"$g" train $common --epochs 1 --checkpoint "$tmp/ck" >/dev/null || fail "train --checkpoint"
[ -s "$tmp/ck" ] && [ ! -e "$tmp/ck.tmp" ] || fail "--checkpoint did not write $tmp/ck"
json=$("$g" train $common --epochs 2 --resume "$tmp/ck") || fail "train --resume: $json"
[ "$(scalar start_epoch "$json")" = 1 ] || fail "resume: start_epoch: $json"
resumed=$(scalar weights_checksum "$json")
[ -n "$straight" ] && [ "$straight" = "$resumed" ] ||
    fail "resume is not exact: straight $straight, resumed $resumed"
# 3b. Stopped inside the first epoch as a preempted job (5 of its 12
# steps), checkpointed there, resumed there to 2 epochs: the same weights.
json=$("$g" train $common --epochs 2 --stop-after 5 --checkpoint "$tmp/ckm") ||
    fail "train --stop-after 5: $json"
[ "$(scalar stopped "$json")" = true ] && [ "$(scalar stopped_epoch "$json")" = 0 ] &&
    [ "$(scalar stopped_position "$json")" = 20 ] || fail "--stop-after 5: not stopped at 20: $json"
json=$("$g" train $common --epochs 2 --resume "$tmp/ckm") || fail "train --resume mid-epoch: $json"
[ "$(scalar start_epoch "$json")" = 0 ] && [ "$(scalar start_position "$json")" = 20 ] &&
    [ "$(scalar stopped "$json")" = false ] || fail "resume mid-epoch: start: $json"
[ "$(scalar weights_checksum "$json")" = "$straight" ] ||
    fail "mid-epoch resume is not exact: straight $straight, resumed $(scalar weights_checksum "$json")"
"$g" train $common --epochs 2 --resume "$tmp/ck" --model-width 5 >/dev/null 2>&1 &&
    fail "--resume with another model must fail"
printf 'junk' >"$tmp/bad"
"$g" train $common --epochs 2 --resume "$tmp/bad" >/dev/null 2>&1 &&
    fail "--resume of a non-checkpoint must fail"

# 4. Checkpoint/resume, two ranks.
json=$(mpi 2 "$g" train $common --epochs 2 --loader gpufeed) || fail "mpirun 2 epochs: $json"
straight=$(field rank_checksums "$json")
mpi 2 "$g" train $common --epochs 1 --checkpoint "$tmp/ck2" >/dev/null || fail "mpirun --checkpoint"
json=$(mpi 2 "$g" train $common --epochs 2 --resume "$tmp/ck2") || fail "mpirun --resume: $json"
[ "$straight" = "$(field rank_checksums "$json")" ] ||
    fail "2-rank resume is not exact: $straight vs $(field rank_checksums "$json")"
# 4b. Stopped inside the first epoch on 2 ranks (4 of their 6 steps: each
# at sample 16 of its 24), resumed on 2: the same weights, and no note
# (the world did not change).
json=$(mpi 2 "$g" train $common --epochs 2 --stop-after 4 --checkpoint "$tmp/ck2m") ||
    fail "mpirun --stop-after 4: $json"
[ "$(scalar stopped "$json")" = true ] && [ "$(scalar stopped_position "$json")" = 16 ] ||
    fail "mpirun --stop-after 4: not stopped at 16: $json"
json=$(mpi 2 "$g" train $common --epochs 2 --resume "$tmp/ck2m" 2>"$tmp/err") ||
    fail "mpirun --resume mid-epoch: $json $(cat "$tmp/err")"
[ "$straight" = "$(field rank_checksums "$json")" ] ||
    fail "2-rank mid-epoch resume is not exact: $straight vs $(field rank_checksums "$json")"
! grep -q "note: resumed" "$tmp/err" || fail "a note on the same world: $(cat "$tmp/err")"

# 5. Elastic resume across mpirun launches: W ranks stop inside the first
# epoch after K steps (each at sample 4K of its share: 4KW of the epoch's
# 48 delivered), W' ranks resume it. The rest, 48 - 4KW samples, is taken
# interleaved; train's ranks read drop_last, so each takes
# floor(rest / W') cut to full batches of 4 (one process takes it all):
# where that divides, the two launches' first epochs are 0..47, each once;
# elsewhere fewer, each once, the count exact.
elastic() { # W K W'
    w=$1 k=$2 w2=$3
    what="elastic $w -> $w2 (--stop-after $k)"
    rm -f "$tmp/el" "$tmp"/p1.rank* "$tmp"/p2.rank*
    json=$(mpi "$w" "$g" train $common --epochs 2 --stop-after "$k" --checkpoint "$tmp/el" \
           --dump-indices "$tmp/p1") || fail "$what: phase 1: $json"
    done1=$((4 * k * w))
    [ "$(scalar stopped "$json")" = true ] && [ "$(scalar stopped_position "$json")" = $((4 * k)) ] ||
        fail "$what: phase 1 did not stop at $((4 * k)): $json"
    [ "$(cat "$tmp"/p1.rank* | wc -l)" -eq "$done1" ] ||
        fail "$what: phase 1 dumped $(cat "$tmp"/p1.rank* | wc -l) samples, took $done1"
    json=$(mpi "$w2" "$g" train $common --epochs 2 --resume "$tmp/el" --dump-indices "$tmp/p2" \
           2>"$tmp/err") || fail "$what: phase 2: $json $(cat "$tmp/err")"
    [ "$(scalar stopped "$json")" = false ] && [ "$(scalar start_epoch "$json")" = 0 ] &&
        [ "$(echo "$json" | grep -o '"epoch":' | wc -l)" -eq 2 ] ||
        fail "$what: phase 2 did not finish its 2 epochs: $json"
    [ "$(scalar world "$json")" = "$w2" ] || fail "$what: phase 2: world: $json"
    if [ "$w2" -gt 1 ]; then
        [ "$(field rank_checksums "$json" | tr , '\n' | sort -u | wc -l)" -eq 1 ] ||
            fail "$what: the ranks ended with different weights: $json"
    fi
    note="gpufeed train: note: resumed a $w-rank state on $w2 ranks at epoch 0, sample $done1 of 48"
    [ "$(grep -c "note: resumed" "$tmp/err")" -eq 1 ] && grep -qxF "$note" "$tmp/err" ||
        fail "$what: want the note once, '$note': $(cat "$tmp/err")"
    rest=$((48 - done1))
    if [ "$w2" -eq 1 ]; then
        take=$rest
    else
        each=$((rest / w2))
        take=$((w2 * (each - each % 4)))
    fi
    cat "$tmp"/p1.rank* "$tmp"/p2.rank* | sort -n >"$tmp/union"
    [ "$(uniq -d "$tmp/union" | wc -l)" -eq 0 ] ||
        fail "$what: samples delivered twice: $(uniq -d "$tmp/union" | tr '\n' ' ')"
    [ -z "$(awk '!/^[0-9]+$/ || $1 > 47' "$tmp/union")" ] || fail "$what: samples outside 0..47"
    [ "$(wc -l <"$tmp/union")" -eq $((done1 + take)) ] ||
        fail "$what: $(wc -l <"$tmp/union") samples in the two launches' first epoch, want $done1 + $take"
    [ $((done1 + take)) -lt 48 ] || cmp -s "$tmp/union" "$tmp/all" ||
        fail "$what: the union of the launches' samples is not the epoch (0..47)"
}
elastic 2 3 1 # 24 + 24: the whole epoch
elastic 2 3 3 # 24 + 3 x 8
elastic 1 4 2 # 16 + 2 x 16
elastic 4 1 3 # 16 + 3 x 8: 32 left, 10 a rank, 2 cut on each
echo "mpi: ok"

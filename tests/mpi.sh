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
#    (single process, and 2 ranks).
set -eu
g=$1
mpirun=$2
device=${3:-cpu}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Root in containers and CI; 2 ranks on a machine with fewer slots; no
# ptrace-based single copy (containers often forbid it).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI's own allocations (MCA components, unloaded at MPI_Finalize)
# look leaked to LeakSanitizer: no leak checking in the ranks (the single
# process runs below keep it).
mpi() {
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        "$mpirun" -np 2 --oversubscribe -x ASAN_OPTIONS "$@"
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
json=$(mpi "$g" train $common --epochs 1 --loader gpufeed --dump-indices "$tmp/idx") ||
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
json=$(mpi "$g" train $common --epochs 1 --loader both) || fail "mpirun train --loader both: $json"
same_pair "$(field rank_checksums "$json")" || fail "--loader both: ranks differ: $json"

# 2b. Two ranks on prepared shards: each its share, the same weights.
GF_NO_PROGRESS=1 "$g" prepare "$d/train" "$tmp/prep" --max-side 48 --shard-samples 20 >/dev/null ||
    fail "prepare"
json=$(mpi "$g" train $opts --train-data "$tmp/prep/train-{000000..000002}.tar" \
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
"$g" train $common --epochs 2 --resume "$tmp/ck" --model-width 5 >/dev/null 2>&1 &&
    fail "--resume with another model must fail"
printf 'junk' >"$tmp/bad"
"$g" train $common --epochs 2 --resume "$tmp/bad" >/dev/null 2>&1 &&
    fail "--resume of a non-checkpoint must fail"

# 4. Checkpoint/resume, two ranks.
json=$(mpi "$g" train $common --epochs 2 --loader gpufeed) || fail "mpirun 2 epochs: $json"
straight=$(field rank_checksums "$json")
mpi "$g" train $common --epochs 1 --checkpoint "$tmp/ck2" >/dev/null || fail "mpirun --checkpoint"
json=$(mpi "$g" train $common --epochs 2 --resume "$tmp/ck2") || fail "mpirun --resume: $json"
[ "$straight" = "$(field rank_checksums "$json")" ] ||
    fail "2-rank resume is not exact: $straight vs $(field rank_checksums "$json")"
echo "mpi: ok"

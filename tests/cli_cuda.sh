#!/bin/sh
# The CLI's CUDA paths end to end on cudaemu (tests/cudaemu): doctor, bench
# --overlap on the device, train on the device against the CPU, --amp,
# checkpoint and resume on the device, and refused pinned and device
# memory, and the NCCL path on one rank. Usage: cli_cuda.sh PATH/TO/gpufeed
# [PATH/TO/libnccl_emu.so] (a -Dcudaemu=true build)
# CLI_CUDA_CALIBRATE=0 leaves out the runs that calibrate the model's width
# (ten-odd timed steps each; seconds apiece under TSan, whose run is for the
# streams' ordering, which the other runs cover). CLI_CUDA_WIDTH (default 7)
# is the fixed width of the other runs: TSan's run takes 2, as the streams'
# ordering does not depend on how wide the model is.
set -eu
g=$1
nccl=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; wait || :; exit 1; } # the runs in the background first
field() { # field NAME < json -> the first value of NAME, quotes removed
    sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p" | head -n 1
}
losses() { # losses < train json -> one "loss accuracy" line per epoch
    tr '{' '\n' | grep '"epoch":' | sed 's/.*"loss": \([^,]*\),.*"accuracy": \([^,]*\),.*/\1 \2/'
}

"$g" doctor | grep -q 'GPU 0 .*cudaemu' || fail "doctor does not list the emulated device"

d=$tmp/data
"$g" make-dataset "$d/train" --classes 4 --per-class 12 --size 48x48 >/dev/null
"$g" make-dataset "$d/val" --classes 4 --per-class 4 --size 48x48 --seed 1 >/dev/null

o="bench --overlap --device cuda --compute-ms 1 --data $d/train --batch-size 8 --image-size 32"
j=$("$g" $o --json)
[ "$(echo "$j" | field device)" = cuda ] || fail "bench --overlap ran on: $j"
[ "$(echo "$j" | field pageable_slots)" = 0 ] || fail "slots should be pinned: $j"
[ "$(echo "$j" | field pinned_bytes)" -gt 0 ] || fail "no pinned bytes: $j"

out=$(GF_CUDAEMU_PINNED_MB=0 "$g" $o) || fail "bench must run on pageable slots: $out"
echo "$out" | grep -q 'note: 4 of 4 host slots are pageable, not pinned (cudaHostAlloc' ||
    fail "no pageable note: $out"

out=$(GF_CUDAEMU_MEM_MB=0 "$g" $o 2>&1) && fail "a ring over device memory must be refused"
echo "$out" | grep -q 'the ring needs .* MiB (4 slots x .* MiB) but 0.0 MiB are available' ||
    fail "device memory message: $out"

# With no --model-width, CUDA chooses the width by calibration and says so
# (the --amp run below checks the JSON).
calibrate=${CLI_CUDA_CALIBRATE:-1}
if [ "$calibrate" = 1 ]; then
    cal=$("$g" train --data $d --loader gpufeed --epochs 1 --batch-size 8 --image-size 32 --device cuda)
    echo "$cal" | grep -q '^  model width [0-9]* (calibrated' || fail "no calibrated width: $cal"
fi

base="train --data $d --epochs 2 --batch-size 8 --image-size 32 --json"
width=${CLI_CUDA_WIDTH:-7}
t="$base --loader gpufeed --model-width $width"
# Two runs at a time: each is one busy thread, and under TSan they take
# minutes. The CPU run, checkpoint, resume and NCCL go in the background.
(
    "$g" $base --loader both --model-width $width --device cpu >"$tmp/cpu.json"
    "$g" $t --device cuda --epochs 1 --checkpoint "$tmp/ck" >/dev/null
    "$g" $t --device cuda --resume "$tmp/ck" >"$tmp/resumed.json"
    if [ -n "$nccl" ]; then
        GPUFEED_NCCL_LIBRARY=$nccl "$g" $t --device cuda --allreduce nccl >"$tmp/nccl.json"
    fi
) &
background=$!
cuda=$("$g" $base --loader both --model-width $width --device cuda) || fail "train on cuda (above)"

# --amp: float16 batches through the device's conversion kernel.
if [ "$calibrate" = 1 ]; then
    amp=$("$g" $base --loader gpufeed --device cuda --amp)
    [ "$(echo "$amp" | field width_calibrated)" = true ] || fail "width_calibrated: $amp"
    echo "$amp" | grep -q '"calibration": {"factor": 1.2, "met": ' || fail "no calibration: $amp"
else
    amp=$("$g" $base --loader gpufeed --device cuda --amp --model-width $width)
fi
wait $background || fail "the CPU run, checkpoint, resume or NCCL run failed (above)"

# The same model on the device and on the CPU, fed by both loops: the same
# loss and accuracy per epoch (to the 3 decimals the human output prints),
# at one width. The synchronous loop's copy must reach the device before
# the step that reads it (under GF_CUDAEMU_LAZY_DEFAULT a copy on the
# legacy default stream is not ordered with the trainer's stream).
cpu=$(cat "$tmp/cpu.json")
[ "$(echo "$cuda" | field device)" = cuda ] || fail "train ran on: $cuda"
[ "$(echo "$cpu" | field width_calibrated)" = false ] || fail "the CPU calibrated: $cpu"
rounded() { awk '{ printf "%.3f %.3f\n", $1, $2 }'; }
[ "$(echo "$cpu" | losses | rounded)" = "$(echo "$cuda" | losses | rounded)" ] ||
    fail "CUDA and CPU training differ: cpu $(echo "$cpu" | losses) cuda $(echo "$cuda" | losses)"
[ "$(echo "$cuda" | losses | wc -l)" -eq 4 ] || fail "expected 2 epochs of each loop: $cuda"

# Checkpoint after epoch 1 and resume on the device: the weights of the
# uninterrupted run.
want=$(echo "$cuda" | field weights_checksum)
[ -n "$want" ] && [ "$(field weights_checksum <"$tmp/resumed.json")" = "$want" ] ||
    fail "resumed on CUDA: $(field weights_checksum <"$tmp/resumed.json"), uninterrupted $want"

# The NCCL path on one rank (tests/cudaemu/nccl.c): the gradients packed,
# summed in place on the stream and unpacked give the plain step's weights.
if [ -n "$nccl" ]; then
    [ "$(field weights_checksum <"$tmp/nccl.json")" = "$want" ] ||
        fail "--allreduce nccl: $(field weights_checksum <"$tmp/nccl.json"), plain $want: $(cat "$tmp/nccl.json")"
fi

[ "$(echo "$amp" | field amp)" = true ] || fail "--amp not reported: $amp"
[ "$(echo "$amp" | field input_bound_by_design)" = false ] || fail "gpufeed input-bound: $amp"
echo "$amp" | losses | awk '$1 != $1 + 0 || $1 <= 0 || $1 > 10 { exit 1 }' ||
    fail "--amp losses: $(echo "$amp" | losses)"
echo "cli_cuda: ok (per epoch, loss and accuracy: $(echo "$cuda" | losses | rounded | tr "\n" " "); weights $want)"

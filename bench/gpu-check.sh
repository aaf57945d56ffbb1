#!/bin/sh
# The device check: on a GPU machine, from a build made elsewhere, in a few
# minutes: the gpu test suites, gpufeed doctor, host<->device bandwidth, the
# input pipeline, the overlap benchmark on CUDA (with one copy stream, and
# with one per slot), gpufeed train (the demo, and
# at a width where the GPU outruns one decode thread but not the loader),
# and the NCCL all-reduce path against the plain step. Prints a short table
# last.
#
#   bench/gpu-check.sh [BUILD_DIR (build)] [OUT_DIR (.)]
#
# OUT_DIR gets three files: gpu-check.log, gpu-check-table.txt and
# gpu-check-files.tar.gz (each step's output and JSON).
#
# The build (only libc, libm and libstdc++ stay dynamic; cudart is static;
# MPI is left out, NCCL and NVML are loaded at run time), and the five
# binaries the check runs copied out of it to carry (the whole build folder
# is over the device tool's 64 MiB):
#   PATH=/usr/local/cuda/bin:$PATH meson setup build-gpu -Dcuda=enabled \
#     -Dmpi=disabled -Dprefer_static=true -Ddefault_library=static \
#     -Db_pie=false -Dbuildtype=release && ninja -C build-gpu
#   bench/gpu-check.sh --pack build-gpu build-gpu-pack
#   then on the device: bench/gpu-check.sh build-gpu-pack "$OUT"
# Needs a CUDA driver (CUDA 13's cudart: 580 or newer). NCCL is looked up
# in $GPUFEED_NCCL_LIBRARY, the loader's path, then Python's nvidia-nccl
# wheel. Exits non-zero if a suite fails or any step cannot run.
#
# A device command is killed at 600 s. So each step is killed after
# GPUFEED_CHECK_STEP_S (150) s, and the train and NCCL steps start only
# within GPUFEED_CHECK_DEADLINE_S (420) s of the start; a step left out is
# named, counts as a failure, and the table still prints.
#
# GPUFEED_CHECK_QUICK=1 rehearses the script with tiny workloads, e.g. on a
# -Dcudaemu=true build (tests/cudaemu) where there is no GPU: every step
# and the table run, and the figures mean nothing.
set -u
# What the check runs from the build: all a device run needs to carry.
binaries="src/cli/gpufeed bench/micro/gpufeed-bandwidth tests/test_gpu tests/test_model_gpu tests/test_gpu_fault"
if [ "${1:-}" = --pack ]; then
    build=${2:?usage: bench/gpu-check.sh --pack BUILD_DIR DEST}
    dest=${3:?usage: bench/gpu-check.sh --pack BUILD_DIR DEST}
    rm -rf "$dest"
    for b in $binaries; do
        mkdir -p "$dest/${b%/*}" && cp "$build/$b" "$dest/$b" || exit 1
    done
    # The device tool sends the working tree and the carried paths, 64 MiB
    # at most; the whole build folder is over that.
    limit=67108864
    tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -n 1 | cut -f 1)
    packed=$(du -sb "$dest" | cut -f 1)
    echo "$dest: $packed bytes; with the working tree $((tree + packed)) of $limit that may travel"
    [ $((tree + packed)) -le $limit ] || { echo "too large to travel" >&2; exit 1; }
    exit 0
fi
build=${1:-build}
out=${2:-.}
mkdir -p "$out"
log=$out/gpu-check.log
: >"$log"
# Each step's output, bundled into one file at the end: a device run
# brings back at most 8 files.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A device command is killed at 600 s, and its table with it: each step is
# capped, and the train and NCCL steps start only within the deadline.
t0=$(date +%s)
step_s=${GPUFEED_CHECK_STEP_S:-150}
deadline_s=${GPUFEED_CHECK_DEADLINE_S:-420}
gf() { timeout -k 10 "$step_s" "$build/src/cli/gpufeed" "$@"; }
in_time() {
    [ $(($(date +%s) - t0)) -lt "$deadline_s" ] && return 0
    say "not run: $1 (past the check's ${deadline_s} s deadline)"
    status=1
    return 1
}
status=0
quick=${GPUFEED_CHECK_QUICK:-0}
if [ "$quick" = 1 ]; then
    per_class=12 batch=16 widths="16 32" width_batches=8
    small="--epochs 1 --image-size 32 --batch-size 16"
else
    per_class=200 batch=128 widths="16 32 48 64 96 128" width_batches=120 small=""
fi
say() { echo "$*" | tee -a "$log"; }
field() { # field NAME < json  -> the number after "NAME":
    sed -n "s/.*\"$1\": *\([-0-9.e+]*\).*/\1/p" | head -n 1
}
mode_field() { # mode_field LOADER NAME < train json -> NAME of that loader's row
    tr '{' '\n' | grep "\"loader\": \"$1\"" | head -n 1 | field "$2"
}
pct() { awk -v x="${1:-}" 'BEGIN { if (x == "" || x == "null") print "-"; else printf "%.0f%%", 100 * x }'; }

say "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$log"
nproc | sed 's/^/cores: /' | tee -a "$log"

say "== binaries"
missing=$(for b in $binaries; do
    [ -x "$build/$b" ] || echo "$build/$b: not found"
    ldd "$build/$b" 2>/dev/null | grep 'not found'
done)
if [ -n "$missing" ]; then
    say "libraries missing on this machine (build with the flags above):"
    say "$missing"
    exit 1
fi

say "== doctor"
gf doctor >"$work/doctor.txt" 2>&1 || status=1
tail -n 12 "$work/doctor.txt" | tee -a "$log"

suite() { # suite NAME -> passed | SKIPPED | FAILED (rc N)
    if timeout -k 10 240 "$build/tests/$1" >"$work/$1.txt" 2>&1; then
        echo passed
    else
        rc=$?
        case $rc in
        77) echo SKIPPED ;;
        124 | 137) echo "TIMED OUT (240 s)" ;;
        *) echo "FAILED (rc $rc)" ;;
        esac
    fi
}
say "== gpu suites"
suite_gpu=$(suite test_gpu)
suite_model=$(suite test_model_gpu)
suite_fault=$(suite test_gpu_fault)
tail -n 3 "$work/test_gpu.txt" "$work/test_model_gpu.txt" "$work/test_gpu_fault.txt" | tee -a "$log"
[ "$suite_gpu" = passed ] && [ "$suite_model" = passed ] && [ "$suite_fault" = passed ] || status=1

say "== bandwidth"
bw=$(timeout -k 10 "$step_s" "$build/bench/micro/gpufeed-bandwidth" --json) || status=1
echo "$bw" >"$work/bandwidth.json"
echo "$bw" | tee -a "$log"

data=${GPUFEED_CHECK_DATA:-/tmp/gpufeed-check-data}
if [ ! -f "$data/.complete" ]; then
    rm -rf "$data"
    if gf make-dataset "$data" --classes 10 --per-class "$per_class" >>"$log" 2>&1; then
        touch "$data/.complete"
    else
        status=1
    fi
fi
threads=$(( $(nproc) - 2 ))
[ "$threads" -ge 1 ] || threads=1

say "== input pipeline (threads $threads)"
in=$(gf bench --input-only --data "$data" --threads "$threads" --batch-size "$batch" --json) || status=1
echo "$in" >"$work/input.json"
ips=$(echo "$in" | field images_per_s)
eff=$(echo "$in" | field efficiency)
say "images/s $ips, efficiency $eff"

# Compute at 0.5x, 1x and 2x the input time per batch, at depth 2 and 4.
in_ms=$(awk -v ips="${ips:-0}" -v b="$batch" 'BEGIN { printf "%.2f", (ips > 0 ? 1000 * b / ips : 10) }')
# The copy streams too (one for the ring, the default, or one per slot):
# the same run at 1x with a stream per slot.
rows=""
for run in "2 0.5 one" "2 1 one" "2 2 one" "4 0.5 one" "4 1 one" "4 2 one" "2 1 slot" "4 1 slot"; do
    set -- $run
    depth=$1 streams=$3
    ms=$(awk -v a="$in_ms" -v f="$2" 'BEGIN { printf "%.2f", a * f }')
    j=$(gf bench --overlap --device cuda --compute-ms "$ms" --data "$data" --threads "$threads" \
        --batch-size "$batch" --prefetch-depth "$depth" --copy-streams "$streams" --dtype f16 \
        --layout nchw --epochs 2 --json)
    rc=$?
    if [ $rc -ne 0 ]; then
        status=1
        rows="$rows$(printf '%5s %7s %8s   failed (rc %s%s)' "$depth" "$streams" "$ms" $rc \
            "$([ $rc -eq 124 ] || [ $rc -eq 137 ] && echo ": over $step_s s")")
"
        continue
    fi
    echo "$j" >>"$work/overlap.jsonl"
    rows="$rows$(printf '%5s %7s %8s %9s %10s %8s %9s %7s' "$depth" "$streams" "$ms" \
        "$(echo "$j" | field input_ms)" "$(echo "$j" | field compute_ms)" \
        "$(echo "$j" | field step_ms)" "$(echo "$j" | field sync_step_ms)" \
        "$(echo "$j" | field overlap_ratio)")
"
done

# gpufeed train: the demo as a new user runs it (its data set made once),
# then at the narrowest model width whose step is slower than the loader's
# input (bench's verdict mode), so the GPU can be kept busy.
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/gpufeed-check-cache}
say "== gpufeed train (defaults, --device cuda)"
demo=""
if in_time "gpufeed train (defaults)"; then
    demo=$(gf train --device cuda $small --json 2>>"$log") || status=1
    echo "$demo" >"$work/train-default.json"
fi

# NCCL: one rank through the all-reduce path must end with the plain
# step's weights (batch 16 divides the 2000 images: no partial batch).
say "== NCCL all-reduce (one rank) against the plain step"
if [ -z "${GPUFEED_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q libnccl.so.2; then
    nccl_dir=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
    [ -f "$nccl_dir/libnccl.so.2" ] && export GPUFEED_NCCL_LIBRARY="$nccl_dir/libnccl.so.2"
fi
nccl="not run (past the check's ${deadline_s} s deadline)"
if in_time "the NCCL all-reduce"; then
    one="--device cuda --loader gpufeed --epochs 1 --batch-size 16 --threads $threads --json"
    [ "$quick" = 1 ] && one="$one --image-size 32"
    plain=$(gf train $one 2>>"$log") || status=1
    viaccl=$(gf train $one --allreduce nccl 2>"$work/nccl.err")
    rc=$?
    cat "$work/nccl.err" >>"$log"
    sum_plain=$(echo "$plain" | sed -n 's/.*"weights_checksum": "\([0-9a-f]*\)".*/\1/p' | tail -n 1)
    sum_nccl=$(echo "$viaccl" | sed -n 's/.*"weights_checksum": "\([0-9a-f]*\)".*/\1/p' | tail -n 1)
    if [ $rc -ne 0 ]; then
        nccl="not run: $(tail -n 1 "$work/nccl.err")"
        status=1
    elif [ -n "$sum_plain" ] && [ "$sum_plain" = "$sum_nccl" ]; then
        nccl="same weights ($sum_nccl), all-reduce $(echo "$viaccl" | field allreduce_s) s"
    else
        nccl="DIFFERENT weights: plain $sum_plain, nccl $sum_nccl"
        status=1
    fi
    say "$nccl"
fi

tdata=$XDG_CACHE_HOME/gpufeed/train-data
width=""
for w in $widths; do
    in_time "the width sweep from width $w" || break
    j=$(gf bench --data "$tdata/train" --device cuda --model-width "$w" --image-size 60 \
        --batch-size 32 --threads "$threads" --batches "$width_batches" --json 2>>"$log") ||
        { status=1; break; }
    echo "$j" >>"$work/width.jsonl"
    c=$(echo "$j" | field compute_ms)
    i=$(echo "$j" | field input_ms)
    say "width $w: compute $c ms/batch, input $i ms/batch"
    [ -n "$c" ] && [ -n "$i" ] || { status=1; break; }
    width=$w
    awk -v c="$c" -v i="$i" 'BEGIN { exit !(c >= 1.2 * i) }' && break
done
tuned=""
amp=""
if [ -n "$width" ] && in_time "gpufeed train --model-width $width"; then
    say "== gpufeed train (--model-width $width, --device cuda)"
    tuned=$(gf train --device cuda --model-width "$width" --threads "$threads" $small --json \
        2>>"$log") || status=1
    echo "$tuned" >"$work/train-width.json"
fi
if [ -n "$width" ] && in_time "gpufeed train --model-width $width --amp"; then
    say "== gpufeed train (--model-width $width --amp: float16 batches)"
    amp=$(gf train --device cuda --model-width "$width" --threads "$threads" --amp $small \
        --json 2>>"$log") || status=1
    echo "$amp" >"$work/train-amp.json"
fi
train_row() { # train_row LABEL JSON
    [ -n "$2" ] || return 0
    for l in sync gpufeed; do
        printf '%-18s %-8s %9s %7s %6s %6s %6s %8s\n' "$1" "$l" \
            "$(echo "$2" | mode_field $l images_per_s | awk '{ printf "%.0f", $1 }')" \
            "$(echo "$2" | mode_field $l step_ms | awk '{ printf "%.2f", $1 }')" \
            "$(pct "$(echo "$2" | mode_field $l stall_fraction)")" \
            "$(pct "$(echo "$2" | mode_field $l device_utilization)")" \
            "$(pct "$(echo "$2" | mode_field $l nvml_utilization)")" \
            "$(pct "$(echo "$2" | mode_field $l of_compute_alone)")"
    done
}

peak=$(echo "$bw" | sed -n 's/.*"large": {"pinned_h2d_gbs": \([0-9.]*\).*/\1/p')
batch_pin=$(echo "$bw" | sed -n 's/.*"batch": {"pinned_h2d_gbs": \([0-9.]*\).*/\1/p')
batch_page=$(echo "$bw" | sed -n 's/.*"batch": {[^}]*"pageable_h2d_gbs": \([0-9.]*\).*/\1/p')
of_peak=$(echo "$bw" | field batch_pinned_h2d_of_peak)
{
    echo
    echo "== gpufeed device check"
    echo "gpu suite:               $suite_gpu"
    echo "model_gpu suite:         $suite_model"
    echo "gpu_fault suite:         $suite_fault"
    if [ -n "$peak" ]; then
        echo "H2D pinned, large:       $peak GB/s (peak)"
        echo "H2D pinned, batch:       $batch_pin GB/s ($of_peak of peak; goal >= 0.90)"
        echo "H2D pageable, batch:     $batch_page GB/s"
    else
        echo "H2D:                     not measured (gpufeed-bandwidth failed; see the log)"
    fi
    echo "input pipeline:          $ips images/s, efficiency $eff ($threads threads)"
    [ "$quick" = 1 ] && echo "QUICK REHEARSAL: tiny workloads, the figures mean nothing"
    echo "overlap (CUDA, f16 NCHW, batch $batch; goal ratio <= 1.05 at depth >= 2):"
    echo "depth streams  compute  input_ms compute_ms  step_ms   sync_ms   ratio"
    printf '%s' "$rows"
    echo "train ($([ "$quick" = 1 ] && echo "32x32, batch 16, 1 epoch" || echo "60x60, batch 32");" \
        "goal: sync < 50% busy, gpufeed >= 95% of compute alone):"
    printf '%-18s %-8s %9s %7s %6s %6s %6s %8s\n' run loader images/s step_ms stall busy NVML "of alone"
    train_row "default (width 7)" "$demo"
    train_row "width ${width:-?}" "$tuned"
    train_row "width ${width:-?} --amp" "$amp"
    echo "NCCL (1 rank):           $nccl"
} | tee "$out/gpu-check-table.txt" | tee -a "$log"
tar -czf "$out/gpu-check-files.tar.gz" -C "$work" .
exit $status

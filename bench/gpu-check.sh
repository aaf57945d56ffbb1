#!/bin/sh
# The device check: on a GPU machine, from a build made elsewhere (cudart is
# linked statically), in a few minutes: the gpu test suite, host<->device
# bandwidth, the input pipeline, and the overlap benchmark on CUDA. Prints a
# short table last.
#
#   bench/gpu-check.sh [BUILD_DIR (build)] [OUT_DIR (.)]
#
# Needs a CUDA driver; nothing else beyond the build folder. Exits non-zero
# if the gpu suite fails or any step cannot run.
set -u
build=${1:-build}
out=${2:-.}
g=$build/bench/gpufeed
mkdir -p "$out"
log=$out/gpu-check.log
: >"$log"
status=0
say() { echo "$*" | tee -a "$log"; }
field() { # field NAME < json  -> the number after "NAME":
    sed -n "s/.*\"$1\": *\([-0-9.e+]*\).*/\1/p" | head -n 1
}

say "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$log"
nproc | sed 's/^/cores: /' | tee -a "$log"

say "== gpu suite"
if "$build/tests/test_gpu" >"$out/gpu-suite.txt" 2>&1; then
    suite="passed"
else
    rc=$?
    suite=$([ $rc -eq 77 ] && echo "SKIPPED" || echo "FAILED (rc $rc)")
    status=1
fi
tail -n 5 "$out/gpu-suite.txt" | tee -a "$log"

say "== bandwidth"
"$build/bench/gpufeed-bandwidth" | tee -a "$log"
bw=$("$build/bench/gpufeed-bandwidth" --json) || status=1
echo "$bw" >"$out/bandwidth.json"

data=${GPUFEED_CHECK_DATA:-/tmp/gpufeed-check-data}
if [ ! -f "$data/.complete" ]; then
    rm -rf "$data"
    "$g" make-dataset "$data" --classes 10 --per-class 200 >>"$log" 2>&1 || status=1
    touch "$data/.complete"
fi
threads=$(( $(nproc) - 2 ))
[ "$threads" -ge 1 ] || threads=1

say "== input pipeline (threads $threads)"
in=$("$g" bench --input-only --data "$data" --threads "$threads" --batch-size 128 --json) || status=1
echo "$in" >"$out/input.json"
ips=$(echo "$in" | field images_per_s)
eff=$(echo "$in" | field efficiency)
say "images/s $ips, efficiency $eff"

# Compute at 0.5x, 1x and 2x the input time per batch, at depth 2 and 4.
in_ms=$(awk -v ips="$ips" 'BEGIN { printf "%.2f", (ips > 0 ? 128000 / ips : 10) }')
rows=""
for depth in 2 4; do
    for f in 0.5 1 2; do
        ms=$(awk -v a="$in_ms" -v f="$f" 'BEGIN { printf "%.2f", a * f }')
        j=$("$g" bench --overlap --device cuda --compute-ms "$ms" --data "$data" --threads "$threads" \
            --batch-size 128 --prefetch-depth "$depth" --dtype f16 --layout nchw --epochs 2 --json) ||
            { status=1; continue; }
        echo "$j" >>"$out/overlap.jsonl"
        rows="$rows$(printf '%5s %8s %9s %10s %8s %9s %7s' "$depth" "$ms" \
            "$(echo "$j" | field input_ms)" "$(echo "$j" | field compute_ms)" \
            "$(echo "$j" | field step_ms)" "$(echo "$j" | field sync_step_ms)" \
            "$(echo "$j" | field overlap_ratio)")
"
    done
done

peak=$(echo "$bw" | sed -n 's/.*"large": {"pinned_h2d_gbs": \([0-9.]*\).*/\1/p')
batch_pin=$(echo "$bw" | sed -n 's/.*"batch": {"pinned_h2d_gbs": \([0-9.]*\).*/\1/p')
batch_page=$(echo "$bw" | sed -n 's/.*"batch": {[^}]*"pageable_h2d_gbs": \([0-9.]*\).*/\1/p')
of_peak=$(echo "$bw" | field batch_pinned_h2d_of_peak)
{
    echo
    echo "== gpufeed device check"
    echo "gpu suite:               $suite"
    echo "H2D pinned, large:       $peak GB/s (peak)"
    echo "H2D pinned, batch:       $batch_pin GB/s ($of_peak of peak; goal >= 0.90)"
    echo "H2D pageable, batch:     $batch_page GB/s"
    echo "input pipeline:          $ips images/s, efficiency $eff ($threads threads)"
    echo "overlap (CUDA, f16 NCHW, batch 128; goal ratio <= 1.05 at depth >= 2):"
    echo "depth  compute  input_ms compute_ms  step_ms   sync_ms   ratio"
    printf '%s' "$rows"
} | tee -a "$log"
exit $status

#!/bin/sh
# The device check: on a GPU machine, from a build made elsewhere, within
# a fixed budget (360 s): the gpu test suites, gpufeed doctor,
# host<->device bandwidth, the input pipeline, the overlap benchmark on
# CUDA (with one copy stream, and with one per slot), gpufeed train (the
# demo, and at a width where the GPU outruns one decode thread but not the
# loader), the NCCL all-reduce path against the plain step, and the Python
# module on CUDA (its DLPack tests, the PyTorch example). Prints a short
# table last.
#
#   bench/gpu-check.sh [BUILD_DIR (build)] [OUT_DIR (.)]
#
# OUT_DIR gets five files, each written as the check goes, so that a kill
# loses nothing already measured: gpu-check-rows.txt (the table's rows, a
# line appended as each step ends), gpu-check.jsonl (each step's JSON, a
# line each), gpu-check.log (everything), and at the end
# gpu-check-table.txt and gpu-check-files.tar.gz (each step's raw output).
#
# The build (only libc, libm and libstdc++ stay dynamic; cudart is static;
# MPI is left out, NCCL and NVML are loaded at run time), and the five
# binaries the check runs copied out of it to carry (the whole build folder
# is over the device tool's 64 MiB):
#   PATH=/usr/local/cuda/bin:$PATH meson setup build-gpu -Dcuda=enabled \
#     -Dmpi=disabled -Dprefer_static=true -Ddefault_library=static \
#     -Db_pie=false -Dbuildtype=release && ninja -C build-gpu
#   GPUFEED_PACK_PYTHON=build bench/gpu-check.sh --pack build-gpu build-gpu-pack
#   (GPUFEED_PACK_PYTHON: a shared build whose Python module is packed too)
#   then on the device: bench/gpu-check.sh build-gpu-pack "$OUT"
# Needs a CUDA driver (CUDA 13's cudart: 580 or newer). NCCL is looked up
# in $GPUFEED_NCCL_LIBRARY, the loader's path, then every Python
# site-packages' nvidia-nccl wheel. Exits non-zero if a suite fails or any
# step cannot run, runs out of its cap or is skipped.
#
# The budget, by construction: every step has a cap (its command is killed
# there), and starts only if now + its cap fits GPUFEED_CHECK_BUDGET_S
# (360); otherwise the table says "skipped (budget: ...)". The caps of all
# the steps add up to less than the budget, and the script prints that sum
# first. Without fork a CUDA suite's test is bounded by the suites'
# watchdog (tests/run_suite.h), set here to 2/3 of the suite's cap
# (GPUFEED_CHECK_WATCHDOG_S sets it).
#
# GPUFEED_CHECK_QUICK=1 rehearses the script with tiny workloads and caps
# sized for the emulator, e.g. on a -Dcudaemu=true build (tests/cudaemu)
# where there is no GPU: every step and the table run, and the figures mean
# nothing. GPUFEED_CHECK_INJECT_HANG=suite|overlap|nccl makes one step of
# that kind hang (a test that never ends in the gpu suite, the second
# overlap run, the all-reduce run), to show that the check still ends
# within its budget and keeps what it measured before.
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
    # The Python module comes from a shared build (a static one has none:
    # Debian's libuv.a is not PIC), with the libraries it links that a
    # device image lacks; it is built for the stable ABI, so Debian's 3.11
    # build loads under the device's 3.12.
    if [ -n "${GPUFEED_PACK_PYTHON:-}" ]; then
        mod=$GPUFEED_PACK_PYTHON/python/gpufeed
        [ -f "$mod/_gpufeed.abi3.so" ] || { echo "$mod/_gpufeed.abi3.so: not built" >&2; exit 1; }
        mkdir -p "$dest/python/gpufeed" "$dest/python/lib" &&
            cp "$mod/__init__.py" "$mod/_gpufeed.abi3.so" "$dest/python/gpufeed/" || exit 1
        deps=$(ldd "$mod/_gpufeed.abi3.so") || { echo "ldd $mod/_gpufeed.abi3.so failed" >&2; exit 1; }
        if echo "$deps" | grep 'not found' >&2; then exit 1; fi
        echo "$deps" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
            grep -v -E '/(libc|libm|libdl|libpthread|librt|libz|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
            while read -r lib; do cp -L "$lib" "$dest/python/lib/" || exit 1; done || exit 1
    fi
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
mkdir -p "$out" || exit 1
log=$out/gpu-check.log
rows=$out/gpu-check-rows.txt
jsonl=$out/gpu-check.jsonl
: >"$log"
: >"$rows"
: >"$jsonl"
rm -f "$out/gpu-check-table.txt" "$out/gpu-check-files.tar.gz"
# Each step's raw output, bundled into one file at the end (a device run
# brings back at most 8 files); the rows, JSON and log above are what a
# kill leaves.
work=$(mktemp -d)
trap 'tar -czf "$out/gpu-check-files.tar.gz" -C "$work" . 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 143' TERM INT HUP
# Modules load at start-up, not in the first timed batch.
export CUDA_MODULE_LOADING=EAGER
t0=$(date +%s)
quick=${GPUFEED_CHECK_QUICK:-0}
budget=${GPUFEED_CHECK_BUDGET_S:-360}
inject=${GPUFEED_CHECK_INJECT_HANG:-}
case $inject in
"" | suite | overlap | nccl) ;;
*) echo "GPUFEED_CHECK_INJECT_HANG: suite, overlap or nccl, not '$inject'" >&2; exit 2 ;;
esac
status=0
cut=""   # the steps skipped or cut short, for the table
# Each step's cap in seconds (its worst case: killed there). On an H200
# each step takes a fraction of its cap; quick mode runs the emulator on a
# small CPU, where the tiny workloads are slower than the real ones there.
if [ "$quick" = 1 ]; then
    per_class=12 batch=16 widths="8" width_batches=8
    small="--epochs 1 --image-size 32 --batch-size 16"
    cap_smi=5 cap_doctor=20 cap_gpu=40 cap_model_gpu=30 cap_gpu_fault=20 cap_bw=20
    cap_data=30 cap_input=20 cap_overlap=15 cap_train=90 cap_lookup=5 cap_nccl=30 cap_width=60
    cap_tuned=100 cap_py_tests=60 cap_py_train=60
else
    per_class=200 batch=128 widths="16 32 48 64 96 128" width_batches=120 small=""
    cap_smi=5 cap_doctor=10 cap_gpu=25 cap_model_gpu=15 cap_gpu_fault=12 cap_bw=10
    cap_data=15 cap_input=10 cap_overlap=7 cap_train=30 cap_lookup=5 cap_nccl=10 cap_width=5
    cap_tuned=25 cap_py_tests=25 cap_py_train=35
fi
reserve=5 # the table and the tarball, after the last step
overlap_runs="2:0.5:one 2:1:one 2:2:one 4:0.5:one 4:1:one 4:2:one 2:1:slot 4:1:slot"
data=${GPUFEED_CHECK_DATA:-/tmp/gpufeed-check-data}
n_over=$(echo "$overlap_runs" | wc -w)
n_width=$(echo "$widths" | wc -w)
cap_dataset=0
[ -f "$data/.complete" ] || cap_dataset=$cap_data
worst=$((cap_smi + cap_doctor + cap_gpu + cap_model_gpu + cap_gpu_fault + cap_bw + cap_dataset +
    cap_input + n_over * cap_overlap + cap_train + cap_lookup + 2 * cap_nccl + n_width * cap_width +
    2 * cap_tuned + cap_py_tests + cap_py_train + reserve))

say() { echo "$*" | tee -a "$log"; }
row() { echo "$*" | tee -a "$rows" >>"$log"; } # a row of the table, kept as it is measured
field() { # field NAME < json  -> the number after "NAME":
    sed -n "s/.*\"$1\": *\([-0-9.e+]*\).*/\1/p" | head -n 1
}
sfield() { # sfield NAME < json  -> the string after "NAME": (no escapes)
    sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" | head -n 1
}
mode_field() { # mode_field LOADER NAME < train json -> NAME of that loader's row
    tr '{' '\n' | grep "\"loader\": \"$1\"" | head -n 1 | field "$2"
}
bfield() { # bfield NAME < json  -> true or false after "NAME":
    sed -n "s/.*\"$1\": *\(true\|false\).*/\1/p" | head -n 1
}
mode_bfield() { # mode_bfield LOADER NAME < train json
    tr '{' '\n' | grep "\"loader\": \"$1\"" | head -n 1 | bfield "$2"
}
pct() { awk -v x="${1:-}" 'BEGIN { if (x == "" || x == "null") print "-"; else printf "%.0f%%", 100 * x }'; }
keep_json() { # keep_json LABEL JSON: one line of gpu-check.jsonl
    [ -n "$2" ] || return 0
    printf '{"step": "%s", "json": %s}\n' "$1" "$(echo "$2" | tr '\n' ' ')" >>"$jsonl"
}

# step KEY LABEL CAP CMD...: runs CMD, killed at CAP s, if CAP fits what is
# left of the budget; else skips it. Its output: $work/KEY.out and .err,
# both appended to the log. Sets step_rc (a number, or "skipped"), step_s
# and step_why ("" when it passed), and returns non-zero unless it passed;
# that fails the check unless step_soft=1 (a probe).
step_soft=0
step() {
    key=$1 label=$2 cap=$3
    shift 3
    now=$(date +%s)
    left=$((t0 + budget - reserve - now))
    step_s=0
    # The input, overlap and sweep steps read the check's data set.
    case " $* " in
    *" --data $data "*) [ -f "$data/.complete" ] || left=-1 ;;
    esac
    if [ "$left" -lt 0 ] && [ "$cap" -le $((t0 + budget - reserve - now)) ]; then
        step_rc=skipped step_why="skipped (no data set: make-dataset did not finish)"
        say "-- $label: $step_why"
        [ "$step_soft" = 1 ] && return 1
        cut="$cut
  $label: $step_why"
        status=1
        return 1
    fi
    if [ "$cap" -gt "$left" ]; then
        step_rc=skipped step_why="skipped (budget: needs $cap s, $left s left)"
        say "-- $label: $step_why"
        [ "$step_soft" = 1 ] && return 1
        cut="$cut
  $label: $step_why"
        status=1
        return 1
    fi
    say "-- $label (cap $cap s, at $((now - t0)) s)"
    timeout -k 2 $((cap - 2)) "$@" >"$work/$key.out" 2>"$work/$key.err"
    step_rc=$?
    step_s=$(($(date +%s) - now))
    cat "$work/$key.out" "$work/$key.err" >>"$log"
    case $step_rc in
    0) step_why="" ;;
    124 | 137) step_why="TIMED OUT (cap $cap s)" ;;
    86) step_why="HUNG (ended by the suites' watchdog)" ;; # tests/run_suite.h
    *) step_why="failed (rc $step_rc)" ;;
    esac
    [ -z "$step_why" ] && return 0
    [ "$step_soft" = 1 ] && return 1
    cut="$cut
  $label: $step_why"
    status=1
    say "   $step_why after $step_s s"
    return 1
}
gf="$build/src/cli/gpufeed"
hang="sleep 100000" # what an injected hang runs

say "== gpufeed device check: budget $budget s (GPUFEED_CHECK_BUDGET_S)"
bound=$worst
[ "$worst" -le "$budget" ] || bound=$budget
say "worst case by construction: $bound s; the caps of the steps that can run add up to $worst s" \
    "($n_over overlap runs, $n_width sweep width(s), ${reserve} s for the table)"
[ "$worst" -le "$budget" ] ||
    say "  over the budget: a step whose cap no longer fits what is left is skipped"
[ -n "$inject" ] && say "INJECTED HANG: $inject (GPUFEED_CHECK_INJECT_HANG)"

say "== machine"
step_soft=1
step smi "nvidia-smi" "$cap_smi" nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader
step_soft=0
gpu_name=$(head -n 1 "$work/smi.out" 2>/dev/null)
nproc | sed 's/^/cores: /' | tee -a "$log"
row "machine:                 ${gpu_name:-no nvidia-smi} ($(nproc) cores)"

say "== binaries"
missing=$(for b in $binaries; do
    [ -x "$build/$b" ] || echo "$build/$b: not found"
    ldd "$build/$b" 2>/dev/null | grep 'not found'
done)
if [ -n "$missing" ]; then
    say "libraries missing on this machine (build with the flags above):"
    say "$missing"
    row "binaries:                MISSING (see the log)"
    exit 1
fi

say "== doctor"
step doctor "gpufeed doctor" "$cap_doctor" "$gf" doctor
if [ "$step_rc" = skipped ]; then
    row "doctor:                  $step_why"
else
    row "doctor:                  ${step_why:-ok} ($step_s s)"
fi

injected="" # the injected hang goes to the first step of its kind that starts
suite() { # suite NAME CAP: a row: passed | SKIPPED | HUNG | FAILED
    name=$1 cap=$2
    # The watchdog bounds each test below the suite's cap.
    dog_s=${GPUFEED_CHECK_WATCHDOG_S:-$((cap * 2 / 3))}
    hang_env=""
    [ "$inject" = suite ] && [ -z "$injected" ] && hang_env=GF_TEST_INJECT_HANG=1
    step "$name" "suite $name" "$cap" env GF_TEST_WATCHDOG_S="$dog_s" $hang_env \
        "$build/tests/$name"
    [ -n "$hang_env" ] && [ "$step_rc" != skipped ] && injected=1
    dog=$(grep -o "hung [a-z]* test '[^']*'" "$work/$name.out" "$work/$name.err" 2>/dev/null |
        head -n 1 | sed 's/^[^:]*://')
    case $step_rc in
    0) r="passed ($step_s s)" ;;
    77) r="SKIPPED: no device ($step_s s)" ;;
    86) r="HUNG: the watchdog (GF_TEST_WATCHDOG_S=$dog_s): $dog ($step_s s)" ;;
    skipped) r=$step_why ;;
    *) r="$step_why ($step_s s)" ;;
    esac
    [ "$step_rc" = 0 ] || status=1
    row "$(printf '%-24s %s' "$name suite:" "$r")"
}
say "== gpu suites"
suite test_gpu "$cap_gpu"
suite test_model_gpu "$cap_model_gpu"
suite test_gpu_fault "$cap_gpu_fault"

say "== bandwidth"
bw=""
step bandwidth "gpufeed-bandwidth" "$cap_bw" "$build/bench/micro/gpufeed-bandwidth" --json &&
    bw=$(cat "$work/bandwidth.out")
keep_json bandwidth "$bw"
peak=$(echo "$bw" | sed -n 's/.*"large": {"pinned_h2d_gbs": \([0-9.]*\).*/\1/p')
batch_pin=$(echo "$bw" | sed -n 's/.*"batch": {"pinned_h2d_gbs": \([0-9.]*\).*/\1/p')
batch_page=$(echo "$bw" | sed -n 's/.*"batch": {[^}]*"pageable_h2d_gbs": \([0-9.]*\).*/\1/p')
of_peak=$(echo "$bw" | field batch_pinned_h2d_of_peak)
if [ -n "$peak" ]; then
    row "H2D pinned, large:       $peak GB/s (peak)"
    row "H2D pinned, 9.6 MB:      $batch_pin GB/s ($of_peak of peak; goal >= 0.90)"
    row "H2D pageable, 9.6 MB:    $batch_page GB/s"
else
    row "H2D:                     not measured (${step_why:-no figures}; see the log)"
fi

if [ ! -f "$data/.complete" ]; then
    rm -rf "$data"
    step dataset "make-dataset" "$cap_data" "$gf" make-dataset "$data" --classes 10 \
        --per-class "$per_class" && touch "$data/.complete"
    [ -f "$data/.complete" ] || row "data set:                ${step_why:-not made}"
fi
threads=$(($(nproc) - 2))
[ "$threads" -ge 1 ] || threads=1

say "== input pipeline (threads $threads)"
in=""
step input "bench --input-only" "$cap_input" "$gf" bench --input-only --data "$data" \
    --threads "$threads" --batch-size "$batch" --json && in=$(cat "$work/input.out")
keep_json input "$in"
ips=$(echo "$in" | field images_per_s)
eff=$(echo "$in" | field efficiency)
if [ -n "$in" ]; then
    row "input pipeline:          $ips images/s, efficiency $eff ($threads threads)"
else
    row "input pipeline:          $step_why"
fi

# Compute at 0.5x, 1x and 2x the input time per batch, at depth 2 and 4;
# the copy streams too (one for the ring, the default, or one per slot):
# the same run at 1x with a stream per slot.
in_ms=$(awk -v ips="${ips:-0}" -v b="$batch" 'BEGIN { printf "%.2f", (ips > 0 ? 1000 * b / ips : 10) }')
row "overlap (CUDA, f16 NCHW, batch $batch; goal ratio <= 1.05 at depth >= 2; H2D: the loader's"
row "  own batch copies, CUDA events, against the large-copy peak):"
row "depth streams  compute  input_ms compute_ms  step_ms   sync_ms   ratio pageable  H2D GB/s (of peak)"
n=0 started=0
for run in $overlap_runs; do
    n=$((n + 1))
    depth=${run%%:*} streams=${run##*:} f=${run#*:}
    f=${f%:*}
    ms=$(awk -v a="$in_ms" -v f="$f" 'BEGIN { printf "%.2f", a * f }')
    label="overlap depth $depth, $streams stream(s), compute $ms ms"
    this_hang=""
    if [ "$inject" = overlap ] && [ "$started" = 1 ] && [ -z "$injected" ]; then
        set -- $hang # the second run that starts: a row before it to keep
        this_hang=1
    else
        set -- "$gf" bench --overlap --device cuda --compute-ms "$ms" --data "$data" \
            --threads "$threads" --batch-size "$batch" --prefetch-depth "$depth" \
            --copy-streams "$streams" --dtype f16 --layout nchw --epochs 2 --json
    fi
    step "overlap$n" "$label" "$cap_overlap" "$@"
    if [ "$step_rc" != skipped ]; then
        started=$((started + 1))
        [ -n "$this_hang" ] && injected=1 step_why="$step_why: the injected hang"
    fi
    if [ "$step_rc" != 0 ]; then
        row "$(printf '%5s %7s %8s   %s' "$depth" "$streams" "$ms" "$step_why")"
        continue
    fi
    j=$(cat "$work/overlap$n.out")
    keep_json "overlap $depth $streams $ms" "$j"
    h2d=$(echo "$j" | field h2d_batch_gbps)
    h2d_bytes=$(echo "$j" | field h2d_batch_bytes)
    if [ -n "$h2d" ]; then
        h2d=$(awk -v g="$h2d" -v p="${peak:-0}" -v b="${h2d_bytes:-0}" 'BEGIN {
            of = p > 0 ? sprintf("%.0f%%", 100 * g / p) : "no peak"
            printf "%.2f (%s, %.0f KB)", g, of, b / 1024 }')
    else
        h2d="not reported"
    fi
    row "$(printf '%5s %7s %8s %9s %10s %8s %9s %7s %8s  %s' "$depth" "$streams" "$ms" \
        "$(echo "$j" | field input_ms)" "$(echo "$j" | field compute_ms)" \
        "$(echo "$j" | field step_ms)" "$(echo "$j" | field sync_step_ms)" \
        "$(echo "$j" | field overlap_ratio)" "$(echo "$j" | field pageable_slots)" "$h2d")"
    note=$(echo "$j" | sfield device_note)
    [ -n "$note" ] && row "      note: $note"
done

# gpufeed train: the demo as a new user runs it (its data set made once),
# then at the narrowest model width whose step is slower than the loader's
# input (bench's verdict mode), so the GPU can be kept busy.
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/gpufeed-check-cache}
train_header=""
train_row() { # train_row LABEL JSON: the sync and gpufeed rows of a train run
    if [ -z "$train_header" ]; then
        train_header=1
        row "train ($([ "$quick" = 1 ] && echo "32x32, batch 16, 1 epoch" || echo "60x60, batch 32");" \
            "goal: sync < 50% busy, gpufeed >= 95% of compute alone):"
        row "$(printf '%-18s %-8s %9s %7s %6s %6s %6s %8s' run loader images/s step_ms stall busy NVML "of alone")"
    fi
    if [ -z "$2" ]; then
        row "$(printf '%-18s %s' "$1" "$step_why")"
        return 0
    fi
    for l in sync gpufeed; do
        row "$(printf '%-18s %-8s %9s %7s %6s %6s %6s %8s' "$1" "$l" \
            "$(echo "$2" | mode_field $l images_per_s | awk '{ printf "%.0f", $1 }')" \
            "$(echo "$2" | mode_field $l step_ms | awk '{ printf "%.2f", $1 }')" \
            "$(pct "$(echo "$2" | mode_field $l stall_fraction)")" \
            "$(pct "$(echo "$2" | mode_field $l device_utilization)")" \
            "$(pct "$(echo "$2" | mode_field $l nvml_utilization)")" \
            "$(pct "$(echo "$2" | mode_field $l of_compute_alone)")")$(
            [ "$(echo "$2" | mode_bfield $l input_bound_by_design)" = true ] &&
                echo "  input-bound by design: no 95% goal")"
    done
    pageable=$(echo "$2" | field pageable_slots)
    note=$(echo "$2" | sfield device_note)
    row "$(printf '%-18s pageable slots: %s; device note: %s' "" "${pageable:-not reported}" \
        "${note:-none}")"
}
say "== gpufeed train (defaults, --device cuda)"
demo=""
step train-default "gpufeed train (defaults)" "$cap_train" "$gf" train --device cuda $small --json &&
    demo=$(cat "$work/train-default.out")
keep_json "train default" "$demo"
w=$(echo "$demo" | field model_width)
[ "$(echo "$demo" | bfield width_calibrated)" = true ] && w="$w cal."
train_row "default${w:+ (w $w)}" "$demo"

# NCCL: one rank through the all-reduce path must end with the plain
# step's weights (batch 16 divides the 2000 images: no partial batch).
# One rank on loopback: no network to find in a sandbox.
say "== NCCL all-reduce (one rank) against the plain step"
if [ -z "${GPUFEED_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q libnccl.so.2; then
    # nvidia-nccl-cu1x wheels: site-packages/nvidia/nccl/lib/, under any
    # Python of the image (the system's, /usr/local's, each one on PATH),
    # not only the one first on PATH.
    step_soft=1
    step nccl-lookup "libnccl.so.2 in Python's site-packages" "$cap_lookup" sh -c '
        ls -d /usr/lib/python3*/*-packages /usr/local/lib/python3*/*-packages 2>/dev/null
        for p in $(echo "$PATH" | tr ":" " "); do
            for py in "$p"/python3 "$p"/python3.[0-9]*; do
                [ -x "$py" ] && "$py" -c "import site; print(chr(10).join(site.getsitepackages() + [site.getusersitepackages()]))" 2>/dev/null
            done
        done
        exit 0'
    step_soft=0
    for s in $(cat "$work/nccl-lookup.out" 2>/dev/null); do
        [ -f "$s/nvidia/nccl/lib/libnccl.so.2" ] &&
            { export GPUFEED_NCCL_LIBRARY="$s/nvidia/nccl/lib/libnccl.so.2"; break; }
    done
fi
nccl_lib=${GPUFEED_NCCL_LIBRARY:-}
say "libnccl: ${nccl_lib:-libnccl.so.2 on the loader path}"
one="--device cuda --loader gpufeed --epochs 1 --batch-size 16 --threads $threads --json"
[ "$quick" = 1 ] && one="$one --image-size 32"
plain="" viaccl=""
step nccl-plain "train, plain step (for NCCL)" "$cap_nccl" "$gf" train $one &&
    plain=$(cat "$work/nccl-plain.out")
keep_json "train plain step" "$plain"
if [ -z "$plain" ]; then
    nccl="not run: the plain step: $step_why"
else
    this_hang=""
    if [ "$inject" = nccl ]; then
        set -- $hang
        this_hang=": the injected hang"
    else
        set -- env NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=WARN "$gf" train $one --allreduce nccl
    fi
    step nccl "train --allreduce nccl" "$cap_nccl" "$@" && viaccl=$(cat "$work/nccl.out")
    keep_json "train nccl" "$viaccl"
    sum_plain=$(echo "$plain" | sed -n 's/.*"weights_checksum": "\([0-9a-f]*\)".*/\1/p' | tail -n 1)
    sum_nccl=$(echo "$viaccl" | sed -n 's/.*"weights_checksum": "\([0-9a-f]*\)".*/\1/p' | tail -n 1)
    if [ "$step_rc" != 0 ]; then
        err=$(tail -n 1 "$work/nccl.err" 2>/dev/null)
        nccl="not run: $step_why$this_hang${err:+: $err}"
    elif [ -n "$sum_plain" ] && [ "$sum_plain" = "$sum_nccl" ]; then
        nccl="same weights ($sum_nccl), all-reduce $(echo "$viaccl" | field allreduce_s) s"
    else
        nccl="DIFFERENT weights: plain $sum_plain, nccl $sum_nccl"
        status=1
    fi
fi
row "NCCL (1 rank):           $nccl"

tdata=$XDG_CACHE_HOME/gpufeed/train-data
width=""
for w in $widths; do
    step "width$w" "bench at width $w" "$cap_width" "$gf" bench --data "$tdata/train" \
        --device cuda --model-width "$w" --image-size 60 --batch-size 32 --threads "$threads" \
        --batches "$width_batches" --json || { row "width $w:                $step_why"; break; }
    j=$(cat "$work/width$w.out")
    keep_json "width $w" "$j"
    c=$(echo "$j" | field compute_ms)
    i=$(echo "$j" | field input_ms)
    row "width $w:                compute $c ms/batch, input $i ms/batch"
    [ -n "$c" ] && [ -n "$i" ] || { status=1; break; }
    width=$w
    awk -v c="$c" -v i="$i" 'BEGIN { exit !(c >= 1.2 * i) }' && break
done
if [ -n "$width" ]; then
    say "== gpufeed train (--model-width $width, --device cuda)"
    tuned=""
    step train-width "gpufeed train --model-width $width" "$cap_tuned" "$gf" train --device cuda \
        --model-width "$width" --threads "$threads" $small --json &&
        tuned=$(cat "$work/train-width.out")
    keep_json "train width $width" "$tuned"
    train_row "width $width" "$tuned"
    say "== gpufeed train (--model-width $width --amp: float16 batches)"
    amp=""
    step train-amp "gpufeed train --model-width $width --amp" "$cap_tuned" "$gf" train \
        --device cuda --model-width "$width" --threads "$threads" --amp $small --json &&
        amp=$(cat "$work/train-amp.out")
    keep_json "train width $width amp" "$amp"
    train_row "width $width --amp" "$amp"
fi

# Python (python/): the DLPack tests, device batches among them, and the
# PyTorch example on CUDA (float16 device batches against DataLoader with
# pinned memory), from the module --pack copied out of a shared build.
say "== Python: gpufeed.Loader on CUDA"
py=$build/python
pyexe=${GPUFEED_PYTHON:-python3}
if [ ! -f "$py/gpufeed/_gpufeed.abi3.so" ]; then
    row "Python:                  not packed (GPUFEED_PACK_PYTHON=BUILD at --pack)"
    status=1
else
    # Torch loads its kernels lazily unless told otherwise: EAGER (exported
    # above for gpufeed's own binaries) would load all of libtorch's first.
    # Outside quick mode a skipped CUDA test fails (GPUFEED_REQUIRE_CUDA).
    require=1
    [ "$quick" = 1 ] && require=0
    set -- env "LD_LIBRARY_PATH=$py/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "PYTHONPATH=$py" \
        "GPUFEED_CLI=$gf" CUDA_MODULE_LOADING=LAZY "GPUFEED_REQUIRE_CUDA=$require" "$pyexe"
    step py-tests "Python DLPack tests" "$cap_py_tests" "$@" -m pytest -q -rs \
        -p no:cacheprovider python/tests/test_dlpack.py
    tally=$(grep -E '[0-9]+ (passed|failed|skipped)' "$work/py-tests.out" 2>/dev/null | tail -n 1)
    if [ "$step_rc" = skipped ]; then
        row "Python DLPack tests:     $step_why"
    else
        row "Python DLPack tests:     ${step_why:-ok}${tally:+: $tally} ($step_s s)"
    fi
    pydev=cuda pysets="--classes 8 --per-class 100 --val-per-class 25"
    [ "$quick" = 1 ] && pydev=cpu pysets="--classes 2 --per-class 8 --val-per-class 4 --size 64x48 --image-size 32 --batch-size 8"
    step py-train "train_torch.py --device $pydev" "$cap_py_train" "$@" \
        python/train_torch.py --device "$pydev" --cli "$gf" $pysets --epochs 2 \
        --threads "$threads" --json
    pyrows=$("$pyexe" -c '
import json, sys
r = json.load(open(sys.argv[1]))
for name, x in r["loaders"].items():
    acc = ", ".join(f"{v:.2f}" for v in x["val_accuracy"])
    ips, wait, step = x["images_per_s"], 100 * x["wait_fraction"], 1000 * x["step_s"]
    print(f"{name:8s} {ips:8.0f} images/s, waits {wait:.0f}%, step {step:.1f} ms, "
          f"val accuracy {acc}")' "$work/py-train.out" 2>/dev/null)
    keep_json "train_torch" "$(cat "$work/py-train.out" 2>/dev/null)"
    if [ -n "$pyrows" ]; then
        echo "$pyrows" | while read -r line; do row "$(printf '%-24s %s' "Python train ($pydev):" "$line")"; done
    else
        row "Python train ($pydev):     ${step_why:-no figures}"
        status=1
    fi
fi

{
    echo
    echo "== gpufeed device check"
    [ "$quick" = 1 ] && echo "QUICK REHEARSAL: tiny workloads, the figures mean nothing"
    [ -n "$inject" ] && echo "INJECTED HANG: $inject (GPUFEED_CHECK_INJECT_HANG)"
    cat "$rows"
    echo "time: $(($(date +%s) - t0)) s of the $budget s budget; worst case by construction" \
        "$bound s (the caps add up to $worst s)"
    if [ -n "$cut" ]; then
        echo "skipped or cut short:$cut"
    fi
} | tee "$out/gpu-check-table.txt" >>"$log"
cat "$out/gpu-check-table.txt"
exit $status

#!/bin/sh
# bench's default mode (the verdict) on workloads whose bottleneck is known.
# Usage: bench_verdict.sh PATH/TO/gpufeed verdict|sweep
#
#   verdict  measures the input cost of a small set (one decode thread), then
#            runs the verdict with a busy-loop compute of 0.3x that cost
#            (must say input-bound), 3x (compute-bound) and 1x (balanced).
#   sweep    a small sweep with --json, --csv and --plot: the JSON and CSV
#            rows, the best and the recommended row (within 5% of the best),
#            and the SVG: well-formed XML, and rendered to PNG by
#            rsvg-convert (Debian's librsvg2-bin). Exits 77 (skipped)
#            without rsvg-convert.
#
# The machine this runs on may have 2 cores shared with other work: the
# busy loop and the decode thread each want one. A case that misses is
# measured again once (a contended run inflates one side), and the balanced
# case's compute is set to the input cost measured just before it.
set -eu
g=$1
what=${2:-verdict}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# The last value of a JSON key (top-level keys follow the rows).
jget() { printf '%s\n' "$2" | grep -o "\"$1\": *[^,}]*" | tail -n 1 | sed 's/^[^:]*: *//; s/"//g'; }

d=$tmp/data
"$g" make-dataset "$d" --classes 2 --per-class 48 --size 320x240 --seed 1 >/dev/null
set -- --data "$d" --device cpu --image-size 64 --transform train
"$g" bench --input-only "$@" --threads 1 --batch-size 16 >/dev/null # the page cache

if [ "$what" = sweep ]; then
    command -v rsvg-convert >/dev/null 2>&1 || { echo "no rsvg-convert (librsvg2-bin): skipped"; exit 77; }
    json=$("$g" bench "$@" --threads 1 --prefetch-depth 1,2,4 --batch-size 8,16 --epochs 2 \
           --compute-ms 2 --json --csv "$tmp/s.csv" --plot "$tmp/s.svg") || fail "sweep: $json"
    [ "$(printf '%s\n' "$json" | wc -l)" -eq 1 ] || fail "--json must print one line: $json"
    for k in machine settings rows verdict input_factor recommendation best recommended \
             device_time_lost_to_input images_per_s stall_fraction device_utilization pinned_bytes \
             input_cause remote_requests remote_wait_s; do
        printf '%s' "$json" | grep -q "\"$k\":" || fail "--json lacks $k: $json"
    done
    v=$(jget verdict "$json")
    case $v in input-bound|compute-bound|balanced) ;; *) fail "verdict '$v'";; esac
    [ "$(printf '%s' "$json" | grep -o '"prefetch_depth": [0-9]' | wc -l)" -eq 6 ] ||
        fail "6 rows expected: $json"
    [ "$(wc -l <"$tmp/s.csv")" -eq 7 ] || fail "CSV: a header and 6 rows expected: $(cat "$tmp/s.csv")"
    head -n 1 "$tmp/s.csv" | grep -q '^threads,prefetch_depth,batch_size,.*images_per_s,stall_fraction,device_utilization,pinned_bytes' ||
        fail "CSV header: $(head -n 1 "$tmp/s.csv")"
    # One best, one recommended, the recommended within 5% of the best.
    awk -F, 'NR > 1 { if ($14 == 1) { nb++; b = $7 } if ($15 == 1) { nr++; r = $7 } }
             END { if (nb != 1 || nr != 1 || r < 0.95 * b) exit 1 }' "$tmp/s.csv" ||
        fail "CSV best/recommended: $(cat "$tmp/s.csv")"
    # The SVG: well-formed, labelled, one line per thread count and batch.
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$tmp/s.svg" ||
            fail "the SVG is not well-formed XML"
    fi
    for t in 'prefetch depth' 'images/s' 'device utilization' '1 thread, batch 8' '1 thread, batch 16'; do
        grep -q "$t" "$tmp/s.svg" || fail "the SVG lacks '$t'"
    done
    [ "$(grep -c '<polyline' "$tmp/s.svg")" -eq 4 ] || fail "the SVG: 2 series x 2 panels expected"
    rsvg-convert -o "$tmp/s.png" "$tmp/s.svg" || fail "rsvg-convert cannot render the SVG"
    [ "$(head -c 8 "$tmp/s.png" | od -An -c | tr -d ' ')" = '211PNG\r\n032\n' ] ||
        fail "rsvg-convert did not write a PNG"
    [ "$(wc -c <"$tmp/s.png")" -gt 10000 ] || fail "the PNG is suspiciously small"
    echo "bench_verdict sweep: ok ($v)"
    exit 0
fi

# One decode thread, batch 16 of 64x64 from 320x240: ~4 ms of input a batch
# here; 12 epochs = 72 batches, ~66 timed.
set -- "$@" --threads 1 --batch-size 16 --prefetch-depth 4 --epochs 12
run() { "$g" bench "$@" --json || fail "bench $*"; }

# The input cost: a verdict run with a negligible compute.
json=$(run "$@" --compute-ms 0.2)
in_ms=$(jget input_ms "$json")
[ "$(jget verdict "$json")" = input-bound ] || fail "0.2 ms of compute must be input-bound: $json"
echo "input: $in_ms ms/batch"

# expect: compute = $ratio x the last input cost must give $want. Bench's
# arguments are "$@".
expect() {
    for try in 1 2; do
        ms=$(awk -v a="$in_ms" -v r="$ratio" 'BEGIN { printf "%.3f", a * r }')
        json=$(run "$@" --compute-ms "$ms")
        got=$(jget verdict "$json")
        echo "$want case: --compute-ms $ms (${ratio}x input $in_ms): $got," \
             "input_factor $(jget input_factor "$json"), step $(jget step_ms "$json") ms (try $try)"
        in_ms=$(jget input_ms "$json")
        [ "$got" = "$want" ] && return 0
    done
    fail "compute ${ratio}x input: expected $want, got $got: $json"
}
ratio=0.3 want=input-bound
expect "$@"
ratio=3 want=compute-bound
expect "$@"
# Balanced: the compute exactly the input cost just measured (a retry
# uses the failed run's own input figure). The input cost of one run is
# not the next one's (by 30% under ASan on a quiet machine), so a run that
# lands outside the balanced band must still give the verdict of its own
# input_factor, its side of the band; four runs outside it pass only so.
verdict_of() {
    awk -v f="$1" 'BEGIN { print (f > 1.1 ? "input-bound" : (f < 0.9 ? "compute-bound" : "balanced")) }'
}
for try in 1 2 3 4; do
    ms=$(awk -v a="$in_ms" 'BEGIN { printf "%.3f", a }')
    json=$(run "$@" --compute-ms "$ms")
    got=$(jget verdict "$json") factor=$(jget input_factor "$json")
    echo "balanced case: --compute-ms $ms (1x input $in_ms): $got, input_factor $factor," \
         "step $(jget step_ms "$json") ms (try $try)"
    [ "$got" = "$(verdict_of "$factor")" ] ||
        fail "input_factor $factor must say $(verdict_of "$factor"), got $got: $json"
    [ "$got" = balanced ] && break
    in_ms=$(jget input_ms "$json")
done
[ "$got" = balanced ] || echo "balanced: the band missed 4 times; each verdict agreed with its factor"
echo "bench_verdict: ok"

#!/bin/sh
# Fuzzes each target with libFuzzer (clang, ASan + UBSan) for SECONDS
# each, from its seeds plus the corpus kept in $FUZZ_CORPUS
# (fuzz-corpus/), one target at a time or those named:
#
#   tests/fuzz/run.sh [SECONDS (60)] [TARGET ...]
#
# Targets: every tests/fuzz/fuzz_TARGET.c. A crash leaves its input in
# fuzz-corpus/crash-TARGET-*; replay it with build/tests/fuzz_TARGET
# FILE, and keep it in tests/fuzz/regressions/TARGET/ once fixed. Exits non-zero if any target crashed.
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-$(ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_||; s|\.c$||')}
build=${FUZZ_BUILD:-build-fuzz}
corpus=$(realpath -m "${FUZZ_CORPUS:-fuzz-corpus}") # absolute: fuzz_source changes directory
if [ ! -d "$build" ]; then
    CC=clang meson setup "$build" -Dfuzz=true -Dcuda=disabled -Dmpi=disabled \
        -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args=-fsanitize=fuzzer-no-link >/dev/null
fi
ninja -C "$build" $(for t in $targets; do echo tests/fuzz_$t; done) >/dev/null
status=0
for t in $targets; do
    mkdir -p "$corpus/$t"
    echo "== fuzz_$t, ${secs} s"
    if GPUFEED_FUZZ_SEEDS="$corpus/$t" UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$build/tests/fuzz_$t" "$corpus/$t" -max_total_time="$secs" -max_len=65536 \
        -rss_limit_mb=2048 -timeout=20 -artifact_prefix="$corpus/crash-$t-" \
        -print_final_stats=1 2>"$corpus/$t.log"; then
        grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "$corpus/$t.log" | tail -n 3
    else
        status=1
        grep -E "ERROR|SUMMARY|check failed|Test unit written" "$corpus/$t.log" | head -n 8
    fi
done
exit $status

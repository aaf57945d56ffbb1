#!/bin/bash
# Remote shards against the same shards read locally: nginx on loopback
# (the shards in the page cache), the same through the fault proxy with
# LATENCY_MS added before each response's first byte (the shard order,
# default settings; and the global order, a ranged GET a sample), and
# Swift's S3 API (images/s and requests per epoch, shard vs global order);
# and the 50 ms row again with --cache-dir, the cache filled by a first run;
# where nginx has its echo module, the 50 ms row once more with nginx itself
# waiting (echo_sleep), no relay: the proxy's row pays its CPU on the
# cores the loader runs on, which a distant store would not.
# Alternated runs, medians (and the median of each run over the local run
# before it); with each row, the CPU seconds a run took in
# the loader's process (user + system) and in the servers' processes.
#
#   bench/remote.sh [WORK]
#
# Starts its servers itself (tests/remote/servers.sh: nginx, Swift with
# s3api, the fault proxy on 127.0.0.1). Environment: GPUFEED, THREADS (2),
# SIZE (224), BATCH (64), EPOCHS (3 a run), RUNS (3), CLASSES (10),
# PER_CLASS (100), SHARDS (32: four times the default shard buffers, so
# every epoch fetches every shard again), LATENCY_MS (50), ROWS (all of
# local http lat lat_nginx lat_global lat_cache s3 s3_global; name fewer
# for more runs of those in the same time; local always runs). The set is
# make-dataset's (500x375 JPEGs, about 100 KB each).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
if [ -z "${GF_TEST_TMPDIR:-}" ]; then
    GF_TEST_HTTP_DELAY_MS=${LATENCY_MS:-50} exec "$root/tests/remote/servers.sh" --need http,s3,proxy -- "$0" "$@"
fi
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2}
SIZE=${SIZE:-224}
BATCH=${BATCH:-64}
EPOCHS=${EPOCHS:-3}
RUNS=${RUNS:-3}
CLASSES=${CLASSES:-10}
PER_CLASS=${PER_CLASS:-100}
SHARDS=${SHARDS:-32}
LATENCY_MS=${LATENCY_MS:-50}
me=remote.sh
. "$here/lib.sh"
find_gpufeed
work_dir "${1:-$GF_TEST_TMPDIR/bench}"
export GF_NO_PROGRESS=1

last=$(printf '%06d' $((SHARDS - 1)))
pat="train-{000000..$last}.tar"
"$GPUFEED" make-dataset "$WORK/set" --classes "$CLASSES" --per-class "$PER_CLASS" \
    --shards "$SHARDS" --seed 1 >/dev/null
"$GPUFEED" index "$WORK/set/$pat" >/dev/null
# Served twice: at the root (direct) and under lat/ (the proxy delays only
# paths with /lat/, so the S3 requests through it are not delayed).
mkdir -p "$GF_TEST_HTTP_ROOT/lat"
cp "$WORK"/set/*.tar "$WORK"/set/*.idx "$GF_TEST_HTTP_ROOT/"
cp "$WORK"/set/*.tar "$WORK"/set/*.idx "$GF_TEST_HTTP_ROOT/lat/"
for f in "$WORK"/set/*.tar "$WORK"/set/*.idx; do "$GF_TEST_S3_PUT" "$f" "bench/$(basename "$f")"; done
ctl=$GF_TEST_PROXY_CONTROL
curl -sf -X POST "$ctl/clear" >/dev/null
curl -sf -X POST "$ctl/rule?match=/lat/&fault=latency&ms=$LATENCY_MS&times=0" >/dev/null
export AWS_ENDPOINT_URL_S3=$GF_TEST_PROXY_S3_ENDPOINT
delay=${GF_TEST_HTTP_DELAY_URL:-}
[ -z "$delay" ] || [ "$GF_TEST_HTTP_DELAY_MS" = "$LATENCY_MS" ] ||
    delay="" # servers.sh was told another delay (GF_TEST_HTTP_DELAY_MS)
[ -n "$delay" ] || echo "remote.sh: no nginx-delay row: nginx's echo module is not installed (apt-get install libnginx-mod-http-echo)" >&2
cat "$WORK"/set/*.tar >/dev/null # the page cache, for the local reads and nginx

field() { "$PYTHON" -c 'import json,sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }
# CPU seconds (user + system) the servers (nginx, Swift, the proxy, and
# their workers) have used so far: on this machine they share the cores
# with the loader, which a store on other machines would not.
servers_cpu() {
    "$PYTHON" - "$GF_TEST_TMPDIR/pids" <<'PY'
import os, sys
hz = os.sysconf("SC_CLK_TCK")
stat = {}
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    stat[int(p)] = (int(f[1]), sum(map(int, f[11:15])))  # ppid; its and reaped children's CPU
ours = {int(x) for x in open(sys.argv[1]).read().split()}
grew = True
while grew:
    more = {p for p, (pp, _) in stat.items() if pp in ours} - ours
    ours |= more
    grew = bool(more)
print(sum(stat[p][1] for p in ours if p in stat) / hz)
PY
}
# images/s of one run; the loader's requests an epoch go to $WORK/req.NAME,
# its CPU seconds and the servers' to $WORK/cpu.NAME and $WORK/srv.NAME
run() {
    local name=$1 data=$2 srv0 t
    shift 2
    srv0=$(servers_cpu)
    t=$( { TIMEFORMAT='%U %S'; time "$GPUFEED" bench --input-only --data "$data" --threads "$THREADS" \
        --image-size "$SIZE" --batch-size "$BATCH" --epochs "$EPOCHS" --transform train "$@" \
        --json >"$WORK/out.json" 2>"$WORK/err.txt"; } 2>&1) ||
        { cat "$WORK/out.json" "$WORK/err.txt" >&2; exit 1; }
    awk '{ print $1 + $2 }' <<<"$t" >>"$WORK/cpu.$name"
    awk -v a="$srv0" -v b="$(servers_cpu)" 'BEGIN { print b - a }' >>"$WORK/srv.$name"
    echo $(($(field remote_requests <"$WORK/out.json") / EPOCHS)) >>"$WORK/req.$name"
    field images_per_s <"$WORK/out.json"
}

names="local http lat lat_nginx lat_global lat_cache s3 s3_global"
ROWS=${ROWS:-$names}
want() { case " $ROWS " in *" $1 "*) return 0 ;; esac; return 1; }
[ -n "$delay" ] || ROWS=${ROWS/lat_nginx/}
for n in $names; do : >"$WORK/rate.$n"; : >"$WORK/req.$n"; : >"$WORK/cpu.$n"; : >"$WORK/srv.$n"; done
s3="s3://$GF_TEST_S3_BUCKET/bench/$pat"
# The cache's row reads a cache one untimed run filled (as a job's later
# runs and epochs do): a one-byte request a shard a run, the bytes local.
if want lat_cache; then
    run lat_cache "$GF_TEST_PROXY_HTTP_URL/lat/$pat" --cache-dir "$WORK/cache" >/dev/null
    : >"$WORK/req.lat_cache"; : >"$WORK/cpu.lat_cache"; : >"$WORK/srv.lat_cache"
fi
for r in $(seq "$RUNS"); do
    echo "run $r of $RUNS" >&2
    run local "$WORK/set/$pat" --order shards >>"$WORK/rate.local"
    ! want http || run http "$GF_TEST_HTTP_URL/$pat" >>"$WORK/rate.http"
    ! want lat || run lat "$GF_TEST_PROXY_HTTP_URL/lat/$pat" >>"$WORK/rate.lat"
    ! want lat_nginx || run lat_nginx "$delay/$pat" >>"$WORK/rate.lat_nginx"
    ! want lat_global || run lat_global "$GF_TEST_PROXY_HTTP_URL/lat/$pat" --order global >>"$WORK/rate.lat_global"
    ! want lat_cache || run lat_cache "$GF_TEST_PROXY_HTTP_URL/lat/$pat" --cache-dir "$WORK/cache" >>"$WORK/rate.lat_cache"
    ! want s3 || run s3 "$s3" >>"$WORK/rate.s3"
    ! want s3_global || run s3_global "$s3" --order global >>"$WORK/rate.s3_global"
done

med() { median <"$WORK/$1.$2"; }
loc=$(med rate local)
printf '%s images, %s shards, %s threads, %s px, batch %s, %s epochs a run, median of %s\n' \
    "$((CLASSES * PER_CLASS))" "$SHARDS" "$THREADS" "$SIZE" "$BATCH" "$EPOCHS" "$RUNS"
# Run by run: each run's rate over the local run just before it, then the
# median. This machine's speed drifts between runs (its CPU seconds for the
# same work move with it); a pair of neighbouring runs shares the drift, the
# medians of two rows need not.
paired() { paste -d ' ' "$WORK/rate.$1" "$WORK/rate.local" |
    awk '$2 > 0 { print $1 / $2 }' | median | xargs printf '%.2f'; }
printf '| read from | order | images/s | vs local | vs local, run by run | requests/epoch | loader CPU s | servers CPU s |\n'
printf '|---|---|---|---|---|---|---|---|\n'
row() { printf '| %s | %s | %.1f | %s | %s | %s | %.2f | %.2f |\n' "$1" "$2" "$(med rate "$3")" \
    "$(ratio "$(med rate "$3")" "$loc")" "$(paired "$3")" "$4" "$(med cpu "$3")" "$(med srv "$3")"; }
row "local shards (page cache)" shards local "-"
! want http || row "nginx, loopback" shards http "$(med req http)"
! want lat || row "nginx + ${LATENCY_MS} ms a response (proxy)" shards lat "$(med req lat)"
! want lat_nginx || row "nginx + ${LATENCY_MS} ms a response (nginx's echo_sleep)" shards lat_nginx "$(med req lat_nginx)"
! want lat_global || row "nginx + ${LATENCY_MS} ms a response (proxy)" global lat_global "$(med req lat_global)"
! want lat_cache || row "nginx + ${LATENCY_MS} ms, --cache-dir (filled)" shards lat_cache "$(med req lat_cache)"
! want s3 || row "Swift s3api (through the proxy, no delay)" shards s3 "$(med req s3)"
! want s3_global || row "Swift s3api (through the proxy, no delay)" global s3_global "$(med req s3_global)"
for n in $names; do [ ! -s "$WORK/rate.$n" ] || echo "$n: $(tr '\n' ' ' <"$WORK/rate.$n")" >&2; done

#!/bin/sh
# Where is darknet input-bound? For each cfg and input size: darknet's
# compute alone (train_network on one cached batch), darknet's loader alone
# (load_data, 32 threads) and gpufeed's alone (K batches each, from the
# loader's start; compute after one warm-up step). A cfg is input-bound with darknet's loader where its loader
# alone is slower than compute alone. Prints one row per cfg and size
# (and appends the JSON lines to $GPUFEED_SWEEP_OUT). Same 800x800 q50 set
# as run.sh; nothing is trained here (run.sh times training).
#   Usage: sweep.sh BUILD_DIR [K_BATCHES [CFG...]]
set -eu
build=${1:?usage: sweep.sh BUILD_DIR [K_BATCHES [CFG...]]}
alone=${2:-3}
[ $# -gt 2 ] && shift 2 || shift $#
here=$(dirname "$0")
cfgs=${*:-"$here/small.cfg /usr/share/darknet/cfg/cifar.cfg /usr/share/darknet/cfg/tiny.cfg /usr/share/darknet/cfg/darknet.cfg /usr/share/darknet/cfg/resnet18.cfg"}
sizes=${GPUFEED_SWEEP_SIZES:-32 48 64 96 128}
out=${GPUFEED_SWEEP_OUT:-/dev/null}
g=$build/src/cli/gpufeed
dn=$build/bench/darknet/gpufeed-darknet
. "$here/data.sh"
lines=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$lines" "$tmp"' EXIT
trap 'exit 130' INT TERM
# Sizes ascend: compute per image grows with the area while darknet's
# loader (a whole 800x800 decode per sample) does not, so past the first
# compute-bound size a cfg only gets more so; the rest are not run.
for cfg in $cfgs; do
    [ -f "$cfg" ] || { echo "$cfg: no such cfg" >&2; continue; }
    # ImageNet's classifiers end in a 1000-filter conv: 10 classes here.
    sed 's/^filters=1000$/filters=10/' "$cfg" >"$tmp/$(basename "$cfg")"
    cfg=$tmp/$(basename "$cfg")
    for px in $sizes; do
        if ! line=$("$dn" --cfg "$cfg" --train "$data/train" --val "$data/val" --size "$px" \
            --batch 64 --alone "$alone" --rates-only --json 2>"$tmp/err"); then
            echo "$(basename "$cfg") $px px: failed: $(tail -n 1 "$tmp/err")" >&2
            echo "{\"cfg\": \"$cfg\", \"size\": $px, \"failed\": true}" >>"$lines"
            continue
        fi
        echo "$line" >>"$lines"
        echo "$(basename "$cfg") $px px: $line" >&2
        echo "$line" | python3 -c '
import json, sys
r = json.load(sys.stdin)
sys.exit(0 if r["loaders"][0]["loader_alone_ips"] < r["compute_alone_ips"] else 1)' ||
            break
    done
done
cat "$lines" >>"$out"
python3 - "$lines" <<'PY'
import json, os, sys
print(f"{'cfg':14s} {'px':>4s} | {'compute':>8s} | {'darknet':>8s} {'gpufeed':>8s} | bound with darknet's loader")
print(f"{'':14s} {'':>4s} | {'alone':>8s} | {'alone':>8s} {'alone':>8s} | (images/s; alone = K batches)")
for line in open(sys.argv[1]):
    r = json.loads(line)
    name = os.path.basename(r["cfg"])
    if r.get("failed"):
        print(f"{name:14s} {r['size']:4d} | failed")
        continue
    c = r["compute_alone_ips"]
    d, g = r["loaders"]
    bound = "input" if d["loader_alone_ips"] < c else "compute"
    print(f"{name:14s} {r['size']:4d} | {c:8.1f} | {d['loader_alone_ips']:8.1f} {g['loader_alone_ips']:8.1f} |"
          f" {bound} ({d['loader_alone_ips'] / c:.2f}x compute)")
PY

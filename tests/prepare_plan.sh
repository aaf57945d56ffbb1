#!/bin/sh
# gpufeed prepare --plan on a tiny set: the table lists every setting;
# bytes fall with the max side; raw's PSNR is at least JPEG's at the same
# side; the originals are exact; --need-rate picks the smallest set that
# reaches it (and none when nothing does); a bad source file is skipped
# and counted. Images are 640x480 so that every max side downscales. The
# crop is 64: at 32 the original's reference decode is DCT-scaled (1/8) and
# a small JPEG's scaled decode can sit closer to it than raw's resample.
# Usage: prepare_plan.sh PATH/TO/gpufeed
set -eu
g=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

src=$tmp/src
"$g" make-dataset "$src" --classes 2 --per-class 3 --size 640x480 --seed 5 >/dev/null
printf 'not an image' >"$src/class_01/img_00001.jpg"
plan="--plan-samples 6 --image-size 64 --threads 2"

"$g" prepare --plan "$src" $plan --json >"$tmp/p.json" || fail "--plan --json: $(cat "$tmp/p.json")"
python3 - "$tmp/p.json" <<'PY' || fail "the plan: $(cat "$tmp/p.json")"
import json, math, sys
p = json.load(open(sys.argv[1]))
assert p["samples"] == 6 and p["sampled"] == 6 and p["decoded"] == 5 and p["bad"] == 1, p
assert [b["path"] for b in p["bad_samples"]] == ["class_01/img_00001.jpg"], p["bad_samples"]
rows = {r["name"]: r for r in p["settings"]}
sides = (512, 384, 256, 160)
names = ["original"] + [f"{s} {f}" for s in sides for f in ("jpeg q90", "raw")]
assert list(rows) == names, list(rows)
for r in p["settings"]:
    assert r["images_per_s"] > 0 and r["bytes"] > 0, r
psnr = lambda r: math.inf if r["exact"] else r["psnr_db"]
assert rows["original"]["exact"] and rows["original"]["psnr_db"] is None
for f in ("jpeg q90", "raw"):
    b = [rows[f"{s} {f}"]["bytes"] for s in sides]
    assert b == sorted(b, reverse=True) and len(set(b)) == 4, (f, b)
for s in sides:
    assert psnr(rows[f"{s} raw"]) >= psnr(rows[f"{s} jpeg q90"]), s
    assert rows[f"{s} raw"]["bytes"] > rows[f"{s} jpeg q90"]["bytes"], s
# Whole set = the sample's bytes scaled; every sample was sampled here.
assert all(abs(r["bytes"] - r["sample_bytes"]) < 1 for r in p["settings"])
assert p["need_rate"] is None and "35 dB" in p["rule"]
PY

# --need-rate: half the slowest row's rate, so every setting reaches it
# (rates vary between runs: the pick is checked against this run's own).
need=$(python3 -c "import json,sys; print(min(r['images_per_s'] for r in json.load(open(sys.argv[1]))['settings']) / 4)" "$tmp/p.json")
"$g" prepare --plan "$src" $plan --need-rate "$need" --json >"$tmp/n.json" || fail "--need-rate"
python3 - "$tmp/n.json" <<'PY' || fail "--need-rate's pick: $(cat "$tmp/n.json")"
import json, sys
p = json.load(open(sys.argv[1]))
ok = [r for r in p["settings"] if r["images_per_s"] >= p["need_rate"]]
assert ok and p["recommended"] == min(ok, key=lambda r: r["bytes"])["name"], p
assert "--need-rate" in p["rule"]
PY
# The text table: every setting, the originals exact, the bad file named;
# nothing reaches 1e9 images/s, and it says so.
"$g" prepare --plan "$src" $plan --need-rate 1e9 >"$tmp/p.txt" || fail "--plan text"
for s in original "512 jpeg q90" "512 raw" "384 jpeg q90" "384 raw" "256 jpeg q90" "256 raw" \
         "160 jpeg q90" "160 raw"; do
    grep -q "^   $s " "$tmp/p.txt" || fail "no '$s' row: $(cat "$tmp/p.txt")"
done
grep -q '^   original .* exact$' "$tmp/p.txt" || fail "originals are exact: $(cat "$tmp/p.txt")"
grep -q '^  BAD .*class_01/img_00001.jpg' "$tmp/p.txt" || fail "names the bad file"
grep -q 'no setting reaches 1000000000 images/s' "$tmp/p.txt" ||
    fail "says nothing reaches 1e9: $(cat "$tmp/p.txt")"

# Usage: --plan takes SRC alone.
"$g" prepare --plan "$src" "$tmp/out" 2>"$tmp/err" && fail "--plan with OUT must be refused"
grep -q 'SRC alone' "$tmp/err" || fail "says why: $(cat "$tmp/err")"
echo "prepare_plan.sh: ok"

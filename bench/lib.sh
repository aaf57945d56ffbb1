# Shared by the bench scripts (sourced): the gpufeed program, a work
# directory, medians and ratios, a prepared set's shard pattern.
# Needs $root (the checkout) and $me (the script's name for messages).

# GPUFEED: as set, else build-cli's or build's, else the one on PATH.
find_gpufeed() {
    if [ -z "${GPUFEED:-}" ]; then
        for g in "$root/build-cli/src/cli/gpufeed" "$root/build/src/cli/gpufeed"; do
            if [ -x "$g" ]; then GPUFEED=$g; break; fi
        done
        GPUFEED=${GPUFEED:-$(command -v gpufeed || true)}
    fi
    [ -n "$GPUFEED" ] && [ -x "$GPUFEED" ] || { echo "$me: gpufeed binary not found (set GPUFEED)" >&2; exit 2; }
}

# WORK: $1 when given (made), else a temporary directory removed at exit.
work_dir() {
    if [ -n "${1:-}" ]; then
        WORK=$1
        mkdir -p "$WORK"
    else
        WORK=$(mktemp -d)
        trap 'rm -rf "$WORK"' EXIT
    fi
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }

# OUT/NAME-{000000..NNNNNN}.tar from prepare's manifest in OUT ($1).
pattern() {
    "$PYTHON" -c 'import json,sys; m=json.load(open(sys.argv[1]+"/manifest.json")); s=m["shards"]
print("%s/%s-{%06d..%06d}.tar" % (sys.argv[1], m["settings"]["name"], 0, len(s) - 1))' "$1"
}

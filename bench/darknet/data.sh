# Sourced by run.sh and sweep.sh (with $g the gpufeed program): sets $data
# to the set both benchmark, made once: large square JPEGs, where darknet's
# loader (a whole-image OpenCV decode and float conversion per sample)
# costs more than small.cfg's compute.
data=${GPUFEED_DARKNET_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufeed-darknet-800q50}
if [ ! -d "$data/val" ]; then
    "$g" make-dataset "$data/train" --classes 10 --per-class 40 --size 800x800 --quality 50 \
        --seed 1 >/dev/null
    "$g" make-dataset "$data/val" --classes 10 --per-class 20 --size 800x800 --quality 50 \
        --seed 2 >/dev/null
fi

#!/usr/bin/python3
"""gpufeed's side of the mask bench: bench/torch_masks.py's job through gpufeed.Loader.

gpufeed.Loader(DATA, fields=("jpg", "cls", "seg.png:mask"), transform="train",
image_size=224, batch_size=64, threads=2, device="cpu"): per batch the images
(B, 224, 224, 3) uint8, the labels and the masks (B, 224, 224) uint8, each
mask cropped to its image's RandomResizedCrop box and flipped with it, by
nearest neighbour. Every batch is touched (one byte of images and of masks,
through the buffer protocol) and let go before the next, as
bench/torch_masks.py touches its batches.

Timing and output as bench/torch_masks.py's: per epoch (the first from
before the Loader is made), samples_per_s (= images_per_s) over the epochs
after the first, all_epochs_samples_per_s over all; one JSON line.

    PYTHONPATH=build/python /usr/bin/python3 bench/gpufeed_masks.py DATA \\
        [--threads 2] [--batch-size 64] [--epochs 3]

DATA: a directory of train-*.tar, or a pattern 'DIR/train-{000000..000015}.tar'.
"""
import argparse
import glob
import json
import os
import sys
import time

import numpy as np

# The gpufeed module from PYTHONPATH (a build's python/), never this directory.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
import gpufeed  # noqa: E402

FIELDS = ("jpg", "cls", "seg.png:mask")


def shards(data):
    """gpufeed's --data for a directory of train-*.tar (a brace range), else data."""
    if not os.path.isdir(data):
        return data
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(data, "train-*.tar")))
    if not names:
        sys.exit(f"gpufeed_masks.py: no train-*.tar in {data}")
    return os.path.join(data, "train-{%s..%s}.tar" % (names[0][6:12], names[-1][6:12]))


def touch(batch, first, size):
    images, labels, masks = batch
    x, m = np.asarray(images), np.asarray(masks)
    if first:
        assert x.shape[1:] == (size, size, 3) and x.dtype == np.uint8, (x.shape, x.dtype)
        assert m.shape == (x.shape[0], size, size) and m.dtype == np.uint8, (m.shape, m.dtype)
        assert len(np.asarray(labels)) == x.shape[0]
    return int(x[0, 0, 0, 0]) + int(m[0, 0, 0]), x.shape[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="a directory of train-*.tar, or 'DIR/train-{000000..000015}.tar'")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    data = shards(a.data)
    epoch_s, epoch_n = [], []
    touched = 0
    t = time.perf_counter()
    with gpufeed.Loader(data, fields=FIELDS, transform="train", image_size=a.image_size,
                        batch_size=a.batch_size, threads=a.threads, device="cpu",
                        seed=a.seed, epochs=a.epochs) as loader:
        for _ in range(a.epochs):  # a `for` is one epoch
            n = 0
            for batch in loader:
                b, count = touch(batch, not epoch_n and n == 0, a.image_size)
                del batch  # the slot goes back before the next batch is waited for
                touched += b
                n += count
            now = time.perf_counter()
            epoch_s.append(now - t)
            epoch_n.append(n)
            t = now
        stats = loader.stats()
    steady = slice(1, None) if a.epochs > 1 else slice(None)
    sps = sum(epoch_n[steady]) / sum(epoch_s[steady])
    print(json.dumps({
        "loader": "gpufeed", "data": data, "samples": sum(epoch_n),
        "elapsed_s": sum(epoch_s), "samples_per_s": sps, "images_per_s": sps,
        "rate_over": "epochs 2.." + str(a.epochs) if a.epochs > 1 else "epoch 1",
        "all_epochs_samples_per_s": sum(epoch_n) / sum(epoch_s),
        "epoch_s": epoch_s, "epoch_samples": epoch_n[0], "threads": a.threads,
        "batch_size": a.batch_size, "image_size": a.image_size, "transform": "train",
        "fields": ",".join(FIELDS), "epochs": a.epochs, "touched": touched,
        "wait_s": stats.get("wait_s"), "errors": stats.get("errors"),
        "keys_skipped": stats.get("shard_keys_skipped"),
        "gpufeed": gpufeed.__version__, "cores": os.cpu_count(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

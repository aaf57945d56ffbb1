#!/usr/bin/python3
"""gpufeed's rate on latents alone: gpufeed.Loader(fields=("latent.npy",)).

Over bench/make_latents.py's shards, on the CPU: each batch a one-item
tuple, an Array (B, 4, 32, 32) float16 (no image, no label), touched (one
value read through the buffer protocol) and let go before the next.
Timing as bench/torch_masks.py's: per epoch (the first from before the
Loader is made), samples_per_s over the epochs after the first
(all_epochs_samples_per_s over all); bytes_per_s is samples_per_s times
the shards' bytes a sample (tar headers and .cls included), to set beside
the page cache's rate (bench/latent_rate.sh). One JSON line.

    PYTHONPATH=build/python /usr/bin/python3 bench/gpufeed_latents.py DATA \\
        [--threads 2] [--batch-size 256] [--epochs 3]

DATA: a directory of train-*.tar, or a pattern 'DIR/train-{000000..000015}.tar'.
"""
import argparse
import glob
import json
import os
import re
import sys
import time

import numpy as np

# The gpufeed module from PYTHONPATH (a build's python/), never this directory.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
import gpufeed  # noqa: E402

FIELDS = ("latent.npy",)
SHAPE = (4, 32, 32)


def shards(data):
    """(gpufeed's --data, the shards' paths): a directory's train-*.tar as a brace range."""
    if os.path.isdir(data):
        paths = sorted(glob.glob(os.path.join(data, "train-*.tar")))
        if not paths:
            sys.exit(f"gpufeed_latents.py: no train-*.tar in {data}")
        first, last = (os.path.basename(p)[6:12] for p in (paths[0], paths[-1]))
        return os.path.join(data, "train-{%s..%s}.tar" % (first, last)), paths
    m = re.search(r"\{(\d+)\.\.(\d+)\}", data)
    if not m:
        return data, data.split(",")
    w = len(m.group(1))
    return data, [data[:m.start()] + str(i).zfill(w) + data[m.end():]
                  for i in range(int(m.group(1)), int(m.group(2)) + 1)]


def touch(batch, first):
    (latents,) = batch
    z = np.asarray(latents)
    if first:
        assert z.shape[1:] == SHAPE and z.dtype == np.float16, (z.shape, z.dtype)
    return float(z[0, 0, 0, 0]), z.shape[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="a directory of train-*.tar, or 'DIR/train-{000000..000015}.tar'")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    data, paths = shards(a.data)
    shard_bytes = sum(os.path.getsize(p) for p in paths)
    epoch_s, epoch_n = [], []
    touched = 0.0
    t = time.perf_counter()
    with gpufeed.Loader(data, fields=FIELDS, batch_size=a.batch_size, threads=a.threads,
                        device="cpu", seed=a.seed, epochs=a.epochs) as loader:
        for _ in range(a.epochs):  # a `for` is one epoch
            n = 0
            for batch in loader:
                v, count = touch(batch, not epoch_n and n == 0)
                del batch  # the slot goes back before the next batch is waited for
                touched += v
                n += count
            now = time.perf_counter()
            epoch_s.append(now - t)
            epoch_n.append(n)
            t = now
        stats = loader.stats()
    steady = slice(1, None) if a.epochs > 1 else slice(None)
    sps = sum(epoch_n[steady]) / sum(epoch_s[steady])
    per_sample = shard_bytes / epoch_n[0] if epoch_n[0] else 0.0
    print(json.dumps({
        "loader": "gpufeed", "data": data, "samples": sum(epoch_n),
        "elapsed_s": sum(epoch_s), "samples_per_s": sps, "bytes_per_s": sps * per_sample,
        "rate_over": "epochs 2.." + str(a.epochs) if a.epochs > 1 else "epoch 1",
        "all_epochs_samples_per_s": sum(epoch_n) / sum(epoch_s),
        "epoch_s": epoch_s, "epoch_samples": epoch_n[0], "shard_bytes": shard_bytes,
        "threads": a.threads, "batch_size": a.batch_size, "fields": ",".join(FIELDS),
        "epochs": a.epochs, "touched": touched,
        "wait_s": stats.get("wait_s"), "errors": stats.get("errors"),
        "keys_skipped": stats.get("shard_keys_skipped"),
        "gpufeed": gpufeed.__version__, "cores": os.cpu_count(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

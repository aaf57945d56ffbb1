#!/usr/bin/python3
# Writes tar shards of precomputed latents, as a latent-diffusion trainer
# reads them (the VAE run once over the images, beforehand): per sample
# KEY.latent.npy (np.save of a float16 (4, 32, 32) array: 128 bytes of
# header and 8192 of data, the latent of a 256x256 image) and KEY.cls (the
# class as decimal text, no newline, as make-dataset writes it). No image.
# For the latent bench (bench/README.md, "Latents alone").
#
#   make_latents.py DST [--shards 16] [--per-shard 2000] [--classes 1000] [--seed 0]
#
# DST/train-000000.tar ... (POSIX ustar, mode 0644, owner 0/0, make-dataset's
# fixed mtime), KEY = sample_NNNNNNNN (the sample's number over the set).
# The values are normal (mean 0, sd 1, as a scaled VAE latent) from
# numpy's default_rng(seed, shard): the same bytes every run.
import argparse
import io
import os
import sys
import tarfile

import numpy as np

MTIME = 1700000000  # 2023-11-14, make-dataset's
SHAPE = (4, 32, 32)


def member(name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), MTIME, 0o644
    return info, io.BytesIO(data)


def main():
    ap = argparse.ArgumentParser(description="tar shards of KEY.latent.npy + KEY.cls")
    ap.add_argument("dst")
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--per-shard", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.shards < 1 or a.per_shard < 1 or a.classes < 1:
        ap.error("--shards, --per-shard and --classes must be at least 1")
    os.makedirs(a.dst, exist_ok=True)
    total = 0
    for s in range(a.shards):
        rng = np.random.default_rng([a.seed, s])
        lat = rng.standard_normal((a.per_shard,) + SHAPE, dtype=np.float32).astype(np.float16)
        labels = rng.integers(0, a.classes, a.per_shard)
        path = os.path.join(a.dst, "train-%06d.tar" % s)
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
            for i in range(a.per_shard):
                key = "sample_%08d" % (s * a.per_shard + i)
                buf = io.BytesIO()
                np.save(buf, lat[i])
                t.addfile(*member(key + ".latent.npy", buf.getvalue()))
                t.addfile(*member(key + ".cls", str(int(labels[i])).encode()))
        total += os.path.getsize(path)
    n = a.shards * a.per_shard
    print(f"make_latents.py: {n} latents float16 {SHAPE} in {a.shards} shards in {a.dst}, "
          f"{total / 2**20:.1f} MiB ({total / n:.0f} bytes a sample)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

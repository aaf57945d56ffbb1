#!/usr/bin/python3
"""The PyTorch baseline for `gpufeed bench --input-only`.

A torchvision ImageFolder through a DataLoader with the standard training
transform (RandomResizedCrop + RandomHorizontalFlip + PILToTensor: uint8,
like gpufeed's output; no normalisation, as gpufeed does that on the GPU),
iterated with no consumer work; prints images/s. Timing starts when the
iterator is created (worker start-up included, as a training epoch pays
it) and ends after the last batch.

Debian's python3-torch/python3-torchvision/python3-pil live under
/usr/bin/python3 (not a pyenv python that may come first on PATH):
    apt-get install -y python3-torch python3-torchvision python3-pil
    /usr/bin/python3 bench/torch_loader.py DIR [--workers 2] [--json]
"""
import argparse
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="ImageFolder directory")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader num_workers")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--transform", choices=["train", "eval"], default="train")
    ap.add_argument("--prefetch-factor", type=int, default=2)
    ap.add_argument("--pin-memory", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    s = a.image_size
    if a.transform == "train":
        tf = transforms.Compose([
            transforms.RandomResizedCrop(s),
            transforms.RandomHorizontalFlip(),
            transforms.PILToTensor(),
        ])
    else:
        tf = transforms.Compose([
            transforms.Resize(int(round(s / 0.875))),
            transforms.CenterCrop(s),
            transforms.PILToTensor(),
        ])
    ds = datasets.ImageFolder(a.data, transform=tf)
    kw = {}
    if a.workers > 0:
        kw["prefetch_factor"] = a.prefetch_factor
        kw["persistent_workers"] = a.epochs > 1
    dl = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                    pin_memory=a.pin_memory, drop_last=False, **kw)

    samples = 0
    t0 = time.perf_counter()
    for _ in range(a.epochs):
        for x, y in dl:
            samples += x.shape[0]
    elapsed = time.perf_counter() - t0
    ips = samples / elapsed if elapsed > 0 else 0.0

    if a.json:
        print(json.dumps({
            "loader": "torch", "data": a.data, "samples": samples,
            "elapsed_s": elapsed, "images_per_s": ips, "workers": a.workers,
            "batch_size": a.batch_size, "image_size": s, "transform": a.transform,
            "epochs": a.epochs, "torch": torch.__version__,
            "cores": os.cpu_count(),
        }))
    else:
        print(f"torch DataLoader  {a.data}")
        print(f"  samples            {samples} in {elapsed:.3f} s")
        print(f"  images/s           {ips:.1f}")
        print(f"  workers            {a.workers}, batch {a.batch_size}, {s}x{s} {a.transform}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

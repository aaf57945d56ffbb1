#!/usr/bin/env python3
"""Input only, no model: images/s of four loaders over the same files.

  gpufeed.Loader -> torch.from_dlpack   (this module; threads=T)
  gpufeed.DataLoader(num_workers=T)     (the drop-in: the torch runner's own
      ImageFolder and transform object, handed to gpufeed)
  gpufeed bench --input-only            (the C program, the same settings)
  torch DataLoader(num_workers=T) over torchvision ImageFolder with
      RandomResizedCrop(S) + RandomHorizontalFlip + PILToTensor (uint8,
      as gpufeed's uint8 batches)

Each is timed from after its loader is built to its last batch, over
--epochs epochs (the DataLoader keeps its workers between them:
persistent_workers, its faster setting; the first epoch pays each loader's
start: worker forks, the first ring fill); the runs alternate and each
figure is the median of --runs.

  PYTHONPATH=build/python python3 python/bench_input.py --cli build/src/cli/gpufeed
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# python/ holds the package's sources without the built module: import the
# build's (PYTHONPATH) or the installed one, not this directory's.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != HERE]


def run_gpufeed(a):
    import torch
    import gpufeed
    with gpufeed.Loader(a.data, batch_size=a.batch_size, image_size=a.image_size,
                        threads=a.threads, device="cpu", seed=a.seed,
                        epochs=a.epochs) as loader:
        t0 = time.perf_counter()
        n = 0
        for _ in range(a.epochs):  # a `for` is one epoch
            for b in loader:
                x = torch.from_dlpack(b.data)
                y = torch.from_dlpack(b.labels)
                n += x.shape[0] + 0 * int(y[0])
        took = time.perf_counter() - t0
        wait = loader.stats()["wait_s"]
    return n / took, wait / took


def run_cli(a):
    out = subprocess.run([a.cli, "bench", "--input-only", "--json", "--data", a.data,
                          "--threads", str(a.threads), "--batch-size", str(a.batch_size),
                          "--image-size", str(a.image_size), "--device", "cpu",
                          "--seed", str(a.seed), "--epochs", str(a.epochs)],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return r["images_per_s"], r.get("stall_fraction", float("nan"))


def folder(a):
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.RandomResizedCrop(a.image_size),
                             transforms.RandomHorizontalFlip(), transforms.PILToTensor()])
    return datasets.ImageFolder(a.data, transform=tf)


def run_dataloader(a, make):
    dl = make(folder(a), batch_size=a.batch_size, shuffle=True, num_workers=a.threads,
              persistent_workers=a.threads > 0 and a.epochs > 1)
    t0 = time.perf_counter()
    n, wait = 0, 0.0
    for _ in range(a.epochs):
        it = iter(dl)
        while True:
            w = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            wait += time.perf_counter() - w
            n += x.shape[0]
    took = time.perf_counter() - t0
    return n / took, wait / took


def run_torch(a):
    import torch
    return run_dataloader(a, torch.utils.data.DataLoader)


def run_gpufeed_dataloader(a):
    import gpufeed
    return run_dataloader(a, gpufeed.DataLoader)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="an ImageFolder (default: make one with --cli make-dataset)")
    p.add_argument("--cli", default="build/src/cli/gpufeed", help="the gpufeed program")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--per-class", type=int, default=100)
    p.add_argument("--size", default="500x375", help="made images, WxH (ImageNet's median)")
    a = p.parse_args()
    if not a.data:
        a.data = os.path.join(tempfile.gettempdir(), f"gpufeed-bench-{a.classes}x{a.per_class}-{a.size}")
        if not os.path.isdir(a.data):
            subprocess.run([a.cli, "make-dataset", a.data, "--classes", str(a.classes),
                            "--per-class", str(a.per_class), "--size", a.size], check=True,
                           stdout=subprocess.DEVNULL)
    runners = {"gpufeed.Loader + torch.from_dlpack": run_gpufeed,
               "gpufeed bench --input-only": run_cli,
               f"torch DataLoader(num_workers={a.threads})": run_torch,
               f"gpufeed.DataLoader(num_workers={a.threads})": run_gpufeed_dataloader}
    # A warm-up pass puts the files in the page cache for all of them.
    run_cli(a)
    rows = {name: [] for name in runners}
    for r in range(a.runs):
        for name, fn in runners.items():
            rows[name].append(fn(a))
            print(f"run {r + 1} {name}: {rows[name][-1][0]:.1f} images/s", file=sys.stderr)
    med = {name: statistics.median(v[0] for v in vals) for name, vals in rows.items()}
    stall = {name: statistics.median(v[1] for v in vals) for name, vals in rows.items()}
    print(f"input only: {a.data}, {a.image_size}x{a.image_size} train transform, batch "
          f"{a.batch_size}, {a.threads} threads/workers, {a.epochs} epoch(s), medians of {a.runs} alternated runs")
    for name in runners:
        print(f"  {name:40s} {med[name]:8.1f} images/s  (stall fraction {stall[name]:.2f}; "
              f"runs {', '.join(f'{v[0]:.0f}' for v in rows[name])})")
    py, cli, tv, dl = med.values()
    print(f"  Python layer vs C: {100 * (py / cli - 1):+.1f}%;  gpufeed.Loader vs DataLoader: "
          f"{py / tv:.2f}x")
    print(f"  gpufeed.DataLoader vs C: {100 * (dl / cli - 1):+.1f}%;  gpufeed.DataLoader vs "
          f"torch DataLoader: {dl / tv:.2f}x")


if __name__ == "__main__":
    main()

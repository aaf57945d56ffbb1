#!/usr/bin/env python3
"""Input only, today's recipe: images/s of torch's DataLoader and of
gpufeed.DataLoader over the same ImageFolder and the same transform object,
torchvision's reference's ClassificationPresetTrain with
--auto-augment ta_wide --random-erase 0.1 (RandomResizedCrop 224, flip,
TrivialAugmentWide, PILToTensor, ConvertImageDtype, Normalize,
RandomErasing), and with --mix lambda also its MixUp/CutMix collate_fn
lambda (run by both as a Python collate_fn), with --mix native
gpufeed.MixUpCutMix as the collate_fn (torch runs it in its workers,
gpufeed.DataLoader in C, in place).

torch: num_workers=THREADS worker processes (persistent, its faster
setting); gpufeed: num_workers=THREADS decode threads. Each run times
--epochs epochs from the loader's construction to its last batch (each pays
its start), the two alternate, and each figure is the median of --runs.

  PYTHONPATH=build-release/python python3 bench/augment_rate.py DIR [--mix]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python",
                                "tests"))


def loader(kind, a):
    import torch
    import torchvision
    from torch.utils.data.dataloader import default_collate
    import reference_train as ref
    import gpufeed
    ds = torchvision.datasets.ImageFolder(a.data, ref.ClassificationPresetTrain(
        crop_size=a.size, auto_augment_policy="ta_wide", random_erase_prob=0.1))
    collate = None
    n = len(ds.classes)
    if a.mix == "lambda":
        choice = torchvision.transforms.RandomChoice([ref.RandomMixup(n, p=1.0, alpha=0.2),
                                                      ref.RandomCutmix(n, p=1.0, alpha=1.0)])
        collate = lambda batch: choice(*default_collate(batch))  # noqa: E731  the reference's
    elif a.mix == "native":
        collate = gpufeed.MixUpCutMix(n, mixup_alpha=0.2, cutmix_alpha=1.0)
    cls = gpufeed.DataLoader if kind == "gpufeed" else torch.utils.data.DataLoader
    extra = {} if kind == "gpufeed" else {"persistent_workers": True}
    return cls(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.threads,
               collate_fn=collate, drop_last=True, **extra)


def one_run(kind, a):
    t0 = time.perf_counter()
    dl = loader(kind, a)
    n = 0
    for _ in range(a.epochs):
        for images, targets in dl:
            n += images.shape[0]
    took = time.perf_counter() - t0
    del dl
    return n / took


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data")
    p.add_argument("--mix", choices=["lambda", "native"],
                   help="MixUp/CutMix: the reference's collate lambda, or gpufeed.MixUpCutMix")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    a = p.parse_args()
    import torch
    torch.set_num_threads(1)  # the main process's ops (normalise, mix): one core, both sides
    rates = {"torch": [], "gpufeed": []}
    for r in range(a.runs):
        for kind in ("torch", "gpufeed") if r % 2 == 0 else ("gpufeed", "torch"):
            rates[kind].append(one_run(kind, a))
            print(f"run {r + 1} {kind:8s} {rates[kind][-1]:8.1f} images/s", flush=True)
    t, g = statistics.median(rates["torch"]), statistics.median(rates["gpufeed"])
    recipe = "TA-wide + RandomErasing" + (f" + MixUp/CutMix ({a.mix})" if a.mix else "")
    print(f"\n{recipe}, RandomResizedCrop {a.size}, batch {a.batch_size}, {a.threads} "
          f"workers/threads, {a.epochs} epochs a run, medians of {a.runs}:")
    print(f"  torch DataLoader    {t:8.1f} images/s")
    print(f"  gpufeed.DataLoader  {g:8.1f} images/s   ({g / t:.2f}x)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Train one small CNN twice, over DataLoader and over gpufeed.Loader.

The same model (seeded init), files, batch size and train transforms
(random-resized-crop + horizontal flip + ImageNet normalization) in one run:

  torch: torchvision ImageFolder + DataLoader(num_workers=T, pin_memory on
         CUDA), RandomResizedCrop + RandomHorizontalFlip + ToTensor + Normalize
  gpufeed: gpufeed.Loader(threads=T, layout="nchw", mean/std ImageNet),
         float32 host batches on CPU, float16 device batches on CUDA
         (torch.from_dlpack passes the current stream to __dlpack__)

Per loader and epoch: images/s, the time the loop waited for data (time
blocked in next(iterator)), the step time (forward + backward + optimizer)
and held-out accuracy. Both models are evaluated through one path,
gpufeed's eval transform (resize the short side to S/0.875, centre crop S,
as torchvision's Resize + CenterCrop), so accuracy differs only by training.
--input-only: the same two loaders, no model (RSS sampled each epoch).

  PYTHONPATH=build/python python3 python/train_torch.py --cli build/src/cli/gpufeed
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

import torch  # noqa: E402
import gpufeed  # noqa: E402

MEAN01 = [m / 255 for m in gpufeed.IMAGENET_MEAN]
STD01 = [s / 255 for s in gpufeed.IMAGENET_STD]


def model_for(a, classes):
    """Four stride-2 conv layers, widths w, 2w, 4w, 8w, then a linear head."""
    torch.manual_seed(a.seed)
    layers, cin = [], 3
    for i in range(4):
        cout = a.width << i
        layers += [torch.nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
                   torch.nn.BatchNorm2d(cout), torch.nn.ReLU(inplace=True)]
        cin = cout
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(cin, classes)]
    return torch.nn.Sequential(*layers).to(a.device)


def gpufeed_loader(a, path, transform="train", shuffle=True, epochs=1):
    return gpufeed.Loader(path, batch_size=a.batch_size, image_size=a.image_size,
                          threads=a.threads, seed=a.seed, epochs=epochs, shuffle=shuffle,
                          drop_last=transform == "train", transform=transform,
                          device=a.device, dtype="float16" if a.cuda else "float32",
                          layout="nchw", mean=gpufeed.IMAGENET_MEAN, std=gpufeed.IMAGENET_STD)


def gpufeed_batches(a, epochs):
    """Yields one iterator of (x, y) per epoch from one gpufeed.Loader (a `for`
    over it is one epoch, as over a DataLoader)."""
    loader = gpufeed_loader(a, a.train, epochs=epochs)

    def epoch():
        for x, y in loader:  # labels are int64 already
            yield torch.from_dlpack(x), torch.from_dlpack(y).to(a.device)
    with loader:
        for _ in range(epochs):
            yield epoch()


def torch_batches(a, epochs):
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.RandomResizedCrop(a.image_size),
                             transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                             transforms.Normalize(MEAN01, STD01)])
    dl = torch.utils.data.DataLoader(datasets.ImageFolder(a.train, transform=tf),
                                     batch_size=a.batch_size, shuffle=True, drop_last=True,
                                     num_workers=a.threads, pin_memory=a.cuda,
                                     persistent_workers=a.threads > 0,
                                     generator=torch.Generator().manual_seed(a.seed))

    def epoch():
        for x, y in dl:
            yield x.to(a.device, non_blocking=True), y.to(a.device, non_blocking=True)
    for _ in range(epochs):
        yield epoch()


LOADERS = {"torch": torch_batches, "gpufeed": gpufeed_batches}


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def sync(a):
    if a.cuda:
        torch.cuda.synchronize()


def evaluate(a, model):
    """Top-1 on the val folder through gpufeed's eval transform (both models)."""
    model.eval()
    right = total = 0
    with torch.no_grad(), gpufeed_loader(a, a.val, "eval", shuffle=False) as loader:
        for b in loader:
            x = torch.from_dlpack(b.data)
            y = torch.from_dlpack(b.labels).to(a.device)
            with torch.autocast("cuda", enabled=a.cuda):
                right += int((model(x).argmax(1) == y).sum())
            total += int(y.shape[0])
    model.train()
    return right / max(total, 1)


def run(a, name, classes):
    """One loader's run: a row per epoch."""
    model = None if a.input_only else model_for(a, classes)
    if model is not None:
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
        scaler = (torch.amp.GradScaler("cuda", enabled=a.cuda) if hasattr(torch.amp, "GradScaler")
                  else torch.cuda.amp.GradScaler(enabled=a.cuda))  # torch < 2.3
        loss_fn = torch.nn.CrossEntropyLoss()
    rows = []
    for e, batches in enumerate(LOADERS[name](a, a.epochs)):
        n = steps = 0
        wait = step = 0.0
        t0 = time.perf_counter()
        it = iter(batches)
        while True:
            w = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            s = time.perf_counter()
            wait += s - w
            if model is not None:
                with torch.autocast("cuda", enabled=a.cuda):
                    loss = loss_fn(model(x), y)
                opt.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                sync(a)
            step += time.perf_counter() - s
            n += int(y.shape[0])
            steps += 1
            del x, y  # the gpufeed slot returns to the ring now
        took = time.perf_counter() - t0
        row = {"epoch": e, "images": n, "seconds": took, "images_per_s": n / took,
               "wait_s": wait, "step_s": step / max(steps, 1), "wait_fraction": wait / took,
               "rss_mib": rss_mib()}
        if model is not None:
            row["val_accuracy"] = evaluate(a, model)
        rows.append(row)
        print(f"  {name:8s} epoch {e}: {row['images_per_s']:7.1f} images/s, waited "
              f"{wait:6.2f} s ({100 * row['wait_fraction']:4.1f}%), step "
              f"{1000 * row['step_s']:6.1f} ms" +
              (f", val acc {row['val_accuracy']:.3f}" if model is not None else "") +
              f", rss {row['rss_mib']:.0f} MiB", file=sys.stderr)
    return rows


def summary(rows, skip_first):
    """Medians over epochs (the first left out where there are more: start-up)."""
    use = rows[1:] if skip_first and len(rows) > 1 else rows
    out = {k: statistics.median(r[k] for r in use)
           for k in ("images_per_s", "wait_fraction", "step_s")}
    out["rss_first_mib"], out["rss_last_mib"] = rows[0]["rss_mib"], rows[-1]["rss_mib"]
    if "val_accuracy" in rows[0]:
        out["val_accuracy"] = [r["val_accuracy"] for r in rows]
    return out


def make_sets(a):
    root = os.path.join(tempfile.gettempdir(),
                        f"gpufeed-train-{a.classes}x{a.per_class}-{a.size}")
    for part, per_class, seed in (("train", a.per_class, 0), ("val", a.val_per_class, 1)):
        d = os.path.join(root, part)
        if not os.path.isdir(d):
            subprocess.run([a.cli, "make-dataset", d, "--classes", str(a.classes),
                            "--per-class", str(per_class), "--size", a.size, "--seed", str(seed)],
                           check=True, stdout=subprocess.DEVNULL)
    return os.path.join(root, "train"), os.path.join(root, "val")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", help="an ImageFolder to train on (default: made by --cli); with "
                   "--loaders gpufeed, any data gpufeed reads (a list file, shards, a prepared set)")
    p.add_argument("--val", help="the held-out ImageFolder (default: made by --cli, seed 1)")
    p.add_argument("--cli", default="build/src/cli/gpufeed", help="the gpufeed program")
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--per-class", type=int, default=100)
    p.add_argument("--val-per-class", type=int, default=25)
    p.add_argument("--size", default="500x375", help="made images, WxH (ImageNet's median)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--image-size", type=int, help="crop size (default 224 on CUDA, 96 on CPU)")
    p.add_argument("--width", type=int, default=16, help="the first conv layer's channels")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=2, help="gpufeed threads = DataLoader workers")
    p.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads (0: as is)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", type=int, default=1, help="alternated runs per loader (medians)")
    p.add_argument("--loaders", default="torch,gpufeed", help="which, in the order run")
    p.add_argument("--input-only", action="store_true", help="the loaders alone, no model")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    a.cuda = a.device == "cuda"
    a.image_size = a.image_size or (224 if a.cuda else 96)
    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)
    if not a.train:
        a.train, a.val = make_sets(a)
    elif not a.val and not a.input_only:
        p.error("--train needs --val")
    names = [n for n in a.loaders.split(",") if n]
    for n in names:
        if n not in LOADERS:
            p.error(f"--loaders: '{n}' is not one of {', '.join(LOADERS)}")
    # A warm-up pass puts the files in the page cache for both. The class
    # count is the loader's: --train may be shards (gpufeed alone reads them).
    with gpufeed_loader(a, a.train, "eval", shuffle=False) as warm:
        classes = len(warm.classes)
        for _ in warm:
            pass
    runs = {n: [] for n in names}
    for r in range(a.runs):
        for n in names:
            print(f"run {r + 1} {n}:", file=sys.stderr)
            runs[n].append(run(a, n, classes))
    result = {"settings": {k: v for k, v in vars(a).items() if k not in ("cuda",)},
              "torch": torch.__version__, "gpufeed": gpufeed.__version__, "loaders": {}}
    for n in names:
        per_run = [summary(rows, a.epochs > 1) for rows in runs[n]]
        med = {k: statistics.median(s[k] for s in per_run)
               for k in ("images_per_s", "wait_fraction", "step_s")}
        med["val_accuracy"] = per_run[len(per_run) // 2].get("val_accuracy")
        med["rss_first_mib"], med["rss_last_mib"] = per_run[-1]["rss_first_mib"], \
            per_run[-1]["rss_last_mib"]
        med["runs"] = runs[n]
        result["loaders"][n] = med
    table = sys.stderr if a.json else sys.stdout
    what = "input only" if a.input_only else f"width {a.width}"
    print(f"{what}: {a.train}, {a.image_size}x{a.image_size} on {a.device}, batch "
          f"{a.batch_size}, {a.threads} threads/workers, {a.epochs} epochs, medians of "
          f"{a.runs} alternated runs (epochs after the first)", file=table)
    for n in names:
        m = result["loaders"][n]
        acc = "" if m["val_accuracy"] is None else \
            "  val acc " + " ".join(f"{v:.3f}" for v in m["val_accuracy"])
        print(f"  {n:8s} {m['images_per_s']:8.1f} images/s  waited {100 * m['wait_fraction']:4.1f}%"
              f" of the loop  step {1000 * m['step_s']:6.1f} ms  rss {m['rss_first_mib']:.0f}"
              f" -> {m['rss_last_mib']:.0f} MiB{acc}", file=table)
    if a.json:
        print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()

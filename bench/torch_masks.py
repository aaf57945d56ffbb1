#!/usr/bin/python3
"""The PyTorch baseline for images with their segmentation masks.

A torch.utils.data Dataset over tar shards of KEY.jpg, KEY.cls and
KEY.seg.png (bench/add_masks.py's), through a DataLoader, with the joint
training transform a segmentation trainer writes with torchvision's
functional ops: one RandomResizedCrop box (scale 0.08..1, ratio 3/4..4/3)
for both, the image resized bilinearly (PIL's, antialiased) and the mask
by nearest neighbour to SIZE x SIZE, and both flipped together with
p = 0.5; then uint8 tensors (image CHW as PILToTensor gives it, mask
(SIZE, SIZE)), as gpufeed.Loader(fields=("jpg", "cls", "seg.png:mask"))
gives them. No normalisation (gpufeed's would be on the GPU).

The shards are indexed once at start (tarfile reads their headers); a
sample is then one os.pread of its three members, which lie together in
the shard (add_masks.py writes them so), from a descriptor each worker
opens itself: the least a torch Dataset can read, the read gpufeed makes.
Every batch is touched (one byte of images and of masks), as the gpufeed
counterpart bench/gpufeed_masks.py does.

Timing: per epoch, each from the end of the one before (the first from
the iterator's creation, worker start-up included). samples_per_s (and
images_per_s, the same number, the name bench/torch_loader.py prints) is
over the epochs after the first, the steady rate with persistent workers;
with --epochs 1, over that epoch. all_epochs_samples_per_s counts them all.

    /usr/bin/python3 bench/torch_masks.py DATA [--workers 2] [--batch-size 64] [--epochs 3]

DATA: a directory of train-*.tar, or a pattern 'DIR/train-{000000..000015}.tar'.
Prints one JSON line.
"""
import argparse
import glob
import io
import json
import os
import re
import sys
import tarfile
import time

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F


def shard_paths(data):
    """A directory's train-*.tar, or a pattern's one brace range expanded."""
    if os.path.isdir(data):
        paths = sorted(glob.glob(os.path.join(data, "train-*.tar")))
    else:
        m = re.search(r"\{(\d+)\.\.(\d+)\}", data)
        if m:
            w = len(m.group(1))
            paths = [data[:m.start()] + str(i).zfill(w) + data[m.end():]
                     for i in range(int(m.group(1)), int(m.group(2)) + 1)]
        else:
            paths = data.split(",")
    if not paths:
        sys.exit(f"torch_masks.py: no shards in {data}")
    return paths


def index(paths, image_ext="jpg", mask_ext="seg.png"):
    """[(shard number, offset, length, (image slice), (mask slice), label)]: per key,
    the span from its first member's data to its last's end in the shard."""
    samples = []
    for n, path in enumerate(paths):
        keys = {}
        with tarfile.open(path) as t:
            for m in t:
                if not m.isfile():
                    continue
                key, ext = m.name.split(".", 1)
                e = keys.setdefault(key, {})
                e[ext] = (m.offset_data, m.size)
                if ext == "cls":
                    e["label"] = int(t.extractfile(m).read())
        for key, e in keys.items():
            if image_ext not in e or mask_ext not in e or "label" not in e:
                continue
            spans = [e[image_ext], e["cls"], e[mask_ext]]
            start = min(o for o, _ in spans)
            end = max(o + s for o, s in spans)
            (io_, is_), (mo, ms) = e[image_ext], e[mask_ext]
            samples.append((n, start, end - start, (io_ - start, io_ - start + is_),
                            (mo - start, mo - start + ms), e["label"]))
    return samples


class SegShards(Dataset):
    def __init__(self, paths, size):
        self.paths = paths
        self.samples = index(paths)
        self.size = [size, size]
        self.fds = {}
        self.pid = None

    def __len__(self):
        return len(self.samples)

    def _fd(self, n):
        if self.pid != os.getpid():  # a worker: its own descriptors
            self.fds, self.pid = {}, os.getpid()
        fd = self.fds.get(n)
        if fd is None:
            fd = self.fds[n] = os.open(self.paths[n], os.O_RDONLY)
        return fd

    def __getitem__(self, i):
        n, off, length, (i0, i1), (m0, m1), label = self.samples[i]
        buf = os.pread(self._fd(n), length, off)
        img = Image.open(io.BytesIO(buf[i0:i1]))
        if img.mode != "RGB":
            img = img.convert("RGB")
        mask = Image.open(io.BytesIO(buf[m0:m1]))  # "P" or "L": the ids
        top, left, h, w = transforms.RandomResizedCrop.get_params(
            img, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
        img = F.resized_crop(img, top, left, h, w, self.size, InterpolationMode.BILINEAR)
        mask = F.resized_crop(mask, top, left, h, w, self.size, InterpolationMode.NEAREST)
        if torch.rand(1) < 0.5:
            img, mask = F.hflip(img), F.hflip(mask)
        # np.array: a writable copy (from_numpy warns on np.asarray's read-only view)
        return F.pil_to_tensor(img), label, torch.from_numpy(np.array(mask, dtype=np.uint8))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="a directory of train-*.tar, or 'DIR/train-{000000..000015}.tar'")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader num_workers")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--prefetch-factor", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    ds = SegShards(shard_paths(a.data), a.image_size)
    kw = {}
    if a.workers > 0:
        kw = {"prefetch_factor": a.prefetch_factor, "persistent_workers": True}
    dl = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                    pin_memory=False, drop_last=False, **kw)

    epoch_s, epoch_n = [], []
    touched = 0
    t = time.perf_counter()
    for _ in range(a.epochs):
        n = 0
        for x, y, m in dl:
            if n == 0 and not epoch_n:
                s = a.image_size
                assert x.shape[1:] == (3, s, s) and x.dtype == torch.uint8, x.shape
                assert m.shape[1:] == (s, s) and m.dtype == torch.uint8, m.shape
            touched += int(x[0, 0, 0, 0]) + int(m[0, 0, 0])
            n += x.shape[0]
        now = time.perf_counter()
        epoch_s.append(now - t)
        epoch_n.append(n)
        t = now
    steady = slice(1, None) if a.epochs > 1 else slice(None)
    sps = sum(epoch_n[steady]) / sum(epoch_s[steady])
    print(json.dumps({
        "loader": "torch", "data": a.data, "samples": sum(epoch_n),
        "elapsed_s": sum(epoch_s), "samples_per_s": sps, "images_per_s": sps,
        "rate_over": "epochs 2.." + str(a.epochs) if a.epochs > 1 else "epoch 1",
        "all_epochs_samples_per_s": sum(epoch_n) / sum(epoch_s),
        "epoch_s": epoch_s, "epoch_samples": epoch_n[0], "workers": a.workers,
        "batch_size": a.batch_size, "image_size": a.image_size, "transform": "train",
        "fields": "jpg,cls,seg.png:mask", "epochs": a.epochs, "touched": touched,
        "torch": torch.__version__, "cores": os.cpu_count(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

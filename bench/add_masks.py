#!/usr/bin/python3
# Copies gpufeed make-dataset's tar shards with a segmentation mask after
# each sample: KEY.seg.png after KEY.cls, an 8-bit PNG of class ids of the
# JPEG's exact size (PIL reads the size from the JPEG's header), as
# segmentation sets in WebDataset form (VOC, ADE20K, Cityscapes) store
# them. For the mask bench (bench/README.md, "Masks beside the images,
# against torch").
#
#   add_masks.py SRC_DIR DST_DIR [--mode P|L]
#
# The mask: background 0, the sample's object as one region of id
# label + 1, and 1 to 4 other regions (ellipses, rectangles, triangles)
# of ids 1..20, drawn over one another; a function of the key alone
# (zlib.crc32 seeds the generator), so every run writes the same bytes.
# --mode P (default) writes a palette PNG, VOC's colour map, the pixel
# values the ids (PIL's and torchvision's reading of a VOC mask); --mode L
# a greyscale PNG of the same ids. Masks compress to a few KB each.
import argparse
import glob
import io
import os
import random
import sys
import tarfile
import zlib

from PIL import Image, ImageDraw

IDS = 21  # 0 (background) .. 20, as Pascal VOC


def voc_palette():
    """Pascal VOC's colour map (id -> RGB by the bits of the id), 256 entries."""
    pal = []
    for i in range(256):
        r = g = b = 0
        c = i
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        pal += [r, g, b]
    return pal


PALETTE = voc_palette()


def region(draw, rng, w, h, ident, big):
    """One filled ellipse, rectangle or triangle of ident, somewhere in w x h."""
    lo, hi = (0.3, 0.7) if big else (0.08, 0.35)
    rw, rh = int(w * rng.uniform(lo, hi)), int(h * rng.uniform(lo, hi))
    x0, y0 = rng.randrange(0, max(1, w - rw)), rng.randrange(0, max(1, h - rh))
    box = (x0, y0, x0 + rw, y0 + rh)
    shape = rng.randrange(3)
    if shape == 0:
        draw.ellipse(box, fill=ident)
    elif shape == 1:
        draw.rectangle(box, fill=ident)
    else:
        draw.polygon([(x0 + rng.randrange(rw + 1), y0), (x0, y0 + rh), (x0 + rw, y0 + rh)],
                     fill=ident)


def mask_png(key, label, size, mode):
    w, h = size
    rng = random.Random(zlib.crc32(key.encode()))
    m = Image.new("L", (w, h), 0)
    d = ImageDraw.Draw(m)
    for _ in range(rng.randint(0, 2)):            # behind the object
        region(d, rng, w, h, rng.randrange(1, IDS), False)
    region(d, rng, w, h, label % (IDS - 1) + 1, True)  # the object
    for _ in range(rng.randint(1, 2)):            # in front of it
        region(d, rng, w, h, rng.randrange(1, IDS), False)
    if mode == "P":
        m.putpalette(PALETTE)  # an "L" image becomes "P": the same bytes, now indices
    out = io.BytesIO()
    m.save(out, format="PNG")
    return out.getvalue()


def main():
    ap = argparse.ArgumentParser(description="make-dataset shards + KEY.seg.png masks")
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--mode", choices=["P", "L"], default="P",
                    help="P: palette PNG (VOC colours), L: greyscale; the values are the ids")
    a = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(a.src, "train-*.tar")))
    if not paths:
        print(f"add_masks.py: no train-*.tar in {a.src}", file=sys.stderr)
        return 2
    os.makedirs(a.dst, exist_ok=True)
    n = 0
    for path in paths:
        out = os.path.join(a.dst, os.path.basename(path))
        sizes = {}
        with tarfile.open(path) as s, tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as d:
            for m in s.getmembers():
                data = s.extractfile(m).read()
                d.addfile(m, io.BytesIO(data))
                key, ext = m.name.split(".", 1)
                if ext in ("jpg", "jpeg", "png", "webp"):
                    with Image.open(io.BytesIO(data)) as im:  # the header only
                        sizes[key] = im.size
                elif ext == "cls":
                    png = mask_png(key, int(data), sizes.pop(key), a.mode)
                    info = tarfile.TarInfo(f"{key}.seg.png")
                    info.size, info.mtime, info.mode = len(png), m.mtime, m.mode
                    d.addfile(info, io.BytesIO(png))
                    n += 1
    print(f"add_masks.py: {n} masks ({a.mode}) in {len(paths)} shards in {a.dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

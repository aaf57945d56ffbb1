#!/usr/bin/env python3
"""Two WebDataset shards whose keys hold png, cls, txt, latent.npy,
seg.png and boxes.npy, for `gpufeed verify --fields`. Clean: six good
keys. With `damaged`, one more key per damage, each a good key but for
one member: badtxt (a .txt not UTF-8), badshape (an .npy of another
shape), huge (an .npy claiming 10^12 elements), rgbseg (an RGB mask),
smallseg (a mask of another size than its image), nanbox (boxes with a
NaN), nonpy (no .latent.npy). Usage: fields_set.py DIR [damaged];
Python's standard library only."""
import io
import struct
import sys
import tarfile
import zlib


def png(w, h, ch, seed):
    raw = b"".join(b"\0" + bytes((x * 7 + y * 3 + c + seed) & 255
                                 for x in range(w) for c in range(ch)) for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, {1: 0, 3: 2}[ch], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) +
            chunk(b"IEND", b""))


def npy(shape, values):
    head = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
    total = (10 + len(head) + 1 + 63) // 64 * 64
    head = head.ljust(total - 11) + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() +
            struct.pack("<%df" % len(values), *values))


def good(i):
    return {"png": png(16, 12, 3, i), "cls": b"%d" % (i % 2),
            "txt": ("caption %d \u00e9" % i).encode(),
            "latent.npy": npy("(2, 3)", [i] * 6), "seg.png": png(16, 12, 1, i),
            "boxes.npy": npy("(1, 5)", [1, 1, 8, 8, i])}


DAMAGE = {"badtxt": ("txt", b"ok \xff no"),
          "badshape": ("latent.npy", npy("(3, 2)", [0] * 6)),
          "huge": ("latent.npy", npy("(1000000, 1000000)", [0] * 6)),
          "rgbseg": ("seg.png", png(16, 12, 3, 9)),
          "smallseg": ("seg.png", png(8, 6, 1, 9)),
          "nanbox": ("boxes.npy", npy("(1, 5)", [1, float("nan"), 8, 8, 0])),
          "nonpy": ("latent.npy", None)}

keys = [("k%02d" % i, good(i)) for i in range(6)]
if sys.argv[2:] == ["damaged"]:
    for key, (ext, data) in DAMAGE.items():
        m = good(0)
        if data is None:
            del m[ext]
        else:
            m[ext] = data
        keys.append((key, m))
for s in range(2):
    with tarfile.open("%s/s-%d.tar" % (sys.argv[1], s), "w", format=tarfile.USTAR_FORMAT) as t:
        for key, m in keys[s::2]:
            for ext, data in m.items():
                ti = tarfile.TarInfo("%s.%s" % (key, ext))
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))

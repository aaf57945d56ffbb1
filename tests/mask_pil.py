"""Segmentation masks cropped by gpufeed (src/mask.c, driven by
tests/mask_crop.c) held to PIL itself: for masks PIL wrote (8-bit grey,
and palettes of 8, 4, 2 and 1 bits whose colours are unlike their
indices), a few hundred crops -- integer boxes, fractional ones, boxes to
the image's edges, up- and downsampled, mirrored or not -- must be
pixel-equal to

    Image.open(png).resize((out_w, out_h), NEAREST, box=(x, y, x + w, y + h))

then ImageOps.mirror when flipped, every value a value of the mask (a
palette's index, never its colour). Then a few refusals end to end.

Run by meson as the test mask_pil (GPUFEED_MASK_CROP names the program);
skipped without numpy or PIL."""
import os
import random
import struct
import subprocess

import pytest

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")
ImageOps = pytest.importorskip("PIL.ImageOps")

EXE = os.environ.get("GPUFEED_MASK_CROP")
if not EXE:
    pytest.skip("GPUFEED_MASK_CROP is not set (run through meson)", allow_module_level=True)

NEAREST = getattr(Image, "Resampling", Image).NEAREST


def run(path, w, h, crops):
    """gpufeed's crops of the mask at path, one array each."""
    lines = "".join(f"{x!r} {y!r} {cw!r} {ch!r} {int(f)} {ow} {oh}\n"
                    for x, y, cw, ch, f, ow, oh in crops)
    p = subprocess.run([EXE, str(path), str(w), str(h)], input=lines.encode(),
                       capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    out, at = [], 0
    for *_, ow, oh in crops:
        out.append(np.frombuffer(p.stdout, np.uint8, ow * oh, at).reshape(oh, ow))
        at += ow * oh
    assert at == len(p.stdout)
    return out


def refused(path, w, h):
    p = subprocess.run([EXE, str(path), str(w), str(h)], input=f"0 0 {w} {h} 0 4 4\n".encode(),
                       capture_output=True)
    assert p.returncode == 1
    return p.stderr.decode()


def pil_crop(im, x, y, cw, ch, flip, ow, oh):
    r = im.resize((ow, oh), NEAREST, box=(x, y, x + cw, y + ch))
    return np.asarray(ImageOps.mirror(r) if flip else r)


def ihdr(path):
    with open(path, "rb") as f:
        head = f.read(29)
    w, h, depth, ct = struct.unpack(">IIBB", head[16:26])
    return w, h, depth, ct


def make_mask(tmp_path, rng, w, h, kind):
    """A mask PNG by PIL, and its values as PIL reads them back."""
    if kind == "L":
        ids = rng.sample(range(1, 256), 9)
        im = Image.new("L", (w, h))
        im.putdata([rng.choice(ids) for _ in range(w * h)])
        path, save = tmp_path / f"grey_{w}x{h}.png", {}
        depth = 8
    else:
        depth = kind
        n = 1 << depth if depth < 8 else 40
        im = Image.new("P", (w, h))
        # colours far from the indices: an output of colours fails
        im.putpalette([c for i in range(n) for c in (255 - i, (97 * i + 50) % 256, 200 ^ i)])
        im.putdata([rng.randrange(n) for _ in range(w * h)])
        path, save = tmp_path / f"pal{depth}_{w}x{h}.png", ({"bits": depth} if depth < 8 else {})
    im.save(path, **save)
    assert ihdr(path) == (w, h, depth, 0 if kind == "L" else 3)
    back = Image.open(path)
    back.load()
    assert back.mode == ("L" if kind == "L" else "P")
    assert np.array_equal(np.asarray(back), np.asarray(im))
    return path, back


def crops(rng, w, h, n):
    """n boxes in a w x h image: integer ones (some the output's size, PIL's
    ImagingCrop path), fractional ones (some on thirds and the like, where
    the step puts sample centres on pixel edges), some to the right and
    bottom edges, the whole image; outputs from 1 pixel to far past the
    box's size."""
    out = [(0.0, 0.0, float(w), float(h), 0, w, h), (0.0, 0.0, float(w), float(h), 1, 3 * w, 2 * h)]
    while len(out) < n:
        k = len(out) % 4
        if k == 0:  # integer box
            x, y = rng.randrange(w), rng.randrange(h)
            cw, ch = rng.randint(1, w - x), rng.randint(1, h - y)
            x, y, cw, ch = float(x), float(y), float(cw), float(ch)
            ow, oh = (int(cw), int(ch)) if rng.random() < 0.5 else (rng.randint(1, 160),
                                                                     rng.randint(1, 160))
        elif k == 1:  # edges on thirds, sixths, ...: sample centres on integers,
            q = rng.choice([3, 6, 7, 12])  # where a box rounded to float32 matters
            x0, x1 = sorted(rng.sample(range(w * q + 1), 2))
            y0, y1 = sorted(rng.sample(range(h * q + 1), 2))
            x, y, cw, ch = x0 / q, y0 / q, x1 / q - x0 / q, y1 / q - y0 / q
            if x + cw > w or y + ch > h:
                continue
            ow = max(1, (x1 - x0) // rng.choice([1, 2, 4, q]))
            oh = max(1, (y1 - y0) // rng.choice([1, 2, 4, q]))
        else:
            x0, x1 = sorted(rng.uniform(0, w) for _ in range(2))
            y0, y1 = sorted(rng.uniform(0, h) for _ in range(2))
            if k == 3:
                x1, y1 = float(w), float(h)
            x, y, cw, ch = x0, y0, x1 - x0, y1 - y0
            if x + cw > w or y + ch > h:
                continue  # PIL refuses a box past the image
            ow, oh = rng.randint(1, 160), rng.randint(1, 160)
        out.append((x, y, cw, ch, rng.random() < 0.5, ow, oh))
    return out


@pytest.mark.parametrize("kind", ["L", 8, 4, 2, 1])
@pytest.mark.parametrize("size", [(57, 43), (13, 31), (160, 96)])
def test_crops_equal_pils(tmp_path, kind, size):
    rng = random.Random(f"{kind}{size}")
    w, h = size
    path, im = make_mask(tmp_path, rng, w, h, kind)
    values = np.unique(np.asarray(im))
    cs = crops(rng, w, h, 60)
    got = run(path, w, h, cs)
    for c, g in zip(cs, got):
        want = pil_crop(im, *c)
        assert np.isin(g, values).all(), f"{c}: values not in the mask"
        assert np.array_equal(g, want), (
            f"crop {c}: {np.count_nonzero(g != want)} pixels differ from PIL's, first at "
            f"{tuple(int(i) for i in np.argwhere(g != want)[0])}")


def test_refusals(tmp_path):
    rgb = tmp_path / "rgb.png"
    Image.new("RGB", (8, 6), (1, 2, 3)).save(rgb)
    assert "mask: RGB PNG; a mask is 8-bit grey or palette (class ids)" in refused(rgb, 8, 6)
    rgba = tmp_path / "rgba.png"
    Image.new("RGBA", (8, 6)).save(rgba)
    assert "mask: RGBA PNG" in refused(rgba, 8, 6)
    grey16 = tmp_path / "grey16.png"
    Image.new("I;16", (8, 6), 300).save(grey16)
    assert ihdr(grey16)[2:] == (16, 0)
    assert "mask: 16-bit grey PNG" in refused(grey16, 8, 6)
    grey = tmp_path / "grey.png"
    Image.new("L", (8, 6), 5).save(grey)
    assert "mask: 8x6 PNG for a 9x6 image" in refused(grey, 9, 6)
    assert "mask: 8x6 PNG for a 8x5 image" in refused(grey, 8, 5)
    data = grey.read_bytes()
    cut = tmp_path / "cut.png"
    for n in (0, 7, 8, 20, 33, 40, len(data) - 13, len(data) - 1):
        cut.write_bytes(data[:n])
        why = refused(cut, 8, 6)
        assert ("mask: not a PNG" if n < 8 else "mask: PNG cut short") in why, (n, why)
    jpg = tmp_path / "grey.jpg"
    Image.new("L", (8, 6), 5).save(jpg)
    assert "mask: not a PNG" in refused(jpg, 8, 6)

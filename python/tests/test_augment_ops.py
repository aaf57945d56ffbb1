# src/augment_ops.c against torchvision 0.14's own ops on PIL images
# (autoaugment._apply_op, functional.adjust_*): every op at every magnitude
# of TrivialAugmentWide's, RandAugment's and AutoAugment's spaces, both
# signs where signed, on Debian's sample photos. The C must give the same
# bytes (max abs difference 0); run this file as a script for the table of
# what was measured.
import os

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("torch")
pytest.importorskip("torchvision")
from PIL import Image  # noqa: E402
from torchvision.transforms import InterpolationMode  # noqa: E402
from torchvision.transforms import autoaugment, functional  # noqa: E402

from gpufeed import _gpufeed  # noqa: E402

SAMPLES = "/usr/share/matplotlib/mpl-data/sample_data"  # Debian's python-matplotlib-data


def _photos():
    """name -> PIL image: the photo at 224x224 and at an odd 57x43, a grey
    copy, and a square PNG (RGBA made RGB)."""
    path = os.path.join(SAMPLES, "grace_hopper.jpg")
    if not os.path.exists(path):
        pytest.skip("python-matplotlib-data is not installed")
    hopper = Image.open(path).convert("RGB")
    photos = {
        "hopper224": hopper.crop((0, 40, 512, 552)).resize((224, 224), Image.BILINEAR),
        "hopper57x43": hopper.resize((57, 43), Image.BILINEAR),
        "minduka128": Image.open(os.path.join(SAMPLES, "Minduka_Present_Blue_Pack.png")).convert("RGB"),
    }
    photos["hopper57x43_grey"] = photos["hopper57x43"].convert("L")
    return photos


PHOTOS = None


def photos():
    global PHOTOS
    if PHOTOS is None:
        PHOTOS = _photos()
    return PHOTOS


def magnitudes(op, size):
    """Every magnitude forward() can pass op on an image of size (w, h):
    float(bin) as torchvision takes it, and its negation where signed."""
    w, h = size
    spaces = [autoaugment.TrivialAugmentWide()._augmentation_space(31),
              autoaugment.RandAugment()._augmentation_space(31, (h, w)),
              autoaugment.AutoAugment()._augmentation_space(10, (h, w))]
    out = []
    for space in spaces:
        if op not in space:
            continue
        values, signed = space[op]
        for v in (values.tolist() if values.ndim > 0 else [0.0]):
            v = float(v)
            out += [v, -v] if signed and v != 0.0 else [v]
    return sorted(set(out))


OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
       "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert"]
GEOMETRIC = ["ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"]
INTERP = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR,
          "bicubic": InterpolationMode.BICUBIC}


def _channels(img):
    return 1 if img.mode == "L" else 3


def diff(expected, got):
    """(max abs difference, share of differing bytes) of two uint8 images."""
    a = np.asarray(expected, dtype=np.int16).reshape(-1)
    b = np.frombuffer(got, dtype=np.uint8).astype(np.int16)
    d = np.abs(a - b)
    return int(d.max()), float(np.count_nonzero(d)) / d.size


def measure_op(op, name, interpolation="nearest", fill=None):
    """Over every magnitude: (max abs difference, worst share, magnitudes)."""
    img = photos()[name]
    w, h = img.size
    c = _channels(img)
    raw = img.tobytes()
    worst, share, mags = 0, 0.0, magnitudes(op, img.size)
    tv_fill = None if fill is None else [float(f) for f in fill[:c]]
    for mag in mags:
        want = autoaugment._apply_op(img, op, mag, interpolation=INTERP[interpolation], fill=tv_fill)
        got = _gpufeed._augment_op(op, mag, raw, w, h, c, interpolation,
                                   None if fill is None else fill[:c])
        m, s = diff(want, got)
        worst, share = max(worst, m), max(share, s)
    return worst, share, len(mags)


@pytest.mark.parametrize("name", ["hopper224", "hopper57x43", "minduka128", "hopper57x43_grey"])
@pytest.mark.parametrize("op", OPS)
def test_op_nearest_is_torchvisions(op, name):
    worst, share, n = measure_op(op, name)
    assert n >= 1
    assert worst == 0, f"{op} on {name}: max diff {worst}, {share:.2%} of bytes differ"


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
@pytest.mark.parametrize("name", ["hopper224", "hopper57x43", "minduka128", "hopper57x43_grey"])
@pytest.mark.parametrize("op", GEOMETRIC)
def test_op_bilinear_and_bicubic_are_torchvisions(op, name, interpolation):
    worst, share, _ = measure_op(op, name, interpolation)
    assert worst == 0, f"{op} on {name}: max diff {worst}, {share:.2%} of bytes differ"


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear", "bicubic"])
@pytest.mark.parametrize("op", GEOMETRIC)
def test_fill_is_torchvisions(op, interpolation):
    for name in ["hopper224", "hopper57x43", "hopper57x43_grey"]:
        worst, share, _ = measure_op(op, name, interpolation, fill=(255, 128, 7))
        assert worst == 0, f"{op} on {name}: max diff {worst}, {share:.2%} of bytes differ"


ADJUST = {
    "brightness": (functional.adjust_brightness, [0.0, 0.1, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.7]),
    "contrast": (functional.adjust_contrast, [0.0, 0.1, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.7]),
    "saturation": (functional.adjust_saturation, [0.0, 0.1, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.7]),
    "hue": (functional.adjust_hue, [-0.5, -0.37, -0.1, -0.01, 0.0, 0.01, 0.05, 0.25, 0.4999, 0.5]),
}


def measure_adjust(kind, name):
    fn, factors = ADJUST[kind]
    img = photos()[name]
    w, h = img.size
    worst, share = 0, 0.0
    for f in factors:
        got = _gpufeed._adjust(kind, f, img.tobytes(), w, h, _channels(img))
        m, s = diff(fn(img, f), got)
        worst, share = max(worst, m), max(share, s)
    return worst, share, len(factors)


@pytest.mark.parametrize("name", ["hopper224", "hopper57x43", "minduka128", "hopper57x43_grey"])
@pytest.mark.parametrize("kind", sorted(ADJUST))
def test_adjust_is_torchvisions(kind, name):
    worst, share, _ = measure_adjust(kind, name)
    assert worst == 0, f"{kind} on {name}: max diff {worst}, {share:.2%} of bytes differ"


@pytest.mark.parametrize("op,mag", [("Rotate", 0.7), ("Rotate", -13.0), ("ShearX", -0.2), ("ShearY", 0.3)])
def test_wide_image_takes_pils_double_engine(op, mag):
    """Past 32768 at a corner ImagingTransformAffine leaves 16.16 fixed point
    for running sums in double: a 32768-wide strip sheared reaches it (the
    rotations stay fixed point, their own check)."""
    rng = np.random.default_rng(7)
    for c, mode in ((1, "L"), (3, "RGB")):
        arr = rng.integers(0, 256, size=(5, 32768, c), dtype=np.uint8)
        img = Image.fromarray(arr[:, :, 0] if c == 1 else arr, mode)
        want = autoaugment._apply_op(img, op, mag, interpolation=InterpolationMode.NEAREST, fill=None)
        got = _gpufeed._augment_op(op, mag, img.tobytes(), 32768, 5, c)
        assert diff(want, got)[0] == 0


def test_bad_arguments_name_themselves():
    raw = bytes(12)
    with pytest.raises(ValueError, match="op_name"):
        _gpufeed._augment_op("Shear", 0.1, raw, 2, 2, 3)
    with pytest.raises(ValueError, match="image has"):
        _gpufeed._augment_op("ShearX", 0.1, raw, 3, 2, 3)
    with pytest.raises(ValueError, match="c must"):
        _gpufeed._augment_op("ShearX", 0.1, bytes(16), 2, 2, 4)
    with pytest.raises(ValueError, match="interpolation"):
        _gpufeed._augment_op("ShearX", 0.1, raw, 2, 2, 3, "lanczos")
    with pytest.raises(ValueError, match="fill"):
        _gpufeed._augment_op("ShearX", 0.1, raw, 2, 2, 3, "nearest", (1, 2))
    with pytest.raises(ValueError, match="kind"):
        _gpufeed._adjust("gamma", 1.0, raw, 2, 2, 3)
    with pytest.raises(ValueError, match="factor"):
        _gpufeed._adjust("hue", 0.6, raw, 2, 2, 3)


if __name__ == "__main__":
    # The table of the report: per op, the worst over every magnitude.
    print(f"{'op':<14} {'interp':<9} {'image':<17} {'mags':>4} {'max diff':>8} {'differing':>9}")
    for op in OPS:
        for interp in (["nearest", "bilinear"] if op in GEOMETRIC else ["nearest"]):
            for name in photos():
                worst, share, n = measure_op(op, name, interp)
                print(f"{op:<14} {interp:<9} {name:<17} {n:>4} {worst:>8} {share:>9.4%}")
    for kind in sorted(ADJUST):
        for name in photos():
            worst, share, n = measure_adjust(kind, name)
            print(f"adjust_{kind:<7} {'':<9} {name:<17} {n:>4} {worst:>8} {share:>9.4%}")

"""gpufeed's crop boxes (src/crop.c, printed by tests/crop_boxes.c) held to
torchvision's: eval's Resize(s) + CenterCrop box for box, train's
RandomResizedCrop box distribution by two-sample Kolmogorov-Smirnov tests.

Run by meson as the test crop_torchvision (GPUFEED_CROP_BOXES names the
program); skipped without numpy, torch or torchvision."""
import math
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
from torchvision.transforms import RandomResizedCrop  # noqa: E402
from torchvision.transforms import functional as F  # noqa: E402

EXE = os.environ.get("GPUFEED_CROP_BOXES")
if not EXE:
    pytest.skip("GPUFEED_CROP_BOXES is not set (run through meson)", allow_module_level=True)


def f32(x):
    """x as gpufeed holds it (the settings are float32): both sides get it."""
    return float(np.float32(x))


def run(*args, stdin=""):
    out = subprocess.run([EXE, *map(str, args)], input=stdin, capture_output=True, text=True,
                         check=True).stdout
    return np.array(out.split(), dtype=np.float64)


# ---- eval: Resize(s) + CenterCrop((out_h, out_w)) ----

def short_side(out_w, out_h, cf):
    """Resize's s: min(out) / crop_fraction, the integer it is meant to be
    within float32's error (224 / 0.875 = 256), else floored."""
    q = min(out_w, out_h) / f32(cf)
    r = math.floor(q + 0.5)
    return r if abs(q - r) <= 1e-6 * q else math.floor(q)


def tv_center_offset(n, c):
    return int(round((n - c) / 2.0))  # torchvision's center_crop, verbatim


def tv_eval_box(W, H, s, out_w, out_h):
    """torchvision's Resize(s) + CenterCrop box in source pixels. Where the
    crop does not fit, torchvision pads; gpufeed takes the smallest s' > s
    whose resize holds it (documented in src/crop.c): checked here too."""
    def size(s):
        rh, rw = F._compute_resized_output_size((H, W), [s])
        return rw, rh

    rw, rh = size(s)
    if rw < out_w or rh < out_h:
        need = max(out_w, -(-out_h * W // H)) if W <= H else max(out_h, -(-out_w * H // W))
        s = max(s, need - 2)
        while True:
            rw, rh = size(s)
            if rw >= out_w and rh >= out_h:
                break
            s += 1
        pw, ph = size(s - 1)
        assert pw < out_w or ph < out_h, "the smallest s' that fits"
    left, top = tv_center_offset(rw, out_w), tv_center_offset(rh, out_h)
    return left * W / rw, top * H / rh, out_w * W / rw, out_h * H / rh


def check_eval(out_w, out_h, cf, sizes):
    got = run("eval", out_w, out_h, cf, stdin="".join(f"{w} {h}\n" for w, h in sizes))
    got = got.reshape(-1, 4)
    assert len(got) == len(sizes)
    s = short_side(out_w, out_h, cf)
    want = np.array([tv_eval_box(W, H, s, out_w, out_h) for W, H in sizes])
    scale = np.array([[W, H, W, H] for W, H in sizes], dtype=np.float64)
    # the same box: equal to a few ulps of the image's size
    err = np.abs(got - want) / scale
    worst = int(err.max(axis=1).argmax())
    assert err.max() < 1e-12, f"{sizes[worst]}: got {got[worst]}, torchvision {want[worst]}"
    # and inside the image
    assert (got[:, 0] >= 0).all() and (got[:, 1] >= 0).all()
    assert (got[:, 0] + got[:, 2] <= scale[:, 0] * (1 + 1e-12)).all()
    assert (got[:, 1] + got[:, 3] <= scale[:, 1] * (1 + 1e-12)).all()


EXTREME = [1, 2, 3, 7, 223, 224, 225, 255, 256, 257, 4096, 65535, 100000]


def test_center_crop_offsets_are_torchvisions():
    """The offset formula above is center_crop's own: on tensors whose
    values are their row numbers, for every size and crop up to 60."""
    for n in range(1, 61):
        img = torch.arange(n, dtype=torch.float32).reshape(1, n, 1)
        for c in range(1, n + 1):
            assert int(F.center_crop(img, [c, 1])[0, 0, 0]) == tv_center_offset(n, c), (n, c)


def test_short_side():
    assert short_side(224, 224, 0.875) == 256
    assert short_side(190, 190, 0.95) == 200  # 0.95 is not a float32
    assert short_side(224, 224, 0.9) == 248  # timm: floor(224 / 0.9)
    assert short_side(320, 256, 1.0) == 256


def test_eval_224_is_resize_256_center_crop_224_for_every_size_to_600():
    sizes = [(w, h) for w in range(1, 601) for h in range(1, 601)]
    sizes += [(w, h) for w in EXTREME for h in EXTREME]
    check_eval(224, 224, 0.875, sizes)


@pytest.mark.parametrize("out_w,out_h,cf", [
    (320, 256, 0.875),  # s = floor(292.57)
    (256, 320, 0.9),
    (190, 190, 0.95),
    (640, 64, 1.0),  # the crop often wider than the resized image
    (1, 1, 1.0),
    (7, 300, 0.5),
])
def test_eval_other_outputs_are_torchvisions(out_w, out_h, cf):
    sizes = [(w, h) for w in range(1, 241, 3) for h in range(1, 241, 2)]
    sizes += [(w, h) for w in EXTREME for h in EXTREME]
    check_eval(out_w, out_h, cf, sizes)


# ---- train: RandomResizedCrop.get_params + the flip ----

N = 20000
# Two-sample Kolmogorov-Smirnov at alpha 0.001: D > c * sqrt((n + m) / (n m)),
# c = sqrt(-ln(alpha / 2) / 2) = 1.9495 (conservative on the discrete w, h).
ALPHA = 0.001
KS_C = math.sqrt(-math.log(ALPHA / 2) / 2)
Z = 3.2905  # two-sided normal quantile at alpha 0.001


def ks_stat(a, b):
    a, b = np.sort(a), np.sort(b)
    v = np.concatenate([a, b])
    fa = np.searchsorted(a, v, side="right") / len(a)
    fb = np.searchsorted(b, v, side="right") / len(b)
    return float(np.abs(fa - fb).max())


def fallback_box(W, H, ratio):
    """get_params' central crop after 10 failed attempts, as (x, y, w, h)."""
    in_ratio = W / H
    if in_ratio < min(ratio):
        w, h = W, int(round(W / min(ratio)))
    elif in_ratio > max(ratio):
        w, h = int(round(H * max(ratio))), H
    else:
        w, h = W, H
    return (W - w) // 2, (H - h) // 2, w, h


def tv_boxes(W, H, scale, ratio, n, seed):
    torch.manual_seed(seed)
    img = torch.empty(1, H, W)
    out = np.empty((n, 4))
    for k in range(n):
        i, j, h, w = RandomResizedCrop.get_params(img, list(scale), list(ratio))
        out[k] = j, i, w, h
    return out


def gf_boxes(W, H, scale, ratio, flip, n, seed):
    got = run("train", W, H, *scale, *ratio, flip, n, seed).reshape(-1, 5)
    return got[:, :4], got[:, 4]


def compare(W, H, scale, ratio):
    scale, ratio = tuple(map(f32, scale)), tuple(map(f32, ratio))
    tv = tv_boxes(W, H, scale, ratio, N, seed=20251)
    gf, _ = gf_boxes(W, H, scale, ratio, 0.5, N, seed=20251)
    assert (gf == np.round(gf)).all(), "whole-pixel boxes"
    assert (gf[:, 0] >= 0).all() and (gf[:, 0] + gf[:, 2] <= W).all()
    assert (gf[:, 1] >= 0).all() and (gf[:, 1] + gf[:, 3] <= H).all()
    stats = {}
    for name, f in {
        "w": lambda b: b[:, 2],
        "h": lambda b: b[:, 3],
        "x/(W-w+1)": lambda b: b[:, 0] / (W - b[:, 2] + 1),
        "y/(H-h+1)": lambda b: b[:, 1] / (H - b[:, 3] + 1),
    }.items():
        stats[name] = ks_stat(f(gf), f(tv))
    crit = KS_C * math.sqrt(2 / N)
    # the fallback's box (a successful draw may make it too: the same event
    # on both sides all the same)
    fb = np.array(fallback_box(W, H, ratio))
    p_gf, p_tv = (gf == fb).all(axis=1).mean(), (tv == fb).all(axis=1).mean()
    p = (p_gf + p_tv) / 2
    z = 0.0 if p in (0, 1) else (p_gf - p_tv) / math.sqrt(p * (1 - p) * 2 / N)
    print(f"{W}x{H} scale {scale} ratio {ratio}: KS D {stats} (critical {crit:.4f}); "
          f"fallback box {p_gf:.4f} vs {p_tv:.4f}, z {z:.2f}")
    for name, d in stats.items():
        assert d < crit, f"{name}: KS D {d:.4f} >= {crit:.4f}"
    assert abs(z) < Z, f"fallback box share {p_gf} vs torchvision's {p_tv}: z {z:.2f}"


@pytest.mark.parametrize("W,H,scale,ratio", [
    (500, 375, (0.08, 1.0), (3 / 4, 4 / 3)),  # ImageNet-like
    (32, 32, (0.08, 1.0), (3 / 4, 4 / 3)),  # small: w, h rounding matters
    (200, 40, (0.08, 1.0), (3 / 4, 4 / 3)),  # wide: the fallback a quarter of the time
    (13, 200, (0.08, 1.0), (0.2, 5.0)),  # tall, a wide ratio range: the fallback often
])
def test_random_resized_crop_boxes_are_distributed_as_torchvisions(W, H, scale, ratio):
    compare(W, H, scale, ratio)


def test_fallback_rounds_halves_to_even_as_torchvision():
    """Every attempt fails (w = 10 > 5): the fallback's h = round(5 / 2) = 2."""
    tv = tv_boxes(5, 10, (1.0, 1.0), (2.0, 2.0), 3, seed=1)
    gf, _ = gf_boxes(5, 10, (1.0, 1.0), (2.0, 2.0), 0.5, 3, seed=1)
    assert (tv == [0, 4, 5, 2]).all() and (gf == tv).all()


@pytest.mark.parametrize("p", [0.5, 0.2, 0.0, 1.0])
def test_flip_is_bernoulli_p(p):
    """RandomHorizontalFlip(p): torch.rand(1) < p, so Bernoulli(p) exactly,
    independent of the box."""
    gf, flips = gf_boxes(64, 48, (0.08, 1.0), (3 / 4, 4 / 3), f32(p), N, seed=99)
    k = flips.sum()
    if p in (0.0, 1.0):
        assert k == p * N
        return
    z = (k - N * p) / math.sqrt(N * p * (1 - p))
    print(f"flip p {p}: {int(k)} of {N}, z {z:.2f}")
    assert abs(z) < Z
    # independent of the crop: flipped and unflipped boxes alike
    d = ks_stat(gf[flips == 1, 2], gf[flips == 0, 2])
    n1, n0 = (flips == 1).sum(), (flips == 0).sum()
    assert d < KS_C * math.sqrt((n1 + n0) / (n1 * n0))

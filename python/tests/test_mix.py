# settings.augment's last stage, `mix`: MixUp / CutMix as torchvision v2's
# over each converted batch, with soft targets (src/batch_mix.c). Each mixed
# batch is held, to the bit, to the same loader's batch without the stage:
# the draw is a pure function of (seed, epoch, position), which the test
# hook _gpufeed._mix_draw computes as the loader does.
import pytest

import gpufeed
from gpufeed import _gpufeed

np = pytest.importorskip("numpy")

SIZE = 16


def run(root, augment=None, **kw):
    base = dict(batch_size=8, image_size=SIZE, seed=7, shuffle=True, device="cpu", threads=2,
                dtype="float32", layout="nchw", mean=(120, 110, 100), std=(60, 50, 40))
    base.update(kw)
    out = []
    with gpufeed.Loader(root, augment=augment, **base) as loader:
        for b in loader:
            dt = {"float32": np.float32, "float16": np.float16}[base["dtype"]]
            data = np.array(memoryview(b.data)).view(dt).reshape(b.count, -1)
            t = b.targets
            out.append(dict(data=data, labels=np.array(memoryview(b.labels)),
                            targets=None if t is None else np.array(memoryview(t)),
                            epoch=b.epoch, position=b.position, count=b.count))
    return out


def expected(x, draw, layout):
    """torchvision v2's MixUp / CutMix of float32 batch x (N, elements)."""
    kind, lam, _, (x1, y1, x2, y2) = draw
    rolled = np.roll(x, 1, axis=0)
    if kind == "mixup":
        # inpt.roll(1, 0).mul_(1.0 - lam).add_(inpt.mul(lam)): float32 products, then the sum
        return rolled * np.float32(1.0 - lam) + x * np.float32(lam)
    shape = (len(x), 3, SIZE, SIZE) if layout == "nchw" else (len(x), SIZE, SIZE, 3)
    y, r = x.reshape(shape).copy(), rolled.reshape(shape)
    if layout == "nchw":
        y[:, :, y1:y2, x1:x2] = r[:, :, y1:y2, x1:x2]
    else:
        y[:, y1:y2, x1:x2, :] = r[:, y1:y2, x1:x2, :]
    return y.reshape(len(x), -1)


def check_targets(b, draw, classes):
    _, _, lam_t, _ = draw
    t, y = b["targets"], b["labels"]
    assert t.shape == (b["count"], classes)
    assert np.allclose(t.sum(1), 1.0, atol=1e-6)
    keep, take = np.float32(lam_t), np.float32(1.0 - lam_t)
    for i in range(b["count"]):
        own, other = y[i], y[i - 1]
        want = np.zeros(classes, np.float32)
        want[other] = take
        want[own] = want[own] + keep
        assert (t[i] == want).all(), (i, t[i], want)


@pytest.mark.parametrize("spec,layout", [("mix cutmix=0", "nchw"), ("mix mixup=0", "nchw"),
                                         ("mix mixup=0 cutmix=0.7", "nhwc"),
                                         ("mix mixup=0.4 cutmix=1.0 switch=0.5", "nchw")])
def test_a_mixed_batch_is_torchvisions_mix_of_the_unmixed_one(dataset, spec, layout):
    plain, mixed = run(dataset, layout=layout), run(dataset, spec, layout=layout)
    assert len(plain) == len(mixed) and len(mixed) > 2
    assert mixed[-1]["count"] < 8  # 60 samples: the partial last batch mixes among its own
    kinds = set()
    for a, b in zip(plain, mixed):
        assert a["targets"] is None
        assert (a["labels"] == b["labels"]).all()
        draw = _gpufeed._mix_draw(spec, SIZE, SIZE, 3, 7, b["epoch"], b["position"])
        kinds.add(draw[0])
        want = expected(a["data"], draw, layout)
        assert want.dtype == np.float32
        assert (b["data"].view(np.uint32) == want.view(np.uint32)).all()
        check_targets(b, draw, 3)  # the ImageFolder's 3 classes: classes= left out
    if "switch" in spec:
        assert kinds == {"mixup", "cutmix"}


def test_float16_is_the_float32_mix_rounded_once(dataset):
    spec = "mix cutmix=0 classes=5"
    plain = run(dataset, dtype="float16", layout="nhwc")
    mixed = run(dataset, spec, dtype="float16", layout="nhwc")
    for a, b in zip(plain, mixed):
        draw = _gpufeed._mix_draw(spec, SIZE, SIZE, 3, 7, b["epoch"], b["position"])
        want = expected(a["data"].astype(np.float32), draw, "nhwc").astype(np.float16)
        assert (b["data"].view(np.uint16) == want.view(np.uint16)).all()
        check_targets(b, draw, 5)


def test_cutmix_box_is_torchvisions():
    """r = 0.5 sqrt(1 - lam), the half sides int(r W) and int(r H) around a
    uniform centre, clipped; lam_target is 1 - the box's share."""
    spec = "mix mixup=0"
    for pos in range(200):
        kind, lam, lam_t, (x1, y1, x2, y2) = _gpufeed._mix_draw(spec, 40, 24, 3, 1, 0, pos)
        assert kind == "cutmix"
        rw, rh = int(0.5 * (1 - lam) ** 0.5 * 40), int(0.5 * (1 - lam) ** 0.5 * 24)
        assert any(x1 == max(cx - rw, 0) and x2 == min(cx + rw, 40) for cx in range(40))
        assert any(y1 == max(cy - rh, 0) and y2 == min(cy + rh, 24) for cy in range(24))
        assert lam_t == 1.0 - (x2 - x1) * (y2 - y1) / (40 * 24)


def test_the_switch_picks_cutmix_with_its_probability():
    n = 4000
    cut = sum(_gpufeed._mix_draw("mix switch=0.3", 8, 8, 3, 5, 0, k)[0] == "cutmix"
              for k in range(n))
    assert abs(cut / n - 0.3) < 4 * (0.3 * 0.7 / n) ** 0.5


@pytest.mark.parametrize("threads", [1, 4])
def test_mixed_batches_do_not_depend_on_threads(dataset, threads):
    spec = "mix mixup=0.8 cutmix=1.0"
    a, b = run(dataset, spec, threads=2), run(dataset, spec, threads=threads)
    for x, y in zip(a, b):
        assert (x["data"].view(np.uint32) == y["data"].view(np.uint32)).all()
        assert (x["targets"] == y["targets"]).all()


def ks_two_sample(a, b):
    a, b = np.sort(a), np.sort(b)
    both = np.concatenate([a, b])
    fa = np.searchsorted(a, both, side="right") / len(a)
    fb = np.searchsorted(b, both, side="right") / len(b)
    return np.abs(fa - fb).max()


@pytest.mark.parametrize("alpha,beta", [(0.2, 0.2), (1.0, 1.0), (2.5, 2.5), (2.0, 5.0)])
def test_beta_draws_follow_numpys_beta(alpha, beta):
    """Two-sample Kolmogorov-Smirnov over 10,000 draws each (seeded), at
    p = 0.001: D < 1.95 sqrt(2 / n)."""
    n = 10000
    ours = np.array(_gpufeed._beta_draws(alpha, beta, 12345, n))
    theirs = np.random.default_rng(2024).beta(alpha, beta, n)
    assert ((ours >= 0) & (ours <= 1)).all()
    assert ks_two_sample(ours, theirs) < 1.95 * (2 / n) ** 0.5
    mean = alpha / (alpha + beta)
    sd = (alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1))) ** 0.5
    assert abs(ours.mean() - mean) < 4 * sd / n ** 0.5


@pytest.mark.parametrize("spec,kw,why", [
    ("mix", dict(dtype="uint8"), "needs a float dtype"),
    ("mix; erase", {}, "erase after mix"),
    ("mix classes=2", {}, "classes=2, but the data has label 2"),
    ("mix mixup=0 cutmix=0", {}, "nothing to do"),
    ("mix switch=2", {}, "switch=2"),
    ("mix alpha=1", {}, "no setting alpha"),
])
def test_a_bad_mix_is_refused_naming_why(dataset, spec, kw, why):
    with pytest.raises(gpufeed.Error, match=why):
        run(dataset, spec, **kw)


def test_a_list_needs_classes(dataset, tmp_path):
    """A list's max label + 1 is no class count: classes= is asked for."""
    import os
    import shutil
    root = tmp_path / "listed"
    shutil.copytree(dataset, root)
    lines = [f"{d}/{f} {int(d[-2:])}" for d in sorted(os.listdir(root))
             for f in sorted(os.listdir(root / d))]
    (root / "list.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(gpufeed.Error, match="classes= is missing"):
        run(str(root / "list.txt"), "mix")
    out = run(str(root / "list.txt"), "mix classes=4")
    assert out[0]["targets"].shape == (8, 4)


def test_erase_then_mix_mixes_the_erased_batch(dataset):
    spec = "erase p=1 value=0; mix cutmix=0"
    erased, mixed = run(dataset, "erase p=1 value=0"), run(dataset, spec)
    for a, b in zip(erased, mixed):
        draw = _gpufeed._mix_draw(spec, SIZE, SIZE, 3, 7, b["epoch"], b["position"])
        assert (b["data"].view(np.uint32) == expected(a["data"], draw, "nchw").view(np.uint32)).all()

"""settings.augment against torchvision: the draws' distributions (a
two-sample chi-square, gpufeed's C draws against torchvision's own forward()
recording what it hands _apply_op, F.erase and the adjust_* functions),
every magnitude to the bit, and what a loader delivers: the crop
torchvision's ops turn into, with the parameters gpufeed drew, on Debian's
sample photo. gpufeed.DataLoader's translation of the reference's
transforms, preset objects and collate_fn are here too."""
import math
import os
import random
from collections import Counter

import pytest

import gpufeed
from gpufeed import _gpufeed

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")
T = pytest.importorskip("torchvision.transforms")
AA = pytest.importorskip("torchvision.transforms.autoaugment")
F = pytest.importorskip("torchvision.transforms.functional")
datasets = pytest.importorskip("torchvision.datasets")

N = 10_000
PHOTO = "/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg"  # python-matplotlib-data


def chi2_critical(df, z=3.09):
    """The chi-square quantile at 1 - 0.001 (Wilson-Hilferty)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def assert_same_distribution(ours, theirs, what):
    """Two samples of categories: homogeneous at the 0.001 level. Categories
    seen under 10 times in both together are pooled."""
    a, b = Counter(ours), Counter(theirs)
    keys = set(a) | set(b)
    rare = [k for k in keys if a[k] + b[k] < 10]
    pa, pb = sum(a[k] for k in rare), sum(b[k] for k in rare)
    cells = [(a[k], b[k]) for k in keys if k not in rare] + ([(pa, pb)] if pa + pb else [])
    ra, rb = math.sqrt(len(theirs) / len(ours)), math.sqrt(len(ours) / len(theirs))
    chi2 = sum((ra * x - rb * y) ** 2 / (x + y) for x, y in cells)
    df = len(cells) - 1
    assert df >= 1
    assert chi2 < chi2_critical(df), f"{what}: chi2 {chi2:.1f} over {df} df"
    return chi2, df


class Recorder:
    """torchvision's steps, their pixel work replaced by a record of it."""

    def __init__(self, monkeypatch):
        self.calls = []
        monkeypatch.setattr(AA, "_apply_op", self.op)
        for name in ("adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue"):
            monkeypatch.setattr(F, name, self.adjust(name[len("adjust_"):]))
        monkeypatch.setattr(F, "erase", self.erase)

    def op(self, img, name, magnitude, interpolation, fill):
        self.calls.append((name, magnitude))
        return img

    def adjust(self, kind):
        def f(img, factor):
            self.calls.append((kind, factor))
            return img
        return f

    def erase(self, img, i, j, h, w, v, inplace=False):
        self.calls.append((i, j, h, w))
        return img

    def draws(self, t, n, stand_in):
        torch.manual_seed(0)
        out = []
        for _ in range(n):
            self.calls = []
            t(stand_in)
            out.append(list(self.calls))
        return out


def ours(spec, n=N, w=224, h=224):
    return [[(op, m) for op, m in d] for d in _gpufeed._augment_draws(spec, w, h, 3, 7, n)]


def signed_bin(op_meta, name, m):
    """(name, bin, sign) of a drawn magnitude: its place in the table."""
    mags, signed = op_meta[name]
    if mags.ndim == 0:
        return (name, None, False)
    values = [float(v) for v in mags.tolist()]
    assert abs(m) in values, f"{name}: {m!r} is not in torchvision's table"
    return (name, values.index(abs(m)), math.copysign(1.0, m) < 0)


PIL1 = Image.new("RGB", (224, 224))


@pytest.mark.parametrize("bins", [31, 10])
def test_trivialaugment_wide_draws_as_torchvision(monkeypatch, bins):
    t = T.TrivialAugmentWide(num_magnitude_bins=bins)
    meta = t._augmentation_space(bins)
    theirs = [signed_bin(meta, *d[0]) for d in Recorder(monkeypatch).draws(t, N, PIL1)]
    mine = [signed_bin(meta, *d[0]) for d in ours(f"ta_wide bins={bins}")]
    assert set(mine) == set(theirs)  # every op, bin and sign, and nothing else
    assert_same_distribution(mine, theirs, "TrivialAugmentWide")


@pytest.mark.parametrize("num_ops, magnitude", [(2, 9), (3, 30), (1, 0)])
def test_randaugment_draws_as_torchvision(monkeypatch, num_ops, magnitude):
    t = T.RandAugment(num_ops=num_ops, magnitude=magnitude)
    meta = t._augmentation_space(31, (224, 224))
    theirs = Recorder(monkeypatch).draws(t, N, PIL1)
    mine = ours(f"randaugment num_ops={num_ops} magnitude={magnitude}")
    assert all(len(d) == num_ops for d in mine)
    # each op's magnitude is the table's at `magnitude`, to the bit
    for d in mine:
        for name, m in d:
            mags, _ = meta[name]
            assert abs(m) == (float(mags[magnitude]) if mags.ndim else 0.0), name
    flat = lambda ds: [signed_bin(meta, *op) for d in ds for op in d]  # noqa: E731
    assert_same_distribution(flat(mine), flat(theirs), "RandAugment")


def test_autoaugment_imagenet_draws_as_torchvision(monkeypatch):
    t = T.AutoAugment(T.AutoAugmentPolicy.IMAGENET)
    meta = t._augmentation_space(10, (224, 224))
    theirs = Recorder(monkeypatch).draws(t, N, PIL1)
    mine = ours("autoaugment")
    key = lambda ds: [tuple(signed_bin(meta, *op) for op in d) for d in ds]  # noqa: E731
    assert set(key(mine)) <= set(key(theirs)) | {()}
    assert_same_distribution(key(mine), key(theirs), "AutoAugment")


def test_translate_magnitudes_follow_the_image_size():
    """RandAugment's TranslateX/Y tables scale with width/height: 150/331 of it."""
    t = T.RandAugment(num_ops=1, magnitude=30)
    meta = t._augmentation_space(31, (96, 160))  # (height, width)
    seen = {op: m for d in ours("randaugment num_ops=1 magnitude=30", 2000, w=160, h=96)
            for op, m in d}
    assert abs(seen["TranslateX"]) == float(meta["TranslateX"][0][30])
    assert abs(seen["TranslateY"]) == float(meta["TranslateY"][0][30])


def test_color_jitter_draws_as_torchvision(monkeypatch):
    t = T.ColorJitter(brightness=0.4, contrast=(0.5, 1.2), saturation=0.3, hue=0.1)
    theirs = Recorder(monkeypatch).draws(t, N, PIL1)
    mine = ours("jitter brightness=0.6,1.4 contrast=0.5,1.2 saturation=0.7,1.3 hue=-0.1,0.1")
    order = lambda ds: [tuple(k for k, _ in d) for d in ds]  # noqa: E731
    assert set(order(mine)) == set(order(theirs)) and len(set(order(mine))) == 24
    assert_same_distribution(order(mine), order(theirs), "ColorJitter order")
    ranges = {"brightness": (0.6, 1.4), "contrast": (0.5, 1.2), "saturation": (0.7, 1.3),
              "hue": (-0.1, 0.1)}
    for kind, (lo, hi) in ranges.items():
        decile = lambda ds: [min(9, int(10 * (f - lo) / (hi - lo)))  # noqa: E731
                             for d in ds for k, f in d if k == kind]
        assert all(lo <= f <= hi for d in mine for k, f in d if k == kind)
        assert_same_distribution(decile(mine), decile(theirs), f"ColorJitter {kind}")


def test_jitter_off_ranges_are_torchvisions():
    """ColorJitter(0) or (1, 1) turns a step off; a single number b is
    [max(0, 1 - b), 1 + b], hue's [-b, b]."""
    assert all(k != "brightness" for d in ours("jitter brightness=1,1 hue=0.2", 200) for k, _ in d)
    assert {k for d in ours("jitter brightness=1,1 hue=0.2", 200) for k, _ in d} == {"hue"}
    fs = [f for d in ours("jitter brightness=2", 2000) for _, f in d]
    assert min(fs) >= 0 and max(fs) <= 3 and min(fs) < 0.05


@pytest.mark.parametrize("p, scale, ratio", [(0.5, (0.02, 0.33), (0.3, 3.3)),
                                             (1.0, (0.1, 0.9), (0.5, 2.0))])
def test_random_erasing_draws_as_torchvision(monkeypatch, p, scale, ratio):
    t = T.RandomErasing(p=p, scale=scale, ratio=ratio)
    h, w = 40, 56
    theirs = [d[0] if d else None for d in Recorder(monkeypatch).draws(t, N, torch.zeros(3, h, w))]
    # torchvision erases the whole image "unchanged" when no attempt fits:
    # that is no rectangle in gpufeed's words
    theirs = [None if r == (0, 0, h, w) else r for r in theirs]
    mine = _gpufeed._erase_rects(f"erase p={p} scale={scale[0]},{scale[1]} "
                                 f"ratio={ratio[0]},{ratio[1]}", w, h, 3, 7, N)
    for r in mine:
        assert r is None or (0 <= r[0] <= h - r[2] and 0 <= r[1] <= w - r[3])
    size = lambda rs: [None if r is None else (r[2] // 4, r[3] // 4) for r in rs]  # noqa: E731
    place = lambda rs: [None if r is None else (  # noqa: E731
        min(3, 4 * r[0] // max(1, h - r[2] + 1)), min(3, 4 * r[1] // max(1, w - r[3] + 1)))
        for r in rs]
    assert_same_distribution(size(mine), size(theirs), "RandomErasing size")
    assert_same_distribution(place(mine), place(theirs), "RandomErasing place")


@pytest.mark.parametrize("spec, why", [
    ("ta_wide bins=1", "bins=1"), ("randaugment magnitude=31", "magnitude 31"),
    ("autoaugment policy=cifar10", "imagenet only"), ("ta_wide interpolation=lanczos", "lanczos"),
    ("erase; ta_wide", "after erase"), ("erase value=random", "random"), ("blur", "no stage blur"),
    ("jitter hue=0.6", "hue=0.6"), ("ta_wide fill=300", "fill=300"), ("ta_wide bins", "KEY=VALUE"),
])
def test_a_bad_spec_is_refused_naming_the_word(spec, why):
    with pytest.raises(ValueError, match=why):
        _gpufeed._augment_draws(spec, 32, 32, 3, 0, 1)
    with pytest.raises(gpufeed.Error, match=why):
        gpufeed.Loader("/nonexistent", augment=spec)


def test_the_crops_and_flips_are_the_same_with_augmentation_or_without(dataset):
    """The stages draw from a stream of their own: augmenting changes no crop."""
    kw = dict(batch_size=8, image_size=32, seed=3, shuffle=False, device="cpu", threads=2)
    with gpufeed.Loader(dataset, **kw) as a, \
            gpufeed.Loader(dataset, augment="erase p=1 value=7", **kw) as b:
        for x, y in zip(a, b):
            px, py = np.asarray(memoryview(x.data)), np.asarray(memoryview(y.data))
            assert (px == py).mean() > 0.5  # outside the rectangles, the same bytes


def photo_set(tmp_path, n=12, size=(160, 120)):
    """n crops of Debian's sample photo (JPEG, quality 95) in one class."""
    src = Image.open(PHOTO).convert("RGB")
    d = tmp_path / "photos" / "c0"
    d.mkdir(parents=True)
    rng = random.Random(5)
    for k in range(n):
        x, y = rng.randrange(0, src.width - size[0]), rng.randrange(0, src.height - size[1])
        src.crop((x, y, x + size[0], y + size[1])).save(d / f"{k:03d}.png")
    return str(tmp_path / "photos")


def batches(root, **kw):
    base = dict(batch_size=4, image_size=(48, 64), seed=11, shuffle=False, device="cpu",
                threads=2, decoder="stb")
    with gpufeed.Loader(root, **{**base, **kw}) as loader:
        return [(np.array(memoryview(b.data)), list(memoryview(b.indices))) for b in loader]


@pytest.mark.skipif(not os.path.exists(PHOTO), reason="python-matplotlib-data (.ci/install-deps)")
@pytest.mark.parametrize("spec", ["ta_wide", "randaugment num_ops=3 magnitude=12",
                                  "autoaugment fill=9,99,199",
                                  "jitter brightness=0.4 contrast=0.4 saturation=0.4 hue=0.1",
                                  "ta_wide interpolation=bilinear",
                                  "randaugment interpolation=bicubic fill=0,255,0"])
def test_a_loaders_pixels_are_torchvisions_ops_on_its_crop(tmp_path, spec):
    """Each sample: gpufeed's augmented cell == torchvision's _apply_op /
    adjust_* (over PIL) applied, with the parameters gpufeed drew, to the
    same sample's un-augmented crop. Exact."""
    root = photo_set(tmp_path)
    plain, aug = batches(root), batches(root, augment=spec)
    stage = spec.split()[0]
    t = {"ta_wide": T.TrivialAugmentWide(), "randaugment": T.RandAugment(),
         "autoaugment": T.AutoAugment(), "jitter": None}[stage]
    interp = (T.InterpolationMode.BILINEAR if "bilinear" in spec else
              T.InterpolationMode.BICUBIC if "bicubic" in spec else T.InterpolationMode.NEAREST)
    fill = [int(v) for v in spec.split("fill=")[1].split(",")] if "fill" in spec else None
    adjust = {"brightness": F.adjust_brightness, "contrast": F.adjust_contrast,
              "saturation": F.adjust_saturation, "hue": F.adjust_hue}
    worst = 0
    for (p, idx), (a, idx2) in zip(plain, aug):
        assert idx == idx2
        draws = _gpufeed._augment_draws(spec, 64, 48, 3, 11, max(idx) + 1)
        for k, sample in enumerate(idx):
            img = Image.fromarray(p.reshape(len(idx), 48, 64, 3)[k])
            for op, m in draws[sample]:
                img = adjust[op](img, m) if op in adjust else AA._apply_op(
                    img, op, m, interpolation=interp, fill=fill)
            want = np.asarray(img, dtype=np.int16)
            got = a.reshape(len(idx), 48, 64, 3)[k].astype(np.int16)
            worst = max(worst, int(np.abs(want - got).max()))
    assert t is None or worst == 0, f"{spec}: max abs difference {worst}"
    assert worst == 0


def test_erase_on_float_batches_is_the_normalised_value(dataset):
    """dtype float32 + normalisation: the rectangle holds the value given
    (the output's units), the rest is the un-erased batch's."""
    kw = dict(batch_size=6, image_size=32, seed=4, shuffle=False, device="cpu", threads=2,
              dtype="float32", layout="nchw", mean=(120, 110, 100), std=(60, 50, 40))
    spec = "erase p=1 scale=0.1,0.3 value=-1.5,0,2.25"
    a, b = batches(dataset, **kw), batches(dataset, augment=spec, **kw)
    for (x, idx), (y, _) in zip(a, b):
        x = x.view(np.float32).reshape(-1, 3, 32, 32)
        y = y.view(np.float32).reshape(-1, 3, 32, 32)
        rects = _gpufeed._erase_rects(spec, 32, 32, 3, 4, max(idx) + 1)
        for k, sample in enumerate(idx):
            i, j, h, w = rects[sample]
            mask = np.zeros((32, 32), bool)
            mask[i:i + h, j:j + w] = True
            assert (y[k][:, ~mask] == x[k][:, ~mask]).all()
            for c, v in enumerate((-1.5, 0.0, 2.25)):
                assert (y[k][c][mask] == v).all()


# ---- gpufeed.DataLoader: the reference's transforms ----

def reference_train(interp=T.InterpolationMode.BILINEAR, auto="ta_wide", erase=0.1):
    trans = [T.RandomResizedCrop(32, interpolation=interp), T.RandomHorizontalFlip(0.5)]
    if auto == "ta_wide":
        trans.append(T.TrivialAugmentWide(interpolation=interp))
    elif auto == "ra":
        trans.append(T.RandAugment(interpolation=interp, magnitude=9))
    elif auto:
        trans.append(T.AutoAugment(T.AutoAugmentPolicy(auto), interpolation=interp))
    trans += [T.PILToTensor(), T.ConvertImageDtype(torch.float),
              T.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))]
    if erase:
        trans.append(T.RandomErasing(p=erase))
    return T.Compose(trans)


class ClassificationPresetTrain:
    """As torchvision's references/classification/presets.py writes it."""

    def __init__(self, **kw):
        self.transforms = reference_train(**kw)

    def __call__(self, img):
        return self.transforms(img)


class DoesMore(ClassificationPresetTrain):
    def __call__(self, img):
        return self.transforms(img.convert("L").convert("RGB"))


def test_the_references_transforms_translate():
    from gpufeed.dataloader import translate_transform
    kw, uint8 = translate_transform(reference_train())
    assert not uint8 and kw["interpolation"] if "interpolation" in kw else True
    stages = kw["augment"].split("; ")
    assert stages[0] == "ta_wide bins=31 interpolation=bilinear"
    # RandomErasing(value=0) after Normalize: 0 in the output's units
    assert stages[1] == "erase p=0.1 scale=0.02,0.33 ratio=0.3,3.3 value=0.0,0.0,0.0"
    kw, _ = translate_transform(reference_train(auto="imagenet", erase=0))
    assert kw["augment"] == "autoaugment interpolation=bilinear"
    kw, _ = translate_transform(reference_train(auto="ra", erase=0))
    assert kw["augment"] == "randaugment num_ops=2 magnitude=9 bins=31 interpolation=bilinear"


def test_erase_before_normalize_takes_normalizes_value():
    from gpufeed.dataloader import translate_transform
    t = T.Compose([T.RandomResizedCrop(32), T.ToTensor(), T.RandomErasing(p=1, value=0.5),
                   T.Normalize((0.5, 0.25, 0.0), (0.5, 0.5, 2.0))])
    kw, _ = translate_transform(t)
    want = T.Normalize((0.5, 0.25, 0.0), (0.5, 0.5, 2.0))(torch.full((3, 1, 1), 0.5))
    assert kw["augment"].endswith("value=" + ",".join(repr(float(v)) for v in want.flatten()))


def test_a_preset_object_is_its_compose_and_one_that_does_more_is_refused(tmp_path):
    from gpufeed.dataloader import translate_transform
    assert translate_transform(ClassificationPresetTrain())[0] == \
        translate_transform(reference_train())[0]
    root = photo_set(tmp_path, n=4) if os.path.exists(PHOTO) else None
    if root:
        with pytest.raises(gpufeed.Unsupported, match="DoesMore"):
            gpufeed.DataLoader(datasets.ImageFolder(root, DoesMore()), batch_size=2)


def test_collate_fn_gets_the_samples_as_dataloader_gives_them(dataset):
    seen = []

    def collate(batch):
        seen.append(batch)
        return torch.utils.data.default_collate(batch)

    t = T.Compose([T.Resize(36), T.CenterCrop(32), T.ToTensor()])
    ours = gpufeed.DataLoader(datasets.ImageFolder(dataset, t), batch_size=8, collate_fn=collate)
    theirs = torch.utils.data.DataLoader(datasets.ImageFolder(dataset, t), batch_size=8)
    for (x, y), (tx, ty) in zip(ours, theirs):
        batch = seen[-1]
        assert isinstance(batch, list) and len(batch) == len(ty)
        assert all(isinstance(s, tuple) and type(s[1]) is int for s in batch)
        assert [s[1] for s in batch] == ty.tolist() and y.tolist() == ty.tolist()
        assert x.shape == tx.shape and (x - tx).abs().max() <= 3 / 255


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_augmented_batches_are_the_same_whatever_the_threads(dataset, dtype):
    spec = "randaugment num_ops=3; jitter brightness=0.4 hue=0.1; erase p=0.7 value=9"
    got = [batches(dataset, augment=spec, threads=t, dtype=dtype, prefetch_depth=d,
                   image_size=32, shuffle=True)
           for t, d in ((1, 2), (2, 4), (4, 3))]
    flat = [[(x.tobytes(), i) for x, i in g] for g in got]
    assert flat[0] == flat[1] == flat[2] and len(flat[0]) > 1


def test_mixupcutmix_is_a_collate_fn_for_torch_and_native_for_gpufeed(dataset):
    """gpufeed.MixUpCutMix: torch's DataLoader runs it in torch, gpufeed's in
    C; both give soft targets on the batch's labels and its roll, and the
    generator's state after an epoch is the same (num_workers=0)."""
    t = T.Compose([T.RandomResizedCrop(32), T.ToTensor()])
    mix = gpufeed.MixUpCutMix(3, mixup_alpha=0.4, cutmix_alpha=1.0)
    orders = []
    for cls in (torch.utils.data.DataLoader, gpufeed.DataLoader):
        torch.manual_seed(5)
        ds = datasets.ImageFolder(dataset, t)
        loader = cls(ds, batch_size=8, shuffle=True, collate_fn=mix)
        for x, y in loader:
            assert x.shape == (len(y), 3, 32, 32) and y.shape == (len(y), 3)
            assert torch.allclose(y.sum(1), torch.ones(len(y)), atol=1e-6)
            assert (y >= 0).all()
        orders.append(torch.randperm(1000).tolist())  # the generator's state after the epoch
    assert orders[0] == orders[1]
    with pytest.raises(gpufeed.Unsupported, match="uint8"):
        gpufeed.DataLoader(datasets.ImageFolder(dataset, T.Compose(
            [T.RandomResizedCrop(32), T.PILToTensor()])), batch_size=4, collate_fn=mix)


def test_mixupcutmix_natively_mixes_the_batch_with_its_roll(dataset):
    """Each gpufeed soft target row puts lam on its own label and 1 - lam on
    the previous sample's (the batch rolled by one), as the images are."""
    t = T.Compose([T.Resize(36), T.CenterCrop(32), T.ToTensor()])
    ds = datasets.ImageFolder(dataset, t)
    loader = gpufeed.DataLoader(ds, batch_size=6, shuffle=False,
                                collate_fn=gpufeed.MixUpCutMix(3, 0.5, 0.0))  # MixUp alone
    plain = gpufeed.DataLoader(ds, batch_size=6, shuffle=False)
    for (x, y), (px, py) in zip(loader, plain):
        lam = None
        for i in range(len(py)):
            own, prev = int(py[i]), int(py[i - 1])
            if own != prev:
                lam = float(y[i, own])
                assert abs(float(y[i, prev]) - (1 - lam)) < 1e-6
        if lam is not None:
            want = px * lam + px.roll(1, 0) * (1 - lam)
            assert (x - want).abs().max() < 1e-5

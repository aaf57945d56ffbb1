# gpufeed.DataLoader against torch.utils.data.DataLoader on the same
# ImageFolder: lengths, orders, epochs, samplers, tensors, what is refused.
import os
import pickle
import subprocess
import sys

import pytest

from conftest import make_dataset

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
import gpufeed  # noqa: E402
import torch.utils.data as tud  # noqa: E402
import torchvision.datasets as datasets  # noqa: E402
import torchvision.transforms as T  # noqa: E402
from torch_trace import rng_trace  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

NORM = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
EVAL = T.Compose([T.Resize(36), T.CenterCrop(32), T.ToTensor(), NORM])
TRAIN = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToTensor(), NORM])


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """3 classes x 15 JPEGs of 48x40: 45 samples."""
    return make_dataset(tmp_path_factory.mktemp("dl") / "set", classes=3, per_class=15,
                        size="48x40")


def folder(root, transform=EVAL, **kw):
    return datasets.ImageFolder(root, transform, **kw)


def targets(loader, epochs=1):
    return [[t for _, y in loader for t in y.tolist()] for _ in range(epochs)]


@pytest.mark.parametrize("what, kw", [
    ("AugMix", dict(dataset=T.Compose([T.RandomResizedCrop(32), T.AugMix(), T.ToTensor()]))),
    ("CIFAR10", dict(dataset=T.Compose([
        T.RandomResizedCrop(32), T.AutoAugment(T.AutoAugmentPolicy.CIFAR10), T.ToTensor()]))),
    ("value='random'", dict(dataset=T.Compose([
        T.RandomResizedCrop(32), T.ToTensor(), T.RandomErasing(value="random")]))),
    ("RandomHorizontalFlip after", dict(dataset=T.Compose([
        T.RandomResizedCrop(32), T.TrivialAugmentWide(), T.RandomHorizontalFlip(), T.ToTensor()]))),
    ("fill", dict(dataset=T.Compose([
        T.RandomResizedCrop(32), T.TrivialAugmentWide(fill=0.5), T.ToTensor()]))),
    ("worker_init_fn", dict(worker_init_fn=lambda i: None)),
    ("batch_sampler", dict(batch_sampler=[[0, 1]], batch_size=1)),
    ("timeout", dict(timeout=5)),
    ("Resize without a CenterCrop", dict(dataset=T.Compose([T.Resize(32), T.ToTensor()]))),
    ("interpolation", dict(dataset=T.Compose([
        T.RandomResizedCrop(32, interpolation=T.InterpolationMode.LANCZOS), T.ToTensor()]))),
    ("interpolation=InterpolationMode.BOX", dict(dataset=T.Compose([
        T.Resize(36, interpolation=T.InterpolationMode.BOX), T.CenterCrop(32), T.ToTensor()]))),
    ("interpolation=InterpolationMode.HAMMING", dict(dataset=T.Compose([
        T.RandomResizedCrop(32, interpolation=T.InterpolationMode.HAMMING),
        T.ToTensor()]))),
    ("PIL images", dict(dataset=T.Compose([T.RandomResizedCrop(32)]))),
])
def test_what_gpufeed_cannot_do_exactly_is_refused_by_name(root, what, kw):
    ds = folder(root, kw.pop("dataset")) if "dataset" in kw else folder(root)
    kw.setdefault("batch_size", 4)
    with pytest.raises(gpufeed.Unsupported, match=what) as e:
        gpufeed.DataLoader(ds, **kw)
    assert "RandomResizedCrop" in str(e.value)  # it lists what is supported
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("mode, name", [(T.InterpolationMode.BILINEAR, "bilinear"),
                                        (T.InterpolationMode.BICUBIC, "bicubic"),
                                        (T.InterpolationMode.NEAREST, "nearest")])
def test_interpolation_is_taken_to_the_settings(mode, name):
    from gpufeed.dataloader import translate_transform
    for tf in (T.Compose([T.RandomResizedCrop(32, interpolation=mode), T.ToTensor()]),
               T.Compose([T.Resize(36, interpolation=mode), T.CenterCrop(32), T.ToTensor()])):
        assert translate_transform(tf)[0]["interpolation"] == name


def test_a_loader_takes_interpolation(root):
    batches = {}
    for name in ("bilinear", "bicubic", "nearest"):
        with gpufeed.Loader(root, batch_size=4, image_size=32, interpolation=name,
                            device="cpu") as loader:
            b = next(iter(loader))
            assert memoryview(b.data).shape == (4, 32, 32, 3)
            batches[name] = bytes(memoryview(b.data))
    assert len(set(batches.values())) == 3  # each its own resize


@pytest.mark.parametrize("kw", [dict(num_workers=0, persistent_workers=True),
                                dict(num_workers=0, prefetch_factor=4),
                                dict(shuffle=True, sampler=[0, 1])])
def test_what_torch_refuses_is_refused(root, kw):
    with pytest.raises(ValueError) as theirs:
        tud.DataLoader(folder(root), batch_size=2, **kw)
    with pytest.raises(ValueError) as ours:
        gpufeed.DataLoader(folder(root), batch_size=2, **kw)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("std, dtype", [([0.2, 0.0, 0.2], None), (0.0, None),
                                        ([0.2, 1e-8, 0.2], torch.float16)])
def test_a_zero_std_is_refused_as_torchvision_refuses_it(root, std, dtype):
    to_dtype = [T.ConvertImageDtype(dtype)] if dtype else []
    transform = T.Compose([T.Resize(36), T.CenterCrop(32), T.ToTensor(), *to_dtype,
                           T.Normalize([0.5, 0.5, 0.5], std)])
    with pytest.raises(ValueError) as theirs:
        next(iter(tud.DataLoader(folder(root, transform), batch_size=2)))
    with pytest.raises(ValueError) as ours:
        gpufeed.DataLoader(folder(root, transform), batch_size=2)  # at once, not at an image
    assert str(ours.value) == str(theirs.value)
    assert "std evaluated to zero after conversion to torch.float" in str(ours.value)
    assert not isinstance(ours.value, gpufeed.Unsupported)


def test_other_data_sets_and_target_transforms_are_refused(root):
    with pytest.raises(gpufeed.Unsupported, match="TensorDataset"):
        gpufeed.DataLoader(tud.TensorDataset(torch.zeros(4, 3)), batch_size=2)
    with pytest.raises(gpufeed.Unsupported, match="target_transform"):
        gpufeed.DataLoader(folder(root, target_transform=lambda t: t + 1), batch_size=2)


@pytest.mark.parametrize("batch_size, drop_last", [(7, False), (7, True), (16, False), (45, True)])
def test_len_is_torchs(root, batch_size, drop_last):
    ds = folder(root)
    ours = gpufeed.DataLoader(ds, batch_size=batch_size, drop_last=drop_last)
    theirs = tud.DataLoader(ds, batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    sizes = [len(y) for _, y in ours]
    assert sizes == [len(y) for _, y in theirs] and len(sizes) == len(ours)


def test_each_for_is_an_epoch_in_torchs_shuffled_order(root):
    ds = folder(root)
    torch.manual_seed(3)
    want = targets(tud.DataLoader(ds, batch_size=8, shuffle=True), 3)
    torch.manual_seed(3)
    got = targets(gpufeed.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2), 3)
    assert got == want
    assert got[0] != got[1] and sorted(got[0]) == sorted(got[1]) == sorted(ds.targets)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """3 classes of 6 JPEGs, each class its own size (one far wider than the
    crop's ratios: RandomResizedCrop's tries, so its draws, depend on it)."""
    top = tmp_path_factory.mktemp("mixed")
    root = top / "set"
    root.mkdir()
    for i, size in enumerate(["48x40", "160x16", "24x64"]):
        make_dataset(top / f"part{i}", classes=1, per_class=6, size=size)
        os.rename(top / f"part{i}" / "class_00", root / f"class_{i:02d}")
    return str(root)


def torch_reference(ds, seed, **kw):
    """torch's DataLoader's trace (torch_trace.py). Under a sanitizer, with
    workers, it runs in an interpreter without one: a worker fork()ed from a
    process under GCC 12's ASan (no fork handler) can deadlock on its
    allocator's mutex, as in CI and four times here (gdb: the worker in
    malloc, waiting on a lock no thread of it holds)."""
    if os.environ.get("GPUFEED_PY_SANITIZED") != "1" or not kw.get("num_workers"):
        torch.manual_seed(seed)
        return rng_trace(tud.DataLoader(ds, **kw))
    plain = {k: v for k, v in os.environ.items()
             if k not in ("LD_PRELOAD", "PYTHONMALLOC", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    out = subprocess.run([sys.executable, os.path.join(HERE, "torch_trace.py")],
                         input=pickle.dumps((ds, seed, kw)), env=plain, capture_output=True,
                         check=True, timeout=300)
    return pickle.loads(out.stdout)


@pytest.mark.parametrize("kw", [dict(num_workers=0), dict(num_workers=2),
                                dict(num_workers=2, persistent_workers=True)])
@pytest.mark.parametrize("transform", [TRAIN, T.Compose([T.RandomHorizontalFlip(), T.RandomResizedCrop(
    24, scale=(0.5, 1.0)), T.PILToTensor()])], ids=["crop-flip", "flip-crop"])
def test_torchs_generator_is_left_as_torchs_dataloader_leaves_it(mixed, kw, transform):
    ds = folder(mixed, transform)
    want = torch_reference(ds, 7, batch_size=4, shuffle=True, **kw)
    torch.manual_seed(7)
    got = rng_trace(gpufeed.DataLoader(ds, batch_size=4, shuffle=True, **kw))
    assert [ys for ys, _, _ in got] == [ys for ys, _, _ in want]
    assert want[0][0] != want[1][0] != want[2][0]
    for (_, states, end), (_, want_states, want_end) in zip(got, want):
        assert len(states) == len(want_states) == 5
        assert all(torch.equal(a, b) for a, b in zip(states, want_states))
        assert torch.equal(end, want_end)


def test_a_dropped_loader_stops_its_threads_without_the_collector(root):
    """Its iterator holds it, not the other way round: no cycle keeps the
    decode threads running (a fork beside them, torch's workers', is unsafe)."""
    def threads():
        return len(os.listdir("/proc/self/task"))
    import gc
    gc.disable()
    try:
        before = threads()
        loader = gpufeed.DataLoader(folder(root), batch_size=8, num_workers=2)
        it = iter(loader)
        next(it)
        assert threads() > before
        del it, loader
        assert threads() == before
    finally:
        gc.enable()


def test_a_break_then_a_new_for_starts_the_next_epoch(root):
    ds = folder(root)

    def pattern(loader):
        first = []
        for i, (_, y) in enumerate(loader):
            first += y.tolist()
            if i == 1:
                break
        return first, targets(loader)[0]
    torch.manual_seed(5)
    want = pattern(tud.DataLoader(ds, batch_size=8, shuffle=True))
    torch.manual_seed(5)
    loader = gpufeed.DataLoader(ds, batch_size=8, shuffle=True)
    assert pattern(loader) == want
    it = iter(loader)
    iter(loader)
    with pytest.raises(RuntimeError, match="one iterator at a time"):
        next(it)


@pytest.mark.parametrize("cwd, relative", [("..", "set"), ("../..", None), ("../../b", None)])
def test_a_relative_root_names_the_files_torchvision_opens(tmp_path, monkeypatch, cwd, relative):
    """ImageFolder('data/train'), as scripts pass it, from the set's parent
    directory and from elsewhere (a relative path up and across)."""
    root = make_dataset(tmp_path / "a" / "set", classes=2, per_class=3, size="40x40")
    (tmp_path / "b").mkdir()
    here = os.path.normpath(os.path.join(root, cwd))
    monkeypatch.chdir(here)
    rel = relative or os.path.relpath(root, here)
    assert not os.path.isabs(rel) and os.path.isdir(rel)
    ds = folder(rel)
    got = [(x, y) for x, y in gpufeed.DataLoader(ds, batch_size=4)]
    want = [(x, y) for x, y in tud.DataLoader(ds, batch_size=4)]
    assert [y.tolist() for _, y in got] == [y.tolist() for _, y in want] == [[0, 0, 0, 1], [1, 1]]
    assert all((x - tx).abs().mean() < 0.1 for (x, _), (tx, _) in zip(got, want))


def test_distributed_sampler_share_and_set_epoch(root):
    ds = folder(root)
    sampler = tud.distributed.DistributedSampler(ds, num_replicas=4, rank=3, seed=11)
    loader = gpufeed.DataLoader(ds, batch_size=5, sampler=sampler)
    for epoch in (0, 1, 2):
        sampler.set_epoch(epoch)
        assert targets(loader)[0] == [ds.targets[i] for i in sampler]
    assert len(loader) == 3  # 12 samples a rank (45 padded to 48)


def test_subset_keeps_torchvisions_indices(root):
    ds = tud.Subset(folder(root), [44, 0, 17, 30, 2, 3, 29])
    got = targets(gpufeed.DataLoader(ds, batch_size=3))[0]
    assert got == [ds.dataset.targets[i] for i in ds.indices]


def test_subset_indices_are_pythons_negative_ones_too(root):
    ds = tud.Subset(folder(root), [-1, 0, -45, 17, -16])
    want = targets(tud.DataLoader(ds, batch_size=2))[0]
    assert targets(gpufeed.DataLoader(ds, batch_size=2))[0] == want
    assert want == [ds.dataset.targets[i] for i in (44, 0, 0, 17, 29)]


@pytest.mark.parametrize("index", [45, -46])
def test_a_subset_index_out_of_range_is_an_index_error(root, index):
    ds = tud.Subset(folder(root), [0, index, 1])
    with pytest.raises(IndexError, match="list index out of range"):
        targets(tud.DataLoader(ds, batch_size=2))  # torch: when it reaches it
    with pytest.raises(IndexError, match=rf"indices\[1\] is {index}.* 45 samples"):
        gpufeed.DataLoader(ds, batch_size=2)  # gpufeed: before any


def test_tiff_files_are_refused_at_construction_by_name(tmp_path):
    from PIL import Image
    root = make_dataset(tmp_path / "set", classes=2, per_class=3, size="40x40")
    for name in ("b.tif", "a.TIFF"):
        Image.new("RGB", (40, 40), (200, 10, 10)).save(os.path.join(root, "class_01", name),
                                                       format="TIFF")
    ds = folder(root)
    assert len(ds) == 8 and len(targets(tud.DataLoader(ds, batch_size=4))[0]) == 8
    first = os.path.join(root, "class_01", "a.TIFF")
    with pytest.raises(gpufeed.Unsupported) as e:
        gpufeed.DataLoader(ds, batch_size=4)  # not at the first batch
    assert f"{first} is a TIFF file" in str(e.value) and "2 of the 8 samples" in str(e.value)
    # A Subset without them has nothing to refuse; one with one names it.
    assert targets(gpufeed.DataLoader(tud.Subset(ds, [0, 1, 2]), batch_size=2))[0] == [0, 0, 0]
    with pytest.raises(gpufeed.Unsupported, match="1 of the 2 samples"):
        gpufeed.DataLoader(tud.Subset(ds, [0, -5]), batch_size=2)  # -5: a.TIFF


def test_tensors_are_what_torchvision_gives(root):
    ds = folder(root)
    images = []
    for (x, y), (tx, ty) in zip(gpufeed.DataLoader(ds, batch_size=9),
                                tud.DataLoader(ds, batch_size=9)):
        assert x.dtype == tx.dtype == torch.float32 and x.shape == tx.shape == (9, 3, 32, 32)
        assert y.dtype == ty.dtype == torch.int64 and torch.equal(y, ty)
        images.append((x - tx).abs())
    diff = torch.cat(images)
    # Normalised units (1/255/0.225 = 0.017 a level): resampling differs a little.
    assert diff.mean().item() < 0.1 and diff.max().item() < 1.0, (diff.mean(), diff.max())


def test_pil_to_tensor_gives_uint8_nchw(root):
    ds = folder(root, T.Compose([T.Resize(36), T.CenterCrop(32), T.PILToTensor()]))
    x, y = next(iter(gpufeed.DataLoader(ds, batch_size=4)))
    tx, _ = next(iter(tud.DataLoader(ds, batch_size=4)))
    assert x.dtype == torch.uint8 and x.shape == tx.shape == (4, 3, 32, 32)
    assert (x.float() - tx.float()).abs().mean() < 6


def test_hidden_files_and_odd_classes_as_imagefolder_sees_them(tmp_path):
    root = make_dataset(tmp_path / "set", classes=3, per_class=4, size="40x40")
    first = sorted(os.listdir(os.path.join(root, "class_01")))[0]
    os.link(os.path.join(root, "class_01", first), os.path.join(root, "class_01", ".hidden.jpg"))
    os.symlink(os.path.join(root, "class_02"), os.path.join(root, "class_03_link"))
    ds = folder(root)
    got = targets(gpufeed.DataLoader(ds, batch_size=5))[0]
    assert got == ds.targets and len(got) == 17 and ds.classes[-1] == "class_03_link"


def test_batches_kept_uncloned_stay_as_they_were(root):
    """What a DataLoader allows: a list of 8 uncloned batches, one batch kept
    over many steps, 4-step gradient accumulation, at the smallest depth."""
    ds = folder(root)
    loader = gpufeed.DataLoader(ds, batch_size=2, num_workers=1, prefetch_factor=1)
    kept, clones, first = [], [], None
    for step in range(3):  # epochs: the kept batch lives across them
        group = []
        for i, (x, y) in enumerate(loader):
            if first is None:
                first, first_copy = x, x.clone()
            if step == 0 and len(kept) < 8:
                kept.append(x)
                clones.append(x.clone())
            group.append(x)
            if len(group) == 4:  # accumulate, then let go
                group = []
        assert torch.equal(first, first_copy)
    assert all(torch.equal(k, c) for k, c in zip(kept, clones)) and len(kept) == 8


def test_eval_without_no_grad_keeps_going(root):
    ds = folder(root)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 30 * 30, 3))
    outputs = []
    for x, _ in gpufeed.DataLoader(ds, batch_size=4, num_workers=1, prefetch_factor=1):
        outputs.append(model(x))  # each output's graph keeps its input
    assert len(outputs) == 12


def test_it_is_a_torch_dataloader_with_torchs_attributes(root):
    ds = folder(root)
    sampler = tud.SequentialSampler(ds)
    loader = gpufeed.DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2,
                                prefetch_factor=3, drop_last=True)
    assert isinstance(loader, tud.DataLoader)
    assert type(loader).__name__ == "DataLoader" and type(loader).__module__ == "gpufeed"
    assert (loader.dataset, loader.batch_size, loader.sampler, loader.num_workers,
            loader.prefetch_factor, loader.drop_last) == (ds, 4, sampler, 2, 3, True)
    assert isinstance(loader.batch_sampler, tud.BatchSampler)
    assert loader.collate_fn is tud.default_collate and len(loader) == 45 // 4
    # torch fixes these once made, and says so in its own words
    with pytest.raises(ValueError) as theirs:
        tud.DataLoader(ds, batch_size=4).batch_size = 8
    with pytest.raises(ValueError) as ours:
        loader.batch_size = 8
    assert str(ours.value) == str(theirs.value)
    # and refuses a multiprocessing context without workers, as torch does
    with pytest.raises(ValueError, match="num_workers"):
        gpufeed.DataLoader(ds, batch_size=4, multiprocessing_context="spawn")


def test_recreated_by_its_class_with_a_new_sampler_as_lightning_does(root):
    """Lightning re-creates a loader by its class, from its __init__'s
    parameters read back off the instance, with a DistributedSampler in
    place of its sampler: a working gpufeed loader, that sampler's share."""
    import inspect
    ds = folder(root)
    loader = gpufeed.DataLoader(ds, batch_size=5, shuffle=True, num_workers=2)
    params = inspect.signature(type(loader).__init__).parameters
    kw = {p: getattr(loader, p) for p in params
          if p not in ("self", "dataset", "sampler", "batch_sampler", "shuffle")
          and hasattr(loader, p)}
    sampler = tud.distributed.DistributedSampler(ds, num_replicas=2, rank=1, seed=5)
    again = type(loader)(loader.dataset, sampler=sampler, **kw)
    assert isinstance(again, type(loader)) and again.sampler is sampler
    assert again.batch_size == 5 and again.num_workers == 2
    assert targets(again)[0] == [ds.targets[i] for i in sampler]
    assert len(again) == 5  # 23 samples a rank (45 padded to 46), batches of 5

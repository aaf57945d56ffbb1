# _Loader(data, settings, samples=(paths, labels)) and _Loader.set_order:
# what gpufeed.DataLoader hands the library (an ImageFolder's samples list
# and each epoch's indices from the user's torch sampler).
import array
import os
import shutil

import pytest

import gpufeed
from gpufeed import _gpufeed

SMALL = dict(batch_size=8, image_size=32, threads=1, device="cpu", shuffle=False,
             transform="eval")


def settings(**kw):
    return gpufeed._settings({**SMALL, **kw})


def files_of(root):
    """The set's files, sorted, relative to root; label = class folder."""
    out = []
    for d, _, fs in sorted(os.walk(root)):
        for f in sorted(fs):
            rel = os.path.relpath(os.path.join(d, f), root)
            out.append((rel, int(rel.split(os.sep)[0][len("class_"):])))
    return out


def drain(c):
    """(indices, labels, pixels bytes, counts) to the end of the epoch."""
    idx, labels, px, counts = [], [], b"", []
    while (b := c.next()) is not None:
        idx += memoryview(b.indices).tolist()
        labels += memoryview(b.labels).tolist()
        px += bytes(memoryview(b.data))
        counts.append(b.count)
        b.release()
    return idx, labels, px, counts


def test_samples_give_their_labels_and_paths(dataset):
    fs = files_of(dataset)
    paths = [os.path.join(dataset, p) for p, _ in fs]
    labels = [(i * 7) % 5 for i in range(len(fs))]  # ours, not the folders'
    c = _gpufeed._Loader(None, settings(), samples=(paths, labels))
    idx, got, _, counts = drain(c)
    assert idx == list(range(len(fs))) and got == labels
    assert counts == [8] * 7 + [4]
    st = c.stats()
    assert st["dataset_samples"] == 60 and st["classes"] == 5
    assert c.sample_path(3) == paths[3] and c.sample_label(3) == labels[3]
    c.close()
    # Relative to data; a tuple of bytes paths works as well.
    rel = tuple(os.fsencode(p) for p, _ in fs)
    c = _gpufeed._Loader(dataset, settings(), (rel, [k for _, k in fs]))
    idx, got, _, _ = drain(c)
    assert got == [k for _, k in fs]
    assert c.sample_path(0) == fs[0][0]
    c.close()


def test_a_non_utf8_name_round_trips(dataset, tmp_path):
    src = os.path.join(dataset, files_of(dataset)[0][0])
    raw = os.fsencode(str(tmp_path)) + b"/caf\xe9 \xff.jpg"  # Latin-1, not UTF-8
    shutil.copyfile(src, raw)
    name = os.fsdecode(raw)  # 'caf\udce9 \udcff.jpg', as os.listdir gives it
    for given in (name, raw):
        c = _gpufeed._Loader(None, settings(batch_size=1), samples=([given], [0]))
        assert os.fsencode(c.sample_path(0)) == raw
        assert c.read_sample(0) == open(src, "rb").read()
        idx, labels, _, _ = drain(c)
        assert idx == [0] and labels == [0]
        c.close()


def test_bad_samples_arguments_name_the_argument(dataset):
    s = settings()
    with pytest.raises(ValueError, match=r"paths\[1\] holds a NUL byte"):
        _gpufeed._Loader(dataset, s, samples=(["a.jpg", "b\0.jpg"], [0, 1]))
    with pytest.raises(TypeError, match=r"samples is str, not a pair"):
        _gpufeed._Loader(dataset, s, samples="a.jpg")
    with pytest.raises(TypeError, match=r"paths\[0\] is int"):
        _gpufeed._Loader(dataset, s, samples=([3], [0]))
    with pytest.raises(TypeError, match=r"labels\[1\] is str"):
        _gpufeed._Loader(dataset, s, samples=(["a", "b"], [0, "1"]))
    with pytest.raises(TypeError, match=r"samples: paths is str"):
        _gpufeed._Loader(dataset, s, samples=("ab", [0, 1]))
    with pytest.raises(ValueError, match=r"2 paths but 1 labels"):
        _gpufeed._Loader(dataset, s, samples=(["a", "b"], [0]))
    with pytest.raises(ValueError, match=r"labels\[0\] is out of range"):
        _gpufeed._Loader(dataset, s, samples=(["a"], [2**40]))
    with pytest.raises(gpufeed.InvalidArgument, match=r"label 1 is -1"):
        _gpufeed._Loader(dataset, s, samples=(["a", "b"], [0, -1]))
    with pytest.raises(gpufeed.InvalidArgument, match=r"n = 0"):
        _gpufeed._Loader(dataset, s, samples=([], []))
    with pytest.raises(TypeError, match=r"data is NoneType"):
        _gpufeed._Loader(None, s)


def test_a_missing_file_is_a_sample_error_naming_it(dataset):
    fs = files_of(dataset)
    paths = [p for p, _ in fs]
    paths[2] = "class_00/gone.jpg"
    c = _gpufeed._Loader(dataset, settings(), samples=(paths, [k for _, k in fs]))
    idx, _, _, _ = drain(c)
    assert 2 not in idx and len(idx) == 59
    st = c.stats()
    assert st["errors"] == 1 and st["recent"][0]["path"] == "class_00/gone.jpg"
    assert st["recent"][0]["error"] == "GF_ENOENT"
    c.close()


def orders(n):
    """The same order in each form set_order takes."""
    base = [(i * 13 + 5) % n for i in range(n)] + [0, 0]  # repeats too
    out = [base, tuple(base), array.array("q", base)]
    try:
        import numpy as np
        out += [np.array(base, dtype=np.int64), np.array(base, dtype=np.int32),
                np.array(base, dtype=np.int64).repeat(2)[::2]]  # not contiguous
    except ImportError:
        pass
    return base, out


def test_set_order_delivers_exactly_the_order(dataset):
    c = _gpufeed._Loader(dataset, settings(epochs=0))
    base, forms = orders(60)
    for e, order in enumerate(forms):
        c.set_order(42, 10 + e, order)
        st = c.stats()
        assert st["epoch_samples"] == 62 and (st["epoch"], st["position"]) == (10 + e, 0)
        idx, labels, _, counts = drain(c)
        assert idx == base, type(order)
        assert labels == [c.sample_label(i) for i in base]
        assert counts == [8] * 7 + [6]
        assert c.next() is None  # GF_EOF until the next order
        state = c.get_state()
        assert (state["seed"], state["epoch"], state["position"]) == (42, 11 + e, 0)
        with pytest.raises(gpufeed.InvalidArgument, match="the caller owns the epoch's order"):
            c.set_state(state)
    c.close()


def test_set_order_from_torch_randperm(dataset):
    torch = pytest.importorskip("torch")
    pytest.importorskip("numpy")
    g = torch.Generator()
    g.manual_seed(3)
    perm = torch.randperm(60, generator=g)
    c = _gpufeed._Loader(dataset, settings(drop_last=True))
    c.set_order(3, 0, perm.numpy())
    idx, _, _, counts = drain(c)
    assert idx == perm.tolist()[:56] and counts == [8] * 7  # the short batch dropped
    c.close()


def test_same_seed_epoch_and_order_same_bytes(dataset):
    base, _ = orders(60)
    runs = []
    for threads, depth, seed in ((1, 2, 9), (2, 4, 9), (1, 2, 10)):
        c = _gpufeed._Loader(dataset, settings(transform="train", threads=threads,
                                               prefetch_depth=depth))
        c.set_order(seed, 1, base)
        runs.append(drain(c)[2])
        c.close()
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_bad_orders_name_the_position(dataset):
    c = _gpufeed._Loader(dataset, settings())
    with pytest.raises(gpufeed.InvalidArgument, match=r"order\[2\] = 60 is not a sample index"):
        c.set_order(0, 0, [0, 1, 60])
    with pytest.raises(gpufeed.InvalidArgument, match=r"order\[1\] = -4"):
        c.set_order(0, 0, array.array("q", [0, -4]))
    with pytest.raises(TypeError, match=r"order\[1\] is str"):
        c.set_order(0, 0, [0, "1"])
    with pytest.raises(TypeError, match=r"set_order: order is bytes"):
        c.set_order(0, 0, b"\x00\x01")
    with pytest.raises(TypeError, match=r"set_order: seed is str"):
        c.set_order("0", 0, [0])
    with pytest.raises(ValueError, match=r"set_order: epoch is out of range"):
        c.set_order(0, -1, [0])
    with pytest.raises(ValueError, match=r"order\[0\] is out of the int64 range"):
        c.set_order(0, 0, [2**64])
    # Refused: the loader's own epoch goes on.
    idx, _, _, _ = drain(c)
    assert idx == list(range(60))
    c.close()
    with pytest.raises(ValueError, match="closed"):
        c.set_order(0, 0, [0])

"""gpufeed.prepare() and prepare_plan(): the gpufeed program run from Python;
the set it writes reads back through gpufeed.Loader with the source's labels
and classes; its failures raise PrepareError with the program's message."""
import os

import pytest

import gpufeed
from conftest import cli, make_dataset

EVAL = dict(batch_size=4, image_size=16, threads=1, device="cpu", transform="eval",
            shuffle=False, epochs=1)


@pytest.fixture(autouse=True)
def program(monkeypatch):
    monkeypatch.setenv("GPUFEED_CLI", cli())  # skips when the program is not built


def test_prepare_reads_back_with_the_sources_labels_and_classes(tmp_path):
    src = make_dataset(tmp_path / "src", classes=3, per_class=4, size="64x48")
    out = tmp_path / "out"
    summary = gpufeed.prepare(src, out, max_side=32, shard_samples=5, threads=2)
    assert summary["samples"] == 12 and summary["bad"] == 0 and summary["shards"] == 3
    assert {"classes.txt", "manifest.json", "train-000002.tar"} <= set(os.listdir(out))
    with gpufeed.Loader(src, **EVAL) as a, \
            gpufeed.Loader(str(out / "train-{000000..000002}.tar"), **EVAL) as b:
        assert len(a) == len(b)
        want = [a.sample_label(i) for i in range(12)]
        assert [b.sample_label(i) for i in range(12)] == want  # index order kept
        assert (out / "classes.txt").read_text().split("\n")[:-1] == a.classes
        for i in range(12):  # each key names its source file
            assert b.sample_path(i).rsplit(":", 1)[1].startswith(
                a.sample_path(i).rsplit(".", 1)[0].replace("/", "_"))
        with gpufeed.Loader(out, **EVAL) as c:  # the folder names the set
            assert [c.sample_path(i) for i in range(12)] == [b.sample_path(i) for i in range(12)]
            assert [c.sample_label(i) for i in range(12)] == want
            for x, y in zip(b, c):
                assert memoryview(x.data).tobytes() == memoryview(y.data).tobytes()


def test_prepare_keyword_names_are_the_programs_flags(tmp_path):
    src = make_dataset(tmp_path / "src", classes=1, per_class=2, size="40x30")
    s = gpufeed.prepare(src, tmp_path / "out", name="val", format="raw", channels=1,
                        shard_bytes="1M", on_error="fail")
    assert s["name"] == "val" and s["raw"] == 2 and s["jpeg"] == 0
    assert os.path.exists(tmp_path / "out" / "val-000000.tar")
    with pytest.raises(TypeError, match="max_side"):
        gpufeed.prepare(src, tmp_path / "x", max_side="64")


def test_a_failed_prepare_raises_with_the_programs_message(tmp_path, damaged):
    with pytest.raises(gpufeed.PrepareError, match="quality") as e:
        gpufeed.prepare(tmp_path / "nowhere", tmp_path / "o", quality=0)
    assert e.value.returncode == 2 and isinstance(e.value, gpufeed.Error)
    with pytest.raises(gpufeed.PrepareError, match="nowhere") as e:
        gpufeed.prepare(tmp_path / "nowhere", tmp_path / "o")
    root, _ = damaged
    with pytest.raises(gpufeed.PrepareError, match="on-error fail") as e:
        gpufeed.prepare(root, tmp_path / "f", on_error="fail", max_side=16)
    assert e.value.returncode == 1 and e.value.summary["bad"] == 1


def test_prepare_plan_returns_every_setting(tmp_path):
    src = make_dataset(tmp_path / "src", classes=1, per_class=3, size="64x48")
    p = gpufeed.prepare_plan(src, plan_samples=3, image_size=(16, 24), threads=1)
    assert [r["name"] for r in p["settings"]][:3] == ["original", "512 jpeg q90", "512 raw"]
    assert len(p["settings"]) == 9 and p["settings"][0]["exact"]
    assert p["image_size"] == [16, 24] and p["sampled"] == 3


def test_no_program_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUFEED_CLI", str(tmp_path / "missing"))
    with pytest.raises(gpufeed.PrepareError, match="GPUFEED_CLI"):
        gpufeed.prepare(tmp_path, tmp_path / "o")


# ---- --fields: every member carried through ----

FIELDS = ("jpg", "cls", "txt", "latent.npy", "seg.png:mask", "boxes.npy:boxes")
SIZES = [(160, 120), (97, 131), (40, 30), (200, 50), (33, 77), (64, 64)]


def _fielded_set(root):
    """Two shards of keys with jpg, cls, txt, latent.npy, seg.png (a palette
    mask of the image's size) and boxes.npy (float32 and float64, one row of
    no area), each image of another size."""
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")
    import io
    import tarfile
    rng = np.random.default_rng(7)
    root.mkdir()

    def add(t, name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))

    def encoded(obj, fmt=None):
        b = io.BytesIO()
        np.save(b, obj) if fmt is None else obj.save(b, fmt)
        return b.getvalue()

    for s in range(2):
        with tarfile.open(root / f"train-{s:06d}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
            for i, (W, H) in enumerate(SIZES):
                k = f"s{s}_{i}"
                img = Image.fromarray(rng.integers(0, 255, (H, W, 3), dtype=np.uint8))
                mask = Image.fromarray(rng.integers(0, 6, (H, W), dtype=np.uint8), "P")
                mask.putpalette([(v * 37) % 256 for v in range(768)])
                boxes = np.array([[1, 2, W / 2, H / 2, 1], [W / 3, H / 3, W - 1, H - 1, 2],
                                  [5, 5, 5, 9, 0]], np.float64 if i % 2 else np.float32)
                add(t, k + ".jpg", encoded(img, "JPEG"))
                add(t, k + ".cls", str(i % 3).encode())
                add(t, k + ".txt", f"a caption of {k} \u2014 caf\u00e9".encode())
                add(t, k + ".latent.npy", encoded(rng.standard_normal((4, 6, 6)).astype("f4")))
                add(t, k + ".seg.png", encoded(mask, "PNG"))
                add(t, k + ".boxes.npy", encoded(boxes))
    return str(root / "train-{000000..000001}.tar")


def _members(pattern_dir):
    import glob
    import tarfile
    out = {}
    for shard in sorted(glob.glob(str(pattern_dir) + "/train-*.tar")):
        with tarfile.open(shard) as t:
            for m in t.getmembers():
                key, ext = m.name.split(".", 1)
                out.setdefault(key, {})[ext] = t.extractfile(m).read()
    return out


def test_prepare_fields_carries_every_member(tmp_path):
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")
    import io
    import subprocess
    src = _fielded_set(tmp_path / "src")
    out = tmp_path / "out"
    s = gpufeed.prepare(src, out, max_side=48, fields=FIELDS, threads=2, shard_samples=5)
    assert s["samples"] == 12 and s["bad"] == 0
    want, got = _members(tmp_path / "src"), _members(out)
    assert sorted(got) == sorted(want)  # a shard's keys are kept
    for key, m in got.items():
        srcm = want[key]
        assert set(m) == {"jpg", "cls", "key", "txt", "latent.npy", "seg.png", "boxes.npy"}
        assert m["txt"] == srcm["txt"] and m["latent.npy"] == srcm["latent.npy"]
        assert m["cls"] == srcm["cls"]
        size = Image.open(io.BytesIO(m["jpg"])).size
        old = Image.open(io.BytesIO(srcm["jpg"])).size
        assert max(size) == min(48, max(old))
        a, b = Image.open(io.BytesIO(m["seg.png"])), Image.open(io.BytesIO(srcm["seg.png"]))
        assert a.mode == "P" and a.getpalette() == b.getpalette()  # still shows as it did
        ids = np.asarray(a)
        assert ids.shape == size[::-1]
        assert set(np.unique(ids)) <= set(np.unique(np.asarray(b)))
        assert np.array_equal(ids, np.asarray(b.resize(size, Image.NEAREST)))
        bx, sb = np.load(io.BytesIO(m["boxes.npy"])), np.load(io.BytesIO(srcm["boxes.npy"]))
        assert bx.dtype == sb.dtype and bx.shape == (2, 5)  # the row of no area dropped
        scale = np.array([size[0] / old[0], size[1] / old[1]] * 2 + [1])
        assert np.allclose(bx, sb[:2] * scale, atol=1e-3, rtol=0)
        if bx.dtype == np.float64:  # scaled in float64, not float32's precision
            assert np.allclose(bx, sb[:2] * scale, atol=1e-9, rtol=0)
    # the prepared set loads with the same fields, its text and arrays the source's
    kw = dict(batch_size=4, image_size=16, threads=1, device="cpu", transform="eval",
              shuffle=False, epochs=1, fields=FIELDS)
    with gpufeed.Loader(src, **kw) as a, gpufeed.Loader(str(out), **kw) as b:
        assert len(a) == len(b) == 3  # batches
        for x, y in zip(a, b):
            assert y[2] == x[2]  # captions
            assert np.array_equal(np.asarray(y[3]), np.asarray(x[3]))  # latents
            assert set(np.unique(np.asarray(y[4]))) <= set(range(6))  # masks: the ids
            assert [np.asarray(v).shape for v in y[5]] == [(2, 5)] * len(y[5])
    v = subprocess.run([cli(), "verify", "--data", str(out)], capture_output=True, text=True)
    assert v.returncode == 0, v.stdout + v.stderr


def test_prepare_fields_names_a_damaged_member(tmp_path):
    import io
    import tarfile
    _fielded_set(tmp_path / "src")
    bad = tmp_path / "bad"
    bad.mkdir()
    with tarfile.open(tmp_path / "src" / "train-000000.tar") as t, \
            tarfile.open(bad / "train-000000.tar", "w", format=tarfile.USTAR_FORMAT) as d:
        for m in t.getmembers():
            data = t.extractfile(m).read()
            if m.name == "s0_2.seg.png":
                data = data[:len(data) // 2]  # cut short
            m.size = len(data)
            d.addfile(m, io.BytesIO(data))
    s = gpufeed.prepare(str(bad / "train-000000.tar"), tmp_path / "o", max_side=48,
                        fields=FIELDS)
    assert s["samples"] == 5 and s["bad"] == 1
    assert "field 'seg.png'" in s["bad_samples"][0]["reason"]
    with pytest.raises(gpufeed.PrepareError, match="field 'seg.png'") as e:
        gpufeed.prepare(str(bad / "train-000000.tar"), tmp_path / "f", fields=FIELDS,
                        on_error="fail")
    assert e.value.returncode == 1

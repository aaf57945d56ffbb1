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

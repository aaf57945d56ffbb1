# The PyTorch training example (python/train_torch.py) on a tiny set, both
# loaders, in seconds: it trains and evaluates through each, and the JSON it
# prints carries the figures the benchmark reports.
import importlib.util
import os

import pytest

from conftest import cli, make_dataset

pytest.importorskip("torch")
pytest.importorskip("torchvision")

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location(
        "train_torch", os.path.join(HERE, "..", "train_torch.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    return (make_dataset(root / "train", classes=3, per_class=16, size="64x48"),
            make_dataset(root / "val", classes=3, per_class=4, size="64x48"))


def tiny(sets, *more):
    return ["--train", sets[0], "--val", sets[1], "--cli", cli(), "--device", "cpu",
            "--image-size", "32", "--batch-size", "8", "--width", "4", "--threads", "1",
            *more]


def test_trains_with_both_loaders(example, sets):
    r = example.main(tiny(sets, "--epochs", "2", "--json"))
    assert list(r["loaders"]) == ["torch", "gpufeed"]
    for name, m in r["loaders"].items():
        rows = m["runs"][0]
        assert len(m["runs"]) == 1 and [row["epoch"] for row in rows] == [0, 1], name
        for row in rows:
            assert row["images"] == 48, name  # drop_last: 6 full batches of 8
            assert 0 <= row["wait_s"] <= row["seconds"], name
            assert 0 <= row["val_accuracy"] <= 1, name
        assert len(m["val_accuracy"]) == 2 and m["images_per_s"] > 0, name


def test_input_only_has_no_model(example, sets):
    r = example.main(tiny(sets, "--input-only", "--epochs", "3", "--loaders", "gpufeed",
                          "--json"))
    rows = r["loaders"]["gpufeed"]["runs"][0]
    assert [row["epoch"] for row in rows] == [0, 1, 2]
    assert all("val_accuracy" not in row and row["images"] == 48 for row in rows)


def test_unknown_loader_is_refused(example, sets):
    with pytest.raises(SystemExit):
        example.main(tiny(sets, "--loaders", "tensorflow"))

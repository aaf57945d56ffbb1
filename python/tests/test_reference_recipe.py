"""torchvision's classification reference, today's recipe, switched to
gpufeed: reference_train.py (written as the reference is: preset objects,
RandomSampler/SequentialSampler, default_collate, the MixUp/CutMix collate
lambda) run as written on torch's DataLoader, with only its DataLoader(
lines switched to gpufeed.DataLoader(, and (where `python -m gpufeed run`
exists) unmodified under it. Two epochs each: every epoch trains and
validates, each batch's targets are its samples' labels, and the samplers'
orders, so the targets, are torch's own."""
import json
import os
import subprocess
import sys

import pytest

from conftest import make_dataset

pytest.importorskip("torch")
pytest.importorskip("torchvision")

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "reference_train.py")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ref")
    make_dataset(root / "train", classes=3, per_class=12, size="60x44")
    make_dataset(root / "val", classes=3, per_class=4, size="50x40")
    return str(root)


def switched(tmp_path):
    """The script with its DataLoader( lines alone switched to gpufeed's."""
    text = open(SCRIPT).read()
    n = text.count("torch.utils.data.DataLoader(")
    assert n == 2
    text = text.replace("torch.utils.data.DataLoader(", "gpufeed.DataLoader(")
    text = text.replace("import torch\n", "import gpufeed\nimport torch\n", 1)
    path = tmp_path / "reference_train_gpufeed.py"
    path.write_text(text)
    return str(path)


def run(argv, out, tmp_path):
    import gpufeed
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [HERE, os.path.dirname(os.path.dirname(os.path.abspath(gpufeed.__file__)))]))
    r = subprocess.run([sys.executable] + argv + ["--out", str(out)], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(out) as f:
        return json.load(f), r


RECIPES = {
    "classic": [],
    "new": ["--auto-augment", "ta_wide", "--random-erase", "0.1", "--mixup-alpha", "0.2",
            "--cutmix-alpha", "1.0"],
    "new_bicubic": ["--auto-augment", "ta_wide", "--random-erase", "0.1", "--mixup-alpha",
                    "0.2", "--cutmix-alpha", "1.0", "--interpolation", "bicubic"],
}


def check_epochs(report, epochs, mixed):
    assert len(report["epochs"]) == epochs
    for e in report["epochs"]:
        assert e["targets"] == e["want"]  # each batch's targets are its samples' labels
        assert e["val_total"] == 12 and e["loss"] == e["loss"]  # validated; a finite loss
        assert (e["soft_batches"] > 0) == mixed


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_the_reference_switches_with_its_dataloader_lines_alone(data, tmp_path, recipe):
    args = ["--data-path", data, "--epochs", "2", "-b", "8"] + RECIPES[recipe]
    mixed = "--mixup-alpha" in args
    theirs, _ = run([SCRIPT] + args, tmp_path / "torch.json", tmp_path)
    ours, r = run([switched(tmp_path)] + args, tmp_path / "gpufeed.json", tmp_path)
    assert theirs["loader"].startswith("torch.") and ours["loader"] == "gpufeed"
    check_epochs(theirs, 2, mixed)
    check_epochs(ours, 2, mixed)
    for a, b in zip(theirs["epochs"], ours["epochs"]):
        assert a["order"] == b["order"] and a["targets"] == b["targets"]
        assert a["val_targets"] == b["val_targets"]
    assert "epoch 1: train loss" in r.stdout


@pytest.mark.parametrize("recipe", ["new"])
def test_the_reference_unmodified_under_gpufeed_run(data, tmp_path, recipe):
    if subprocess.run([sys.executable, "-m", "gpufeed", "run", "--help"],
                      capture_output=True).returncode != 0:
        pytest.skip("python -m gpufeed run: not in this build")
    args = ["--data-path", data, "--epochs", "2", "-b", "8"] + RECIPES[recipe]
    theirs, _ = run([SCRIPT] + args, tmp_path / "torch.json", tmp_path)
    ours, r = run(["-m", "gpufeed", "run", SCRIPT] + args, tmp_path / "run.json", tmp_path)
    assert ours["loader"] == "gpufeed", r.stderr
    check_epochs(ours, 2, True)
    for a, b in zip(theirs["epochs"], ours["epochs"]):
        assert a["order"] == b["order"] and a["targets"] == b["targets"]
    assert r.stderr.count("gpufeed run: DataLoader") == 2, r.stderr

# The one-line switch: python/train_imagefolder.py, a training script written
# the torchvision way, run as written (torch's DataLoader) and with only
# `torch.utils.data.DataLoader(` changed to `gpufeed.DataLoader(` (and the
# import). Every epoch must train and validate the same samples in the same
# order as torch's, and under torch.multiprocessing.spawn each rank must get
# exactly DistributedSampler's share.
import json
import os
import random
import subprocess
import sys

import pytest

from conftest import make_dataset

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
# Whole training scripts in subprocesses: minutes under a sanitizer, which
# sees gpufeed's C through test_dataloader.py's loaders anyway.
pytestmark = pytest.mark.skipif(os.environ.get("GPUFEED_PY_SANITIZED") == "1",
                                reason="the scripts run in the plain and installed builds")

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "train_imagefolder.py")


def scripts(tmp_path):
    """(torch's script, the switched copy)."""
    text = open(SCRIPT).read()
    assert text.count("_loader = torch.utils.data.DataLoader(") == 2
    switched = text.replace("_loader = torch.utils.data.DataLoader(", "_loader = gpufeed.DataLoader(")
    switched = switched.replace("import torch\n", "import gpufeed\nimport torch\n", 1)
    path = tmp_path / "train_gpufeed.py"
    path.write_text(switched)
    return SCRIPT, str(path)


def run(script, data, *args):
    out = subprocess.run([sys.executable, script, data, *args], check=True,
                         stdout=subprocess.PIPE, text=True, timeout=600).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def imagenet_like(tmp_path_factory):
    root = tmp_path_factory.mktemp("folders")
    make_dataset(root / "train", classes=3, per_class=32, size="48x40")
    make_dataset(root / "val", classes=3, per_class=8, size="48x40")
    return str(root)


def test_three_epochs_train_and_validate_as_with_torch(imagenet_like, tmp_path):
    plain, switched = scripts(tmp_path)
    want = run(plain, imagenet_like)
    got = run(switched, imagenet_like)
    assert [r["epoch"] for r in got] == [0, 1, 2]
    for w, g in zip(want, got):
        assert g["batches"] == w["batches"] == 6
        # The same samples in the same order: the sampler draws torch's numbers.
        assert g["targets"] == w["targets"] and len(g["targets"]) == 96
        assert g["val_targets"] == w["val_targets"] and len(g["val_targets"]) == 24
    assert want[0]["targets"] != want[1]["targets"]  # a new order each epoch
    # Pixels differ slightly (resampling), so training does: within noise.
    assert got[-1]["loss"] < got[0]["loss"]
    assert abs(got[-1]["acc1"] - want[-1]["acc1"]) <= 0.25
    assert got[-1]["acc1"] >= 0.6


def test_spawned_ranks_get_distributed_samplers_shares(tmp_path):
    # One image per class folder: the target is the sample's index.
    data = tmp_path / "own"
    for part in ("train", "val"):
        make_dataset(data / part, classes=21, per_class=1, size="40x40")
    plain, switched = scripts(tmp_path)
    port = str(random.randint(20000, 40000))
    args = ("--world-size", "2", "--epochs", "2", "-b", "4", "--port", port)
    want = run(plain, str(data), *args)
    got = run(switched, str(data), *args[:-1], str(int(port) + 1))
    key = lambda r: (r["epoch"], r["rank"])  # noqa: E731
    want, got = sorted(want, key=key), sorted(got, key=key)
    assert [key(r) for r in got] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    ds = list(range(21))
    for w, g in zip(want, got):
        sampler = torch.utils.data.distributed.DistributedSampler(
            ds, num_replicas=2, rank=g["rank"])
        sampler.set_epoch(g["epoch"])
        assert g["targets"] == list(sampler) == w["targets"]
        assert g["batches"] == w["batches"] == 3  # 11 samples a rank, padding included
        assert g["val_targets"] == w["val_targets"]
    for epoch in (0, 1):
        shares = [set(r["targets"]) for r in got if r["epoch"] == epoch]
        assert shares[0] | shares[1] == set(ds)
        assert len(shares[0] & shares[1]) <= 1  # DistributedSampler's one padded sample

# Shared fixtures: data sets made by the gpufeed CLI (make-dataset) and
# damaged copies of its files. GPUFEED_CLI names the program (meson sets it).
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def cli():
    path = os.environ.get("GPUFEED_CLI") or os.path.join(HERE, "..", "..", "build", "src", "cli",
                                                         "gpufeed")
    if not os.access(path, os.X_OK):
        pytest.skip("the gpufeed program is not built (GPUFEED_CLI)")
    return path


def make_dataset(dest, classes=3, per_class=20, size="64x48", fmt="jpg"):
    subprocess.run([cli(), "make-dataset", str(dest), "--classes", str(classes), "--per-class",
                    str(per_class), "--size", size, "--format", fmt], check=True,
                   stdout=subprocess.DEVNULL)
    return str(dest)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    """3 classes x 20 JPEGs of 64x48: 60 samples."""
    return make_dataset(tmp_path_factory.mktemp("good") / "set")


@pytest.fixture(scope="session")
def damaged(tmp_path_factory, dataset):
    """A copy of the set with one damaged file of a kind per class; returns
    (root, {relative path: expected exception name})."""
    root = tmp_path_factory.mktemp("damaged") / "set"
    shutil.copytree(dataset, root)
    files = sorted(os.path.relpath(os.path.join(d, f), root)
                   for d, _, fs in os.walk(root) for f in fs)
    damage = {}
    victims = [f for f in files if f.startswith("class_00")][:1] + \
              [f for f in files if f.startswith("class_01")][:1] + \
              [f for f in files if f.startswith("class_02")][:1]
    with open(os.path.join(root, victims[0]), "r+b") as f:  # cut mid-scan
        f.truncate(os.path.getsize(f.name) // 2)
    damage[victims[0]] = "TruncatedImage"
    open(os.path.join(root, victims[1]), "wb").close()
    damage[victims[1]] = "EmptyFile"
    with open(os.path.join(root, victims[2]), "wb") as f:
        f.write(b"this is not an image, only text\n" * 4)
    damage[victims[2]] = "UnsupportedFormat"
    return str(root), damage

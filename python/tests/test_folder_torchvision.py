"""An ImageFolder as people have them, against torchvision's ImageFolder:
a hidden class (Jupyter's checkpoints), a hidden file, a class folder that
links to another, and a link to the root inside a class. The classes,
class_to_idx and every sample's label are torchvision's, except what is
left out on purpose (the link to the root), which the open warns of.
With folder_walk="torchvision" the samples are torchvision's exactly (an
AppleDouble file, links out of a class, second links), but at a loop,
which torchvision goes round until ELOOP: that one is named."""
import os
import shutil

import pytest

import gpufeed

SMALL = dict(batch_size=1, image_size=32, threads=1, device="cpu", transform="eval",
             shuffle=False, epochs=1)


@pytest.fixture
def human_set(dataset, tmp_path):
    root = tmp_path / "human"
    jpeg = os.path.join(dataset, "class_00", sorted(os.listdir(os.path.join(dataset,
                                                                         "class_00")))[0])
    for rel in ("class_a/a1.jpg", "class_a/.hidden.jpg", "class_a/sub/a2.jpg",
                "class_b/b1.jpg", ".ipynb_checkpoints/c.jpg"):
        os.makedirs(os.path.dirname(root / rel), exist_ok=True)
        shutil.copy(jpeg, root / rel)
    os.symlink("..", root / "class_a" / "up")       # reaches the root: left out
    os.symlink("class_b", root / "class_c")         # a relinked class: walked
    return str(root)


def ours(loader):
    n = loader.stats()["dataset_samples"]
    return [(loader.sample_path(i), loader.sample_label(i)) for i in range(n)]


def test_classes_and_labels_are_torchvisions_but_for_what_is_named(human_set):
    datasets = pytest.importorskip("torchvision.datasets")
    with pytest.warns(UserWarning, match=r"class_a/up: a link to a directory outside its class"):
        loader = gpufeed.Loader(human_set, **SMALL)
    with loader:
        st = loader.stats()
        assert st["dataset_warnings"] == 1
        assert st["dataset_warning"].startswith("class_a/up: ")
        got = ours(loader)
        classes, class_to_idx = loader.classes, loader.class_to_idx
    tv = datasets.ImageFolder(human_set)  # follows class_a/up round the tree until ELOOP
    assert classes == tv.classes == [".ipynb_checkpoints", "class_a", "class_b", "class_c"]
    assert class_to_idx == tv.class_to_idx
    want = [(os.path.relpath(p, human_set), label) for p, label in tv.samples]
    up = os.path.join("class_a", "up") + os.sep
    assert any(p.startswith(up) for p, _ in want)  # torchvision walks the link
    assert got == [(p, label) for p, label in want if not p.startswith(up)]
    for name, k in class_to_idx.items():  # class by class, the relinked and hidden too
        assert [p for p, label in got if label == k], name


def test_a_tree_without_left_outs_opens_without_a_warning(human_set):
    os.unlink(os.path.join(human_set, "class_a", "up"))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with gpufeed.Loader(human_set, **SMALL) as loader:
            assert loader.stats()["dataset_warnings"] == 0
            assert len(ours(loader)) == 6


@pytest.fixture
def relinked_set(dataset, tmp_path):
    """A tree folder_walk="torchvision" matches torchvision's on: a hidden
    class, a hidden folder and a hidden file in a class, an AppleDouble file
    (macOS's metadata, no image), a link from one class to another, a second
    link to one directory, a relinked class; no loop."""
    root = tmp_path / "relinked"
    jpeg = os.path.join(dataset, "class_00", sorted(os.listdir(os.path.join(dataset,
                                                                         "class_00")))[0])
    for rel in ("class_a/a1.jpg", "class_a/.hidden.jpg", "class_a/.cache/h.jpg",
                "class_a/sub/a2.jpg", "class_b/b1.jpg", "class_b/deep/b2.jpg",
                ".ipynb_checkpoints/c.jpg"):
        os.makedirs(os.path.dirname(root / rel), exist_ok=True)
        shutil.copy(jpeg, root / rel)
    (root / "class_a" / "._a1.jpg").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00" + b"\0" * 80)
    os.symlink("../class_b", root / "class_a" / "other")  # another class's files, class_a's label
    os.symlink("sub", root / "class_a" / "again")         # sub's files twice
    os.symlink("class_b", root / "class_c")
    return str(root)


def torchvisions(root):
    datasets = pytest.importorskip("torchvision.datasets")
    tv = datasets.ImageFolder(root)
    return tv.classes, tv.class_to_idx, [(os.path.relpath(p, root), k) for p, k in tv.samples]


def test_folder_walk_torchvision_is_torchvisions_imagefolder_exactly(relinked_set):
    classes, class_to_idx, samples = torchvisions(relinked_set)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left out: no warning
        loader = gpufeed.Loader(relinked_set, folder_walk="torchvision", **SMALL)
    with loader:
        assert loader.stats()["dataset_warnings"] == 0
        assert loader.classes == classes == [".ipynb_checkpoints", "class_a", "class_b",
                                             "class_c"]
        assert loader.class_to_idx == class_to_idx
        got = ours(loader)
    assert got == samples
    for p in ("class_a/._a1.jpg", "class_a/again/a2.jpg", "class_a/other/deep/b2.jpg",
              "class_a/.cache/h.jpg"):
        assert (p, class_to_idx["class_a"]) in got, p
    # The AppleDouble file is a sample, as in torchvision, which PIL fails on.
    bad = gpufeed.verify(relinked_set, folder_walk="torchvision")
    assert [b.path for b in bad] == [os.path.join("class_a", "._a1.jpg")]


def test_default_walk_names_what_it_leaves_out_of_torchvisions(relinked_set):
    classes, class_to_idx, samples = torchvisions(relinked_set)
    with pytest.warns(UserWarning) as caught:
        loader = gpufeed.Loader(relinked_set, **SMALL)
    msg = " ".join(str(w.message) for w in caught)
    assert "3 entries of the folder left out" in msg, msg
    for named in ("class_a/._a1.jpg: a macOS AppleDouble",
                  "class_a/other: a link to a directory outside its class",
                  "class_a/sub: a directory reached again"):
        assert named in msg, msg
    with loader:
        assert loader.stats()["dataset_warnings"] == 3
        assert (loader.classes, loader.class_to_idx) == (classes, class_to_idx)
        got = ours(loader)
    # torchvision's, less the AppleDouble file, the link out and the second
    # link's copy (walked once, through "again", the first in name order).
    left_out = ("class_a/._a1.jpg", "class_a/other/", "class_a/sub/")
    assert got == [(p, k) for p, k in samples if not p.startswith(left_out)]


def test_folder_walk_torchvision_differs_only_at_a_loop_and_names_it(human_set):
    classes, class_to_idx, samples = torchvisions(human_set)  # round class_a/up until ELOOP
    with pytest.warns(UserWarning, match=r"class_a/up: a link back into its own walk \(a loop\)"
                                         r": not walked; torchvision follows it round until "
                                         r"ELOOP, which no setting matches"):
        loader = gpufeed.Loader(human_set, folder_walk="torchvision", **SMALL)
    with loader:
        assert loader.stats()["dataset_warnings"] == 1
        assert (loader.classes, loader.class_to_idx) == (classes, class_to_idx)
        got = ours(loader)
    up = os.path.join("class_a", "up") + os.sep
    assert got == [(p, k) for p, k in samples if not p.startswith(up)]

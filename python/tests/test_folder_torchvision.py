"""An ImageFolder as people have them, against torchvision's ImageFolder:
a hidden class (Jupyter's checkpoints), a hidden file, a class folder that
links to another, and a link to the root inside a class. The classes,
class_to_idx and every sample's label are torchvision's, except what is
left out on purpose (the link to the root), which the open warns of."""
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

# fields=: a sample's members beyond its image and label (captions, any
# bytes) as one item a field, in order, each its own sample's.
import io
import subprocess
import tarfile

import pytest

import gpufeed
from conftest import cli

KW = dict(batch_size=4, image_size=16, device="cpu", threads=2, epochs=1)


def caption(key):
    return f"a caption of {key} \u2014 caf\u00e9"


@pytest.fixture(scope="module")
def captioned(tmp_path_factory):
    """make-dataset's shards with KEY.txt and KEY.json beside each image."""
    root = tmp_path_factory.mktemp("captioned")
    subprocess.run([cli(), "make-dataset", str(root / "src"), "--shards", "2", "--classes", "2",
                    "--per-class", "6", "--size", "24x24"], check=True, stdout=subprocess.DEVNULL)
    for k in range(2):
        name = f"train-{k:06d}.tar"
        with tarfile.open(root / "src" / name) as src, \
                tarfile.open(root / name, "w", format=tarfile.USTAR_FORMAT) as dst:
            for m in src.getmembers():
                dst.addfile(m, src.extractfile(m))
                key, ext = m.name.split(".", 1)
                if ext == "cls":
                    for suffix, data in (("txt", caption(key).encode()),
                                         ("json", b'{"key": "%s"}' % key.encode())):
                        info = tarfile.TarInfo(f"{key}.{suffix}")
                        info.size = len(data)
                        dst.addfile(info, io.BytesIO(data))
    return str(root / "train-{000000..000001}.tar")


def test_captions_unpack_beside_images_and_labels(captioned):
    with gpufeed.Loader(captioned, fields=("jpg;png", "cls", "txt", "json"), **KW) as loader:
        seen = 0
        for batch in loader:
            images, labels, captions, metas = batch
            assert len(batch) == 4
            assert isinstance(captions, list) and all(isinstance(c, str) for c in captions)
            assert all(isinstance(m, bytes) for m in metas)
            for i, index in enumerate(memoryview(batch.indices).tolist()):
                key = loader.sample_path(index).split(":")[1].split(".")[0]
                assert captions[i] == caption(key)
                assert metas[i] == b'{"key": "%s"}' % key.encode()
            seen += batch.count
        assert seen == 12


def test_the_default_still_unpacks_to_two(captioned):
    with gpufeed.Loader(captioned, **KW) as loader:
        batch = next(iter(loader))
        assert len(batch) == 2
        x, y = batch


def test_fields_refused_by_name(captioned, dataset):
    with pytest.raises(gpufeed.InvalidArgument, match="no kind 'picture'"):
        gpufeed.Loader(captioned, fields="jpg:picture,cls", **KW)
    with pytest.raises(gpufeed.InvalidArgument, match="fields name the members"):
        gpufeed.Loader(dataset, fields=("jpg", "cls", "txt"), **KW)
    with pytest.raises(TypeError, match="fields: a str or a sequence of str"):
        gpufeed.Loader(captioned, fields=3, **KW)

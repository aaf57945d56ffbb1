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


# ---- arrays, masks and boxes ----

np = pytest.importorskip("numpy")


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def key_number(key):
    return int(key.rsplit("_", 1)[1])  # make-dataset's class_CC_img_NNNNN


def latent(i):
    return (np.arange(4 * 8 * 8, dtype=np.float16).reshape(4, 8, 8) + i).astype(np.float16)


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """make-dataset's shards with KEY.seg.png (an 8-bit palette mask of the
    image's size, each pixel's value x + 16 * y % 256 of a 24x24 image
    cut to its coordinates' classes), KEY.latent.npy and KEY.boxes.npy."""
    from PIL import Image
    root = tmp_path_factory.mktemp("kinds")
    subprocess.run([cli(), "make-dataset", str(root / "src"), "--shards", "2", "--classes", "2",
                    "--per-class", "6", "--size", "24x24"], check=True, stdout=subprocess.DEVNULL)
    ids = (np.arange(24)[None, :] // 3 + 8 * (np.arange(24)[:, None] // 3)).astype(np.uint8)
    mask = Image.fromarray(ids, mode="P")
    mask.putpalette([(v * 37) % 256 for v in range(768)])  # colours unlike the ids
    png = io.BytesIO()
    mask.save(png, format="PNG")
    for k in range(2):
        name = f"train-{k:06d}.tar"
        with tarfile.open(root / "src" / name) as src, \
                tarfile.open(root / name, "w", format=tarfile.USTAR_FORMAT) as dst:
            for m in src.getmembers():
                dst.addfile(m, src.extractfile(m))
                key, ext = m.name.split(".", 1)
                if ext == "cls":
                    i = key_number(key)
                    boxes = np.array([[1, 2, 20, 22, i], [0, 0, 0.5, 0.5, 99]], np.float32)
                    for suffix, data in (("seg.png", png.getvalue()),
                                         ("latent.npy", npy_bytes(latent(i))),
                                         ("boxes.npy", npy_bytes(boxes))):
                        info = tarfile.TarInfo(f"{key}.{suffix}")
                        info.size = len(data)
                        dst.addfile(info, io.BytesIO(data))
    return str(root / "train-{000000..000001}.tar"), ids


def test_masks_come_cropped_as_their_images_with_only_their_ids(kinds):
    data, ids = kinds
    kw = dict(KW, transform="train", seed=3)
    with gpufeed.Loader(data, fields=("jpg", "seg.png:mask"), **kw) as loader:
        seen = 0
        for images, masks in loader:
            m = np.asarray(masks)
            assert m.shape == (images.shape[0] if hasattr(images, "shape") else len(m), 16, 16)
            assert set(np.unique(m)) <= set(np.unique(ids))  # ids, never the palette's colours
            seen += m.shape[0]
        assert seen == 12


def test_latents_alone_are_a_one_item_tuple_of_the_stored_arrays(kinds):
    data, _ = kinds
    with gpufeed.Loader(data, fields=("latent.npy",), **KW) as loader:
        seen = 0
        for batch in loader:
            assert len(batch) == 1
            (lat,) = batch
            a = np.asarray(lat)
            assert a.dtype == np.float16 and a.shape == (batch.count, 4, 8, 8)
            for row, index in zip(a, memoryview(batch.indices).tolist()):
                key = loader.sample_path(index).split(":")[1].split(".")[0]
                assert np.array_equal(row, latent(key_number(key)))
            seen += batch.count
        assert seen == 12


def test_boxes_are_a_list_of_float32_arrays_moved_with_the_image(kinds):
    data, _ = kinds
    # eval, crop_fraction 1: the 24x24 image scaled to 16x16, no flip
    with gpufeed.Loader(data, fields=("jpg", "cls", "boxes.npy:boxes"), transform="eval",
                        crop_fraction=1.0, **KW) as loader:
        images, labels, boxes = next(iter(loader))
        assert isinstance(boxes, list) and len(boxes) == 4
        for b in boxes:
            a = np.asarray(b)
            assert a.dtype == np.float32 and a.shape == (2, 5)  # none dropped: both have area
            assert np.allclose(a[0, :4], np.array([1, 2, 20, 22]) * 16 / 24, atol=1e-5)
            assert np.allclose(a[1, :4], np.array([0, 0, 0.5, 0.5]) * 16 / 24, atol=1e-5)
            assert a[1, 4] == 99


def test_a_mask_or_boxes_without_an_image_is_refused(kinds):
    data, _ = kinds
    with pytest.raises(gpufeed.InvalidArgument, match="moved with its image"):
        gpufeed.Loader(data, fields=("latent.npy", "seg.png:mask"), **KW)

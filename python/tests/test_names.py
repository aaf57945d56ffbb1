"""Errors that keep their reason: file names of any bytes, paths as bytes,
NUL refused, arguments named, and a checkpoint's data set identity."""
import os

import warnings

import pytest

import gpufeed

SMALL = dict(batch_size=1, image_size=32, threads=1, device="cpu", transform="eval",
             shuffle=False, epochs=1)
ODD = b"bad-\xff\xfe.jpg"  # not UTF-8


@pytest.fixture
def odd_set(dataset, tmp_path):
    """One good JPEG and a corrupt file whose name is not UTF-8, in class a."""
    root = tmp_path / "odd"
    os.makedirs(root / "a")
    first = sorted(os.listdir(os.path.join(dataset, "class_00")))[0]
    with open(os.path.join(dataset, "class_00", first), "rb") as f:
        (root / "a" / "good.jpg").write_bytes(f.read())
    with open(os.path.join(os.fsencode(root / "a"), ODD), "wb") as f:
        f.write(b"not an image of any kind, only text" * 4)
    return root


def test_a_non_utf8_name_reaches_python_intact(odd_set):
    want = b"a/" + ODD
    with pytest.raises(gpufeed.UnsupportedFormat) as e:
        with gpufeed.Loader(str(odd_set), on_error="fail", **SMALL) as loader:
            list(loader)
    assert os.fsencode(e.value.path) == want
    assert os.fsdecode(want) in str(e.value)
    with gpufeed.Loader(str(odd_set), **SMALL) as loader:
        assert sum(b.count for b in loader) == 1
        st = loader.stats()
        assert os.fsencode(st["recent"][0]["path"]) == want
        assert os.fsencode(loader.sample_path(0)) == want  # bytes sort first
    assert [os.fsencode(b.path) for b in gpufeed.verify(str(odd_set))] == [want]


def test_paths_as_bytes_pathlike_and_undecodable_str(odd_set):
    for data in (os.fsencode(odd_set), odd_set, str(odd_set)):
        with gpufeed.Loader(data, **SMALL) as loader:
            assert loader.stats()["dataset_samples"] == 2
    sub = os.path.join(os.fsencode(odd_set), b"\xff-dir")
    os.makedirs(os.path.join(sub, b"a"))
    os.link(os.path.join(os.fsencode(odd_set), b"a", b"good.jpg"),
            os.path.join(sub, b"a", b"good.jpg"))
    with gpufeed.Loader(os.fsdecode(sub), **SMALL) as loader:  # a surrogate-escaped str
        assert sum(b.count for b in loader) == 1
    with pytest.raises(gpufeed.DatasetError) as e:
        gpufeed.Loader(sub + b"-missing", **SMALL)
    assert os.fsdecode(sub + b"-missing") in str(e.value)


def test_nul_in_a_path_or_setting_is_refused(dataset):
    with pytest.raises(ValueError, match="data: .*NUL"):
        gpufeed.Loader(dataset + "\0junk", **SMALL)
    with pytest.raises(ValueError, match="data: .*NUL"):
        gpufeed.verify(os.fsencode(dataset) + b"\0")
    with pytest.raises(ValueError, match="dtype: .*NUL"):
        gpufeed.Loader(dataset, dtype="float16\0x", **SMALL)
    with pytest.raises(TypeError, match="data"):
        gpufeed.Loader(3.5, **SMALL)


def test_argument_errors_name_the_argument(dataset):
    with gpufeed.Loader(dataset, **SMALL) as loader:
        with pytest.raises(IndexError, match="index -1"):
            loader.sample_path(-1)
        with pytest.raises(TypeError, match="index"):
            loader.sample_label("0")
        with pytest.raises(IndexError, match="index"):
            loader.read_sample(1 << 70)
        b = next(loader)
        for kw, name in ((dict(dl_device="cpu"), "dl_device"),
                         (dict(dl_device=(1, "0")), "dl_device"),
                         (dict(max_version=1), "max_version"), (dict(copy="no"), "copy"),
                         (dict(stream=1.5), "stream")):
            with pytest.raises(TypeError, match=name):
                b.data.__dlpack__(**kw)
        del b
        state = loader.state_dict()
        with pytest.raises(TypeError, match="'epoch'"):
            loader.load_state_dict({**state, "epoch": "1"})
        with pytest.raises(ValueError, match="'position'"):
            loader.load_state_dict({**state, "position": -1})
        with pytest.raises(TypeError, match="state"):
            loader.load_state_dict([1, 2])


def test_state_dict_names_its_data_set(dataset, odd_set):
    with gpufeed.Loader(dataset, **SMALL) as a, gpufeed.Loader(dataset, **SMALL) as b:
        sa, sb = a.state_dict(), b.state_dict()
        assert sa["samples"] == 60 and sa["index_hash"] == sb["index_hash"] != 0
        assert all(isinstance(v, int) for v in sa.values())
    with gpufeed.Loader(str(odd_set), **SMALL) as other:
        with pytest.raises(gpufeed.InvalidArgument, match=r"samples: the state's 60 is not "
                                                          r"this loader's 2"):
            other.load_state_dict(sa)
        so = other.state_dict()
        with pytest.raises(ValueError, match="index_hash"):  # same count, other files
            other.load_state_dict({**so, "index_hash": so["index_hash"] ^ 1})
        old = {k: v for k, v in so.items() if k not in ("samples", "index_hash")}
        other.load_state_dict(old)  # an older checkpoint: not checked for them


def test_state_of_another_rank_or_world_is_taken(dataset):
    """Any rank's state is the job's; another world is an elastic resume, said once."""
    with gpufeed.Loader(dataset, rank=1, world=2, **SMALL) as r1:
        state = r1.state_dict()
    with gpufeed.Loader(dataset, rank=0, world=2, **SMALL) as r0:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r0.load_state_dict(state)  # the same world: as is, nothing said
    with gpufeed.Loader(dataset, rank=1, world=3, **SMALL) as w3:
        with pytest.warns(gpufeed.WorldChanged, match="resumed a 2-rank state on 3 ranks at "
                                                      "epoch 0, sample 0 of 60"):
            w3.load_state_dict(state)
        with pytest.raises(ValueError, match="'version'"):  # 32 bits in gf_state: not cut
            w3.load_state_dict({**w3.state_dict(), "version": (1 << 32) + 1})

# gpufeed.Loader through the buffer protocol only: no numpy, no torch.
import os
import struct

import pytest

import gpufeed

SMALL = dict(batch_size=8, image_size=32, threads=1, device="cpu")


def row(b):
    return (bytes(memoryview(b.data)), memoryview(b.labels).tolist(),
            memoryview(b.indices).tolist(), b.count, b.epoch, b.position)


def run(data, **kw):
    """Every batch of one `for` (one epoch) as (pixels bytes, labels, indices,
    count, epoch, position)."""
    with gpufeed.Loader(data, **{**SMALL, **kw}) as loader:
        return [row(b) for b in loader]


def stream(loader):
    """Every batch next(loader) gives, across epochs, until the last."""
    while True:
        try:
            yield next(loader)
        except StopIteration:
            return


def test_epoch_delivers_every_sample_once(dataset):
    with gpufeed.Loader(dataset, **SMALL) as loader:
        assert len(loader) == 8  # 60 samples, batches of 8, the last of 4
        seen, counts = [], []
        for b in loader:
            assert memoryview(b.data).shape == (b.count, 32, 32, 3)
            seen += memoryview(b.indices).tolist()
            counts.append(b.count)
    assert sorted(seen) == list(range(60)) and counts == [8] * 7 + [4]
    with gpufeed.Loader(dataset, drop_last=True, **SMALL) as loader:
        assert len(loader) == 7 and [b.count for b in loader] == [8] * 7


def test_pixels_and_labels_are_the_c_decoders(dataset):
    """Each sample's bytes equal gf_decode_image's of its file for that
    epoch and index, and its label the index's."""
    with gpufeed.Loader(dataset, epochs=2, **SMALL) as loader:
        checked = 0
        for b in stream(loader):
            px, labels, idx = bytes(memoryview(b.data)), memoryview(b.labels), memoryview(b.indices)
            per = 32 * 32 * 3
            for k in range(b.count):
                want = gpufeed.decode_image(loader.read_sample(idx[k]), epoch=b.epoch,
                                            index=idx[k], image_size=32)
                assert px[k * per:(k + 1) * per] == want
                assert labels[k] == loader.sample_label(idx[k])
                assert loader.sample_path(idx[k]).startswith(f"class_0{labels[k]}/")
                checked += 1
    assert checked == 120


def test_same_settings_same_bytes(dataset):
    a, b = run(dataset, seed=7), run(dataset, seed=7)
    assert a == b
    assert run(dataset, seed=8) != a
    # eval: no randomness, no shuffle -> indices in order
    ev = run(dataset, transform="eval", shuffle=False)
    assert [i for r in ev for i in r[2]] == list(range(60))


def test_float_dtypes_are_the_normalised_uint8(dataset):
    u8 = run(dataset, epochs=1)
    mean, std = (10.0, 20.0, 30.0), (2.0, 4.0, 8.0)
    f32 = run(dataset, dtype="float32", mean=mean, std=std)
    for (px8, *rest8), (px32, *rest32) in zip(u8, f32):
        assert rest8 == rest32
        vals = struct.unpack(f"{len(px8)}f", px32)
        for j in range(0, len(px8), 97):
            c = j % 3
            assert vals[j] == pytest.approx((px8[j] - mean[c]) / std[c], rel=1e-6)
    nchw = run(dataset, dtype="float32", layout="nchw", mean=mean, std=std)
    with gpufeed.Loader(dataset, dtype="float32", layout="nchw", **SMALL) as loader:
        b = next(loader)
        assert memoryview(b.data).shape == (8, 3, 32, 32) and b.data.dtype == "float32"
    assert len(nchw[0][0]) == len(f32[0][0])


def test_release_then_export_raises(dataset):
    with gpufeed.Loader(dataset, **SMALL) as loader:
        b = next(loader)
        arr = b.data
        b.release()
        assert b.released
        with pytest.raises(ValueError, match="released"):
            b.data
        with pytest.raises(BufferError, match="released"):
            memoryview(arr)
        with pytest.raises(BufferError, match="released"):
            arr.__dlpack__()
        del arr  # an Array holds the slot (torch.frombuffer keeps only it)
        assert loader.stats()["held"] == 0
        b.release()  # twice is fine


def test_view_outlives_batch_and_loader(dataset):
    loader = gpufeed.Loader(dataset, **SMALL)
    b = next(loader)
    m = memoryview(b.labels)
    want = m.tolist()
    b.release()  # the view still holds the slot
    assert loader.stats()["held"] == 1
    del b
    loader.close()
    with pytest.raises(ValueError, match="closed"):
        next(loader)
    assert m.tolist() == want  # the C loader lives until the view goes
    m.release()


def test_ring_starvation_raises_and_recovers(dataset):
    with gpufeed.Loader(dataset, prefetch_depth=2, max_held_batches=2, **SMALL) as loader:
        first, second = next(loader), next(loader)
        with pytest.raises(gpufeed.RingStarved, match=r"2 batches are held: \(epoch 0, "
                           r"position 8\), \(epoch 0, position 16\).*clone\(\)") as e:
            next(loader)
        assert e.value.name == "GF_EBUSY"
        first.release()
        third = next(loader)
        assert third.position == 24
        del second, third


def test_errors_name_the_file(damaged):
    root, damage = damaged
    for path, name in damage.items():
        sub = os.path.join(os.path.dirname(root), "one_" + name)
        os.makedirs(os.path.join(sub, "a"), exist_ok=True)
        dst = os.path.join(sub, "a", os.path.basename(path))
        if not os.path.exists(dst):
            os.link(os.path.join(root, path), dst)
        with pytest.raises(getattr(gpufeed, name)) as e:
            with gpufeed.Loader(sub, on_error="fail", **SMALL) as loader:
                list(loader)
        assert isinstance(e.value, gpufeed.SampleError) and isinstance(e.value, gpufeed.Error)
        assert e.value.path == "a/" + os.path.basename(path)
        assert e.value.path in str(e.value) and e.value.reason in str(e.value)
    # skip: every good sample arrives, the bad ones are counted by kind (epochs=1:
    # an unbounded loader may already have met the next epoch's)
    with gpufeed.Loader(root, epochs=1, **SMALL) as loader:
        n = sum(b.count for b in loader)
        st = loader.stats()
    assert n == 57 and st["errors"] == 3
    assert st["errors_by_kind"]["GF_ETRUNC"] == 1 and st["errors_by_kind"]["GF_EEMPTY"] == 1
    assert {r["path"] for r in st["recent"]} == set(damage)


def test_verify_lists_the_bad_samples(damaged, dataset):
    root, damage = damaged
    bad = gpufeed.verify(root)
    assert {b.path: b.error.__name__ for b in bad} == damage
    assert all(b.reason for b in bad)
    assert gpufeed.verify(dataset) == []
    with pytest.raises(gpufeed.DatasetError, match="nowhere"):
        gpufeed.verify(os.path.join(root, "nowhere"))


def test_verify_lists_what_the_cli_lists(damaged, tmp_path):
    """One implementation: the same bad samples, reasons and order as
    `gpufeed verify --json`, also when every sample is bad (the list, not
    an error) and for a damaged shard."""
    import json
    import subprocess
    from conftest import cli
    root, _ = damaged
    all_bad = tmp_path / "all_bad" / "a"
    all_bad.mkdir(parents=True)
    for i in range(3):
        (all_bad / f"{i}.jpg").write_bytes(b"not a jpeg")
    (tmp_path / "cut.tar").write_bytes(b"x" * 100)
    for data in (root, str(all_bad.parent), str(tmp_path / "cut.tar")):
        run = subprocess.run([cli(), "verify", "--data", data, "--json"], capture_output=True)
        assert run.returncode == 1, run.stderr
        want = json.loads(run.stdout)
        base = data if os.path.isdir(data) else ""  # the CLI prints paths under the root
        got = [(os.path.join(base, b.path), b.reason) for b in gpufeed.verify(data)]
        assert got == [(d["path"], d["reason"]) for d in
                       want.get("damaged_shards", []) + want.get("bad_samples", [])], (got, want)


@pytest.mark.parametrize("kw, exc", [
    (dict(batch_size=-1), ValueError), (dict(batch_size=0), ValueError),
    (dict(batch_size="8"), TypeError), (dict(batch_size=2.5), TypeError),
    (dict(image_size=(0, 5)), ValueError), (dict(image_size="big"), TypeError),
    (dict(dtype="int8"), ValueError), (dict(dtype=1), TypeError),
    (dict(layout="nwhc"), ValueError), (dict(device="tpu"), ValueError),
    (dict(threads=-2), ValueError), (dict(prefetch_depth=-1), ValueError),
    (dict(rank=2, world=2), ValueError), (dict(rank=0), ValueError),
    (dict(mean=(1, 2, 3, 4, 5)), ValueError), (dict(std=(1e-6,)), ValueError),
    (dict(scale=(0.9, 0.1)), ValueError), (dict(flip_prob="x"), TypeError),
    (dict(batch_size=1 << 40), ValueError), (dict(colour=True), TypeError),
])
def test_bad_settings_raise(dataset, kw, exc):
    with pytest.raises(exc):
        gpufeed.Loader(dataset, **{**SMALL, **kw})


def test_bad_data_argument(tmp_path):
    with pytest.raises(TypeError):
        gpufeed.Loader(5)
    with pytest.raises(gpufeed.DatasetError, match="nothing"):
        gpufeed.Loader(str(tmp_path / "nothing"))


def test_state_dict_resumes_exactly(dataset):
    kw = dict(epochs=3, seed=5)
    with gpufeed.Loader(dataset, **{**SMALL, **kw}) as loader:
        straight = [row(b) for b in stream(loader)]
    for k in (3, 8, 13):  # mid-epoch, at an epoch's end, in the second epoch
        with gpufeed.Loader(dataset, **{**SMALL, **kw}) as loader:
            for _ in range(k):
                next(loader)
            state = loader.state_dict()
        with gpufeed.Loader(dataset, **{**SMALL, **kw}) as loader:
            loader.load_state_dict(dict(state))
            rest = [row(b) for b in stream(loader)]
        assert rest == straight[k:], k
    with gpufeed.Loader(dataset, **{**SMALL, **kw, "seed": 6}) as other:
        with pytest.raises(gpufeed.InvalidArgument, match="seed"):
            other.load_state_dict(state)
        mine = other.state_dict()
        b = next(other)
        kept = memoryview(b.indices).tolist()
        other.load_state_dict(mine)  # a batch held meanwhile stays as it was
        assert memoryview(b.indices).tolist() == kept
        assert memoryview(next(other).indices).tolist() == kept
        del b


def test_rank_world_from_the_environment(dataset, monkeypatch):
    for var in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    shares = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        with gpufeed.Loader(dataset, **SMALL) as loader:
            assert (loader.stats()["rank"], loader.stats()["world"]) == (rank, 2)
            assert len(loader) == 4
            shares.append([i for b in loader for i in memoryview(b.indices).tolist()])
    assert len(shares[0]) == len(shares[1]) == 30
    assert not set(shares[0]) & set(shares[1])
    assert sorted(shares[0] + shares[1]) == list(range(60))


def _rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGESIZE") // 1024


def test_thousand_batches_no_growth(dataset):
    fds = len(os.listdir("/proc/self/fd"))
    with gpufeed.Loader(dataset, batch_size=4, image_size=16, threads=1, device="cpu",
                        epochs=0) as loader:
        for n, b in enumerate(stream(loader)):
            memoryview(b.data).tobytes()
            cap = b.labels.__dlpack__()  # a capsule no one takes: its destructor frees it
            del cap
            if n == 200:
                rss = _rss_kb()
            if n == 1000:
                break
        grown = _rss_kb() - rss
        assert loader.stats()["held"] == 1
        del b  # else the last batch keeps the C loader (and its fds) open
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):  # ASan's quarantine grows
        assert grown < 1024, f"RSS grew {grown} KiB over 800 batches"
    for _ in range(20):
        gpufeed.Loader(dataset, **SMALL).close()
    assert len(os.listdir("/proc/self/fd")) == fds


def _scan_start(data):
    i = 2
    while i + 4 <= len(data):
        marker, n = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker == 0xDA:
            return i + 2 + n
        i += 2 + n
    raise AssertionError("no SOS")


def test_lenient_warnings_and_strict_failure(dataset, tmp_path):
    """A stray RST mid-scan: libjpeg-turbo warns. Lenient delivers the
    sample and lists it in recent_warnings; strict fails it."""
    with gpufeed.Loader(dataset, **SMALL) as loader:
        good = loader.read_sample(0)
        next(loader)
        turbo = loader.stats()["decoded_turbo"] > 0
    if not turbo:
        pytest.skip("no libjpeg-turbo: stb_image has no warnings")
    s0 = _scan_start(good)
    mid = s0 + (len(good) - s0) // 2
    os.makedirs(tmp_path / "a")
    (tmp_path / "a" / "scan.jpg").write_bytes(good[:mid] + b"\xff\xd3" + good[mid + 2:])
    # epochs=1: an unbounded loader decodes (and warns) ahead into later epochs
    kw = {**SMALL, "image_size": (48, 64), "transform": "eval", "epochs": 1}
    with gpufeed.Loader(str(tmp_path), strictness="lenient", **kw) as loader:
        assert sum(b.count for b in loader) == 1
        warned = loader.recent_warnings()
        assert loader.stats()["decode_warnings"] == 1
    assert [(w["path"], w["error"]) for w in warned] == [("a/scan.jpg", "GF_ECORRUPT")]
    assert "corrupt JPEG data" in warned[0]["reason"]
    with pytest.raises(gpufeed.CorruptImage, match="a/scan.jpg"):
        with gpufeed.Loader(str(tmp_path), on_error="fail", **kw) as loader:
            next(loader)


def test_a_damaged_shard_is_reported_by_verify_and_counted(dataset, tmp_path):
    """on_shard_error reaches the C setting: a shard cut inside its first
    header is one BadSample from verify (index -1) under skip, and the
    loader refuses the set under fail."""
    import io
    import tarfile
    jpgs = sorted(p for p in __import__("pathlib").Path(dataset).rglob("*.jpg"))[:2]
    good = tmp_path / "a.tar"
    with tarfile.open(good, "w", format=tarfile.USTAR_FORMAT) as t:
        for k, jpg in enumerate(jpgs):
            for name, data in ((f"k{k}.jpg", jpg.read_bytes()), (f"k{k}.cls", b"0")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    (tmp_path / "b.tar").write_bytes(b"x" * 100)
    data = f"{good},{tmp_path / 'b.tar'}"
    bad = gpufeed.verify(data)
    assert [b.path for b in bad] == [str(tmp_path / "b.tar")]
    assert "0 members kept" in bad[0].reason
    with gpufeed.Loader(data, batch_size=1, image_size=8, device="cpu") as l:
        assert l.stats()["shards_damaged"] == 1
        assert sum(b.count for b in l) == 2
    with pytest.raises(gpufeed.DatasetError):
        gpufeed.Loader(data, batch_size=1, image_size=8, device="cpu", on_shard_error="fail")


def test_a_shard_key_whose_cls_is_no_label_is_a_warning_at_open(dataset, tmp_path):
    """A key skipped at open for its .cls ("x": no label) is named in a
    UserWarning, as C's on_sample_warning hears of it; the others load."""
    import io
    import tarfile
    jpgs = sorted(p for p in __import__("pathlib").Path(dataset).rglob("*.jpg"))[:3]
    shard = tmp_path / "s.tar"
    with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as t:
        for k, (jpg, cls) in enumerate(zip(jpgs, (b"0", b"x", b"1"))):
            for name, data in ((f"k{k}.jpg", jpg.read_bytes()), (f"k{k}.cls", cls)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    with pytest.warns(UserWarning, match=r"1 shard key\(s\) skipped.*s\.tar:k1: .*key skipped"):
        loader = gpufeed.Loader(str(shard), batch_size=1, image_size=8, device="cpu")
    with loader:
        assert loader.stats()["shard_keys_skipped"] == 1
        assert sorted(l for b in loader for l in memoryview(b.labels).tolist()) == [0, 1]


def test_the_shard_order_on_tar_shards(tmp_path):
    from conftest import cli
    import subprocess
    subprocess.run([cli(), "make-dataset", str(tmp_path / "sh"), "--shards", "5", "--classes",
                    "2", "--per-class", "10", "--size", "32x32"], check=True,
                   stdout=subprocess.DEVNULL)
    data = str(tmp_path / "sh" / "train-{000000..000004}.tar")
    kw = dict(SMALL, batch_size=4, epochs=2)
    with gpufeed.Loader(data, order="shards", shard_window=2, **kw) as loader:
        epoch = [i for b in loader for i in memoryview(b.indices).tolist()]
        state = loader.state_dict()
        second = [row(b) for b in loader]
    assert sorted(epoch) == list(range(20))
    assert state["shard_window"] == 2
    with gpufeed.Loader(data, order="global", **kw) as loader:
        assert loader.state_dict()["shard_window"] == 0
        with pytest.raises(gpufeed.InvalidArgument, match="shard_window"):
            loader.load_state_dict(state)
    with gpufeed.Loader(data, order="shards", shard_window=2, **kw) as loader:
        loader.load_state_dict(state)
        assert [row(b) for b in loader] == second  # resumed exactly


def test_the_shard_order_needs_tar_shards(dataset):
    with pytest.raises(gpufeed.InvalidArgument, match="order shards needs tar shards"):
        gpufeed.Loader(dataset, order="shards", **SMALL)

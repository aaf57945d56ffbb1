"""gpufeed.Loader's DataLoader face: a `for` is one epoch, batches unpack as
(data, labels) with int64 labels, and the attributes a training script reads."""
import pytest

import gpufeed

SMALL = dict(batch_size=8, image_size=32, threads=1, device="cpu")


def indices(b):
    return memoryview(b.indices).tolist()


def test_each_for_is_one_epoch_with_every_sample_once(dataset):
    with gpufeed.Loader(dataset, **SMALL) as loader:  # epochs=0: unbounded
        assert len(loader) == 8
        orders = []
        for epoch in range(3):
            seen, epochs = [], set()
            for b in loader:
                seen += indices(b)
                epochs.add(b.epoch)
            assert epochs == {epoch}
            assert sorted(seen) == list(range(60))  # every sample once, none of the next
            orders.append(seen)
        assert orders[0] != orders[1] != orders[2]  # reshuffled each epoch


def test_drop_last_epochs_end_at_their_last_full_batch(dataset):
    with gpufeed.Loader(dataset, drop_last=True, **SMALL) as loader:
        for epoch in range(2):
            got = [(b.epoch, b.count) for b in loader]
            assert got == [(epoch, 8)] * 7
            assert loader.state_dict()["epoch"] in (epoch, epoch + 1)
        for b in loader:  # a break at the last full batch: the next for is the next epoch
            if b.position == 56:
                break
        del b
        assert {b.epoch for b in loader} == {3}


def test_epochs_n_then_a_for_yields_nothing(dataset):
    with gpufeed.Loader(dataset, epochs=2, **SMALL) as loader:
        assert [sum(1 for _ in loader) for _ in range(4)] == [8, 8, 0, 0]


def test_break_then_for_starts_the_next_epoch(dataset):
    with gpufeed.Loader(dataset, epochs=3, **SMALL) as loader:
        for b in loader:
            assert (b.epoch, b.position) == (0, 8)
            break
        del b  # the broken epoch's batch: gf_seek needs it back
        got = [(b.epoch, indices(b)) for b in loader]
        assert {e for e, _ in got} == {1} and len(got) == 8
        assert sorted(i for _, ix in got for i in ix) == list(range(60))
        # a break at the last of epochs=3: nothing is left
        for b in loader:
            break
        del b
        assert sum(1 for _ in loader) == 0


def test_break_with_the_batch_still_held_goes_on(dataset):
    """The loop variable still holds its batch after a `break`: the next `for`
    starts the next epoch all the same, and the kept batch stays as it was."""
    with gpufeed.Loader(dataset, **SMALL) as loader:
        for images, target in loader:
            break
        kept = memoryview(target).tolist()
        assert {b.epoch for b in loader} == {1}
        assert memoryview(target).tolist() == kept


def test_next_then_for_finishes_the_epoch(dataset):
    """next(loader) is the stream's next batch; a `for` then ends its epoch."""
    with gpufeed.Loader(dataset, **SMALL) as loader:
        first = indices(next(loader))  # not kept: a held batch holds its ring slot
        rest = [(b.epoch, indices(b)) for b in loader]
        assert len(rest) == 7 and {e for e, _ in rest} == {0}
        assert sorted(first + [i for _, ix in rest for i in ix]) == list(range(60))


def test_set_epoch_runs_that_epoch(dataset):
    with gpufeed.Loader(dataset, **SMALL) as ref:
        ref.set_epoch(5)
        want = [indices(b) for b in ref]
    with gpufeed.Loader(dataset, **SMALL) as loader:
        for e in range(2):  # a sampler's idiom: set_epoch before each for
            loader.set_epoch(e)
            assert {b.epoch for b in loader} == {e}
        loader.set_epoch(5)
        assert [indices(b) for b in loader] == want
        with pytest.raises(TypeError, match="epoch"):
            loader.set_epoch("1")
        with pytest.raises(ValueError, match="epoch"):
            loader.set_epoch(-1)


def test_state_dict_between_epochs_points_at_the_next(dataset):
    with gpufeed.Loader(dataset, seed=3, **SMALL) as loader:
        for b in loader:
            pass
        del b
        state = loader.state_dict()
        want = [indices(b) for b in loader]
    assert state["position"] == 0 and state["epoch"] == 1 or \
        state["position"] == 60 and state["epoch"] == 0
    with gpufeed.Loader(dataset, seed=3, **SMALL) as loader:
        loader.load_state_dict(state)
        assert [indices(b) for b in loader] == want


def test_batches_unpack_as_data_and_int64_labels(dataset):
    with gpufeed.Loader(dataset, transform="eval", shuffle=False, **SMALL) as loader:
        for images, target in loader:
            assert memoryview(images).shape == (8, 32, 32, 3)
            assert target.dtype == "int64" and memoryview(target).format == "q"
            break
        b = next(loader)
        assert len(b) == 2 and b.count == 8  # the 2-tuple's length; .count the samples
        x, y = b
        labels = memoryview(y).tolist()
        assert labels == [loader.sample_label(i) for i in indices(b)]
        with pytest.raises(IndexError):
            b[2]


def test_torch_takes_the_labels_as_they_are(dataset):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    with gpufeed.Loader(dataset, dtype="float32", layout="nchw", **SMALL) as loader:
        for images, target in loader:
            x, y = torch.from_dlpack(images), torch.from_dlpack(target)
            assert y.dtype == torch.int64
            logits = x.flatten(1)[:, :3]
            F.cross_entropy(logits, y)  # no .long()
            break


def test_attributes_a_script_reads(dataset):
    tv = pytest.importorskip("torchvision")
    with gpufeed.Loader(dataset, **{**SMALL, "batch_size": 16}) as loader:
        assert loader.batch_size == 16
        ref = tv.datasets.ImageFolder(dataset)
        assert loader.classes == ref.classes
        assert loader.class_to_idx == ref.class_to_idx


def test_classes_of_a_list_file_are_their_numbers(dataset, tmp_path):
    import os
    lines = []
    for k, cls in enumerate(sorted(os.listdir(dataset))):
        for f in sorted(os.listdir(os.path.join(dataset, cls)))[:2]:
            lines.append(f"{os.path.join(dataset, cls, f)} {k * 2}")
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    with gpufeed.Loader(str(tmp_path / "list.txt"), **SMALL) as loader:
        assert loader.classes == ["0", "1", "2", "3", "4"]  # largest label + 1
        assert loader.class_to_idx["4"] == 4


def test_rank_and_world_from_torch_distributed(dataset, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    for var in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda *a: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda *a: 2)
    with gpufeed.Loader(dataset, **SMALL) as loader:
        st = loader.stats()
        assert (st["rank"], st["world"]) == (1, 2) and len(loader) == 4
    with gpufeed.Loader(dataset, rank=0, world=1, **SMALL) as loader:  # keywords win
        assert (loader.stats()["rank"], loader.stats()["world"]) == (0, 1)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with gpufeed.Loader(dataset, **SMALL) as loader:  # so does the launcher
        assert (loader.stats()["rank"], loader.stats()["world"]) == (0, 3)

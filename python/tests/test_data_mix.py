"""Data sets mixed by weight (data=[(source, weight), ...]): each sample's
source is its index range, labels offset by the sources before (or each
source's own), shares near the weights, each source in the order it gives
alone, the epoch as mix_epoch says, source_stats() adding up, resume exact,
and the argument's mistakes named."""
import math
import os
import re

import pytest

import gpufeed
from conftest import make_dataset

SMALL = dict(batch_size=4, image_size=32, threads=1, device="cpu", seed=5)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """a: 4 classes x 6 = 24 samples; b: 2 classes x 4 = 8."""
    root = tmp_path_factory.mktemp("mix")
    return (make_dataset(root / "a", classes=4, per_class=6, size="40x32"),
            make_dataset(root / "b", classes=2, per_class=4, size="40x32"))


def ints(array):
    return memoryview(array).tolist()


def epoch(loader):
    """(indices, labels, sources) of one `for`."""
    ix, lb, src = [], [], []
    for b in loader:
        ix += ints(b.indices)
        lb += ints(b.labels)
        src += ints(b.sources)
    return ix, lb, src


def alone(data, n=None, **kw):
    """The indices and labels data gives alone with SMALL's seed: its own
    order (n of them, over its epochs)."""
    with gpufeed.Loader(data, **{**SMALL, **kw}) as loader:
        ix, lb = [], []
        while n is None or len(ix) < n:
            got = [(i, l) for b in loader for i, l in zip(ints(b.indices), ints(b.labels))]
            if not got:
                break
            ix += [i for i, _ in got]
            lb += [l for _, l in got]
            if n is None:
                break
    return ix[:n], lb[:n]


def test_each_sample_is_its_sources_with_offset_labels_near_the_weights(two):
    a, b = two
    with gpufeed.Loader([(a, 0.75), (b, 0.25)], epochs=1, **SMALL) as loader:
        ix, lb, src = epoch(loader)
        stats, total = loader.source_stats(), loader.stats()["samples"]
        first = loader.classes
    assert len(ix) == 32 == total  # cycle: an epoch is the sizes summed
    assert [s["size"] for s in stats] == [24, 8]
    assert [s["first_index"] for s in stats] == [0, 24]
    assert [s["n_classes"] for s in stats] == [4, 2]
    assert [s["label_offset"] for s in stats] == [0, 4]
    assert [s["weight"] for s in stats] == pytest.approx([0.75, 0.25])
    assert [os.path.basename(s["data"]) for s in stats] == ["a", "b"]
    assert len(first) == 6  # the sources' classes one after the other
    # every sample's source is its index range; its label its own + the offset
    own = {0: dict(zip(*alone(a))), 1: dict(zip(*alone(b)))}
    for i, l, s in zip(ix, lb, src):
        st = stats[s]
        assert st["first_index"] <= i < st["first_index"] + st["size"]
        assert l == own[s][i - st["first_index"]] + st["label_offset"]
    # shares near the weights (within a few samples), and the sources' counts
    # all that was delivered
    assert abs(src.count(0) - 24) <= 4
    assert sum(s["samples"] for s in stats) == total
    assert [s["samples"] for s in stats] == [src.count(0), src.count(1)]
    assert sum(s["share"] for s in stats) == pytest.approx(1)
    assert stats[0]["share"] == pytest.approx(src.count(0) / total)


def test_labels_source_keeps_each_sources_own(two):
    a, b = two
    with gpufeed.Loader([(a, 1), (b, 1)], epochs=1, mix_labels="source", **SMALL) as loader:
        ix, lb, src = epoch(loader)
        stats = loader.source_stats()
    own = {0: dict(zip(*alone(a))), 1: dict(zip(*alone(b)))}
    assert {0, 1} <= set(src)
    for i, l, s in zip(ix, lb, src):
        assert l == own[s][i - stats[s]["first_index"]]


def test_each_source_keeps_its_own_order_and_epochs(two):
    a, b = two
    with gpufeed.Loader({a: 1, b: 1}, epochs=1, **SMALL) as loader:  # a dict too
        ix, _, src = epoch(loader)
        stats = loader.source_stats()
    drawn = {s: [i - stats[s]["first_index"] for i, t in zip(ix, src) if t == s] for s in (0, 1)}
    # b, drawn about as often as a, cycles its own epochs: its k-th draw is its
    # own order's k-th position, epoch after epoch
    assert len(drawn[1]) > 8
    assert drawn[1] == alone(b, len(drawn[1]))[0]
    assert drawn[0] == alone(a, len(drawn[0]))[0]
    assert sorted(drawn[1][:8]) == list(range(8))  # its first epoch whole first
    assert stats[1]["epoch"] >= 1 and stats[0]["epoch"] == 0


def test_mix_epoch_first_ends_when_the_first_source_is_exhausted(two):
    a, b = two
    with gpufeed.Loader([(a, 1), (b, 1)], epochs=1, mix_epoch="first", **SMALL) as loader:
        ix, _, src = epoch(loader)
    assert src[-1] == 1  # b's last sample ends it
    assert sorted(i for i, s in zip(ix, src) if s == 1) == list(range(24, 32))
    a_drawn = [i for i, s in zip(ix, src) if s == 0]
    assert len(a_drawn) == len(set(a_drawn)) < 24  # no repeat, a not exhausted


def test_the_list_and_dict_forms_and_the_mix_text_are_one_mix(two):
    a, b = two
    runs = []
    for data in ([(a, 0.75), (b, 0.25)], ((a, 3), (b, 1)), {a: 0.75, b: 0.25},
                 f"mix:0.75={a}|0.25={b}"):
        with gpufeed.Loader(data, epochs=1, **SMALL) as loader:
            runs.append(epoch(loader))
    assert runs[0] == runs[1] == runs[2] == runs[3]


def test_not_a_mix_has_no_sources_and_one_source_stat(two):
    a, _ = two
    with gpufeed.Loader(a, epochs=1, **SMALL) as loader:
        n = 0
        for batch in loader:
            assert batch.sources is None
            n += batch.count
        (st,) = loader.source_stats()
    assert (st["size"], st["first_index"], st["label_offset"], st["samples"]) == (24, 0, 0, n)
    assert st["weight"] == 1 and st["share"] == 1


def test_sources_is_an_int32_array_like_the_labels(two):
    a, b = two
    with gpufeed.Loader([(a, 1), (b, 1)], epochs=1, **SMALL) as loader:
        batch = next(iter(loader))
        view = memoryview(batch.sources)
        assert (view.format, view.shape) == ("i", (batch.count,))
        torch = pytest.importorskip("torch")
        t = torch.from_dlpack(batch.sources)
        assert t.dtype == torch.int32 and t.tolist() == view.tolist()


def test_state_dict_resumes_a_mix_exactly(two):
    a, b = two
    mix = [(a, 0.6), (b, 0.4)]
    with gpufeed.Loader(mix, epochs=2, **SMALL) as loader:
        it = iter(loader)
        for _ in range(3):
            next(it)
        state = loader.state_dict()
        rest = [(ints(x.indices), ints(x.sources)) for x in it]
        rest += [(ints(x.indices), ints(x.sources)) for x in loader]
    with gpufeed.Loader(mix, epochs=2, **SMALL) as loader:
        loader.load_state_dict(state)
        again = [(ints(x.indices), ints(x.sources)) for x in loader]
        again += [(ints(x.indices), ints(x.sources)) for x in loader]
    assert again == rest


def test_a_mix_resumes_on_another_world(two):
    """A 2-rank state taken by one rank: what the two had not delivered of
    the epoch's sequence, then the one rank's own epoch."""
    a, b = two
    mix = [(a, 1), (b, 1)]
    whole = []
    with gpufeed.Loader(mix, world=1, rank=0, epochs=2, **SMALL) as loader:
        whole = epoch(loader)[0]
        second = epoch(loader)[0]
    seen = []
    for rank in range(2):
        with gpufeed.Loader(mix, world=2, rank=rank, epochs=2, **SMALL) as loader:
            it = iter(loader)
            for _ in range(2):
                seen += ints(next(it).indices)
            state = loader.state_dict()
    with gpufeed.Loader(mix, world=1, rank=0, epochs=2, **SMALL) as loader:
        with pytest.warns(gpufeed.WorldChanged, match="resumed a 2-rank state on 1 ranks"):
            loader.load_state_dict(state)
        seen += epoch(loader)[0]
        assert epoch(loader)[0] == second
    assert sorted(seen) == sorted(whole)
    with gpufeed.Loader([(a, 1), (b, 2)], **SMALL) as loader:  # other weights: another mix
        with pytest.raises(gpufeed.InvalidArgument, match="index_hash"):
            loader.load_state_dict(state)


def test_verify_walks_every_source(two, damaged):
    a, _ = two
    root, damage = damaged  # 60 samples, 3 bad
    bad = gpufeed.verify([(a, 5), (root, 1)])  # weights do not change what is checked
    assert len(bad) == 3
    for p in damage:
        assert sum(x.path.endswith(p) for x in bad) == 1, (p, bad)


@pytest.mark.parametrize("data, exc, words", [
    ([], ValueError, "a mix of no data sets"),
    (["a"], TypeError, "item 0 is 'a'"),
    ([("a", 1, 2)], TypeError, "item 0"),
    ([("a", 0)], ValueError, "the weight of 'a' is 0"),
    ([("a", -1.5)], ValueError, "the weight of 'a' is -1.5"),
    ([("a", math.nan)], ValueError, "the weight of 'a' is nan"),
    ([("a", math.inf)], ValueError, "the weight of 'a' is inf"),
    ([("a", True)], TypeError, "the weight of 'a' is True: a number, not bool"),
    ([("a", "0.5")], TypeError, "the weight of 'a' is '0.5': a number, not str"),
    ([("a|b", 1)], ValueError, "'a|b': a data set in a mix cannot have '|'"),
    ([("mix:1=a", 1)], ValueError, "a mix cannot be one of a mix's data sets"),
    ([(3, 1)], TypeError, "source 0 is a path"),
    (7, TypeError, "a path (str, bytes or os.PathLike), or data sets mixed by weight"),
])
def test_a_mix_argument_s_mistakes_are_named(data, exc, words):
    with pytest.raises(exc, match="^data: .*" + re.escape(words)):
        gpufeed.Loader(data, **SMALL)


def test_first_epochs_of_their_own_length(two):
    """Under mix_epoch="first" each epoch ends at its own first exhausted
    source: len() and each `for` follow it, a `break` then set_epoch too."""
    a, b = two
    with gpufeed.Loader([(a, 3), (b, 1)], mix_epoch="first", epochs=6, **SMALL) as loader:
        lengths = set()
        for e in range(5):
            n = len(loader)
            got = sum(1 for _ in loader)
            assert got == n, (e, got, n)
            lengths.add(n)
        for _ in loader:  # a break near the end: the next `for` is the next epoch
            break
        loader.set_epoch(5)
        n = len(loader)
        assert sum(1 for _ in loader) == n
    with gpufeed.Loader([(a, 3), (b, 1)], mix_epoch="first", epochs=8, **SMALL) as loader:
        per = [sum(1 for _ in loader) for _ in range(8)]
    assert len(set(per)) > 1, per  # the epochs' lengths differ: each its own

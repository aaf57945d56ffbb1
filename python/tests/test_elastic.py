# Elastic resume across real processes: a state saved by W ranks, each its
# own process (torch.multiprocessing.spawn), resumes on W' ranks in W' new
# processes. For the moves 4->2, 4->3, 3->5 and 2->1, both orders and
# drop_last on and off, from positions in the middle of a batch, of a shard
# window (the shard order) and of the epoch:
#   phase 1: W processes read epoch 1 up to position p (the indices before
#     p kept), seek to p (mid batch) and save state_dict();
#   phase 2: W' processes each load one of those states (rank r' takes rank
#     r' % W's: any rank's state is the job's), hear one WorldChanged, read
#     the rest of epoch 1 (a `for`), then epoch 2 (a `for`: indices and a
#     hash of each batch's pixels);
#   phase 3 (here): a fresh W'-rank run's epoch 2, rank by rank.
# Epoch 1 over both worlds: every sample once, but padding (fewer than
# W + W' - 1 repeats) or drop_last's cut (no repeats, fewer than
# W' * batch_size missing), the W' ranks' shares equal; epoch 2 the fresh
# run's, indices and bytes. tests/test_elastic.c holds the same in one
# process and the sampler exhaustively.
#
# Every case of a phase runs inside the same processes (one spawn a phase:
# process i plays rank i of every world that has one), spawned from a
# driver, this file run as a script: spawn's children run the parent's main
# module, and the test process's is run.py, which would start pytest again.
import glob
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import traceback
import warnings

import pytest

import gpufeed

torch = pytest.importorskip("torch")
# Eleven interpreters importing torch: minutes under a sanitizer, which sees
# the same C paths in tests/test_elastic.c (CI runs it under ASan and TSan).
pytestmark = pytest.mark.skipif(os.environ.get("GPUFEED_PY_SANITIZED") == "1",
                                reason="the spawned ranks run in the plain build")

COUNTS = (5, 7, 3, 6, 4, 8, 2, 5, 6, 4, 1, 3)  # samples a shard: 54, unequal
N = sum(COUNTS)
B = 3  # batch size: positions 4, 5, 7, ... are mid batch
WINDOW = 2
MOVES = ((4, 2), (4, 3), (3, 5), (2, 1))
ORDERS = ("global", "shards")


def options(order, drop, rank, world):
    kw = dict(batch_size=B, image_size=8, threads=1, device="cpu", seed=7, transform="train",
              drop_last=drop, order=order, rank=rank, world=world)
    if order == "shards":
        kw["shard_window"] = WINDOW
    return kw


def indices(b):
    return memoryview(b.indices).tolist()


def digest(b):
    return hashlib.sha256(bytes(memoryview(b.data))).hexdigest()[:16]


def share(world, drop):
    """A rank's positions in a whole epoch."""
    return N // world if drop else -(-N // world)


# ---- the processes ----------------------------------------------------------

def phase1(plan, i):
    """Rank i of each case's first world: epoch 1 up to p, then the state at p."""
    out = {}
    for case in plan["cases"]:
        if i >= case["from"]:
            continue
        for label, p in case["positions"].items():
            try:
                kw = options(case["order"], case["drop"], i, case["from"])
                with gpufeed.Loader(plan["data"], **kw) as loader:
                    loader.set_epoch(1)
                    prefix, straddle = [], []
                    for b in loader:
                        assert b.epoch == 1, (b.epoch, b.position)
                        idx, start = indices(b), b.position - b.count
                        if b.position >= p:  # the batch p falls in: its first p - start
                            prefix += idx[:p - start]
                            straddle = idx[p - start:]
                            break
                        prefix += idx
                    del b
                    # A seek to p (a state of this world: no warning), then its state.
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        loader.load_state_dict({**loader.state_dict(), "epoch": 1,
                                                "position": p})
                    state = loader.state_dict()
                    after = indices(next(loader))
                out.setdefault(case["key"], {})[label] = dict(
                    prefix=prefix, straddle=straddle, after=after, state=state,
                    warnings=[(w.category.__name__, str(w.message)) for w in caught])
            except Exception:
                out.setdefault(case["key"], {})[label] = dict(error=traceback.format_exc())
    return out


def phase2(plan, i):
    """Rank i of each case's second world: a phase-1 state, the rest of epoch 1,
    epoch 2."""
    saved = {}
    for name in glob.glob(os.path.join(plan["out"], "phase1-*.json")):
        with open(name) as f:
            saved[int(name.rsplit("-", 1)[1][:-5])] = json.load(f)
    out = {}
    for case in plan["cases"]:
        if i >= case["to"]:
            continue
        for label in case["positions"]:
            try:
                state = saved[i % case["from"]][case["key"]][label]["state"]
                kw = options(case["order"], case["drop"], i, case["to"])
                with gpufeed.Loader(plan["data"], **kw) as loader:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        loader.load_state_dict(state)
                    lens = [len(loader)]  # the rest's batches, then an epoch's
                    rest = [(b.epoch, b.position, b.count, indices(b)) for b in loader]
                    after = loader.state_dict()
                    lens.append(len(loader))
                    second = [(b.epoch, b.position, b.count, indices(b), digest(b))
                              for b in loader]
                out.setdefault(case["key"], {})[label] = dict(
                    rest=rest, second=second, state_after_rest=after, lens=lens,
                    warnings=[(w.category.__name__, str(w.message)) for w in caught])
            except Exception:
                out.setdefault(case["key"], {})[label] = dict(error=traceback.format_exc())
    return out


def worker(i, phase, plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    out = (phase1 if phase == 1 else phase2)(plan, i)
    with open(os.path.join(plan["out"], f"phase{phase}-{i}.json"), "w") as f:
        json.dump(out, f)


def driver(plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    torch.multiprocessing.spawn(worker, args=(1, plan_path),
                                nprocs=max(c["from"] for c in plan["cases"]))
    torch.multiprocessing.spawn(worker, args=(2, plan_path),
                                nprocs=max(c["to"] for c in plan["cases"]))


# ---- the test process ---------------------------------------------------------

def windows(seq, shard_of):
    """The shard order's windows, [start, end) in an epoch's sequence of the
    whole set: runs of WINDOW whole shards, their samples mixed."""
    out, start, shards, seen = [], 0, set(), 0
    for at, x in enumerate(seq):
        shards.add(shard_of[x])
        seen += 1
        if len(shards) == WINDOW and seen == sum(COUNTS[k] for k in shards):
            out.append((start, at + 1))
            start, shards, seen = at + 1, set(), 0
    assert start == len(seq) and len(out) == len(COUNTS) // WINDOW, (seq, out)
    return out


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """12 tar shards of COUNTS samples, JPEG and PNG members by turns, each with
    its .cls; (pattern, the shard of each index, epoch 1's shard-order sequence)."""
    from conftest import make_dataset
    root = tmp_path_factory.mktemp("elastic")
    per_class = -(-N // 6)
    files = [sorted(glob.glob(os.path.join(make_dataset(root / fmt, classes=3,
                                                        per_class=per_class, size="16x16",
                                                        fmt=fmt), "*", "*")))
             for fmt in ("jpg", "png")]
    files = [f for pair in zip(*files) for f in pair][:N]
    shard_of = []
    for k, count in enumerate(COUNTS):
        with tarfile.open(root / f"s{k}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
            for j in range(count):
                path = files.pop(0)
                label = re.search(r"class_(\d+)", path).group(1)
                for name, data in ((f"k{k:02d}_{j:02d}{os.path.splitext(path)[1]}",
                                    open(path, "rb").read()),
                                   (f"k{k:02d}_{j:02d}.cls", f"{int(label)}\n".encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
                shard_of.append(k)
    pattern = str(root / f"s{{0..{len(COUNTS) - 1}}}.tar")
    with gpufeed.Loader(pattern, **options("shards", False, 0, 1)) as loader:
        assert [loader.sample_path(i).split(":")[0] for i in range(N)] == \
            [f"s{k}.tar" for k in shard_of]
        loader.set_epoch(1)
        seq = [i for b in loader for i in indices(b)]
    assert sorted(seq) == list(range(N))
    return pattern, shard_of, seq


def positions(world, order, drop, seq, shard_of):
    """{label: p}: rank 0 of `world` stops at p in epoch 1."""
    out = {"mid batch": B + 1, "mid epoch": share(world, drop) // 2 + 1}
    if order == "shards":
        # Rank 0's span is the sequence's head: p strictly inside a window
        # and mid batch too, another p than the others.
        for start, end in windows(seq, shard_of):
            inside = [p for p in range(start + 1, end) if p < share(world, drop)
                      and p % B and p not in out.values()]
            if inside:
                out["mid window"] = inside[len(inside) // 2]
                break
        assert "mid window" in out
    assert all(0 < p < share(world, drop) and p % B for p in out.values()), out
    return out


def key(move, order, drop):
    return f"{move[0]}-{move[1]}-{order}-{'drop' if drop else 'pad'}"


CASES = [(m, o, d) for m in MOVES for o in ORDERS for d in (False, True)]


@pytest.fixture(scope="module")
def runs(shards, tmp_path_factory):
    """Phases 1 and 2 of every case, in spawned processes: {phase: {rank: ...}}."""
    pattern, shard_of, seq = shards
    out = tmp_path_factory.mktemp("elastic_runs")
    plan = dict(data=pattern, out=str(out), cases=[
        dict(key=key(m, o, d), order=o, drop=d, positions=positions(m[0], o, d, seq, shard_of),
             **{"from": m[0], "to": m[1]}) for m, o, d in CASES])
    plan_path = out / "plan.json"
    plan_path.write_text(json.dumps(plan))
    done = subprocess.run([sys.executable, os.path.abspath(__file__), str(plan_path)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout
    got = {}
    for name in glob.glob(str(out / "phase*-*.json")):
        phase, rank = re.search(r"phase(\d)-(\d+)\.json$", name).groups()
        with open(name) as f:
            got.setdefault(int(phase), {})[int(rank)] = json.load(f)
    return plan, got


def fresh_epoch_2(pattern, order, drop, rank, world):
    with gpufeed.Loader(pattern, **options(order, drop, rank, world)) as loader:
        loader.set_epoch(2)
        return [(b.epoch, b.position, b.count, indices(b), digest(b)) for b in loader]


def result(got, phase, rank, k, label):
    r = got[phase][rank][k][label]
    assert "error" not in r, f"phase {phase}, rank {rank}, {label}:\n{r['error']}"
    return r


@pytest.mark.parametrize("move,order,drop", CASES, ids=[key(*c) for c in CASES])
def test_a_state_resumes_on_another_number_of_ranks_in_other_processes(shards, runs, move,
                                                                         order, drop):
    pattern, shard_of, seq = shards
    plan, got = runs
    w, w2 = move
    k = key(move, order, drop)
    case = next(c for c in plan["cases"] if c["key"] == k)
    fresh = [fresh_epoch_2(pattern, order, drop, r, w2) for r in range(w2)]
    for label, p in case["positions"].items():
        where = f"{k}, {label} (p {p})"
        seen = [0] * N
        # Phase 1: each rank stopped at p; any rank's state is the job's.
        states = []
        for r in range(w):
            one = result(got, 1, r, k, label)
            assert one["warnings"] == [], where
            assert len(one["prefix"]) == p, where
            # After the seek to p the next batch starts at p, mid batch.
            assert one["after"][:len(one["straddle"])] == one["straddle"], where
            assert one["after"] and one["straddle"], where
            for i in one["prefix"]:
                seen[i] += 1
            states.append({**one["state"], "rank": None})
            assert one["state"]["rank"] == r, where
        assert all(s == states[0] for s in states), (where, states)
        st = states[0]
        assert (st["world"], st["epoch"], st["position"], st["samples"]) == (w, 1, p, N), where
        assert (st["rest_world"], st["rest_position"], st["rest_taken"]) == (0, 0, 0), where
        assert st["shard_window"] == (WINDOW if order == "shards" else 0), where
        if order == "shards":  # rank 0's span is the sequence's head: mid window is so
            assert result(got, 1, 0, k, label)["prefix"] == seq[:p], where
        delivered_before = sum(1 for c in seen if c)
        # Phase 2: one warning each, the rest of epoch 1 in equal shares.
        shares = []
        for r in range(w2):
            two = result(got, 2, r, k, label)
            assert [c for c, _ in two["warnings"]] == ["WorldChanged"], (where, two["warnings"])
            # len(): the rest's batches, then a whole epoch's.
            assert two["lens"] == [len(two["rest"]), len(two["second"])], (where, two["lens"])
            assert two["warnings"][0][1] == (
                f"gpufeed: resumed a {w}-rank state on {w2} ranks at epoch 1, sample "
                f"{delivered_before} of {N}"), where
            assert two["rest"], where
            for epoch, position, count, idx in two["rest"]:
                assert epoch == 1 and count == len(idx), where
                if drop:
                    assert count == B, (where, "drop_last delivered a short batch")
                for i in idx:
                    seen[i] += 1
            shares.append([(position, count) for _, position, count, _ in two["rest"]])
            # Epoch 2 is a fresh W'-rank run's: indices, positions and bytes.
            assert two["second"] == [list(b) for b in fresh[r]], (where, r)
            # The state after the rest resumes at epoch 2's first batch: (2, 0),
            # or under drop_last the rest's last full batch's end (its short
            # batch is dropped again).
            after = (two["state_after_rest"]["epoch"], two["state_after_rest"]["position"])
            end = (1, two["rest"][-1][1]) if two["rest"] else (1, 0)
            assert after == (2, 0) or (drop and after == end), (where, after)
        assert all(s == shares[0] for s in shares), (where, "unequal shares", shares)
        missing = [i for i in range(N) if seen[i] == 0]
        repeats = sum(c - 1 for c in seen if c > 1)
        if drop:
            assert repeats == 0, (where, seen)
            assert len(missing) < w2 * B, (where, missing)
        else:
            assert missing == [], (where, "never delivered", missing)
            assert repeats < w + w2 - 1, (where, seen)


if __name__ == "__main__":
    driver(sys.argv[1])


@pytest.mark.parametrize("order", ["global", "shards"])
@pytest.mark.parametrize("drop", [False, True])
def test_leaving_the_split_epoch_gives_the_new_worlds_whole_epochs(shards, order, drop):
    """The rest is one epoch's: set_epoch out of it, or a `for` after a `break`
    in it, reads the new world's whole epoch, and len() says so."""
    pattern = shards[0]
    with gpufeed.Loader(pattern, **options(order, drop, 0, 4)) as old:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            old.load_state_dict({**old.state_dict(), "epoch": 1, "position": 4})
        state = old.state_dict()
    fresh = fresh_epoch_2(pattern, order, drop, 1, 2)
    whole = share(2, drop) // B if drop else -(-share(2, drop) // B)
    with gpufeed.Loader(pattern, **options(order, drop, 1, 2)) as new:
        with pytest.warns(gpufeed.WorldChanged):
            new.load_state_dict(state)
        assert len(new) < whole  # the rest's batches
        new.set_epoch(2)
        assert len(new) == whole
        assert [(b.epoch, b.position, b.count, indices(b), digest(b)) for b in new] == fresh
    with gpufeed.Loader(pattern, **options(order, drop, 1, 2)) as new:
        with pytest.warns(gpufeed.WorldChanged):
            new.load_state_dict(state)
        for b in new:  # one batch of the rest, then a break
            assert b.epoch == 1
            break
        assert [(b.epoch, b.position, b.count, indices(b), digest(b)) for b in new] == fresh
        assert len(new) == whole

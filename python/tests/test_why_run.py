# python -m gpufeed why|run SCRIPT: unmodified scripts written to tmp_path,
# run in a subprocess as a user would; what they print and their exit status
# must be theirs, with gpufeed's lines on stderr beside them.
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import make_dataset

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytestmark = pytest.mark.skipif(os.environ.get("GPUFEED_PY_SANITIZED") == "1",
                                reason="whole scripts in subprocesses: the plain builds run them")

HEAD = """\
import sys, time
import torch
import torchvision.datasets as datasets
import torchvision.transforms as T
from torch.utils.data import DataLoader, Dataset

class Noise(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return torch.zeros(3, 8, 8), i

def folder(root):
    return datasets.ImageFolder(root, transform=T.Compose([T.RandomResizedCrop(32), T.ToTensor()]))
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("why") / "set", classes=3, per_class=24,
                        size="96x72")


def gpufeed(tmp_path, command, body, *args):
    """(exit status, stdout, stderr) of python -m gpufeed COMMAND script.py ARGS."""
    script = tmp_path / "script.py"
    script.write_text(HEAD + textwrap.dedent(body))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # gpufeed as this process has it
    cmd = [sys.executable, "-m", "gpufeed", command] if command else [sys.executable]
    p = subprocess.run(cmd + [str(script), *args], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=300)
    return p.returncode, p.stdout, p.stderr


def line_of(tmp_path, text):
    """The script's line number of its first line containing text."""
    lines = (tmp_path / "script.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.mark.parametrize("workers", [0, 2])
def test_why_says_a_loader_with_tiny_compute_is_input_bound(tmp_path, root, workers):
    rc, out, err = gpufeed(tmp_path, "why", f"""
        loader = DataLoader(folder(sys.argv[1]), batch_size=8, shuffle=True, num_workers={workers})
        for epoch in range(2):
            for x, y in loader:
                x.sum()
        print("trained")
    """, root)
    assert rc == 0, err
    assert out == "trained\n"  # the script's output is its own
    n = line_of(tmp_path, "loader = DataLoader(")
    assert f"gpufeed why: DataLoader at script.py:{n} (ImageFolder, 72 samples; batch_size 8, " \
           f"num_workers {workers})" in err
    assert "  verdict    input-bound by " in err, err
    assert re.search(r"batches +16 in the steady state: [\d.]+ batches/s, \d+ images/s "
                     r"\(8 a batch\)", err), err
    assert "the first batch of each of 2 iterators, not counted above" in err
    assert f"gpufeed.DataLoader can take it: `python -m gpufeed run {tmp_path / 'script.py'} " \
           f"{root}` puts it in place" in err


def test_why_says_a_loader_slower_than_its_compute_is_compute_bound(tmp_path, root):
    rc, out, err = gpufeed(tmp_path, "why", """
        loader = DataLoader(folder(sys.argv[1]), batch_size=8)
        for x, y in loader:
            time.sleep(0.05)  # the step: well above 8 small JPEGs' decode
    """, root)
    assert rc == 0, err
    assert "  verdict    compute-bound (input 0." in err, err
    assert "(input / compute = 0." in err
    assert "> 1.1 input-bound, < 0.9 compute-bound, else balanced" in err


def test_why_says_a_prefetching_loader_that_keeps_ahead_is_compute_bound(tmp_path, root):
    """With workers the loader's own time is hidden: a wait of a batch's
    hand-over alone (a few ms against a 0.25 s step) is compute-bound."""
    rc, out, err = gpufeed(tmp_path, "why", """
        loader = DataLoader(folder(sys.argv[1]), batch_size=8, num_workers=2)
        for x, y in loader:
            time.sleep(0.25)  # the step: far above a worker's 8 small JPEGs
    """, root)
    assert rc == 0, err
    assert "  verdict    compute-bound (input <= 1.00x compute: the loader kept ahead" in err, err


def test_why_names_why_gpufeed_cannot_take_a_loader(tmp_path):
    rc, out, err = gpufeed(tmp_path, "why", """
        loader = DataLoader(Noise(), batch_size=4)
        class MyLoader(DataLoader):
            pass
        mine = MyLoader(Noise(), batch_size=4)
        for x, y in loader:
            pass
    """)
    assert rc == 0, err
    from gpufeed.dataloader import _check
    import torch.utils.data as tud

    class Noise(tud.Dataset):  # the script's name: the message names the class
        pass
    message = _check(Noise(), batch_size=4)
    assert message.startswith("gpufeed.DataLoader: a data set of type Noise is not supported")
    assert f"  gpufeed    gpufeed.DataLoader cannot take it: {message}\n" in err, err
    n = line_of(tmp_path, "mine = MyLoader(")
    assert f"gpufeed why: MyLoader at script.py:{n} (Noise, 64 samples; " in err
    assert "  timing     none: never iterated" in err
    assert "it is a MyLoader, a subclass of DataLoader" in err


def test_check_runs_the_constructors_checks_without_opening_a_loader(root):
    import gpufeed
    import torchvision.datasets as datasets
    import torchvision.transforms as T
    from gpufeed.dataloader import _check
    good = datasets.ImageFolder(root, transform=T.Compose([T.RandomResizedCrop(32), T.ToTensor()]))
    assert _check(good, 8, num_workers=2) is None
    for kw in ({"timeout": 3}, {"batch_size": None}):
        message = _check(good, **kw)
        with pytest.raises(gpufeed.Unsupported) as e:
            gpufeed.DataLoader(good, **kw)
        assert message == str(e.value)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        _check(good, num_workers=-1)  # torch's refusal, as the constructor raises it


def test_run_puts_gpufeed_in_place_where_it_can(tmp_path, root):
    rc, out, err = gpufeed(tmp_path, "run", """
        import torch.utils.data.dataloader as tdl
        import gpufeed
        mine = DataLoader(folder(sys.argv[1]), batch_size=8, shuffle=True)
        theirs = tdl.DataLoader(Noise(), batch_size=4)
        class MyLoader(DataLoader):
            def __init__(self, dataset, **kw):
                super().__init__(dataset, **kw)
                self.mine = True
        sub = MyLoader(folder(sys.argv[1]), batch_size=8)
        for loader in (mine, theirs, sub):
            print(type(loader).__module__, type(loader).__name__,
                  isinstance(loader, DataLoader), isinstance(loader, tdl.DataLoader),
                  isinstance(loader, torch.utils.data.DataLoader))
            loader.note = "kept"  # torch's __setattr__, on every kind
            try:
                loader.batch_size = 3
            except ValueError as e:
                print("refused:", e)
        print(issubclass(gpufeed.DataLoader, DataLoader), issubclass(MyLoader, DataLoader),
              DataLoader not in gpufeed.DataLoader.__mro__, DataLoader in MyLoader.__mro__,
              sub.mine, DataLoader[int] == tdl.DataLoader.__mro__[1][int])
        images = sum(len(x) for x, y in mine) + sum(len(x) for x, y in sub)
        print(images, sum(len(x) for x, y in theirs))
    """, root)
    assert rc == 0, err
    assert out.splitlines() == [
        "gpufeed DataLoader True True True",
        "refused: batch_size attribute should not be set after DataLoader is initialized",
        "torch.utils.data.dataloader DataLoader True True True",
        "refused: batch_size attribute should not be set after DataLoader is initialized",
        "__main__ MyLoader True True True",
        "refused: batch_size attribute should not be set after MyLoader is initialized",
        "True True True True True True",
        "144 64"], err
    at = {text: line_of(tmp_path, text)
          for text in ("mine = DataLoader(", "theirs = tdl.DataLoader(", "sub = MyLoader(")}
    assert err.splitlines()[:3] == [
        f"gpufeed run: DataLoader at script.py:{at['mine = DataLoader(']} (ImageFolder, 72 "
        f"samples): gpufeed",
        f"gpufeed run: DataLoader at script.py:{at['theirs = tdl.DataLoader(']} (Noise, 64 "
        f"samples): torch's (gpufeed cannot take it: gpufeed.DataLoader: a data set of type "
        f"Noise is not supported; it supports torchvision ImageFolder/DatasetFolder (or a "
        f"Subset of one) with the default loader and a transform composed of: "
        + "; ".join(__import__("gpufeed.dataloader").dataloader.SUPPORTED) + ")",
        f"gpufeed run: MyLoader at script.py:{at['sub = MyLoader(']} (ImageFolder, 72 samples): "
        f"torch's (a subclass of DataLoader, the script's own: left as it is)"], err


@pytest.mark.parametrize("command", ["why", "run", None])
def test_the_scripts_argv_exit_status_and_traceback_are_its_own(tmp_path, command):
    rc, out, err = gpufeed(tmp_path, command, """
        import os
        print(sys.argv, __name__, __file__ == os.path.abspath(sys.argv[0]),
              sys.path[0] == os.path.dirname(os.path.realpath(__file__)),
              sys.modules["__main__"].Noise is Noise)
        loader = DataLoader(Noise(), batch_size=4)
        next(iter(loader))
        if sys.argv[1] == "exit":
            sys.exit(int(sys.argv[2]))
        def deep():
            raise RuntimeError("the script's own error")
        deep()
    """, "exit", "3", "a b")
    assert rc == 3, err
    assert out == f"{[str(tmp_path / 'script.py'), 'exit', '3', 'a b']} __main__ True True True\n"
    if command == "why":
        assert "gpufeed why: DataLoader at script.py:" in err
    rc, out, err = gpufeed(tmp_path, command, (tmp_path / "script.py").read_text()[len(HEAD):],
                           "raise")
    assert rc == 1
    trace = err[err.index("Traceback"):]
    assert trace.splitlines()[-1] == "RuntimeError: the script's own error"
    assert "gpufeed" not in trace  # the script's frames alone
    assert f'File "{tmp_path / "script.py"}", line' in trace
    if command == "why":  # the report too, the script having failed
        assert "gpufeed why: DataLoader at script.py:" in err


@pytest.mark.parametrize("argv, status", [([], 2), (["frob"], 2), (["--help"], 0),
                                          (["why"], 2), (["run", "--help"], 0)])
def test_usage(argv, status):
    p = subprocess.run([sys.executable, "-m", "gpufeed", *argv], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert p.returncode == status
    assert "usage: python -m gpufeed" in (p.stdout if status == 0 else p.stderr)


def test_whys_timing_costs_microseconds_a_batch():
    """The hot path: two perf_counter calls and a few adds. Against a 5 ms
    step, 2% is 100 us a batch; it costs about a microsecond."""
    from gpufeed import why

    class It:
        def __init__(self):
            self.left = 20000

        def __next__(self):
            self.left -= 1
            return self.left

    plain = It.__next__
    timed = why._timed(plain)
    it = It()
    it._gpufeed_why = why._Tally("DataLoader", "x:1", "Noise", "torch", 0, 1, None)
    it._gpufeed_why.last = time.perf_counter()

    def best(fn):
        runs = []
        for _ in range(5):
            it.left = 20000
            t = time.perf_counter()
            for _ in range(20000):
                fn(it)
            runs.append((time.perf_counter() - t) / 20000)
        return min(runs)
    extra = best(timed) - best(plain)
    assert it._gpufeed_why.n >= 20000
    assert extra < 20e-6, f"{extra * 1e6:.1f} us a batch"

"""`python -m gpufeed why SCRIPT [ARGS...]`: runs an unmodified PyTorch script
and says, per DataLoader, whether it waited for its batches.

The script runs as `python SCRIPT ARGS` would (_script.py). torch's
DataLoader (and gpufeed's) is wrapped in place, so isinstance, subclasses
and the script's own attributes are untouched: __init__ records where the
loader was made and whether gpufeed.DataLoader could take it (its own
check, dataloader._check); __iter__ hands the iterator the loader's
tally; the iterator's class's __next__ times each batch. The hot path is
two perf_counter calls and a few adds on the tally, so a run that is not
input-bound is not slowed (under 2%: test_why_run.py measures it).

Per loader the script's time splits into the time it waited inside next()
and the time between batches (its own work: the compute). The first batch
of each iterator (worker start-up) is reported apart, not in the steady
state. The verdict is `gpufeed bench`'s (src/cli/bench_verdict.c), words
and cut-offs: input / compute above INPUT_BOUND is input-bound, below
COMPUTE_BOUND compute-bound, else balanced. With num_workers=0 the script
loads its own batches in next(), so the wait is the input's time
(bench's prefetch depth 1: input and compute take turns). With workers
(or gpufeed's threads) the loader prefetches and the wait is only what
the input lacks: input / compute is (wait + compute) / compute while it
waits; where it waits under KEEPS_AHEAD of the time the loader keeps ahead,
its own time hidden: compute-bound.

The report goes to stderr when the script ends, however it ends; the
script's output and exit status are its own.
"""
import functools
import shlex
import sys
from time import perf_counter

from . import _script

# bench's cut-offs (src/cli/bench_parts.h: INPUT_BOUND, COMPUTE_BOUND).
INPUT_BOUND = 1.1
COMPUTE_BOUND = 0.9
# With workers prefetching: a wait under this share of the time is the
# loader keeping ahead (what is left is the hand-over of a ready batch: a
# worker's batch unpickled, a few ms; a 0.3 s step waited 1.2% for it).
KEEPS_AHEAD = 0.05

USAGE = "usage: python -m gpufeed why SCRIPT [ARGS...]"

_loaders = []  # every tally, in the order the loaders were made


class _Tally:
    """One loader's figures; the iterators' __next__ adds to it."""
    __slots__ = ("name", "site", "what", "kind", "workers", "batch_size", "check", "iterators",
                 "first_n", "first_wait", "n", "wait", "outside", "last", "per_batch",
                 "unmeasured")

    def __init__(self, name, site, what, kind, workers, batch_size, check):
        self.name, self.site, self.what, self.kind = name, site, what, kind
        self.workers, self.batch_size, self.check = workers, batch_size, check
        self.iterators = self.first_n = self.n = 0
        self.first_wait = self.wait = self.outside = 0.0
        self.last = None  # when the last batch was handed out; None: next is a first
        self.per_batch = None
        self.unmeasured = None

    def first(self, item, waited):
        """A first batch of an iterator: start-up, apart from the steady state."""
        self.first_n += 1
        self.first_wait += waited
        if self.per_batch is None:
            self.per_batch = _batch_len(item)


def _batch_len(item):
    """The first tensor's batch dimension, or None where it cannot tell."""
    for _ in range(3):  # a tensor, or one in a tuple/list/dict (nested a little)
        shape = getattr(item, "shape", None)
        if shape is not None:
            return int(shape[0]) if len(shape) else None
        if isinstance(item, (tuple, list)) and item:
            item = item[0]
        elif isinstance(item, dict) and item:
            item = next(iter(item.values()))
        else:
            return None
    return None


def _timed(next_):
    def __next__(self):
        t0 = perf_counter()
        item = next_(self)  # StopIteration, an error: not a batch, not counted
        t1 = perf_counter()
        st = getattr(self, "_gpufeed_why", None)
        if st is not None:
            if st.last is None:
                st.first(item, t1 - t0)
            else:
                st.wait += t1 - t0
                st.outside += t0 - st.last
                st.n += 1
            st.last = t1
        return item
    functools.update_wrapper(__next__, next_)
    __next__._gpufeed_why = True
    return __next__


def _time_next(cls):
    """Times the __next__ cls's iterators run (where it is defined); False
    where it cannot (a generator's)."""
    for k in cls.__mro__:
        fn = k.__dict__.get("__next__")
        if fn is None:
            continue
        if getattr(fn, "_gpufeed_why", False):
            return True
        try:
            setattr(k, "__next__", _timed(fn))
        except TypeError:  # a built-in type
            return False
        return True
    return False


def _maker(loader):
    """The frame of the `DataLoader(` call: above the __init__s of this loader
    (a subclass's, then DataLoader's)."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_name == "__init__" and f.f_locals.get("self") is loader:
        f = f.f_back
    return f


def _checked(loader, args, kwargs):
    """None where gpufeed.DataLoader can take this loader, else why not."""
    from .dataloader import _check
    from torch.utils.data import DataLoader
    if isinstance(loader, _gpufeed_class()):
        return None
    if type(loader) is not DataLoader:
        return (f"it is a {type(loader).__name__}, a subclass of DataLoader: its own "
                f"behaviour is the script's (gpufeed run leaves it as it is)")
    try:
        return _check(*args, **kwargs)
    except Exception as e:  # what torch too would refuse, or an IndexError
        return f"{type(e).__name__}: {e}"


@functools.lru_cache(maxsize=1)
def _gpufeed_class():
    import gpufeed
    return gpufeed.DataLoader


def _wrap_init(init, kind):
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if self.__dict__.get("_gpufeed_why") is not None:
            return  # recorded already (an __init__ that calls another)
        f = _maker(self)
        dataset = args[0] if args else kwargs.get("dataset")
        name = "gpufeed.DataLoader" if kind == "gpufeed" else type(self).__name__
        st = _Tally(name, _script.site(f) if f else "?", _script.dataset_words(dataset), kind,
                    getattr(self, "num_workers", 0), getattr(self, "batch_size", None),
                    _checked(self, args, kwargs))
        object.__setattr__(self, "_gpufeed_why", st)
        _loaders.append(st)
    return __init__


def _wrap_iter(iter_):
    @functools.wraps(iter_)
    def __iter__(self):
        it = iter_(self)
        st = self.__dict__.get("_gpufeed_why")
        if st is None:  # made before why's patches
            return it
        st.iterators += 1
        st.last = None
        try:
            it._gpufeed_why = st
            timed = _time_next(type(it))
        except (AttributeError, TypeError):
            timed = False
        if not timed:
            st.unmeasured = f"its iterator ({type(it).__name__}) cannot be timed"
        return it
    return __iter__


def patch():
    """Wraps torch's DataLoader and gpufeed's in place (their classes, so
    isinstance and subclasses hold)."""
    from torch.utils.data import DataLoader
    from .dataloader import _DataLoader
    _gpufeed_class()  # gpufeed's, made from torch's own class
    for cls, kind in ((DataLoader, "torch"), (_DataLoader, "gpufeed")):
        cls.__init__ = _wrap_init(cls.__dict__["__init__"], kind)
        cls.__iter__ = _wrap_iter(cls.__dict__["__iter__"])


def _verdict(st):
    """(verdict words, the legend line or None)."""
    if st.n == 0:
        return "too few batches to tell (none past the first of each iterator)", None
    share = st.wait / (st.wait + st.outside) if st.wait + st.outside > 0 else 0.0
    prefetch = st.kind == "gpufeed" or st.workers > 0
    if prefetch:
        factor = (st.wait + st.outside) / st.outside if st.outside > 0 else float("inf")
    else:
        factor = st.wait / st.outside if st.outside > 0 else float("inf")
    legend = (f"(input / compute = {factor:.2f}; > {INPUT_BOUND:.1f} input-bound, "
              f"< {COMPUTE_BOUND:.1f} compute-bound, else balanced)")
    if factor > INPUT_BOUND:
        words = f"input-bound by {factor:.2f}x: the script waited for batches {share:.0%} of the time"
        if not prefetch:
            words += ("; num_workers=0 makes input and compute take turns "
                      "(bench's prefetch depth 1)")
    elif prefetch and share < KEEPS_AHEAD:
        words = (f"compute-bound (input <= 1.00x compute: the loader kept ahead, waits "
                 f"{share:.1%} of the time)")
        legend = (f"(with workers the input's own time is hidden while it keeps ahead; "
                  f"it waits > {KEEPS_AHEAD:.0%}, input / compute > {INPUT_BOUND:.1f}: input-bound)")
    elif not prefetch and factor < COMPUTE_BOUND:
        words = f"compute-bound (input {factor:.2f}x compute)"
    else:
        words = (f"balanced (input {factor:.2f}x compute): any jitter stalls the script "
                 f"(it waits {share:.0%})")
    return words, legend


def _block(st, command):
    out = [f"gpufeed why: {st.name} at {st.site} ({st.what}; batch_size {st.batch_size}, "
           f"num_workers {st.workers})"]
    row = "  {:<10} {}".format
    if st.unmeasured:
        out.append(row("timing", f"none: {st.unmeasured}"))
    elif st.iterators == 0 or st.first_n == 0:
        out.append(row("timing", "none: never iterated" if st.iterators == 0
                       else "none: no batch was taken"))
    else:
        total = st.wait + st.outside
        rate = st.n / total if total > 0 else 0.0
        images = (f", {rate * st.per_batch:.0f} images/s ({st.per_batch} a batch)"
                  if st.per_batch else "")
        out.append(row("batches", f"{st.n} in the steady state: {rate:.1f} batches/s{images}"))
        share = st.wait / total if total > 0 else 0.0
        out.append(row("waited", f"{st.wait:.2f} s in next(), {st.outside:.2f} s between batches "
                                 f"(the script's own work): waiting {share:.0%} of the time"))
        out.append(row("start-up", f"{st.first_wait:.2f} s: the first batch of each of "
                                   f"{st.first_n} iterator{'s' if st.first_n != 1 else ''}, "
                                   "not counted above"))
        words, legend = _verdict(st)
        out.append(row("verdict", words))
        if legend:
            out.append(row("", legend))
    if st.kind == "gpufeed":
        out.append(row("gpufeed", "this is gpufeed.DataLoader already"))
    elif st.check is None:
        out.append(row("gpufeed", f"gpufeed.DataLoader can take it: `{command}` puts it in "
                                  "place, the script unchanged"))
    else:
        out.append(row("gpufeed", f"gpufeed.DataLoader cannot take it: {st.check}"))
    return "\n".join(out)


def report(command="python -m gpufeed run SCRIPT"):
    """The report, one block per loader (stderr)."""
    if not _loaders:
        text = "gpufeed why: the script made no DataLoader"
    else:
        text = "\n".join(_block(st, command) for st in _loaders)
    sys.stdout.flush()
    print(text, file=sys.stderr, flush=True)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    script, args = argv[0], argv[1:]
    patch()
    command = "python -m gpufeed run " + shlex.join([script, *args])
    return _script.run(script, args, lambda: report(command))

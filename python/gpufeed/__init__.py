"""gpufeed from Python: zero-copy image batches from the gpufeed C library.

    import gpufeed, torch
    with gpufeed.Loader("train/", batch_size=256, threads=2, dtype="float16",
                        layout="nchw", mean=gpufeed.IMAGENET_MEAN,
                        std=gpufeed.IMAGENET_STD) as loader:
        for epoch in range(90):
            for images, target in loader:         # one epoch per `for`
                x = torch.from_dlpack(images)     # no copy: the ring slot
                y = torch.from_dlpack(target)     # int64, as the losses take it
                train_step(x, y)

Lifetime: a batch lives in a slot of the loader's. The slot returns when
the Batch and every array or tensor made from it are gone (or after
batch.release(), once the tensors already made are gone). A batch kept
costs a slot of its own (the loader adds one, so prefetching goes on); past
max_held_batches (16) held at once, the next batch raises
gpufeed.RingStarved naming them instead of waiting forever. Keep a copy of
what you keep for long: `x.clone()`. A tensor may outlive its loader:
close() stops iteration at once and the C loader is closed when the last
slot returns.
"""
import math
import numbers
import os
import sys
import warnings

if sys.version_info < (3, 11):  # the stable ABI of 3.11: Py_buffer
    raise ImportError("gpufeed needs Python 3.11 or later")

from . import _gpufeed
from ._gpufeed import (Array, Batch, CorruptImage, DatasetError, EmptyFile, EndOfData, Error,
                       InvalidArgument, NoDevice, NotReady, OutOfMemory, ReadError,
                       RingStarved, SampleError, SampleNotFound, ThreadError, TooBig,
                       TruncatedImage, UnsupportedFormat)
from ._gpufeed import TooManyOpenFiles  # GF_EMFILE

__all__ = ["DataLoader", "MixUpCutMix", "Unsupported", "WorldChanged", "Loader", "Batch", "Array", "verify", "decode_image", "settings_table", "BadSample",
           "prepare", "prepare_plan", "PrepareError",
           "Error", "SampleError",
           "IMAGENET_MEAN", "IMAGENET_STD"] + [
    n for n in dir(_gpufeed) if isinstance(getattr(_gpufeed, n), type)
    and issubclass(getattr(_gpufeed, n), Error)]
__version__ = _gpufeed.version



class WorldChanged(UserWarning):
    """load_state_dict took a state saved on another number of ranks: the
    rest of its epoch is split across this world (the message says where)."""


IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)

# The library's settings table (gf_setting_at): every gf_settings field a
# keyword sets by its own name, with its type, default, bounds and
# spellings. Values go to C as text through gf_settings_set, so what is
# accepted, and the ValueError's reason, are the library's.
_TABLE = {row["name"]: row for row in _gpufeed.settings_table()}
# Keywords of the Python's own that set several fields.
_COMPOSITES = ("image_size", "scale", "ratio")


def _int(name, v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}: an int, not {type(v).__name__}")
    return str(v)


def _float(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name}: a number, not {type(v).__name__}")
    return repr(float(v))


def _text(name, v):
    """A keyword's value as the text gf_settings_set takes, by the row's type."""
    row = _TABLE[name]
    kind = row["type"]
    if kind in ("int", "u64"):
        return _int(name, v)
    if kind == "float":
        return _float(name, v)
    if kind == "float4":  # one number is every channel's (the library broadcasts it)
        return ",".join(_float(name, x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    if kind == "flag":
        if not isinstance(v, (bool, int)):
            raise TypeError(f"{name}: a bool")
        return "1" if v else "0"
    if kind == "path":  # str, bytes or os.PathLike, as the file system takes it
        return os.fsdecode(v)
    if kind == "text":  # fields=("jpg;png", "cls", "txt"): a sequence, or the C text
        if isinstance(v, (tuple, list)) and all(isinstance(x, str) for x in v):
            return ",".join(v)
        if not isinstance(v, str):
            raise TypeError(f"{name}: a str or a sequence of str, not {type(v).__name__}")
        return v
    if not isinstance(v, str):
        raise TypeError(f"{name}: a string, one of {', '.join(row['choices'] + row['aliases'])}")
    return v


def _set(out, name, v, keyword=None):
    text = _text(name, v)
    try:
        _gpufeed.check_setting(name, text)
    except UnicodeError:
        raise  # a path's undecodable bytes: no text to pass (UnicodeEncodeError, as ever)
    except ValueError as e:
        raise ValueError(f"{keyword}: {e}" if keyword else str(e)) from None
    out[name] = text


def _pair(name, v):
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return v
    raise TypeError(f"{name}: a pair (low, high)")


def _channel_values(kw):
    """mean= and std=: one number, or one per channel, never another count;
    refused in torchvision's 0..1 units (gpufeed's are 0..255)."""
    channels = kw.get("channels", 3)
    given = {}
    for name in ("mean", "std"):
        v = kw.get(name)
        if v is None:
            continue
        if isinstance(v, (tuple, list)):
            if isinstance(channels, int) and len(v) != channels:  # else _text names channels
                raise ValueError(f"{name}: {len(v)} values for {channels} channels (one per "
                                 f"channel, or one number for all)")
            given[name] = list(v)
        else:
            given[name] = [v]
    if len(given) < 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                 for vs in given.values() for x in vs):
        return  # a wrong type is _text's to name
    mean, std = given["mean"], given["std"]
    identity = all(x == 0 for x in mean) and all(x == 1 for x in std)
    if not identity and all(0 <= x <= 1 for x in mean) and all(0 < x <= 1 for x in std):
        times = lambda vs: "(" + ", ".join(f"{x * 255:.4g}" for x in vs) + ")"
        raise ValueError(
            f"mean={tuple(mean)}, std={tuple(std)} look like torchvision's Normalize on 0..1 "
            f"values; gpufeed normalises 0..255 values: pass mean={times(mean)}, "
            f"std={times(std)} (the same times 255; gpufeed.IMAGENET_MEAN/IMAGENET_STD are "
            f"ImageNet's), or use gpufeed.DataLoader, which takes torchvision's Normalize")


def _distributed():
    """(rank, world) of an initialised torch.distributed, else None. Never
    imports torch: a script that initialised it has imported it."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except (AttributeError, RuntimeError):
        pass
    return None


# The launcher variables the library reads (src/settings.c): any set says
# who we are, and torch.distributed is not asked.
_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                  "SLURM_PROCID", "SLURM_NTASKS")


def _settings(kw):
    """Python keyword arguments -> {gf_settings field: its text}."""
    _channel_values(kw)
    out = {}
    for name, v in kw.items():
        if v is None and (name in ("mean", "std", "rank", "world") or
                          name in _TABLE and _TABLE[name]["type"] in ("path", "text")):
            continue  # not given (a path's None: the library's own, row["zero"])
        if name == "image_size":
            if isinstance(v, int) and not isinstance(v, bool):
                v = (v, v)
            if not isinstance(v, (tuple, list)) or len(v) != 2:
                raise TypeError("image_size: an int or a pair (height, width)")
            _set(out, "height", v[0], name)
            _set(out, "width", v[1], name)
        elif name in ("scale", "ratio"):
            lo, hi = _pair(name, v)
            _set(out, name + "_min", lo, name)
            _set(out, name + "_max", hi, name)
        elif name in _TABLE:
            _set(out, name, v)
        else:
            raise TypeError(f"unexpected keyword argument '{name}'")
    if "rank" in out and "world" not in out:
        raise ValueError("rank needs world")
    if "world" in out:
        rank, world = int(out.setdefault("rank", "0")), int(out["world"])
        if world and rank >= world:
            raise ValueError(f"rank {rank} must be below world {world}")
    return out


def settings_table():
    """The library's settings: a dict per gf_settings field (name, type, default,
    min, max, zero_picks, zero, choices, aliases, help). Each is a keyword of
    Loader and decode_image; image_size=, scale= and ratio= set two at once."""
    return [dict(row) for row in _TABLE.values()]


def _path(data):
    """data as the file system's bytes: a str's undecodable bytes (surrogateescape)
    go back as they were; a NUL, which no path holds, is refused."""
    if not isinstance(data, (str, bytes, os.PathLike)):
        raise TypeError(f"data: a path (str, bytes or os.PathLike), not {type(data).__name__}")
    raw = os.fsencode(data)
    if b"\0" in raw:
        raise ValueError(f"data: {os.fsdecode(raw)!r} holds a NUL byte, which no path can")
    return raw


def _data(data):
    """data as the library's text: a path (_path), or data sets mixed by weight,
    a list of (source, weight) pairs or a dict {source: weight}, as
    b"mix:W=SOURCE|W=SOURCE..." (settings.data's mix)."""
    if isinstance(data, dict):
        pairs = list(data.items())
    elif isinstance(data, (list, tuple)):
        pairs = list(data)
    elif isinstance(data, (str, bytes, os.PathLike)):
        return _path(data)
    else:
        raise TypeError(f"data: a path (str, bytes or os.PathLike), or data sets mixed by "
                        f"weight as (source, weight) pairs, not {type(data).__name__}")
    if not pairs:
        raise ValueError("data: a mix of no data sets (give (source, weight) pairs)")
    parts = []
    for k, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"data: a mix is (source, weight) pairs; item {k} is {pair!r}")
        source, weight = pair
        if not isinstance(source, (str, bytes, os.PathLike)):
            raise TypeError(f"data: source {k} is a path (str, bytes or os.PathLike), not "
                            f"{type(source).__name__}")
        raw = _path(source)
        if b"|" in raw:  # it parts the mix's sources
            raise ValueError(f"data: {os.fsdecode(raw)!r}: a data set in a mix cannot have "
                             f"'|' in its name (it parts the mix's data sets)")
        if raw.startswith(b"mix:"):
            raise ValueError(f"data: {os.fsdecode(raw)!r}: a mix cannot be one of a mix's "
                             f"data sets: give each of its data sets as a pair")
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
            raise TypeError(f"data: the weight of {os.fsdecode(raw)!r} is {weight!r}: a "
                            f"number, not {type(weight).__name__}")
        if not math.isfinite(weight) or not weight > 0:
            raise ValueError(f"data: the weight of {os.fsdecode(raw)!r} is {weight!r}: a "
                             f"positive finite number (weights need not sum to 1)")
        parts.append(repr(float(weight)).encode() + b"=" + raw)
    return b"mix:" + b"|".join(parts)


class Loader:
    """Batches from an ImageFolder tree, a list file or tar shards, as a
    PyTorch DataLoader gives them:

        for epoch in range(90):
            for images, target in loader:   # one epoch per `for`
                ...

    Each `for` runs one epoch and stops at its last batch; len(loader) is
    its batches (this rank's). A `for` left by `break` is not resumed: the
    next `for` starts the next epoch at its start, as a new DataLoader
    iterator would (batches still held from the broken epoch stay valid).
    set_epoch(e)
    makes the next `for` run epoch e, as a sampler's does. Unlike DataLoader,
    epochs=0 (the default here; the library's is 1) is unbounded: as many
    `for`s as the script runs; with epochs=N the (N+1)-th `for` yields
    nothing. next(loader) is the next batch of the stream, across epochs
    (StopIteration after the last); a `for` after it finishes its epoch.

    A batch unpacks as (data, labels) Arrays (torch.from_dlpack each);
    labels are int64, as torch's losses take them. mean and std are in
    0..255 units (one number, or one per channel): torchvision's 0..1
    values are refused with the numbers to pass instead.

    Keyword arguments are gf_settings' (include/gpufeed.h; settings_table()
    lists them all with their defaults and bounds), by name:
    batch_size=64, image_size=224 or (h, w), channels=3, threads=0 (cores - 1),
    prefetch_depth=4, seed=0, epochs=0 (unbounded), shuffle=True,
    drop_last=False, transform="train"|"eval", device="auto"|"cpu"|"cuda",
    device_id=-1, dtype="uint8"|"float32"|"float16"|"bfloat16" (or "u8", "f32", ...),
    layout="nhwc"|"nchw", mean=None, std=None, on_error="skip"|"fail",
    on_shard_error="follow"|"fail"|"skip",
    strictness="strict"|"lenient"|"whole", rank=None, world=None (None: from
    torchrun / mpirun / Slurm, else from torch.distributed when it is
    initialised, else 0 of 1), scale=(0.08, 1.0), ratio=(3/4, 4/3),
    flip_prob=0.5, crop_fraction=0.875, io, decoder, queue_depth,
    max_pixels, max_file_bytes, read_budget_bytes, extensions, flip_on_device,
    pinned_max_bytes, device_max_bytes, autotune, max_threads,
    copy_stream_per_slot, folder_walk="gpufeed"|"torchvision" (an ImageFolder's
    walk: "torchvision" gives torchvision ImageFolder's samples exactly, but
    at a loop; the default leaves out what would relabel or repeat samples,
    each named in a UserWarning at open).

    data is a path: str, bytes or os.PathLike; a file name's bytes that are
    not UTF-8 come back in errors, stats() and sample_path() as os.fsdecode
    gives them (os.fsencode restores them). Or data sets mixed by weight: a
    list of (source, weight) pairs, or a dict {source: weight}, each source
    a path as above and each weight a positive number (they need not sum to
    1), with mix_epoch="cycle"|"first" and mix_labels="offset"|"source"
    (README: Mixing data sets); batch.sources then says each sample's
    source, and source_stats() what each delivered.
    """

    def __init__(self, data, **kw):
        kw.setdefault("epochs", 0)
        if (kw.get("rank") is None and kw.get("world") is None
                and not any(os.environ.get(v) for v in _LAUNCHER_VARS)):
            dist = _distributed()
            if dist is not None:
                kw["rank"], kw["world"] = dist
        self._settings = _settings(kw)
        self._c = _gpufeed._Loader(_data(data), self._settings)
        st = self._c.stats()
        self._drop_last = self._settings.get("drop_last") == "1"
        self._batch_size = st["batch_size"]
        self._epochs = int(self._settings.get("epochs") or 0)
        self._pending = None    # (batch, epoch, position): the next epoch's first,
                                # taken to see the end
        self._last = None       # (epoch, position) of the last batch taken
        self._in_epoch = False  # a `for`'s epoch is unfinished (it may have broken)

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def classes(self):
        """Class names by label: an ImageFolder's folder names (as torchvision's
        ImageFolder.classes); for tar shards with a classes.txt beside them (a
        prepared set), its lines; for a list file or other shards, whose labels
        are bare numbers, str(label)."""
        return [str(i) if n is None else n for i, n in enumerate(self._c.class_names())]

    @property
    def class_to_idx(self):
        return {name: i for i, name in enumerate(self.classes)}

    def _take(self):
        """(the next batch of the stream (the held-back one first), its epoch, its
        position), or None. Where comes beside the batch, not from it: a batch
        Python has not touched goes back to the loader if an exception (Ctrl-C
        right after a call returns) drops it, so this layer must not touch it,
        nor call anything while it sits in a local only."""
        t, self._pending = self._pending, None
        if t is None:
            t = self._c.take()
        if t is not None:
            self._last = t[1:]
        return t

    def _next_start(self):
        """(epoch, position) where the next batch starts."""
        if self._pending is not None:
            return self._pending[1], 0
        st = self._c.get_state()
        if st["position"] >= self._end_of(st["epoch"]):
            return st["epoch"] + 1, 0
        return st["epoch"], st["position"]

    def _drop_pending(self):
        if self._pending is not None:
            self._pending[0].release()  # never seen by the caller: nothing exported
            self._pending = None

    def _seek(self, epoch, why):
        """The next batch is epoch's first (gf_seek; held batches stay valid)."""
        if self._next_start() == (epoch, 0):
            return
        self._drop_pending()
        self._c.seek_epoch(epoch)
        self._in_epoch = False

    def set_epoch(self, epoch):
        """The next `for` runs epoch `epoch` from its start (DistributedSampler's
        set_epoch); a no-op when it would anyway, else a seek (held batches stay
        valid)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise TypeError(f"set_epoch: epoch: an int, not {type(epoch).__name__}")
        if epoch < 0:
            raise ValueError(f"set_epoch: epoch: {epoch} is negative")
        self._seek(epoch, "set_epoch")

    def __iter__(self):
        """One epoch: the rest of the current one, or after a `break`, the next."""
        if self._in_epoch and self._pending is None and self._last is not None \
                and self._last[1] < self._end_of(self._last[0]):
            self._seek(self._last[0] + 1, "a `for` after a `break`")
        self._in_epoch = True
        return _Epoch(self)

    def __next__(self):
        t = self._take()
        if t is None:
            raise StopIteration
        return t[0]

    def _samples_of(self, epoch):
        """This rank's samples in epoch (the core's: fewer in one a change of
        world split; each its own in a mix under mix_epoch="first")."""
        return self._c.epoch_samples(epoch)

    def _end_of(self, epoch):
        """Where epoch's last batch ends (its position): drop_last cuts the tail."""
        n, bs = self._samples_of(epoch), self._batch_size
        return n // bs * bs if self._drop_last else n

    def __len__(self):
        """Batches per epoch (this rank's): the epoch the next `for` reads, so
        after an elastic resume the rest of its epoch."""
        n, bs = self._samples_of(self._next_start()[0]), self._batch_size
        return n // bs if self._drop_last else -(-n // bs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Stops iteration now; the C loader closes when the last held slot returns."""
        self._drop_pending()
        self._c.close()

    def stats(self):
        """gf_stats as a dict (wait_s: the time spent waiting for batches). Counts
        include work done ahead: with epochs=0, some of the next epoch's."""
        return self._c.stats()

    def source_stats(self):
        """The data's sources (a mix's, in data's order; one when data is not a
        mix), a dict each: data, weight (its share of the weights), size,
        first_index (its samples are indices first_index .. first_index +
        size - 1), label_offset, n_classes, samples (delivered), share (of
        all delivered), wait_s (the waits for batches it finished last) and
        epoch (its own)."""
        return self._c.source_stats()

    def recent_warnings(self):
        """strictness="lenient": the last samples decoded although their decoder
        warned, newest first, each with the code strict would have failed it with."""
        return self._c.recent_warnings()

    def sample_path(self, index):
        """The display path of data set sample `index` (as in batch.indices)."""
        return self._c.sample_path(index)

    def sample_label(self, index):
        return self._c.sample_label(index)

    def read_sample(self, index):
        """The encoded bytes of sample `index`, exactly as stored."""
        return self._c.read_sample(index)

    def state_dict(self):
        """Where the next batch starts (torchdata's StatefulDataLoader name), and
        whose: version, rank, world, shard_window (the order: 0 global, else the
        shard order's window), seed, epoch, position, samples (the data set's),
        index_hash (over every sample's path and label), and rest_world,
        rest_position, rest_taken (an epoch a change of world split; 0 if none),
        all ints. Every rank is at the same position: any rank's state is the
        job's."""
        if self._pending is not None:  # taken to see the epoch end, not delivered
            return self._c.state_before_last()
        return self._c.get_state()

    def load_state_dict(self, state):
        """Resumes exactly: the batches that follow are those the saved run had next.
        A state of another data set (samples, index_hash), seed or order
        (shard_window; a state without it is of the global order) is refused
        (InvalidArgument, a ValueError, naming the field and both values); a
        state without samples/index_hash (an older checkpoint) is not checked for
        them. A state saved on another number of ranks is taken (elastic resume):
        this world's ranks deliver the rest of its epoch, each sample once, and
        the change is said once, as a warning. Batches still held stay valid."""
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict: state: a dict from state_dict(), not "
                            f"{type(state).__name__}")
        mine = self._c.get_state()
        state = {"shard_window": 0, **state}  # saved before the shard order: global
        for field in ("samples", "index_hash", "seed", "shard_window"):
            if field in state and state[field] != mine[field]:
                why = {"samples": "another data set", "index_hash": "another data set",
                       "seed": "another seed"}.get(field, "another order: 0 is global, else "
                                                         "the shard order's window")
                raise _error(InvalidArgument,
                             f"load_state_dict: {field}: the state's {state[field]!r} is not "
                             f"this loader's {mine[field]!r} ({why})")
        self._drop_pending()
        # An older checkpoint's: not checked for what it lacks.
        state = {"samples": mine["samples"], "index_hash": mine["index_hash"], **state}
        self._c.set_state(state)
        self._last, self._in_epoch = None, False
        note = self._c.stats()["resume_note"]
        if note:
            warnings.warn(f"gpufeed: {note}", WorldChanged, stacklevel=2)


class _Epoch:
    """One `for` over a Loader: its batches until the epoch's last (its
    position is the epoch's end; the last epoch's, the end of the stream)
    or, if bad samples left the end short, until a batch of the next epoch,
    which is kept for the next `for`."""

    def __init__(self, loader):
        self._loader, self._epoch, self._done = loader, None, False

    def __iter__(self):
        return self

    def __next__(self):
        loader = self._loader
        if self._done:
            raise StopIteration
        t = loader._take()
        if t is not None and self._epoch is not None and t[1] != self._epoch:
            loader._pending, t = t, None
        if t is None:
            self._done, loader._in_epoch = True, False
            raise StopIteration
        self._epoch = t[1]
        # The run's last epoch ends at the library's end (None), which comes
        # once the shards it fetched are in cache_dir: its last batch, left
        # in the loop variable, keeps the loader open past close().
        if t[2] >= loader._end_of(t[1]) and t[1] + 1 != loader._epochs:
            self._done, loader._in_epoch = True, False
        return t[0]


def _error(cls, msg):
    """A gpufeed.Error as the library raises it (code, name, path, reason)."""
    e = cls(msg)
    e.name = {InvalidArgument: "GF_EINVAL", RingStarved: "GF_EBUSY"}[cls]
    e.path = e.reason = None
    return e


class BadSample(tuple):
    """(path, reason, error): error is the gpufeed.Error subclass; also .code, .sample."""
    __slots__ = ()

    def __new__(cls, d):
        self = tuple.__new__(cls, (d["path"], d["reason"], _gpufeed.error_class(d["code"])))
        return self

    path = property(lambda self: self[0])
    reason = property(lambda self: self[1])
    error = property(lambda self: self[2])
    code = property(lambda self: self[2].code)

    def __repr__(self):
        return f"BadSample(path={self.path!r}, reason={self.reason!r}, error={self.error.__name__})"


def decode_image(encoded, *, epoch=0, index=0, **kw):
    """The uint8 pixels (bytes, height x width x channels) a loader with these
    settings makes of one encoded image as sample `index` of `epoch`."""
    return _gpufeed.decode_image(encoded, _settings(kw), epoch, index)


def verify(data, *, threads=0, strictness="whole", extensions="torchvision",
           folder_walk="gpufeed", rank=0, world=1, max_pixels=None, max_file_bytes=None,
           on_shard_error="skip"):
    """Decodes every sample (as `gpufeed verify` does; data as Loader's, a mix
    too: every sample of each source); returns the bad ones as
    BadSample, and each damaged tar shard as one (index -1, path the shard's,
    reason "offset N: ...; K members kept, L lost")."""
    kw = dict(threads=threads, strictness=strictness, extensions=extensions,
              folder_walk=folder_walk,
              on_shard_error=on_shard_error, rank=rank,
              world=world, transform="eval", shuffle=False, epochs=1, on_error="skip",
              image_size=32, batch_size=64, device="cpu")
    if max_pixels is not None:
        kw["max_pixels"] = max_pixels
    if max_file_bytes is not None:
        kw["max_file_bytes"] = max_file_bytes
    return [BadSample(d) for d in _gpufeed.verify(_data(data), _settings(kw))]


from .dataloader import MixUpCutMix, Unsupported  # noqa: E402 (it uses the helpers above)


def __getattr__(name):
    # DataLoader subclasses torch's: made on first use, so that `import
    # gpufeed` (Loader, verify, prepare) never imports torch.
    if name == "DataLoader":
        from .dataloader import _subclass
        cls = globals()["DataLoader"] = _subclass()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
from .prepare import PrepareError, prepare, prepare_plan  # noqa: E402 (runs the gpufeed program)

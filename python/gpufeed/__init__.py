"""gpufeed from Python: zero-copy image batches from the gpufeed C library.

    import gpufeed, torch
    with gpufeed.Loader("train/", batch_size=256, threads=2, dtype="float16",
                        layout="nchw", mean=gpufeed.IMAGENET_MEAN,
                        std=gpufeed.IMAGENET_STD) as loader:
        for batch in loader:
            x = torch.from_dlpack(batch.data)     # no copy: the ring slot
            y = torch.from_dlpack(batch.labels).long()
            train_step(x, y)

Lifetime: a batch lives in one of the loader's `prefetch_depth` ring slots.
The slot returns to the ring when the Batch and every array or tensor made
from it are gone (or after batch.release(), once the tensors already made
are gone). Holding them all starves the ring: the next batch then raises
gpufeed.RingStarved instead of waiting forever. Keep a copy of what you keep
past the step: `x.clone()`. A tensor may outlive its loader: close() stops
iteration at once and the C loader is closed when the last slot returns.
"""
import os
import sys

if sys.version_info < (3, 11):  # the stable ABI of 3.11: Py_buffer
    raise ImportError("gpufeed needs Python 3.11 or later")

from . import _gpufeed
from ._gpufeed import (Array, Batch, CorruptImage, DatasetError, EmptyFile, EndOfData, Error,
                       InvalidArgument, NoDevice, NotReady, OutOfMemory, ReadError,
                       RingStarved, SampleError, SampleNotFound, ThreadError, TooBig,
                       TruncatedImage, UnsupportedFormat)
from ._gpufeed import TooManyOpenFiles  # GF_EMFILE

__all__ = ["Loader", "Batch", "Array", "verify", "decode_image", "settings_table", "BadSample",
           "Error", "SampleError",
           "IMAGENET_MEAN", "IMAGENET_STD"] + [
    n for n in dir(_gpufeed) if isinstance(getattr(_gpufeed, n), type)
    and issubclass(getattr(_gpufeed, n), Error)]
__version__ = _gpufeed.version

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
    if kind == "float4":
        return ",".join(_float(name, x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    if kind == "flag":
        if not isinstance(v, (bool, int)):
            raise TypeError(f"{name}: a bool")
        return "1" if v else "0"
    if not isinstance(v, str):
        raise TypeError(f"{name}: a string, one of {', '.join(row['choices'] + row['aliases'])}")
    return v


def _set(out, name, v, keyword=None):
    text = _text(name, v)
    try:
        _gpufeed.check_setting(name, text)
    except ValueError as e:
        raise ValueError(f"{keyword}: {e}" if keyword else str(e)) from None
    out[name] = text


def _pair(name, v):
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return v
    raise TypeError(f"{name}: a pair (low, high)")


def _settings(kw):
    """Python keyword arguments -> {gf_settings field: its text}."""
    out = {}
    for name, v in kw.items():
        if v is None and name in ("mean", "std", "rank", "world"):
            continue
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


class Loader:
    """Batches from an ImageFolder tree, a list file or tar shards.

    Keyword arguments are gf_settings' (include/gpufeed.h; settings_table()
    lists them all with their defaults and bounds), by name:
    batch_size=64, image_size=224 or (h, w), channels=3, threads=0 (cores - 1),
    prefetch_depth=4, seed=0, epochs=1 (0: unbounded), shuffle=True,
    drop_last=False, transform="train"|"eval", device="auto"|"cpu"|"cuda",
    device_id=-1, dtype="uint8"|"float32"|"float16"|"bfloat16" (or "u8", "f32", ...),
    layout="nhwc"|"nchw", mean=None, std=None, on_error="skip"|"fail",
    on_shard_error="follow"|"fail"|"skip",
    strictness="strict"|"lenient"|"whole", rank=None, world=None (None: from
    torchrun / mpirun / Slurm), scale=(0.08, 1.0), ratio=(3/4, 4/3),
    flip_prob=0.5, crop_fraction=0.875, io, decoder, queue_depth,
    max_pixels, max_file_bytes, read_budget_bytes, extensions, flip_on_device,
    pinned_max_bytes, device_max_bytes, autotune, max_threads,
    copy_stream_per_slot.

    data is a path: str, bytes or os.PathLike; a file name's bytes that are
    not UTF-8 come back in errors, stats() and sample_path() as os.fsdecode
    gives them (os.fsencode restores them).
    """

    def __init__(self, data, **kw):
        self._settings = _settings(kw)
        self._c = _gpufeed._Loader(_path(data), self._settings)
        st = self._c.stats()
        self._drop_last = self._settings.get("drop_last") == "1"
        self._epoch_samples, self._batch_size = st["epoch_samples"], st["batch_size"]

    def __iter__(self):
        return self

    def __next__(self):
        b = self._c.next()
        if b is None:
            raise StopIteration
        return b

    def __len__(self):
        """Batches per epoch."""
        n, bs = self._epoch_samples, self._batch_size
        return n // bs if self._drop_last else -(-n // bs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Stops iteration now; the C loader closes when the last held slot returns."""
        self._c.close()

    def stats(self):
        """gf_stats as a dict (wait_s: the time spent waiting for batches)."""
        return self._c.stats()

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
        whose: version, rank, world, seed, epoch, position, samples (the data
        set's) and index_hash (over every sample's path and label), all ints."""
        return self._c.get_state()

    def load_state_dict(self, state):
        """Resumes exactly: the batches that follow are those the saved run had next.
        A state of another data set (samples, index_hash), rank, world or seed is
        refused (InvalidArgument, a ValueError, naming the field and both values);
        a state without samples/index_hash (an older checkpoint) is not checked for
        them. Every batch must be released first (RingStarved otherwise)."""
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict: state: a dict from state_dict(), not "
                            f"{type(state).__name__}")
        mine = self._c.get_state()
        for field in ("samples", "index_hash", "rank", "world", "seed"):
            if field in state and state[field] != mine[field]:
                why = {"samples": "another data set", "index_hash": "another data set",
                       "seed": "another seed"}.get(field, "another rank or world")
                raise _error(InvalidArgument,
                             f"load_state_dict: {field}: the state's {state[field]!r} is not "
                             f"this loader's {mine[field]!r} ({why})")
        self._c.set_state({k: state[k] for k in state if k not in ("samples", "index_hash")})


def _error(cls, msg):
    """A gpufeed.Error as the library raises it (code, name, path, reason)."""
    e = cls(msg)
    e.name = {InvalidArgument: "GF_EINVAL"}[cls]
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


def verify(data, *, threads=0, strictness="whole", extensions="torchvision", rank=0, world=1,
           max_pixels=None, max_file_bytes=None, on_shard_error="skip"):
    """Decodes every sample (as `gpufeed verify` does); returns the bad ones as
    BadSample, and each damaged tar shard as one (index -1, path the shard's,
    reason "offset N: ...; K members kept, L lost")."""
    kw = dict(threads=threads, strictness=strictness, extensions=extensions,
              on_shard_error=on_shard_error, rank=rank,
              world=world, transform="eval", shuffle=False, epochs=1, on_error="skip",
              image_size=32, batch_size=64, device="cpu")
    if max_pixels is not None:
        kw["max_pixels"] = max_pixels
    if max_file_bytes is not None:
        kw["max_file_bytes"] = max_file_bytes
    return [BadSample(d) for d in _gpufeed.verify(_path(data), _settings(kw))]

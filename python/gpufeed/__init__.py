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

__all__ = ["Loader", "Batch", "Array", "verify", "decode_image", "BadSample", "Error", "SampleError",
           "IMAGENET_MEAN", "IMAGENET_STD"] + [
    n for n in dir(_gpufeed) if isinstance(getattr(_gpufeed, n), type)
    and issubclass(getattr(_gpufeed, n), Error)]
__version__ = _gpufeed.version

IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)

# Names of the C enums (include/gpufeed.h), value = the C constant.
_CHOICES = {
    "transform": {"train": 0, "eval": 1},
    "device": {"auto": 0, "cuda": 1, "cpu": 2},
    "dtype": {"uint8": 0, "float32": 1, "float16": 2, "bfloat16": 3},
    "layout": {"nhwc": 0, "nchw": 1},
    "on_error": {"skip": 0, "fail": 1},
    "strictness": {"strict": 0, "lenient": 1, "whole": 2},
    "io": {"auto": 0, "uring": 1, "posix": 2},
    "decoder": {"auto": 0, "stb": 1, "turbo": 2},
    "extensions": {"torchvision": 0, "all": 1},
    "on_shard_error": {"follow": 0, "fail": 1, "skip": 2},
}
# Integer settings and their least value (the C library checks the rest).
_INTS = {"batch_size": 1, "channels": 1, "threads": 0, "prefetch_depth": 0, "queue_depth": 0,
         "device_id": -1, "max_threads": 0, "seed": 0, "epochs": 0, "max_pixels": 0,
         "max_file_bytes": 0, "pinned_max_bytes": 0, "device_max_bytes": 0,
         "read_budget_bytes": 0}
_FLOATS = ("flip_prob", "crop_fraction")
_FLAGS = ("shuffle", "drop_last", "flip_on_device", "autotune", "copy_stream_per_slot")


def _int(name, v, least):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}: an int, not {type(v).__name__}")
    if v < least:
        raise ValueError(f"{name}: {v} is below {least}")
    return v


def _float(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name}: a number, not {type(v).__name__}")
    return float(v)


def _pair(name, v, conv):
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return conv(name, v[0]), conv(name, v[1])
    raise TypeError(f"{name}: a pair (low, high)")


def _settings(kw):
    """Python keyword arguments -> {gf_settings field: value}."""
    out = {}
    for name, v in kw.items():
        if v is None and name in ("mean", "std", "rank", "world"):
            continue
        if name in _CHOICES:
            if not isinstance(v, str):
                raise TypeError(f"{name}: a string, one of {', '.join(_CHOICES[name])}")
            if v not in _CHOICES[name]:
                raise ValueError(f"{name}: '{v}' is not one of {', '.join(_CHOICES[name])}")
            out[name] = _CHOICES[name][v]
        elif name == "image_size":
            if isinstance(v, int) and not isinstance(v, bool):
                v = (v, v)
            if not isinstance(v, (tuple, list)) or len(v) != 2:
                raise TypeError("image_size: an int or a pair (height, width)")
            out["height"] = _int("image_size", v[0], 1)
            out["width"] = _int("image_size", v[1], 1)
        elif name in ("rank", "world"):
            out[name] = _int(name, v, 0 if name == "rank" else 1)
        elif name in ("mean", "std"):
            vals = [_float(name, x) for x in (v if isinstance(v, (tuple, list)) else (v,))]
            out[name] = vals
        elif name == "scale":
            out["scale_min"], out["scale_max"] = _pair(name, v, _float)
        elif name == "ratio":
            out["ratio_min"], out["ratio_max"] = _pair(name, v, _float)
        elif name in _INTS:
            out[name] = _int(name, v, _INTS[name])
        elif name in _FLOATS:
            out[name] = _float(name, v)
        elif name in _FLAGS:
            if not isinstance(v, (bool, int)):
                raise TypeError(f"{name}: a bool")
            out[name] = int(bool(v))
        else:
            raise TypeError(f"unexpected keyword argument '{name}'")
    if "rank" in out and "world" not in out:
        raise ValueError("rank needs world")
    if "world" in out:
        out.setdefault("rank", 0)
        if out["rank"] >= out["world"]:
            raise ValueError(f"rank {out['rank']} must be below world {out['world']}")
    return out


def _path(data):
    if not isinstance(data, (str, bytes, os.PathLike)):
        raise TypeError(f"data: a path (str or os.PathLike), not {type(data).__name__}")
    return os.fsdecode(data)


class Loader:
    """Batches from an ImageFolder tree, a list file or tar shards.

    Keyword arguments are gf_settings' (include/gpufeed.h), by name:
    batch_size=64, image_size=224 or (h, w), channels=3, threads=0 (cores - 1),
    prefetch_depth=4, seed=0, epochs=1 (0: unbounded), shuffle=True,
    drop_last=False, transform="train"|"eval", device="auto"|"cpu"|"cuda",
    device_id=-1, dtype="uint8"|"float32"|"float16"|"bfloat16",
    layout="nhwc"|"nchw", mean=None, std=None, on_error="skip"|"fail",
    on_shard_error="follow"|"fail"|"skip",
    strictness="strict"|"lenient"|"whole", rank=None, world=None (None: from
    torchrun / mpirun / Slurm), scale=(0.08, 1.0), ratio=(3/4, 4/3),
    flip_prob=0.5, crop_fraction=0.875, io, decoder, queue_depth,
    max_pixels, max_file_bytes, read_budget_bytes, extensions, flip_on_device,
    pinned_max_bytes, device_max_bytes, autotune, max_threads,
    copy_stream_per_slot.
    """

    def __init__(self, data, **kw):
        self._settings = _settings(kw)
        self._c = _gpufeed._Loader(_path(data), self._settings)
        st = self._c.stats()
        self._drop_last = bool(self._settings.get("drop_last"))
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
        """Where the next batch starts (torchdata's StatefulDataLoader name)."""
        return self._c.get_state()

    def load_state_dict(self, state):
        """Resumes exactly: the batches that follow are those the saved run had next.
        Every batch must be released first (RingStarved otherwise)."""
        self._c.set_state(state)


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

"""gpufeed.prepare() and gpufeed.prepare_plan(): `gpufeed prepare` from Python.

prepare is the gpufeed program's code (src/cli), not the library's, so
these run the program with --json and return its summary: one
implementation, the same bytes, the same resumable journal. The program
is found as GPUFEED_CLI names it, else beside the interpreter (the
scripts directory an installer puts programs in: the wheel's copy), else
on PATH.
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig

from ._gpufeed import Error, version as _version


class PrepareError(Error):
    """`gpufeed prepare` failed: str(e) is the program's message; also
    .returncode (1: a bad sample under on_error="fail"; 2: usage or setup),
    .stderr (all of it) and .summary (the JSON summary when it printed one,
    else None)."""

    def __init__(self, msg, returncode=None, stderr="", summary=None):
        super().__init__(msg)
        self.returncode, self.stderr, self.summary = returncode, stderr, summary
        self.code = self.name = self.path = self.reason = None


def _find_program():
    env = os.environ.get("GPUFEED_CLI")
    if env:
        if not os.access(env, os.X_OK):
            raise PrepareError(f"GPUFEED_CLI={env!r} is not an executable program")
        return env
    for d in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        path = os.path.join(d, "gpufeed") if d else None
        if path and os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    path = shutil.which("gpufeed")
    if path:
        return path
    raise PrepareError("the gpufeed program was not found (GPUFEED_CLI, the scripts directory, "
                       "PATH): pip install gpufeed puts it in the scripts directory; or build "
                       "it with meson (`meson setup build && ninja -C build`, then "
                       "`meson install` or GPUFEED_CLI=build/src/cli/gpufeed)")


def _check_version(program):
    """A program of another minor version may take other options or print
    another summary (0.x minors may change either): refused by name."""
    try:
        out = subprocess.run([program, "--version"], capture_output=True, text=True,
                             check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError) as e:
        raise PrepareError(f"{program} --version failed: {e}") from None
    theirs = out[-1] if out else "?"
    if theirs.split(".")[:2] != _version.split(".")[:2]:
        raise PrepareError(f"{program} is gpufeed {theirs}; this module is {_version} "
                           f"(set GPUFEED_CLI to a program of the same version)")


def _flag(args, name, v, kind):
    """--name value, checked by type here; the program checks the value."""
    if v is None:
        return
    flag = "--" + name.replace("_", "-")
    if kind is bool:
        if not isinstance(v, bool):
            raise TypeError(f"{name}: a bool, not {type(v).__name__}")
        if v:
            args.append(flag)
        return
    if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
        raise TypeError(f"{name}: an int, not {type(v).__name__}")
    if kind is float and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise TypeError(f"{name}: a number, not {type(v).__name__}")
    if kind is str and not isinstance(v, str):
        raise TypeError(f"{name}: a string, not {type(v).__name__}")
    args += [flag, repr(float(v)) if kind is float else str(v)]


def _size(v):
    """image_size as Loader takes it (an int, or (height, width)) -> "WxH"."""
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v}x{v}"
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) for x in v):
        return f"{v[1]}x{v[0]}"
    raise TypeError("image_size: an int or a pair (height, width)")


def _path(name, p):
    if not isinstance(p, (str, bytes, os.PathLike)):
        raise TypeError(f"{name}: a path (str, bytes or os.PathLike), not {type(p).__name__}")
    return os.fsencode(p)


# The flags both forms share, by keyword (each keyword is its flag's name).
_COMMON = {"quality": int, "subsampling": str, "threads": int, "channels": int,
           "on_shard_error": str, "strictness": str, "decoder": str, "extensions": str}


def _common(args, values):
    for key, kind in _COMMON.items():
        _flag(args, key, values[key], kind)


def _run(args):
    program = _find_program()
    _check_version(program)
    env = dict(os.environ, GF_NO_PROGRESS="1")
    p = subprocess.run([program, "prepare"] + args + ["--json"], capture_output=True, env=env)
    stderr = p.stderr.decode(errors="replace")
    try:
        summary = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        summary = None
    if p.returncode != 0 or summary is None:
        lines = [l for l in stderr.splitlines() if l.strip()]
        msg = lines[-1] if lines else f"gpufeed prepare exited with status {p.returncode}"
        raise PrepareError(msg, p.returncode, stderr, summary)
    return summary


def prepare(src, out, *, name=None, max_side=None, format=None, raw_max_bytes=None,
            raw_max_pixels=None, quality=None, subsampling=None, keep_original=False,
            shard_bytes=None, shard_samples=None, threads=None, channels=None,
            on_error=None, on_shard_error=None, strictness=None, decoder=None,
            extensions=None, fields=None):
    """Writes src (an ImageFolder, a list file, or tar shards such as
    "DIR/train-{000000..000127}.tar") as tar shards made for fast loading
    into out, exactly as `gpufeed prepare SRC OUT` does, and returns its
    JSON summary as a dict (samples, bad, shards, bytes, jpeg, raw,
    original, seconds, samples_per_s, bad_samples [{index, path, error,
    reason}], ...). Read the result back with gpufeed.Loader(out): the
    folder reads as its shards, out/NAME-{000000..N}.tar.

    Each keyword is the program's option of that name (None: its default):
    name ("train"), max_side (0: sizes kept), format ("jpeg"|"raw"|"auto"),
    raw_max_bytes, raw_max_pixels, quality (90), subsampling
    ("444"|"422"|"420"), keep_original, shard_bytes (bytes, or text such as
    "256M"), shard_samples, threads (all cores), channels (3|1), on_error
    ("skip"|"fail"), on_shard_error, strictness, decoder, extensions,
    fields (tar shards: Loader's fields, a str or a sequence of str; each
    field's member is kept, masks and boxes fitted to the stored image).
    A run stopped part way (Ctrl-C, a kill) resumes when called again.

    Raises PrepareError (a gpufeed.Error) with the program's message when
    it fails: returncode 1 is a bad sample under on_error="fail" (.summary
    lists what was written), 2 a usage or setup error. The program is
    GPUFEED_CLI, else the one beside the interpreter, else on PATH, and
    must be of this module's version."""
    args = [_path("src", src), _path("out", out)]
    _flag(args, "name", name, str)
    _flag(args, "max_side", max_side, int)
    _flag(args, "format", format, str)
    _flag(args, "raw_max_bytes", raw_max_bytes, str if isinstance(raw_max_bytes, str) else int)
    _flag(args, "raw_max_pixels", raw_max_pixels, int)
    _flag(args, "keep_original", keep_original, bool)
    _flag(args, "shard_bytes", shard_bytes, str if isinstance(shard_bytes, str) else int)
    _flag(args, "shard_samples", shard_samples, int)
    _flag(args, "on_error", on_error, str)
    if fields is not None and not isinstance(fields, str):
        if not all(isinstance(f, str) for f in fields):
            raise TypeError("fields: a str or a sequence of str")
        fields = ",".join(fields)
    _flag(args, "fields", fields, str)
    _common(args, dict(quality=quality, subsampling=subsampling, threads=threads,
                       channels=channels, on_shard_error=on_shard_error, strictness=strictness,
                       decoder=decoder, extensions=extensions))
    return _run(args)


def prepare_plan(src, *, plan_samples=None, seed=None, image_size=None, need_rate=None,
                 quality=None, subsampling=None, threads=None, channels=None,
                 on_shard_error=None, strictness=None, decoder=None, extensions=None):
    """`gpufeed prepare --plan SRC`: a sample of src (plan_samples, default
    200, spread evenly; seed moves where it starts) prepared as it is and at
    max side 512, 384, 256, 160 as JPEG and raw, each measured: bytes for the
    whole set, images/s of the loader (threads, image_size: an int or
    (height, width), the train transform) and the PSNR of the eval centre
    crop against the original's. Returns the JSON as a dict: settings (a
    list: name, format, max_side, bytes, bytes_per_image, images_per_s,
    psnr_db (None when exact), exact, prepare_args), recommended (a
    setting's name, or None), rule, bad_samples, ... need_rate: the
    images/s the training needs (`gpufeed bench`'s compute rate); the
    recommendation is then the smallest set that reaches it."""
    args = ["--plan", _path("src", src)]
    _flag(args, "plan_samples", plan_samples, int)
    _flag(args, "seed", seed, int)
    if image_size is not None:
        args += ["--image-size", _size(image_size)]
    _flag(args, "need_rate", need_rate, float)
    _common(args, dict(quality=quality, subsampling=subsampling, threads=threads,
                       channels=channels, on_shard_error=on_shard_error, strictness=strictness,
                       decoder=decoder, extensions=extensions))
    return _run(args)

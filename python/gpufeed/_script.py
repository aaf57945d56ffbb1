"""Runs a user's script as `python SCRIPT ARGS` would, for `python -m gpufeed
why` and `run`: its own sys.argv, sys.path[0] its directory, run as
__main__; its exit status, traceback and KeyboardInterrupt as the
interpreter's own. `finish` runs after the script however it ends (a
report, say), before the status is handed back.

Also the one way both name where a DataLoader was made: `site`.
"""
import builtins
import io
import os
import signal
import sys
import types
from importlib.machinery import SourceFileLoader


def _own_frames(tb, script):
    """The traceback from the script's first frame on: ours are not the
    script's."""
    t = tb
    while t is not None and t.tb_frame.f_code.co_filename != script:
        t = t.tb_next
    return t or tb


def _exec(path):
    """The script as the interpreter runs it: the module __main__ for good
    (what it pickles by __main__.name is found), its __file__ and frames
    named by the absolute path, sys.argv[0] as given (not runpy's)."""
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __package__=None, __spec__=None,
                         __loader__=SourceFileLoader("__main__", path), __builtins__=builtins)
    with io.open_code(path) as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def run(script, args, finish):
    """The script's exit status (what `python SCRIPT` would exit with);
    finish() is called after it whatever happens."""
    path = os.path.abspath(script)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.realpath(path))  # as the interpreter sets it
    try:
        try:
            _exec(path)
        finally:
            finish()
    except SystemExit:
        raise  # the interpreter makes its status (None, an int, a message) as ever
    except BaseException as e:
        # The hook prints the exception's own traceback: the script's part of it.
        e.__traceback__ = _own_frames(e.__traceback__, path)
        sys.excepthook(type(e), e, e.__traceback__)
        if isinstance(e, KeyboardInterrupt):
            # As the interpreter: killed by SIGINT (status 130 in a shell).
            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        return 1
    return 0


def site(frame):
    """'FILE:LINE' of a frame, the file as the script names it (relative to
    the current directory where it is under it)."""
    name = frame.f_code.co_filename
    try:
        rel = os.path.relpath(name)
        if not rel.startswith(".."):
            name = rel
    except ValueError:
        pass
    return f"{name}:{frame.f_lineno}"


def dataset_words(dataset):
    """'ImageFolder, 1281 samples' (the count where len() tells it)."""
    words = type(dataset).__name__
    try:
        words += f", {len(dataset)} samples"
    except Exception:  # an IterableDataset has no len; nor may a script's
        pass
    return words

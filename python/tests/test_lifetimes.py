# Lifetimes across the buffer protocol and fork(): a buffer export holds
# its ring slot as a DLPack one does, whatever the consumer keeps (torch
# keeps the Array, numpy and memoryview the view), and a loader inherited
# by a fork()ed child is refused there and dropped without touching the
# parent's threads.
import gc
import os
import time

import pytest

import gpufeed

SMALL = dict(batch_size=8, image_size=32, threads=1, device="cpu")


def _torch_frombuffer(a):
    torch = pytest.importorskip("torch")
    return torch.frombuffer(a, dtype=torch.uint8)  # keeps the Array, releases the view


def _np(fn):
    def make(a):
        np = pytest.importorskip("numpy")
        return getattr(np, fn)(a)
    return make


EXPORTS = {"torch.frombuffer": _torch_frombuffer, "memoryview": memoryview,
           "np.frombuffer": _np("frombuffer"), "np.asarray": _np("asarray")}


def _bytes(x):
    return bytes(memoryview(x.numpy() if hasattr(x, "numpy") else x).cast("B"))


@pytest.mark.parametrize("how", EXPORTS)
def test_buffer_export_holds_the_slot(dataset, how):
    """batch.release() drops the Batch's claim only: the export keeps the
    slot, so later batches do not fill it, and its memory outlives close()."""
    loader = gpufeed.Loader(dataset, prefetch_depth=3, epochs=0, **SMALL)
    b = next(loader)
    x = EXPORTS[how](b.data)
    want = _bytes(x)
    b.release()
    del b
    assert loader.stats()["held"] == 1
    for _ in range(6):  # the other slots cycle; this one is not refilled
        try:
            next(loader).release()
        except gpufeed.RingStarved:
            break
    assert _bytes(x) == want
    loader.close()
    del loader
    gc.collect()
    assert _bytes(x) == want  # the C loader lives until x goes (ASan: no use after free)
    del x


def test_array_holds_the_slot_and_refuses_export_after_release(dataset):
    with gpufeed.Loader(dataset, **SMALL) as loader:
        b = next(loader)
        arr = b.data
        b.release()
        assert loader.stats()["held"] == 1  # arr is an export of its own
        with pytest.raises(BufferError, match="released"):
            memoryview(arr)
        del arr
        assert loader.stats()["held"] == 0


def _child(loader, batch, exports):
    """In the fork()ed child: 0 when every use is refused clearly and the
    drops return; else a nonzero exit code saying which step failed."""
    checks = [lambda: next(loader), loader.state_dict, loader.stats,
              lambda: loader.load_state_dict(loader.state_dict()), lambda: batch.data]
    for step, call in enumerate(checks, 1):
        try:
            call()
            return 10 + step
        except gpufeed.Error as e:
            if "fork()" not in str(e) or not isinstance(e, gpufeed.InvalidArgument):
                return 20 + step
    del exports[:]
    del batch
    loader.close()  # frees nothing of the parent's
    loader.close()
    del loader
    gc.collect()
    return 0


def test_fork_child_refuses_the_inherited_loader(dataset):
    loader = gpufeed.Loader(dataset, epochs=0, **SMALL)
    first = next(loader)
    b = next(loader)
    exports = [memoryview(b.labels), b.indices.__dlpack__()]
    try:
        import torch
        exports.append(torch.from_dlpack(b.data))
    except ImportError:
        pass
    want = exports[0].tolist()
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = _child(loader, b, exports)
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the fork()ed child hung on the inherited loader")
        time.sleep(0.02)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent goes on unaffected.
    assert exports[0].tolist() == want
    assert loader.stats()["held"] == 2
    pos = b.position
    del exports, b, first
    assert loader.stats()["held"] == 0
    assert next(loader).position == pos + 8
    loader.close()

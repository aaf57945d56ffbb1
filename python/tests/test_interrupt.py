# Ctrl-C while gf_next waits: a SIGINT to this process raises
# KeyboardInterrupt within the poll interval (not after the batch), and the
# interrupted request's batch is delivered next, and the loader closes.
import os
import signal
import statistics
import threading
import time

import pytest

from conftest import make_dataset

import gpufeed


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """16 large JPEGs: one decode thread takes a third of a second a batch."""
    return make_dataset(tmp_path_factory.mktemp("large") / "set", classes=1, per_class=16,
                        size="3000x2000")


def test_sigint_during_iteration(large):
    loader = gpufeed.Loader(large, batch_size=16, threads=1, device="cpu", epochs=0,
                            prefetch_depth=2, strictness="whole")
    times = []
    for _ in range(3):
        t = time.monotonic()
        next(loader)
        times.append(time.monotonic() - t)
    per_batch = statistics.median(times)
    if per_batch < 0.25:
        pytest.skip(f"batches too fast here ({per_batch:.3f} s) to tell a poll from a batch")
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(per_batch / 3, interrupt)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in range(100):
            next(loader)
    latency = time.monotonic() - sent[0]
    timer.join()
    assert latency < min(0.15, per_batch / 2), \
        f"KeyboardInterrupt {latency:.3f} s after the signal ({per_batch:.3f} s a batch)"
    b = next(loader)  # the interrupted request's batch is not lost
    assert b.count == 16
    del b
    start = time.monotonic()
    loader.close()
    assert time.monotonic() - start < 10


def test_close_and_next_from_another_thread(large):
    """close() while another thread waits in next(): that next still ends
    (its own reference keeps the C loader); a second consumer is refused."""
    loader = gpufeed.Loader(large, batch_size=16, threads=1, device="cpu", epochs=0,
                            prefetch_depth=2, strictness="whole")
    got = []
    th = threading.Thread(target=lambda: got.append(next(loader)))
    th.start()
    time.sleep(0.1)  # a batch takes over 0.25 s: the thread is inside next()
    with pytest.raises(RuntimeError, match="one consumer"):
        next(loader)
    loader.close()
    th.join(30)
    assert got and got[0].count == 16
    with pytest.raises(ValueError, match="closed"):
        next(loader)
    del got

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


def test_sigint_stops_verify(large, tmp_path):
    """gpufeed.verify runs the C verify on a thread of its own: Ctrl-C
    cancels it, and KeyboardInterrupt comes within a second, not after
    the whole set (about 6 s here with one thread), even where the
    library's close takes longer (io_uring reads in flight)."""
    many = tmp_path / "many" / "c"
    many.mkdir(parents=True)
    files = [os.path.join(d, f) for d, _, fs in os.walk(large) for f in sorted(fs)]
    for k in range(4):  # 64 samples: links, not copies
        for f in files:
            os.link(f, many / f"{k}_{os.path.basename(f)}")
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    fds = len(os.listdir("/proc/self/fd"))
    timer = threading.Timer(0.3, interrupt)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        gpufeed.verify(str(tmp_path / "many"), threads=1)
    end = time.monotonic()
    timer.join()
    assert end - sent[0] < 1.0, f"KeyboardInterrupt {end - sent[0]:.2f} s after the signal"
    assert end - start < 2.0
    # A close slower than that ends on the verify's thread: its files go.
    while len(os.listdir("/proc/self/fd")) > fds and time.monotonic() < end + 30:
        time.sleep(0.05)
    assert len(os.listdir("/proc/self/fd")) == fds
    assert gpufeed.verify(large, threads=2) == []

# DLPack exports into torch and numpy, their lifetime, and the deleter run
# from another thread without the GIL after the loader was closed.
import ctypes
import os
import threading

import pytest

import gpufeed

SMALL = dict(batch_size=8, image_size=32, threads=1, device="cpu")


def no_cuda(why):
    """Skips a CUDA test, or fails it where the device check requires CUDA
    (GPUFEED_REQUIRE_CUDA=1): there a skip would hide the one thing run."""
    if os.environ.get("GPUFEED_REQUIRE_CUDA") == "1":
        pytest.fail(f"GPUFEED_REQUIRE_CUDA=1 but {why}")
    pytest.skip(why)

capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
capsule_valid.restype, capsule_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_pointer.restype, capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                      ctypes.c_char_p]
capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
capsule_set_name.restype, capsule_set_name.argtypes = ctypes.c_int, [ctypes.py_object,
                                                                     ctypes.c_char_p]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # CFUNCTYPE calls drop the GIL


class Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class ManagedVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


# The capsule keeps a pointer to its name: these must outlive it.
USED = {b"dltensor": ctypes.c_char_p(b"used_dltensor"),
        b"dltensor_versioned": ctypes.c_char_p(b"used_dltensor_versioned")}


def take(cap, name, struct):
    """What a consumer does: claim the capsule, keep the struct."""
    m = struct.from_address(capsule_pointer(cap, name))
    capsule_set_name(cap, USED[name])
    return m


def test_legacy_and_versioned_structs(dataset):
    with gpufeed.Loader(dataset, dtype="float16", layout="nchw", **SMALL) as loader:
        b = next(loader)
        cap = b.data.__dlpack__()
        assert capsule_valid(cap, b"dltensor")
        m = take(cap, b"dltensor", Managed)
        t = m.dl_tensor
        assert (t.device_type, t.ndim, t.code, t.bits, t.lanes) == (1, 4, 2, 16, 1)
        assert [t.shape[i] for i in range(4)] == [8, 3, 32, 32] and not t.strides
        vcap = b.labels.__dlpack__(max_version=(1, 2), dl_device=(1, 0), stream=None)
        assert capsule_valid(vcap, b"dltensor_versioned")
        v = take(vcap, b"dltensor_versioned", ManagedVersioned)
        assert (v.major, v.minor, v.flags) == (1, 0, 0)
        assert (v.dl_tensor.code, v.dl_tensor.bits, v.dl_tensor.shape[0]) == (0, 64, 8)
        assert b.indices.__dlpack__(max_version=(0, 8)) is not None  # old: legacy
        assert b.data.__dlpack_device__() == (1, 0)
        with pytest.raises(BufferError):
            b.data.__dlpack__(copy=True)
        with pytest.raises(BufferError):
            b.data.__dlpack__(dl_device=(2, 0))
        b.release()
        assert loader.stats()["held"] == 1  # the two taken exports
        # The consumers drop them from another thread, without the GIL,
        # after the loader was closed: the last one closes the C loader.
    done = []

    def drop():
        DELETER(m.deleter)(ctypes.addressof(m))
        DELETER(v.deleter)(ctypes.addressof(v))
        done.append(1)

    th = threading.Thread(target=drop)
    th.start()
    th.join(30)
    assert done == [1]


def test_torch_tensors_zero_copy_and_outliving(dataset):
    torch = pytest.importorskip("torch")
    loader = gpufeed.Loader(dataset, **SMALL)
    b = next(loader)
    x = torch.from_dlpack(b.data)
    y = torch.from_dlpack(b.labels)
    i = torch.utils.dlpack.from_dlpack(b.indices)
    assert x.shape == (8, 32, 32, 3) and x.dtype == torch.uint8
    assert y.dtype == torch.int64 and i.dtype == torch.int64  # cross_entropy takes y as it is
    assert x.numpy().tobytes() == bytes(memoryview(b.data))  # the same memory, not a copy
    assert y.tolist() == memoryview(b.labels).tolist()
    want = x.clone()
    del b
    loader.close()
    assert torch.equal(x, want)  # the tensor holds the slot and the C loader
    th = threading.Thread(target=lambda: x.__dict__ and None)
    th.start()
    th.join()
    del x, y, i  # the last: frees the loader


def test_torch_dtypes(dataset):
    torch = pytest.importorskip("torch")
    mean, std = gpufeed.IMAGENET_MEAN, gpufeed.IMAGENET_STD
    with gpufeed.Loader(dataset, **SMALL) as l8:
        ref = torch.from_dlpack(next(l8).data).clone().float()
    ref = ((ref - torch.tensor(mean)) / torch.tensor(std)).permute(0, 3, 1, 2)
    for dtype, tdt, tol in (("float32", torch.float32, 1e-5), ("float16", torch.float16, 1e-2),
                            ("bfloat16", torch.bfloat16, 2e-2)):
        with gpufeed.Loader(dataset, dtype=dtype, layout="nchw", mean=mean, std=std,
                            **SMALL) as loader:
            x = torch.from_dlpack(next(loader).data)
            assert x.dtype == tdt and x.shape == (8, 3, 32, 32)
            assert torch.allclose(x.float(), ref, atol=tol * 4, rtol=tol)
            del x


def test_deleter_on_another_thread_returns_the_slot(dataset):
    torch = pytest.importorskip("torch")
    with gpufeed.Loader(dataset, prefetch_depth=2, **SMALL) as loader:
        b = next(loader)
        box = [torch.from_dlpack(b.data)]
        del b
        assert loader.stats()["held"] == 1
        th = threading.Thread(target=box.clear)
        th.start()
        th.join()
        assert loader.stats()["held"] == 0
        assert sum(1 for _ in loader) == 7


def test_numpy(dataset):
    np = pytest.importorskip("numpy")
    with gpufeed.Loader(dataset, dtype="float32", **SMALL) as loader:
        b = next(loader)
        a = np.from_dlpack(b.data)
        v = np.asarray(b.data)
        assert a.dtype == np.float32 and a.shape == (8, 32, 32, 3)
        assert np.shares_memory(a, v) and a.ctypes.data == v.ctypes.data
        assert np.array_equal(np.asarray(b.labels), np.from_dlpack(b.labels))
        assert np.asarray(b.indices).dtype == np.int64
        del a, v, b
        assert loader.stats()["held"] == 0


def test_cuda_batches(dataset):
    """Device batches: DLPack as kDLCUDA, the consumer's stream made to wait
    and recorded for the release. Runs on a GPU and on the cudaemu build."""
    with gpufeed.Loader(dataset, **{**SMALL, "device": "auto"}) as loader:
        if loader.stats()["device"] != 1:
            no_cuda("no CUDA device: device batches are tested on the device check")
        b = next(loader)
        assert b.device == "cuda" and b.data.device == "cuda" and b.labels.device == "cpu"
        assert b.data.__dlpack_device__() == (2, loader.stats()["device_id"])
        with pytest.raises(BufferError, match="CUDA"):
            memoryview(b.data)
        assert len(memoryview(b.labels).tolist()) == 8
        with pytest.raises(ValueError, match="stream"):
            b.data.__dlpack__(stream=0)
        caps = [b.data.__dlpack__(stream=s) for s in (None, 1, 2, -1)]
        m = take(caps[0], b"dltensor", Managed)
        assert m.dl_tensor.device_type == 2 and m.dl_tensor.data
        del caps
        b.release()
        assert loader.stats()["held"] == 1
        DELETER(m.deleter)(ctypes.addressof(m))  # released after the stream recorded
        assert loader.stats()["held"] == 0
        assert sum(1 for _ in loader) == 7


def test_cuda_into_torch(dataset):
    with gpufeed.Loader(dataset, **{**SMALL, "device": "auto"}) as loader:
        if loader.stats()["device"] != 1:
            no_cuda("no CUDA device")
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            no_cuda("this torch has no CUDA")
        b = next(loader)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = torch.from_dlpack(b.data)  # s waits for the batch, the release for s
            total = x.double().sum()
        with gpufeed.Loader(dataset, **SMALL) as ref:
            want = torch.from_dlpack(next(ref).data).double().sum()
        assert total.item() == want.item()
        del x, b

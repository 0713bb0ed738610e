"""Device parsing, array modules, pinned/aligned host memory, byte budgets and to_numpy."""

import math
import pickle

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup import _config
from gglspeedup.device import (
    DLPACK_CPU,
    DLPACK_CUDA,
    DLPACK_CUDA_HOST,
    DLPACK_CUDA_MANAGED,
    Device,
    aligned_empty,
    array_library,
    array_module,
    as_device,
    gpu_available,
    parse_size,
    pinned_empty,
    to_numpy,
)

from conftest import DEVICES

HAS_GPU_HARDWARE = _config.HAS_NUMBA_CUDA and _config.HAS_CUPY_GPU


# ---------------------------------------------------------------------------- parse_size
@pytest.mark.parametrize(
    "size, expected",
    [
        ("0.1G", int(0.1 * 1024**3)),
        ("512M", 512 * 1024**2),
        ("200MB", 200 * 1024**2),
        ("1.5GiB", 1536 * 1024**2),
        ("1k", 1024),
        ("1KB", 1024),
        ("3kib", 3 * 1024),
        ("2T", 2 * 1024**4),
        ("2tb", 2 * 1024**4),
        ("0.5K", 512),
        (" 64 ", 64),
        ("64", 64),
        ("64B", 64),
        ("1.5 G", 1536 * 1024**2),
        (".5M", 512 * 1024),
        ("1e3", 1000),
        ("1e3K", 1000 * 1024),
        ("0", 0),
        (0, 0),
        (4096, 4096),
        (np.int64(2**40), 2**40),
        (2**62 + 1, 2**62 + 1),  # ints stay exact (no float round trip)
        (1.9, 1),
        (np.float32(1024.0), 1024),
    ],
)
def test_parse_size_reads_powers_of_1024(size, expected):
    result = parse_size(size)
    assert result == expected and type(result) is int


@pytest.mark.parametrize(
    "size, error, message",
    [
        ("", ValueError, r"size must be a number with an optional K/M/G/T unit .* got ''"),
        ("   ", ValueError, r"got '   '"),
        ("-1", ValueError, r"got '-1'"),
        ("-1M", ValueError, r"got '-1M'"),
        ("nan", ValueError, r"got 'nan'"),
        ("inf", ValueError, r"got 'inf'"),
        ("1X", ValueError, r"got '1X'"),
        ("1P", ValueError, r"got '1P'"),
        ("G", ValueError, r"got 'G'"),
        ("1.2.3M", ValueError, r"got '1.2.3M'"),
        ("1 G B", ValueError, r"got '1 G B'"),
        ("1e999G", ValueError, r"size must be finite"),
        (-1, ValueError, r"size must be >= 0 bytes, got -1"),
        (-0.5, ValueError, r"size must be >= 0 bytes, got -0.5"),
        (float("nan"), ValueError, r"size must be finite, got nan"),
        (float("inf"), ValueError, r"size must be finite, got inf"),
        (np.float64("nan"), ValueError, r"size must be finite"),
        (None, TypeError, r"size must be a str like '512M' or a number of bytes, got None"),
        (True, TypeError, r"got True"),
        ([512], TypeError, r"got \[512\]"),
        (b"512M", TypeError, r"got b'512M'"),
    ],
)
def test_parse_size_rejects(size, error, message):
    with pytest.raises(error, match=message):
        parse_size(size)


# ---------------------------------------------------------------------------- as_device
@pytest.mark.parametrize(
    "spec, expected",
    [
        ("cpu", Device("cpu")),
        ("CPU", Device("cpu")),
        (" cpu ", Device("cpu")),
        (None, Device("cpu")),
        ("cuda", Device("cuda", 0)),
        ("cuda:1", Device("cuda", 1)),
        ("CUDA:12", Device("cuda", 12)),
        ("gpu:2", Device("cuda", 2)),
        (0, Device("cuda", 0)),
        (3, Device("cuda", 3)),
        (np.int64(1), Device("cuda", 1)),
        (Device("cuda", 5), Device("cuda", 5)),
    ],
)
def test_as_device_parses(spec, expected):
    assert as_device(spec) == expected


def test_as_device_default_and_identity():
    assert as_device() == Device("cpu")
    device = Device("cuda", 1)
    assert as_device(device) is device


@pytest.mark.parametrize(
    "spec, error, message",
    [
        ("tpu", ValueError, r"device must look like 'cpu', 'cuda' or 'cuda:<index>', got 'tpu'"),
        ("", ValueError, r"got ''"),
        ("cuda:-1", ValueError, r"got 'cuda:-1'"),
        ("cuda:x", ValueError, r"got 'cuda:x'"),
        ("cuda:1:2", ValueError, r"got 'cuda:1:2'"),
        ("cpu:0", ValueError, r"device 'cpu' takes no index, got 'cpu:0'"),
        (-1, ValueError, r"device index must be >= 0, got -1"),
        (True, TypeError, r"device must be a str, int or device object, got bool True"),
        (
            1.5,
            TypeError,
            r"device must be 'cpu', 'cuda\[:index\]', an int or a framework device, got 1.5 of type float",
        ),
        (object(), TypeError, r"of type object"),
    ],
)
def test_as_device_rejects(spec, error, message):
    with pytest.raises(error, match=message):
        as_device(spec)


class _FakeDevice:
    """Stand-ins for framework device objects that need a GPU build to create."""

    def __init__(self, text="", **attributes):
        self._text = text
        self.__dict__.update(attributes)

    def __str__(self):
        return self._text


class _FakeCupyDevice:
    __module__ = "cupy.cuda.device"

    def __init__(self, index):
        self.id = index


class _FakePaddleGPUPlace:
    def is_gpu_place(self):
        return True

    def gpu_device_id(self):
        return 4


@pytest.mark.parametrize(
    "spec, expected",
    [
        (_FakeDevice(type="cuda", index=2), Device("cuda", 2)),  # torch.device("cuda:2")
        (_FakeDevice(type="cuda", index=None), Device("cuda", 0)),  # torch.device("cuda")
        (_FakeDevice(platform="gpu", id=1), Device("cuda", 1)),  # a JAX GPU device
        (_FakeDevice(platform="cpu", id=0), Device("cpu")),  # a JAX CPU device
        (_FakeDevice("Place(gpu:3)"), Device("cuda", 3)),  # paddle.CUDAPlace(3)
        (_FakeDevice("Place(cpu)"), Device("cpu")),
        (_FakeCupyDevice(6), Device("cuda", 6)),
        (_FakePaddleGPUPlace(), Device("cuda", 4)),
    ],
    ids=["torch-cuda", "torch-cuda-noindex", "jax-gpu", "jax-cpu", "paddle-gpu", "paddle-cpu", "cupy", "paddle-method"],
)
def test_as_device_reads_framework_device_objects(spec, expected):
    assert as_device(spec) == expected


def test_as_device_reads_real_framework_devices():
    torch = pytest.importorskip("torch")
    assert as_device(torch.device("cpu")) == Device("cpu")
    assert as_device(torch.device("cuda:1")) == Device("cuda", 1)
    assert as_device(torch.device("cuda")) == Device("cuda", 0)
    assert as_device(torch.zeros(1).device) == Device("cpu")
    if _config.HAS_PADDLE and not _config.CUDA_SIM:  # conftest imported paddle first (TF order trap)
        import paddle

        assert as_device(paddle.CPUPlace()) == Device("cpu")
        assert as_device(paddle.to_tensor([1]).place) == Device("cpu")


def test_as_device_reads_jax_devices():
    jax = pytest.importorskip("jax")
    assert as_device(jax.devices("cpu")[0]) == Device("cpu")


# ---------------------------------------------------------------------------- Device
def test_device_properties_and_value_semantics():
    cpu, gpu = Device("cpu"), Device("cuda", 1)
    assert (str(cpu), str(gpu)) == ("cpu", "cuda:1")
    assert not cpu.is_cuda and gpu.is_cuda and not cpu.simulated
    assert gpu.simulated == _config.CUDA_SIM
    assert cpu.xp is np
    assert {Device("cuda", 1): "x"}[gpu] == "x"
    with pytest.raises(Exception, match="cannot assign"):
        gpu.index = 2
    assert pickle.loads(pickle.dumps(gpu)) == gpu
    assert cpu.check_available() is cpu


def test_device_context_is_reentrant(device):
    dev = as_device(device)
    with dev as entered:
        assert entered is dev
        with dev:
            pass
    with dev:
        pass
    assert dev.__dict__.get("_ctx_stack", []) == []
    assert dev == as_device(device)


@pytest.mark.parametrize("device", [DEVICES[1]])
def test_cuda_device_is_available_where_kernels_run(device):
    dev = as_device(device)
    assert dev.check_available() is dev
    if dev.simulated:
        assert dev.xp is np


@pytest.mark.skipif(_config.CUDA_SIM or HAS_GPU_HARDWARE, reason="a CUDA device is usable here")
def test_cuda_device_without_gpu_raises_with_a_remedy():
    with pytest.raises(RuntimeError, match=r"device cuda:0 requested but no usable CUDA GPU .* NUMBA_ENABLE_CUDASIM=1"):
        Device("cuda", 0).check_available()
    with pytest.raises(gg.DeviceUnavailableError):  # the class users catch to fall back to the CPU
        gg.NeighborSampler(gg.CSRGraph([0, 0], []), [1], device="gpu")
    assert issubclass(gg.DeviceUnavailableError, RuntimeError) and not gpu_available()


def test_gpu_spelling_is_cuda_and_array_libraries_are_named_once():
    assert as_device("gpu") == as_device("GPU:0") == Device("cuda", 0) and as_device(" gpu:2 ") == Device("cuda", 2)
    assert array_library(np.zeros(1)) == "numpy" and array_library([1]) == "builtins"
    assert array_module(np.zeros(1)) is np and array_module([1]) is np
    torch = pytest.importorskip("torch")
    assert array_library(torch.zeros(1)) == "torch" and array_module(torch.zeros(1)) is np
    assert (DLPACK_CPU, DLPACK_CUDA, DLPACK_CUDA_HOST, DLPACK_CUDA_MANAGED) == (1, 2, 3, 13)


# ---------------------------------------------------------------------------- host memory
@pytest.mark.parametrize("shape", [(0,), 7, (3, 5), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.float16])
def test_pinned_and_aligned_empty(shape, dtype):
    expected_shape = (shape,) if isinstance(shape, int) else shape
    for array in (pinned_empty(shape, dtype), aligned_empty(shape, dtype)):
        assert isinstance(array, np.ndarray)
        assert array.shape == expected_shape and array.dtype == dtype
        assert array.flags.c_contiguous and array.flags.writeable
        assert array.ctypes.data % 64 == 0 or array.size == 0  # an empty array has no buffer to align
        array[...] = 1
        assert (array == 1).all()


@pytest.mark.parametrize("alignment", [8, 128, 4096])
def test_aligned_empty_alignment(alignment):
    for _ in range(4):  # several allocations, so a lucky base address cannot pass by chance
        array = aligned_empty((3, 7), np.float32, alignment=alignment)
        assert array.ctypes.data % alignment == 0 and array.shape == (3, 7)


# ---------------------------------------------------------------------------- to_numpy
def test_to_numpy_views_and_converts():
    array = np.arange(6)
    assert to_numpy(array) is array
    assert to_numpy([1, 2, 3]).tolist() == [1, 2, 3]
    assert to_numpy(memoryview(np.arange(3, dtype=np.int32))).dtype == np.int32
    assert array_module(array) is np


def test_to_numpy_shares_memory_with_torch():
    torch = pytest.importorskip("torch")
    tensor = torch.arange(5, dtype=torch.int32)
    view = to_numpy(tensor)
    assert view.dtype == np.int32 and view.tolist() == [0, 1, 2, 3, 4]
    tensor[0] = 9
    assert view[0] == 9
    grad = torch.ones(3, requires_grad=True)
    assert to_numpy(grad).tolist() == [1.0, 1.0, 1.0]


def test_to_numpy_reads_dlpack_producers():
    jnp = pytest.importorskip("jax.numpy")
    values = to_numpy(jnp.arange(4, dtype=jnp.float32))
    assert values.dtype == np.float32 and values.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert math.isclose(float(to_numpy(jnp.float32(2.5))), 2.5)


@pytest.mark.skipif(
    not _config.HAS_PADDLE or _config.CUDA_SIM, reason="paddle is imported first only in the normal suite"
)
def test_to_numpy_reads_paddle_tensors():
    import paddle

    values = to_numpy(paddle.to_tensor(np.arange(4, dtype=np.int64)))
    assert isinstance(values, np.ndarray) and values.dtype == np.int64 and values.tolist() == [0, 1, 2, 3]


def test_on_gpu_tells_device_memory_from_host_data():
    import torch

    from gglspeedup.device import on_gpu

    class CudaInterface:  # what numba device arrays expose
        __cuda_array_interface__ = {"shape": (1,), "typestr": "<i8", "data": (0, False), "version": 3}  # noqa: RUF012

    class DLPackOn:
        def __init__(self, kind):
            self.kind = kind

        def __dlpack_device__(self):
            return (self.kind, 0)

    assert not on_gpu(np.arange(3)) and not on_gpu([1, 2]) and not on_gpu(torch.arange(3))
    assert on_gpu(CudaInterface())
    assert on_gpu(DLPackOn(2)) and on_gpu(DLPackOn(13))  # kDLCUDA, kDLCUDAManaged
    assert not on_gpu(DLPackOn(1)) and not on_gpu(DLPackOn(3))  # kDLCPU, kDLCUDAHost (pinned host)

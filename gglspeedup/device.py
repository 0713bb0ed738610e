"""Devices, array modules, pinned host memory and byte budgets.

A :class:`Device` is ``cpu`` or ``cuda:<index>``. GPU work runs either on a real GPU (CuPy arrays,
numba-cuda kernels) or, when ``NUMBA_ENABLE_CUDASIM=1``, on numba's CUDA simulator, where
"device arrays" are NumPy arrays. Placement decisions read :attr:`Device.xp` and
:attr:`Device.is_cuda`; nothing else in the package parses device strings.

Which library an array belongs to is decided here too, once: :func:`array_library` (``"numpy"``,
``"cupy"``, ``"torch"``, ...) and :func:`array_module` (``numpy`` or ``cupy``); the DLPack device
codes the package reads are named once below (``DLPACK_CPU``, ...).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _config

__all__ = [
    "Device",
    "DeviceUnavailableError",
    "gpu_available",
    "as_device",
    "parse_size",
    "array_module",
    "array_library",
    "DLPACK_CPU",
    "DLPACK_CUDA",
    "DLPACK_CUDA_HOST",
    "DLPACK_CUDA_MANAGED",
    "pinned_empty",  # noqa: F822 - served by __getattr__ from gglspeedup._pinned
    "aligned_empty",  # noqa: F822 - likewise
    "to_numpy",
    "on_gpu",
    "as_device_array",
]


# DLPack device types (dlpack.h, ``DLDeviceType``): the codes ``__dlpack_device__()[0]`` reports.
DLPACK_CPU = 1
DLPACK_CUDA = 2
DLPACK_CUDA_HOST = 3  # page-locked host memory: readable by the CPU like kDLCPU
DLPACK_CUDA_MANAGED = 13
_HOST_DLPACK = (DLPACK_CPU, DLPACK_CUDA_HOST)
_GPU_DLPACK = (DLPACK_CUDA, DLPACK_CUDA_MANAGED)


class DeviceUnavailableError(RuntimeError):
    """A CUDA device was asked for but cannot run work in this process (no GPU, no CuPy /
    numba-cuda GPU support, or an index past the visible devices).

    A subclass of ``RuntimeError``, so ``except RuntimeError`` still catches it; catch this class
    to fall back to the CPU only when the GPU is missing::

        try:
            sampler = gg.NeighborSampler(graph, [25, 10], device="cuda:0")
        except gg.DeviceUnavailableError:
            sampler = gg.NeighborSampler(graph, [25, 10], device="cpu")
    """


@dataclass(frozen=True)
class Device:
    """A compute device: ``Device("cpu")`` or ``Device("cuda", 1)``.

    Build one with :func:`as_device`, which accepts strings, ints and framework device objects.
    """

    type: str
    index: int = 0

    def __str__(self) -> str:
        return "cpu" if self.type == "cpu" else f"cuda:{self.index}"

    @property
    def is_cuda(self) -> bool:
        return self.type == "cuda"

    @property
    def simulated(self) -> bool:
        """True for a CUDA device served by numba's simulator."""
        return self.is_cuda and _config.cuda_sim_enabled()

    @property
    def xp(self):
        """Array module for arrays on this device: NumPy on CPU and under the simulator, else CuPy."""
        if not self.is_cuda or self.simulated:
            return np
        import cupy

        return cupy

    def check_available(self) -> Device:
        """Raise :class:`DeviceUnavailableError` (a ``RuntimeError``) when this device cannot run
        work here; return self otherwise. The CPU and simulated CUDA devices are always available."""
        if not self.is_cuda or self.simulated:
            return self
        if not gpu_available():
            raise DeviceUnavailableError(
                f"device {self} requested but no usable CUDA GPU was found "
                f"(cupy GPU: {_config.HAS_CUPY_GPU}, numba-cuda GPU: {_config.HAS_NUMBA_CUDA}); "
                "install the 'gpu' extra on a GPU machine, use device='cpu', or set "
                "NUMBA_ENABLE_CUDASIM=1 to run GPU kernels on the simulator"
            )
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
        if self.index >= count:
            raise DeviceUnavailableError(f"device {self} requested but only {count} CUDA device(s) are visible")
        return self

    def __enter__(self):
        """Make this the current CUDA device (no-op on CPU and under the simulator); re-entrant."""
        ctx = None
        if self.is_cuda and not self.simulated:
            import cupy

            ctx = cupy.cuda.Device(self.index)
            ctx.__enter__()
        # The dataclass is frozen: keep the entered contexts in a stack outside its fields.
        self.__dict__.setdefault("_ctx_stack", []).append(ctx)
        return self

    def __exit__(self, *exc):
        ctx = self.__dict__["_ctx_stack"].pop()
        if ctx is not None:
            ctx.__exit__(*exc)
        return False


def gpu_available() -> bool:
    """Whether a real CUDA GPU can run work here (CuPy and numba-cuda both see one; never under
    the simulator). Probed once per process."""
    return _config.HAS_CUPY_GPU and _config.HAS_NUMBA_CUDA


_DEVICE_RE = re.compile(r"^\s*(cpu|cuda|gpu)(?::(\d+))?\s*$", re.IGNORECASE)


def as_device(device: Any = "cpu") -> Device:
    """Parse ``device`` into a :class:`Device`.

    Accepts ``"cpu"``, ``"cuda"`` (index 0), ``"cuda:1"``, ``"gpu"`` / ``"gpu:1"`` (Paddle's
    spelling of the same CUDA devices: ``"gpu"`` is ``"cuda:0"``), a non-negative int (a CUDA
    index, as torch reads it), ``None`` (the CPU), a :class:`Device`, or a framework device object
    (``torch.device``, a Paddle place, a JAX device, a CuPy device). Case and surrounding spaces
    are ignored.

    Parsing never checks that the device exists: classes that run work on it call
    :meth:`Device.check_available`, which raises :class:`DeviceUnavailableError` when it does not.

    >>> as_device("cuda:1"), as_device("gpu")
    (Device(type='cuda', index=1), Device(type='cuda', index=0))
    """
    if isinstance(device, Device):
        return device
    if device is None:
        return Device("cpu")
    if isinstance(device, bool):
        raise TypeError(f"device must be a str, int or device object, got bool {device!r}")
    if isinstance(device, (int, np.integer)):
        if device < 0:
            raise ValueError(f"device index must be >= 0, got {int(device)}")
        return Device("cuda", int(device))
    if isinstance(device, str):
        match = _DEVICE_RE.match(device)
        if match is None:
            raise ValueError(f"device must look like 'cpu', 'cuda' or 'cuda:<index>', got {device!r}")
        kind, index = match.group(1).lower(), match.group(2)
        if kind == "cpu":
            if index is not None:
                raise ValueError(f"device 'cpu' takes no index, got {device!r}")
            return Device("cpu")
        return Device("cuda", int(index or 0))
    return _from_framework_device(device)


def _from_framework_device(device: Any) -> Device:
    # torch.device: .type / .index; JAX: .platform / .id; CuPy: .id; Paddle: place objects.
    kind = getattr(device, "type", None) or getattr(device, "platform", None)
    if isinstance(kind, str):
        kind = kind.lower()
        if kind == "cpu":
            return Device("cpu")
        if kind in ("cuda", "gpu"):
            index = getattr(device, "index", None)
            if index is None:
                index = getattr(device, "id", 0)
            return Device("cuda", int(index or 0))
    text = str(device)
    if array_library(device) == "cupy":  # cupy.cuda.Device
        return Device("cuda", int(device.id))
    paddle_match = re.match(r"^\s*Place\((cpu|gpu):?(\d*)\)\s*$", text, re.IGNORECASE)
    if paddle_match:
        kind, index = paddle_match.groups()
        return Device("cpu") if kind.lower() == "cpu" else Device("cuda", int(index or 0))
    if hasattr(device, "is_gpu_place") and device.is_gpu_place():
        return Device("cuda", int(device.gpu_device_id()))
    if hasattr(device, "is_cpu_place") and device.is_cpu_place():
        return Device("cpu")
    raise TypeError(
        f"device must be 'cpu', 'cuda[:index]', an int or a framework device, got {device!r} "
        f"of type {type(device).__name__}"
    )


def array_library(obj: Any) -> str:
    """The library an array, tensor or device object comes from, by its type's top-level module:
    ``"numpy"`` (NumPy arrays and subclasses, numba's mapped arrays included), ``"cupy"``,
    ``"torch"``, ``"jax"`` (``jaxlib`` objects too), ``"tensorflow"``, ``"paddle"``, ``"numba"``
    (numba device arrays), or another top-level module name (``"builtins"`` for lists).

    The package's one answer to "is this a CuPy array / a torch tensor": nothing imports a
    framework to ask.

    >>> array_library(np.zeros(2)), array_library([1, 2])
    ('numpy', 'builtins')
    """
    if isinstance(obj, np.ndarray):
        return "numpy"
    root = type(obj).__module__.partition(".")[0]
    return "jax" if root == "jaxlib" else root


def array_module(array: Any):
    """The array module (``numpy`` or ``cupy``) that owns ``array``: ``cupy`` for CuPy arrays,
    ``numpy`` for anything else."""
    if array_library(array) == "cupy":
        import cupy

        return cupy
    return np


# A number, then an optional K/M/G/T, then an optional B, or iB after a unit ("1iB" is not a size).
_SIZE_RE = re.compile(
    r"^\s*(?P<num>(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*(?:(?P<unit>[kmgt])(?P<suffix>i?b)?|b?)\s*$",
    re.IGNORECASE,
)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(size: Any, name: str = "size") -> int:
    """Bytes in a budget: ``"0.1G"``, ``"512M"``, ``"200MB"``, ``"1.5GiB"``, ``"64"``, or an int.

    The grammar: a number, then optionally K/M/G/T (powers of 1024, as torch-quiver and the
    original gglspeedup read them) followed by an optional ``B`` or ``iB``; a bare number may end
    in ``B``. Either case. Fractions round down to whole bytes. ``name`` is the caller's
    argument, named by the errors (``parse_size(cache_size, "cache_size")``).

    >>> parse_size("0.5K"), parse_size("200MB"), parse_size(4096)
    (512, 209715200, 4096)

    Raises
    ------
    TypeError
        for anything but a str or a real number (bools included).
    ValueError
        for negative, NaN or infinite sizes, unknown units and empty strings.
    """
    if isinstance(size, bool) or not isinstance(size, (str, int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a str like '512M' or a number of bytes, got {size!r}")
    if isinstance(size, str):
        match = _SIZE_RE.match(size)
        if match is None:
            raise ValueError(
                f"{name} must be a number with an optional K/M/G/T unit (e.g. '0.1G', '512M', "
                f"'200MB', '1.5GiB'), got {size!r}"
            )
        number = float(match.group("num"))
        multiplier = 1024 ** _POWERS[(match.group("unit") or "").lower()]
    else:
        number, multiplier = float(size), 1
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"{name} must be finite, got {size!r}")
    if number < 0:
        raise ValueError(f"{name} must be >= 0 bytes, got {size!r}")
    if isinstance(size, (int, np.integer)):
        return int(size)
    return int(number * multiplier)


def to_numpy(array: Any) -> np.ndarray:
    """A NumPy view (or, for device arrays, a host copy) of ``array``.

    Accepts NumPy arrays, CuPy arrays, anything with ``__dlpack__`` (torch, TF, Paddle, JAX),
    ``__array__`` or the buffer protocol, and sequences.
    """
    if isinstance(array, np.ndarray):
        return array
    library = array_library(array)
    if library == "cupy":
        return array.get()
    if library == "torch" and hasattr(array, "detach"):
        reject_meta("the tensor", array)
        array = array.detach()
        if array.device.type != "cpu":
            array = array.cpu()
        return array.numpy()
    if hasattr(array, "__dlpack__") and hasattr(array, "__dlpack_device__") and unexportable_dtype(array) is None:
        device_type = array.__dlpack_device__()[0]
        if int(device_type) in _HOST_DLPACK:
            try:
                return np.from_dlpack(array)
            except (TypeError, BufferError, RuntimeError):
                pass
    return np.asarray(array)


def reject_meta(name: str, value: Any) -> None:
    """Raise ``TypeError`` naming ``name`` for a tensor on torch's ``meta`` device (shapes and
    dtypes only, no data to read)."""
    device = getattr(value, "device", None)
    if getattr(device, "type", None) == "meta":
        raise TypeError(
            f"{name} is a tensor on torch's 'meta' device, which holds no data (only its shape "
            f"{tuple(value.shape)} and dtype): pass a tensor with data (e.g. on 'cpu' or 'cuda')"
        )


def unexportable_dtype(array: Any) -> str | None:
    """The dtype name of a TensorFlow tensor whose DLPack export kills the process (strings,
    resource handles, variants: TensorFlow's ``DataTypeCanUseMemcpy`` check aborts instead of
    raising), ``None`` for everything else. Callers refuse such tensors, or read them another way,
    before asking for ``__dlpack__``."""
    if array_library(array) != "tensorflow":
        return None
    dtype = getattr(array, "dtype", None)
    if not getattr(dtype, "is_numpy_compatible", True) or np.dtype(dtype.as_numpy_dtype).hasobject:
        return str(getattr(dtype, "name", dtype))
    return None


def on_gpu(array: Any) -> bool:
    """Whether ``array`` lives in GPU memory: CuPy, numba device arrays (anything with
    ``__cuda_array_interface__``), torch CUDA tensors, or any DLPack tensor on a CUDA device.
    NumPy arrays, numba's mapped (pinned host) arrays and lists are host data."""
    if isinstance(array, np.ndarray):  # includes numba's mapped (pinned host) arrays
        return False
    library = array_library(array)
    if library == "cupy" or hasattr(array, "__cuda_array_interface__"):
        return True
    device = getattr(array, "device", None)
    if library == "torch" and device is not None:
        return device.type != "cpu"
    if hasattr(array, "__dlpack_device__"):
        try:
            kind = int(array.__dlpack_device__()[0])
        except Exception:  # objects that cannot tell: treat as host
            return False
        return kind in _GPU_DLPACK
    return False


def as_device_array(array: Any, device: Device):
    """GPU-resident ``array`` (see :func:`on_gpu`) as an array of ``device.xp``, zero-copy.

    Under the simulator ``device.xp`` is NumPy and the data come to the host.
    """
    xp = device.xp
    if xp is np:  # the simulator's "device" arrays are host arrays
        return np.asarray(to_numpy(array))
    if array_library(array) == "cupy" or hasattr(array, "__cuda_array_interface__"):
        return xp.asarray(array)  # CuPy, numba device arrays
    return xp.from_dlpack(array)  # torch / JAX / ... GPU tensors


def __getattr__(name: str):
    # Host memory allocators live in gglspeedup._pinned (loaded on first use, so importing this
    # module stays light): ``aligned_empty`` (64-byte aligned host memory) and ``pinned_empty``
    # (page-locked memory every GPU reads in place).
    if name in ("aligned_empty", "pinned_empty"):
        from . import _pinned

        return getattr(_pinned, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

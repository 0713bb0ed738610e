"""Helpers shared by the backend adapters: framework imports, DLPack producers, compact buffers.

Nothing here imports a framework at module import time; adapters import their framework on first
use through :func:`import_framework`.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from typing import Any

import numpy as np

from ..device import DLPACK_CPU, DLPACK_CUDA_HOST, array_library, unexportable_dtype

__all__ = [
    "import_framework",
    "DLPackView",
    "prepare",
    "compact",
    "dtype_name",
    "user_stacklevel",
    "ensure_aligned",
    "settle_gpu_work",
]


def import_framework(module: str, extra: str):
    """Import ``module`` or raise ``ImportError`` naming the pip extra that installs it."""
    if module in sys.modules and sys.modules[module] is not None:
        return sys.modules[module]
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"the {module!r} backend needs {module}, which is not installed: pip install gglspeedup[{extra}]"
        ) from error


class DLPackView:
    """A DLPack producer that forwards ``__dlpack__`` to ``source`` but reports ``device``.

    Paddle's CPU tensors report ``__dlpack_device__() == (kDLCPU, None)``, which JAX and NumPy
    reject; the memory is the same, so a view reporting ``(kDLCPU, 0)`` keeps the exchange
    zero-copy. ``source`` may also be a bare DLPack capsule (``__dlpack__`` then returns it once).
    """

    __slots__ = ("device", "source")

    def __init__(self, source: Any, device: tuple):
        self.source = source
        self.device = (int(device[0]), int(device[1]))

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *args, **kwargs):
        if hasattr(self.source, "__dlpack__"):
            try:
                return self.source.__dlpack__(*args, **kwargs)
            except TypeError:  # producers that predate the keyword arguments
                return self.source.__dlpack__()
        return self.source  # a capsule


def prepare(obj: Any) -> Any:
    """``obj`` as something every framework's ``from_dlpack`` accepts, without copying.

    NumPy and CuPy arrays pass through; torch tensors that require grad are detached (same
    memory); producers reporting a ``None`` device id are wrapped in :class:`DLPackView`; objects
    with only ``__cuda_array_interface__`` (numba device arrays) become CuPy views.

    Raises
    ------
    TypeError
        when ``obj`` is not an array or tensor, or is a TensorFlow tensor of strings (or another
        type whose DLPack export aborts the process).
    """
    if isinstance(obj, np.ndarray):
        return obj
    if getattr(obj, "requires_grad", False) and hasattr(obj, "detach"):
        obj = obj.detach()
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        unexportable = unexportable_dtype(obj)
        if unexportable is not None:  # its export would abort the process, not raise
            raise TypeError(
                f"cannot convert a {type(obj).__name__} of dtype {unexportable}: DLPack carries bool, signed and "
                "unsigned integer, float and complex tensors only; encode strings and handles as numbers first"
            )
        device_type, device_id = obj.__dlpack_device__()
        if device_id is None:
            return DLPackView(obj, (int(device_type), 0))
        return obj
    if hasattr(obj, "__cuda_array_interface__"):
        cupy = import_framework("cupy", "gpu")
        return cupy.asarray(obj)
    if hasattr(obj, "__array_interface__") or isinstance(obj, memoryview):
        return np.asarray(obj)
    raise TypeError(
        f"cannot convert an object of type {type(obj).__name__}: expected a NumPy/CuPy array, a "
        "framework tensor (anything with __dlpack__), an Adj, a SampleOutput or a tuple/list of them"
    )


def is_compact(obj: Any) -> bool:
    """Whether ``obj`` is C-contiguous (frameworks that reject strided DLPack input need that)."""
    flags = getattr(obj, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    is_contiguous = getattr(obj, "is_contiguous", None)
    if callable(is_contiguous):
        return bool(is_contiguous())
    return True


def compact(obj: Any) -> Any:
    """``obj`` if it is C-contiguous, else a C-contiguous copy (TensorFlow and JAX reject strides).

    Only strided input is copied; compact input is returned unchanged. A :class:`DLPackView` is
    judged (and copied) by the tensor it wraps (a strided Paddle CPU tensor, ``x[:, ::2]``).
    """
    if isinstance(obj, DLPackView):
        inner = compact(obj.source)
        return obj if inner is obj.source else DLPackView(inner, obj.device)
    if is_compact(obj):
        return obj
    if isinstance(obj, np.ndarray):
        from ..device import aligned_empty

        out = aligned_empty(obj.shape, obj.dtype)  # aligned too, so TensorFlow/JAX need no 2nd copy
        out[...] = obj
        return out
    if array_library(obj) == "cupy":
        return import_framework("cupy", "gpu").ascontiguousarray(obj)
    contiguous = getattr(obj, "contiguous", None)
    if callable(contiguous):
        return contiguous()
    return obj


def dtype_name(obj: Any) -> str:
    """The element type of ``obj`` as a NumPy-style name ("int64", "float32", ...)."""
    dtype = getattr(obj, "dtype", None)
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        name = str(dtype)
    return name.rsplit(".", 1)[-1].strip("<>' ").lower()


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside gglspeedup."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


def ensure_aligned(source: Any, alignment: int, framework: str) -> Any:
    """``source`` when its host buffer starts on an ``alignment``-byte boundary, else an aligned
    NumPy copy, with a ``UserWarning`` naming ``framework`` and the bytes copied.

    TensorFlow aborts the process on under-aligned buffers (``Check failed: IsAligned()``) and JAX
    silently copies them; NumPy and Numba allocate on 16/32-byte boundaries only. Device (GPU)
    buffers and empty arrays pass through unchanged.

    A read-only NumPy array (a memory-mapped ``.npy`` opened with ``mmap_mode="r"``) is copied too,
    with a ``UserWarning``: NumPy exports it only to consumers that ask for DLPack 1.0 (which can
    mark memory read-only), and TensorFlow and JAX ask for the older version, so the export raises
    ``BufferError``.
    """
    if isinstance(source, np.ndarray) and not source.flags.writeable:
        why = (
            f"{framework} cannot share a read-only NumPy array's memory over DLPack: copied a read-only "
            f"{source.dtype} array (pass a writable array, e.g. np.load(path, mmap_mode='c'), to share it)"
        )
        return _aligned_copy(source, alignment, why)
    if isinstance(source, np.ndarray):
        view = source
    else:
        if int(source.__dlpack_device__()[0]) not in (DLPACK_CPU, DLPACK_CUDA_HOST):
            return source
        view = np.from_dlpack(source)
    if view.size == 0 or view.ctypes.data % alignment == 0:
        return source
    why = f"{framework} needs {alignment}-byte aligned host buffers: copied an under-aligned {view.dtype} array"
    return _aligned_copy(view, alignment, why)


def _aligned_copy(view: np.ndarray, alignment: int, why: str) -> np.ndarray:
    """A writable, ``alignment``-byte aligned copy of ``view`` (see :func:`ensure_aligned`), with a
    ``UserWarning`` saying ``why`` when there are bytes to copy (one fixed text per dtype and
    framework, so Python's default filter shows it once per place)."""
    from ..device import aligned_empty

    if view.size:
        warnings.warn(why, UserWarning, stacklevel=user_stacklevel())
    out = aligned_empty(view.shape, view.dtype, alignment)
    out[...] = view
    return out


def settle_gpu_work(source: Any) -> None:
    """Block until the work queued on CuPy's current stream is done when ``source`` is a CuPy
    array, before handing it to a framework that takes a DLPack capsule without a stream
    (TensorFlow, Paddle): their kernels are not ordered after ours, and could read ``source``
    before the kernel writing it has run. torch and JAX pass their stream through
    ``__dlpack__(stream=...)``, which orders the hand-off without blocking."""
    if array_library(source) == "cupy":
        from .._launch import synchronize

        synchronize(import_framework("cupy", "gpu").cuda.get_current_stream())  # sync

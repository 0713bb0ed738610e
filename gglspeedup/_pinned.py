"""Page-locked host memory that every GPU of the process reads in place (UVA), made once.

Two ways to get it, both through the CUDA runtime (CuPy's bindings), both *portable* (page-locked
for every device's context, so one process driving several GPUs needs one copy) and *mapped*
(readable by kernels at the same address, as unified addressing provides on 64-bit Linux):

- :func:`pinned_empty`: new page-locked memory (``cudaHostAlloc``), as a NumPy array.
- :func:`pin`: an existing host array (a feature table in shared memory, a graph's arrays)
  page-locked where it is (``cudaHostRegister``), no copy. A range is registered once per process
  however many stores or samplers use it, and unregistered when the last array using it is gone;
  processes sharing one segment each register their own mapping of the same physical pages, so N
  processes on N GPUs page-lock the table once, not N times. Where registering fails (an old
  driver, a read-only file mapping the driver refuses), it falls back to a page-locked copy.

:func:`device_array` turns a NumPy array lying in such memory (or any view of it) into the
numba device-array view kernels read, at the device address of the same bytes.

Under numba's simulator, or without a usable GPU, there is no page-locking: :func:`pinned_empty`
returns 64-byte aligned host memory and :func:`pin` the array itself.
"""

from __future__ import annotations

import bisect
import ctypes
import mmap
import threading
import warnings

import numpy as np

from . import _config
from ._lease import leased

__all__ = ["aligned_empty", "pinned_empty", "pin", "device_array", "is_pinned", "registered_ranges", "uses_gpu"]

_HOST_ALLOC_PORTABLE_MAPPED = 1 | 2  # cudaHostAllocPortable | cudaHostAllocMapped
_REGISTER_PORTABLE_MAPPED = 1 | 2  # cudaHostRegisterPortable | cudaHostRegisterMapped
_REGISTER_READ_ONLY = 8  # cudaHostRegisterReadOnly

_PAGE = mmap.PAGESIZE
# Arrays are locked in place only from this alignment on: a warp's reads over PCIe then start on
# whole 64-byte segments. Shared-memory segments and .npy memory maps are aligned; ordinary NumPy
# arrays (16 bytes past a page) are copied, as they always were.
_ALIGNMENT = 64
_lock = threading.Lock()
_register_lock = threading.Lock()  # one registration at a time: a range is locked once
_starts: list[int] = []  # sorted host start addresses of the page-locked ranges of this process
_ranges: dict[int, _Range] = {}


def uses_gpu() -> bool:
    """Whether host memory is page-locked here (a usable GPU, not the simulator)."""
    return bool(_config.HAS_CUPY_GPU) and not _config.cuda_sim_enabled()


def _runtime():
    from cupy_backends.cuda.api import runtime

    return runtime


class _Range:
    """One page-locked host range; unlocks (or frees) itself when its last user is collected."""

    def __init__(self, start: int, size: int, allocated: bool):
        self.start, self.size, self.allocated = start, size, allocated
        self.users = 0

    def release(self) -> None:
        with _lock:
            self.users -= 1
            if self.users > 0:
                return
            _ranges.pop(self.start, None)
            del _starts[bisect.bisect_left(_starts, self.start)]
        runtime = _runtime()
        try:
            runtime.freeHost(self.start) if self.allocated else runtime.hostUnregister(self.start)
        except Exception:  # interpreter shutdown or a reset device: nothing left to release
            pass


def _track(array: np.ndarray, start: int, size: int, allocated: bool) -> np.ndarray:
    """Record the new range ``[start, start + size)`` and tie one use of it to ``array``'s lifetime."""
    entry = _Range(start, size, allocated)
    with _lock:
        _ranges[start] = entry
        bisect.insort(_starts, start)
    return _use(entry, array)


def _use(entry: _Range, array: np.ndarray) -> np.ndarray:
    """``array`` as a new array whose every view holds one use of ``entry`` (released when the
    last of them is collected)."""
    with _lock:
        entry.users += 1
    return leased(array, entry.release)  # every view of it holds the use (gglspeedup._lease)


def _lookup(address: int, end: int | None = None):
    """The range holding ``address`` (and ``end - 1`` when given), or ``None``."""
    with _lock:
        position = bisect.bisect_right(_starts, address) - 1
        if position < 0:
            return None
        entry = _ranges[_starts[position]]
        last = address + 1 if end is None else end
        return entry if last <= entry.start + entry.size else None


def is_pinned(array: np.ndarray) -> bool:
    """Whether ``array``'s memory lies in a range this process page-locked."""
    return isinstance(array, np.ndarray) and _lookup(int(array.ctypes.data)) is not None


def registered_ranges() -> list[tuple[int, int, bool, int]]:
    """``(start, size, allocated, users)`` of every page-locked range (for tests and reports)."""
    with _lock:
        return [(e.start, e.size, e.allocated, e.users) for e in (_ranges[s] for s in _starts)]


def aligned_empty(shape, dtype, alignment: int = 64) -> np.ndarray:
    """An uninitialised host array whose data pointer is a multiple of ``alignment`` bytes.

    JAX copies NumPy buffers that are not 64-byte aligned (and TensorFlow refuses them), so host
    outputs that may be handed to a framework are allocated here.
    """
    dtype = np.dtype(dtype)
    shape = (shape,) if np.isscalar(shape) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset : offset + nbytes].view(dtype).reshape(shape)


def pinned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised host array in page-locked memory that GPU kernels read directly (UVA).

    On a machine with a usable GPU this is portable, mapped pinned memory (``cudaHostAlloc``: every
    GPU of the process reads it at the same address, over PCIe, without a copy; page-aligned), freed
    when the last array viewing it is collected. Without one (CPU, or the simulator) it is ordinary,
    64-byte aligned host memory.
    """
    dtype = np.dtype(dtype)
    shape = (shape,) if np.isscalar(shape) else tuple(int(s) for s in shape)
    if not uses_gpu():
        return aligned_empty(shape, dtype)
    nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)  # CUDA refuses 0 bytes
    start = _runtime().hostAlloc(nbytes, _HOST_ALLOC_PORTABLE_MAPPED)  # page-aligned
    raw = (ctypes.c_byte * nbytes).from_address(start)
    array = np.frombuffer(raw, dtype=np.uint8)[: int(np.prod(shape, dtype=np.int64)) * dtype.itemsize]
    return _track(array.view(dtype).reshape(shape), start, nbytes, allocated=True)


def pin(array: np.ndarray, *, what: str = "array") -> np.ndarray:
    """``array`` page-locked where it lies (a view of the same memory), or a page-locked copy.

    In place when ``array`` is C-contiguous, non-empty and 64-byte aligned (shared-memory
    segments, ``.npy`` memory maps); a copy otherwise, or where the driver refuses (with a
    ``RuntimeWarning`` naming ``what``). The pages are registered once per process; every view
    :func:`pin` returns keeps them registered until collected. Without a GPU (or under the
    simulator) the in-place case is ``array`` itself.
    """
    if array.size == 0 or not array.flags.c_contiguous or array.ctypes.data % _ALIGNMENT:
        # Nothing to lock (CUDA refuses empty ranges), or a layout the kernels would read badly:
        # a page-locked, aligned copy.
        copy = pinned_empty(array.shape, array.dtype)
        copy[...] = array
        return copy
    if not uses_gpu():
        return array
    address, size = int(array.ctypes.data), max(1, int(array.nbytes))
    start = address - address % _PAGE
    end = -(-(address + size) // _PAGE) * _PAGE
    with _register_lock:
        entry = _lookup(start, end)
        if entry is not None:  # already page-locked in this process
            return _use(entry, array.view())
        runtime = _runtime()
        flags = _REGISTER_PORTABLE_MAPPED | (0 if array.flags.writeable else _REGISTER_READ_ONLY)
        try:
            device = runtime.getDevice()
            if not runtime.deviceGetAttribute(runtime.cudaDevAttrCanUseHostPointerForRegisteredMem, device):
                raise RuntimeError("this GPU cannot read registered host memory at its host address")
            runtime.hostRegister(start, end - start, flags)
        except Exception as error:
            warnings.warn(
                f"could not page-lock the {what} in place ({type(error).__name__}: {error}); using a "
                f"page-locked copy of its {size} bytes instead",
                RuntimeWarning,
                stacklevel=2,
            )
            copy = pinned_empty(array.shape, array.dtype)
            copy[...] = array
            return copy
        return _track(array.view(), start, end - start, allocated=False)


def device_array(array: np.ndarray):
    """The numba device-array view of a host array in page-locked memory (no copy), or ``None``
    when ``array`` is not in a range this process page-locked."""
    if not isinstance(array, np.ndarray) or _lookup(int(array.ctypes.data)) is None:
        return None
    from numba import cuda

    interface = {
        "shape": array.shape,
        "strides": None if array.flags.c_contiguous else array.strides,
        "typestr": array.dtype.str,
        "data": (int(array.ctypes.data), not array.flags.writeable),  # unified addressing: same address
        "version": 3,
        "stream": None,  # host memory: nothing to synchronise with
    }
    return cuda.from_cuda_array_interface(interface, owner=array, sync=False)

"""One launcher for every CUDA kernel of the package, and the counted host synchronisations.

Every kernel launch goes through :func:`launch`, which

- runs the kernel on **CuPy's current stream** (:func:`current_stream`: numba's view of it through
  ``cuda.external_stream``, the legacy default stream when CuPy's is the null stream), so the
  kernels and the CuPy work around them (``cumsum``, ``zeros``, slicing, pool reuse) are ordered on
  one stream, and a loader thread that makes its own CuPy stream current moves everything with it;
- hands numba device-array views of CuPy arrays made with ``sync=False``: numba's own import of a
  CuPy argument would block the host on the array's stream once per argument and launch;
- silences numba-cuda's low-occupancy warning for these launches only (small batches launch small
  grids on purpose), not for the user's own kernels;
- counts itself. :func:`to_host` is the one way the package reads device values on the host (a
  blocking synchronisation), and counts too, so tests assert how many launches and syncs a call
  costs (:func:`counters`).

Under numba's simulator the kernels run as Python on NumPy arrays: one stream, no views needed.
"""

from __future__ import annotations

import contextlib
import threading
import warnings

import numpy as np

from . import _pinned

__all__ = [
    "launch",
    "launch_rows",
    "to_host",
    "synchronize",
    "current_stream",
    "device_view",
    "counters",
    "reset_counters",
]

THREADS_PER_BLOCK = 128
SIM_THREADS_PER_BLOCK = 32  # the simulator pays ~1 ms per thread, idle ones included

_lock = threading.Lock()
_counts = {"launches": 0, "syncs": 0}
_quiet_lock = threading.Lock()


def counters() -> dict:
    """Kernel launches and host syncs made by the package since the last :func:`reset_counters`."""
    with _lock:
        return dict(_counts)


def reset_counters() -> None:
    with _lock:
        for name in _counts:
            _counts[name] = 0


def _count(name: str) -> None:
    with _lock:
        _counts[name] += 1


def current_stream(device):
    """The stream launches on ``device`` use: numba's view of CuPy's current stream (``None`` under
    the simulator, which has one stream)."""
    if device.simulated:
        return None
    import cupy
    from numba import cuda

    pointer = cupy.cuda.get_current_stream().ptr
    return cuda.external_stream(pointer) if pointer else cuda.default_stream()


def device_view(array):
    """What a kernel argument becomes: a numba device-array view of a CuPy array (no copy, no
    synchronisation) or of a host array in page-locked memory (:mod:`gglspeedup._pinned`, read
    over PCIe); records of them, field by field; anything else (scalars, numba arrays, NumPy
    arrays under the simulator) as it is.

    Raises
    ------
    TypeError
        for a host array outside page-locked memory on a real GPU (numba would silently copy it to
        the device on every launch).
    """
    if isinstance(array, tuple) and hasattr(array, "_fields"):
        return type(array)._make(device_view(value) for value in array)
    if isinstance(array, np.ndarray):
        if not _pinned.uses_gpu():
            return array
        view = _pinned.device_array(array)
        if view is None:
            raise TypeError(
                f"a kernel argument of shape {array.shape} is host memory that is not page-locked; "
                "place it on the device or in page-locked memory (gglspeedup._pinned)"
            )
        return view
    if not hasattr(array, "__cuda_array_interface__") or type(array).__module__.startswith("numba"):
        return array
    from numba import cuda

    # numba's as_cuda_array was measured on an H200 (numba-cuda 0.30.4) at ~45 us per argument:
    # a launch with eight CuPy arguments cost 0.41 ms on the host against 0.05 ms with the views
    # made beforehand. Building the view by hand (MemoryPointer + DeviceNDArray, no stream) cost
    # the same (0.42 ms), so the time is in numba's objects themselves: arguments that do not
    # change between calls are viewed once by their owners instead (samplers, feature tiers).
    return cuda.as_cuda_array(array, sync=False)


@contextlib.contextmanager
def _quiet_occupancy():
    """numba-cuda warns about every launch of fewer than 128 blocks (once per grid size); the
    package's small launches are deliberate. The switch is numba's own config flag, set only
    around the configuration of our launches."""
    try:
        from numba.cuda.core import config
    except ImportError:  # older numba-cuda: nothing to silence here
        yield
        return
    with _quiet_lock:
        previous = config.CUDA_LOW_OCCUPANCY_WARNINGS
        config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
        try:
            yield
        finally:
            config.CUDA_LOW_OCCUPANCY_WARNINGS = previous


def _configure(kernel, grid, block, stream):
    """``kernel[grid, block, stream]``: the one place a launch is configured."""
    if stream is None:
        return kernel[grid, block]
    with _quiet_occupancy():
        return kernel[grid, block, stream]


def launch(kernel, device, grid: int, block: int, *args) -> None:
    """Launch ``kernel[grid, block]`` on ``device``'s current CuPy stream with ``args``.

    ``args`` may hold CuPy arrays and records of them (viewed without a copy or a sync), NumPy
    arrays under the simulator, and scalars. Nothing is launched for an empty grid.
    """
    if grid <= 0:
        return
    stream = current_stream(device)
    configured = _configure(kernel, grid, block, stream)
    _count("launches")
    if device.simulated:
        with warnings.catch_warnings():  # NumPy scalar uint64 wrap-around in the RNG
            warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
            configured(*args)
    else:
        configured(*(device_view(arg) for arg in args))


def launch_rows(kernel, device, count: int, *args) -> None:
    """Launch ``kernel`` with one thread per item for ``count`` items (``cuda.grid(1) < count``)."""
    if count <= 0:
        return
    block = min(SIM_THREADS_PER_BLOCK, count) if device.simulated else THREADS_PER_BLOCK
    launch(kernel, device, -(-count // block), block, *args)


def to_host(array) -> np.ndarray:
    """``array`` (device or host) as a NumPy array: a blocking device-to-host copy, counted.

    Read several values in one call (``to_host(xp.stack(values))``): each call is one sync.
    """
    _count("syncs")
    return array.get() if hasattr(array, "get") and not isinstance(array, np.ndarray) else np.asarray(array)


def synchronize(waitable) -> None:
    """Block the host until ``waitable`` (a CuPy event or stream) completes: a counted sync."""
    _count("syncs")
    waitable.synchronize()

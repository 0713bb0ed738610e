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
- after a kernel's first launch with a given set of argument types (numba's own path, which
  compiles and picks the overload), launches it directly (:class:`_Direct`): the arguments are
  flattened the way numba-cuda's ``_Kernel._prepare_args`` does, CuPy arrays read off their own
  attributes, and handed to ``cuda.core.launch`` as numba does. On an H200 numba's path cost
  0.41-0.55 ms of host time per launch with eight CuPy arguments (~45 us per argument in
  ``as_cuda_array``), which made every small sampling call and gather host-bound.
  ``GGLSPEEDUP_NUMBA_LAUNCH=1`` keeps numba's path for every launch;
- counts itself. :func:`to_host` is the one way the package reads device values on the host (a
  blocking synchronisation), and counts too, so tests assert how many launches and syncs a call
  costs (:func:`counters`).

Under numba's simulator the kernels run as Python on NumPy arrays: one stream, no views needed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import warnings
from collections.abc import Callable
from typing import NamedTuple

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
# numba's simulator runs one kernel at a time per process (it swaps a module-wide kernel context):
# two threads launching at once (a loader's workers) crash inside it
_simulator_lock = threading.Lock()


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


def _simulator_args(args: tuple) -> tuple:
    """``args`` with every read-only host array wrapped as numba's ``cuda.In``: the simulator copies
    each array argument back after the kernel, which a read-only array (a memory-mapped table
    registered in place, ids in a read-only buffer) refuses with NumPy's "assignment destination is
    read-only". The kernels never write their read-only inputs, so nothing is lost."""
    if not any(isinstance(arg, np.ndarray) and arg.ndim and not arg.flags.writeable for arg in args):
        return args
    from numba import cuda

    return tuple(
        cuda.In(arg) if isinstance(arg, np.ndarray) and arg.ndim and not arg.flags.writeable else arg for arg in args
    )


def launch(kernel, device, grid: int, block: int, *args) -> None:
    """Launch ``kernel[grid, block]`` on ``device``'s current CuPy stream with ``args``.

    ``args`` may hold CuPy arrays and records of them (viewed without a copy or a sync), NumPy
    arrays under the simulator, and scalars. Nothing is launched for an empty grid.
    """
    if grid <= 0:
        return
    if device.simulated:
        _count("launches")
        with _simulator_lock, warnings.catch_warnings():  # NumPy scalar uint64 wrap-around in the RNG
            warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
            _configure(kernel, grid, block, current_stream(device))(*_simulator_args(args))
        return
    _count("launches")
    if _direct.launch(kernel, grid, block, args):
        return
    views = tuple(device_view(arg) for arg in args)
    _configure(kernel, grid, block, current_stream(device))(*views)
    _direct.learn(kernel, args, views)


class _Core(NamedTuple):
    """What :class:`_Direct` takes from CuPy, numba-cuda and cuda.core."""

    ndarray: type  # CuPy's array
    numba_array: type  # numba's device arrays (the views owners make once)
    current_stream: Callable  # CuPy's current stream
    stream_of: Callable  # CUDA stream handle -> cuda.core Stream
    config: Callable  # cuda.core LaunchConfig
    launch: Callable  # cuda.core launch
    typeof: Callable  # numba's argument type of a view


class _Direct:
    """Launches of compiled kernels without numba's per-launch argument objects.

    numba-cuda launches a kernel by typing every argument, making a ``DeviceNDArray`` of every
    CuPy array (``as_cuda_array``), flattening each array into the kernel's parameters (meminfo,
    parent, size, itemsize, data pointer, shape, strides) and calling ``cuda.core.launch``. Once
    numba has launched ``kernel`` for a set of argument types, the overload it compiled for them
    is looked up here (:meth:`learn`) and every later launch with arguments of the same kinds
    (:func:`_key`: array dtype, rank and contiguity; scalar type) flattens them the same way
    straight from the CuPy arrays (:meth:`launch`). Kernels with numba extensions, debug
    exception checks or cooperative launches, and arguments of any other kind, stay on numba's
    path. Thread-safe: the tables only grow, by single dictionary assignments.
    """

    def __init__(self):
        self.enabled = os.environ.get("GGLSPEEDUP_NUMBA_LAUNCH", "") != "1"
        self.overloads = {}  # (kernel, key) -> numba's compiled overload, or None (numba's path)
        self.configs = {}  # (grid, block) -> cuda.core LaunchConfig
        self.streams = {}  # CUDA stream handle -> cuda.core Stream
        self._core = None

    def _imports(self):
        """What the direct path calls (a :class:`_Core`), imported once; None (and the path off)
        where this numba-cuda does not have it (older releases launch without ``cuda.core``)."""
        if self._core is None:
            try:
                import cupy
                from cuda.core import LaunchConfig
                from cuda.core import launch as core_launch
                from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase
                from numba.cuda.cudadrv.driver import ExperimentalStream
                from numba.cuda.dispatcher import _Kernel
                from numba.cuda.typing.typeof import Purpose, typeof
            except ImportError:
                self.enabled = False
                return None
            if not hasattr(_Kernel, "_prepare_args"):
                self.enabled = False
                return None
            self._core = _Core(
                cupy.ndarray,
                DeviceNDArrayBase,
                cupy.cuda.get_current_stream,
                ExperimentalStream.from_handle,
                LaunchConfig,
                core_launch,
                lambda view: typeof(view, Purpose.argument),
            )
        return self._core

    def launch(self, kernel, grid: int, block: int, args) -> bool:
        """Launch ``kernel`` directly when its overload for ``args`` is known; False otherwise."""
        core = self._imports() if self.enabled else None
        if core is None:
            return False
        key = _key(args, core.ndarray)
        overload = self.overloads.get((kernel, key)) if key is not None else None
        if overload is None:
            return False
        handle = core.current_stream().ptr
        stream = self.streams.get(handle)
        if stream is None:
            if len(self.streams) > 64:  # streams come and go (one per loader thread): stay small
                self.streams.clear()
            stream = self.streams[handle] = core.stream_of(handle)
        config = self.configs.get((grid, block))
        if config is None:
            if len(self.configs) > 4096:
                self.configs.clear()
            config = self.configs[(grid, block)] = core.config(grid=grid, block=block)
        params = []
        for ty, arg in zip(overload.argument_types, args):
            _flatten(overload, ty, arg, core.ndarray, stream, params, core.numba_array)
        core.launch(stream, config, overload._codelibrary.get_cufunc().kernel, *params)
        return True

    def learn(self, kernel, args, views) -> None:
        """After numba launched ``kernel`` on ``views`` (of ``args``): remember its overload."""
        core = self._imports() if self.enabled else None
        if core is None:
            return
        key = _key(args, core.ndarray)
        if key is None or (kernel, key) in self.overloads:
            return
        overload = None
        try:
            types_ = tuple(core.typeof(view) for view in views)
            overload = getattr(kernel, "overloads", {}).get(types_)
        except Exception:  # an argument numba types in its own way: keep numba's path
            overload = None
        if overload is not None and (
            getattr(overload, "extensions", None)
            or getattr(overload, "debug", False)
            or overload.cooperative
            or len(overload.argument_types) != len(views)  # defaults numba filled in: its path
        ):
            overload = None
        self.overloads[(kernel, key)] = overload


_INT64 = range(-(2**63), 2**63)


def _key(args, ndarray):
    """What selects a kernel's overload, per argument, cheaply; None for an argument of a kind
    :class:`_Direct` does not flatten itself (it then stays on numba's path)."""
    key = []
    for arg in args:
        kind = type(arg)
        if kind is ndarray:
            flags = arg.flags
            key.append((kind, arg.dtype, arg.ndim, flags.c_contiguous, flags.f_contiguous))
        elif kind is int:
            key.append((int, arg in _INT64))  # numba types an int past int64 as uint64
        elif kind is bool or kind is float:
            key.append(kind)
        elif isinstance(arg, np.generic):
            key.append((kind, arg.dtype))
        elif isinstance(arg, tuple) and hasattr(arg, "_fields"):
            fields = _key(arg, ndarray)
            if fields is None:
                return None
            key.append((kind, fields))
        elif type(arg).__module__.startswith("numba") and hasattr(arg, "_numba_type_"):
            key.append((kind, arg._numba_type_))  # a view made once by its owner
        else:
            return None
    return tuple(key)


_AS_IS = object()  # a scalar numba hands to the launch as it is (a boolean)
_scalar_converters = {}  # numba scalar type -> ctypes class, _AS_IS, or None (numba's own code)


def _scalar_converter(ty):
    """How numba-cuda's ``_Kernel._prepare_args`` turns a scalar of type ``ty`` into a parameter,
    looked up once per type: ``c_<ty>`` for an integer, ``c_double`` for float64, ``c_float`` for
    float32, the value itself for a boolean, and None (numba's own code) for anything else.
    numba's code costs ~8 us per scalar on a GPU host (``getattr(ctypes, "c_%s" % ty)`` and a chain
    of type tests each launch); the project's launches pass 2-6 scalars each."""
    converter = _scalar_converters.get(ty, _scalar_converters)
    if converter is not _scalar_converters:
        return converter
    from numba.cuda import types

    converter = None
    if isinstance(ty, types.Integer):
        converter = getattr(ctypes, f"c_{ty}", None)  # numba's own name for it
    elif ty == types.float64:  # (float16 stays on numba's code: a uint16 view)
        converter = ctypes.c_double
    elif ty == types.float32:
        converter = ctypes.c_float
    elif ty == types.boolean:
        converter = _AS_IS
    _scalar_converters[ty] = converter  # one assignment: thread-safe, the table only grows
    return converter


def _flatten(overload, ty, arg, ndarray, stream, params, numba_array=()) -> None:
    """``arg`` as the kernel's parameters, as numba-cuda's ``_prepare_args`` lays them out:
    meminfo, parent, size, itemsize, data pointer, shape, strides for an array (CuPy's, or a numba
    view an owner made once), record fields in order, scalars converted as numba converts them
    (:func:`_scalar_converter`; numba's own code for kinds it does not know)."""
    if type(arg) is ndarray:
        params += (0, 0, arg.size, arg.itemsize, arg.data.ptr, *arg.shape, *arg.strides)
    elif isinstance(arg, numba_array):  # numba's path re-wraps these at ~6 us each (H200)
        pointer = arg.device_ctypes_pointer.value or 0
        params += (0, 0, arg.size, arg.dtype.itemsize, pointer, *arg.shape, *arg.strides)
    elif isinstance(arg, tuple) and hasattr(arg, "_fields"):
        for field_type, field in zip(ty, arg):
            _flatten(overload, field_type, field, ndarray, stream, params, numba_array)
    else:
        converter = _scalar_converter(ty)
        if converter is None:
            overload._prepare_args(ty, arg, stream, [], params)
        elif converter is _AS_IS:
            params.append(arg)
        else:
            params.append(converter(arg))


_direct = _Direct()


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

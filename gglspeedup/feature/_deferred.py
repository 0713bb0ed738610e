"""The range check of ``FeatureStore.gather(..., check="deferred")`` on a CUDA store: the gather
kernel checks every id, the host learns of a bad one without a synchronisation of its own.
"""

from __future__ import annotations

import threading

import numpy as np

from .._launch import device_view, synchronize, to_host
from .._pinned import pinned_empty

__all__ = ["DeferredCheck"]

_FIRST_KEY = 1 << 32  # call numbers start at 1: key = call << 32 | position


class DeferredCheck:
    """The range check of ``gather(..., check="deferred")``: done by the gather kernel itself, read
    by the host without a synchronisation of its own.

    ``flag`` (int64 device array: lowest key, its id, a lock) holds ``NO_BAD_KEY`` until the kernel
    (:func:`~._kernels.gather_cuda.gather_two_tier_checked`) meets an id outside
    ``[0, num_rows)``; it then holds ``call << 32 | position`` of the first such id of the earliest
    such call, and the id itself. Behind every checked launch, on the same stream, an asynchronous
    copy brings ``flag`` into ``seen`` (page-locked host memory, 24 bytes); the host reads ``seen``
    at the next gather of the store (any mode) or at :meth:`synchronize` for free, and only when it
    shows a key does it synchronise, read ``flag`` itself, reset both and raise. An error therefore
    surfaces once the kernel and its copy have run: at the first gather or ``synchronize()`` after
    that, one call late or more (never lost: every later copy carries the same key). Under the
    simulator the kernel and the copy are done when the launch returns, so the error surfaces at
    the very next call, as on a GPU that has caught up.

    Calls are numbered from 1 in the key's upper 31 bits; positions take the lower 32, so a
    deferred gather takes fewer than ``2**32`` ids (the store checks larger batches at once).
    """

    def __init__(self, device, num_rows: int):
        from ._kernels.gather_cuda import NO_BAD_KEY

        self.device = device
        self.num_rows = int(num_rows)
        self.lock = threading.Lock()
        self.clean = np.array([NO_BAD_KEY, 0, 0], dtype=np.int64)
        self.seen = pinned_empty(3, np.int64)  # the GPU's copy lands here (page-locked: asynchronous)
        self.seen[...] = self.clean
        with device:
            self.flag = device.xp.array(self.clean)  # a copy (NumPy under the simulator), never clean itself
            self.view = device_view(self.flag)
        self.calls = 0
        self.streams = {}  # CUDA stream handle -> CuPy stream with a copy not yet waited for

    def next_call(self):
        """``(key_base, stream)`` of the next checked launch; call with :attr:`lock` held."""
        self.calls = self.calls + 1 if self.calls + 1 < 2**31 else 1  # the key stays an int64
        stream = None
        if not self.device.simulated:
            stream = self.device.xp.cuda.get_current_stream()
            if stream.ptr not in self.streams:
                if len(self.streams) >= 64:  # streams come and go (one per loader thread)
                    self._wait_streams()
                self.streams[stream.ptr] = stream
        return self.calls * _FIRST_KEY, stream

    def copy_back(self, stream) -> None:
        """``seen[...] = flag`` behind the launch on ``stream``: asynchronous, no sync."""
        if stream is None:  # simulator: the kernel has already run
            self.seen[...] = self.flag
            return
        runtime = self.device.xp.cuda.runtime
        runtime.memcpyAsync(
            self.seen.ctypes.data, self.flag.data.ptr, self.flag.nbytes, runtime.memcpyDeviceToHost, stream.ptr
        )

    def _wait_streams(self) -> None:
        for stream in self.streams.values():
            synchronize(stream)  # sync: the kernels and copies queued on it have run
        self.streams.clear()

    def synchronize(self) -> None:
        """Wait for every deferred gather so far, then :meth:`raise_recorded`."""
        with self.lock:
            if self.streams:
                with self.device:
                    self._wait_streams()
        self.raise_recorded()

    def raise_recorded(self) -> None:
        """Raise the ``IndexError`` of the first bad id ``seen`` shows (once: both flags are reset
        first); nothing, and no sync, while ``seen`` shows none."""
        if self.seen[0] == self.clean[0]:
            return
        with self.lock, self.device:
            self._wait_streams()  # every copy into seen has landed: none can bring an old key back
            key, row, _ = (int(value) for value in to_host(self.flag))  # sync
            if key == self.clean[0]:  # another thread raised it first
                return
            if self.device.simulated:
                self.flag[...] = self.clean
            else:
                self.flag.set(self.clean)
                synchronize(self.device.xp.cuda.get_current_stream())  # sync: reset before any later launch
            self.seen[...] = self.clean
        call, position = key >> 32, key & (_FIRST_KEY - 1)
        raise IndexError(
            f"ids[{position}] = {row} is out of range for a table of {self.num_rows} rows (ids must lie in "
            f"[0, {self.num_rows}); negative ids do not wrap around): found by deferred gather {call} of this "
            "store (check='deferred'), which wrote zeros for that row; raised at the first gather or "
            "synchronize() after it ran"
        )

"""Where a :class:`~gglspeedup.feature.FeatureStore` reads rows from: one tier object per store.

Both classes have the same face: ``gather(ids, out)`` (``out[i] = x[ids[i]]``, ids checked and
non-empty), ``hits`` (rows served from device memory so far), ``reset()``, ``cached_ids`` and
``cache_map``, so the store holds one tier and never asks which kind it is.

- :class:`HostTier` (``device="cpu"``): the caller's table itself, read by the parallel CPU
  gather; nothing is cached, so ``hits`` stays 0.
- :class:`CUDATiers` (a CUDA device, real or simulated): a device cache in front of pinned host
  memory. It holds
- ``device_table``: the cached rows, slot ``s`` = ``cached_ids[s]`` (CuPy on a GPU, NumPy under
  the simulator), as unsigned words;
- ``host_table``: every other row, in ascending id order, in pinned host memory that the kernel
  reads in place (UVA); the two tables together hold each row once, so memory is not doubled;
- ``location``: int64 per row, ``slot >= 0`` for a cached row, ``-1 - host_row`` otherwise (one
  load tells the kernel both the tier and the row);
- ``counters``: ``counters[0]`` is the number of rows served from the device table so far.
"""

from __future__ import annotations

import numpy as np

from ..device import aligned_empty, pinned_empty
from ._kernels.gather import gather_host, word_dtype

__all__ = ["HostTier", "CUDATiers", "device_free_bytes"]

# Rows move to the GPU through a pinned staging buffer of at most this many bytes.
_STAGING_BYTES = 64 << 20


def device_free_bytes(device) -> int | None:
    """Free memory on a real GPU in bytes; ``None`` under the simulator (no meaningful number)."""
    if device.simulated:
        return None
    import cupy

    with device:
        free, _total = cupy.cuda.runtime.memGetInfo()
    return int(free)


def _address(array) -> int:
    return int(array.ctypes.data) if isinstance(array, np.ndarray) else int(array.data.ptr)  # CuPy


def _next_power_of_two(value: int) -> int:
    return 1 << max(0, int(value) - 1).bit_length()


class HostTier:
    """The CPU store's single tier: ``table`` (C-contiguous, used in place) read by
    :func:`~._kernels.gather.gather_host` at the widest word both buffers' alignment allows."""

    hits = 0  # no device cache: every row is a host read

    def __init__(self, table: np.ndarray):
        self.table = table
        self.row_bytes = table.shape[1] * table.dtype.itemsize
        self.cached_ids = np.empty(0, dtype=np.int64)
        self._views: dict = {}

    @property
    def cache_map(self) -> np.ndarray:
        return np.full(self.table.shape[0], -1, dtype=np.int64)

    def reset(self) -> None:
        """Nothing to reset: there are no device hits to count."""

    def gather(self, ids, out) -> None:
        """``out[i] = table[ids[i]]``; ids : int32/int64 host array, in range; out : C-contiguous."""
        word = word_dtype(self.row_bytes, self.table.ctypes.data, out.ctypes.data)
        view = self._views.get(word)
        if view is None:
            view = self._views[word] = self.table.view(word)
        gather_host(view, ids, out.view(word))


class CUDATiers:
    """Device cache + pinned host rows for ``table`` on ``device``, cache slots = ``cached_ids``.

    Parameters
    ----------
    table : ndarray, shape (num_rows, dim), C-contiguous
    cached_ids : int64 ndarray, shape (num_cached,), distinct, in range
    device : Device (CUDA, real or simulated)
    """

    def __init__(self, table: np.ndarray, cached_ids: np.ndarray, device):
        num_rows, dim = table.shape
        self.device = device
        self.row_bytes = dim * table.dtype.itemsize
        self.word = word_dtype(self.row_bytes)  # our own buffers are at least 64-byte aligned
        self.words = self.row_bytes // self.word.itemsize
        num_cached = len(cached_ids)
        is_host = np.ones(num_rows, dtype=bool)
        is_host[cached_ids] = False
        host_ids = np.flatnonzero(is_host)
        location = np.empty(num_rows, dtype=np.int64)
        location[cached_ids] = np.arange(num_cached, dtype=np.int64)
        location[host_ids] = -1 - np.arange(len(host_ids), dtype=np.int64)

        # Fill both tables with the parallel CPU gather, viewing the caller's table at the widest
        # word its alignment allows.
        source_word = word_dtype(self.row_bytes, table.ctypes.data)
        source = table.view(source_word)
        # Both tables get at least one row: CUDA refuses zero-byte pinned allocations, and a
        # table no id maps to is never read.
        self.host_table = pinned_empty((max(1, len(host_ids)), self.words), self.word)
        if len(host_ids):
            gather_host(source, host_ids, np.asarray(self.host_table).view(source_word))
        xp = device.xp
        with device:
            if xp is np:  # simulator: the "device" table is a private host array
                self.device_table = aligned_empty((max(1, num_cached), self.words), self.word)
                if num_cached:
                    gather_host(source, cached_ids, self.device_table.view(source_word))
            else:
                self.device_table = xp.empty((max(1, num_cached), self.words), dtype=self.word)
                if num_cached:
                    self._upload(source, cached_ids)
            self.location = xp.asarray(location)
            self.counters = xp.zeros(1, dtype=np.int64)
        self.location_host = location
        self.cached_ids = cached_ids
        self.group = min(32, _next_power_of_two(self.words))

    @property
    def cache_map(self) -> np.ndarray:
        """Per row: its cache slot, or -1 when it is read from host memory (int64, host)."""
        return np.maximum(self.location_host, -1)

    def _upload(self, source, cached_ids):
        """Copy the cached rows to the GPU through a bounded pinned staging buffer."""
        chunk = max(1, _STAGING_BYTES // self.row_bytes)
        staging = pinned_empty((min(chunk, len(cached_ids)), self.words), self.word)
        staging_view = np.asarray(staging).view(source.dtype)
        for start in range(0, len(cached_ids), chunk):
            stop = min(len(cached_ids), start + chunk)
            gather_host(source, cached_ids[start:stop], staging_view[: stop - start])
            self.device_table[start:stop].set(np.asarray(staging)[: stop - start])
        self.device.xp.cuda.get_current_stream().synchronize()  # sync: staging is reused below

    @property
    def hits(self) -> int:
        return int(self.counters[0])  # sync

    def reset(self) -> None:
        self.counters[0] = 0

    def gather(self, ids, out) -> None:
        """``out[i] = row ids[i]`` from whichever tier holds it; one kernel launch.

        ids : int32/int64 device array, in range; out : (len(ids), dim) device array, C-contiguous.
        """
        if len(ids) == 0:
            return
        if _address(out) % self.word.itemsize:  # a caller's misaligned buffer: rare, so stage
            staging = self.device.xp.empty((len(ids), self.words), dtype=self.word)
            self._launch(ids, staging)
            out.view(np.uint8)[...] = staging.view(np.uint8).reshape(out.shape[0], -1)
            return
        self._launch(ids, out.view(self.word))

    def _launch(self, ids, out_words) -> None:
        from ._kernels.gather_cuda import gather_two_tier as kernel

        count = len(ids)
        args = (self.device_table, self.host_table, self.location, ids, out_words, self.group, self.counters)
        if self.device.simulated:
            # ~1 ms per simulated thread: one warp, so the grid-stride loop does the rest.
            kernel[1, 32](*args)
            return
        from numba import cuda

        block = 256
        rows_per_block = block // self.group
        with cuda.gpus[self.device.index]:
            grid = min(-(-count // rows_per_block), cuda.get_current_device().MULTIPROCESSOR_COUNT * 16)
            stream_ptr = self.device.xp.cuda.get_current_stream().ptr
            stream = cuda.external_stream(stream_ptr) if stream_ptr else cuda.default_stream()
            kernel[grid, block, stream](*args)

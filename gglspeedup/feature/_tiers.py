"""Where a :class:`~gglspeedup.feature.FeatureStore` reads rows from: one tier object per store.

Every class has the same face: ``gather(ids, out, deferred=False)`` (``out[i] = x[ids[i]]``, ids
checked and non-empty; ``deferred``: ids checked in the kernel, :class:`DeferredCheck`), ``hits``
(rows served from device memory so far), ``reset()``, ``raise_deferred()`` and ``synchronize()``,
``cached_ids`` and ``cache_map``, so the store holds one tier and never asks which kind it is.

- :class:`HostTier` (``device="cpu"``): the caller's table itself, read by the parallel CPU
  gather; nothing is cached, so ``hits`` stays 0.
- :class:`HostCacheTier` (``device="cpu"``, a table on disk: memory-mapped): the policy's rows
  copied into RAM (up to ``cache_size``), the rest read from the mapping in place by the same
  gather; ``hits`` counts the rows served from RAM.
- :class:`CUDATiers` (a CUDA device, real or simulated): a device cache in front of page-locked
  host memory. It holds
- ``device_table``: the cached rows, slot ``s`` = ``cached_ids[s]`` (CuPy on a GPU, NumPy under
  the simulator), as unsigned words;
- ``host_table``: the rows the kernel reads from host memory in place (UVA). With ``pin="copy"``
  every other row, in ascending id order, copied into page-locked memory (the two tables hold each
  row once); with ``pin="register"`` the caller's whole table, page-locked where it lies (no copy,
  once per process however many stores read it: for tables in shared memory);
- ``location``: int64 per row, ``slot >= 0`` for a cached row, ``-1 - host_row`` otherwise (one
  load tells the kernel both the tier and the row);
- ``counters``: ``counters[0]`` is the number of rows served from the device table so far;
- ``deferred``: the :class:`DeferredCheck` of ``gather(..., check="deferred")`` (made on first use).

Every launch goes through :func:`gglspeedup._launch.launch` (CuPy's current stream) and every
device read through :func:`gglspeedup._launch.to_host` (a counted sync).
"""

from __future__ import annotations

import threading

import numpy as np

from .._backing import check_backing, check_unchanged
from .._counts import COUNTS_LOCK
from .._launch import device_view, launch, synchronize, to_host
from .._pinned import pin, pinned_empty
from ..device import aligned_empty
from ._deferred import DeferredCheck
from ._kernels.gather import gather_cached, gather_host, word_dtype

__all__ = ["HostTier", "HostCacheTier", "CUDATiers", "device_free_bytes", "STAGING_BYTES", "PINS"]

# Rows move to the GPU through two page-locked staging buffers of at most this many bytes each.
STAGING_BYTES = 64 << 20
PINS = ("copy", "register")
_GRID_PER_SM = 16  # gather blocks per SM at most: the grid-stride loop does the rest


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

    def __init__(self, table: np.ndarray, backing=None):
        self.table = table
        self.backing = backing  # the memory-mapped file behind the table, checked per gather
        # A read-only mapping is a table as opened: a rewrite of its file is refused by name. A
        # writable one (the caller's np.memmap "r+") is read as it is: writes through it show.
        self._watch = check_backing if table.flags.writeable else _check_read_only
        self._watch(backing)  # unchanged since it was opened (from_npy's stat)
        self.row_bytes = table.shape[1] * table.dtype.itemsize
        self.cached_ids = np.empty(0, dtype=np.int64)
        self._views: dict = {}
        self._cold = ColdReads(table) if backing is not None else None

    @property
    def cache_map(self) -> np.ndarray:
        return np.full(self.table.shape[0], -1, dtype=np.int64)

    def reset(self) -> None:
        """Nothing to reset: there are no device hits to count."""

    def raise_deferred(self) -> None:
        """Nothing is deferred on the CPU: host ids are checked before every gather."""

    def synchronize(self) -> None:
        """Nothing to wait for: a CPU gather is done when it returns."""

    def sources(self) -> list:
        """``(name, array)`` of every array the gather reads (an ``out`` must not overlap them)."""
        return [("feature table", self.table)]

    def gather(self, ids, out, deferred: bool = False) -> None:
        """``out[i] = table[ids[i]]``; ids : int32/int64 host array, in range (checked on the host,
        whatever ``deferred``); out : C-contiguous."""
        self._watch(self.backing)
        if self._cold is not None:
            self._cold.advise(ids)
        word = word_dtype(self.row_bytes, self.table.ctypes.data, out.ctypes.data)
        view = self._views.get(word)
        if view is None:
            view = self._views[word] = self.table.view(word)
        gather_host(view, ids, out.view(word))


_READ_ONLY = "the store serves the table as it was opened; a gather now would read the new (or a half-written) file"


def _check_read_only(backing) -> None:
    check_unchanged(backing, _READ_ONLY)


class ColdReads:
    """The pages of a memory-mapped table a gather is about to read, asked for all at once
    (:func:`~._kernels.disk.advise_rows`), each page once per store; rows with ``location >= 0``
    (in a RAM cache) are skipped."""

    def __init__(self, table: np.ndarray, location: np.ndarray | None = None):
        from ._kernels.disk import PAGE_BITS

        self.base = np.uint64(table.ctypes.data)
        self.row_bytes = np.uint64(table.shape[1] * table.dtype.itemsize)
        self.use_location = location is not None
        self.location = location if location is not None else np.zeros(1, np.int32)
        pages = ((table.ctypes.data + table.nbytes) >> PAGE_BITS) - (table.ctypes.data >> PAGE_BITS) + 1
        self.asked = np.zeros(pages, np.uint8)

    def advise(self, ids) -> int:
        from ._kernels.disk import advise_rows

        return int(advise_rows(ids, self.location, self.use_location, self.base, self.row_bytes, self.asked))


class HostCacheTier:
    """A RAM cache in front of a memory-mapped ``table`` on the CPU: rows ``cached_ids`` copied
    once into 64-byte-aligned memory (slot ``s`` holds row ``cached_ids[s]``), every other row read
    from the mapping in place (page cache, or the disk when cold)."""

    def __init__(self, table: np.ndarray, cached_ids: np.ndarray, backing=None):
        from .._storage import advise_random

        num_rows = table.shape[0]
        advise_random(table)  # rows are read at random: no read-ahead past each row's page
        self.table = table
        # The mapped file, checked where the cache is filled and per gather: a shrunk file would
        # SIGBUS, one rewritten in place would give old cached rows beside new mapped ones.
        self.backing = backing
        self.row_bytes = table.shape[1] * table.dtype.itemsize
        self.cached_ids = cached_ids
        self.word = word_dtype(self.row_bytes, table.ctypes.data)
        self.cache = aligned_empty((max(1, len(cached_ids)), self.row_bytes // self.word.itemsize), self.word)
        self._source = table.view(self.word)
        if len(cached_ids):
            gather_host(self._source, cached_ids, self.cache)
        check_unchanged(backing)  # the cache holds the file as it was opened
        self.location = np.full(num_rows, -1, np.int32 if len(cached_ids) < 2**31 else np.int64)
        self.location[cached_ids] = np.arange(len(cached_ids), dtype=self.location.dtype)
        self.hits = 0
        self._cold = ColdReads(table, self.location)

    @property
    def cache_map(self) -> np.ndarray:
        return self.location.astype(np.int64)

    def reset(self) -> None:
        self.hits = 0

    raise_deferred = HostTier.raise_deferred
    synchronize = HostTier.synchronize

    def sources(self) -> list:
        return [("feature table", self.table), ("RAM cache", self.cache)]

    def gather(self, ids, out, deferred: bool = False) -> None:
        """``out[i] = table[ids[i]]``, from RAM where cached; ids in range (checked on the host,
        whatever ``deferred``), out C-contiguous."""
        check_unchanged(self.backing)
        self._cold.advise(ids)
        if out.ctypes.data % self.word.itemsize:  # a caller's misaligned buffer: rare, so stage
            staging = aligned_empty((len(ids), self.cache.shape[1]), self.word)
            self.gather(ids, staging)
            out.view(np.uint8)[...] = staging.view(np.uint8).reshape(out.shape[0], -1)
            return
        hits = gather_cached(self.cache, self._source, self.location, ids, out.view(self.word))
        with COUNTS_LOCK:  # loaders' producer threads gather at once (workers > 1)
            self.hits += hits


class CUDATiers:
    """Device cache + page-locked host rows for ``table`` on ``device``, slots = ``cached_ids``.

    Parameters
    ----------
    table : ndarray, shape (num_rows, dim), C-contiguous
    cached_ids : int64 ndarray, shape (num_cached,), distinct, in range
    device : Device (CUDA, real or simulated)
    pin : {"copy", "register"}
        How host rows become readable by the GPU (see the module notes).
    staging_bytes : int, optional
        Size of each of the two page-locked buffers the cache is uploaded through
        (default :data:`STAGING_BYTES`).
    backing : Backing, optional
        The memory-mapped file behind ``table``: checked unchanged once the tiers are filled, and
        before every gather with ``pin="register"`` (the host rows are then read from it).
    """

    def __init__(
        self,
        table: np.ndarray,
        cached_ids: np.ndarray,
        device,
        *,
        pin: str = "copy",
        staging_bytes: int | None = None,
        backing=None,
    ):
        num_rows, dim = table.shape
        self.device = device
        self.row_bytes = dim * table.dtype.itemsize
        self.staging_bytes = STAGING_BYTES if staging_bytes is None else int(staging_bytes)
        num_cached = len(cached_ids)
        # The kernel moves rows as unsigned words: the widest dividing the row width and every
        # buffer's address (our own buffers are 64-byte aligned; a registered table is the caller's).
        self.word = word_dtype(self.row_bytes, *((table.ctypes.data,) if pin == "register" else ()))
        self.words = self.row_bytes // self.word.itemsize
        source_word = word_dtype(self.row_bytes, table.ctypes.data)
        source = table.view(source_word)  # the caller's table at the widest word its alignment allows
        location = np.empty(num_rows, dtype=np.int64)
        location[cached_ids] = np.arange(num_cached, dtype=np.int64)
        xp = device.xp
        with device:  # page-locking, copies and allocations belong to this device
            if pin == "register":
                is_host = np.ones(num_rows, dtype=bool)
                is_host[cached_ids] = False
                location[is_host] = -1 - np.flatnonzero(is_host)
                self.host_table = pin_table(table).view(self.word)
            else:
                self.host_table = self._host_copy(source, cached_ids, location, source_word)
            self.device_table = self._device_empty(max(1, num_cached))
            # The kernel takes flat word arrays (one multiply-add per access): views, no copies.
            tables = (self.device_table.reshape(-1), self.host_table.reshape(-1))
            if num_cached:
                self._upload(source, cached_ids)
            self.location = xp.asarray(location)
            self.counters = xp.zeros(1, dtype=np.int64)
            # The arguments every launch reuses, as the numba views kernels take, made once.
            self._fixed = tuple(device_view(a) for a in (*tables, self.location))
            self._counters = device_view(self.counters)
        self.deferred = None  # the DeferredCheck of check="deferred" gathers, made on first use
        self.location_host = location
        self.cached_ids = cached_ids
        check_unchanged(backing)  # the tiers hold the file as it was opened
        self.backing = backing if pin == "register" else None  # a copy never reads the file again
        # Lanes per row: a warp for rows of 32 words or more. H200, 512-byte rows (64 words), a
        # 200k-row gather in two sweeps (tools/gpu_probe.py): 32 lanes 0.087 / 0.088 ms, 16 lanes
        # 0.079 / 0.097 (no difference), 8 lanes 0.103 / 0.130, 4 lanes 0.152 / 0.153.
        self.group = min(32, _next_power_of_two(self.words))
        self._max_grid = None if device.simulated else _multiprocessors(device) * _GRID_PER_SM

    # ------------------------------------------------------------------ building
    def _host_copy(self, source, cached_ids, location, source_word):
        """Every row not cached, in ascending id order, copied into new page-locked memory."""
        is_host = np.ones(len(location), dtype=bool)
        is_host[cached_ids] = False
        host_ids = np.flatnonzero(is_host)
        location[host_ids] = -1 - np.arange(len(host_ids), dtype=np.int64)
        # At least one row: CUDA refuses zero-byte pinned allocations, and a table no id maps to
        # is never read.
        host = pinned_empty((max(1, len(host_ids)), self.words), self.word)
        if len(host_ids):
            gather_host(source, host_ids, host.view(source_word))
        return host

    def _device_empty(self, rows: int):
        if self.device.xp is np:  # simulator: the "device" table is a private host array
            return aligned_empty((rows, self.words), self.word)
        return self.device.xp.empty((rows, self.words), dtype=self.word)

    def _upload(self, source, cached_ids) -> None:
        """Copy the cached rows into the device table through two page-locked staging buffers.

        Double-buffered: the CPU gathers chunk ``n + 1`` into one buffer while chunk ``n``'s
        asynchronous copy reads the other, and a buffer is refilled only after the copy out of it
        has completed (the event recorded behind it). Refilling a buffer a copy still reads is
        exactly the corruption a single reused buffer caused.
        """
        rows = len(cached_ids)
        chunk = max(1, self.staging_bytes // self.row_bytes)
        buffers = [pinned_empty((min(chunk, rows), self.words), self.word) for _ in range(min(2, -(-rows // chunk)))]
        pending = [None] * len(buffers)
        table = self.device_table
        for number, start in enumerate(range(0, rows, chunk)):
            stop = min(rows, start + chunk)
            slot = number % len(buffers)
            if pending[slot] is not None:
                self._wait(pending[slot])  # the copy out of this buffer has finished
            staging = buffers[slot][: stop - start]
            self._fill_staging(source, cached_ids[start:stop], staging)
            pending[slot] = self._copy_async(table[start:stop], staging)
        for event in pending:
            if event is not None:
                self._wait(event)

    def _fill_staging(self, source, ids, staging) -> None:
        gather_host(source, ids, staging.view(source.dtype))

    def _copy_async(self, target, staging):
        """Start ``target[...] = staging`` on the current stream; the event to wait on (``None``
        under the simulator, where the copy is done when this returns)."""
        if self.device.xp is np:
            target[...] = staging
            return None
        stream = self.device.xp.cuda.get_current_stream()
        target.set(staging, stream=stream)  # page-locked source: truly asynchronous
        return stream.record()

    def _wait(self, event) -> None:
        synchronize(event)  # sync: the staging buffer may be refilled (or freed) after this

    # ------------------------------------------------------------------ reading
    @property
    def cache_map(self) -> np.ndarray:
        """Per row: its cache slot, or -1 when it is read from host memory (int64, host)."""
        return np.maximum(self.location_host, -1)

    @property
    def hits(self) -> int:
        return int(to_host(self.counters)[0])  # sync

    def reset(self) -> None:
        with self.device:
            self.counters[0] = 0

    def sources(self) -> list:
        return [("device cache", self.device_table), ("page-locked host rows", self.host_table)]

    def raise_deferred(self) -> None:
        """Raise the ``IndexError`` a deferred gather recorded, if one did (no sync unless so)."""
        if self.deferred is not None:
            self.deferred.raise_recorded()

    def synchronize(self) -> None:
        """Wait for this store's gathers (the current stream, and every stream a deferred gather
        ran on), then raise the ``IndexError`` a deferred one recorded."""
        if self.deferred is not None:
            self.deferred.synchronize()
        if not self.device.simulated:
            with self.device:
                synchronize(self.device.xp.cuda.get_current_stream())  # sync

    def gather(self, ids, out, deferred: bool = False) -> None:
        """``out[i] = row ids[i]`` from whichever tier holds it; one kernel launch.

        ids : int32/int64 device array, in range unless ``deferred``; out : (len(ids), dim) device
        array, C-contiguous. ``deferred``: ids are checked by the kernel itself
        (:class:`DeferredCheck`): an id out of range gets a row of zeros and is raised later.
        """
        if len(ids) == 0:
            return
        check_unchanged(self.backing)
        with self.device:  # this store's GPU, whichever the caller's thread has current
            if _address(out) % self.word.itemsize:  # a caller's misaligned buffer: rare, so stage
                staging = self.device.xp.empty(len(ids) * self.words, dtype=self.word)
                self._launch(ids, staging, deferred)
                out.view(np.uint8)[...] = staging.view(np.uint8).reshape(out.shape[0], -1)
                return
            self._launch(ids, out.view(self.word).reshape(-1), deferred)

    def _launch(self, ids, out_words, deferred: bool = False) -> None:
        from ._kernels.gather_cuda import BLOCK_THREADS, gather_two_tier, gather_two_tier_checked

        if self._max_grid is None:  # simulator: ~1 ms per thread, so one warp strides over the rows
            grid, block = 1, 32
        else:
            block = BLOCK_THREADS
            grid = min(-(-len(ids) // (block // self.group)), self._max_grid)
        device_table, host_table, location = self._fixed
        args = (device_table, host_table, location, ids, out_words, self.words, self.group, self._counters)
        if not deferred:
            launch(gather_two_tier, self.device, grid, block, *args)
            return
        if self.deferred is None:
            with _DEFERRED_LOCK:
                if self.deferred is None:
                    self.deferred = DeferredCheck(self.device, len(self.location_host))
        check = self.deferred
        with check.lock:  # the launch and the copy behind it are one step for raise_recorded
            key_base, stream = check.next_call()
            launch(gather_two_tier_checked, self.device, grid, block, *args, check.num_rows, check.view, key_base)
            check.copy_back(stream)


_DEFERRED_LOCK = threading.Lock()


def pin_table(table: np.ndarray) -> np.ndarray:
    """``table`` page-locked in place for GPU reads (once per process; a copy where that fails)."""
    return pin(table, what="feature table")


def _multiprocessors(device) -> int:
    import cupy

    return int(cupy.cuda.Device(device.index).attributes["MultiProcessorCount"])

"""FeatureStore: feature rows gathered by node id, hottest rows cached on the GPU.

See DESIGN.md, "Features". On a CUDA device the rows chosen by the cache policy live in device
memory (up to ``cache_size`` bytes) and the rest in pinned host memory that the gather kernel
reads in place; on the CPU there is a single tier, the caller's table itself, read by a parallel
Numba gather.
"""

from __future__ import annotations

import numpy as np

from .._backing import backing_file
from .._counts import COUNTS_LOCK
from .._interrupt import interruptible
from ..device import aligned_empty, array_library, as_device, parse_size
from ._inputs import as_ids, as_table, check_mode, check_out, open_npy
from ._tiers import PINS, CUDATiers, HostCacheTier, HostTier, device_free_bytes
from .policies import expected_hit_rate, resolve_policy

__all__ = ["FeatureStore", "GATHER_CHUNK_BYTES"]

# A CPU gather of more bytes than this runs in equal chunks of at most this size, with Ctrl-C
# handled between them (gglspeedup._interrupt): about 20-100 ms each on two cores.
GATHER_CHUNK_BYTES = 128 << 20


class FeatureStore:
    """Feature rows of ``x``, gathered by node id on ``device``.

    Parameters
    ----------
    x : array-like, shape (num_rows, dim)
        The feature table: a NumPy array (a memory-mapped ``.npy`` too) or any host tensor with
        ``__dlpack__`` (torch, TensorFlow, Paddle, JAX). Any fixed-size numeric dtype: float32,
        float16, bfloat16 (``ml_dtypes.bfloat16``; a ``torch.bfloat16`` tensor is read as one),
        float64, int64, uint8, ... Any row width. A C-contiguous NumPy table is used as-is on the
        CPU (no copy); a non-contiguous one (a column slice, a transpose) is copied once.
        Object, string and structured dtypes raise ``TypeError``; ``x.ndim != 2`` raises
        ``ValueError``.
    device : str, int or device object
        ``"cpu"`` or ``"cuda[:index]"`` (GPU kernels run on numba's simulator when
        ``NUMBA_ENABLE_CUDASIM=1``).
    cache_size : int or str
        Device-cache budget in bytes (``"0.1G"``, ``"512M"``, see :func:`~gglspeedup.parse_size`).
        ``floor(cache_size / row_bytes)`` rows are cached; a budget larger than the table caches
        every row. On a GPU, a cache that does not fit in free device memory raises
        ``ValueError`` naming both numbers. On the CPU a table in memory is one tier (nothing is
        cached, every row counts as a host read); a memory-mapped table (on disk, e.g.
        :meth:`from_npy`) gets a RAM cache of that size in front of the mapping.
    policy : None, "degree", "presample", "none" or int array
        Which rows are cached first. ``None``: ``"degree"`` when ``graph`` is given, else
        ``"none"``. An int array is an explicit order of distinct row ids, hottest first.
        See :mod:`gglspeedup.feature.policies`.
    graph : CSRGraph or scipy sparse matrix, optional
        Needed by ``"degree"`` and ``"presample"``; must have one node per row of ``x``.
    presample : dict, optional
        Options of the ``"presample"`` policy (keys of
        :func:`~gglspeedup.feature.policies.presample_counts`): ``fanouts`` (default
        ``(15, 10, 5)``), ``batch_size`` (1024), ``num_batches`` (one epoch, at most 64),
        ``seeds`` (training nodes; default all), ``seed`` (0), ``sampler`` (any object with
        ``sample(seeds) -> (n_id, adjs)``; default a CPU ``NeighborSampler``).
    pin : {"copy", "register"}
        On a GPU, how the rows read from host memory become readable by the kernel. ``"copy"``
        (default): the rows not cached are copied once into page-locked memory (host and device
        hold each row once). ``"register"``: ``x`` itself is page-locked where it lies
        (``cudaHostRegister``), once per process however many stores read it, and nothing is
        copied; for tables in shared memory or too large to hold twice (falls back to a copy,
        with a ``RuntimeWarning``, where the driver refuses). Ignored on the CPU.
    staging : int or str
        On a GPU, the size of each of the two page-locked buffers the cache is uploaded through,
        chunk by chunk (default ``"64M"``; any :func:`~gglspeedup.parse_size` budget). Ignored on
        the CPU.

    Notes
    -----
    ``store[ids]`` / ``store.gather(ids)`` return arrays of the device's array module: NumPy on
    the CPU and under the simulator, CuPy on a GPU. CuPy has no bfloat16 (nor other
    ``ml_dtypes`` types), so on a real GPU such rows come back as a ``uint16`` (same-size unsigned)
    CuPy array holding the same bits: ``torch_tensor.view(torch.bfloat16)`` reinterprets it without
    a copy. On the CPU they are NumPy bfloat16 arrays, which ``gglspeedup.backends.to`` hands to
    torch, TensorFlow and Paddle as bfloat16 tensors, zero-copy. Ids are checked against ``[0, num_rows)`` before every
    gather: host ids on the host (then uploaded once); ids already on the GPU by a reduction
    whose one bool is read back (a synchronisation per batch), or with ``check="deferred"`` by
    the gather kernel itself, raised at a later call (see :meth:`gather`).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(12, dtype=np.float32).reshape(6, 2)
    >>> store = FeatureStore(x)
    >>> store[[5, 0, 5]].tolist()
    [[10.0, 11.0], [0.0, 1.0], [10.0, 11.0]]
    >>> store.stats()["lookups"]
    3
    """

    def __init__(
        self, x, device="cpu", cache_size=0, policy=None, graph=None, *, presample=None, pin="copy", staging="64M"
    ):
        self.device = as_device(device)
        if pin not in PINS:
            raise ValueError(f"pin must be one of {PINS}, got {pin!r}")
        self._pin = pin
        self._staging = parse_size(staging, "staging")
        if self._staging < 1:
            raise ValueError(f"staging must be at least 1 byte, got {staging!r}")
        table = as_table(x)
        backing = backing_file(table) or (backing_file(x) if isinstance(x, np.ndarray) else None)
        self.cache_size = parse_size(cache_size, "cache_size")
        num_rows, dim = table.shape
        self.dtype = table.dtype
        self.row_bytes = dim * table.dtype.itemsize
        policy_name, compute_order = resolve_policy(policy, graph, num_rows, presample)
        self.policy_info = {"policy": policy_name}
        self._shape = table.shape
        if self.device.is_cuda:
            self.device.check_available()
            cached_ids = self._cached_ids(table, compute_order, check_memory=True)
            self._tier = CUDATiers(
                table, cached_ids, self.device, pin=self._pin, staging_bytes=self._staging, backing=backing
            )
        elif backing is not None and self.cache_size >= self.row_bytes and policy_name != "none":
            # a table on disk: a RAM cache of the policy's rows in front of the mapping
            self._tier = HostCacheTier(table, self._cached_ids(table, compute_order, check_memory=False), backing)
        else:
            self._tier = HostTier(table, backing)
        self.reset_stats()

    @classmethod
    def from_npy(cls, path, device="cpu", cache_size=0, policy=None, graph=None, **options) -> FeatureStore:
        """A store over the ``.npy`` file at ``path``, memory-mapped (read-only): for tables larger
        than memory. The policy's hottest rows (up to ``cache_size`` bytes) are copied into GPU
        memory, or on the CPU into RAM; every other row is read from the mapping in place by the
        parallel gather (from the page cache, or from the disk when cold). Other arguments as for
        the constructor.

        The store serves the file as it is now. If the file is modified in place later (rewritten
        at the same size, ``np.save`` over it, truncated or grown: its size or modification time
        moves), the next gather raises :class:`~gglspeedup.feature.FileChangedError` naming it,
        never old cached rows beside new mapped ones; load the table again after rewriting it. A
        file replaced by a rename (or deleted) is not a change: the mapping keeps reading the old
        one. A GPU store with ``pin="copy"`` never reads the file after construction.

        Raises
        ------
        FileNotFoundError
            when ``path`` does not exist.
        TypeError
            when ``path`` is not a path.
        ValueError
            naming ``path`` when it is not one ``.npy`` array: a ``.npz`` archive (the message
            gives the line that writes a member as a ``.npy``), pickled data, unreadable bytes.
        """
        return cls(open_npy(path), device, cache_size, policy, graph, **options)

    # ------------------------------------------------------------------ construction
    def _cached_ids(self, table, compute_order, *, check_memory: bool) -> np.ndarray:
        """The rows the policy puts in the cache (at most ``cache_size`` bytes of them)."""
        num_rows = table.shape[0]
        budget_rows = min(num_rows, self.cache_size // self.row_bytes)
        if self.policy_info["policy"] == "none":
            budget_rows = 0
        if check_memory:
            self._check_free_memory(budget_rows, num_rows)  # before a presample run, not after it
        cached_ids = np.empty(0, dtype=np.int64)
        if budget_rows:
            order, info = compute_order(budget_rows)
            cached_ids = np.ascontiguousarray(order[:budget_rows], dtype=np.int64)
            counts = info.pop("counts", None)
            if counts is not None:
                info.update(
                    expected_hit_rate=expected_hit_rate(counts, cached_ids),
                    touched_rows=int(np.count_nonzero(counts)),
                    lookups_sampled=int(counts.sum()),
                )
            self.policy_info.update(info)
        self.policy_info["num_cached"] = len(cached_ids)
        return cached_ids

    def _check_free_memory(self, cached_rows: int, num_rows: int) -> None:
        needed = cached_rows * self.row_bytes + num_rows * 8  # cache + location map
        free = device_free_bytes(self.device)
        if free is not None and needed > free:
            raise ValueError(
                f"cache_size={self.cache_size} bytes needs {needed} bytes on {self.device} "
                f"({cached_rows} rows of {self.row_bytes} bytes plus an 8-byte map entry per row) "
                f"but only {free} bytes are free; lower cache_size"
            )

    # ------------------------------------------------------------------ properties
    @property
    def shape(self) -> tuple[int, int]:
        """``(num_rows, dim)``."""
        return self._shape

    @property
    def dim(self) -> int:
        return self._shape[1]

    def __len__(self) -> int:
        return self._shape[0]

    @property
    def out_dtype(self) -> np.dtype:
        """The dtype of gathered arrays: :attr:`dtype`, except CuPy-less dtypes on a real GPU."""
        if self.device.xp is np or self.dtype.kind != "V":
            return self.dtype
        return np.dtype(f"u{self.dtype.itemsize}")

    @property
    def num_cached(self) -> int:
        """Rows held in the device cache (0 on the CPU)."""
        return len(self._tier.cached_ids)

    @property
    def cached_ids(self) -> np.ndarray:
        """The cached row ids in cache-slot order: int64 host array, shape (num_cached,)."""
        return self._tier.cached_ids

    @property
    def cache_map(self) -> np.ndarray:
        """Per row: its cache slot, or -1 when it is read from host memory. int64, (num_rows,)."""
        return self._tier.cache_map

    def __repr__(self) -> str:
        return (
            f"FeatureStore(shape={self.shape}, dtype={self.dtype}, device={self.device}, "
            f"num_cached={self.num_cached}, policy={self.policy_info['policy']!r})"
        )

    # ------------------------------------------------------------------ gather
    def __getitem__(self, ids):
        """``x[ids]`` on the store's device (see :meth:`gather`)."""
        return self.gather(ids)

    def gather(self, ids, out=None, *, check=True):
        """Rows ``x[ids]`` on the store's device, written into ``out`` when given.

        Parameters
        ----------
        ids : int array-like, shape (m,)
            Row ids in any order, repeats allowed: a list, a NumPy or CuPy array, a torch tensor,
            any DLPack tensor, or a slice. int32 and int64 are used as-is; other integer types
            are converted.
        out : array, shape (m, dim), optional
            A C-contiguous, writeable buffer of :attr:`out_dtype` on the store's device (NumPy
            on the CPU and the simulator, CuPy on a GPU), e.g. reused across batches.
        check : bool or "deferred"
            ``True`` (default): ids already on the GPU are range-checked before the gather, a
            device-to-host synchronisation per call. ``False`` skips that check, for ids known to
            lie in ``[0, num_rows)``: a sampler's ``n_id`` over a graph with at most one node per
            row (the loader does this); an id out of range then reads memory outside the table.
            ``"deferred"``: the gather kernel checks each id itself, with no synchronisation;
            an id out of range gets a row of zeros (nothing outside the table is read), and the
            ``IndexError`` naming the call's first bad position and id is raised later: by the
            first :meth:`gather` (any mode) or :meth:`synchronize` after the kernel ran, so one
            call late or more on a GPU, the very next call under the simulator (where NumPy ids
            count as device ids). Host ids are always checked on the host (no sync), and on the
            CPU ``"deferred"`` is ``True``.

        Returns
        -------
        array, shape (m, dim), dtype :attr:`out_dtype`: ``out`` itself when given.

        Raises
        ------
        TypeError
            float, bool or non-integer ids; an ``out`` of the wrong type or dtype.
        ValueError
            ids that are not 1-D; an ``out`` of the wrong shape or layout, or sharing memory with
            the feature table or the cache the gather reads.
        IndexError
            an id outside ``[0, num_rows)`` (negative ids included), naming the first one; or one
            a previous ``check="deferred"`` gather found (see ``check``).
        """
        check = check_mode(check)
        self._tier.raise_deferred()  # a previous deferred gather's bad id: read without a sync
        deferred = check == "deferred" and self.device.is_cuda
        ids = as_ids(ids, len(self), self.device, check=check)
        count = int(ids.shape[0])
        if out is None:
            out = self._empty(count)
        else:
            check_out(out, count, self.dim, self.out_dtype, self.device)
            self._check_out_apart(out)
        with COUNTS_LOCK:  # loaders' producer threads gather at once (workers > 1)
            self._lookups += count
            self._calls += 1
        if count == 0:
            return out
        nbytes = count * self.row_bytes
        if self.device.is_cuda or nbytes <= GATHER_CHUNK_BYTES:
            self._tier.gather(ids, out, deferred and count < 2**32)  # as_ids checked larger batches
            return out
        parts = min(count, -(-nbytes // GATHER_CHUNK_BYTES))  # rows wider than a chunk: one per part, none empty
        with interruptible() as guard:  # Ctrl-C between chunks; leaving the block raises
            for part in range(parts):
                if guard.stopping():
                    break
                lo, hi = count * part // parts, count * (part + 1) // parts
                self._tier.gather(ids[lo:hi], out[lo:hi])
            if guard.stopping():
                ids = out = None  # not kept alive by the traceback
        return out

    def _check_out_apart(self, out) -> None:
        """Refuse an ``out`` sharing memory with a table or cache the gather reads: rows written
        early would be read back as other rows' sources (silently wrong output). Both arrays are
        contiguous, so overlapping bounds (``may_share_memory``, O(1)) means shared bytes."""
        xp = self.device.xp
        library = array_library(out)
        for name, source in self._tier.sources():
            if array_library(source) == library and xp.may_share_memory(out, source):
                raise ValueError(
                    f"out shares memory with the store's {name}: the gather would overwrite rows it still has to "
                    "read; pass a separate buffer"
                )

    def synchronize(self) -> None:
        """Wait for this store's gathers on the GPU (the current stream, and every stream a
        ``check="deferred"`` gather ran on), then raise the ``IndexError`` of an id out of range
        that a deferred gather found, if any (once: the record is cleared as it is raised). On
        the CPU there is nothing to wait for."""
        self._tier.synchronize()

    def check_ids(self, ids):
        """``ids`` as :meth:`gather` reads them: a 1-D int32/int64 array of the store's device
        (NumPy, or CuPy on a GPU), every id checked against ``[0, num_rows)``; raises as
        :meth:`gather` does. For callers that split or route ids before gathering."""
        return as_ids(ids, len(self), self.device)

    def _empty(self, count: int):
        if self.device.xp is np:
            return aligned_empty((count, self.dim), self.dtype)  # 64-byte aligned: JAX zero-copy
        with self.device:
            return self.device.xp.empty((count, self.dim), dtype=self.out_dtype)

    # ------------------------------------------------------------------ statistics
    def stats(self) -> dict:
        """Lookup counters since construction or the last :meth:`reset_stats`.

        Returns
        -------
        dict with ``lookups`` (ids gathered), ``calls`` (gathers), ``rows_device`` /
        ``rows_host`` (rows served from each tier; they add up to ``lookups``), ``hits`` (the same
        as ``rows_device``, DESIGN.md's name), ``hit_rate``
        (``rows_device / lookups``, 0.0 before any lookup), ``bytes_device`` / ``bytes_host``
        (row bytes read from each tier) and ``num_cached``. On a GPU, reading ``rows_device``
        synchronises with the device.
        """
        rows_device = self._hit_count()
        rows_host = self._lookups - rows_device
        return {
            "lookups": self._lookups,
            "calls": self._calls,
            "rows_device": rows_device,
            "rows_host": rows_host,
            "hits": rows_device,
            "hit_rate": rows_device / self._lookups if self._lookups else 0.0,
            "bytes_device": rows_device * self.row_bytes,
            "bytes_host": rows_host * self.row_bytes,
            "num_cached": self.num_cached,
        }

    def reset_stats(self) -> None:
        """Zero every counter of :meth:`stats`."""
        self._lookups = 0
        self._calls = 0
        self._reset_hits()

    def _hit_count(self) -> int:
        """Lookups the cache tier served (``rows_device``): the hook a store with a tier of its
        own (the service's remote store) answers, so :meth:`stats` has one body."""
        return self._tier.hits

    def _reset_hits(self) -> None:
        """Zero :meth:`_hit_count` (with :meth:`reset_stats`)."""
        self._tier.reset()

"""MultiDeviceFeature: one FeatureStore per device over one feature table in shared memory."""

from __future__ import annotations

import os
import sys
import threading
import warnings

import numpy as np

from .._shared import share
from ..device import array_library, parse_size
from ..protocols import FeatureSource
from ._common import _check_devices, _check_rank, _PerProcessState

__all__ = ["MultiDeviceFeature"]

_MODES = ("replicate", "shard")


def _gpu_index(ids):
    """The CUDA device index of a CuPy array or a torch CUDA tensor; ``None`` for anything else."""
    library = array_library(ids)
    if library == "cupy":
        return int(ids.device.id)
    device = getattr(ids, "device", None)
    if library == "torch" and getattr(device, "type", None) == "cuda":
        return int(device.index)
    return None


def _typed_tables(x, devices, cache_size: int, policy, graph) -> tuple[dict, dict]:
    """Typed ``x``: node type -> shared table (``None`` without features), and node type -> shared
    cached ids, the global split of :class:`~gglspeedup.feature.HeteroFeatureStore` computed once."""
    from ..feature.hetero import check_tables
    from ..feature.hetero_policies import plan_cache

    tables = check_tables(x, graph)
    featured = {t: table for t, table in tables.items() if table is not None}
    row_bytes = {t: table.shape[1] * table.dtype.itemsize for t, table in featured.items()}
    budget = cache_size if any(d.is_cuda for d in devices) else 0
    cached = plan_cache(policy, graph, {t: len(table) for t, table in featured.items()}, row_bytes, budget)
    shared = {t: None if table is None else share(table) for t, table in tables.items()}
    return shared, {t: share(np.ascontiguousarray(ids, np.int64)) for t, ids in cached.items()}


def _record(device):
    """An event recorded on ``device``'s current stream (``None`` under the simulator: one stream)."""
    if device.simulated:
        return None
    import cupy

    return cupy.cuda.get_current_stream().record()


def _wait(event) -> None:
    """Make the current stream wait for ``event`` (no host block)."""
    if event is not None:
        import cupy

        cupy.cuda.get_current_stream().wait_event(event)


def _no_peer_access(devices) -> str | None:
    """Why ``devices`` cannot share one sharded cache, or ``None`` when they can."""
    if not all(d.is_cuda for d in devices):
        return "CPU devices have no device cache to shard"
    indices = sorted({d.index for d in devices})
    if devices[0].simulated or len(indices) < 2:
        return None
    import cupy

    runtime = cupy.cuda.runtime
    for a in indices:
        for b in indices:
            if a != b and not runtime.deviceCanAccessPeer(a, b):
                return f"cuda:{a} cannot access cuda:{b} peer-to-peer"
    for a in indices:  # direct device-to-device copies from now on
        with cupy.cuda.Device(a):
            for b in indices:
                if a != b:
                    try:
                        runtime.deviceEnablePeerAccess(b)
                    except runtime.CUDARuntimeError:  # already enabled
                        pass
    return None


class _RankFeature:
    """``feature.rank(r)``: the rows of rank ``r``'s store, on ``devices[r]`` (a
    :class:`gglspeedup.protocols.FeatureSource`: ``gather``, ``[ids]``, ``stats``)."""

    def __init__(self, owner: MultiDeviceFeature, rank: int):
        self._owner, self.rank = owner, rank

    @property
    def shape(self):
        """The owner's :attr:`MultiDeviceFeature.shape`: a loader checks the rows against the
        sampler's node count, and a typed one asks only for the types with features."""
        return self._owner.shape

    def __getitem__(self, ids):
        return self.gather(ids)

    def gather(self, ids, out=None):
        owner = self._owner
        if owner.mode != "shard":
            return owner.store(self.rank).gather(ids, out=out)
        rows = owner._gather_shard(self.rank, ids)
        if out is None:
            return rows
        out[...] = rows
        return out

    def stats(self) -> dict:
        return self._owner.store(self.rank).stats()


class MultiDeviceFeature(_PerProcessState):
    """One :class:`~gglspeedup.FeatureStore` per device over one shared host table.

    Parameters
    ----------
    x : array-like, shape (num_rows, dim), or dict node type -> array-like or None
        Copied once into shared memory; CPU ranks gather from it in place. A dict gives typed
        features: each rank's store is a :class:`~gglspeedup.feature.HeteroFeatureStore` (dict of
        ids in, dict of rows out), every device caching the rows one global ranking picked
        within ``cache_size`` (``mode="replicate"`` only).
    devices : list of devices
        ``devices[r]`` serves rank ``r``.
    cache_size : int or str
        Per-device cache budget in bytes (see :class:`~gglspeedup.FeatureStore`).
    policy : None, "degree", "presample", "none" or int array
        Which rows each device caches (computed once, here, and shared).
    mode : {"replicate", "shard"}
        ``"replicate"``: every device caches the same hottest rows. ``"shard"``: the
        ``num_devices * cache_size`` hottest bytes are dealt round-robin over the devices (hot row
        ``i`` of the order goes to ``devices[i % num_devices]``), and ``feature.rank(r)[ids]``
        reads rows cached on a peer from that peer (CuPy device-to-device copies, direct over
        peer-to-peer access). That needs one process driving every device (e.g. with
        :meth:`MultiDeviceSampler.sample_scattered`); ``feature[ids]`` (one process per device)
        reads peers' rows from its own host tier instead. CPU devices, or GPUs without
        peer-to-peer access between every pair, fall back to ``"replicate"`` with a warning.
    graph : CSRGraph or HeteroGraph (typed ``x``), optional
        For the ``"degree"`` / ``"presample"`` policies.

    Which rank serves ``feature[ids]``
    ----------------------------------
    ``feature.rank(r)[ids]`` always names it. ``feature[ids]`` uses, in order: the rank set with
    :meth:`set_rank` in this process; for ids on a GPU (CuPy, torch), the first rank on that GPU;
    the ``LOCAL_RANK`` environment variable (``torchrun``);
    the ``torch.distributed`` rank when a process group is initialised; ``PADDLE_RANK_IN_NODE`` or
    ``PADDLE_TRAINER_ID`` (set by ``paddle.distributed.spawn`` / launch); and rank 0 when the rank
    cannot change the answer: a single device, or every rank on the same device (``["cpu",
    "cpu"]``: the same host rows, wherever the process runs). Only where ranks use different
    devices, so the rank decides where the rows land, does an unknown rank raise ``RuntimeError``.
    """

    def __init__(self, x, devices, cache_size=0, policy=None, mode="replicate", graph=None):
        from ..feature import as_table
        from ..feature.policies import resolve_policy

        self.devices = _check_devices(devices)
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        self.typed = isinstance(x, dict)
        if mode == "shard" and self.typed:
            raise ValueError("mode='shard' deals one table's rows over the devices; typed x (a dict) needs 'replicate'")
        if mode == "shard":
            reason = _no_peer_access(self.devices)
            if reason:
                warnings.warn(f"mode='shard' falls back to 'replicate': {reason}", RuntimeWarning, stacklevel=2)
                mode = "replicate"
        self.mode = mode
        if self.typed:  # one HeteroFeatureStore per rank, over shared tables
            self.cache_size = parse_size(cache_size, "cache_size")
            self._table, self._order = _typed_tables(x, self.devices, self.cache_size, policy, graph)
            self._local_state()
            return
        table = as_table(x)  # FeatureStore's own checks and conversion (a view when possible)
        self.cache_size = parse_size(cache_size, "cache_size")
        _name, compute_order = resolve_policy(policy, graph, table.shape[0], None)
        order = np.empty(0, dtype=np.int64)
        row_bytes = max(1, table.shape[1] * table.dtype.itemsize)
        copies = self.num_devices if mode == "shard" else 1
        budget_rows = min(table.shape[0], (self.cache_size // row_bytes) * copies)
        if budget_rows and any(d.is_cuda for d in self.devices):
            ranked = compute_order(budget_rows)[0]
            order = np.ascontiguousarray(ranked[:budget_rows], dtype=np.int64)
        self._table = share(table)
        self._order = share(order)
        self._local_state()

    _PICKLED = ("devices", "mode", "typed", "cache_size", "_table", "_order")

    def _local_state(self) -> None:
        self._lock = threading.Lock()
        self._stores = {}
        self._rank = None
        self._owners = {}  # shard mode: rank -> device array, which device caches each row
        self._warned = False

    @property
    def shape(self):
        """``(num_rows, dim)``; typed: node type -> that, for the types with features."""
        if self.typed:
            return {t: h.shape for t, h in self._table.items() if h is not None}
        return self._table.shape

    @property
    def table(self):
        """The shared host table (a NumPy view of shared memory); typed: node type -> table or None."""
        if self.typed:
            return {t: None if h is None else h.array for t, h in self._table.items()}
        return self._table.array

    def _dtype(self):
        return {t: h.dtype for t, h in self._table.items() if h is not None} if self.typed else self._table.dtype

    def store(self, rank: int) -> FeatureSource:
        """Rank ``rank``'s :class:`~gglspeedup.FeatureStore`, built on first use in this process."""
        return self._per_rank("_stores", rank, self._new_store)

    def _new_store(self, rank: int, device) -> FeatureSource:
        from ..feature import FeatureStore, HeteroFeatureStore

        if self.typed:  # the ranking holds the cached rows only, so the budget takes them all
            orders = {t: handle.array for t, handle in self._order.items()}
            budget = self.cache_size if device.is_cuda else 0
            return HeteroFeatureStore(self.table, device, budget, policy=orders, pin="register")
        order = self._order.array
        if self.mode == "shard":
            order = order[rank :: self.num_devices]
        return FeatureStore(
            self._table.array,
            device,
            self.cache_size if device.is_cuda else 0,
            policy=order if len(order) else "none",
            pin="register",  # the shared table, page-locked in place once per process
        )

    def _gather_shard(self, rank: int, ids):
        """Rows for ``rank``: its own cache and host tier, plus rows cached on its peers.

        Each peer copy is ordered by events: the peer's stream waits for the ids prepared on this
        device's stream, and this device's stream waits for the rows gathered on the peer's.
        """
        device, store = self.devices[rank], self.store(rank)
        ids = store.check_ids(ids)
        xp = device.xp
        with device:
            owner = self._owner_on(rank)[ids]
            mine = xp.flatnonzero((owner < 0) | (owner == rank))
            if len(mine) == len(ids):  # sync
                return store.gather(ids, check=False)
            out = xp.empty((len(ids), store.dim), dtype=store.out_dtype)
            if len(mine):
                out[mine] = store.gather(ids[mine], check=False)
        for peer in range(self.num_devices):
            if peer == rank:
                continue
            with device:
                positions = xp.flatnonzero(owner == peer)
                if not len(positions):  # sync
                    continue
                wanted = ids[positions]
                ready = _record(device)
            with self.devices[peer]:  # ndarray.copy() copies to the current device
                _wait(ready)
                rows = self.store(peer).gather(wanted.copy(), check=False)
                gathered = _record(self.devices[peer])
            with device:
                _wait(gathered)
                out[positions] = rows.copy()
        return out

    def _owner_on(self, rank: int):
        owner = self._owners.get(rank)
        if owner is None:
            order = self._order.array
            host = np.full(self.shape[0], -1, dtype=np.int32)
            host[order] = np.arange(len(order), dtype=np.int32) % self.num_devices
            device = self.devices[rank]
            with device:
                owner = self._owners[rank] = device.xp.asarray(host)
        return owner

    def rank(self, rank: int) -> FeatureSource:
        """A view whose ``[ids]`` / ``gather`` / ``stats`` use rank ``rank``'s store."""
        return _RankFeature(self, _check_rank(rank, self.num_devices))

    def set_rank(self, rank: int) -> MultiDeviceFeature:
        """Make ``feature[ids]`` serve ``rank`` in this process (returns ``self``)."""
        self._rank = _check_rank(rank, self.num_devices)
        return self

    def current_rank(self, ids=None) -> int:
        """The rank ``feature[ids]`` serves here (see the class notes for the lookup order)."""
        if self._rank is not None:
            return self._rank
        if isinstance(ids, dict):  # typed ids: the device of the first type's
            ids = next(iter(ids.values()), None)
        elif isinstance(ids, tuple) and len(ids) == 2 and isinstance(ids[0], str):
            ids = ids[1]
        index = _gpu_index(ids)
        if index is not None:  # ids on a GPU: the (first) rank on that GPU, as the seed API did
            for rank, device in enumerate(self.devices):
                if device.is_cuda and device.index == index:
                    return rank
        if os.environ.get("LOCAL_RANK", "").isdigit():
            return _check_rank(int(os.environ["LOCAL_RANK"]), self.num_devices)
        if "torch.distributed" in sys.modules:
            dist = sys.modules["torch.distributed"]
            if dist.is_available() and dist.is_initialized():
                return _check_rank(dist.get_rank(), self.num_devices)
        for variable in ("PADDLE_RANK_IN_NODE", "PADDLE_TRAINER_ID"):
            if os.environ.get(variable, "").isdigit():
                return _check_rank(int(os.environ[variable]), self.num_devices)
        if len(set(self.devices)) == 1:  # one device for every rank: any rank returns the same array
            return 0
        raise RuntimeError(
            f"MultiDeviceFeature has {self.num_devices} devices and cannot tell this process's rank: call "
            "feature.set_rank(rank) in each process, or use feature.rank(rank)[ids]"
        )

    def __getitem__(self, ids):
        """Rows ``x[ids]`` on the current rank's device (see :meth:`current_rank`)."""
        return self.gather(ids)

    def stats(self) -> dict:
        """The lookup counters of the store serving :meth:`current_rank` in this process
        (see :meth:`gglspeedup.FeatureStore.stats`); ``feature.rank(r).stats()`` names the rank."""
        return self.store(self.current_rank()).stats()

    def gather(self, ids, out=None):
        """Rows ``x[ids]`` on the current rank's device, written into ``out`` when given."""
        if self.mode == "shard" and not self._warned:
            self._warned = True
            warnings.warn(
                "mode='shard' reads peers' hot rows from their GPUs only through feature.rank(r)[ids] in "
                "one process driving every device; feature[ids] (one process per device) reads them from "
                "host memory, so each device caches only its share: use mode='replicate' there",
                RuntimeWarning,
                stacklevel=2,
            )
        return self.store(self.current_rank(ids)).gather(ids, out=out)

    def __repr__(self) -> str:
        devices = [str(d) for d in self.devices]
        return (
            f"MultiDeviceFeature(shape={self.shape}, dtype={self._dtype()}, devices={devices}, "
            f"cache_size={self.cache_size}, mode={self.mode!r}, built_ranks={sorted(self._stores)})"
        )

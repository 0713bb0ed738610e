"""Feature rows and labels through the partition servers: the remote fallback tier.

:class:`RemoteFeatureStore` is a :class:`~gglspeedup.FeatureStore` whose fallback tier is the
servers (the cache wraps a fallback, as GraphBolt's GPU cache does): the rows a policy ranks first
(up to ``cache_size`` bytes) are fetched once, at construction, into a cache on the store's device;
a gather serves the cached rows from there and asks each server for the others, every server at
once, each distinct row once (``ids`` deduplicated first), so a row crosses the wire at most once
per gather. Rows equal ``x[ids]`` exactly, in the table's dtype, any order, repeats allowed.

Labels are read the same way (:mod:`.labels`); both ask through :class:`~._rows.RemoteRows`.
"""

from __future__ import annotations

import numpy as np

from .._counts import COUNTS_LOCK
from .._storage import read_folder
from ..device import aligned_empty, parse_size, to_numpy
from ..feature import FeatureStore
from ..feature.hetero_policies import plan_cache
from ..feature.policies import POLICIES, degree_order, presample_halves, presample_policy
from ._rows import RemoteRows
from .book import PART_KIND, part_folder

__all__ = ["RemoteFeatureStore", "partition_degrees", "remote_features"]


def partition_degrees(book, node_type=None) -> np.ndarray:
    """Every node's in-degree (row length, summed over the relations into its type), read from the
    partitioned folder's row pointers: int64, shape (count,)."""
    t = book.type_index(node_type)
    degree = np.zeros(book.count(node_type), np.int64)
    into = [book.node_types.index(et[2]) for et in book.edge_types] if book.typed else [0]
    for p in range(book.num_parts):
        _, arrays = read_folder(part_folder(book.path, p), kind=PART_KIND)
        nodes, indptr, row_base = arrays[f"nodes_{t}"], arrays["indptr"], arrays["row_base"]
        for r, dst in enumerate(into):
            if dst == t and len(nodes):
                lo, hi = int(row_base[r]), int(row_base[r + 1])
                degree[np.asarray(nodes)] += np.diff(np.asarray(indptr[lo : hi + 1]))
    return degree


class RemoteFeatureStore(FeatureStore):
    """A :class:`~gglspeedup.FeatureStore` over the partition servers' feature rows.

    Parameters
    ----------
    transport : Transport
        The servers (``cluster.transport``, or a :class:`~gglspeedup.service.LocalTransport`).
    book : PartitionBook or path
        The partitioned folder's book (or the folder).
    device : str
        Where the cache lives and gathered rows are returned (``"cpu"`` or ``"cuda[:i]"``).
    cache_size : int or str
        Cache budget in bytes (:func:`~gglspeedup.parse_size`): ``floor(cache_size / row_bytes)``
        rows, fetched once now.
    policy : None, "degree", "presample", "none" or int array
        Which rows are cached (``None``: ``"degree"``, the in-degrees read from the folder's row
        pointers); ``"presample"`` runs ``sampler`` (``presample`` options as FeatureStore's).
    node_type : str, optional
        A typed graph's node type.
    sampler : Sampler, optional
        The sampler ``"presample"`` runs (a cluster's ``RemoteSampler``).

    Notes
    -----
    ``stats()`` adds ``rows_remote`` (distinct rows fetched over the wire) and ``bytes_remote`` to
    FeatureStore's counters; ``rows_device`` counts lookups served by the cache (on the CPU a RAM
    cache), ``rows_host`` lookups served by rows fetched.
    """

    def __init__(
        self,
        transport,
        book,
        device="cpu",
        cache_size=0,
        policy=None,
        *,
        node_type=None,
        presample=None,
        sampler=None,
    ):
        from ..device import as_device

        self.device = as_device(device)
        if self.device.is_cuda:
            self.device.check_available()
        self._remote = RemoteRows(transport, book, "x", node_type)
        if len(self._remote.shape) != 2:
            raise ValueError(f"features must be a table of rows (2-D), the folder holds shape {self._remote.shape}")
        if self._remote.shape[1] == 0:  # as FeatureStore refuses x, before a gather meets it
            raise ValueError(f"features must have at least one column, the folder holds shape {self._remote.shape}")
        self._shape = self._remote.shape
        self.dtype, self.row_bytes = self._remote.dtype, self._remote.row_bytes
        self.cache_size = parse_size(cache_size, "cache_size")
        self.node_type = node_type
        name, order = self._order(self._remote.book, policy, presample, sampler)
        self.policy_info = {"policy": name}
        budget = 0 if name == "none" else min(self._shape[0], self.cache_size // self.row_bytes)
        cached = np.empty(0, np.int64)
        if budget:
            order, info = order(budget)
            self.policy_info.update(info)
            cached = np.ascontiguousarray(order[:budget], dtype=np.int64)
        self.policy_info["num_cached"] = len(cached)
        self._cached_ids = cached
        self._slot = np.full(self._shape[0], -1, np.int32 if len(cached) < 2**31 else np.int64)
        self._slot[cached] = np.arange(len(cached), dtype=self._slot.dtype)
        host = aligned_empty((max(len(cached), 1), self._shape[1]), self.dtype)
        if len(cached):
            self._remote.fetch(cached, host[: len(cached)])
        self._cache = host if self.device.xp is np else self._upload(host)
        self._remote.rows_fetched = 0
        self.reset_stats()

    def _order(self, book, policy, presample, sampler):
        """``(name, compute)``: the policy's name and ``compute(budget) -> (order, info)``."""
        node_type = self.node_type
        if policy is None:
            policy = "degree"
        if isinstance(policy, str):
            if policy not in POLICIES:
                raise ValueError(f"policy must be one of {POLICIES} or an order array, got {policy!r}")
            if presample is not None and policy != "presample":
                raise ValueError(f"presample= options are only used with policy='presample', got policy={policy!r}")
            if policy == "none":
                return "none", None
            graph = _Degrees(book, node_type)
            if policy == "degree":
                return "degree", lambda budget: (degree_order(graph), {"policy": "degree"})
            options = checked_presample(presample, graph.num_nodes)
            if sampler is None and options.get("sampler") is None:
                raise ValueError("policy='presample' needs a sampler (cluster.features passes the cluster's)")
            options.setdefault("sampler", sampler)

            def compute(budget):
                order, info = presample_policy(graph, budget, presample_halves(graph, **options))
                info.pop("counts", None)
                return order, {"policy": "presample", **info}

            return "presample", compute
        from ..validation import check_ids_in_range, int_array

        order = check_ids_in_range(
            "policy (an order array)", int_array("policy (an order array)", policy), self._shape[0], error=ValueError
        )
        if len(np.unique(order)) != len(order):
            raise ValueError("policy (an order array) must not repeat ids")
        return "order", lambda budget: (order, {"policy": "order"})

    def _upload(self, host):
        with self.device:
            return self.device.xp.asarray(host)

    # ------------------------------------------------------------------ what FeatureStore reports
    @property
    def num_cached(self) -> int:
        return len(self._cached_ids)

    @property
    def cached_ids(self) -> np.ndarray:
        return self._cached_ids

    @property
    def cache_map(self) -> np.ndarray:
        return self._slot.astype(np.int64)

    def __repr__(self) -> str:
        return (
            f"RemoteFeatureStore(shape={self.shape}, dtype={self.dtype}, device={self.device}, "
            f"num_cached={self.num_cached}, policy={self.policy_info['policy']!r}, "
            f"servers={len(self._remote.transport.group_parts)})"
        )

    def synchronize(self) -> None:
        """Nothing is deferred here: every gather checks its ids first (``check`` is not used)."""

    # ------------------------------------------------------------------ gather
    def gather(self, ids, out=None, *, check=True):
        """Rows ``x[ids]`` on the store's device (into ``out`` when given): cached rows from the
        cache, the others from their servers, each distinct row fetched once. Ids, ``out`` and
        errors as :meth:`FeatureStore.gather`; a server that does not answer raises
        :class:`~gglspeedup.service.ServerUnavailable`."""
        ids = self.check_ids(ids)
        count = int(ids.shape[0])
        if out is None:
            out = self._empty(count)
        else:
            self._check_out(out, count)
        with COUNTS_LOCK:  # loaders' producer threads gather at once (workers > 1)
            self._lookups += count
            self._calls += 1
        if count == 0:
            return out
        host_ids = np.asarray(to_numpy(ids), dtype=np.int64)
        unique, inverse = np.unique(host_ids, return_inverse=True)
        slots = self._slot[unique]
        hit = slots >= 0
        xp = self.device.xp
        if xp is np and unique.shape[0] == count and not hit.any():
            self._remote.fetch(host_ids, out)  # distinct rows, none cached (a batch's n_id): straight into out
            return out
        missing = unique[~hit]
        rows = aligned_empty((unique.shape[0], self._shape[1]), self.dtype)
        if missing.shape[0]:
            self._remote.fetch(missing, rows, np.flatnonzero(~hit))
        hits = int(np.count_nonzero(hit[inverse]))
        with COUNTS_LOCK:
            self._hits += hits
        if xp is np:
            if hit.any():
                rows[hit] = self._cache[slots[hit]]
            FeatureStore(rows).gather(inverse, out=out, check=False)  # a parallel row gather (np.take: 2x slower)
            return out
        with self.device:  # rows fetched go up once; cached rows are read on the device
            device_rows = xp.asarray(rows)
            if hit.any():
                device_rows[xp.asarray(np.flatnonzero(hit))] = self._cache[xp.asarray(slots[hit])]
            out[...] = device_rows[xp.asarray(inverse)]
        return out

    def _check_out(self, out, count: int) -> None:
        xp = self.device.xp
        if not isinstance(out, xp.ndarray):
            raise TypeError(f"out must be a {xp.__name__} array on {self.device}, got {type(out).__name__}")
        if out.shape != (count, self._shape[1]):
            raise ValueError(f"out must have shape {(count, self._shape[1])}, got {tuple(out.shape)}")
        if out.dtype != self.out_dtype:
            raise TypeError(f"out must have dtype {self.out_dtype}, got {out.dtype}")
        if not out.flags.c_contiguous:
            raise ValueError("out must be C-contiguous")

    # ------------------------------------------------------------------ statistics
    def stats(self) -> dict:
        """FeatureStore's counters (``rows_device``: lookups the cache served; ``rows_host``:
        lookups served by fetched rows) plus ``rows_remote`` / ``bytes_remote``: distinct rows
        fetched from the servers since the last reset, and their bytes."""
        remote = self._remote.rows_fetched
        return {**super().stats(), "rows_remote": remote, "bytes_remote": remote * self.row_bytes}

    def reset_stats(self) -> None:
        super().reset_stats()
        self._remote.rows_fetched = 0

    def _hit_count(self) -> int:
        return self._hits

    def _reset_hits(self) -> None:
        self._hits = 0


class _Degrees:
    """What the degree and presample policies read of a graph: ``num_nodes`` and ``degree()``."""

    def __init__(self, book, node_type):
        self.book, self.node_type = book, node_type
        self.num_nodes = book.count(node_type)
        self._degree = None

    def degree(self) -> np.ndarray:
        if self._degree is None:
            self._degree = partition_degrees(self.book, self.node_type)
        return self._degree


def remote_features(cluster, device, cache_size, policy, presample):
    """``cluster.features(...)``: one store, or for a typed graph a dict node type -> store (types
    with features), the byte budget split across types by their table bytes, or for
    :class:`~gglspeedup.feature.HeteroFeatureStore`'s policies (a dict node type -> order, a list
    of ``(node_type, id)`` pairs) as that store splits it."""
    book = cluster.book
    if not book.typed:
        return RemoteFeatureStore(
            cluster.transport,
            book,
            device,
            cache_size,
            policy,
            presample=presample,
            sampler=_presample_sampler(cluster, policy, presample),
        )
    if isinstance(policy, str) and policy == "presample":  # it counts an untyped sampler's n_id
        raise ValueError(
            "policy='presample' is not available for a typed graph's cluster.features: use 'degree' (the default), "
            "'none', a dict node type -> order array or a list of (node_type, id) pairs"
        )
    types = [t for i, t in enumerate(book.node_types) if f"x_{i}" in book.meta["tables"]]
    if not types:
        raise ValueError("the partitioned folder holds no features")
    sizes = [RemoteRows(cluster.transport, book, "x", t) for t in types]
    total = sum(rows.row_bytes * rows.shape[0] for rows in sizes)
    budget = parse_size(cache_size, "cache_size")
    if policy is None or isinstance(policy, str):
        shares = {t: budget * rows.row_bytes * rows.shape[0] // max(total, 1) for t, rows in zip(types, sizes)}
        policies, options = dict.fromkeys(types, policy), presample
    else:
        # HeteroFeatureStore's orders ({type: order}) or ranking ((type, id) pairs), checked and
        # split over one budget as it splits them, so both cache the same rows of each type
        row_bytes = {t: rows.row_bytes for t, rows in zip(types, sizes)}
        cached = plan_cache(policy, None, {t: rows.shape[0] for t, rows in zip(types, sizes)}, row_bytes, budget)
        shares = {t: len(cached[t]) * row_bytes[t] for t in types}
        policies = {t: cached[t] if len(cached[t]) else "none" for t in types}
        options = None  # HeteroFeatureStore reads presample= with "presample" only
    return {
        t: RemoteFeatureStore(cluster.transport, book, device, shares[t], policies[t], node_type=t, presample=options)
        for t in types
    }


def checked_presample(presample, num_nodes: int) -> dict:
    """``presample=`` as a dict, checked as :class:`~gglspeedup.FeatureStore` checks it when made
    (:func:`~gglspeedup.feature.policies.check_presample_options`), before a sampler is made from it
    or a cache filled: an unknown option reached ``presample_halves`` as a keyword, a bad
    ``fanouts`` the cluster's sampler as its own."""
    from ..feature.policies import check_presample_options

    if presample is not None and not isinstance(presample, dict):
        raise TypeError(
            f"presample must be a dict of options (e.g. {{'fanouts': [10, 5]}}), got {type(presample).__name__}"
        )
    options = dict(presample or {})
    check_presample_options(options, num_nodes)
    return options


def _presample_sampler(cluster, policy, presample):
    if not (isinstance(policy, str) and policy == "presample"):
        return None
    options = checked_presample(presample, cluster.book.count())
    return cluster.sampler(list(options.get("fanouts", (15, 10, 5))), seed=int(options.get("seed", 0)))

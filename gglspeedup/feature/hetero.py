"""HeteroFeatureStore: feature rows per node type, one device-cache byte budget shared by every type.

See DESIGN.md, "Typed graphs". :class:`HeteroFeatureSource` is the typed face (dict of ids in,
dict of rows out, ``stats()`` per type and in total) over one feature source per node type;
:class:`HeteroFeatureStore` is one over :class:`~gglspeedup.FeatureStore` s whose caches hold the
rows a global ranking picked (:mod:`gglspeedup.feature.hetero_policies`). The multi-device and
distributed layers build the same face over their own per-type sources.
"""

from __future__ import annotations

import numpy as np

from .._backing import backing_file
from ..device import as_device, parse_size
from ..heterograph import HeteroGraph
from ._inputs import as_table, check_mode, open_npy
from .hetero_policies import resolve_hetero_policy, split_budget, typed_hit_rate
from .store import FeatureStore

__all__ = ["HeteroFeatureSource", "HeteroFeatureStore", "check_tables"]

_ADDITIVE = ("lookups", "calls", "rows_device", "rows_host", "hits", "bytes_device", "bytes_host", "num_cached")


def check_tables(x, graph=None) -> dict:
    """``x`` (dict node type -> table or ``None``) as dict node type -> 2-D C-contiguous NumPy
    table or ``None``, over every node type of ``x`` and ``graph``: the types of ``x`` first (in its
    order), then the graph's other types (without features).

    Raises
    ------
    TypeError
        ``x`` not a dict, a key not a str, a table :func:`~gglspeedup.feature.as_table` rejects,
        ``graph`` not a :class:`~gglspeedup.HeteroGraph`.
    ValueError
        no type with features; with ``graph``, a type it lacks or a row count that differs from
        ``graph.num_nodes[type]`` (both named).
    """
    if not isinstance(x, dict):
        raise TypeError(
            f"x must be a dict node type -> feature table (None for a type without features), got {type(x).__name__}"
        )
    if graph is not None and not isinstance(graph, HeteroGraph):
        raise TypeError(f"graph must be a HeteroGraph (node counts per type), got {type(graph).__name__}")
    known = None if graph is None else dict(graph.num_nodes)
    tables = {}
    for node_type, table in x.items():
        if not isinstance(node_type, str):
            raise TypeError(f"x's keys must be node type names (str), got {node_type!r}")
        if known is not None and node_type not in known:
            raise ValueError(f"x names node type {node_type!r}, which the graph lacks; its node types: {list(known)}")
        if table is not None:
            try:
                table = as_table(table)
            except (TypeError, ValueError) as error:
                raise type(error)(f"x[{node_type!r}]: {error}") from None
            if known is not None and table.shape[0] != known[node_type]:
                raise ValueError(
                    f"x[{node_type!r}] has {table.shape[0]} rows but graph.num_nodes[{node_type!r}] = "
                    f"{known[node_type]}; they must match"
                )
        tables[node_type] = table
    for node_type in known or ():
        tables.setdefault(node_type, None)
    if all(table is None for table in tables.values()):
        raise ValueError(f"x must give a feature table for at least one node type, got none for {list(tables)}")
    return tables


def _host_table(source):
    """The host array a feature source reads rows from, when it has one (a CPU FeatureStore)."""
    table = getattr(getattr(source, "_tier", None), "table", None)
    return table if isinstance(table, np.ndarray) else None


class HeteroFeatureSource:
    """Typed feature lookups over one feature source per node type.

    Parameters
    ----------
    sources : dict node type -> feature source or None
        Anything with ``gather(ids, out=None)`` and ``stats()`` (a
        :class:`~gglspeedup.protocols.FeatureSource`); ``None`` for a type without features.
    collective : bool
        Every lookup calls every type's ``gather`` (empty ids for types not asked), in sorted type
        order, so that sources whose lookups are collectives (``DistFeature``) stay in step on
        every rank whatever each rank asks for.
    """

    def __init__(self, sources: dict, *, collective: bool = False):
        self._sources = dict(sources)
        self.collective = bool(collective)

    @property
    def node_types(self) -> tuple:
        """Every known node type, with features or not."""
        return tuple(self._sources)

    @property
    def feature_types(self) -> tuple:
        """The node types with features."""
        return tuple(t for t, s in self._sources.items() if s is not None)

    def __contains__(self, node_type) -> bool:
        return self._sources.get(node_type) is not None

    def source(self, node_type):
        """The feature source of ``node_type``; raises ``ValueError`` for an unknown type or one
        without features."""
        if not isinstance(node_type, str) or node_type not in self._sources:
            raise ValueError(f"unknown node type {node_type!r}; known node types: {list(self._sources)}")
        source = self._sources[node_type]
        if source is None:
            raise ValueError(
                f"node type {node_type!r} has no features (its table was None or left out); give it "
                f"learnable embeddings instead; types with features: {list(self.feature_types)}"
            )
        return source

    def __getitem__(self, key):
        """``store[node_type]``: that type's source; ``store[{type: ids}]`` / ``store[(type, ids)]``:
        :meth:`gather`."""
        if isinstance(key, str):
            return self.source(key)
        return self.gather(key)

    def gather(self, ids, out=None, *, featureless: str = "raise", check: bool | str = True):
        """Rows of every asked node type: ``{type: x[type][ids[type]]}``.

        Parameters
        ----------
        ids : dict node type -> int array-like (shape (m_t,)), or a ``(node_type, ids)`` pair
            Local ids per type, anything the type's source takes (lists, NumPy, CuPy, torch).
        out : dict node type -> array, optional
            Buffers of shape (m_t, dim_t) to write into (some types may be left out); for a pair,
            one array.
        featureless : {"raise", "skip"}
            What a type without features in ``ids`` does: raise ``ValueError`` (default) or leave
            the type out of the result (for a sampler's ``n_id``, which lists every type).
        check : bool or "deferred"
            Passed to sources that take it (see :meth:`gglspeedup.FeatureStore.gather`); anything
            else raises ``ValueError``.

        Returns
        -------
        dict node type -> rows (shape (m_t, dim_t), the type's dtype, on its device), in the
        order of ``ids``; for a pair, the one array.

        Raises
        ------
        TypeError
            ``ids`` neither a dict nor a ``(node_type, ids)`` pair; ``out`` of the wrong kind.
        ValueError
            an unknown node type or one without features (naming it and the known ones).
        """
        if isinstance(ids, tuple) and len(ids) == 2 and isinstance(ids[0], str):
            node_type = ids[0]
            one_out = None if out is None else {node_type: out}
            return self.gather({node_type: ids[1]}, one_out, featureless=featureless, check=check)[node_type]
        if not isinstance(ids, dict):
            raise TypeError(
                f"ids must be a dict node type -> ids or a (node_type, ids) pair, got {type(ids).__name__}; "
                "for one type use store[node_type][ids]"
            )
        check = check_mode(check)
        if featureless not in ("raise", "skip"):
            raise ValueError(f"featureless must be 'raise' or 'skip', got {featureless!r}")
        if out is not None and not isinstance(out, dict):
            raise TypeError(f"out must be a dict node type -> buffer, got {type(out).__name__}")
        asked = {}
        for node_type, type_ids in ids.items():
            if featureless == "skip" and node_type in self._sources and self._sources[node_type] is None:
                continue
            if not isinstance(node_type, str) or node_type not in self._sources:
                raise ValueError(f"ids names unknown node type {node_type!r}; known node types: {list(self._sources)}")
            self.source(node_type)
            asked[node_type] = type_ids
        for node_type in out or ():
            if node_type not in asked:
                raise ValueError(f"out names node type {node_type!r}, which ids does not ask for")
        if out:
            self._check_no_overlap(out)
        rows = {}
        for node_type in sorted(self.feature_types) if self.collective else asked:
            type_ids = asked.get(node_type, np.empty(0, np.int64))
            buffer = None if out is None else out.get(node_type)
            rows[node_type] = self._gather_one(self._sources[node_type], type_ids, buffer, check)
        return {node_type: rows[node_type] for node_type in asked}

    @staticmethod
    def _gather_one(source, ids, out, check: bool | str):
        return source.gather(ids, out=out)

    def _check_no_overlap(self, out: dict) -> None:
        """Refuse ``out`` buffers that share memory with a table of this store or with each other
        (rows would be read after being overwritten)."""
        tables = {t: _host_table(source) for t, source in self._sources.items() if source is not None}
        buffers = [(t, b) for t, b in out.items() if isinstance(b, np.ndarray)]
        for i, (node_type, buffer) in enumerate(buffers):
            for table_type, table in tables.items():
                if table is not None and np.may_share_memory(buffer, table):
                    raise ValueError(
                        f"out[{node_type!r}] overlaps the feature table of {table_type!r}: pass a separate buffer"
                    )
            for other_type, other in buffers[i + 1 :]:
                if np.may_share_memory(buffer, other):
                    raise ValueError(f"out[{node_type!r}] and out[{other_type!r}] overlap: pass separate buffers")

    def stats(self) -> dict:
        """Lookup counters in total (summed over types) and ``per_type``.

        Returns
        -------
        dict with every integer counter the types' ``stats()`` share, summed (for
        :class:`~gglspeedup.FeatureStore` s: ``lookups``, ``calls``, ``rows_device``, ``rows_host``,
        ``hits``, ``bytes_device``, ``bytes_host``, ``num_cached``), ``hit_rate`` (total hits over
        total lookups) when the types count hits, and ``per_type``: node type -> that type's own
        ``stats()``.
        """
        per_type = {t: self._sources[t].stats() for t in self.feature_types}
        shared = set.intersection(*(set(s) for s in per_type.values())) if per_type else set(_ADDITIVE)
        total = {}
        for key in [k for k in _ADDITIVE if k in shared] + sorted(shared - set(_ADDITIVE)):
            values = [s[key] for s in per_type.values()]
            if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
                total[key] = int(sum(values))
        if "hits" in total and "lookups" in total:
            total["hit_rate"] = total["hits"] / total["lookups"] if total["lookups"] else 0.0
        total["per_type"] = per_type
        return total

    def reset_stats(self) -> None:
        """Zero every type's counters (sources without ``reset_stats`` keep theirs)."""
        for t in self.feature_types:
            reset = getattr(self._sources[t], "reset_stats", None)
            if reset is not None:
                reset()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(feature_types={list(self.feature_types)}, node_types={list(self.node_types)})"


class HeteroFeatureStore(HeteroFeatureSource):
    """Feature rows per node type on ``device``; the hottest rows of *all* types share one cache.

    Parameters
    ----------
    x : dict node type -> array-like (num_rows_t, dim_t), or None
        One table per node type, each anything :class:`~gglspeedup.FeatureStore` takes (its own
        dtype and width: float32 for one type, float16 for another, ...). ``None``, or a type
        of ``graph`` left out, is a type without features (the model embeds it).
    device : str, int or device object
        ``"cpu"`` or ``"cuda[:index]"``, for every type.
    cache_size : int or str
        One device-cache budget in bytes for all types together (``"0.1G"``, see
        :func:`~gglspeedup.parse_size`). The policy ranks every row of every type globally and
        each row that still fits is cached (:func:`~gglspeedup.feature.hetero_policies.split_budget`),
        so the cached bytes never exceed it. On the CPU only tables on disk (memory-mapped, see
        :meth:`from_npy`) get a RAM cache; tables in memory are one tier.
    policy : None, "degree", "presample", "none", dict node type -> order, or list of (type, id)
        ``None``: ``"degree"`` with a graph (rank by out-degree summed over relations, **per byte
        of row**), else ``"none"``. See :mod:`gglspeedup.feature.hetero_policies`.
    graph : HeteroGraph, optional
        Needed by ``"degree"`` / ``"presample"``; each table must have ``graph.num_nodes[type]``
        rows, and the graph's types without a table are types without features.
    presample : dict, optional
        ``"presample"`` options: ``fanouts``, ``batch_size``, ``num_batches``, ``seeds`` (dict
        node type -> ids), ``seed``, ``sampler`` (a typed sampler: ``sample({type: seeds},
        key=k)`` returning ``n_id`` as a dict), or ``counts`` (dict node type -> visit counts, or
        a callable returning one, instead of sampling).
    pin, staging
        As :class:`~gglspeedup.FeatureStore`, for every type.

    Notes
    -----
    Each type is held by its own :class:`~gglspeedup.FeatureStore` (``store[type]``) whose cache
    holds exactly the rows the global ranking gave that type, so a lookup returns what that store
    returns: zero-copy arrays of the device's module (NumPy on the CPU and the simulator, CuPy on a
    GPU), ``x[type][ids]`` exactly. ``policy_info`` says which policy ran and ``cached_bytes`` how
    much of the budget it used.

    Examples
    --------
    >>> import numpy as np
    >>> x = {"paper": np.arange(6, dtype=np.float32).reshape(3, 2), "author": None}
    >>> store = HeteroFeatureStore(x)
    >>> rows = store[{"paper": [2, 0, 2]}]
    >>> rows["paper"].tolist()
    [[4.0, 5.0], [0.0, 1.0], [4.0, 5.0]]
    >>> store.stats()["lookups"], store.stats()["per_type"]["paper"]["lookups"]
    (3, 3)
    >>> "author" in store.node_types, "author" in store   # known, but without features
    (True, False)
    """

    def __init__(
        self, x, device="cpu", cache_size=0, policy=None, graph=None, *, presample=None, pin="copy", staging="64M"
    ):
        self.device = as_device(device)
        tables = check_tables(x, graph)
        self.cache_size = parse_size(cache_size, "cache_size")
        featured = {t: table for t, table in tables.items() if table is not None}
        self.row_bytes = {t: table.shape[1] * table.dtype.itemsize for t, table in featured.items()}
        num_rows = {t: table.shape[0] for t, table in featured.items()}
        name, compute = resolve_hetero_policy(policy, graph, num_rows, self.row_bytes, presample)
        self.policy_info = {"policy": name}
        cached = {t: np.empty(0, np.int64) for t in featured}
        if self.device.is_cuda:
            self.device.check_available()  # before a presample run, not after it
        # A cache exists on a GPU, and on the CPU in front of tables on disk (memory-mapped) only.
        cacheable = [t for t, table in featured.items() if self.device.is_cuda or backing_file(table) is not None]
        if cacheable:
            if name != "none" and self.cache_size:
                ranking, info = compute(self.cache_size)
                if len(cacheable) < len(featured):  # rows of tables in memory would spend budget and be cached nowhere
                    ranking = ranking.only(np.isin(ranking.type_index, [ranking.types.index(t) for t in cacheable]))
                cached = split_budget(ranking, self.row_bytes, self.cache_size)
                counts = info.pop("counts", None)
                if counts is not None:
                    info.update(expected_hit_rate=typed_hit_rate(counts, cached))
                self.policy_info.update(info)
        stores = {}
        for t, table in tables.items():
            if table is None:
                stores[t] = None
                continue
            ids = cached[t]
            stores[t] = FeatureStore(
                table,
                self.device,
                len(ids) * self.row_bytes[t],
                policy=ids if len(ids) else "none",
                pin=pin,
                staging=staging,
            )
        self.policy_info["num_cached"] = {t: len(ids) for t, ids in cached.items()}
        super().__init__(stores)

    @classmethod
    def from_npy(cls, paths: dict, device="cpu", cache_size=0, policy=None, graph=None, **options):
        """A store over ``.npy`` files (dict node type -> path, or ``None`` for a type without
        features), each memory-mapped as :meth:`FeatureStore.from_npy` does; one cache budget."""
        if not isinstance(paths, dict):
            raise TypeError(f"paths must be a dict node type -> .npy path, got {type(paths).__name__}")
        tables = {t: None if path is None else open_npy(path, f"paths[{t!r}]") for t, path in paths.items()}
        return cls(tables, device, cache_size, policy, graph, **options)

    @staticmethod
    def _gather_one(source, ids, out, check: bool | str):
        return source.gather(ids, out=out, check=check)

    def synchronize(self) -> None:
        """:meth:`FeatureStore.synchronize` of every type's store, in type order: waits for their
        gathers and raises the first ``IndexError`` a ``check="deferred"`` gather recorded."""
        for node_type in sorted(self.feature_types):
            self._sources[node_type].synchronize()

    def store(self, node_type) -> FeatureStore:
        """The :class:`~gglspeedup.FeatureStore` of ``node_type`` (same as ``store[node_type]``)."""
        return self.source(node_type)

    @property
    def shape(self) -> dict:
        """Node type -> ``(num_rows, dim)``, for the types with features."""
        return {t: self._sources[t].shape for t in self.feature_types}

    @property
    def dtype(self) -> dict:
        """Node type -> the table's dtype, for the types with features."""
        return {t: self._sources[t].dtype for t in self.feature_types}

    @property
    def cached_ids(self) -> dict:
        """Node type -> its cached row ids, hottest first (int64 host arrays; empty on the CPU)."""
        return {t: self._sources[t].cached_ids for t in self.feature_types}

    @property
    def cached_bytes(self) -> int:
        """Bytes of the budget the cached rows use (``<= cache_size``)."""
        return sum(self._sources[t].num_cached * self.row_bytes[t] for t in self.feature_types)

    def __repr__(self) -> str:
        return (
            f"HeteroFeatureStore(shape={self.shape}, device={self.device}, cache_size={self.cache_size}, "
            f"cached_bytes={self.cached_bytes}, policy={self.policy_info['policy']!r}, "
            f"without_features={[t for t in self.node_types if t not in self]})"
        )

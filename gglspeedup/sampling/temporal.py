"""Temporal sampling, host side: the time arrays checked, one time per edge, rows sorted once.

Semantics (see DESIGN.md, "Temporal and disjoint sampling"): every seed grows its own tree
(disjoint) and every node of a tree carries its seed's time ``t``. With node times a neighbour
``u`` is eligible when ``node_time[u] <= t``; with edge times an edge ``e`` when
``edge_time[e] <= t`` (``<=``: what happened at the seed's own time is visible, as in PyG).
``"uniform"`` draws among the eligible edges exactly as a row of that many edges draws; ``"last"``
takes the ``k`` latest.

Both kinds become one time per CSR position (:func:`position_times`: ``node_time[indices]`` or
``edge_time`` by edge id), and rows are sorted by it once (:func:`sort_by_time`, stable; a graph
already sorted is used as is), so a row's eligible edges are a prefix found by binary search
(:func:`._kernels.rows.row_window`). The sorted copy carries the original edge ids, so ``e_id``
does not change. Times are int64 or float64 (other ints / floats widened); NaN is refused, and so
is an integer time outside int64, wherever it is given (:func:`check_int64_times`).
"""

from __future__ import annotations

import numpy as np

from ..device import as_device_array, on_gpu, reject_meta, to_numpy
from ..graph import CSRGraph
from ..validation import beyond_int64, ints_beyond_int64, list_array

__all__ = [
    "STRATEGIES",
    "Timeline",
    "check_strategy",
    "check_int64_times",
    "time_array",
    "common_dtype",
    "position_times",
    "typed_position_times",
    "sort_by_time",
    "sort_typed_by_time",
    "check_seed_time",
    "tree_times",
    "typed_tree_times",
    "earliest",
    "temporal_setup",
]

STRATEGIES = ("uniform", "last")


def check_strategy(strategy) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"temporal_strategy must be one of {STRATEGIES}, got {strategy!r}")
    return strategy


def check_int64_times(name: str, values, array) -> None:
    """The one rule for integer times, at every entry point (``node_time``, ``edge_time``,
    ``seed_time``, ``pair_time``, per type too): they are int64, and one outside int64 raises
    ``ValueError`` naming its entry, whatever holds it. ``array`` is ``values`` as read (host or GPU):
    a list of Python ints NumPy reads as float64 (``[2**63, 0]``: every int rounded to a float
    time) or as objects (``[2**64, 0]``), or a uint64 array past ``2**63 - 1`` (int64 would wrap it
    to a negative time). Float times are float64 and have no such bound."""
    if array.dtype.kind in "fO":
        array = ints_beyond_int64(values)  # None unless a list of ints only (a loop: error path)
    message = None if array is None else beyond_int64(name, array)  # sync (GPU times): uint64 ones only
    if message is not None:
        raise ValueError(f"{message} (the dtype of integer times)")


def time_array(name: str, values, length: int | None = None, what: str = "") -> np.ndarray:
    """``values`` as a C-contiguous 1-D int64 or float64 host array (ints -> int64, floats ->
    float64); ``TypeError`` for non-numbers, ``ValueError`` for a wrong shape or length (``what``
    says what ``length`` counts) or a NaN."""
    if values is None:
        raise TypeError(f"{name} must be an array of times, got None")
    reject_meta(name, values)
    array = list_array(name, values) if isinstance(values, (list, tuple)) else to_numpy(values)
    check_int64_times(name, values, array)
    kind = array.dtype.kind
    if kind not in "iuf" or (kind == "f" and array.dtype.itemsize > 8):
        what_kind = "bool" if kind == "b" else str(array.dtype)
        raise TypeError(
            f"{name} must hold numbers (int or float times; datetime64: pass .astype('int64')), got dtype {what_kind}"
        )
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    if length is not None and array.shape[0] != length:
        raise ValueError(f"{name} must have one entry per {what or 'item'} ({length}), got {array.shape[0]}")
    array = np.ascontiguousarray(array, dtype=np.float64 if kind == "f" else np.int64)
    if kind == "f":
        bad = np.isnan(array)
        if bad.any():
            raise ValueError(f"{name} must not hold NaN: {name}[{int(np.argmax(bad))}] is NaN")
    return array


def common_dtype(arrays) -> np.dtype:
    """float64 when any of ``arrays`` is, else int64."""
    return np.dtype(np.float64 if any(a.dtype.kind == "f" for a in arrays) else np.int64)


def earliest(dtype) -> int | float:
    """A time every seed time reaches: the smallest value of ``dtype`` (``-inf`` for floats)."""
    return -np.inf if np.dtype(dtype).kind == "f" else int(np.iinfo(np.int64).min)


def _edge_times(name: str, edge_time: np.ndarray, edge_ids, num_edges: int) -> np.ndarray:
    """Times per CSR position of edges whose ids are ``edge_ids`` (CSR positions when ``None``)."""
    if edge_ids is None:
        if edge_time.shape[0] != num_edges:
            raise ValueError(f"{name} must have one entry per edge ({num_edges}), got {edge_time.shape[0]}")
        return edge_time
    ids = to_numpy(edge_ids)
    if ids.size and (int(ids.max()) >= edge_time.shape[0] or int(ids.min()) < 0):
        raise ValueError(
            f"{name} must have one entry per edge id (ids up to {int(ids.max())}), got {edge_time.shape[0]} entries"
        )
    return edge_time[ids]


def _neighbour_times(node_time: np.ndarray, indices: np.ndarray, span: tuple) -> np.ndarray:
    """``node_time[indices[first:stop]]`` for ``span = (first, stop, ...)``; an id outside the
    node times (a corrupt graph loaded unverified) raises the sampler's named error."""
    first, stop = span[:2]
    try:
        return node_time[indices[first:stop]]
    except IndexError:
        from .._integrity import corrupt_indices_error

        raise corrupt_indices_error(indices, [span]) from None


def position_times(graph: CSRGraph, node_time, edge_time) -> tuple:
    """``(times, node_time)``: one time per CSR position of ``graph`` (host) from exactly one of
    ``node_time`` ((num_nodes,): the neighbour's time) or ``edge_time`` (one per edge id, indexed
    like ``e_id``), and the checked node times (or ``None``)."""
    if node_time is not None and edge_time is not None:
        raise ValueError("give node_time or edge_time, not both (a sampler filters by one kind of time)")
    if node_time is not None:
        node_time = time_array("node_time", node_time, graph.num_nodes, "node")
        span = (0, graph.num_edges, graph.num_nodes, "")
        return _neighbour_times(node_time, to_numpy(graph.indices), span), node_time
    edge_time = time_array("edge_time", edge_time)
    return _edge_times("edge_time", edge_time, graph.edge_ids, graph.num_edges), None


def typed_position_times(graph, node_time, edge_time) -> tuple:
    """As :func:`position_times` for a :class:`~gglspeedup.HeteroGraph`'s stacked CSR: ``node_time``
    a dict node type -> (num_nodes[type],) times, or ``edge_time`` a dict edge type -> times by the
    relation's edge id. A type (relation) left out is never filtered, as in PyG: its positions get
    :func:`earliest`. Returns ``(times, node_time dict or None)``."""
    from ..heterograph import check_edge_type

    if node_time is not None and edge_time is not None:
        raise ValueError("give node_time or edge_time, not both (a sampler filters by one kind of time)")
    given = node_time if node_time is not None else edge_time
    name = "node_time" if node_time is not None else "edge_time"
    if not isinstance(given, dict):
        raise TypeError(f"{name} of a typed graph must be a dict (node type / edge type -> times), got {type(given)}")
    checked = {}
    for key, values in given.items():
        if node_time is not None:
            if key not in graph.num_nodes:
                raise ValueError(f"node_time names node type {key!r}, which the graph does not have")
            checked[key] = time_array(f"node_time[{key!r}]", values, graph.num_nodes[key], "node")
        else:
            key = check_edge_type(key, graph.edge_types, "edge_time's key")
            checked[key] = time_array(f"edge_time[{key!r}]", values)
    dtype = common_dtype(checked.values()) if checked else np.dtype(np.int64)
    stacked = graph.stacked
    indices = to_numpy(stacked.indices)
    ids = None if stacked.edge_ids is None else to_numpy(stacked.edge_ids)
    times = np.full(stacked.num_edges, earliest(dtype), dtype=dtype)
    for r, edge_type in enumerate(graph.edge_types):
        first, stop = int(graph.edge_base[r]), int(graph.edge_base[r + 1])
        if node_time is not None and edge_type[0] in checked:
            source = f"relation {edge_type}: its source ids are bound by num_nodes[{edge_type[0]!r}]"
            span = (first, stop, graph.num_nodes[edge_type[0]], source)
            times[first:stop] = _neighbour_times(checked[edge_type[0]], indices, span)
        elif edge_time is not None and edge_type in checked:
            relation_ids = ids[first:stop] if ids is not None and graph.has_edge_ids(edge_type) else None
            times[first:stop] = _edge_times(f"edge_time[{edge_type!r}]", checked[edge_type], relation_ids, stop - first)
    if node_time is not None:
        checked = {t: v.astype(dtype, copy=False) for t, v in checked.items()}
    return times, (checked if node_time is not None else None)


def sort_by_time(graph: CSRGraph, times: np.ndarray, id_base=None) -> tuple:
    """``(graph, times)`` with every row ascending in time: the inputs when already so, else a copy
    sorted stably per row whose ``edge_ids`` keep reporting each edge's original id (its position,
    less ``id_base[position]``, when the graph has none: a typed stack's relation-local ids) and
    which keeps the graph's ``node_order`` (its rows are the same nodes)."""
    from ._kernels.time_rows import row_time_order, unsorted_row

    indptr = to_numpy(graph.indptr)
    if times.shape[0] < 2 or unsorted_row(indptr, times) < 0:
        return graph, times
    perm = row_time_order(indptr, times)
    if graph.edge_ids is not None:
        edge_ids = to_numpy(graph.edge_ids)[perm]
    else:
        edge_ids = perm if id_base is None else perm - id_base[perm]
    weights = None if graph.weights is None else to_numpy(graph.weights)[perm]
    indices = to_numpy(graph.indices)
    sorted_graph = CSRGraph(
        indptr,
        indices[perm],
        edge_ids=edge_ids,
        weights=weights,
        num_src_nodes=graph.num_src_nodes,
        dtype=indices.dtype,
        node_order=graph.node_order,  # dropped, original_ids would have been the identity
        _checked=True,
    )
    return sorted_graph, times[perm]


def sort_typed_by_time(graph, times: np.ndarray) -> tuple:
    """:func:`sort_by_time` for a :class:`~gglspeedup.HeteroGraph` (its stacked CSR): ``(graph,
    times)``, the graph a copy over the sorted stack when any row was unsorted (every relation
    then reports its edge ids, positions for those that had none)."""
    stacked = graph.stacked
    id_base = None
    if stacked.edge_ids is None:
        id_base = np.repeat(graph.edge_base[:-1], np.diff(graph.edge_base))
    sorted_stack, times = sort_by_time(stacked, times, id_base)
    if sorted_stack is stacked:
        return graph, times
    return graph.with_stacked(sorted_stack, [True] * len(graph.edge_types)), times


def check_seed_time(seed_time, count: int, dtype, device, name: str = "seed_time"):
    """``seed_time`` as ``count`` times of ``dtype`` (host, or ``device``'s for GPU input). Float
    times for integer edge or node times are floored (``time <= 3.5`` is ``time <= 3``); NaN raises,
    and so does an integer time outside int64 (:func:`check_int64_times`, as for ``node_time``),
    whatever the sampler's times (a float one too)."""
    if seed_time is None:
        raise TypeError(f"{name} must be an array of times, got None")
    reject_meta(name, seed_time)
    if on_gpu(seed_time):
        if not device.is_cuda:
            raise ValueError(f"{name} lives on a GPU but this sampler runs on {device}; pass host times")
        array = as_device_array(seed_time, device)
    else:
        array = np.asarray(seed_time) if isinstance(seed_time, (list, tuple, int, float)) else to_numpy(seed_time)
    xp = np if isinstance(array, np.ndarray) else device.xp
    if array.ndim == 0:
        raise ValueError(f"{name} must be 1-D with one time per seed ({count}), got a scalar")
    check_int64_times(name, seed_time, array)
    kind = array.dtype.kind
    if kind not in "iuf":
        raise TypeError(f"{name} must hold numbers (int or float times), got dtype {array.dtype}")
    if array.ndim != 1 or array.shape[0] != count:
        raise ValueError(f"{name} must have one time per seed ({count},), got shape {tuple(array.shape)}")
    if kind == "f" and count:
        bad = xp.isnan(array)
        if bool(bad.any()):  # sync (GPU times): one flag per batch
            raise ValueError(f"{name} must not hold NaN: {name}[{int(bad.argmax())}] is NaN")
    if np.dtype(dtype).kind == "f" or kind != "f":
        return xp.ascontiguousarray(array, dtype=dtype)
    floored = xp.floor(array.astype(np.float64))
    # float64 holds int64's range only up to 2**63 - 1024: clip, and saturate above (inf included)
    result = xp.clip(floored, -(2.0**63), 2.0**63 - 1024).astype(np.int64)
    return xp.ascontiguousarray(xp.where(floored >= 2.0**63, np.iinfo(np.int64).max, result))


def tree_times(timeline, seeds, seed_time, device, name: str = "seed_time"):
    """The time of each tree of an untyped call (``seeds``, checked; one tree each): ``seed_time``
    checked, by default the seeds' node times; ``None`` for a sampler without times
    (``timeline`` ``None``), which refuses ``seed_time``. ``name`` names the argument in errors."""
    if timeline is None:
        if seed_time is not None:
            raise ValueError(f"{name} needs a temporal sampler: NeighborSampler(..., node_time=...) or edge_time=...")
        return None
    if seed_time is not None:
        return check_seed_time(seed_time, len(seeds), timeline.dtype, device, name)
    if timeline.edge_level:
        raise ValueError(f"{name} is required: an edge-time sampler filters each tree by its seed's time")
    node_time = timeline.node_times()
    if isinstance(seeds, np.ndarray):
        return node_time[seeds]
    return device.xp.asarray(node_time)[seeds]


def typed_tree_times(timeline, node_types, seeds: list, seed_time, device, name: str = "seed_time"):
    """The time of every tree of a typed call (``seeds``: one checked array per node type of
    ``node_types``, trees numbered in that order), as :func:`tree_times`; ``seed_time`` a dict node
    type -> times, each type's seeds defaulting to their node times where the type has them."""
    if timeline is None:
        if seed_time is not None:
            raise ValueError(
                f"{name} needs a temporal sampler: HeteroNeighborSampler(..., node_time=... or edge_time=...)"
            )
        return None
    if seed_time is not None and not isinstance(seed_time, dict):
        raise TypeError(f"{name} must be a dict node type -> times, got {type(seed_time).__name__}")
    seed_time = seed_time or {}
    for node_type in seed_time:
        if node_type not in node_types:
            raise ValueError(f"{name} names node type {node_type!r}, which the graph does not have")
    parts = []
    for t, ids in zip(node_types, seeds):
        if t in seed_time:
            parts.append(check_seed_time(seed_time[t], len(ids), timeline.dtype, device, f"{name}[{t!r}]"))
        elif len(ids) == 0:
            parts.append(np.empty(0, timeline.dtype))
        elif timeline.node_times(t) is not None:
            times = timeline.node_times(t)
            parts.append(times[ids] if isinstance(ids, np.ndarray) else device.xp.asarray(times)[ids])
        else:
            raise ValueError(f"{name}[{t!r}] is required: the seeds of node type {t!r} have no node time to default to")
    xp = device.xp if device.is_cuda else np
    with device:
        return xp.concatenate([xp.asarray(p) for p in parts])


class Timeline:
    """A temporal sampler's times: ``times`` (one per CSR position of the sampled graph, rows
    ascending; where the graph lives), ``node_time`` (host: an array, a dict per node type for a
    typed graph, or ``None`` with edge times), ``dtype``, ``last`` (strategy) and the per-type
    node orders used for time-aware negatives (:meth:`order`)."""

    def __init__(self, times, node_time, strategy: str):
        self.times = times
        self.node_time = node_time
        self.dtype = np.dtype(times.dtype)
        self.strategy = strategy
        self.last = strategy == "last"
        self._orders: dict = {}

    @property
    def edge_level(self) -> bool:
        return self.node_time is None

    def node_times(self, node_type=None):
        """The node times (of ``node_type`` for a typed graph; ``None`` when it has none)."""
        if self.node_time is None:
            return None
        return self.node_time.get(node_type) if isinstance(self.node_time, dict) else self.node_time

    def order(self, node_type=None, xp=np):
        """``(order, sorted_times)`` of ``node_type``'s nodes by time (stable; arrays of ``xp``), or
        ``None`` without node times: the nodes existing at time ``t`` are
        ``order[:searchsorted(sorted_times, t, "right")]``."""
        times = self.node_times(node_type)
        if times is None:
            return None
        if (node_type, xp) not in self._orders:
            order = np.argsort(times, kind="stable")
            self._orders[(node_type, xp)] = (xp.asarray(order), xp.asarray(times[order]))
        return self._orders[(node_type, xp)]

    def negative_times(self, xp, neg_time, space, src_type=None, dst_type=None):
        """The :class:`._kernels.links.NegativeTimes` of negatives at times ``neg_time`` (one per
        negative, arrays of ``xp``): each endpoint among its type's nodes existing then (``space``:
        the two types' node counts; a type without node times: all of them); ``None`` without node
        times (negatives are then uniform)."""
        if self.node_time is None:
            return None
        from ._kernels.links import NegativeTimes

        sides = []
        for node_type, num in ((src_type, space[0]), (dst_type, space[1])):
            ordered = self.order(node_type, xp)
            if ordered is None:
                sides.append((xp.arange(num, dtype=np.int64), xp.full(neg_time.shape[0], num, dtype=np.int64)))
            else:
                order, sorted_times = ordered
                sides.append((order, xp.searchsorted(sorted_times, neg_time, side="right").astype(np.int64)))
        (src_order, src_count), (dst_order, dst_count) = sides
        return NegativeTimes(src_count, dst_count, src_order, dst_order)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_orders"] = {}  # rebuilt on use (keyed by array module)
        return state


def temporal_setup(graph, node_time, edge_time, temporal_strategy, weighted: bool, *, typed: bool) -> tuple:
    """The temporal step of both samplers' constructors: ``(graph, times, node_times, strategy)``.

    Without times: the graph as given, no times, and ``temporal_strategy`` must be ``"uniform"``.
    With them: the strategy checked against ``weighted``, the graph on the host with each
    relation's (``typed``) or row's edges sorted by time, the edge-position times and the node
    times (see :func:`position_times` / :func:`typed_position_times`)."""
    from .common import check_last

    strategy = check_strategy(temporal_strategy)
    if node_time is None and edge_time is None:
        if strategy != "uniform":
            raise ValueError(f"temporal_strategy={strategy!r} needs node_time or edge_time")
        return graph, None, None, strategy
    check_last(strategy, weighted)
    graph = graph.to("cpu")
    positions, ordered = (typed_position_times, sort_typed_by_time) if typed else (position_times, sort_by_time)
    times, node_times = positions(graph, node_time, edge_time)
    graph, times = ordered(graph, times)
    return graph, times, node_times, strategy

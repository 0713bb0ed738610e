"""Sampler output as GammaGL's loaders hand it to their batch builders, in NumPy (no GammaGL here).

GammaGL's ``NodeNeighborLoader`` / ``LinkNeighborLoader`` describe a sampled subgraph as
``(node, row, col, edge)``: the sampled nodes' global ids (seeds first), and per edge the local
positions of its source (``row``) and target (``col``) in ``node`` and its column in the graph's
``edge_index`` (``edge``), hops concatenated seed hop first. These functions build those arrays
from gglspeedup's records; :mod:`.loaders` converts them and calls GammaGL's own ``filter_graph``.

>>> import numpy as np
>>> import gglspeedup as gg
>>> graph = gg.CSRGraph.from_edge_index([[1, 2, 3, 0], [0, 0, 1, 2]], num_nodes=4)
>>> node, row, col, edge = flat_sample(gg.NeighborSampler(graph, [2, 1]).sample([0], key=0))
>>> node.tolist(), bool((graph.edge_ids is not None) and len(row) == len(col) == len(edge))
([0, 1, 2, 3], True)
"""

from __future__ import annotations

import numpy as np

from ..device import to_numpy

__all__ = [
    "flat_sample",
    "flat_hetero_sample",
    "induced_edges",
    "link_queries",
    "check_node_attrs",
    "gather_node_attrs",
]


def _concat(parts: list, dtype=np.int64) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.empty(0, dtype)


def _hop_arrays(adjs: list) -> tuple:
    """``(row, col, edge)`` of ``adjs`` (outermost hop first), concatenated seed hop first."""
    hops = [(to_numpy(adj.edge_index), to_numpy(adj.e_id)) for adj in reversed(list(adjs))]
    return (
        _concat([edge_index[0] for edge_index, _ in hops]),
        _concat([edge_index[1] for edge_index, _ in hops]),
        _concat([e_id for _, e_id in hops]),
    )


def flat_sample(out) -> tuple:
    """``(node, row, col, edge)`` host int64 arrays of a :class:`~gglspeedup.SampleOutput`."""
    return (to_numpy(out.n_id).astype(np.int64, copy=False), *_hop_arrays(out.adjs))


def flat_hetero_sample(out, node_types, edge_types) -> tuple:
    """``(node, row, col, edge)`` dicts of a :class:`~gglspeedup.HeteroSampleOutput`: every node
    type and every edge type present (empty arrays for those the batch did not reach)."""
    node = {t: to_numpy(out.n_id[t]).astype(np.int64, copy=False) if t in out.n_id else _concat([]) for t in node_types}
    row, col, edge = {}, {}, {}
    for edge_type in edge_types:
        hops = [layer[edge_type] for layer in out.adjs if edge_type in layer]
        row[edge_type], col[edge_type], edge[edge_type] = _hop_arrays(hops)
    return node, row, col, edge


def induced_edges(graph, node: np.ndarray) -> tuple:
    """``(row, col, edge)`` of every edge of ``graph`` (a CPU :class:`~gglspeedup.CSRGraph`, rows =
    targets) between two nodes of ``node``: GammaGL's ``directed=False`` subgraph.

    Edges come grouped by target in ``node`` order, each target's in the graph's row order.
    """
    node = np.asarray(node, dtype=np.int64)
    local = np.full(graph.num_nodes, -1, dtype=np.int64)
    local[node] = np.arange(len(node), dtype=np.int64)
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    starts, counts = indptr[node], indptr[node + 1] - indptr[node]
    total = int(counts.sum())
    target = np.repeat(np.arange(len(node), dtype=np.int64), counts)
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    positions = np.repeat(starts, counts) + offsets
    source = local[np.asarray(graph.indices)[positions]]
    keep = source >= 0
    edge_ids = positions if graph.edge_ids is None else np.asarray(graph.edge_ids)[positions]
    return source[keep], target[keep], edge_ids[keep].astype(np.int64, copy=False)


def link_queries(pairs: np.ndarray, labels: np.ndarray, ratio: float, num_nodes: int, rng) -> tuple:
    """GammaGL's link batch plan: ``(query_nodes, edge_label_index, edge_label)``.

    ``pairs`` (2, B) global ids and their ``labels``; with ``int(B * ratio) > 0`` negatives, that
    many uniform pairs over ``[0, num_nodes)`` (drawn by ``rng``) are appended, the positives'
    labels become ``labels + 1`` and the negatives' 0 (GammaGL's rule; its own draw repeats one
    random pair, this draws each independently). ``query_nodes`` are the distinct endpoints in
    ascending order (the seeds to sample); ``edge_label_index`` their local positions, (2, B').
    """
    num_negatives = int(pairs.shape[1] * ratio)
    if num_negatives > 0:
        negatives = rng.integers(0, num_nodes, size=(2, num_negatives), dtype=np.int64)
        pairs = np.concatenate([pairs, negatives], axis=1)
        labels = np.concatenate([labels + 1, np.zeros((num_negatives, *labels.shape[1:]), dtype=labels.dtype)])
    query_nodes, inverse = np.unique(pairs.reshape(-1), return_inverse=True)
    return query_nodes.astype(np.int64, copy=False), inverse.reshape(2, -1).astype(np.int64, copy=False), labels


def check_node_attrs(owner: str, node_attrs, node_types=None, num_nodes=None) -> dict:
    """``node_attrs`` checked: a dict attribute name (str) -> row source (``source[ids]``), or for
    a typed graph (``node_types`` given) name -> {node type: source}; ``None`` is ``{}``. With
    ``num_nodes`` (the graph's count, or node type -> count), a source whose ``shape`` says it has
    fewer rows is refused (a batch reaching the missing rows failed inside NumPy, mid-epoch)."""
    if node_attrs is None:
        return {}
    if not isinstance(node_attrs, dict):
        raise TypeError(
            f"{owner}: node_attrs must be a dict attribute name -> row source, got {type(node_attrs).__name__}"
        )
    for name, value in node_attrs.items():
        if not isinstance(name, str):
            raise TypeError(f"{owner}: node_attrs' keys must be attribute names (str), got {name!r}")
        sources = value if node_types is not None else {None: value}
        if node_types is not None:
            if not isinstance(value, dict):
                raise TypeError(
                    f"{owner}: node_attrs[{name!r}] must be a dict node type -> row source for a HeteroGraph, "
                    f"got {type(value).__name__}"
                )
            unknown = sorted(set(value) - set(node_types), key=str)
            if unknown:
                raise ValueError(f"{owner}: node_attrs[{name!r}] names node types {unknown} the graph does not have")
        for node_type, source in sources.items():
            where = f"[{name!r}]" + ("" if node_type is None else f"[{node_type!r}]")
            if not hasattr(source, "__getitem__"):
                raise TypeError(
                    f"{owner}: node_attrs{where} must give rows by node id (source[ids]), got {type(source).__name__}"
                )
            count = num_nodes.get(node_type) if isinstance(num_nodes, dict) else num_nodes
            shape = getattr(source, "shape", None)
            rows = shape[0] if shape is not None and len(shape) >= 1 else None
            if count is not None and isinstance(rows, (int, np.integer)) and rows < count:
                raise ValueError(
                    f"{owner}: node_attrs{where} has {int(rows)} rows but the graph has {int(count)} nodes"
                    + ("" if node_type is None else f" of type {node_type!r}")
                    + ": one row per node is needed"
                )
    return dict(node_attrs)


def gather_node_attrs(node_attrs: dict, node) -> dict:
    """Host arrays of each ``node_attrs`` source's rows of ``node`` (the sampled ids, or a dict
    node type -> ids when the sources are per type), in ``node``'s order."""
    out = {}
    for name, value in node_attrs.items():
        if isinstance(node, dict):
            out[name] = {t: to_numpy(source[node[t]]) for t, source in value.items()}
        else:
            out[name] = to_numpy(value[node])
    return out

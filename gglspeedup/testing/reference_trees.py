"""A pure-Python reference of disjoint and temporal sampling (:class:`gglspeedup.NeighborSampler`
with ``disjoint=True`` or ``node_time`` / ``edge_time``), independent of the kernels.

Every seed grows its own tree; rows of ``n_id`` are ``(tree, node)`` pairs entered in order of
first appearance. A temporal row of tree ``b`` first sorts its edges by time (stably, in Python),
keeps those at or before ``seed_time[b]`` and draws among them exactly as
:func:`.reference.reference_sample` draws a row of that many edges (``"last"``: the latest
``k``, oldest first), with the node's RNG state (never the tree's). Slow: small graphs only.
"""

from __future__ import annotations

import numpy as np

from ..device import to_numpy
from ..sampling.types import SampleOutput
from .reference import _grow_hops, _row_state, _sample_row

__all__ = ["reference_tree_sample"]


def _time_of_positions(graph, node_time, edge_time):
    indices = to_numpy(graph.indices)
    if node_time is not None:
        return np.asarray(node_time)[indices]
    if edge_time is not None:
        ids = np.arange(len(indices)) if graph.edge_ids is None else to_numpy(graph.edge_ids)
        return np.asarray(edge_time)[ids]
    return None


def reference_tree_sample(
    graph,
    seeds,
    fanouts,
    *,
    node_time=None,
    edge_time=None,
    seed_time=None,
    strategy="uniform",
    replace=False,
    weighted=False,
    seed=0,
    key=0,
    expand="all",
) -> SampleOutput:
    """What ``NeighborSampler(graph, fanouts, disjoint=True, node_time=..., edge_time=...,
    temporal_strategy=strategy, ...).sample(seeds, key=key, seed_time=seed_time)`` must return
    (host arrays, ``batch`` set), row by row in Python. ``seed_time`` defaults to the seeds' node
    times (node-time samplers)."""
    indptr = to_numpy(graph.indptr)
    indices = to_numpy(graph.indices)
    edge_ids = None if graph.edge_ids is None else to_numpy(graph.edge_ids)
    weights = None if graph.weights is None else to_numpy(graph.weights)
    times = _time_of_positions(graph, node_time, edge_time)
    seeds = [int(s) for s in np.asarray(seeds).reshape(-1)]
    if times is not None and seed_time is None:
        seed_time = np.asarray(node_time)[seeds]
    n_id = [(b, s) for b, s in enumerate(seeds)]
    local = {row: i for i, row in enumerate(n_id)}

    def picks(k, hop_state, target) -> list:
        tree, node = target
        row = list(range(int(indptr[node]), int(indptr[node + 1])))
        if times is not None:
            row = sorted(row, key=lambda p: times[p])  # stable: ties keep the row order
            row = [p for p in row if times[p] <= seed_time[tree]]
        row_weights = None if weights is None else np.asarray([weights[p] for p in row], np.float64)
        if times is not None and strategy == "last":
            chosen = list(range(len(row) - min(k, len(row)) if k >= 0 else 0, len(row))) if k != 0 else []
        else:
            chosen = _sample_row(0, len(row), row_weights, k, replace, weighted, _row_state(hop_state, node))
        return [(row[j], (tree, int(indices[row[j]]))) for j in chosen]

    hops = _grow_hops(n_id, local, fanouts, seed, key, expand, edge_ids, picks)
    batch = np.array([b for b, _ in n_id], dtype=np.int64)
    return SampleOutput(np.array([v for _, v in n_id], dtype=np.int64), hops, batch)

"""The typed samplers' :class:`~._kernels.records.HopPlan`, built from a graph, and the typed
output read back from a driver's hops per edge type (DESIGN.md, "Typed graphs").

The plan is a record of host arrays; the drivers' per-hop helpers live beside them in
:mod:`._kernels.typed_hops`, so the kernels' layer sees only arrays and records.
"""

from __future__ import annotations

import numpy as np

from ..heterograph import HeteroGraph
from ._kernels.records import HopPlan
from ._kernels.rng import edge_type_key
from .types import Adj

__all__ = ["HopPlan", "hop_plan", "typed_output"]


def hop_plan(graph: HeteroGraph, fanouts: np.ndarray) -> HopPlan:
    """Per relation (the graph's edge-type order): source and target type indices, row and edge
    bases in the stacked CSR, ``fanouts`` (R, hops) as int64, and RNG keys."""
    types = {t: i for i, t in enumerate(graph.node_types)}
    return HopPlan(
        src_type=np.array([types[et[0]] for et in graph.edge_types], np.int64),
        dst_type=np.array([types[et[2]] for et in graph.edge_types], np.int64),
        row_base=graph.row_base[:-1].copy(),
        edge_base=graph.edge_base[:-1].copy(),
        fanouts=np.ascontiguousarray(fanouts, np.int64),
        keys=np.array([edge_type_key(et) for et in graph.edge_types], np.uint64),
    )


def typed_output(graph, plan: HopPlan, seeds: list, drawn) -> tuple:
    """``(n_id, adjs, num_sampled_nodes, num_sampled_edges, batch)`` of a typed call, dicts per
    node or edge type (the fields of :class:`~gglspeedup.HeteroSampleOutput`), from a typed
    driver's :class:`~._kernels.records.Drawn` over ``seeds`` (one array per node type)."""
    n_id, hops, batch = drawn
    types, edge_types = graph.node_types, graph.edge_types
    seed_counts = [len(s) for s in seeds]
    counts_n = {t: [seed_counts[i]] for i, t in enumerate(types)}
    counts_e = {et: [] for et in edge_types}
    sizes = list(seed_counts)
    adjs = []
    relation_types = list(zip(edge_types, plan.src_type.tolist(), plan.dst_type.tolist()))  # Python ints
    for edges, e_id, offsets, _new_nodes, type_offsets in hops:
        before = list(sizes)
        for i, count in enumerate(np.diff(type_offsets).tolist()):
            counts_n[types[i]].append(count)
            sizes[i] += count
        layer = {}
        bounds = offsets.tolist()
        for r, (et, src, dst) in enumerate(relation_types):
            first, stop = bounds[r], bounds[r + 1]
            edge_index = edges[2 * first : 2 * stop].reshape(2, stop - first)
            layer[et] = Adj(edge_index, e_id[first:stop], (sizes[src], before[dst]))
            counts_e[et].append(stop - first)
        adjs.append(layer)
    batch = None if batch is None else dict(zip(types, batch))
    return dict(zip(types, n_id)), adjs[::-1], counts_n, counts_e, batch

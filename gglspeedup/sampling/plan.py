"""The typed samplers' :class:`~._kernels.records.HopPlan`, built from a graph (DESIGN.md, "Typed graphs").

The plan is a record of host arrays; the drivers' per-hop helpers live beside them in
:mod:`._kernels.typed`, so the kernels' layer sees only arrays and records.
"""

from __future__ import annotations

import numpy as np

from ..heterograph import HeteroGraph
from ._kernels.records import HopPlan
from ._kernels.rng import edge_type_key

__all__ = ["HopPlan", "hop_plan"]


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

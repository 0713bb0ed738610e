"""HopPlan: the per-relation arrays a typed driver runs the hops with (see DESIGN.md, "Typed graphs")."""

from __future__ import annotations

import numpy as np

from ..heterograph import HeteroGraph
from ._kernels.rng import edge_type_key, hop_state, relation_states

__all__ = ["HopPlan"]


class HopPlan:
    """What a typed driver needs to run the hops: per relation (the graph's edge-type order) its
    source and target type indices, row and edge bases in the stacked CSR, fanouts (R, hops) and
    RNG keys. Host arrays; built once per fanout setting."""

    def __init__(self, graph: HeteroGraph, fanouts: np.ndarray):
        types = {t: i for i, t in enumerate(graph.node_types)}
        self.src_type = np.array([types[et[0]] for et in graph.edge_types], np.int64)
        self.dst_type = np.array([types[et[2]] for et in graph.edge_types], np.int64)
        self.row_base = graph.row_base[:-1].copy()
        self.edge_base = graph.edge_base[:-1].copy()
        self.fanouts = np.ascontiguousarray(fanouts, np.int64)
        self.num_hops = int(self.fanouts.shape[1])
        self.keys = np.array([edge_type_key(et) for et in graph.edge_types], np.uint64)

    def states(self, seed: int, key: int, hop: int) -> np.ndarray:
        """uint64 (R,): every relation's RNG state at ``hop`` of batch ``key``
        (:func:`._kernels.rng.relation_state` of each relation, in one array operation)."""
        return relation_states(hop_state(seed, key, hop), self.keys)

    def src_base(self, type_base: np.ndarray) -> np.ndarray:
        return type_base[self.src_type]

    def targets(self, n_id: list, hop: int, xp=np):
        """``(targets, rel_of, segments)``: relation ``r``'s targets are ``n_id`` of its target type
        (none when its fanout at ``hop`` is 0), relation by relation; ``segments`` (host) bounds them."""
        lengths = [0 if k == 0 else len(n_id[d]) for d, k in zip(self.dst_type, self.fanouts[:, hop])]
        segments = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        parts = [n_id[d] for d, length in zip(self.dst_type, lengths) if length]
        targets = xp.concatenate(parts) if parts else xp.empty(0, np.int64)
        rel_of = xp.asarray(np.repeat(np.arange(len(lengths), dtype=np.int64), lengths))
        return targets, rel_of, segments

    @staticmethod
    def frontier(n_id: list, starts) -> list:
        """Every type's nodes from ``starts[t]`` on (the last hop's new nodes, under PyG's rule)."""
        return [ids[start:] if start else ids for ids, start in zip(n_id, starts)]

    def shift_targets(self, edges, edge_offsets, starts) -> None:
        """Add ``starts[target type]`` to row 1 of each relation's (2, E_r) block of ``edges``
        (target positions within a frontier become positions in the whole ``n_id``)."""
        for r, t in enumerate(self.dst_type):
            first, stop = int(edge_offsets[r]), int(edge_offsets[r + 1])
            if starts[t] and stop > first:
                edges[2 * first + (stop - first) : 2 * stop] += starts[t]

    def work(self, segments: np.ndarray, hop: int) -> int:
        """Draws a hop makes, about (``-1`` counted as 16 per row), to pick the CPU thread count."""
        ks = self.fanouts[:, hop]
        return int((np.diff(segments) * np.where(ks > 0, ks, 16)).sum())

    @staticmethod
    def extend(n_id: list, new_nodes, type_offsets, xp=np) -> list:
        """Every type's ``n_id`` with its new nodes (``new_nodes`` grouped by type, bounded by the
        host array ``type_offsets``) appended."""
        return [
            xp.concatenate((ids, new_nodes[type_offsets[t] : type_offsets[t + 1]]))
            if type_offsets[t + 1] > type_offsets[t]
            else ids
            for t, ids in enumerate(n_id)
        ]

"""``HeteroNeighborSampler.sample_links``: the link-prediction contract on one edge type.

The steps of :mod:`.links`, typed: pairs of ``edge_type = (s, name, d)`` are checked against
``num_nodes[s]`` and ``num_nodes[d]``; negatives draw sources in ``s`` and targets in ``d`` (strict
mode tests ``edge_type``'s edges: its rows in the stacked CSR); the seeds are the pairs' distinct
sources (type ``s``) and targets and triplet negatives (type ``d``), one list when ``s == d``; the
excluded edges are ``edge_type``'s ``source -> target`` edges (and ``reverse_edge_type``'s
``target -> source`` ones), as stacked CSR positions, so the same exclusion machinery applies.
"""

from __future__ import annotations

import numpy as np

from ..heterograph import check_edge_type
from .links import first_or_all
from .plan import typed_output
from .temporal import check_seed_time, typed_tree_times
from .types import HeteroLinkSampleOutput

__all__ = ["TypedLinks", "check_reverse_rule"]


def check_reverse_rule(edge_type, reverse_edge_type, exclude):
    """The reverse-edge rule of typed link prediction, for ``sample_links`` and the typed link
    loader alike: with ``exclude="reverse"`` the reverse edges of ``edge_type = (s, name, d)`` are
    in ``reverse_edge_type`` (an edge type already checked, or ``None``), which must run from ``d``
    to ``s``; ``None`` is allowed only when ``s == d`` (the relation holds both directions).
    Returns the relation holding the reverse edges (``None`` without ``"reverse"``)."""
    if exclude != "reverse":
        return None
    src, _, dst = edge_type
    if reverse_edge_type is None:
        if src != dst:
            raise ValueError(
                f"exclude='reverse' on {edge_type!r} needs reverse_edge_type: the relation ({dst!r}, ..., {src!r}) "
                "holding the reverse edges"
            )
        return edge_type  # one node type: the relation stores both directions itself
    if reverse_edge_type[0] != dst or reverse_edge_type[2] != src:
        raise ValueError(f"reverse_edge_type must go from {dst!r} to {src!r}, got {reverse_edge_type!r}")
    return reverse_edge_type


def _check_reverse(graph, edge_type, reverse_edge_type, exclude):
    if reverse_edge_type is not None:
        reverse_edge_type = check_edge_type(reverse_edge_type, graph.edge_types, "reverse_edge_type")
    return check_reverse_rule(edge_type, reverse_edge_type, exclude)


class TypedLinks:
    """:func:`~.links.link_batch`'s hooks for :meth:`HeteroNeighborSampler.sample_links` on
    ``edge_type`` (``reverse_edge_type`` as given; both checked here), built from the sampler's
    public pieces: its ``graph``, ``device``, ``timeline``, ``disjoint``, hop ``plan`` (the
    driver's ``fanouts``) and the call's ``options`` record."""

    def __init__(self, graph, device, timeline, disjoint: bool, plan, options, edge_type, reverse_edge_type):
        self.graph, self.device, self.timeline, self.disjoint = graph, device, timeline, disjoint
        self.fanouts, self.options = plan, options
        self.temporal = timeline is not None
        self.edge_type = check_edge_type(edge_type, graph.edge_types)
        self.reverse_edge_type = reverse_edge_type
        src_type, _, dst_type = self.edge_type
        self.relation = graph.edge_types.index(self.edge_type)
        self.bounds = (graph.num_nodes[src_type], graph.num_nodes[dst_type])
        self.names = (f"num_nodes[{src_type!r}]", f"num_nodes[{dst_type!r}]")
        self.space = (self.bounds[0], self.bounds[1], int(graph.row_base[self.relation]))
        self.s_index, self.d_index = graph.node_types.index(src_type), graph.node_types.index(dst_type)
        self.reverse = None

    def check_times(self, pairs, pair_time, exclude):
        """The reverse-edge rule, then the pairs' times (None without ``pair_time``)."""
        self.reverse = _check_reverse(self.graph, self.edge_type, self.reverse_edge_type, exclude)
        if pair_time is not None:
            if self.timeline is None:
                raise ValueError(
                    "pair_time needs a temporal sampler: HeteroNeighborSampler(..., node_time=... or edge_time=...)"
                )
            count = int(pairs.shape[1])
            return check_seed_time(pair_time, count, self.timeline.dtype, self.device, "pair_time")
        if self.timeline is not None and self.timeline.edge_level:
            raise ValueError("pair_time is required: an edge-time sampler filters each tree by its pair's time")
        return None

    def negative_times(self, xp, pair_times):
        src_type, _, dst_type = self.edge_type
        return self.timeline.negative_times(xp, pair_times, self.bounds, src_type, dst_type)

    def seeds(self, xp, src, targets):
        """One seed array per node type: the pairs' sources in ``s``, targets and triplet
        negatives in ``d`` (one list when ``s == d``)."""
        seeds = [xp.empty(0, np.int64) for _ in self.graph.node_types]
        num_pairs = src.shape[0]
        if self.s_index == self.d_index:
            seeds[self.s_index], local = first_or_all(xp, xp.concatenate((src, targets)), self.disjoint)
            return seeds, local[:num_pairs], local[num_pairs:]
        seeds[self.s_index], local_src = first_or_all(xp, src, self.disjoint)
        seeds[self.d_index], local_dst = first_or_all(xp, targets, self.disjoint)
        return seeds, local_src, local_dst

    def excluded(self, xp, pairs, reverse: bool):
        """``source -> target`` in the relation (row ``row_base[r] + target``), and with
        ``reverse`` ``target -> source`` in the reverse relation (row ``row_base + source``)."""
        row_base = self.graph.row_base
        sources, rows = pairs[0], pairs[1] + int(row_base[self.relation])
        if reverse:
            base = int(row_base[self.graph.edge_types.index(self.reverse)])
            sources, rows = xp.concatenate((sources, pairs[1])), xp.concatenate((rows, pairs[0] + base))
        return sources, rows

    def tree_time(self, xp, seeds, times, source_pairs, target_pairs):
        """Each tree the time of its pair, trees in the graph's node-type order."""
        if times is None:
            return typed_tree_times(self.timeline, self.graph.node_types, seeds, None, self.device, "pair_time")
        of_type = {self.s_index: source_pairs, self.d_index: target_pairs}
        if self.s_index == self.d_index:
            of_type = {self.s_index: xp.concatenate((source_pairs, target_pairs))}
        return times[xp.concatenate([of_type[t] for t in sorted(of_type)])]

    def output(self, seeds, drawn, pair_index, labels, negative_targets, false_negatives) -> HeteroLinkSampleOutput:
        n_id, adjs, counts_n, counts_e, batch = typed_output(self.graph, self.fanouts, seeds, drawn)
        return HeteroLinkSampleOutput(
            n_id, adjs, counts_n, counts_e, self.edge_type, pair_index, labels, negative_targets, false_negatives, batch
        )

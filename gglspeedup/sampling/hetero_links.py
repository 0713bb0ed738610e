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
from .links import (
    check_link_call,
    draw_link_negatives,
    exclusion_options,
    finish_links,
    first_appearance,
    link_negative_targets,
)
from .temporal import check_seed_time
from .types import HeteroLinkSampleOutput

__all__ = ["sample_typed_links", "check_reverse_rule"]


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


def sample_typed_links(
    sampler,
    pairs,
    labels,
    edge_type,
    negatives,
    num_negatives,
    strict_negatives,
    exclude,
    reverse_edge_type,
    key,
    pair_time=None,
    check=True,
) -> HeteroLinkSampleOutput:
    """The work of :meth:`HeteroNeighborSampler.sample_links` (arguments checked here, in order)."""
    graph, device, driver = sampler.graph, sampler.device, sampler._driver
    edge_type = check_edge_type(edge_type, graph.edge_types)
    src_type, _, dst_type = edge_type
    r = graph.edge_types.index(edge_type)
    bounds = (graph.num_nodes[src_type], graph.num_nodes[dst_type])
    names = (f"num_nodes[{src_type!r}]", f"num_nodes[{dst_type!r}]")
    pairs, labels, negatives, num_negatives, strict, exclude = check_link_call(
        device, pairs, bounds, names, labels, negatives, num_negatives, strict_negatives, exclude, check
    )
    count = int(pairs.shape[1])
    reverse = _check_reverse(graph, edge_type, reverse_edge_type, exclude)
    timeline = sampler.timeline
    if pair_time is not None:
        if timeline is None:
            raise ValueError(
                "pair_time needs a temporal sampler: HeteroNeighborSampler(..., node_time=... or edge_time=...)"
            )
        times = check_seed_time(pair_time, count, timeline.dtype, device, "pair_time")
    elif timeline is not None and timeline.edge_level:
        raise ValueError("pair_time is required: an edge-time sampler filters each tree by its pair's time")
    else:
        times = None
    key = sampler._next_key(key)
    xp = device.xp if device.is_cuda else np
    with device:
        pairs = xp.asarray(pairs)
        times = None if times is None else xp.asarray(times)
        eligible_of = None
        if times is not None:
            eligible_of = lambda negative_pair: timeline.negative_times(  # noqa: E731
                xp, times[negative_pair], bounds, src_type, dst_type
            )
        space = (bounds[0], bounds[1], int(graph.row_base[r]))
        src, dst, extra, stayed, pair_of = draw_link_negatives(
            driver, xp, pairs, negatives, num_negatives, strict, key, sampler.disjoint, eligible_of, space
        )
        num_pairs = int(src.shape[0])
        seeds = [xp.empty(0, np.int64) for _ in graph.node_types]
        s_index, d_index = graph.node_types.index(src_type), graph.node_types.index(dst_type)
        targets = dst if extra is None else xp.concatenate((dst, extra))
        if sampler.disjoint:  # every endpoint a tree of its own
            if src_type == dst_type:
                seeds[s_index] = xp.concatenate((src, targets))
                local = xp.arange(seeds[s_index].shape[0], dtype=np.int64)
                local_src, local_dst = local[:num_pairs], local[num_pairs:]
            else:
                seeds[s_index], seeds[d_index] = src, targets
                local_src = xp.arange(num_pairs, dtype=np.int64)
                local_dst = xp.arange(targets.shape[0], dtype=np.int64)
        elif src_type == dst_type:
            seeds[s_index], local = first_appearance(xp, xp.concatenate((src, targets)))
            local_src, local_dst = local[:num_pairs], local[num_pairs:]
        else:
            seeds[s_index], local_src = first_appearance(xp, src)
            seeds[d_index], local_dst = first_appearance(xp, targets)
        pair_index = xp.stack((local_src, local_dst[:num_pairs]))
        negative_targets = link_negative_targets(
            None if extra is None else local_dst[num_pairs:], count, num_negatives, sampler.disjoint
        )
        options = None
        if exclude is not None and count:
            options = _exclusions(graph, driver, xp, pairs, r, reverse)
        tree_time = None
        if sampler.disjoint and timeline is not None:
            if times is None:
                tree_time = sampler._tree_times(seeds, None, "pair_time")
            else:  # each tree the time of its pair, in the trees' order (node types in the graph's order)
                returned = pair_of[:num_pairs]
                target_pairs = returned if extra is None else xp.concatenate((returned, pair_of[num_pairs:]))
                of_type = {s_index: returned, d_index: target_pairs}
                if src_type == dst_type:
                    of_type = {s_index: xp.concatenate((returned, target_pairs))}
                tree_time = times[xp.concatenate([of_type[t] for t in sorted(of_type)])]
        n_id, adjs, counts_n, counts_e, batch = sampler._run(seeds, key, options, tree_time)
        out_labels, false_negatives = finish_links(xp, labels, count, num_pairs, extra, strict, stayed)
    return HeteroLinkSampleOutput(
        n_id, adjs, counts_n, counts_e, edge_type, pair_index, out_labels, negative_targets, false_negatives, batch
    )


def _exclusions(graph, driver, xp, pairs, r, reverse):
    """The driver's options with the positive pairs' edges excluded (``None`` if there are none):
    ``source -> target`` in relation ``r`` (row ``row_base[r] + target``), and with ``reverse``
    ``target -> source`` in that relation (row ``row_base[reverse] + source``)."""
    sources, rows = pairs[0], pairs[1] + int(graph.row_base[r])
    if reverse is not None:
        base = int(graph.row_base[graph.edge_types.index(reverse)])
        sources, rows = xp.concatenate((sources, pairs[1])), xp.concatenate((rows, pairs[0] + base))
    return exclusion_options(driver, xp, sources, rows)

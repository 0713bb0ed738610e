"""The host side of a typed hop, shared by the typed drivers (:mod:`.typed`, :mod:`.cuda_typed`):
the per-hop helpers of a :class:`~.records.HopPlan` (each relation's targets, RNG states, the
frontier under ``expand="new"``), the hop record (:class:`TypedHop`) and how a hop's new nodes
extend ``n_id``, a disjoint call's virtual seeds per type, and the CUDA hop's relation table
(:func:`relation_table`, :func:`after_sync`: the rows its kernels read). Host code: arrays of ``xp`` in,
arrays out; the kernels are in :mod:`.typed` and :mod:`.cuda_typed`.
"""

from __future__ import annotations

import numpy as np

from ..._rng import hop_state
from .records import Drawn, HopPlan, check_tree_count, from_virtual, to_virtual
from .rng import relation_states

__all__ = [
    "TypedHop",
    "plan_states",
    "hop_targets",
    "frontier",
    "shift_targets",
    "typed_work",
    "extend",
    "record_hop",
    "virtual_seeds",
    "split_types",
    "relation_table",
    "after_sync",
]


# Rows of a hop's relation table (int64 (FIELDS, max(R, T) + 1)); per relation unless marked.
# Before the draws:
SEG = 0  # (R + 1) bounds of each relation's targets among the hop's targets
TGT = 1  # where relation r's first target sits in ``known``
DST_BASE = 2  # the typed base of r's target type
DST = 3  # position in its type's n_id of r's first target (its frontier's start)
ROW_BASE = 4  # r's first row in the stacked CSR
K = 5  # slots per target (the fanout, bounded by the longest row without replacement)
SRC_BASE = 6  # the typed base of r's source type
SRC_COUNT = 7  # nodes of r's source type (the bound of its ids in ``indices``)
EDGE_BASE = 8  # r's first edge in the stacked CSR
SLOT = 9  # (R + 1) bounds of each relation's slots (bounded hops)
STATE = 10  # r's RNG state at this hop (uint64 bits)
# After the hop's sync:
BLOCK = 11  # (R + 1) bounds of each relation's slots (packed hops: its edge offsets)
EDGE_OFF = 12  # (R + 1) bounds of each relation's edges
NEW_SHIFT = 13  # a new node's rank within its type: ranks[slot] + NEW_SHIFT[r]
GROUP = 14  # where r's source type's new nodes start among the hop's new nodes
SRC_LEN = 15  # nodes of r's source type in n_id before the hop
SRC_KNOWN = 16  # where r's source type starts in ``known``
SRC_NEXT = 17  # where r's source type's new nodes start in the next ``known``
KNOWN_T = 18  # (T + 1) per type: where each type starts in ``known``
SHIFT_T = 19  # (T) per type: new nodes of the types before it (its shift in the next ``known``)
FIELDS = 20


class TypedHop(tuple):
    """One typed hop as the drivers return it: ``(edges, e_id, edge_offsets, new_nodes, type_offsets)``.

    edges : int64 flat buffer; relation ``r``'s (2, E_r) block starts at ``2 * edge_offsets[r]``
    e_id : int64 (E,), relation-major; edge_offsets : int64 (R + 1,) (host)
    new_nodes : int64 (M,): the hop's new nodes (local ids) grouped by type, each type's in order
        of first appearance; type_offsets : int64 (num_types + 1,) (host) bounds the groups
    """

    __slots__ = ()


def plan_states(plan: HopPlan, seed: int, key: int, hop: int) -> np.ndarray:
    """uint64 (R,): every relation's RNG state at ``hop`` of batch ``key``
    (:func:`.rng.relation_state` of each relation, in one array operation)."""
    return relation_states(hop_state(seed, key, hop), plan.keys)


def hop_targets(plan: HopPlan, n_id: list, hop: int, xp=np):
    """``(targets, rel_of, segments)``: relation ``r``'s targets are ``n_id`` of its target type
    (none when its fanout at ``hop`` is 0), relation by relation; ``segments`` (host) bounds them."""
    dst_type = plan.dst_type.tolist()  # Python ints: a loop over 61 relations (WordNet) is per batch
    lengths = [0 if k == 0 else len(n_id[d]) for d, k in zip(dst_type, plan.fanouts[:, hop].tolist())]
    segments = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=segments[1:])
    parts = [n_id[d] for d, length in zip(dst_type, lengths) if length]
    targets = xp.concatenate(parts) if parts else xp.empty(0, np.int64)
    rel_of = xp.asarray(np.repeat(np.arange(len(lengths), dtype=np.int64), lengths))
    return targets, rel_of, segments


def frontier(n_id: list, starts) -> list:
    """Every type's nodes from ``starts[t]`` on (the last hop's new nodes, under PyG's rule)."""
    return [ids[start:] if start else ids for ids, start in zip(n_id, starts)]


def shift_targets(plan: HopPlan, edges, edge_offsets, starts) -> None:
    """Add ``starts[target type]`` to row 1 of each relation's (2, E_r) block of ``edges``
    (target positions within a frontier become positions in the whole ``n_id``)."""
    for r, t in enumerate(plan.dst_type):
        first, stop = int(edge_offsets[r]), int(edge_offsets[r + 1])
        if starts[t] and stop > first:
            edges[2 * first + (stop - first) : 2 * stop] += starts[t]


def typed_work(plan: HopPlan, segments: np.ndarray, hop: int) -> int:
    """Draws a hop makes, about (``-1`` counted as 16 per row), to pick the CPU thread count."""
    ks = plan.fanouts[:, hop]
    return int((np.diff(segments) * np.where(ks > 0, ks, 16)).sum())


def extend(n_id: list, new_nodes, type_offsets, xp=np) -> list:
    """Every type's ``n_id`` with its new nodes (``new_nodes`` grouped by type, bounded by the
    host array ``type_offsets``) appended."""
    return [
        xp.concatenate((ids, new_nodes[type_offsets[t] : type_offsets[t + 1]]))
        if type_offsets[t + 1] > type_offsets[t]
        else ids
        for t, ids in enumerate(n_id)
    ]


def virtual_seeds(xp, seeds: list, stride: int) -> tuple:
    """``(virtual, span)`` of a disjoint typed call: each type's seeds as virtual local ids
    (:func:`.records.to_virtual`, trees numbered over the types in order) and ``span``, trees
    times ``stride``, which keeps the types' virtual ids apart in one relabel table."""
    trees = sum(len(ids) for ids in seeds)
    check_tree_count(trees * len(seeds), stride)
    virtual, first = [], 0
    for ids in seeds:
        virtual.append(to_virtual(xp, xp.asarray(ids), stride, first))
        first += len(ids)
    return virtual, max(trees, 1) * stride


def split_types(n_id: list, hops: list, stride: int) -> Drawn:
    """The :class:`~.records.Drawn` of a disjoint typed call from its virtual ``n_id`` per type."""
    split = [from_virtual(ids, stride) for ids in n_id]
    return Drawn([ids for ids, _ in split], hops, [trees for _, trees in split])


def record_hop(plan, n_id, hops, starts, expand_new, segments, edges, e_id, offsets, grouped):
    """After a typed hop kernel: its record appended to ``hops``; returns ``(n_id, starts)`` with
    the hop's new nodes added (``expand_new``: the next hop expands only them)."""
    new_nodes, type_offsets = grouped
    if expand_new:
        shift_targets(plan, edges, offsets[segments], starts)
        starts = [len(ids) for ids in n_id]
    hops.append(TypedHop((edges, e_id, offsets[segments], new_nodes, type_offsets)))
    return extend(n_id, new_nodes, type_offsets), starts


def relation_table(plan, type_base, src_count, slot_limit, num_hops: int) -> np.ndarray:
    """int64 (hops, FIELDS, max(R, T) + 1): each hop's relation table with the rows that do not
    depend on a call filled (``ROW_BASE``, ``K``, ``SRC_BASE``, ``DST_BASE``, ``SRC_COUNT``,
    ``EDGE_BASE``); ``type_base`` (T + 1,) the typed base of each type, ``slot_limit`` the slots a
    bounded target needs at most (``None`` with replacement)."""
    num_relations, num_types = len(plan.src_type), len(type_base) - 1
    table = np.zeros((num_hops, FIELDS, max(num_relations, num_types) + 1), np.int64)
    for hop in range(num_hops):
        ks = plan.fanouts[:, hop]
        if slot_limit is not None:
            ks = np.where(ks < 0, ks, np.minimum(ks, slot_limit))
        rows = {ROW_BASE: plan.row_base, K: ks, SRC_BASE: type_base[plan.src_type], EDGE_BASE: plan.edge_base}
        rows.update({DST_BASE: type_base[plan.dst_type], SRC_COUNT: src_count[plan.src_type]})
        for field, values in rows.items():
            table[hop, field, :num_relations] = values
    return table


def after_sync(plan, table, ranks_before, known_start, lengths, padded: bool, edge_offsets) -> np.ndarray:
    """Fill the rows of ``table`` the compact kernel reads (host arithmetic on the hop's sizes);
    returns the new nodes per type. ``ranks_before[r]``: new nodes before relation r's slots."""
    num_relations, num_types = len(plan.src_type), len(lengths)
    src = plan.src_type
    new_per_relation = np.diff(ranks_before)
    new_counts = np.zeros(num_types, np.int64)
    np.add.at(new_counts, src, new_per_relation)
    type_offsets = np.concatenate(([0], np.cumsum(new_counts)))
    # new nodes of the same source type in the relations before r
    same = src[:, None] == np.arange(num_types)[None, :]
    earlier = (np.cumsum(same * new_per_relation[:, None], axis=0) - same * new_per_relation[:, None])[
        np.arange(num_relations), src
    ]
    table[BLOCK, : num_relations + 1] = table[SLOT, : num_relations + 1] if padded else edge_offsets
    table[EDGE_OFF, : num_relations + 1] = edge_offsets
    table[NEW_SHIFT, :num_relations] = earlier - ranks_before[:num_relations] - 1
    table[GROUP, :num_relations] = type_offsets[src]
    table[SRC_LEN, :num_relations] = lengths[src]
    table[SRC_KNOWN, :num_relations] = known_start[src]
    table[SRC_NEXT, :num_relations] = (known_start[:num_types] + type_offsets[:num_types] + lengths)[src]
    table[KNOWN_T, : num_types + 1] = known_start
    table[SHIFT_T, : num_types + 1] = type_offsets
    return new_counts

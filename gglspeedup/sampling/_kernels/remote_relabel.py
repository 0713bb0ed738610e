"""The trainer's side of a remote hop: route the targets to their owners, then relabel the answers.

A remote hop (:mod:`.remote`) sends each owner the distinct targets it owns, in one request, and
gets back each target's draws in the local kernels' row order (:mod:`.remote_rows`). These kernels
do the rest exactly as the local hop kernels do it:

- *dedup*: which targets repeat an earlier one (shared sampling: a duplicate seed, found through the
  relabel map; disjoint: the same node, at the same time, in another tree, found through a
  node map and a chain per node);
- *route*: the distinct targets counted and placed part by part, the parts in the order the groups
  list them (each group's request is one run), each part's targets in hop order;
- *gather*: each target's draws, in target order, from the owners' answers (each read where it
  arrived);
- *relabel*: :func:`.cpu.sample_hop`'s, :func:`.disjoint.sample_tree_hop`'s,
  :func:`.typed.sample_typed_hop`'s and :func:`.disjoint.sample_typed_tree_hop`'s serial passes,
  first appearance in the same order, so ``n_id``, ``edge_index`` and ``e_id`` are theirs.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..._intrinsics import prefetch
from ..._rng import draw, row_state
from .disjoint import _find, _grow
from .links import pick

__all__ = [
    "dedup_mapped",
    "dedup_chained",
    "route",
    "target_offsets",
    "gather_rows",
    "relabel_shared",
    "relabel_trees",
    "relabel_typed",
    "relabel_typed_trees",
    "negative_candidates",
]

_EMPTY = -1
_PREFETCH_DISTANCE = 16  # relabel map entries announced this many draws ahead (the local kernel's)


@njit(cache=True, nogil=True)
def dedup_mapped(flat, positions, local_map, epoch):
    """Shared sampling: ``dup[i]`` is ``-1`` when target ``i`` is its node's first occurrence in
    ``n_id`` (the node's map entry ``flat[i]`` holds its own position ``positions[i]``), else the
    index of the target at that first position: only seeds repeat, and the repeat comes later in
    the same run of targets, ``positions[i] - j`` targets after it."""
    dup = np.empty(flat.shape[0], np.int64)
    for i in range(flat.shape[0]):
        j = local_map[flat[i]] - epoch
        dup[i] = -1 if j == positions[i] else i - (positions[i] - j)
    return dup


@njit(cache=True, nogil=True)
def dedup_chained(flat, rel, times, seen, epoch):
    """Disjoint sampling: ``dup[i]`` is ``-1`` for the first target with its (node ``flat[i]``,
    relation, time), else the index of that first one. ``seen`` (a map over nodes, entries below
    ``epoch`` unseen) holds each node's first target; later ones with other relations or times
    hang off it in a chain."""
    n = flat.shape[0]
    dup = np.empty(n, np.int64)
    nxt = np.full(n, -1, np.int64)
    for i in range(n):
        head = seen[flat[i]] - epoch
        if head < 0:
            seen[flat[i]] = epoch + i
            dup[i] = -1
            continue
        j = head
        while True:
            if rel[j] == rel[i] and times[j] == times[i]:
                dup[i] = j
                break
            if nxt[j] < 0:
                nxt[j] = i
                dup[i] = -1
                break
            j = nxt[j]
    return dup


@njit(cache=True, nogil=True)
def route(flat, dup, rel, ids, owner, part_rank, num_parts, num_relations, wire):
    """Place the distinct targets part by part (``part_rank[owner[flat[i]]]``: the parts in the
    groups' order), each part's in hop order. Returns ``(slot, source, part_offsets, rel_counts,
    slot_ids)``: every target's slot (duplicates their first's), each slot's target, int64 (P + 1,)
    slot offsets by rank, int64 (P, R) targets per (rank, relation), and each slot's id
    ``ids[source[s]]`` in ``wire``'s dtype (a group's request sends its run of them as is)."""
    n = flat.shape[0]
    rank = np.empty(n, np.int64)
    part_offsets = np.zeros(num_parts + 1, np.int64)
    rel_counts = np.zeros((num_parts, num_relations), np.int64)
    for i in range(n):
        if i + _PREFETCH_DISTANCE < n:  # the owner reads are this loop's misses
            prefetch(owner, flat[i + _PREFETCH_DISTANCE])
        if dup[i] < 0:
            r = part_rank[owner[flat[i]]]
            rank[i] = r
            part_offsets[r + 1] += 1
            rel_counts[r, rel[i]] += 1
    for r in range(num_parts):
        part_offsets[r + 1] += part_offsets[r]
    cursor = part_offsets[:num_parts].copy()
    slot = np.empty(n, np.int64)
    source = np.empty(part_offsets[num_parts], np.int64)
    slot_ids = np.empty(part_offsets[num_parts], wire.dtype)
    for i in range(n):
        if dup[i] < 0:
            s = cursor[rank[i]]
            cursor[rank[i]] += 1
            slot[i] = s
            source[s] = i
            slot_ids[s] = ids[i]
        else:
            slot[i] = slot[dup[i]]
    return slot, source, part_offsets, rel_counts, slot_ids


@njit(cache=True, nogil=True)
def target_offsets(slot, counts):
    """int64 (n + 1,): where target ``i``'s draws (``counts[slot[i]]`` of them) start in target order."""
    n = slot.shape[0]
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + counts[slot[i]]
    return offsets


@njit(cache=True, nogil=True)
def gather_rows(slot, offsets, lo, counts, nbrs, e_ids, col, e_id, edge_index, first):
    """Copy one group's answer into target order: slots ``lo .. lo + len(counts)`` are its
    (``counts[s - lo]`` draws each, one after another in ``nbrs`` / ``e_ids``); target ``i`` with
    such a slot gets them at ``offsets[i]`` in ``col`` / ``e_id`` (int64). With ``first >= 0`` (a
    shared hop) the neighbours go to ``edge_index[0]`` instead (:func:`relabel_shared` relabels
    them there) and each draw's target ``first + i`` to ``edge_index[1]``. Each group's answer is
    read where it arrived (joining the answers first cost a copy of them).

    Serial on purpose: a parallel region here left the trainer's TBB worker spinning while the
    main thread then waited on the servers' next answers, about 1 ms of a core a batch taken from
    the servers on a shared node, for a copy one thread does at the same CPU cost (BENCHMARKS,
    "The trainer's gather on one thread")."""
    num_slots = counts.shape[0]
    starts = np.empty(num_slots + 1, np.int64)
    starts[0] = 0
    for s in range(num_slots):
        starts[s + 1] = starts[s] + counts[s]
    for i in range(slot.shape[0]):
        s = slot[i] - lo
        if s < 0 or s >= num_slots:
            continue
        src = starts[s] - offsets[i]
        if first >= 0:  # a shared hop: the neighbours go where their local ids will (relabelled in place)
            for q in range(offsets[i], offsets[i + 1]):
                edge_index[0, q] = nbrs[src + q]
                edge_index[1, q] = first + i
                e_id[q] = e_ids[src + q]
        else:
            for q in range(offsets[i], offsets[i + 1]):
                col[q] = nbrs[src + q]
                e_id[q] = e_ids[src + q]


@njit(cache=True, nogil=True)
def relabel_shared(n_id, local_map, epoch, edge_index):
    """:func:`.cpu.sample_hop`'s relabel, in place: ``edge_index[0]`` holds the drawn neighbours
    (:func:`gather_rows`), replaced by their local ids; returns ``n_id_next``. (Reading the
    answers here, without the gather's pass, makes this serial loop slower by more than that pass
    costs: measured 16%.)"""
    num_known = n_id.shape[0]
    num_edges = edge_index.shape[1]
    n_id_next = np.empty(num_known + num_edges, np.int64)
    n_id_next[:num_known] = n_id
    size = num_known
    for q in range(num_edges):
        if q + _PREFETCH_DISTANCE < num_edges:  # the map reads are this loop's misses
            prefetch(local_map, edge_index[0, q + _PREFETCH_DISTANCE])
        g = edge_index[0, q]
        v = local_map[g] - epoch
        if v < 0:
            v = size
            local_map[g] = epoch + size
            n_id_next[size] = g
            size += 1
        edge_index[0, q] = v
    return n_id_next[:size]


@njit(cache=True, nogil=True)
def relabel_trees(n_id, first, offsets, col, stride, keys, values):
    """:func:`.disjoint.sample_tree_hop`'s relabel over virtual ids (``col`` holds nodes; each
    becomes a virtual id of its target's tree): ``(n_id_next, edge_index, keys, values)``."""
    num_known = n_id.shape[0]
    num_edges = col.shape[0]
    edge_index = np.empty((2, num_edges), np.int64)
    for i in range(offsets.shape[0] - 1):
        base = (n_id[first + i] // stride) * stride
        for q in range(offsets[i], offsets[i + 1]):
            edge_index[1, q] = first + i
            col[q] += base
    keys, values = _grow(keys, values, num_known + num_edges)
    mask = keys.shape[0] - 1
    n_id_next = np.empty(num_known + num_edges, np.int64)
    n_id_next[:num_known] = n_id
    size = num_known
    for q in range(num_edges):
        key = col[q]
        slot = _find(keys, key, mask)
        if keys[slot] == _EMPTY:
            keys[slot] = key
            values[slot] = size
            n_id_next[size] = key
            size += 1
        edge_index[0, q] = values[slot]
    return n_id_next[:size], edge_index, keys, values


@njit(cache=True, nogil=True)
def _typed_edges(rel_of, segments, offsets):
    """The flat buffer of the per-relation (2, E_r) blocks with row 1 (each target's position
    within its relation's targets) filled, as :func:`.typed.sample_typed_hop` lays it out."""
    edges = np.empty(2 * offsets[offsets.shape[0] - 1], np.int64)
    for i in range(rel_of.shape[0]):
        r = rel_of[i]
        first = offsets[segments[r]]
        width = offsets[segments[r + 1]] - first
        for q in range(offsets[i], offsets[i + 1]):
            edges[2 * first + width + q - first] = i - segments[r]
    return edges


@njit(cache=True, nogil=True)
def _grouped(found, found_type, m, num_types):
    type_offsets = np.zeros(num_types + 1, np.int64)
    for j in range(m):
        type_offsets[found_type[j] + 1] += 1
    for t in range(num_types):
        type_offsets[t + 1] += type_offsets[t]
    fill = type_offsets[:num_types].copy()
    grouped = np.empty(m, np.int64)
    for j in range(m):  # stable: each type's new nodes keep their order of first appearance
        grouped[fill[found_type[j]]] = found[j]
        fill[found_type[j]] += 1
    return grouped, type_offsets


@njit(cache=True, nogil=True)
def relabel_typed(rel_of, segments, offsets, col, src_type, src_base, local_map, epoch, sizes):
    """:func:`.typed.sample_typed_hop`'s relabel (each source type's relations in order, then
    targets, then draws): ``(edges, (grouped, type_offsets))``; ``sizes`` is updated."""
    edges = _typed_edges(rel_of, segments, offsets)
    num_relations = src_type.shape[0]
    num_types = sizes.shape[0]
    found = np.empty(col.shape[0], np.int64)
    found_type = np.empty(col.shape[0], np.int64)
    m = 0
    for t in range(num_types):
        for r in range(num_relations):
            if src_type[r] != t:
                continue
            first, stop = offsets[segments[r]], offsets[segments[r + 1]]
            base = src_base[r]
            for q in range(first, stop):
                u = col[q]
                v = local_map[base + u] - epoch
                if v < 0:
                    v = sizes[t]
                    local_map[base + u] = epoch + v
                    sizes[t] += 1
                    found[m] = u
                    found_type[m] = t
                    m += 1
                edges[2 * first + q - first] = v
    return edges, _grouped(found, found_type, m, num_types)


@njit(cache=True, nogil=True)
def relabel_typed_trees(targets, rel_of, segments, offsets, col, src_type, stride, keys, values, sizes, span):
    """:func:`.disjoint.sample_typed_tree_hop`'s relabel (relations in order, then targets, then
    draws; key ``type * span + virtual id``): ``(edges, (grouped, type_offsets), keys, values)``."""
    edges = _typed_edges(rel_of, segments, offsets)
    num_edges = col.shape[0]
    keys, values = _grow(keys, values, sizes.sum() + num_edges)
    mask = keys.shape[0] - 1
    found = np.empty(num_edges, np.int64)
    found_type = np.empty(num_edges, np.int64)
    m = 0
    for r in range(src_type.shape[0]):
        first, stop = offsets[segments[r]], offsets[segments[r + 1]]
        t = src_type[r]
        for q in range(first, stop):
            target = targets[segments[r] + edges[2 * first + (stop - first) + q - first]]
            vlocal = (target // stride) * stride + col[q]
            key = t * span + vlocal
            slot = _find(keys, key, mask)
            if keys[slot] == _EMPTY:
                keys[slot] = key
                values[slot] = sizes[t]
                sizes[t] += 1
                found[m] = vlocal
                found_type[m] = t
                m += 1
            edges[2 * first + q - first] = values[slot]
    return edges, _grouped(found, found_type, m, sizes.shape[0]), keys, values


@njit(parallel=True, cache=True, nogil=True)
def negative_candidates(state, space, sources, fixed, width, eligible, pending, attempt, out_src, out_dst):
    """Attempt ``attempt`` of every negative ``j`` in ``pending``: the pair
    :func:`.links.draw_negative` tests at that attempt (its draws, keyed alike), written to
    ``out_src[j]`` / ``out_dst[j]``; a strict remote batch asks the targets' owners whether it is
    an edge and retries only those that are."""
    for a in prange(pending.shape[0]):
        j = pending[a]
        if fixed:
            position, slot, source = j // width, j % width, sources[j // width]
        else:
            position, slot, source = j, 0, 0
        row = row_state(state, position)
        d = attempt * width + slot
        if fixed:
            out_src[j] = source
            out_dst[j] = pick(draw(row, d), space[1], eligible, j, True)
        else:
            out_src[j] = pick(draw(row, 2 * d), space[0], eligible, j, False)
            out_dst[j] = pick(draw(row, 2 * d + 1), space[1], eligible, j, True)

"""Disjoint (per-seed) sampling on the CPU: every seed grows its own tree.

A node reached from two seeds appears twice, once per tree. Inside a call the ids in ``n_id`` are
*virtual*: ``tree * stride + node`` (``SampleOptions.stride``: the node count, or for a typed
graph the largest node-type count), so a tree's copy of a node is a node of its own. Rows split
them (:func:`.rows.split`), draw with the state of the *node* (never the tree: the union of the
trees draws what the shared sample draws) in the row's window (:func:`.rows.row_window`: a
temporal sampler's eligible prefix, at the tree's seed time), and the relabel enters each new
``(tree, node)`` pair in ``n_id`` in order of first appearance, as shared sampling does for
nodes. A pair can only repeat inside its tree, so the untyped hop deduplicates each tree on its
own, in a small table of that tree's entries (:func:`relabel_per_tree`; a dense map over all
trees' nodes would not fit, and one hash table over all virtual ids missed the cache per draw).
The typed hop keeps one open-addressing hash table over the virtual ids (:func:`new_table`), kept
across the hops of a call and grown as they add nodes.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import overload, register_jitable

from ..._intrinsics import prefetch
from ..._rng import mix64, row_state
from .blocks import block_rows, draw_buffers, prefix_sum, row_blocks
from .rows import row_finish, row_window, split, window_count, window_fill

__all__ = ["new_table", "relabel_per_tree", "sample_tree_hop", "sample_typed_tree_hop", "split_virtual"]

_ROW_PREFETCH = 8  # rows ahead whose window the count pass announces (their offsets twice as far)
_EMPTY = -1
_TREES_PER_CHUNK = 16  # trees deduplicated by one parallel iteration (one small table allocated)


@register_jitable
def _home(key, mask):
    return np.int64(mix64(np.uint64(key)) & np.uint64(mask))


@register_jitable
def _find(keys, key, mask):
    """The slot holding ``key``, or the empty slot where it goes (linear probing)."""
    slot = _home(key, mask)
    while keys[slot] != _EMPTY and keys[slot] != key:
        slot = (slot + 1) & mask
    return slot


@register_jitable
def _tree_slot(keys, key, mask):
    """:func:`_find` for a tree's own table: a Fibonacci hash (one multiply; its high bits) where
    the shared table's keys need :func:`mix64` (measured 10% off the per-tree relabel)."""
    slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask
    while keys[slot] != _EMPTY and keys[slot] != key:
        slot = (slot + 1) & mask
    return slot


@register_jitable
def _capacity(entries):
    capacity = 16
    while capacity < 2 * entries:
        capacity *= 2
    return capacity


@njit(cache=True, nogil=True)
def new_table(ids, offsets, entries):
    """``(keys, values)``: a table of ``entries`` or more slots-worth holding ``ids[i] + offsets[i]``
    -> the position of ``i`` within its group (``offsets`` constant per group; untyped: one group,
    offset 0; typed: each type's ids at its type offset, positions restarting per type)."""
    capacity = _capacity(max(entries, ids.shape[0]))
    keys = np.full(capacity, _EMPTY, np.int64)
    values = np.empty(capacity, np.int64)
    mask = capacity - 1
    position = 0
    for i in range(ids.shape[0]):
        if i > 0 and offsets[i] != offsets[i - 1]:
            position = 0
        key = ids[i] + offsets[i]
        slot = _find(keys, key, mask)
        keys[slot] = key
        values[slot] = position
        position += 1
    return keys, values


@njit(cache=True, nogil=True)
def _grow(keys, values, entries):
    """The table rebuilt with room for ``entries`` (when it has less than twice that)."""
    capacity = _capacity(entries)
    if keys.shape[0] >= capacity:
        return keys, values
    new_keys = np.full(capacity, _EMPTY, np.int64)
    new_values = np.empty(capacity, np.int64)
    mask = capacity - 1
    for s in range(keys.shape[0]):
        if keys[s] != _EMPTY:
            slot = _find(new_keys, keys[s], mask)
            new_keys[slot] = keys[s]
            new_values[slot] = values[s]
    return new_keys, new_values


def prefetch_window(graph, options, node):
    """Announce the cache lines row ``node``'s window search will read: a temporal sampler's
    binary search over the row's times (its middle and first quarter; ``graph.indptr[node]``
    must already be cached); nothing without times. CPU kernels only."""


@overload(prefetch_window)
def _overload_prefetch_window(graph, options, node):
    if not isinstance(options.types[options.fields.index("times")], types.Array):
        return lambda graph, options, node: None

    def announce(graph, options, node):
        start, end = graph.indptr[node], graph.indptr[node + 1]
        prefetch(options.times, (start + end) >> 1)
        prefetch(options.times, start + ((end - start) >> 2))

    return announce


@njit(parallel=True, cache=True, nogil=True)
def sample_tree_hop(graph, options, n_id, k, hop_state_, first):
    """One disjoint hop for the targets ``n_id[first:]`` (virtual ids, ``options.stride > 0``;
    each ``(tree, node)`` at most once in ``n_id``, the seeds' trees numbered ``0, 1, ...``).

    Returns ``(n_id_next, edge_index, e_id, corrupt)`` as :func:`.cpu.sample_hop` (positions in
    ``n_id_next``, relabelled by :func:`relabel_per_tree`); ``corrupt``: a neighbour id outside
    ``[0, num_nodes)`` was met (the output is then meaningless).
    """
    stride = options.stride
    indptr = graph.indptr
    num_nodes = np.uint64(indptr.shape[0] - 1)
    corrupt = np.zeros(1, np.uint8)
    num_known = n_id.shape[0]
    num_targets = num_known - first
    offsets = np.empty(num_targets + 1, np.int64)
    ends = np.empty(num_targets, np.int64)
    nodes = np.empty(num_targets, np.int64)  # each target split once (a division) for every pass
    trees = np.empty(num_targets, np.int64)
    for i in prange(num_targets):
        nodes[i], trees[i] = split(options, n_id[first + i])
    offsets[0] = 0
    for i in prange(num_targets):
        # Random rows: announce a later row's offsets, and the times of a nearer one (whose
        # offsets were announced before), so several rows' misses are in flight at once
        if i + 2 * _ROW_PREFETCH < num_targets:
            prefetch(indptr, nodes[i + 2 * _ROW_PREFETCH])
        if i + _ROW_PREFETCH < num_targets:
            prefetch_window(graph, options, nodes[i + _ROW_PREFETCH])
        node, tree = nodes[i], trees[i]
        start, end = row_window(graph, options, node, tree)
        ends[i] = end
        offsets[i + 1] = window_count(graph, options, node, start, end, k)
    num_edges = prefix_sum(offsets, num_targets)

    edge_index = np.empty((2, num_edges), np.int64)
    e_id, col = draw_buffers(num_edges)
    for block in prange(row_blocks(num_targets)):
        lo, hi = block_rows(block, num_targets)
        for i in range(lo, hi):
            if i + _ROW_PREFETCH < hi:
                prefetch(indptr, nodes[i + _ROW_PREFETCH])
            node = nodes[i]
            start = offsets[i]
            count = offsets[i + 1] - start
            state = row_state(hop_state_, node)
            window_fill(graph, options, node, indptr[node], ends[i], k, state, count, e_id, start)
            for q in range(start, start + count):
                edge_index[1, q] = first + i
        row_finish(graph, options, e_id, col, offsets[lo], offsets[hi])
        for q in range(offsets[lo], offsets[hi]):
            if np.uint64(col[q]) >= num_nodes:  # a corrupt graph: the id would name no row
                corrupt[0] = 1

    n_id_next, size = relabel_per_tree(n_id, first, offsets, col, stride, edge_index)
    return n_id_next[:size], edge_index, e_id, corrupt[0] != 0


@njit(parallel=True, cache=True, nogil=True)
def split_virtual(n_id, stride):
    """``(nodes, trees)`` of the virtual ids ``n_id`` (int64, exactly :func:`.records.from_virtual`'s),
    in parallel and without a division per id: the quotient is estimated in float64, then
    corrected until ``0 <= node < stride`` (quotients of 2**50 or more are divided); NumPy's
    int64 division over a batch's ids cost 4% of a temporal batch. Ids must be virtual ids
    whose ``(tree + 1) * stride`` fits int64 (:func:`.records.to_virtual`'s)."""
    nodes = np.empty(n_id.shape[0], np.int64)
    trees = np.empty(n_id.shape[0], np.int64)
    inverse = 1.0 / np.float64(stride)
    for i in prange(n_id.shape[0]):
        estimate = np.float64(n_id[i]) * inverse  # within one of the quotient below 2**50
        tree = np.int64(estimate) if estimate < 2.0**50 else n_id[i] // stride
        node = n_id[i] - tree * stride
        while node < 0:
            tree -= 1
            node += stride
        while node >= stride:
            tree += 1
            node -= stride
        trees[i] = tree
        nodes[i] = node
    return nodes, trees


@njit(parallel=True, cache=True, nogil=True)
def relabel_per_tree(n_id, first, offsets, col, stride, edge_index):
    """Relabel a disjoint hop's draws: ``(n_id_next, size)``, ``n_id`` then each new ``(tree,
    node)`` pair in order of first appearance in ``col`` (``n_id_next[:size]``), and
    ``edge_index[0]`` set to each draw's position in it.

    ``n_id``: the known virtual ids (every ``(tree, node)`` at most once); target ``i`` is
    ``n_id[first + i]`` and drew ``col[offsets[i] : offsets[i + 1]]`` (node ids of its tree,
    overwritten here with their virtual ids). A pair can only repeat inside its tree, so each
    tree is deduplicated on its own (trees in parallel) in a table of its own entries, a few
    hundred slots that stay in L1, where one table over every tree's virtual ids missed the cache
    once per draw; a serial pass then numbers the new pairs in draw order, so ``n_id`` and every
    position are those of one table filled draw by draw.
    """
    num_known = n_id.shape[0]
    num_edges = col.shape[0]
    known_tree = np.empty(num_known, np.int64)
    for p in prange(num_known):
        known_tree[p] = n_id[p] // stride
    num_trees = 0
    for p in range(num_known):
        num_trees = max(num_trees, known_tree[p] + 1)
    # Each tree's known positions, ascending (a counting sort), and its entries (known + drawn)
    start = np.zeros(num_trees + 1, np.int64)
    entries = np.zeros(num_trees, np.int64)
    for p in range(num_known):
        start[known_tree[p] + 1] += 1
        if p >= first:
            entries[known_tree[p]] += offsets[p - first + 1] - offsets[p - first]
    prefix_sum(start, num_trees)
    members = np.empty(num_known, np.int64)
    fill = start[:num_trees].copy()
    for p in range(num_known):
        members[fill[known_tree[p]]] = p
        fill[known_tree[p]] += 1

    # ref[q]: the position of draw q's pair in n_id, or -(q' + 1) for the draw q' that met it first
    ref = np.empty(num_edges, np.int64)
    num_chunks = (num_trees + _TREES_PER_CHUNK - 1) // _TREES_PER_CHUNK
    for chunk in prange(num_chunks):
        lo = chunk * _TREES_PER_CHUNK
        hi = min(lo + _TREES_PER_CHUNK, num_trees)
        largest = 0
        for t in range(lo, hi):
            largest = max(largest, start[t + 1] - start[t] + entries[t])
        keys = np.empty(_capacity(largest), np.int64)
        values = np.empty(keys.shape[0], np.int64)
        for t in range(lo, hi):
            mask = _capacity(start[t + 1] - start[t] + entries[t]) - 1
            keys[: mask + 1] = _EMPTY
            base = t * stride
            for j in range(start[t], start[t + 1]):
                p = members[j]
                slot = _tree_slot(keys, n_id[p] - base, mask)
                keys[slot] = n_id[p] - base
                values[slot] = p
            for j in range(start[t], start[t + 1]):  # the tree's targets in order: its draws in order
                i = members[j] - first
                if i < 0:
                    continue
                for q in range(offsets[i], offsets[i + 1]):
                    node = col[q]
                    slot = _tree_slot(keys, node, mask)
                    if keys[slot] == _EMPTY:
                        keys[slot] = node
                        values[slot] = -(q + 1)
                    ref[q] = values[slot]
                    col[q] = node + base

    n_id_next = np.empty(num_known + num_edges, np.int64)
    n_id_next[:num_known] = n_id
    size = num_known
    for q in range(num_edges):  # a pair's first draw comes before its repeats: resolved by then
        position = ref[q]
        if position == -(q + 1):
            position = size
            n_id_next[size] = col[q]
            size += 1
        elif position < 0:
            position = ref[-position - 1]
        ref[q] = position
        edge_index[0, q] = position
    return n_id_next, size


@njit(parallel=True, cache=True, nogil=True)
def sample_typed_tree_hop(
    graph,
    options,
    targets,
    rel_of,
    segments,
    row_base,
    ks,
    states,
    src_type,
    edge_base,
    keys,
    values,
    sizes,
    span,
    src_count,
):
    """One disjoint typed hop (the layout of :func:`.typed.sample_typed_hop`): target ``i`` is the
    virtual local id ``targets[i]`` (``tree * stride + node``) of relation ``rel_of[i]``.

    The relabel table maps ``type * span + virtual local id`` to the position in that type's
    ``n_id`` (``span``: trees times stride); ``sizes`` (per-type ``n_id`` lengths) is updated.
    ``src_count[r]`` bounds relation ``r``'s source ids. Returns ``(edges, e_id, offsets,
    (grouped, type_offsets), keys, values, corrupt)``: as the typed hop, the new nodes (virtual
    local ids) grouped by type, then the (maybe grown) table, and whether a source id read from
    ``graph.indices`` lay outside its type (a corrupt graph: the output is then meaningless).
    """
    stride = options.stride
    num_targets = targets.shape[0]
    num_relations = row_base.shape[0]
    offsets = np.empty(num_targets + 1, np.int64)
    ends = np.empty(num_targets, np.int64)
    offsets[0] = 0
    for i in prange(num_targets):
        r = rel_of[i]
        node, tree = split(options, targets[i])
        start, end = row_window(graph, options, row_base[r] + node, tree)
        ends[i] = end
        offsets[i + 1] = window_count(graph, options, row_base[r] + node, start, end, ks[r])
    num_edges = prefix_sum(offsets, num_targets)

    edges = np.empty(2 * num_edges, np.int64)
    e_id, col = draw_buffers(num_edges)
    for block in prange(row_blocks(num_targets)):
        lo, hi = block_rows(block, num_targets)
        for i in range(lo, hi):
            r = rel_of[i]
            node, tree = split(options, targets[i])
            row = row_base[r] + node
            start = offsets[i]
            count = offsets[i + 1] - start
            window_fill(
                graph, options, row, graph.indptr[row], ends[i], ks[r], row_state(states[r], node), count, e_id, start
            )
            first = offsets[segments[r]]
            width = offsets[segments[r + 1]] - first
            for q in range(start, start + count):  # row 1 of relation r's (2, E_r) block
                edges[2 * first + width + q - first] = i - segments[r]
        row_finish(graph, options, e_id, col, offsets[lo], offsets[hi])

    keys, values = _grow(keys, values, sizes.sum() + num_edges)
    mask = keys.shape[0] - 1
    found = np.empty(num_edges, np.int64)
    found_type = np.empty(num_edges, np.int64)
    m = 0
    corrupt = False
    for r in range(num_relations):  # relations in order, then targets, then draws (first appearance)
        first, stop = offsets[segments[r]], offsets[segments[r + 1]]
        t = src_type[r]
        for q in range(first, stop):
            if np.uint64(col[q]) >= np.uint64(src_count[r]):  # a corrupt graph: the id names no node of t
                corrupt = True
                break
            target = targets[segments[r] + edges[2 * first + (stop - first) + q - first]]
            vlocal = (target // stride) * stride + col[q]  # the target's tree, the neighbour
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
            if not options.has_edge_ids:
                e_id[q] -= edge_base[r]
    num_types = sizes.shape[0]
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
    return edges, e_id, offsets, (grouped, type_offsets), keys, values, corrupt

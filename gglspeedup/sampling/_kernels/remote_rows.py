"""The owner's side of a remote hop: draw rows a partition holds, with a local sampler's bodies.

A partition server holds the CSR rows of the nodes it owns (neighbour and edge ids global). It
draws target ``i`` (type-local node ``ids[i]`` of relation ``rel``) from its own CSR row
``row_base[rel] + local[type_base[rel] + ids[i]]`` (``local``: the partition book's node -> row
array, read in the kernel, so no id array is widened or copied on the way) with the RNG state of
the *global* node (:func:`.rng.row_state` of the relation's state and ``ids[i]``), through the row
bodies every local hop uses (:func:`.rows.row_window`, :func:`.rows.window_count`,
:func:`.rows.window_fill`), so a row yields exactly the positions a local sampler draws for that
node, shifted to the partition's CSR. A row's window is the whole row, or with times the prefix
at or before target ``i``'s time (``options.seed_time[i]``). The drawn positions become neighbour
and edge ids at the partition's widths (what goes on the wire). There is no relabel here: the
trainer does it (:mod:`.remote_relabel`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..._intrinsics import prefetch
from ..._rng import row_state
from .blocks import block_rows, row_blocks
from .exclusion import row_flagged
from .links import is_edge
from .rows import row_window, window_count, window_fill

__all__ = ["draw_owned_rows", "owned_edges"]

# Rows ahead whose offsets are prefetched: in the count loop (measured best of 8 / 16 / none) and
# in the fill loop (the local kernel's distance); together 5-7% off a hop's draw.
_COUNT_PREFETCH = 16
_ROW_PREFETCH = 4


@njit(parallel=True, cache=True, nogil=True)
def draw_owned_rows(graph, options, plain, book, part, ids, rel_counts, ks, states, counts, nbrs_out, e_out):
    """Draw every target of partition ``part``'s share of a hop.

    ``book`` is ``(owner, local, type_base, type_size, row_base)``: the partition book's owner
    and node -> row arrays over the flat id space, and per relation its target type's first flat
    id and node count and its first row in this partition's CSR. ``ids`` (n,) are type-local node
    ids (the wire's int32 or int64), relation by relation (``rel_counts[r]`` targets of relation
    ``r``); ``ks`` / ``states`` per relation. ``counts`` (n,) is written with each target's number
    of draws (its dtype must hold them: the wire's).

    Returns ``(nbrs, e_id, bad)``: per drawn edge the neighbour (``graph.indices``' dtype) and the
    edge id (``graph.edge_ids``' dtype), target by target, each row's draws in the local kernels'
    order; ``bad`` is ``-1``, or the first target whose id is out of range or not owned by
    ``part`` (then nothing is drawn). ``plain`` is ``options`` without exclusions: rows no
    excluded edge can be in draw through it (:func:`.cpu.sample_hop`'s split). ``nbrs_out`` /
    ``e_out`` (the outputs' dtypes) receive the draws when they hold them all (the returned
    arrays are then their leading parts: the server's answer memory); else fresh arrays do.
    """
    owner, local, type_base, type_size, row_base = book
    n = ids.shape[0]
    num_relations = rel_counts.shape[0]
    rel = np.zeros(n, np.int64)
    if num_relations > 1:
        i = 0
        for r in range(num_relations):
            for _ in range(rel_counts[r]):
                rel[i] = r
                i += 1
    indptr = graph.indptr
    rows = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    blocks = row_blocks(n)
    bad = np.full(blocks, n, np.int64)
    for block in prange(blocks):
        lo, hi = block_rows(block, n)
        # The block's rows first, in a loop of independent loads (the book's entries are misses;
        # read inside the count loop, each would wait on the last: measured 20% slower).
        for i in range(lo, hi):
            r = rel[i]
            node = np.int64(ids[i])
            flat = type_base[r] + node
            if node < 0 or node >= type_size[r] or owner[flat] != part:
                rows[i] = -1
                bad[block] = min(bad[block], i)
            else:
                rows[i] = row_base[r] + np.int64(local[flat])
        for i in range(lo, hi):
            if i + _COUNT_PREFETCH < hi and rows[i + _COUNT_PREFETCH] >= 0:  # each row's offsets: a miss
                prefetch(indptr, rows[i + _COUNT_PREFETCH])
            row = rows[i]
            if row < 0:
                offsets[i + 1] = 0
                ends[i] = 0
                continue
            start, end = row_window(graph, options, row, i)
            ends[i] = end
            offsets[i + 1] = window_count(graph, options, row, start, end, ks[rel[i]])
    first_bad = bad.min() if blocks else n
    if first_bad < n:  # a request this partition cannot answer: nothing drawn
        return np.empty(0, graph.indices.dtype), np.empty(0, graph.edge_ids.dtype), first_bad
    for i in range(n):
        counts[i] = offsets[i + 1]
        offsets[i + 1] += offsets[i]
    num_edges = offsets[n]
    pos = np.empty(num_edges, np.int64)
    for block in prange(row_blocks(n)):
        lo, hi = block_rows(block, n)
        for i in range(lo, hi):
            if i + _ROW_PREFETCH < hi:  # the local kernel's prefetch of later rows' offsets
                prefetch(indptr, rows[i + _ROW_PREFETCH])
            row, r = rows[i], rel[i]
            start = offsets[i]
            count = offsets[i + 1] - start
            state = row_state(states[r], np.int64(ids[i]))
            if row_flagged(options, row):
                window_fill(graph, options, row, indptr[row], ends[i], ks[r], state, count, pos, start)
            else:
                window_fill(graph, plain, row, indptr[row], ends[i], ks[r], state, count, pos, start)
    # Positions to ids, at the partition's widths (what goes on the wire), in a pass of their own:
    # done per block inside the fill loop instead, the draw measured 15% slower.
    if nbrs_out.shape[0] >= num_edges and e_out.shape[0] >= num_edges:
        nbrs, e_id = nbrs_out[:num_edges], e_out[:num_edges]
    else:
        nbrs, e_id = np.empty(num_edges, graph.indices.dtype), np.empty(num_edges, graph.edge_ids.dtype)
    indices, edge_ids = graph.indices, graph.edge_ids
    for q in prange(num_edges):
        p = pos[q]
        nbrs[q] = indices[p]
        e_id[q] = edge_ids[p]
    return nbrs, e_id, np.int64(-1)


@njit(parallel=True, cache=True, nogil=True)
def owned_edges(graph, sources, rows):
    """uint8 (n,): whether ``sources[i]`` is an entry of row ``rows[i]`` (an edge into its node)."""
    found = np.empty(sources.shape[0], np.uint8)
    for i in prange(sources.shape[0]):
        found[i] = 1 if is_edge(graph, sources[i], rows[i]) else 0
    return found

"""The owner's side of a remote hop: draw rows a partition holds, with a local sampler's bodies.

A partition server holds the CSR rows of the nodes it owns (neighbour and edge ids global). It
draws row ``rows[i]`` of its own CSR with the RNG state of the *global* node ``nodes[i]``
(:func:`.rng.row_state` of relation ``rel[i]``'s state), through the row bodies every local hop
uses (:func:`.rows.row_window`, :func:`.rows.window_count`, :func:`.rows.window_fill`), so a row
yields exactly the positions a local sampler draws for that node, shifted to the partition's CSR.
A row's window is the whole row, or with times the prefix at or before target ``i``'s time
(``options.seed_time[i]``). There is no relabel here: the trainer does it
(:mod:`.remote_relabel`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .blocks import block_rows, prefix_sum, row_blocks
from .exclusion import row_flagged
from .links import is_edge
from .rng import row_state
from .rows import row_window, window_count, window_fill

__all__ = ["draw_owned_rows", "owned_edges"]


@njit(parallel=True, cache=True, nogil=True)
def draw_owned_rows(graph, options, plain, rows, nodes, rel, ks, states):
    """Draw target ``i``: row ``rows[i]`` of ``graph`` with fanout ``ks[rel[i]]`` and the state
    ``row_state(states[rel[i]], nodes[i])``.

    Returns ``(offsets, nbrs, e_id)``: int64 (n + 1,) per-target offsets, and per drawn edge the
    neighbour (``graph.indices``' dtype) and edge id (``graph.edge_ids``' dtype), target by target,
    each row's draws in the local kernels' order. ``plain`` is ``options`` without exclusions: rows
    no excluded edge can be in draw through it (:func:`.cpu.sample_hop`'s split).
    """
    n = rows.shape[0]
    indptr = graph.indptr
    offsets = np.empty(n + 1, np.int64)
    ends = np.empty(n, np.int64)
    offsets[0] = 0
    for i in prange(n):
        row = rows[i]
        start, end = row_window(graph, options, row, i)
        ends[i] = end
        offsets[i + 1] = window_count(graph, options, row, start, end, ks[rel[i]])
    num_edges = prefix_sum(offsets, n)
    pos = np.empty(num_edges, np.int64)
    for block in prange(row_blocks(n)):
        lo, hi = block_rows(block, n)
        for i in range(lo, hi):
            row = rows[i]
            start = offsets[i]
            count = offsets[i + 1] - start
            state = row_state(states[rel[i]], nodes[i])
            if row_flagged(options, row):
                window_fill(graph, options, row, indptr[row], ends[i], ks[rel[i]], state, count, pos, start)
            else:
                window_fill(graph, plain, row, indptr[row], ends[i], ks[rel[i]], state, count, pos, start)
    nbrs = np.empty(num_edges, graph.indices.dtype)
    e_id = np.empty(num_edges, graph.edge_ids.dtype)
    for q in prange(num_edges):  # positions to ids, at the partition's widths (what goes on the wire)
        p = pos[q]
        nbrs[q] = graph.indices[p]
        e_id[q] = graph.edge_ids[p]
    return offsets, nbrs, e_id


@njit(parallel=True, cache=True, nogil=True)
def owned_edges(graph, sources, rows):
    """uint8 (n,): whether ``sources[i]`` is an entry of row ``rows[i]`` (an edge into its node)."""
    found = np.empty(sources.shape[0], np.uint8)
    for i in prange(sources.shape[0]):
        found[i] = 1 if is_edge(graph, sources[i], rows[i]) else 0
    return found

"""Rows sorted by time, once per temporal sampler: the check, the stable per-row sort, the pairs (CPU).

A temporal sampler finds each row's eligible edges (time ``<=`` the seed time) by binary search,
which needs every row ascending in time. :func:`unsorted_row` finds the first row that is not;
:func:`row_time_order` gives the stable order that sorts every row (ties keep their row order),
rows in parallel. A time-sorted copy carries edge ids (the sort's permutation), so each draw
would read two random lines, its neighbour and its edge id: :func:`with_pairs` gives the CPU
driver both in one uint64 per position (:func:`.rows.row_finish`). All run once, at construction.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["unsorted_row", "row_time_order", "with_pairs"]

_NO_NODE = 0xFFFFFFFF  # a neighbour id outside the graph (corrupt) packs as this: still flagged


@njit(parallel=True, cache=True, nogil=True)
def unsorted_row(indptr, times):
    """The smallest row whose times are not ascending, or -1 when every row is sorted."""
    num_rows = indptr.shape[0] - 1
    bad = np.full(num_rows, False)
    for v in prange(num_rows):
        for p in range(indptr[v] + 1, indptr[v + 1]):
            if times[p] < times[p - 1]:
                bad[v] = True
                break
    for v in range(num_rows):
        if bad[v]:
            return v
    return -1


@njit(parallel=True, cache=True, nogil=True)
def row_time_order(indptr, times):
    """``perm`` (int64, one per position): position ``p`` of the sorted graph holds the edge at
    position ``perm[p]`` of this one; each row sorted by ``times``, stably."""
    num_rows = indptr.shape[0] - 1
    perm = np.empty(times.shape[0], np.int64)
    for v in prange(num_rows):
        start, end = indptr[v], indptr[v + 1]
        if end - start == 1:
            perm[start] = start
        elif end > start:
            order = np.argsort(times[start:end], kind="mergesort")
            for j in range(end - start):
                perm[start + j] = start + order[j]
    return perm


def with_pairs(arrays, num_nodes: int, num_edges: int):
    """``arrays`` (a CPU :class:`~.records.GraphArrays` whose graph has edge ids) with ``edge_ids``
    replaced by uint64 pairs ``edge id << 32 | neighbour``, one per position, so a draw reads one
    random line instead of two (the temporal hop kernels 1.09x, ``sample()`` 1.04-1.06x on the
    64M-edge benchmark graph, for 8 more bytes per edge); ``arrays`` unchanged where they do not
    fit: ``num_nodes >= 2**32 - 1``, an edge id outside ``[0, 2**32)``, no edges (``num_edges ==
    0``). A neighbour id outside ``[0, num_nodes)`` (a corrupt graph loaded unverified) packs as
    ``2**32 - 1``, which the kernels still refuse."""
    indices, edge_ids = arrays.indices, arrays.edge_ids
    if num_nodes >= _NO_NODE or num_edges == 0:
        return arrays
    pairs = np.empty(indices.shape[0], np.uint64)
    if not _pack_pairs(indices, edge_ids, num_nodes, pairs):
        return arrays
    return arrays._replace(edge_ids=pairs)


@njit(parallel=True, cache=True, nogil=True)
def _pack_pairs(indices, edge_ids, num_nodes, pairs):
    """Fill ``pairs``; False when an edge id does not fit in 32 bits (``pairs`` is then unused)."""
    unfit = 0
    for p in prange(indices.shape[0]):
        edge = edge_ids[p]
        if edge < 0 or edge > _NO_NODE:
            unfit += 1
        node = indices[p]
        if node < 0 or node >= num_nodes:
            node = _NO_NODE
        pairs[p] = (np.uint64(edge) << np.uint64(32)) | np.uint64(node)
    return unfit == 0

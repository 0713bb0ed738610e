"""The Numba kernels of :mod:`gglspeedup._reorder` (apart, so that building a small graph or
checking an order imports no Numba)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["bfs", "relabel_rows"]


@njit(cache=True, nogil=True)
def bfs(indptr, indices, starts):
    """Breadth-first order from each of ``starts`` in turn not reached yet, neighbours in row order."""
    n = starts.shape[0]
    order = np.empty(n, np.int64)
    seen = np.zeros(n, np.bool_)
    tail = 0
    for s in range(n):
        root = starts[s]
        if seen[root]:
            continue
        seen[root] = True
        head = tail
        order[tail] = root
        tail += 1
        while head < tail:
            v = order[head]
            head += 1
            for p in range(indptr[v], indptr[v + 1]):
                u = indices[p]
                if not seen[u]:
                    seen[u] = True
                    order[tail] = u
                    tail += 1
    return order


def relabel_rows(indptr: np.ndarray, indices: np.ndarray, order: np.ndarray, rank: np.ndarray, width):
    """``(indptr, indices)`` of the graph with new row ``i`` = old row ``order[i]`` and every
    entry ``u`` written as ``rank[u]`` (rows keep their order), ``indices`` of dtype ``width``."""
    degree = np.diff(np.asarray(indptr))[order]
    new_indptr = np.zeros(order.shape[0] + 1, np.int64)
    np.cumsum(degree, out=new_indptr[1:])
    new_indices = np.empty(int(new_indptr[-1]), width)
    _relabel(np.asarray(indptr), np.asarray(indices), order, rank, new_indptr, new_indices)
    return new_indptr, new_indices


@njit(parallel=True, cache=True, nogil=True)
def _relabel(indptr, indices, order, rank, new_indptr, new_indices):
    for i in prange(order.shape[0]):
        v = order[i]
        q = new_indptr[i]
        for p in range(indptr[v], indptr[v + 1]):
            new_indices[q] = rank[indices[p]]
            q += 1

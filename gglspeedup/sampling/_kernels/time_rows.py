"""Rows sorted by time, once per temporal sampler: the check and the stable per-row sort (CPU).

A temporal sampler finds each row's eligible edges (time ``<=`` the seed time) by binary search,
which needs every row ascending in time. :func:`unsorted_row` finds the first row that is not;
:func:`row_time_order` gives the stable order that sorts every row (ties keep their row order),
rows in parallel. Both run once, at construction.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["unsorted_row", "row_time_order"]


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

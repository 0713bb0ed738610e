"""CSR construction kernels: a parallel, stable counting sort of an edge list by row.

:meth:`gglspeedup.CSRGraph.from_edge_index` and :func:`gglspeedup.datasets.build_csr` share them.
The edges are split into one contiguous block per thread; each thread counts its block's rows
(checking every id on the way), a prefix sum turns the per-block counts into per-block write
cursors (block ``t``'s edges of row ``v`` go after blocks ``0..t-1``'s), and each thread scatters
its block in order. Rows therefore keep the input order of their edges (the same CSR as a stable
``argsort``), in O(E + threads * N) time and O(threads * N) memory beyond input and output.

On the 64M-edge benchmark graph the stable ``argsort`` it replaces took 20 s on this machine's
2 cores; see BENCHMARKS.md (``bench build``) for this one. Kernels here never validate arguments
beyond the id bounds they are asked to check (the callers do, and name the arguments).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ._intrinsics import prefetch
from ._threading import prefer_tbb

prefer_tbb()  # before any parallel launch: see gglspeedup._threading

__all__ = [
    "edge_index_arrays",
    "counting_sort",
    "permuted_rows",
    "count_rows",
    "cursors_from_counts",
    "scatter_rows",
    "blocks_for",
]

_PREFETCH_DISTANCE = 16  # scatter: edges ahead whose cursor is fetched early (random reads)
_SERIAL_EDGES = 1 << 16  # below this many edges one thread does it all


def blocks_for(num_edges: int) -> int:
    """How many blocks (threads) a sort of ``num_edges`` edges uses."""
    return 1 if num_edges < _SERIAL_EDGES else max(1, numba.get_num_threads())


@njit(parallel=True, cache=True, nogil=True)
def count_rows(rows, cols, row_bound, col_bound, counts):
    """``counts[t, v]`` += edges of block ``t`` in row ``v``; returns the first edge whose row is
    outside ``[0, row_bound)`` or whose column is outside ``[0, col_bound)``, or -1.

    ``counts`` : int64 (blocks, num_rows), zeros; block ``t`` is edges ``t*E//T .. (t+1)*E//T``.
    """
    blocks = counts.shape[0]
    num_edges = rows.shape[0]
    bad = np.full(blocks, -1, np.int64)
    for t in prange(blocks):
        lo = t * num_edges // blocks
        hi = (t + 1) * num_edges // blocks
        mine = counts[t]
        for e in range(lo, hi):
            r = rows[e]
            c = cols[e]
            if r < 0 or r >= row_bound or c < 0 or c >= col_bound:
                bad[t] = e
                break
            mine[r] += 1
    for t in range(blocks):  # blocks are in edge order: the first block with a bad edge has the first one
        if bad[t] >= 0:
            return bad[t]
    return -1


@njit(parallel=True, cache=True, nogil=True)
def cursors_from_counts(counts, indptr):
    """Fill ``indptr`` (int64, num_rows + 1) from the per-block ``counts`` and turn ``counts`` into
    each block's first write position per row, in place."""
    blocks, num_rows = counts.shape
    indptr[0] = 0
    for v in prange(num_rows):
        total = 0
        for t in range(blocks):
            total += counts[t, v]
        indptr[v + 1] = total
    for v in range(num_rows):
        indptr[v + 1] += indptr[v]
    for v in prange(num_rows):
        base = indptr[v]
        for t in range(blocks):
            count = counts[t, v]
            counts[t, v] = base
            base += count


@njit(parallel=True, cache=True, nogil=True)
def scatter_rows(rows, cols, cursors, indices, edge_ids, keep_ids, id_base, weights_in, weights_out, weighted):
    """Each block writes its edges at its cursors, in order: ``indices[p] = cols[e]`` and, when
    asked, ``edge_ids[p] = id_base + e`` and ``weights_out[p] = weights_in[e]``. Advances
    ``cursors``."""
    blocks = cursors.shape[0]
    num_edges = rows.shape[0]
    for t in prange(blocks):
        lo = t * num_edges // blocks
        hi = (t + 1) * num_edges // blocks
        mine = cursors[t]
        for e in range(lo, hi):
            if e + _PREFETCH_DISTANCE < hi:
                prefetch(mine, rows[e + _PREFETCH_DISTANCE])
            r = rows[e]
            p = mine[r]
            mine[r] = p + 1
            indices[p] = cols[e]
            if keep_ids:
                edge_ids[p] = id_base + e
            if weighted:
                weights_out[p] = weights_in[e]


def counting_sort(rows, cols, num_rows, num_cols, index_dtype, keep_edge_ids, weights=None):
    """Sort the edges ``(rows[e], cols[e])`` by row, stably: ``(indptr, indices, edge_ids, weights,
    first_bad)``.

    ``rows`` and ``cols`` are 1-D int32/int64 host arrays of equal length; ids are checked against
    ``[0, num_rows)`` and ``[0, num_cols)`` while counting: ``first_bad`` is the position of the
    first edge out of range (and the other outputs ``None``), or -1. ``indices`` has
    ``index_dtype``; ``edge_ids`` (the edge's position in the input, int32 when the edge count
    fits) is ``None`` unless ``keep_edge_ids``; ``weights`` are permuted alongside when given.
    """
    num_edges = rows.shape[0]
    blocks = blocks_for(num_edges)
    counts = np.zeros((blocks, num_rows), np.int64)
    first_bad = int(count_rows(rows, cols, np.int64(num_rows), np.int64(num_cols), counts))
    if first_bad >= 0:
        return None, None, None, None, first_bad
    indptr = np.empty(num_rows + 1, np.int64)
    cursors_from_counts(counts, indptr)
    indices = np.empty(num_edges, index_dtype)
    id_dtype = np.int32 if num_edges <= np.iinfo(np.int32).max else np.int64
    edge_ids = np.empty(num_edges if keep_edge_ids else 1, id_dtype)
    weighted = weights is not None
    weights_out = np.empty(num_edges, weights.dtype) if weighted else np.zeros(1, np.float32)
    scatter_rows(
        rows,
        cols,
        counts,
        indices,
        edge_ids,
        bool(keep_edge_ids),
        np.int64(0),
        weights if weighted else weights_out,
        weights_out,
        weighted,
    )
    return indptr, indices, (edge_ids if keep_edge_ids else None), (weights_out if weighted else None), -1


def permuted_rows(host, order):
    """``(indptr, positions)`` of ``host``'s rows taken in ``order``: ``positions[p]`` is the old CSR
    position of new position ``p`` (vectorised: one repeat and one arange)."""
    degree = host.degree()[order]
    indptr = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    starts = np.asarray(host.indptr)[order]
    positions = np.repeat(starts - indptr[:-1], degree) + np.arange(host.num_edges, dtype=np.int64)
    return indptr, positions


def edge_index_arrays(edge_index, num_nodes, direction, weights, num_src_nodes, keep_edge_ids, dtype) -> dict:
    """The checked arguments of :meth:`~gglspeedup.CSRGraph.from_edge_index` sorted into CSR
    arrays: the constructor's keyword arguments (``indptr``, ``indices``, ``edge_ids``,
    ``weights``, ``dtype``). Raises as that method documents."""
    from .graph import CSRGraph, as_count, as_index_array, check_weights, index_dtype
    from .validation import check_allocation, check_bool

    edge_index = as_index_array("edge_index", edge_index, ndim=2, dtype=None)
    if edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, num_edges], got {edge_index.shape}")
    if direction not in ("in", "out"):
        raise ValueError(f"direction must be 'in' or 'out', got {direction!r}")
    if num_src_nodes is not None and direction != "in":
        raise ValueError("num_src_nodes (a bipartite graph) needs direction='in'")
    keep_edge_ids = check_bool("keep_edge_ids", keep_edge_ids)
    rows, cols = (edge_index[1], edge_index[0]) if direction == "in" else (edge_index[0], edge_index[1])
    if num_nodes is None:
        num_nodes = int(edge_index.max(initial=-1) if num_src_nodes is None else rows.max(initial=-1)) + 1
    num_nodes = as_count("num_nodes", num_nodes)
    num_cols = num_nodes if num_src_nodes is None else as_count("num_src_nodes", num_src_nodes)
    width = index_dtype(num_cols, dtype)
    check_allocation("num_nodes", num_nodes, 8 * (1 + blocks_for(edge_index.shape[1])))
    if weights is not None:
        weights = CSRGraph._as_weights(weights)
        if len(weights) != edge_index.shape[1]:
            raise ValueError(f"weights must have one entry per edge ({edge_index.shape[1]}), got {len(weights)}")
        check_weights(weights)
    indptr, indices, edge_ids, weights, bad = counting_sort(
        rows, cols, num_nodes, num_cols, width, keep_edge_ids, weights
    )
    if bad >= 0:
        pair = edge_index[:, bad].tolist()
        if min(pair) < 0:
            raise ValueError(f"edge_index[:, {bad}] has a negative node id: {pair}")
        what = (
            f"num_nodes = {num_nodes}"
            if num_src_nodes is None
            else f"(num_src_nodes, num_nodes) = {num_cols, num_nodes}"
        )
        raise ValueError(f"edge_index[:, {bad}] = {pair} is out of range for {what}")
    return {"indptr": indptr, "indices": indices, "edge_ids": edge_ids, "weights": weights, "dtype": width}

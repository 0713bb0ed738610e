"""CSR construction kernels: a parallel, stable counting sort of an edge list by row.

:meth:`gglspeedup.CSRGraph.from_edge_index` and :func:`gglspeedup.datasets.build_csr` share them.
The edges are split into one contiguous block per thread; each thread counts its block's rows
(checking every row id on the way), a prefix sum turns the per-block counts into per-block write
cursors (block ``t``'s edges of row ``v`` go after blocks ``0..t-1``'s), and each thread scatters
its block in order (checking every column id: the scatter reads them anyway, so the count reads
only the rows). Counts and cursors are int32 while the edge count fits. Rows therefore keep the
input order of their edges (the same CSR as a stable ``argsort``), in O(E + threads * N) time and
O(threads * N) memory beyond input and output. With int32 outputs and no weights the scatter runs
in two passes instead (:func:`_two_pass`): edges into buckets of rows first, as packed words in the
outputs' own slots, then each bucket sorted within its cache-sized region; the one-pass scatter
wrote one or two random lines per edge into outputs larger than the cache (with edge ids: twice
the CPU time). The
kernels are in :mod:`gglspeedup._csr_kernels`; below 65,536 edges NumPy's stable ``argsort`` does
the same sort (so small graphs, Cora among them, load without importing Numba).

On the 64M-edge benchmark graph the stable ``argsort`` it replaces took 20 s on this machine's
2 cores; see BENCHMARKS.md (``bench build``) for this one. Kernels here never validate arguments
beyond the id bounds they are asked to check (the callers do, and name the arguments).
"""

from __future__ import annotations

import numpy as np

__all__ = ["edge_index_arrays", "counting_sort", "permuted_indptr", "permuted_rows", "blocks_for", "transpose_csr"]

_SMALL_EDGES = 1 << 16  # below this many edges NumPy sorts: no Numba import, no parallel launch
PART_EDGES = 1 << 21  # edges per call of a pass (0.05-0.4 s on two busy cores): Ctrl-C between calls
BUCKET_EDGES = 1 << 17  # two-pass sort: edges per bucket on average (1 MiB of words: a cache's share)
MAX_BUCKET_EDGES = 1 << 22  # ... and at most (the second pass copies a bucket: 32 MiB per thread)
MAX_BUCKETS = 1 << 14  # first pass: write streams per thread (without edge ids buckets may be small)


def blocks_for(num_edges: int) -> int:
    """How many blocks (threads) a sort of ``num_edges`` edges uses."""
    if num_edges < _SMALL_EDGES:
        return 1
    import numba

    from ._threading import prefer_tbb

    prefer_tbb()  # numba.get_num_threads() starts Numba's threading layer: TBB must be loadable first
    return max(1, numba.get_num_threads())


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
    if num_edges < _SMALL_EDGES:
        return _argsort(rows, cols, num_rows, num_cols, index_dtype, keep_edge_ids, weights)
    from ._csr_kernels import count_rows, cursors_from_counts, indptr_from_counts, scatter_rows
    from ._interrupt import interruptible

    blocks = blocks_for(num_edges)
    # Both passes run in parts of about PART_EDGES edges, Ctrl-C handled between them; leaving the
    # block raises KeyboardInterrupt after the arrays below are dropped.
    parts = -(-num_edges // PART_EDGES)
    with interruptible() as guard:
        # Counts, then write cursors, in int32 while every position fits: half the bytes of the
        # passes' random increments (the arrays are read and written at random, one per edge).
        counts = np.zeros((blocks, num_rows), _id_dtype(num_edges))
        for part in range(parts):
            if guard.stopping():
                break
            if int(count_rows(rows, None, np.int64(num_rows), np.int64(0), counts, part, parts)) >= 0:
                # the first bad edge of all (a column may be bad before this row): the serial check
                return None, None, None, None, _first_bad(rows, cols, num_rows, num_cols)
        indptr = np.empty(num_rows + 1, np.int64)
        if not guard.stopping():
            indptr_from_counts(counts, indptr)
        weighted = weights is not None
        shift = None if weighted else _bucket_shift(num_edges, num_rows, num_cols, index_dtype, keep_edge_ids)
        if shift is not None and not guard.stopping():
            done = _two_pass(rows, cols, num_rows, num_cols, counts, indptr, shift, keep_edge_ids, guard)
            if done is not None:
                return done
            shift = None  # a bucket too large for the second pass's copy: the one-pass scatter
        if not guard.stopping():
            cursors_from_counts(counts, indptr)
        indices = np.empty(num_edges, index_dtype)
        edge_ids = np.empty(num_edges if keep_edge_ids else 1, _id_dtype(num_edges))
        weights_out = np.empty(num_edges, weights.dtype) if weighted else np.zeros(1, np.float32)
        for array in (indices, edge_ids, weights_out):
            _touch(array, guard)
        for part in range(parts):
            if guard.stopping():
                break
            bad = scatter_rows(
                rows,
                cols,
                np.int64(num_cols),
                counts,
                indices,
                edge_ids,
                bool(keep_edge_ids),
                np.int64(0),
                weights if weighted else weights_out,
                weights_out,
                weighted,
                part,
                parts,
            )
            if bad >= 0:  # a column out of range (the rows were all checked by the count)
                return None, None, None, None, _first_bad(rows, cols, num_rows, num_cols)
        if guard.stopping():
            counts = indptr = indices = edge_ids = weights_out = None
            return None
    return indptr, indices, (edge_ids if keep_edge_ids else None), (weights_out if weighted else None), -1


def _bucket_shift(num_edges: int, num_rows: int, num_cols: int, index_dtype, ids: bool) -> int | None:
    """log2 of the rows per bucket of the two-pass sort (about BUCKET_EDGES edges each), or None
    where it does not apply: int64 indices or edge ids (the packed word uses the int32 outputs'
    slots), a word (edge id, row within bucket, column) wider than 64 bits, or without edge ids
    (one 32-bit slot: row within bucket and column) more than MAX_BUCKETS buckets."""
    if np.dtype(index_dtype) != np.int32 or _id_dtype(num_edges) != np.int32:
        return None
    shift = max(0, (BUCKET_EDGES * num_rows // num_edges).bit_length() - 1)
    col_bits = max(1, (num_cols - 1).bit_length())
    if not ids:
        shift = min(shift, 32 - col_bits)
        return shift if (num_rows - 1) >> shift < MAX_BUCKETS else None
    return shift if (num_edges - 1).bit_length() + shift + col_bits <= 64 else None


def _two_pass(rows, cols, num_rows, num_cols, counts, indptr, shift, ids, guard):
    """:func:`counting_sort`'s outputs (edge ids with ``ids``), by the two-pass sort of
    :mod:`gglspeedup._csr_kernels` (buckets of ``2**shift`` rows); None (``indptr`` filled,
    ``counts`` unchanged) where a bucket exceeds MAX_BUCKET_EDGES (its second-pass copy would
    cost more memory than the counts), and the interrupted / bad-column results as the caller's."""
    from ._csr_kernels import bucket_cursors, scatter_buckets, sort_buckets

    num_edges = rows.shape[0]
    cursors = bucket_cursors(counts, indptr, np.int64(shift))
    bounds = indptr[np.minimum(np.arange(cursors.shape[1] + 1, dtype=np.int64) << shift, num_rows)]
    if int(np.diff(bounds).max()) > MAX_BUCKET_EDGES:
        return None
    indices = np.empty(num_edges, np.int32)
    edge_ids = np.empty(num_edges if ids else 1, np.int32)
    for array in (indices, edge_ids):
        _touch(array, guard)
    low, high = indices.view(np.uint32), edge_ids.view(np.uint32)
    col_bits = max(1, (num_cols - 1).bit_length())
    parts = -(-num_edges // PART_EDGES)
    for part in range(parts):
        if guard.stopping():
            return None, None, None, None, -1  # the caller's block raises KeyboardInterrupt
        bad = scatter_buckets(
            rows,
            cols,
            np.int64(num_cols),
            cursors,
            np.int64(shift),
            np.int64(col_bits),
            low,
            high,
            bool(ids),
            part,
            parts,
        )
        if bad >= 0:  # a column out of range (the rows were all checked by the count)
            return None, None, None, None, _first_bad(rows, cols, num_rows, num_cols)
    buckets = cursors.shape[1]
    step = max(1, PART_EDGES * buckets // num_edges)  # about PART_EDGES edges per call
    for first in range(0, buckets, step):
        if guard.stopping():
            return None, None, None, None, -1
        sort_buckets(
            indptr,
            np.int64(shift),
            np.int64(col_bits),
            low,
            high,
            indices,
            edge_ids,
            bool(ids),
            first,
            min(buckets, first + step),
        )
    return indptr, indices, (edge_ids if ids else None), None, -1


def _touch(array: np.ndarray, guard) -> None:
    """Write ``array`` once, front to back, in pieces (Ctrl-C between them): its pages are faulted
    in here, sequentially, instead of by the scatter's first random writes, where they made the
    first part several times slower than the others (so Ctrl-C waited for it)."""
    step = max(1, (32 << 20) // array.itemsize)
    for start in range(0, array.shape[0], step):
        if guard.stopping():
            return
        array[start : start + step] = 0


def _first_bad(rows, cols, num_rows: int, num_cols: int) -> int:
    """Position of the first edge with an id out of range (error path only)."""
    bad = (rows < 0) | (rows >= num_rows) | (cols < 0) | (cols >= num_cols)
    return int(np.argmax(bad))


def _id_dtype(num_edges: int) -> np.dtype:
    return np.dtype(np.int32 if num_edges <= np.iinfo(np.int32).max else np.int64)


def _argsort(rows, cols, num_rows, num_cols, index_dtype, keep_edge_ids, weights):
    """:func:`counting_sort` for small inputs, in NumPy: the same outputs."""
    bad = (rows < 0) | (rows >= num_rows) | (cols < 0) | (cols >= num_cols)
    if bad.any():
        return None, None, None, None, int(np.argmax(bad))
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(num_rows + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=num_rows), out=indptr[1:])
    edge_ids = order.astype(_id_dtype(rows.shape[0])) if keep_edge_ids else None
    return indptr, cols[order].astype(index_dtype), edge_ids, None if weights is None else weights[order], -1


def transpose_csr(indptr, indices, num_cols: int):
    """``(out_indptr, rows, positions)``: the transposed CSR of the host arrays ``(indptr, indices)``
    over ``num_cols`` columns (:func:`~gglspeedup._csr_kernels.transpose_rows`): ``out_indptr`` in
    ``indptr``'s dtype, ``rows`` in ``indices``' (ascending within a column), ``positions`` (each
    entry's position in ``indices``) in ``indptr``'s. Ids are not checked (the caller's are)."""
    from ._csr_kernels import transpose_rows

    out_indptr = np.empty(num_cols + 1, indptr.dtype)
    rows = np.empty_like(indices)
    positions = np.empty(indices.shape[0], indptr.dtype)
    transpose_rows(indptr, indices, out_indptr, rows, positions)
    return out_indptr, rows, positions


def permuted_indptr(indptr: np.ndarray, order: np.ndarray) -> np.ndarray:
    """int64 ``indptr`` of the rows of ``indptr`` taken in ``order`` (new row ``i`` = old row
    ``order[i]``); O(N), so an out-of-core build can take it without the edges."""
    out = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(np.diff(indptr)[order], out=out[1:])
    return out


def permuted_rows(indptr: np.ndarray, order: np.ndarray):
    """``(new_indptr, positions)`` of the CSR rows of ``indptr`` taken in ``order``:
    ``positions[p]`` is the old CSR position of new position ``p`` (vectorised: one repeat and one
    arange)."""
    new_indptr = permuted_indptr(indptr, order)
    degree = np.diff(new_indptr)
    positions = np.repeat(indptr[order] - new_indptr[:-1], degree) + np.arange(new_indptr[-1], dtype=np.int64)
    return new_indptr, positions


def edge_index_arrays(edge_index, num_nodes, direction, weights, num_src_nodes, keep_edge_ids, dtype) -> dict:
    """The checked arguments of :meth:`~gglspeedup.CSRGraph.from_edge_index` sorted into CSR
    arrays: the constructor's keyword arguments (``indptr``, ``indices``, ``edge_ids``,
    ``weights``, ``dtype``). Raises as that method documents."""
    from .validation import as_count, check_allocation, check_bool, check_weights, index_dtype, int_array, weight_array

    edge_index = int_array("edge_index", edge_index, ndim=2, dtype=None)
    if edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, num_edges], got {edge_index.shape}")
    if not isinstance(direction, str) or direction not in ("in", "out"):  # an array would compare elementwise
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
        weights = weight_array(weights)
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

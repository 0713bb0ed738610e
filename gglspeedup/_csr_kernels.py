"""The CSR builders' Numba kernels: per-block row counts (with id checks), cursors, stable scatter,
and the transpose of a CSR.

See :mod:`gglspeedup._csr_build` for the algorithm; :func:`gglspeedup.datasets.build_csr` uses
:func:`count_rows` for its counting pass too. :func:`transpose_rows` is the counting sort of a CSR
by column (an attention graph's out-CSR: :meth:`gglspeedup.attention.AttentionGraph.transpose`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._intrinsics import prefetch
from ._threading import prefer_tbb

prefer_tbb()  # before any parallel launch: see gglspeedup._threading

__all__ = [
    "count_rows",
    "block_part",
    "indptr_from_counts",
    "cursors_from_counts",
    "scatter_rows",
    "bucket_cursors",
    "scatter_buckets",
    "sort_buckets",
    "transpose_rows",
    "sort_unique_rows",
    "compact_rows",
]

_PREFETCH_DISTANCE = 16  # scatter: edges ahead whose cursor is fetched early (random reads)


@njit(parallel=True, cache=True, nogil=True)
def count_rows(rows, cols, row_bound, col_bound, counts, part=0, parts=1):
    """``counts[t, v]`` += edges of block ``t`` in row ``v``; returns the first edge whose row is
    outside ``[0, row_bound)`` or whose column is outside ``[0, col_bound)``, or -1.

    ``counts`` : int64 (blocks, num_rows), zeros; block ``t`` is edges ``t*E//T .. (t+1)*E//T``.
    It may be int32 (half the cache footprint of its random increments) when no count can exceed
    2**31 - 1. ``cols=None`` reads only ``rows`` (Numba compiles that variant without the column
    branch): the in-memory sort checks the columns in its scatter, which reads them anyway, so its
    count pass reads half the bytes.
    ``part`` of ``parts``: count only that share of every block (:func:`block_part`), so a caller
    can split a long count into calls (and handle Ctrl-C between them); with ``parts > 1`` the
    edge returned is the first bad one of this part, not necessarily of all edges.
    """
    blocks = counts.shape[0]
    num_edges = rows.shape[0]
    bad = np.full(blocks, -1, np.int64)
    for t in prange(blocks):
        lo, hi = block_part(num_edges, blocks, t, part, parts)
        mine = counts[t]
        for e in range(lo, hi):
            r = rows[e]
            outside = r < 0 or r >= row_bound
            if cols is not None:
                c = cols[e]
                outside = outside or c < 0 or c >= col_bound
            if outside:
                bad[t] = e
                break
            mine[r] += 1
    for t in range(blocks):  # blocks are in edge order: the first block with a bad edge has the first one
        if bad[t] >= 0:
            return bad[t]
    return -1


@njit(cache=True, nogil=True, inline="always")
def block_part(num_edges, blocks, t, part, parts):
    """Edges ``[lo, hi)`` of share ``part`` (of ``parts``) of block ``t`` (of ``blocks``)."""
    lo = t * num_edges // blocks
    size = (t + 1) * num_edges // blocks - lo
    return lo + size * part // parts, lo + size * (part + 1) // parts


@njit(parallel=True, cache=True, nogil=True)
def indptr_from_counts(counts, indptr):
    """Fill ``indptr`` (int64, num_rows + 1) from the per-block ``counts`` (blocks, num_rows),
    which are left unchanged: the one-pass and the two-pass scatters both start from it."""
    blocks, num_rows = counts.shape
    indptr[0] = 0
    for v in prange(num_rows):
        total = 0
        for t in range(blocks):
            total += counts[t, v]
        indptr[v + 1] = total
    for v in range(num_rows):
        indptr[v + 1] += indptr[v]


@njit(parallel=True, cache=True, nogil=True)
def cursors_from_counts(counts, indptr):
    """Turn ``counts`` into each block's first write position per row, in place, given the
    ``indptr`` :func:`indptr_from_counts` filled from them (int32 ``counts`` need every position,
    up to the edge count, to fit in int32)."""
    blocks, num_rows = counts.shape
    for v in prange(num_rows):
        base = indptr[v]
        for t in range(blocks):
            count = counts[t, v]
            counts[t, v] = base
            base += count


@njit(parallel=True, cache=True, nogil=True)
def scatter_rows(
    rows,
    cols,
    col_bound,
    cursors,
    indices,
    edge_ids,
    keep_ids,
    id_base,
    weights_in,
    weights_out,
    weighted,
    part=0,
    parts=1,
):
    """Each block writes its edges at its cursors, in order: ``indices[p] = cols[e]`` and, when
    asked, ``edge_ids[p] = id_base + e`` and ``weights_out[p] = weights_in[e]``. Advances
    ``cursors`` (int32 or int64). ``part`` of ``parts``: only that share of every block (calls
    for parts ``0, 1, ...`` in order write what one call writes).

    Every row must be in range (counted by :func:`count_rows`); each column is checked against
    ``[0, col_bound)`` here: returns the first edge of this part with one outside, or -1 (a block
    stops at its first; the outputs are then incomplete and the caller drops them)."""
    blocks = cursors.shape[0]
    num_edges = rows.shape[0]
    bad = np.full(blocks, -1, np.int64)
    for t in prange(blocks):
        lo, hi = block_part(num_edges, blocks, t, part, parts)
        mine = cursors[t]
        for e in range(lo, hi):
            if e + _PREFETCH_DISTANCE < hi:
                prefetch(mine, rows[e + _PREFETCH_DISTANCE])
            r = rows[e]
            c = cols[e]
            if c < 0 or c >= col_bound:
                bad[t] = e
                break
            p = mine[r]
            mine[r] = p + 1
            indices[p] = c
            if keep_ids:
                edge_ids[p] = id_base + e
            if weighted:
                weights_out[p] = weights_in[e]
    for t in range(blocks):
        if bad[t] >= 0:
            return bad[t]
    return -1


# ---------------------------------------------------------------------------- two-pass sort
# With edge ids, the one-pass scatter writes two random lines per edge into outputs larger than
# the cache. The two-pass sort first scatters each edge into its *bucket* (2**shift consecutive
# rows: a few thousand write streams per thread, each written front to back), packed into the two
# int32 outputs' slots as one 64-bit word (edge id, row within the bucket, column), then sorts each
# bucket by row within its own region (the size of a cache). Blocks fill a bucket in block order
# and each block in edge order, so a bucket read front to back is in input order: the per-row
# cursors of the second pass keep rows stable, and the CSR is the one-pass sort's, edge ids too.


@njit(parallel=True, cache=True, nogil=True)
def bucket_cursors(counts, indptr, shift):
    """Each block's first position in each bucket of ``2**shift`` rows (int64, (blocks, buckets)),
    given the ``indptr`` :func:`indptr_from_counts` filled from the per-block ``counts`` (left
    unchanged): bucket ``b`` holds the rows ``b << shift ..``; inside it block ``t``'s edges go
    after blocks ``0..t-1``'s."""
    blocks, num_rows = counts.shape
    buckets = (num_rows + (1 << shift) - 1) >> shift
    cursors = np.empty((blocks, buckets), np.int64)
    for b in prange(buckets):
        first = b << shift
        stop = min(num_rows, first + (1 << shift))
        base = indptr[first]
        for t in range(blocks):
            cursors[t, b] = base
            for v in range(first, stop):
                base += counts[t, v]
    return cursors


@njit(parallel=True, cache=True, nogil=True)
def scatter_buckets(rows, cols, col_bound, cursors, shift, col_bits, low, high, ids, part=0, parts=1):
    """First pass: each block writes its edges at its bucket cursors, in order, as the word
    ``(e << (shift + col_bits)) | (row within bucket << col_bits) | column``, its low half in
    ``low[p]`` and its high half in ``high[p]`` (uint32 views of the outputs); without ``ids``
    only the low half (no edge id: the word must fit in 32 bits, ``high`` is not written).
    Advances ``cursors``; checks columns against ``[0, col_bound)`` and returns the first bad edge
    of this part, or -1, as :func:`scatter_rows`. The word must fit (the caller checks)."""
    blocks = cursors.shape[0]
    num_edges = rows.shape[0]
    bad = np.full(blocks, -1, np.int64)
    within = (1 << shift) - 1
    row_shift = np.uint64(col_bits)
    edge_shift = np.uint64(shift + col_bits)
    half = np.uint64(32)
    for t in prange(blocks):
        lo, hi = block_part(num_edges, blocks, t, part, parts)
        mine = cursors[t]
        for e in range(lo, hi):
            r = rows[e]
            c = cols[e]
            if c < 0 or c >= col_bound:
                bad[t] = e
                break
            b = r >> shift
            p = mine[b]
            mine[b] = p + 1
            word = (np.uint64(r & within) << row_shift) | np.uint64(c)
            if ids:
                word |= np.uint64(e) << edge_shift
            low[p] = np.uint32(word & np.uint64(0xFFFFFFFF))
            if ids:
                high[p] = np.uint32(word >> half)
    for t in range(blocks):
        if bad[t] >= 0:
            return bad[t]
    return -1


@njit(parallel=True, cache=True, nogil=True)
def sort_buckets(indptr, shift, col_bits, low, high, indices, edge_ids, ids, first, stop):
    """Second pass, buckets ``first .. stop - 1`` in parallel: each bucket's words (copied out of
    ``low`` / ``high``) go to their row's next position as ``indices[p]`` (column) and, with
    ``ids``, ``edge_ids[p]`` (edge id); ``low`` / ``high`` are views of ``indices`` / ``edge_ids``."""
    num_rows = indptr.shape[0] - 1
    within = np.uint64((1 << shift) - 1)
    col_mask = np.uint64((1 << col_bits) - 1)
    row_shift = np.uint64(col_bits)
    edge_shift = np.uint64(shift + col_bits)
    half = np.uint64(32)
    for b in prange(first, stop):
        row0 = b << shift
        row1 = min(num_rows, row0 + (1 << shift))
        lo, hi = indptr[row0], indptr[row1]
        if hi == lo:
            continue
        words_low = low[lo:hi].copy()
        words_high = high[lo:hi].copy() if ids else words_low
        cursor = indptr[row0:row1].copy()
        for j in range(hi - lo):
            word = np.uint64(words_low[j])
            if ids:
                word |= np.uint64(words_high[j]) << half
            r = np.int64((word >> row_shift) & within)
            p = cursor[r]
            cursor[r] = p + 1
            indices[p] = word & col_mask
            if ids:
                edge_ids[p] = word >> edge_shift


@njit(cache=True, nogil=True)
def transpose_rows(indptr, indices, out_indptr, rows, positions):
    """The transposed CSR of ``(indptr, indices)``, by one serial counting sort (``O(E + N)``):
    column ``x`` lists the rows that hold it, ascending, in ``rows[out_indptr[x]:out_indptr[x + 1]]``
    and their positions in ``indices`` in ``positions`` (the same arrays as a stable argsort of
    ``indices``). ``out_indptr`` has one entry per column plus one; ``rows`` and ``positions`` one
    per edge. (Serial on purpose: the edge-list sort above, whose rows would have to be
    materialised first, measured 1.3-2.5x slower here.)"""
    out_indptr[:] = 0
    for e in range(indices.shape[0]):
        out_indptr[indices[e] + 1] += 1
    for x in range(out_indptr.shape[0] - 1):
        out_indptr[x + 1] += out_indptr[x]
    cursor = out_indptr[:-1].copy()
    for y in range(indptr.shape[0] - 1):
        for e in range(indptr[y], indptr[y + 1]):
            x = indices[e]
            position = cursor[x]
            cursor[x] = position + 1
            rows[position] = y
            positions[position] = e


@njit(parallel=True, cache=True, nogil=True)
def sort_unique_rows(indptr, indices):
    """Sort every row of ``indices`` in place and move its distinct entries to its front; returns
    the number of distinct entries per row (int64). ``indptr`` may start above 0 (a bucket)."""
    num_rows = indptr.shape[0] - 1
    lengths = np.empty(num_rows, dtype=np.int64)
    for row in prange(num_rows):
        segment = indices[indptr[row] : indptr[row + 1]]
        segment.sort()
        kept = 0
        for j in range(segment.shape[0]):
            if j == 0 or segment[j] != segment[j - 1]:
                segment[kept] = segment[j]
                kept += 1
        lengths[row] = kept
    return lengths


@njit(parallel=True, cache=True, nogil=True)
def compact_rows(indptr, indices, compact_indptr):
    """The first ``compact_indptr[r + 1] - compact_indptr[r]`` entries of every row, packed (same dtype)."""
    out = np.empty(compact_indptr[-1] - compact_indptr[0], dtype=indices.dtype)
    base = compact_indptr[0]
    for row in prange(indptr.shape[0] - 1):
        start = compact_indptr[row] - base
        length = compact_indptr[row + 1] - compact_indptr[row]
        out[start : start + length] = indices[indptr[row] : indptr[row] + length]
    return out

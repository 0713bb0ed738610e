"""CPU driver of the pattern sampler: ``@njit(parallel=True)`` count and fill passes over the rows.

Also the host prologue both devices share: the per-sequence RNG states and global tokens (a few
per sequence, drawn here once and uploaded for a GPU build, so both devices read the same ones).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..._rng import draw, row_state, uniform_below
from ..._threading import prefer_tbb
from .pattern_rows import _DEBRUIJN_INDEX, bitmap_words, lower_bound, row_count, row_fill

__all__ = ["count_rows", "fill_rows", "draw_globals", "build"]

prefer_tbb()

_GLOBAL_ROW = np.int64(-1)  # row id of the global-token draws (never a query token)


@njit(parallel=True, cache=True, nogil=True)
def count_rows(lengths, seq_len, gptr, gids, layout, half, num_random, num_rows, counts):
    """``counts[r + 1] = row_count(r)`` for every row (``counts[0]`` is left for the scan)."""
    for r in prange(num_rows):
        counts[r + 1] = row_count(lengths, seq_len, gptr, gids, layout, half, num_random, r)


_ROWS_PER_BLOCK = 64
_PARALLEL_MIN_WORK = 1 << 16  # keys (about 64 a row) below which a build runs on one thread


@njit(parallel=True, cache=True, nogil=True)
def fill_rows(lengths, seq_len, gptr, gids, layout, half, num_random, mode, cdf, states, indptr, out, words, table):
    """Fill every row; blocks of rows share one key bitmap (cleared as each row is read off it)."""
    num_rows = indptr.shape[0] - 1
    for block in prange((num_rows + _ROWS_PER_BLOCK - 1) // _ROWS_PER_BLOCK):
        bitmap = np.zeros(words, np.uint64)
        for r in range(block * _ROWS_PER_BLOCK, min(num_rows, (block + 1) * _ROWS_PER_BLOCK)):
            row_fill(
                lengths,
                seq_len,
                gptr,
                gids,
                layout,
                half,
                num_random,
                mode,
                cdf,
                states,
                r,
                indptr[r],
                out,
                bitmap,
                table,
            )


@njit(cache=True, nogil=True)
def draw_globals(states, lengths, window, num_global, gptr, gids):
    """Sequence ``s``: ``min(num_global, lengths[s] - window)`` distinct tokens of
    ``[window, lengths[s])``, uniform (Floyd's algorithm), sorted, into ``gids[gptr[s]:]``."""
    for s in range(states.shape[0]):
        population = lengths[s] - window
        count = gptr[s + 1] - gptr[s]
        base = gptr[s]
        state = row_state(states[s], _GLOBAL_ROW)
        taken = 0
        for j in range(population - count, population):
            t = uniform_below(draw(state, j), j + 1)
            p = lower_bound(gids, base, base + taken, t)
            if p < base + taken and gids[p] == t:
                t = j  # j is larger than every key taken so far: it goes last
                p = base + taken
            k = base + taken
            while k > p:
                gids[k] = gids[k - 1]
                k -= 1
            gids[p] = t
            taken += 1
        for k in range(base, base + count):
            gids[k] += window


def build(arrays, indptr_dtype, index_dtype):
    """``(indptr, indices)`` of a pattern on the CPU. ``arrays`` is the record
    :func:`gglspeedup.attention.patterns` prepares (lengths, global tokens, states, table)."""
    import numba

    threads = numba.get_num_threads()
    numba.set_num_threads(threads if arrays.num_rows * 64 >= _PARALLEL_MIN_WORK else 1)
    try:
        return _build(arrays, indptr_dtype, index_dtype)
    finally:
        numba.set_num_threads(threads)


def _build(arrays, indptr_dtype, index_dtype):
    a = arrays
    num_rows = a.num_rows
    counts = np.empty(num_rows + 1, np.int64)
    counts[0] = 0
    count_rows(a.lengths, a.seq_len, a.gptr, a.gids, a.layout, a.half, a.num_random, num_rows, counts)
    indptr = np.cumsum(counts).astype(indptr_dtype, copy=False)
    indices = np.empty(int(indptr[-1]), index_dtype)
    fill_rows(
        a.lengths,
        a.seq_len,
        a.gptr,
        a.gids,
        a.layout,
        a.half,
        a.num_random,
        a.mode,
        a.cdf,
        a.states,
        indptr,
        indices,
        bitmap_words(a.seq_len),
        _DEBRUIJN_INDEX,
    )
    return indptr, indices

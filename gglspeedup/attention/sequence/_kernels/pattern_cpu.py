"""CPU driver of the pattern sampler (:class:`CPUPatternDriver`): a serial count-and-scan pass, then one
parallel fill over the rows.

Also the host prologue both devices share: the per-sequence RNG states and global tokens (a few
per sequence, drawn here once and uploaded for a GPU build, so both devices read the same ones).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ...._parallel import kernel_threads
from ...._rng import draw, row_state, uniform_below
from ...._search import bisect_left
from .pattern_bits import bitmap_words, globals_bits, row_fill_bits
from .pattern_driver import PatternDriverBase
from .pattern_rows import count_arguments, fill_arguments, window_bounds

__all__ = ["CPUPatternDriver", "count_rows", "fill_rows", "draw_globals"]

_GLOBAL_ROW = np.int64(-1)  # row id of the global-token draws (never a query token)


@njit(cache=True, nogil=True)
def count_rows(shape, num_rows, indptr):
    """``indptr`` of the rows: the scan of :func:`~.pattern_rows.row_count` (``shape``:
    :func:`~.pattern_rows.count_arguments`), in one sweep per sequence: the window's bounds and the
    query only grow along a sequence, so three cursors into its global tokens replace the row
    count's three searches a row (the same counts; the GPU counts with ``row_count``). One thread
    does it in a fraction of the fill's time, so a build is a single parallel region."""
    lengths, seq_len, gptr, gids, layout, half, num_random = shape
    indptr[0] = 0
    running = 0
    for s in range(num_rows // seq_len):
        n = np.int64(lengths[s])
        g0 = gptr[s]
        g1 = gptr[s + 1]
        below_lo = g0  # first global token >= lo, >= hi, >= the query
        below_hi = g0
        below_i = g0
        for i in range(seq_len):
            if i < n:
                lo, hi = window_bounds(layout, half, i, n)
                while below_lo < g1 and gids[below_lo] < lo:
                    below_lo += 1
                while below_hi < g1 and gids[below_hi] < hi:
                    below_hi += 1
                while below_i < g1 and gids[below_i] < i:
                    below_i += 1
                outside = (g1 - g0) - (below_hi - below_lo)
                if (below_i < g1 and gids[below_i] == i) or n - (hi - lo) - outside <= num_random:
                    running += n
                else:
                    running += (hi - lo) + outside + num_random
            indptr[s * seq_len + i + 1] = running


_ROWS_PER_BLOCK = 64
_KEYS_PER_ROW = 64  # about: what a build's work (gglspeedup._parallel's "draws") is counted in


@njit(parallel=True, cache=True, nogil=True)
def fill_rows(rows, indptr, out, words):
    """Fill every row (:func:`~.pattern_bits.row_fill_bits`); the global tokens are set into one
    bitmap per sequence first, and blocks of rows share one key bitmap.
    ``rows``: :func:`~.pattern_rows.fill_arguments`."""
    lengths, seq_len, gptr, gids, layout, half, num_random, mode, cdf, states = rows
    num_rows = indptr.shape[0] - 1
    gbits = np.zeros((lengths.shape[0], words), np.uint64)
    globals_bits(gptr, gids, gbits)
    for block in prange((num_rows + _ROWS_PER_BLOCK - 1) // _ROWS_PER_BLOCK):
        bitmap = np.empty(words, np.uint64)
        for r in range(block * _ROWS_PER_BLOCK, min(num_rows, (block + 1) * _ROWS_PER_BLOCK)):
            row_fill_bits(
                lengths, seq_len, layout, half, num_random, mode, cdf, states, r, indptr[r], indptr[r + 1], out,
                gbits, bitmap,
            )  # fmt: skip


@njit(cache=True, nogil=True)
def draw_globals(states, lengths, window, num_global):
    """``(gptr, gids)``: sequence ``s`` has ``min(num_global, lengths[s] - window)`` distinct tokens
    of ``[window, lengths[s])`` (none when that is empty), uniform (Floyd's algorithm), sorted, in
    ``gids[gptr[s]:gptr[s + 1]]`` (int64; ``gids`` holds at least one entry). One call, where the
    counts, their scan and the arrays had been six NumPy calls a build."""
    gptr = np.zeros(states.shape[0] + 1, np.int64)
    for s in range(states.shape[0]):
        gptr[s + 1] = gptr[s] + min(num_global, max(lengths[s] - window, 0))
    gids = np.zeros(max(gptr[-1], 1), np.int64)
    for s in range(states.shape[0]):
        population = lengths[s] - window
        count = gptr[s + 1] - gptr[s]
        base = gptr[s]
        state = row_state(states[s], _GLOBAL_ROW)
        taken = 0
        for j in range(population - count, population):
            t = uniform_below(draw(state, j), j + 1)
            p = bisect_left(gids, base, base + taken, t)
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
    return gptr, gids


class CPUPatternDriver(PatternDriverBase):
    """Patterns built on the CPU: NumPy arrays; one parallel region (the fill) per build."""

    def build(self, arrays, indptr_dtype, index_dtype):
        with kernel_threads(arrays.num_rows * _KEYS_PER_ROW, "draws"):  # small builds: one thread
            return super().build(arrays, indptr_dtype, index_dtype)

    def _scan(self, arrays, indptr_dtype):
        indptr = np.empty(arrays.num_rows + 1, indptr_dtype)
        count_rows(count_arguments(arrays), arrays.num_rows, indptr)
        return indptr

    def _fill(self, arrays, indptr, indices) -> None:
        fill_rows(fill_arguments(arrays), indptr, indices, bitmap_words(arrays.seq_len))

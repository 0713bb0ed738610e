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
from .pattern_driver import PatternDriverBase
from .pattern_rows import _DEBRUIJN_INDEX, bitmap_words, count_arguments, fill_arguments, row_count, row_fill

__all__ = ["CPUPatternDriver", "count_rows", "fill_rows", "draw_globals"]

_GLOBAL_ROW = np.int64(-1)  # row id of the global-token draws (never a query token)


@njit(cache=True, nogil=True)
def count_rows(shape, num_rows, indptr):
    """``indptr`` of the rows: the scan of :func:`row_count` (closed form, no draws: one thread
    does it in a fraction of the fill's time, so a build is a single parallel region). ``shape``:
    :func:`~.pattern_rows.count_arguments`."""
    running = 0
    indptr[0] = 0
    for r in range(num_rows):
        running += row_count(*shape, r)
        indptr[r + 1] = running


_ROWS_PER_BLOCK = 64
_KEYS_PER_ROW = 64  # about: what a build's work (gglspeedup._parallel's "draws") is counted in


@njit(parallel=True, cache=True, nogil=True)
def fill_rows(rows, indptr, out, words, table):
    """Fill every row; blocks of rows share one key bitmap (cleared as each row is read off it) and
    one row scratch.
    ``rows``: :func:`~.pattern_rows.fill_arguments`."""
    num_rows = indptr.shape[0] - 1
    for block in prange((num_rows + _ROWS_PER_BLOCK - 1) // _ROWS_PER_BLOCK):
        bitmap = np.zeros(words, np.uint64)
        scratch = np.empty(64 * words + 4, np.int64)
        for r in range(block * _ROWS_PER_BLOCK, min(num_rows, (block + 1) * _ROWS_PER_BLOCK)):
            row_fill(*rows, r, indptr[r], out, bitmap, scratch, table)


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
        fill_rows(fill_arguments(arrays), indptr, indices, bitmap_words(arrays.seq_len), _DEBRUIJN_INDEX)

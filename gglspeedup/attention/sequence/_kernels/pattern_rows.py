"""Row bodies of the sequence-pattern sampler, compiled for the CPU (``njit``) and CUDA (``cuda.jit``).

Row ``r`` of a pattern is query token ``i = r % seq_len`` of sequence ``s = r // seq_len``, whose
own length is ``lengths[s]`` (positions past it are padding: isolated nodes, no edges). A row is

- every key ``[0, n)`` when ``i`` is a global token (or when the random draws would take every
  key left anyway);
- else the window ``[lo, hi)`` (:func:`window_bounds`), the global tokens outside it, and
  ``num_random`` keys drawn without replacement from the keys in neither (rejection sampling,
  exact: each accepted key is uniform, or power-law in distance, over the keys not yet taken).

The degree is known without drawing (:func:`row_count`), so a pattern costs one count pass, a
scan and one fill pass (:func:`row_fill`), and a row writes only its own slots. Draws come from
the package's keyed stateless RNG (:mod:`gglspeedup._rng`, the samplers' draws): draw ``a`` of row
``i`` of sequence ``s`` is ``draw(row_state(states[s], i), a)``, so CPU and GPU give the same keys.
Each row's keys come out sorted.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from ...._rng import draw, row_state, uniform_01, uniform_below
from ...._search import bisect_left

__all__ = [
    "LAYOUT_DIFFUSER",
    "LAYOUT_SLIDING",
    "RANDOM_UNIFORM",
    "RANDOM_POWER_LAW",
    "row_count",
    "row_fill",
    "count_arguments",
    "fill_arguments",
]

LAYOUT_DIFFUSER = 0  # chunks of h = window // 2 tokens; a query sees its own chunk and both neighbours
LAYOUT_SLIDING = 1  # a true band |key - query| <= h
RANDOM_UNIFORM = 0
RANDOM_POWER_LAW = 1
_ONE = np.uint64(1)


@register_jitable
def window_bounds(layout, half, i, n):
    """The window ``[lo, hi)`` of query ``i`` in a sequence of ``n`` tokens."""
    if layout == LAYOUT_DIFFUSER:
        chunk = i // half
        lo = (chunk - 1) * half
        hi = (chunk + 2) * half
    else:
        lo = i - half
        hi = i + half + 1
    return max(lo, 0), min(hi, n)


@register_jitable
def _find(array, lo, hi, value):
    """:func:`~gglspeedup._search.bisect_left` with selects for branches: the global tokens are
    searched five times a row, and a search's data-dependent branches mispredicted half the time
    (its trip count depends on ``hi - lo`` only, the same for every row of a sequence)."""
    count = hi - lo
    while count > 0:
        step = count >> 1
        less = array[lo + step] < value
        lo = lo + step + 1 if less else lo
        count = count - step - 1 if less else step
    return lo


@register_jitable
def _row_shape(lengths, seq_len, gptr, gids, layout, half, num_random, r):
    """``(n, i, lo, hi, g0, g1, take_all, k)`` of row ``r``: its sequence's length, the query, the
    window, the sequence's global-token slice, whether the row is every key, and random draws."""
    s = r // seq_len
    i = r - s * seq_len
    n = np.int64(lengths[s])
    g0 = gptr[s]
    g1 = gptr[s + 1]
    lo, hi = window_bounds(layout, half, i, n)
    if i >= n:
        return n, i, lo, hi, g0, g1, False, np.int64(-1)
    p = _find(gids, g0, g1, i)
    if p < g1 and gids[p] == i:
        return n, i, lo, hi, g0, g1, True, np.int64(0)
    inside = _find(gids, g0, g1, hi) - _find(gids, g0, g1, lo)
    available = n - (hi - lo) - (g1 - g0 - inside)
    if available <= num_random:
        return n, i, lo, hi, g0, g1, True, np.int64(0)
    return n, i, lo, hi, g0, g1, False, np.int64(num_random)


@register_jitable
def row_count(lengths, seq_len, gptr, gids, layout, half, num_random, r):
    """Number of keys of row ``r`` (0 for padding positions)."""
    n, _, lo, hi, g0, g1, take_all, k = _row_shape(lengths, seq_len, gptr, gids, layout, half, num_random, r)
    if k < 0:
        return np.int64(0)
    if take_all:
        return n
    inside = _find(gids, g0, g1, hi) - _find(gids, g0, g1, lo)
    return (hi - lo) + (g1 - g0 - inside) + k


@register_jitable
def _draw_key(state, attempt, mode, n, i, half, cdf):
    """One proposal: a key in ``[0, n)``, or -1 when a power-law proposal falls off the sequence."""
    bits = draw(state, attempt)
    if mode == RANDOM_UNIFORM:
        return uniform_below(bits, n)
    t = uniform_01(bits) * cdf[n - 1]
    d = bisect_left(cdf, half + 1, n - 1, t + 0.0)
    while d < n - 1 and cdf[d] <= t:  # bisect_left finds cdf >= t; the draw wants cdf > t
        d += 1
    x = i + d if (bits & _ONE) else i - d
    if x < 0 or x >= n:
        return np.int64(-1)
    return np.int64(x)


def count_arguments(arrays) -> tuple:
    """:func:`row_count`'s arguments before ``r``, from the pattern record ``arrays`` (the one
    :mod:`gglspeedup.attention.sequence.patterns` prepares): the same on both devices."""
    a = arrays
    return (a.lengths, a.seq_len, a.gptr, a.gids, a.layout, a.half, a.num_random)


def fill_arguments(arrays) -> tuple:
    """:func:`row_fill`'s arguments before ``r`` (those of :func:`count_arguments`, then the draws')."""
    return (*count_arguments(arrays), arrays.mode, arrays.cdf, arrays.states)


@register_jitable
def row_fill(lengths, seq_len, gptr, gids, layout, half, num_random, mode, cdf, states, r, start, out):
    """Write row ``r``'s keys (node ids ``r - i + key``), sorted, into ``out[start : start + row_count(...)]``.

    The GPU's body (one thread a row): the drawn keys are kept sorted by insertion at the head of
    the row, then merged with the window and the global tokens from the back. The CPU's
    (:func:`~.pattern_bits.row_fill_bits`) accepts and rejects the same draws, so the rows are
    identical."""
    n, i, lo, hi, g0, g1, take_all, k = _row_shape(lengths, seq_len, gptr, gids, layout, half, num_random, r)
    if k < 0:
        return
    base = r - i  # node id of the sequence's token 0
    if take_all:
        for j in range(n):
            out[start + j] = base + j
        return
    inside = _find(gids, g0, g1, hi) - _find(gids, g0, g1, lo)
    fixed = (hi - lo) + (g1 - g0 - inside)
    tail = start  # the random keys are drawn into the head of the row, then merged from the back
    state = row_state(states[r // seq_len], i)
    count = 0
    attempt = 0
    while count < k:
        x = _draw_key(state, attempt, mode, n, i, half, cdf)
        attempt += 1
        if x < 0 or (x >= lo and x < hi):
            continue
        p = bisect_left(gids, g0, g1, x)
        if p < g1 and gids[p] == x:
            continue
        p = bisect_left(out, tail, tail + count, x)
        if p < tail + count and out[p] == x:
            continue
        j = tail + count
        while j > p:  # keep the drawn keys sorted (insertion)
            out[j] = out[j - 1]
            j -= 1
        out[p] = x
        count += 1
    # Merge from the back: the keys above the window (globals and random, merged), the window
    # itself (a contiguous run), then the keys below it. The random keys sit at the head of the
    # row, so the write position stays at or above the next one still to be read.
    write = start + fixed + k - 1
    rk = tail + k - 1
    gk = g1 - 1
    for phase in range(2):
        floor = hi if phase == 0 else -1  # phase 0: keys >= hi; phase 1: keys < lo
        while True:
            while gk >= g0 and gids[gk] >= lo and gids[gk] < hi:
                gk -= 1  # a global inside the window is already in it
            from_g = gk >= g0 and gids[gk] >= floor
            from_r = rk >= tail and out[rk] >= floor
            if from_g and (not from_r or gids[gk] > out[rk]):
                out[write] = base + gids[gk]
                gk -= 1
            elif from_r:
                out[write] = base + out[rk]
                rk -= 1
            else:
                break
            write -= 1
        if phase == 0:
            for v in range(hi - 1, lo - 1, -1):
                out[write] = base + v
                write -= 1

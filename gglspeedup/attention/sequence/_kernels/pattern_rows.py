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
    "bitmap_words",
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
_SIX = np.uint64(6)
_LOW6 = np.uint64(63)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_S58 = np.uint64(58)
# bit position of the lowest set bit of w from ((w & -w) * _DEBRUIJN) >> 58
_DEBRUIJN_INDEX = np.array(
    [0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4, 62, 55, 59, 36, 53, 51, 43, 22, 45, 39, 33, 30, 24, 18,
     12, 5, 63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23, 11, 46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19,
     9, 13, 8, 7, 6],
    dtype=np.int64,
)  # fmt: skip


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


def bitmap_words(seq_len: int) -> int:
    """uint64 words of the CPU fill's per-thread key bitmap for sequences of ``seq_len`` tokens."""
    return (seq_len + 63) // 64


@register_jitable
def _bit_test(bitmap, x):
    return (bitmap[np.uint64(x) >> _SIX] >> (np.uint64(x) & _LOW6)) & _ONE


@register_jitable
def _bit_set(bitmap, x):
    word = np.uint64(x) >> _SIX
    bitmap[word] = bitmap[word] | (_ONE << (np.uint64(x) & _LOW6))


@register_jitable
def _set_range(bitmap, lo, hi):
    """Set the bits of keys ``[lo, hi)`` (``lo < hi``), a word at a time."""
    first = lo >> 6
    last = (hi - 1) >> 6
    for word in range(first, last + 1):
        low = lo - word * 64 if word == first else 0
        high = hi - word * 64 if word == last else 64  # bits [low, high) of this word
        mask = _ALL >> np.uint64(64 - (high - low))
        bitmap[word] = bitmap[word] | (mask << np.uint64(low))


@register_jitable
def _drain(bitmap, n, base, out, start, table):
    """Write the set bits of ``bitmap`` (keys below ``n``) in order as ``base + key`` from
    ``out[start]``, clearing the words read."""
    write = start
    for word in range((n + 63) >> 6):
        w = bitmap[word]
        bitmap[word] = np.uint64(0)
        while w != 0:
            low = w & (~w + _ONE)
            bit = table[np.int64(((low * _DEBRUIJN) & _ALL) >> _S58)]
            out[write] = base + word * 64 + bit
            write += 1
            w = w ^ low


@register_jitable
def _drain_sparse(bitmap, n, base, out, start, table, scratch):
    """:func:`_drain` for rows of few keys a word (long sequences): four bits a word taken without a
    branch into ``scratch`` (the steps past a word's last bit write there, unread), the rest of a
    denser word in a loop; then the row is copied out. Reading ``n / 64`` words a row with a
    data-dependent loop exit each cost more than the keys themselves."""
    pos = 0
    for word in range((n + 63) >> 6):
        w = bitmap[word]
        bitmap[word] = np.uint64(0)
        b = base + word * 64
        for _ in range(4):
            low = w & (~w + _ONE)
            scratch[pos] = b + table[np.int64(((low * _DEBRUIJN) & _ALL) >> _S58)]
            pos += np.int64(w != 0)
            w = w ^ low
        while w != 0:
            low = w & (~w + _ONE)
            scratch[pos] = b + table[np.int64(((low * _DEBRUIJN) & _ALL) >> _S58)]
            pos += 1
            w = w ^ low
    for j in range(pos):
        out[start + j] = scratch[j]


@register_jitable
def row_fill(
    lengths, seq_len, gptr, gids, layout, half, num_random, mode, cdf, states, r, start, out, bitmap, scratch, table
):
    """Write row ``r``'s keys (node ids ``r - i + key``), sorted, into ``out[start : start + row_count(...)]``.

    ``bitmap``: zeroed scratch of :func:`bitmap_words` uint64 words and ``scratch`` of
    ``64 * bitmap_words + 4`` int64 (the CPU's: membership in O(1) and the sorted row read off the
    bits, through ``scratch`` when the row has few keys a word), or both empty (the GPU's: the drawn
    keys are kept sorted by insertion and merged). Both accept and reject the same draws, so the
    rows are identical. ``table``: ``_DEBRUIJN_INDEX``."""
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
    if bitmap.shape[0] > 0:
        _set_range(bitmap, lo, hi)
        for g in range(g0, g1):
            _bit_set(bitmap, gids[g])
        while count < k:
            x = _draw_key(state, attempt, mode, n, i, half, cdf)
            attempt += 1
            if x < 0 or _bit_test(bitmap, x):
                continue
            _bit_set(bitmap, x)
            count += 1
        if 4 * ((n + 63) >> 6) >= fixed + k:  # about four keys a word or fewer
            _drain_sparse(bitmap, n, base, out, start, table, scratch)
        else:
            _drain(bitmap, n, base, out, start, table)
        return
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

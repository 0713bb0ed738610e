"""The CPU's row body of the sequence-pattern sampler: a row's keys deduplicated in a key bitmap and
read off it sorted (the GPU's body, :func:`~.pattern_rows.row_fill`, keeps its draws sorted by
insertion instead; both accept and reject the same draws, so the rows are identical).

What a build repeats for every row is done once: the global tokens are set once per sequence
(``globals_bits``: one bitmap row per sequence, copied a word at a time into a row's bitmap
instead of set key by key in every row), the window is a range test on the draws and a
contiguous run written between the keys below and above it (never set in, nor read off, the
bitmap), and the row's degree and shape come from ``indptr`` (the count pass's: ``n`` keys for a
row of every key, 0 for padding, else ``num_random`` draws) instead of five searches of the
global tokens. Draw ``a`` of a row is the GPU's draw ``a`` (``_draw_key``; its uniform branch
inlined for uniform patterns), and a draw is rejected exactly when the GPU body rejects it (off
the sequence, in the window, a global token, or drawn before). Rows are read off the bitmap with
``tzcnt`` (Numba's ``trailing_zeros``; this module is compiled for the CPU only).
"""

from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import register_jitable

from ...._rng import draw, row_state, uniform_below
from .pattern_rows import RANDOM_UNIFORM, _draw_key, window_bounds

__all__ = ["bitmap_words", "globals_bits", "row_fill_bits"]

_ONE = np.uint64(1)
_SIX = np.uint64(6)
_LOW6 = np.uint64(63)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


def bitmap_words(seq_len: int) -> int:
    """uint64 words of a key bitmap for sequences of ``seq_len`` tokens."""
    return (seq_len + 63) // 64


@register_jitable
def _bit_set(bitmap, x):
    word = np.uint64(x) >> _SIX
    bitmap[word] = bitmap[word] | (_ONE << (np.uint64(x) & _LOW6))


@register_jitable
def globals_bits(gptr, gids, bits):
    """Row ``s`` of ``bits`` (uint64, ``(S, bitmap_words)``, zeroed): the global tokens of sequence
    ``s``, ``gids[gptr[s]:gptr[s + 1]]``, as a key bitmap."""
    for s in range(bits.shape[0]):
        for g in range(gptr[s], gptr[s + 1]):
            _bit_set(bits[s], gids[g])


@register_jitable
def _take(bitmap, key, lo, hi, valid):
    """1 when the draw ``key`` (``>= 0``) is ``valid`` and a new key (then set in ``bitmap``), 0
    when rejected: in the window ``[lo, hi)`` or set already. Without a branch: about one draw in
    six is rejected, at random, and a branch on it mispredicted often enough to double the draws'
    time."""
    at = np.uint64(key)
    word = at >> _SIX
    bit = _ONE << (at & _LOW6)
    w = bitmap[word]
    ok = valid & ((key < lo) | (key >= hi)) & ((w & bit) == 0)
    bitmap[word] = w | (bit * np.uint64(ok))
    return np.int64(ok)


@register_jitable
def _word_of(bitmap, word, a, b):
    """Word ``word`` of ``bitmap`` keeping only the bits of keys in ``[a, b)`` (``a < b``)."""
    w = bitmap[word]
    if word == a >> 6:
        w = w & (_ALL << np.uint64(a & 63))
    if word == (b - 1) >> 6:
        w = w & (_ALL >> np.uint64(63 - ((b - 1) & 63)))
    return w


@register_jitable
def _drain(bitmap, a, b, base, out, write, steps, last):
    """Write the keys in ``[a, b)`` set in ``bitmap`` in order as ``base + key`` from ``out[write]``;
    returns the next position. ``steps`` bits a word are taken without a branch (the steps past a
    word's last bit write at the next position, overwritten by the next key), the rest of a denser
    word in a loop: a loop per word alone mispredicted its exit once a word, which cost more than
    the keys it read. With ``last``, the range's last word with a key is read by the loop alone, so
    nothing is written past the range's last key (that slot may be the next row's)."""
    if a >= b:
        return write
    first = a >> 6
    stop = (b - 1) >> 6
    if last:
        while stop > first and _word_of(bitmap, stop, a, b) == 0:
            stop -= 1
    for word in range(first, stop + 1):
        w = _word_of(bitmap, word, a, b)
        at = base + word * 64
        if not last or word < stop:
            for _ in range(steps):
                out[write] = at + np.int64(trailing_zeros(w))
                write += np.int64(w != 0)
                w = w & (w - _ONE)
        while w != 0:
            out[write] = at + np.int64(trailing_zeros(w))
            write += 1
            w = w & (w - _ONE)
    return write


@register_jitable
def row_fill_bits(lengths, seq_len, layout, half, num_random, mode, cdf, states, r, start, end, out, gbits, bitmap):
    """Write row ``r``'s keys (node ids ``r - i + key``), sorted, into ``out[start:end]``.

    ``start, end``: ``indptr[r], indptr[r + 1]`` (the count pass's :func:`~.pattern_rows.row_count`).
    ``gbits``: :func:`globals_bits`; ``bitmap``: scratch of at least :func:`bitmap_words` uint64
    words (overwritten)."""
    s = r // seq_len
    i = r - s * seq_len
    n = np.int64(lengths[s])
    size = end - start
    if size == 0:  # padding (a token of the sequence has at least itself in its window)
        return
    base = r - i  # node id of the sequence's token 0
    if size == n:  # every key: a global token, or too few keys left to draw from
        for j in range(n):
            out[start + j] = base + j
        return
    lo, hi = window_bounds(layout, half, i, n)
    words = (n + 63) >> 6
    for word in range(words):
        bitmap[word] = gbits[s, word]
    state = row_state(states[s], i)
    count = 0
    attempt = 0
    if mode == RANDOM_UNIFORM:  # _draw_key's uniform draw, without its other mode's branches
        while count < num_random:
            count += _take(bitmap, uniform_below(draw(state, attempt), n), lo, hi, True)
            attempt += 1
    else:
        while count < num_random:
            x = _draw_key(state, attempt, mode, n, i, half, cdf)  # -1: off the sequence
            count += _take(bitmap, max(x, 0), lo, hi, x >= 0)
            attempt += 1
    # keys below the window (their extra branch-free writes land in the window's slots), the
    # window as a run (whatever globals lie in it), keys above it; branch-free steps a word: the
    # row's keys a word outside the window and two more, at least 4, at most 16 (measured at 1024
    # and 4096 tokens: 10 and 4 steps beat 8 and 1 by 5% and 20%)
    steps = min(max((size - (hi - lo)) // max(words - (hi - lo) // 64, 1) + 2, 4), 16)
    write = _drain(bitmap, 0, lo, base, out, start, steps, False)
    first = base + lo
    for j in range(hi - lo):
        out[write + j] = first + j
    _drain(bitmap, hi, n, base, out, write + hi - lo, steps, True)

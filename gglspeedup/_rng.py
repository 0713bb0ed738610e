"""The package's counter-based draws, compiled by Numba for the CPU and CUDA: shared by every kernel.

A draw is a pure function of ``(seed, batch key, hop, node, draw index)``: the host folds
``(seed, key, hop)`` into one 64-bit *hop state* (:func:`hop_state`; :func:`hop_states` for many
hops at once), every row folds its node id in (:func:`row_state`), and draw ``i`` of a row is
``mix64(row_state + (i + 1) * GAMMA)`` (:func:`draw`, splitmix64). No state lives between calls,
so the output cannot depend on thread count, launch shape or the order in which rows are processed.

:mod:`gglspeedup._splitmix`'s ``mix64`` registered with Numba, and the row / draw / uniform helpers
built on it. The samplers (:mod:`gglspeedup.sampling._kernels`, whose ``rng`` module adds a typed
graph's relation folding) and the attention patterns (:mod:`gglspeedup.attention`; a sequence's
state is the hop state of its index) draw with these same functions, so a draw is one definition
everywhere. Every constant is a ``np.uint64``: compiled code (Numba's typing rules) and the CUDA
simulator (NumPy's promotion rules) compute the same bits. Under the simulator the multiplications
raise NumPy's harmless "overflow encountered in scalar multiply" warning.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from ._splitmix import GAMMA, MASK, splitmix64
from ._splitmix import mix64 as _mix64

__all__ = ["GAMMA", "mix64", "hop_state", "hop_states", "row_state", "draw", "uniform_below", "uniform_01"]

_NODE_MUL = np.uint64(0xD6E8FEB86659FD93)
_S11 = np.uint64(11)
_S32 = np.uint64(32)
_ONE = np.uint64(1)
_LOW32 = np.uint64(0xFFFFFFFF)
_TWO_POW_M53 = 1.0 / 9007199254740992.0  # 2**-53, exact

# The package's one splitmix64 body (gglspeedup._splitmix), made callable from @njit and
# @cuda.jit code as well as from Python.
mix64 = register_jitable(_mix64)


def _key_state(seed: int, key: int) -> int:
    """``(seed, key)`` folded (Python ints, mod 2**64): what every hop state of a batch starts from."""
    gamma = int(GAMMA)
    return splitmix64((splitmix64(int(seed) + gamma) ^ (int(key) & MASK)) + gamma)


def hop_state(seed: int, key: int, hop: int) -> np.uint64:
    """The 64-bit state shared by all rows of one hop of one batch (computed on the host).

    Python integers (mod 2**64) keep this free of NumPy overflow warnings; kernels receive the
    result as a ``np.uint64`` scalar.
    """
    return np.uint64(splitmix64((_key_state(seed, key) ^ (int(hop) & MASK)) + int(GAMMA)))


def hop_states(seed: int, key: int, hops: np.ndarray) -> np.ndarray:
    """:func:`hop_state` of every entry of ``hops`` (a uint64 array), as a uint64 array: the same
    bits, one array operation (an attention pattern's per-sequence states: hop = sequence)."""
    start = _key_state(seed, key)
    if hops.shape[0] <= 16:  # Python ints: the array expression under errstate costs ~10 us a call
        gamma = int(GAMMA)
        return np.array([splitmix64((start ^ hop) + gamma) for hop in hops.tolist()], np.uint64)
    with np.errstate(over="ignore"):
        return _mix64((np.uint64(start) ^ hops) + GAMMA)


@register_jitable
def row_state(hop_state_, node):
    """State of one row (node) within a hop: depends on the node id, not its position."""
    return mix64(hop_state_ ^ (np.uint64(node) * _NODE_MUL))


@register_jitable
def draw(row_state_, index):
    """Draw ``index`` (0-based) of a row: 64 random bits."""
    return mix64(row_state_ + (np.uint64(index) + _ONE) * GAMMA)


@register_jitable
def uniform_below(bits, n):
    """An integer in ``[0, n)`` from 64 random bits (``n >= 1``), as int64.

    Multiply-shift on the high 32 bits (Lemire) for ``n < 2**32``; the modulus above that.
    """
    un = np.uint64(n)
    if un <= _LOW32:
        return np.int64(((bits >> _S32) * un) >> _S32)
    return np.int64(bits % un)


@register_jitable
def uniform_01(bits):
    """A float64 in ``[0, 1)`` on the 2**-53 grid (``u * total`` can still round up to ``total``)."""
    return np.float64(bits >> _S11) * _TWO_POW_M53

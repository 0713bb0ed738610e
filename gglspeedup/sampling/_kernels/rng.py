"""Counter-based, stateless random numbers shared by every sampling kernel.

A draw is a pure function of ``(seed, batch key, hop, node, draw index)``: the host folds
``(seed, key, hop)`` into one 64-bit *hop state* (:func:`hop_state`), every row folds its node id
in (:func:`row_state`), and draw ``i`` of a row is ``mix64(row_state + (i + 1) * GAMMA)``
(splitmix64). No state lives between calls, so the output cannot depend on thread count, launch
shape or the order in which rows are processed.

Every constant and mixed operand is a ``np.uint64``: compiled code (Numba's typing rules) and the
CUDA simulator (NumPy's promotion rules) then compute the same bits. Under the simulator the
multiplications raise NumPy's harmless "overflow encountered in scalar multiply" warning.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

__all__ = [
    "GAMMA",
    "mix64",
    "hop_state",
    "row_state",
    "draw",
    "uniform_below",
    "uniform_01",
]

GAMMA = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio increment of splitmix64
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_NODE_MUL = np.uint64(0xD6E8FEB86659FD93)
_S11 = np.uint64(11)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_S32 = np.uint64(32)
_ONE = np.uint64(1)
_LOW32 = np.uint64(0xFFFFFFFF)
_TWO_POW_M53 = 1.0 / 9007199254740992.0  # 2**-53, exact


@register_jitable
def mix64(z):
    """splitmix64's finaliser: a bijective avalanche of a uint64."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def hop_state(seed: int, key: int, hop: int) -> np.uint64:
    """The 64-bit state shared by all rows of one hop of one batch (computed on the host).

    Python integers (mod 2**64) keep this free of NumPy overflow warnings; kernels receive the
    result as a ``np.uint64`` scalar.
    """
    mask = (1 << 64) - 1
    state = _py_mix64((int(seed) + int(GAMMA)) & mask)
    state = _py_mix64((state ^ (int(key) & mask)) + int(GAMMA) & mask)
    state = _py_mix64((state ^ (int(hop) & mask)) + int(GAMMA) & mask)
    return np.uint64(state)


def _py_mix64(z: int) -> int:
    mask = (1 << 64) - 1
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


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

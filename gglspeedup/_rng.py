"""The package's counter-based draws, compiled by Numba for the CPU and CUDA: shared by every kernel.

:mod:`gglspeedup._splitmix`'s ``mix64`` registered with Numba, and the row / draw / uniform helpers
built on it. The samplers (:mod:`gglspeedup.sampling._kernels.rng`, which adds the host-side
state folding) and the attention patterns (:mod:`gglspeedup.attention`) draw with these same
functions, so a draw is one definition everywhere. Every constant is a ``np.uint64``: compiled
code (Numba's typing rules) and the CUDA simulator (NumPy's promotion rules) compute the same bits.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from ._splitmix import GAMMA
from ._splitmix import mix64 as _mix64

__all__ = ["GAMMA", "mix64", "row_state", "draw", "uniform_below", "uniform_01"]

_NODE_MUL = np.uint64(0xD6E8FEB86659FD93)
_S11 = np.uint64(11)
_S32 = np.uint64(32)
_ONE = np.uint64(1)
_LOW32 = np.uint64(0xFFFFFFFF)
_TWO_POW_M53 = 1.0 / 9007199254740992.0  # 2**-53, exact

# The package's one splitmix64 body (gglspeedup._splitmix), made callable from @njit and
# @cuda.jit code as well as from Python.
mix64 = register_jitable(_mix64)


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

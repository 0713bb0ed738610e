"""Draw primitives shared by the row bodies (:mod:`.rows`) and the exclusion paths (:mod:`.exclusion`).

One home for the searches and the membership checks both draw with, so a row with excluded edges
and a plain row use the same code for the same step (and a fix lands in both):

- :func:`bisect_left` / :func:`bisect_right`: the first entry ``>=`` / ``>`` a value in a sorted
  slice (excluded positions, a row's times);
- :func:`search`: inverse-CDF step over a row's running weight sums ``cum`` less a ``base`` mass;
- :func:`floyd`: Floyd's algorithm, a uniform ``count``-subset of ``deg`` positions;
- :func:`is_free` / :func:`chosen_mass`: whether a live edge is still undrawn, and the weight
  drawn so far at or before a position (successive sampling without replacement).

Written once, compiled by ``njit`` and ``cuda.jit`` (``register_jitable``); no transcendental
functions and a fixed order of float additions, so every device computes the same bits.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from ..._rng import draw, uniform_below
from ..._search import bisect_left, bisect_right

__all__ = ["bisect_left", "bisect_right", "search", "floyd", "is_free", "chosen_mass"]


@register_jitable
def search(cum, lo, hi, base, value):
    """First ``p`` in ``[lo, hi)`` with ``cum[p] - base > value``; ``hi`` if none.

    ``cum[p] - base`` is non-decreasing in ``p``, so this equals a linear scan.
    """
    while lo < hi:
        mid = (lo + hi) >> 1
        if cum[mid] - base > value:
            hi = mid
        else:
            lo = mid + 1
    return lo


@register_jitable
def floyd(start, deg, state, count, pos, out):
    """Floyd's algorithm: a uniform ``count``-subset of ``[start, start + deg)`` in ``count``
    draws, written to ``pos[out:out + count]`` (membership checked against that slice)."""
    c = 0
    for j in range(deg - count, deg):
        p = start + uniform_below(draw(state, c), j + 1)
        for q in range(out, out + c):
            if pos[q] == p:
                p = start + j
                break
        pos[out + c] = p
        c += 1


@register_jitable
def is_free(weights, pos, out, filled, p):
    """Whether position ``p`` is a live edge (weight > 0) not among the ``filled`` drawn so far."""
    if not weights[p] > 0:
        return False
    for q in range(out, out + filled):
        if pos[q] == p:
            return False
    return True


@register_jitable
def chosen_mass(weights, pos, out, filled, p, mass):
    """``mass`` plus the weight of the ``filled`` edges drawn so far at positions <= ``p``, added
    in draw order."""
    for q in range(out, out + filled):
        if pos[q] <= p:
            mass += np.float64(weights[pos[q]])
    return mass

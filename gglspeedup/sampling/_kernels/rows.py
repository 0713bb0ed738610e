"""Per-row sampling bodies: written once, compiled by ``numba.njit`` (CPU) and ``cuda.jit`` (GPU).

Each function handles one target row in one thread. The CPU driver (:mod:`.cpu`) calls them from
a ``prange`` loop, the GPU driver (:mod:`.cuda`) from one thread per row, so the draws and their
order within a row are the same code on every device.

A row's output is a list of absolute CSR positions ``p`` (``indptr[node] <= p < indptr[node+1]``);
:func:`row_finish` turns them into neighbour ids and edge ids. Conventions (the public contract
lives in :class:`gglspeedup.NeighborSampler`):

- ``k == -1``: every neighbour in row order (weighted: every neighbour with weight > 0);
  ``k == 0``: none.
- without replacement, ``k`` below the available count: unweighted rows use Floyd's algorithm
  (``k`` draws, membership checked against the row's own output slice); weighted rows keep the
  ``k`` smallest exponential keys ``E_j / w_j`` (A-ES with exponential jumps), ascending.
- with replacement: exactly ``k`` draws when the row has an edge (weighted: an edge with
  weight > 0); weighted draws binary-search the row's running weight sum.

Weighted rows read two tables built once per graph (:func:`weight_tables`): ``live[v]``, the
number of edges of row ``v`` with weight > 0, and ``cum[p]``, the running weight sum of ``p``'s
row up to and including ``p``. Searches over ``cum`` make a weighted row cost
O(k log(deg)) instead of O(deg).
- zero-weight edges are never drawn; a row whose weights are all zero yields nothing.
"""

from __future__ import annotations

import math

import numpy as np
from numba.extending import register_jitable

from .rng import draw, uniform_01, uniform_below, uniform_open01

__all__ = ["row_weight_table", "row_count", "row_fill", "row_finish"]


@register_jitable
def row_weight_table(indptr, weights, node, live, cum):
    """Fill ``live[node]`` and ``cum`` over row ``node`` (sequential sums: identical everywhere)."""
    count = 0
    acc = 0.0
    for p in range(indptr[node], indptr[node + 1]):
        w = np.float64(weights[p])
        if w > 0:
            count += 1
        acc += w
        cum[p] = acc
    live[node] = count


@register_jitable
def row_count(indptr, live, node, k, replace, weighted):
    """How many edges row ``node`` yields for fanout ``k`` (int64)."""
    if k == 0:
        return 0
    avail = live[node] if weighted else indptr[node + 1] - indptr[node]
    if k < 0 or avail == 0:
        return avail
    if replace:
        return k
    return min(k, avail)


@register_jitable
def row_fill(indptr, weights, cum, node, k, replace, weighted, state, count, pos, keys, out):
    """Write ``count`` sampled CSR positions of row ``node`` into ``pos[out:out + count]``.

    ``state`` is the row's RNG state (:func:`.rng.row_state`); ``keys`` is float64 scratch as
    long as ``pos`` (used only by weighted sampling without replacement).
    """
    if count == 0:
        return
    start = indptr[node]
    deg = indptr[node + 1] - start
    if k < 0 or (not replace and count < k) or (not replace and not weighted and deg <= k):
        _take_all(weights, start, deg, weighted, pos, out)
    elif replace and not weighted:
        for i in range(count):
            pos[out + i] = start + uniform_below(draw(state, i), deg)
    elif replace:
        _weighted_with_replacement(weights, cum, start, deg, state, count, pos, out)
    elif not weighted:
        _floyd(start, deg, state, count, pos, out)
    else:
        _weighted_keys(weights, cum, start, deg, state, count, pos, keys, out)


@register_jitable
def _search(cum, lo, hi, base, value, strict):
    """First ``p`` in ``[lo, hi)`` with ``cum[p] - base`` above (``strict``) or at least ``value``.

    ``cum[p] - base`` is non-decreasing in ``p``, so this equals a linear scan; ``hi`` if none.
    """
    while lo < hi:
        mid = (lo + hi) >> 1
        reached = cum[mid] - base > value if strict else cum[mid] - base >= value
        if reached:
            hi = mid
        else:
            lo = mid + 1
    return lo


@register_jitable
def _gallop(cum, lo, hi, base, value):
    """:func:`_search` (non-strict) probing ``lo + 1, lo + 3, lo + 7, ...`` first: short skips
    stay within a few cache lines of ``lo``. Same result as the plain search."""
    step = 1
    while True:
        probe = lo + step - 1
        if probe >= hi:
            return _search(cum, lo, hi, base, value, False)
        if cum[probe] - base >= value:
            return _search(cum, lo, probe + 1, base, value, False)
        lo = probe + 1
        step *= 2


@register_jitable
def _take_all(weights, start, deg, weighted, pos, out):
    c = 0
    for p in range(start, start + deg):
        if not weighted or weights[p] > 0:
            pos[out + c] = p
            c += 1


@register_jitable
def _floyd(start, deg, state, count, pos, out):
    # Floyd's algorithm: a uniform ``count``-subset of ``range(deg)`` in ``count`` draws.
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
def _insert_sorted(keys, pos, out, last, key, p):
    # Place (key, p) into the ascending slice keys[out:last + 1], shifting larger keys up;
    # slot ``last`` is free (or holds the entry being replaced).
    q = last
    while q > out and keys[q - 1] > key:
        keys[q] = keys[q - 1]
        pos[q] = pos[q - 1]
        q -= 1
    keys[q] = key
    pos[q] = p


@register_jitable
def _weighted_with_replacement(weights, cum, start, deg, state, count, pos, out):
    # Inverse CDF: the first edge whose running sum exceeds u * total (never a zero-weight
    # edge: its running sum equals its predecessor's).
    end = start + deg
    total = cum[end - 1]
    for i in range(count):
        p = _search(cum, start, end, 0.0, uniform_01(draw(state, i)) * total, True)
        if p == end:  # rounding put the target at the very top: the last live edge
            p = end - 1
            while not weights[p] > 0:
                p -= 1
        pos[out + i] = p


@register_jitable
def _weighted_keys(weights, cum, start, deg, state, count, pos, keys, out):
    # Efraimidis-Spirakis with exponential jumps (A-ExpJ), in exponential-key form: the sample
    # is the ``count`` smallest keys E_j / w_j (E_j ~ Exp(1)), kept ascending. After the first
    # ``count`` live edges, the next edge to beat the threshold T (largest kept key) is where
    # the running weight since the last visited edge reaches X ~ Exp(rate T) (a search over
    # ``cum``); its key is E / w with E truncated to [0, w T). Same distribution as keying every
    # edge, with O(count log(deg / count)) draws. Needs count < the number of live edges.
    end = start + deg
    d = 0
    p = start
    filled = 0
    while filled < count:
        w = np.float64(weights[p])
        if w > 0:
            _insert_sorted(keys, pos, out, out + filled, -math.log(uniform_open01(draw(state, d))) / w, p)
            d += 1
            filled += 1
        p += 1
    while p < end:
        threshold = keys[out + count - 1]
        if not threshold > 0:
            break
        jump = -math.log(uniform_open01(draw(state, d))) / threshold
        d += 1
        p = _gallop(cum, p, end, cum[p - 1], jump)
        while p < end and not weights[p] > 0:  # only when jump <= 0: skip to a live edge
            p += 1
        if p == end:
            break
        w = np.float64(weights[p])
        e = -math.log1p(uniform_open01(draw(state, d)) * math.expm1(-w * threshold))
        d += 1
        _insert_sorted(keys, pos, out, out + count - 1, e / w, p)
        p += 1


@register_jitable
def row_finish(indices, edge_ids, has_edge_ids, pos, col, start, stop):
    """Turn positions ``pos[start:stop]`` into neighbours (``col``) and edge ids (in ``pos``).

    The GPU calls it per row; the CPU calls it per chunk of a row-independent pass, where the
    independent loads overlap better than inside the per-row loop.
    """
    for q in range(start, stop):
        p = pos[q]
        col[q] = indices[p]
        if has_edge_ids:
            pos[q] = edge_ids[p]

"""Edge exclusion for link prediction: rows that must not draw some of their edges.

``SampleOptions.excluded`` holds the CSR positions of the excluded edges as an int64 array, sorted
ascending (so the excluded positions of one row are one slice of it, found by binary search), or
the driver's int8 scalar *marker* when the call excludes nothing. The two are different
*types*: :func:`excluded_slice`, :func:`count_excluded` and :func:`fill_excluding` are overloaded
on it, and for the marker compile to constants, so the kernels plain sampling runs carry no
exclusion code at all (a first version that tested a flag at run time slowed ``sample()`` by a
fifth on the CPU). The marker is an int8 scalar, not ``None`` or ``()`` (CUDA kernels take
neither, and Numba's parallel loops take no empty tuple) and not an array (every call of a row
body takes and drops a reference to each array of its records). A row with excluded edges draws
``min(k, available)`` among the others with the distribution it would have without them:

- uniform rows draw *virtual* indices in ``[0, available)`` exactly as :mod:`.rows` draws real
  ones (Floyd without replacement, one uniform draw per pick with), then map each to the
  ``j``-th non-excluded position (:func:`_skip`);
- weighted rows treat the excluded edges as already drawn: their mass leaves the total, and the
  inverse-CDF search steps over them, as successive sampling steps over the edges it has chosen.

A row without excluded edges never comes here, so it draws exactly what ``sample()`` draws. The
positions are found per batch by :func:`match_start`, :func:`count_matches` and
:func:`fill_matches` (each pair ``(u, v)`` excludes every parallel edge ``u -> v``, i.e. every
entry ``u`` of row ``v``) run by the drivers.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload, register_jitable

from ..._rng import draw, uniform_01, uniform_below
from .draws import bisect_left, chosen_mass, floyd, is_free, search

__all__ = [
    "ROW_FILTER_BITS",
    "row_slot",
    "row_filter",
    "rows_ascending",
    "row_flagged",
    "excluded_slice",
    "count_excluded",
    "fill_excluding",
    "fill_last",
    "match_start",
    "count_matches",
    "fill_matches",
]


ROW_FILTER_BITS = 15  # 32 KiB of flags: a few percent of rows search in vain with 2048 rows flagged
_GOLDEN = 0x9E3779B97F4A7C15


@register_jitable
def row_slot(node):
    """The flag of row ``node`` in ``SampleOptions.excluded_rows`` (Fibonacci hashing)."""
    return np.int64((np.uint64(node) * np.uint64(_GOLDEN)) >> np.uint64(64 - ROW_FILTER_BITS))


def row_filter(xp, rows):
    """``SampleOptions.excluded_rows`` for the rows ``rows`` (an int64 array of ``xp``): uint8 flags,
    1 at :func:`row_slot` of each. Must flag every row that holds an excluded position (more is
    harmless: such a row only searches and finds nothing)."""
    flags = xp.zeros(1 << ROW_FILTER_BITS, dtype=np.uint8)
    slots = (rows.astype(np.uint64) * np.uint64(_GOLDEN)) >> np.uint64(64 - ROW_FILTER_BITS)
    flags[slots.astype(np.int64)] = 1
    return flags


def rows_ascending(xp, indptr, indices) -> bool:
    """Whether every row of the CSR arrays (of array module ``xp``) lists its entries in ascending
    order (then :func:`count_matches` binary-searches a row instead of scanning it). One pass over
    ``indices``, done once per sampler, on the first link batch."""
    if indices.shape[0] < 2:
        return True
    drops = xp.flatnonzero(indices[1:] < indices[:-1]) + 1  # entries smaller than the one before
    return bool(drops.shape[0] == 0 or xp.isin(drops, indptr).all())  # sync: one flag, once


def _row_flagged(options, node):
    return options.excluded_rows[row_slot(node)] != 0


def row_flagged(options, node):
    """Whether row ``node`` may hold excluded edges (its flag in ``options.excluded_rows``);
    ``False`` at compile time for the "nothing excluded" marker."""
    return False if options.excluded.dtype != np.int64 else _row_flagged(options, node)


def _excluded_slice(options, node, start, end):
    if options.excluded_rows[row_slot(node)] == 0:
        return 0, 0  # the common case: one load from a small table, no search
    excluded = options.excluded
    count = excluded.shape[0]
    a = bisect_left(excluded, 0, count, start)
    if a == count or excluded[a] >= end:
        return a, a
    return a, bisect_left(excluded, a, count, end)


def excluded_slice(options, node, start, end):
    """``(a, b)``: ``options.excluded[a:b]`` are the excluded positions of row ``node``, whose
    edges are ``[start, end)`` (empty, ``b <= a``, for most rows)."""
    return (0, 0) if options.excluded.dtype != np.int64 else _excluded_slice(options, node, start, end)


def _count_excluded(graph, options, a, b):
    if not options.weighted:
        return b - a
    count = 0
    for q in range(a, b):
        if graph.weights[options.excluded[q]] > 0:
            count += 1
    return count


def count_excluded(graph, options, a, b):
    """How many of the excluded positions ``excluded[a:b]`` the row could have drawn (weighted
    rows draw only edges of weight > 0)."""
    return 0 if options.excluded.dtype != np.int64 else _count_excluded(graph, options, a, b)


def _excludes(options) -> bool:
    """At compile time: whether a ``SampleOptions`` type carries excluded positions (an int64
    array) rather than the "nothing excluded" marker."""
    field = options.types[options.fields.index("excluded")]
    return isinstance(field, types.Array) and field.dtype == types.int64


@overload(excluded_slice)
def _overload_excluded_slice(options, node, start, end):
    return _excluded_slice if _excludes(options) else (lambda options, node, start, end: (0, 0))


@overload(row_flagged)
def _overload_row_flagged(options, node):
    return _row_flagged if _excludes(options) else (lambda options, node: False)


@overload(count_excluded)
def _overload_count_excluded(graph, options, a, b):
    return _count_excluded if _excludes(options) else (lambda graph, options, a, b: 0)


@register_jitable
def _skip(excluded, a, b, position):
    """The real position of virtual ``position`` (``start + j``): the ``j``-th position of the row
    that is not excluded (``excluded[a:b]`` ascending and distinct).

    ``excluded[q] - (q - a)`` (an excluded position less the excluded ones before it) never
    decreases, and the answer is ``position`` plus the number of ``q`` with that value
    ``<= position``: a binary search, so a hub holding hundreds of excluded edges stays cheap."""
    lo, hi = a, b
    while lo < hi:
        mid = (lo + hi) >> 1
        if excluded[mid] - (mid - a) <= position:
            lo = mid + 1
        else:
            hi = mid
    return position + (lo - a)


@register_jitable
def _is_excluded(excluded, a, b, p):
    q = bisect_left(excluded, a, b, p)
    return q < b and excluded[q] == p


@register_jitable
def _mass_upto(weights, excluded, a, b, pos, out, filled, p):
    """Weight of the excluded edges at positions <= ``p`` (ascending), then of the ``filled``
    edges chosen so far at positions <= ``p`` (draw order): a fixed order of float additions."""
    mass = 0.0
    for q in range(a, b):
        if excluded[q] > p:
            break
        mass += np.float64(weights[excluded[q]])
    return chosen_mass(weights, pos, out, filled, p, mass)


@register_jitable
def _is_free(weights, excluded, a, b, pos, out, filled, p):
    """:func:`.draws.is_free`, and not excluded."""
    return is_free(weights, pos, out, filled, p) and not _is_excluded(excluded, a, b, p)


@register_jitable
def _weighted_draw(weights, cum, excluded, a, b, start, end, target, pos, out, filled):
    """The edge whose share of the remaining mass holds ``target``: invert ``cum`` minus the mass
    of the excluded and the ``filled`` chosen edges (re-searching until that mass is stable)."""
    base = 0.0
    while True:
        p = search(cum, start, end, base, target)
        mass = _mass_upto(weights, excluded, a, b, pos, out, filled, p)
        if mass == base:
            break
        base = mass
    if p == end or not _is_free(weights, excluded, a, b, pos, out, filled, p):
        # Rounding only: the next free live edge (wrapping round; one exists).
        p = min(p, end - 1)
        while not _is_free(weights, excluded, a, b, pos, out, filled, p):
            p = p + 1 if p + 1 < end else start
    return p


def _fill_excluding(graph, options, start, deg, k, state, count, available, pos, out, a, b):
    excluded, weights, cum = options.excluded, graph.weights, graph.cum
    end = start + deg
    if k < 0 or (not options.replace and count == available):
        c = 0  # every edge that is not excluded (weighted: of weight > 0), in row order
        for p in range(start, end):
            if not _is_excluded(excluded, a, b, p) and (not options.weighted or weights[p] > 0):
                pos[out + c] = p
                c += 1
        return
    if not options.weighted:
        if options.replace:
            for i in range(count):
                pos[out + i] = _skip(excluded, a, b, start + uniform_below(draw(state, i), available))
            return
        floyd(start, available, state, count, pos, out)  # over virtual indices, then each mapped
        for q in range(out, out + count):  # to its real position
            pos[q] = _skip(excluded, a, b, pos[q])
        return
    remaining = cum[end - 1] - _mass_upto(weights, excluded, a, b, pos, out, 0, end)
    for i in range(count):
        target = uniform_01(draw(state, i)) * remaining
        filled = 0 if options.replace else i
        p = _weighted_draw(weights, cum, excluded, a, b, start, end, target, pos, out, filled)
        pos[out + i] = p
        if not options.replace:
            remaining -= np.float64(weights[p])


def fill_excluding(graph, options, start, deg, k, state, count, available, pos, out, a, b):
    """Write ``count`` draws of the row ``[start, start + deg)`` avoiding ``excluded[a:b]``;
    ``available`` is the number of edges it may draw (:func:`.rows.row_available`)."""
    if options.excluded.dtype == np.int64:
        _fill_excluding(graph, options, start, deg, k, state, count, available, pos, out, a, b)


@overload(fill_excluding)
def _overload_fill_excluding(graph, options, start, deg, k, state, count, available, pos, out, a, b):
    if _excludes(options):
        return _fill_excluding
    return lambda graph, options, start, deg, k, state, count, available, pos, out, a, b: None


@register_jitable
def _last_plain(start, end, count, pos, out):
    for c in range(count):
        pos[out + c] = end - count + c


def _fill_last(options, start, end, count, pos, out, a, b):
    if b <= a:
        _last_plain(start, end, count, pos, out)
        return
    excluded = options.excluded
    c = count
    p = end - 1
    while c > 0:  # the window holds at least ``count`` edges that are not excluded
        if not _is_excluded(excluded, a, b, p):
            c -= 1
            pos[out + c] = p
        p -= 1


def fill_last(options, start, end, count, pos, out, a, b):
    """Temporal strategy ``"last"``: the ``count`` latest positions of the window ``[start, end)``
    (rows sorted by time) that are not excluded (``excluded[a:b]``), written oldest first."""
    _fill_last(options, start, end, count, pos, out, a, b)


@overload(fill_last)
def _overload_fill_last(options, start, end, count, pos, out, a, b):
    if _excludes(options):
        return _fill_last
    return lambda options, start, end, count, pos, out, a, b: _last_plain(start, end, count, pos, out)


@register_jitable
def match_start(graph, source, target, sorted_rows):
    """Where to look for entries ``source`` in row ``target``: a sorted row at its first entry
    >= ``source`` (binary search: in a hub's row a chain of cache misses), an unsorted one at its
    start. The count pass finds it once and hands it to the fill pass."""
    start, end = graph.indptr[target], graph.indptr[target + 1]
    return bisect_left(graph.indices, start, end, source) if sorted_rows else start


@register_jitable
def count_matches(graph, source, target, sorted_rows, first):
    """How many entries of row ``target`` from ``first`` (:func:`match_start`'s) on are ``source``:
    the parallel edges ``source -> target`` (``sorted_rows``: every row of the graph is ascending,
    so the scan stops at the first other entry)."""
    count = 0
    for p in range(first, graph.indptr[target + 1]):
        if graph.indices[p] == source:
            count += 1
        elif sorted_rows:
            break
    return count


@register_jitable
def fill_matches(graph, source, target, sorted_rows, first, positions, out):
    """Write the positions of the entries ``source`` of row ``target`` (scanning from ``first``, as
    :func:`count_matches` did) into ``positions[out:]``."""
    c = 0
    for p in range(first, graph.indptr[target + 1]):
        if graph.indices[p] == source:
            positions[out + c] = p
            c += 1
        elif sorted_rows:
            break

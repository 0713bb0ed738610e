"""Per-row sampling bodies: written once, compiled by ``numba.njit`` (CPU) and ``cuda.jit`` (GPU).

Each function handles one target row in one thread. The CPU driver (:mod:`.cpu`) calls them from
a ``prange`` loop, the GPU driver (:mod:`.cuda`) from one thread per row, so the draws and their
order within a row are the same code on every device. The public bodies take the two records of
:mod:`.records` (``graph``: the arrays, ``options``: the flags), so a new sampling option changes
the records and these bodies, never a kernel's signature.

A row's output is a list of absolute CSR positions ``p`` (``indptr[node] <= p < indptr[node+1]``);
:func:`row_finish` turns them into neighbour ids and edge ids. Conventions (the public contract
lives in :class:`gglspeedup.NeighborSampler`):

- ``k == -1``: every neighbour in row order (weighted: every neighbour with weight > 0);
  ``k == 0``: none.
- without replacement, ``k`` below the available count: unweighted rows use Floyd's algorithm
  (``k`` draws, membership checked against the row's own output slice); weighted rows draw
  successively, each draw proportional to the weights of the edges not drawn yet (the
  distribution of A-ES), in draw order.
- with replacement: exactly ``k`` draws when the row has an edge (weighted: an edge with
  weight > 0); weighted draws binary-search the row's running weight sum.
- zero-weight edges are never drawn; a row whose weights are all zero yields nothing.
- edges in ``options.excluded`` (link prediction) are never drawn; a row with some draws among the
  rest with the same distribution (:mod:`.exclusion`), a row without any draws exactly as before.

Weighted rows read two tables built once per graph (:func:`row_weight_table`): ``live[v]``, the
number of edges of row ``v`` with weight > 0, and ``cum[p]``, the running weight sum of ``p``'s
row up to and including ``p``. Searches over ``cum`` make a weighted row cost O(k log(deg))
(O(k^2 log(deg)) without replacement, worst case) instead of O(deg). No transcendental
functions and no multiply-add pairs appear in any body, so compiled CPU code, the simulator and
a real GPU compute the same bits.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload, register_jitable

from ..._rng import draw, uniform_01, uniform_below
from .draws import bisect_right, chosen_mass, floyd, is_free, search
from .exclusion import count_excluded, excluded_slice, fill_excluding, fill_last, row_flagged

__all__ = [
    "row_weight_table",
    "row_available",
    "row_count",
    "row_count_unexcluded",
    "count_of",
    "row_fill",
    "row_fill_split",
    "row_finish",
    "split",
    "row_window",
    "window_count",
    "window_fill",
]


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
def row_available(graph, options, node, a, b):
    """Edges row ``node`` may draw: all (weighted: those of weight > 0) but the excluded
    ``options.excluded[a:b]`` (:func:`.exclusion.excluded_slice`)."""
    indptr = graph.indptr
    avail = graph.live[node] if options.weighted else indptr[node + 1] - indptr[node]
    return avail - count_excluded(graph, options, a, b) if b > a else avail


@register_jitable
def count_of(options, k, avail):
    """How many edges a row with ``avail`` drawable edges yields for fanout ``k`` (int64)."""
    if k == 0:
        return 0
    if k < 0 or avail == 0:
        return avail
    if options.replace:
        return k
    return min(k, avail)


@register_jitable
def row_count(graph, options, node, k):
    """How many edges row ``node`` yields for fanout ``k`` (int64)."""
    if k == 0:
        return 0
    a, b = excluded_slice(options, node, graph.indptr[node], graph.indptr[node + 1])
    return count_of(options, k, row_available(graph, options, node, a, b))


@register_jitable
def row_count_unexcluded(graph, options, node, k):
    """:func:`row_count` ignoring ``options.excluded``: equal to it for every row that holds no
    excluded edge. The CPU hop counts every row with this tight, table-free loop body and then
    recounts only the rows :func:`.exclusion.row_flagged` names, in its serial prefix-sum loop (a
    lookup in the parallel count loop cost plain rows a quarter of their speed, and a second
    parallel loop, even one never entered, slowed plain ``sample()`` by about 5%)."""
    indptr = graph.indptr
    return count_of(options, k, graph.live[node] if options.weighted else indptr[node + 1] - indptr[node])


@register_jitable
def row_fill(graph, options, node, k, state, count, pos, out):
    """Write ``count`` sampled CSR positions of row ``node`` into ``pos[out:out + count]``.

    ``state`` is the row's RNG state (:func:`gglspeedup._rng.row_state`); ``count`` is :func:`row_count`'s.
    """
    window_fill(graph, options, node, graph.indptr[node], graph.indptr[node + 1], k, state, count, pos, out)


@register_jitable(inline="always")
def row_fill_split(graph, options, plain, row, k, state, count, pos, out):
    """:func:`row_fill` of a hop's row: with ``options`` for a row that may hold excluded edges
    (:func:`.exclusion.row_flagged`), else with ``plain``, the record without its exclusions
    (:func:`.records.without_exclusions`), so most rows of a link batch run the plain bodies.
    Inlined into the hop kernels' IR: as a call it would take and release a reference to every
    array of three records per row."""
    if row_flagged(options, row):
        row_fill(graph, options, row, k, state, count, pos, out)
    else:
        row_fill(graph, plain, row, k, state, count, pos, out)


# ---------------------------------------------------------------------------- windows
# A row's *window* is the part of it a draw may take: the whole row, or for a temporal sampler
# (``options.times``: rows sorted by time) the prefix of edges whose time is ``<=`` the tree's
# seed time, found by binary search. A prefix of a row draws exactly as a shorter row: the
# weighted tables (``cum`` from the row's start) hold for it unchanged.


def _timed(options) -> bool:
    """At compile time: whether a ``SampleOptions`` type carries times (an array, not the marker)."""
    field = options.types[options.fields.index("times")]
    return isinstance(field, types.Array)


@register_jitable
def split(options, vid):
    """``(node, tree)`` of an id in ``n_id``: ``(vid, 0)`` in shared sampling (``stride == 0``),
    else the virtual id ``tree * stride + node`` split (disjoint sampling)."""
    stride = options.stride
    if stride == 0:
        return vid, vid - vid
    tree = vid // stride
    return vid - tree * stride, tree


def _timed_window(graph, options, node, tree):
    start = graph.indptr[node]
    return start, bisect_right(options.times, start, graph.indptr[node + 1], options.seed_time[tree])


def row_window(graph, options, node, tree):
    """``(start, end)``: the positions row ``node`` may draw from for tree ``tree`` (the whole row
    without times; with times the prefix at or before ``options.seed_time[tree]``)."""
    if options.times.dtype == np.int8:  # the marker (simulator path; compiled code: the overload)
        return graph.indptr[node], graph.indptr[node + 1]
    return _timed_window(graph, options, node, tree)


@overload(row_window)
def _overload_row_window(graph, options, node, tree):
    if _timed(options):
        return _timed_window
    return lambda graph, options, node, tree: (graph.indptr[node], graph.indptr[node + 1])


@register_jitable
def _live_in(graph, node, start, end):
    """Edges of weight > 0 in ``[start, end)`` of row ``node`` (the table when it is the whole row)."""
    if start == graph.indptr[node] and end == graph.indptr[node + 1]:
        return graph.live[node]
    count = 0
    for p in range(start, end):
        if graph.weights[p] > 0:
            count += 1
    return count


@register_jitable
def window_count(graph, options, node, start, end, k):
    """How many edges the window ``[start, end)`` of row ``node`` yields for fanout ``k``
    (:func:`row_count` for the whole row; strategy ``"last"``: ``min(k, available)``)."""
    if k == 0:
        return 0
    a, b = excluded_slice(options, node, start, end)
    avail = _live_in(graph, node, start, end) if options.weighted else end - start
    if b > a:
        avail -= count_excluded(graph, options, a, b)
    if options.last:
        return avail if k < 0 else min(k, avail)
    return count_of(options, k, avail)


@register_jitable
def window_fill(graph, options, node, start, end, k, state, count, pos, out):
    """Write ``count`` (:func:`window_count`'s) sampled positions of the window ``[start, end)`` of
    row ``node`` into ``pos[out:out + count]``: :func:`row_fill`'s draws over the window, or with
    strategy ``"last"`` its ``count`` latest positions (oldest first)."""
    if count == 0:
        return
    replace, weighted = options.replace, options.weighted
    weights, cum = graph.weights, graph.cum
    deg = end - start
    a, b = excluded_slice(options, node, start, end)
    if options.last:
        fill_last(options, start, end, count, pos, out, a, b)
        return
    if b > a:  # edges this row must not draw: a separate path, so other rows draw as sample() does
        available = (_live_in(graph, node, start, end) if weighted else deg) - count_excluded(graph, options, a, b)
        fill_excluding(graph, options, start, deg, k, state, count, available, pos, out, a, b)
        return
    if k < 0 or (not replace and count < k) or (not replace and not weighted and deg <= k):
        _take_all(weights, start, deg, weighted, pos, out)
    elif replace and not weighted:
        for i in range(count):
            pos[out + i] = start + uniform_below(draw(state, i), deg)
    elif replace:
        _weighted_with_replacement(weights, cum, start, deg, state, count, pos, out)
    elif not weighted:
        floyd(start, deg, state, count, pos, out)
    else:
        _successive(weights, cum, start, deg, state, count, pos, out)


@register_jitable
def _take_all(weights, start, deg, weighted, pos, out):
    c = 0
    for p in range(start, start + deg):
        if not weighted or weights[p] > 0:
            pos[out + c] = p
            c += 1


@register_jitable
def _weighted_with_replacement(weights, cum, start, deg, state, count, pos, out):
    # Inverse CDF: the first edge whose running sum exceeds u * total (never a zero-weight
    # edge: its running sum equals its predecessor's).
    end = start + deg
    total = cum[end - 1]
    for i in range(count):
        p = search(cum, start, end, 0.0, uniform_01(draw(state, i)) * total)
        if p == end:  # rounding put the target at the very top: the last live edge
            p = end - 1
            while not weights[p] > 0:
                p -= 1
        pos[out + i] = p


@register_jitable
def _successive(weights, cum, start, deg, state, count, pos, out):
    # Successive sampling: draw i takes a not-yet-chosen live edge with probability
    # proportional to its weight, which is the distribution of A-ES (Efraimidis-Spirakis).
    # It inverts the remaining mass f(p) = cum[p] - (chosen weight at or before p): search
    # with base 0, then re-search with base = chosen mass before the hit until the base stops
    # changing (at most ``i + 1`` searches, no transcendental functions).
    # Needs count < the number of live edges.
    end = start + deg
    remaining = cum[end - 1]
    for i in range(count):
        target = uniform_01(draw(state, i)) * remaining
        base = 0.0
        while True:
            p = search(cum, start, end, base, target)
            mass = chosen_mass(weights, pos, out, i, p, 0.0)
            if mass == base:
                break
            base = mass
        if p == end or not is_free(weights, pos, out, i, p):
            # Rounding only: take the next free live edge (wrapping round; one exists).
            p = min(p, end - 1)
            while not is_free(weights, pos, out, i, p):
                p = p + 1 if p + 1 < end else start
        pos[out + i] = p
        remaining -= np.float64(weights[p])


@register_jitable
def row_finish(graph, options, pos, col, start, stop):
    """Turn positions ``pos[start:stop]`` into neighbours (``col``) and edge ids (in ``pos``).

    The GPU calls it per row; the CPU calls it per chunk of a row-independent pass, where the
    independent loads overlap better than inside the per-row loop.
    """
    indices, edge_ids, has_edge_ids = graph.indices, graph.edge_ids, options.has_edge_ids
    for q in range(start, stop):
        p = pos[q]
        col[q] = indices[p]
        if has_edge_ids:
            pos[q] = edge_ids[p]

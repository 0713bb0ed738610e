"""Link-prediction bodies: negative draws and the positions of excluded edges (CPU drivers here).

Negative draws are keyed like neighbour draws: a negative state per batch
(:func:`negative_state`: the hop state of a reserved hop), a row state per *pair position*, and
draw ``attempt * width + slot`` within it, so a negative depends only on ``(seed, key, pair
position, draw)`` and every device returns the same bits.

- ``binary`` (PyG): negative pair ``j`` draws its source (draw ``2d``) and target (``2d + 1``)
  uniformly over the nodes, ``j`` its position among the negative pairs.
- ``per_source`` / ``triplet`` (DGL's ``Uniform``, PyG's triplets): the ``slot``-th negative of
  positive ``i`` keeps its source and draws a uniform target, keyed by ``i``.
- strict mode redraws a negative that is an edge of the graph, up to :data:`MAX_NEGATIVE_REDRAWS`
  times, and flags one that still is (the output counts them). Testing an edge ``u -> v`` scans
  row ``v``: O(in-degree of the target).
- temporal link batches with node times (``eligible``, a :class:`NegativeTimes`) draw negative
  ``j``'s endpoints among the nodes that exist at its pair's time: uniformly among the first
  ``count[j]`` nodes of the type's time order (the earliest node when none exists yet). Without
  times ``eligible`` is the int8 marker and the bodies compile to the uniform draw.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit, prange, types
from numba.extending import overload, register_jitable

from ..._rng import draw, hop_state, row_state, uniform_below
from .exclusion import count_matches, fill_matches, match_start
from .records import no_exclusions

__all__ = [
    "NegativeTimes",
    "MAX_NEGATIVE_REDRAWS",
    "negative_state",
    "negative_inputs",
    "draw_negative",
    "fill_negative",
    "is_edge",
    "draw_negatives",
    "match_positions",
]

MAX_NEGATIVE_REDRAWS = 16
_NEGATIVE_HOP = (1 << 63) + 0x4E45  # a hop index no neighbourhood uses: separates the two streams


def negative_state(seed: int, key: int) -> np.uint64:
    """The 64-bit state of one batch's negative draws."""
    return hop_state(seed, key, _NEGATIVE_HOP)


def negative_inputs(seed: int, key: int, space, num_nodes: int, eligible) -> tuple:
    """``(state, space, eligible)`` as both drivers' ``negatives`` hand them to their
    ``draw_negatives``: batch ``key``'s :func:`negative_state`, ``space`` ``(num_sources,
    num_targets, row_base)`` as int64 (``None``: the whole graph of ``num_nodes`` nodes), and
    ``eligible`` or the :func:`.records.no_exclusions` marker for untimed negatives."""
    space = (num_nodes, num_nodes, 0) if space is None else space
    eligible = no_exclusions() if eligible is None else eligible
    return negative_state(seed, key), tuple(np.int64(v) for v in space), eligible


@register_jitable
def is_edge(graph, source, target):
    """Whether ``source -> target`` is an edge (``source`` an entry of row ``target``)."""
    for p in range(graph.indptr[target], graph.indptr[target + 1]):
        if graph.indices[p] == source:
            return True
    return False


class NegativeTimes(NamedTuple):
    """Where temporal negatives are drawn: negative ``j``'s source among the ``src_count[j]`` first
    nodes of ``src_order`` (the source type's nodes by time), its target likewise."""

    src_count: Any
    dst_count: Any
    src_order: Any
    dst_order: Any


def pick(bits, n, eligible, j, target):
    """A uniform node in ``[0, n)``, or (``eligible`` a :class:`NegativeTimes`) among those that
    exist at negative ``j``'s time (``target``: the target end)."""
    if not isinstance(eligible, tuple):  # the marker (simulator path; compiled: the overload)
        return uniform_below(bits, n)
    return _pick_timed(bits, n, eligible, j, target)


@register_jitable
def _pick_timed(bits, n, eligible, j, target):
    count = eligible.dst_count[j] if target else eligible.src_count[j]
    index = uniform_below(bits, max(count, 1))
    return eligible.dst_order[index] if target else eligible.src_order[index]


@overload(pick)
def _overload_pick(bits, n, eligible, j, target):
    if isinstance(eligible, types.BaseTuple):
        return _pick_timed
    return lambda bits, n, eligible, j, target: uniform_below(bits, n)


@register_jitable
def draw_negative(graph, state, position, slot, width, space, fixed, source, strict, eligible, j):
    """``(source, target, still_an_edge)`` for negative ``slot`` of pair ``position``.

    ``space`` is ``(num_sources, num_targets, row_base)``: sources are drawn in
    ``[0, num_sources)``, targets in ``[0, num_targets)``, and target ``t``'s row is
    ``row_base + t`` (``(n, n, 0)`` for an untyped graph; a typed graph's relation otherwise);
    ``eligible`` narrows both to the nodes existing at negative ``j``'s time (:func:`pick`)."""
    row = row_state(state, position)
    attempts = MAX_NEGATIVE_REDRAWS + 1 if strict else 1
    s, t = source, source
    for attempt in range(attempts):
        d = attempt * width + slot
        if fixed:
            s = source
            t = pick(draw(row, d), space[1], eligible, j, True)
        else:
            s = pick(draw(row, 2 * d), space[0], eligible, j, False)
            t = pick(draw(row, 2 * d + 1), space[1], eligible, j, True)
        if not strict or not is_edge(graph, s, space[2] + t):
            return s, t, False
    return s, t, True


@register_jitable
def fill_negative(graph, state, space, sources, fixed, width, strict, eligible, j, out_src, out_dst, stayed):
    """Write negative ``j``: with ``fixed``, slot ``j % width`` of pair ``j // width`` (source
    ``sources[j // width]``); otherwise pair ``j``. One body for the CPU loop and the GPU thread."""
    if fixed:
        position, slot, source = j // width, j % width, sources[j // width]
    else:
        position, slot, source = j, 0, 0
    s, t, still = draw_negative(graph, state, position, slot, width, space, fixed, source, strict, eligible, j)
    out_src[j] = s
    out_dst[j] = t
    stayed[j] = 1 if still else 0


@njit(parallel=True, cache=True, nogil=True)
def draw_negatives(graph, state, space, sources, fixed, width, strict, eligible, out_src, out_dst, stayed):
    """Fill negatives ``j = 0 .. len(out_dst) - 1`` (:func:`fill_negative`)."""
    for j in prange(out_dst.shape[0]):
        fill_negative(graph, state, space, sources, fixed, width, strict, eligible, j, out_src, out_dst, stayed)


@njit(parallel=True, cache=True, nogil=True)
def match_positions(graph, sources, targets, sorted_rows):
    """Sorted, distinct CSR positions of every edge ``sources[i] -> targets[i]`` (parallel edges
    included): what a link batch excludes. ``sorted_rows``: every row is ascending (binary search)."""
    n = sources.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    firsts = np.empty(n, np.int64)  # each pair's search result, so the fill does not search again
    for i in prange(n):
        firsts[i] = match_start(graph, sources[i], targets[i], sorted_rows)
        offsets[i + 1] = count_matches(graph, sources[i], targets[i], sorted_rows, firsts[i])
    for i in range(n):
        offsets[i + 1] += offsets[i]
    positions = np.empty(offsets[n], np.int64)
    for i in prange(n):
        fill_matches(graph, sources[i], targets[i], sorted_rows, firsts[i], positions, offsets[i])
    return np.unique(positions)

"""GPU kernels of link prediction: the bodies of :mod:`.links` and :mod:`.exclusion`, one thread
per negative or per pair, launched on the current stream through :mod:`gglspeedup._launch`."""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..._launch import device_view, launch_rows, to_host
from .exclusion import count_matches, fill_matches, match_start
from .links import fill_negative

__all__ = ["draw_negatives", "match_positions"]


@cuda.jit(cache=True)
def _negatives_kernel(graph, state, space, sources, fixed, width, strict, eligible, out_src, out_dst, stayed):
    j = cuda.grid(1)
    if j < out_dst.shape[0]:
        fill_negative(graph, state, space, sources, fixed, width, strict, eligible, j, out_src, out_dst, stayed)


@cuda.jit(cache=True)
def _count_matches_kernel(graph, sources, targets, sorted_rows, counts, firsts):
    i = cuda.grid(1)
    if i < sources.shape[0]:
        first = match_start(graph, sources[i], targets[i], sorted_rows)
        firsts[i] = first
        counts[i + 1] = count_matches(graph, sources[i], targets[i], sorted_rows, first)


@cuda.jit(cache=True)
def _fill_matches_kernel(graph, sources, targets, sorted_rows, firsts, offsets, positions):
    i = cuda.grid(1)
    if i < sources.shape[0]:
        fill_matches(graph, sources[i], targets[i], sorted_rows, firsts[i], positions, offsets[i])


def draw_negatives(device, graph, state, space, sources, fixed, width, strict, count, eligible):
    """``(src, dst, stayed)`` device arrays of ``count`` negatives (see :func:`.links.draw_negatives`)."""
    xp = device.xp
    out_src = xp.empty(count, dtype=np.int64)
    out_dst = xp.empty(count, dtype=np.int64)
    stayed = xp.empty(count, dtype=np.int8)
    eligible = device_view(eligible)
    launch_rows(
        _negatives_kernel,
        device,
        count,
        graph,
        state,
        space,
        sources,
        fixed,
        width,
        strict,
        eligible,
        out_src,
        out_dst,
        stayed,
    )
    return out_src, out_dst, stayed


def match_positions(device, graph, sources, targets, sorted_rows):
    """Sorted, distinct CSR positions of the edges ``sources[i] -> targets[i]`` (device array)."""
    xp = device.xp
    counts = xp.zeros(len(sources) + 1, dtype=np.int64)
    firsts = xp.empty(len(sources), dtype=np.int64)  # each pair's search result, for the fill
    launch_rows(_count_matches_kernel, device, len(sources), graph, sources, targets, sorted_rows, counts, firsts)
    offsets = xp.cumsum(counts)
    total = int(to_host(offsets[-1:])[0]) if len(sources) else 0  # sync: how many positions
    positions = xp.empty(total, dtype=np.int64)
    if total:
        launch_rows(
            _fill_matches_kernel, device, len(sources), graph, sources, targets, sorted_rows, firsts, offsets, positions
        )
    return xp.unique(positions)

"""Binary search over a sorted range, compiled by Numba for the CPU and CUDA: shared by every kernel.

The samplers (:mod:`gglspeedup.sampling._kernels.draws`: weighted draws, exclusion lookups) and the
attention patterns (:mod:`gglspeedup.attention.sequence._kernels.pattern_rows`: global-token and window
bounds) search with these same two functions.
"""

from __future__ import annotations

from numba.extending import register_jitable

__all__ = ["bisect_left", "bisect_right"]


@register_jitable
def bisect_left(array, lo, hi, value):
    """First ``i`` in ``[lo, hi)`` with ``array[i] >= value`` (``hi`` if none); ``array`` sorted."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if array[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


@register_jitable
def bisect_right(array, lo, hi, value):
    """First ``i`` in ``[lo, hi)`` with ``array[i] > value`` (``hi`` if none); ``array`` sorted."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if array[mid] <= value:
            lo = mid + 1
        else:
            hi = mid
    return lo

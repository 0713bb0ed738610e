"""The CUDA gather driver: device-cache rows and pinned-host rows in one launch.

For each output row ``i`` the kernel reads ``loc = location[ids[i]]``: ``loc >= 0`` is a slot of
the device table, ``loc < 0`` is row ``-1 - loc`` of the pinned host table, read in place over
PCIe (UVA zero-copy, never a host-side gather and copy). A group of ``group`` consecutive threads
(a warp, or a power-of-two part of one for rows narrower than 32 words) strides over the row's
words, so each group's loads are coalesced. The row copy is :func:`.gather.copy_row`, the same
body the CPU driver runs for outputs it writes through the cache. Importing this module imports
``numba.cuda`` (under ``NUMBA_ENABLE_CUDASIM=1``, its simulator).
"""

from __future__ import annotations

from numba import cuda

from .gather import copy_row

__all__ = ["gather_two_tier"]

# The same Python body as the CPU driver's row copy, compiled as a CUDA device function. (Calling
# the register_jitable overload directly would inline numba-core IR into the CUDA pipeline, which
# numba-cuda 0.30 rejects while compiling for a real GPU.)
copy_row_device = cuda.jit(device=True)(copy_row)


@cuda.jit
def gather_two_tier(device_table, host_table, location, ids, out, group, counters):
    """``out[i] = (device_table or host_table)[row of ids[i]]`` for every ``i``.

    device_table : (num_cached, words) unsigned words; host_table : (num_rows - num_cached, words);
    location : (num_rows,) int64 (slot, or ``-1 - host_row``); ids : (m,) int32/int64 in range;
    out : (m, words); group : power of two dividing the block size; counters : (1,) int64,
    ``counters[0]`` accumulates the rows served from the device table (one atomic per group).
    """
    thread = cuda.grid(1)
    lane = thread % group
    num_groups = cuda.gridsize(1) // group
    hits = 0
    for i in range(thread // group, ids.shape[0], num_groups):
        loc = location[ids[i]]
        if loc >= 0:
            copy_row_device(device_table, loc, out, i, lane, group)
            hits += 1
        else:
            copy_row_device(host_table, -1 - loc, out, i, lane, group)
    if lane == 0 and hits > 0:
        cuda.atomic.add(counters, 0, hits)

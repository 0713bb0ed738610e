"""The CUDA gather driver: device-cache rows and pinned-host rows in one launch.

For each output row ``i`` the kernel reads ``loc = location[ids[i]]``: ``loc >= 0`` is a slot of
the device table, ``loc < 0`` is row ``-1 - loc`` of the pinned host table, read in place over
PCIe (UVA zero-copy, never a host-side gather and copy). A group of ``group`` consecutive threads
(a warp, or a power-of-two part of one for rows narrower than 32 words) strides over the row's
words, so each group's loads are coalesced.

Written for occupancy (``tools/compile_ptx.py --registers`` shows the register count):

- tables and the output arrive as flat 1-D word arrays and every index is unsigned, so an access is
  one multiply-add, with none of the negative-index and 2-D stride arithmetic that had the first
  version at 112-116 registers a thread (two 256-thread blocks per SM); this one uses 56;
- a lane issues four loads before its four stores (:func:`_copy_row`): the compiler cannot prove
  the output does not alias the tables, so in a load-store loop every load waits for the store
  before it;
- the next row's ``location`` is read before the current row is copied, so the dependent
  ``ids -> location -> row`` chain of one row overlaps the copy of the previous one;
- launch bounds of 256 threads and 4 blocks per SM (at most 64 registers, no spills).

:func:`gather_two_tier_checked` is the same loop with each id tested against ``[0, num_rows)`` in
the kernel (``FeatureStore.gather(check="deferred")``): an id outside it gets a row of zeros and is
recorded in a small device flag that the host reads later, without a synchronisation of its own.
It is a kernel of its own so that the unchecked loop keeps no test and no extra argument.

Compiled kernels are cached on disk (``cache=True``). Importing this module imports ``numba.cuda``
(under ``NUMBA_ENABLE_CUDASIM=1``, its simulator).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..._config import cuda_sim_enabled

__all__ = ["gather_two_tier", "gather_two_tier_checked", "BLOCK_THREADS", "BAD_ROW", "NO_BAD_KEY"]

BLOCK_THREADS = 256
# At least 4 resident 256-thread blocks per SM (<= 64 registers a thread); the simulator's jit
# takes no launch bounds.
_BOUNDS = {} if cuda_sim_enabled() else {"launch_bounds": (BLOCK_THREADS, 4)}


@cuda.jit(device=True, inline=True)
def _copy_row(table, base, out, out_base, lane, group, words):
    """``out[out_base + j] = table[base + j]`` for ``j = lane, lane + group, ... < words`` (uint64)."""
    twice = group + group
    thrice = twice + group
    j = lane
    while j + thrice < words:
        a = table[base + j]
        b = table[base + j + group]
        c = table[base + j + twice]
        d = table[base + j + thrice]
        out[out_base + j] = a
        out[out_base + j + group] = b
        out[out_base + j + twice] = c
        out[out_base + j + thrice] = d
        j += thrice + group
    while j < words:
        out[out_base + j] = table[base + j]
        j += group


@cuda.jit(cache=True, **_BOUNDS)
def gather_two_tier(device_table, host_table, location, ids, out, words, group, counters):
    """``out[i] = (device_table or host_table)[row of ids[i]]`` for every ``i``.

    device_table : (num_cached * words,) unsigned words, flat; host_table : (host rows * words,),
    flat; location : (num_rows,) int64 (slot, or ``-1 - host_row``); ids : (m,) int32/int64 in
    range; out : (m * words,), flat; words : words per row; group : power of two dividing the
    block size; counters : (1,) int64, ``counters[0]`` accumulates the rows served from the device
    table (one atomic per group).
    """
    thread = cuda.grid(1)
    width = np.uint64(words)
    lanes = np.uint64(group)
    lane = np.uint64(thread % group)
    step = cuda.gridsize(1) // group
    count = ids.shape[0]
    hits = 0
    i = thread // group
    loc = location[ids[i]] if i < count else 0
    while i < count:
        following = i + step
        next_loc = location[ids[following]] if following < count else 0  # in flight during the copy
        out_base = np.uint64(i) * width
        if loc >= 0:
            _copy_row(device_table, np.uint64(loc) * width, out, out_base, lane, lanes, width)
            hits += 1
        else:
            _copy_row(host_table, np.uint64(-1 - loc) * width, out, out_base, lane, lanes, width)
        i = following
        loc = next_loc
    if lane == 0 and hits > 0:
        cuda.atomic.add(counters, 0, hits)


BAD_ROW = np.iinfo(np.int64).min  # the checked kernel's location of an id outside the table
NO_BAD_KEY = np.iinfo(np.int64).max  # flag[0] while no id was out of range


@cuda.jit(device=True, inline=True)
def _zero_row(out, out_base, lane, group, words):
    """``out[out_base + j] = 0`` for ``j = lane, lane + group, ... < words``."""
    j = lane
    while j < words:
        out[out_base + j] = 0
        j += group


@cuda.jit(device=True, inline=True)
def _record_bad(flag, key, row):
    """``flag[0:2] = key, row`` when ``key`` is below ``flag[0]``: the lowest key and its id win.

    ``flag[2]`` is a spin lock (0 free, 1 held), so the two slots always belong to one id: with a
    bare ``atomic.min`` on the key and a store of the id, a later id could store over the winner's.
    Only out-of-range ids get here (the error path). Every access is atomic (coherent in L2)."""
    while cuda.atomic.cas(flag, 2, 0, 1) != 0:
        pass
    if key < cuda.atomic.min(flag, 0, key):
        cuda.atomic.exch(flag, 1, row)
    cuda.threadfence()
    cuda.atomic.exch(flag, 2, 0)


@cuda.jit(device=True, inline=True)
def _checked_location(location, ids, i, limit):
    """``location[ids[i]]``, or :data:`BAD_ROW` when ``ids[i]`` lies outside ``[0, limit)`` (one
    unsigned comparison: a negative id viewed as unsigned is at least ``2**63``)."""
    row = np.int64(ids[i])
    if np.uint64(row) < limit:
        return location[row]
    return BAD_ROW


@cuda.jit(cache=True, **_BOUNDS)
def gather_two_tier_checked(
    device_table, host_table, location, ids, out, words, group, counters, num_rows, flag, key_base
):
    """:func:`gather_two_tier` with each id checked against ``[0, num_rows)`` in the kernel.

    An id outside the range gets a row of zeros (nothing outside the tables is read) and lane 0 of
    its group records ``key_base + i`` and the id in ``flag`` (int64, (3,): lowest key, its id, a
    lock; :func:`_record_bad`), the lowest key winning: the first bad position of the call.
    ``key_base`` is ``call << 32``, so over several calls the earliest call's first bad id wins.
    """
    thread = cuda.grid(1)
    width = np.uint64(words)
    lanes = np.uint64(group)
    lane = np.uint64(thread % group)
    step = cuda.gridsize(1) // group
    limit = np.uint64(num_rows)
    count = ids.shape[0]
    hits = 0
    i = thread // group
    loc = _checked_location(location, ids, i, limit) if i < count else 0
    while i < count:
        following = i + step
        next_loc = _checked_location(location, ids, following, limit) if following < count else 0
        out_base = np.uint64(i) * width
        if loc >= 0:
            _copy_row(device_table, np.uint64(loc) * width, out, out_base, lane, lanes, width)
            hits += 1
        elif loc != BAD_ROW:
            _copy_row(host_table, np.uint64(-1 - loc) * width, out, out_base, lane, lanes, width)
        else:
            _zero_row(out, out_base, lane, lanes, width)
            if lane == 0:
                _record_bad(flag, key_base + i, np.int64(ids[i]))
        i = following
        loc = next_loc
    if lane == 0 and hits > 0:
        cuda.atomic.add(counters, 0, hits)

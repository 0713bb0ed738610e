"""GPU relabelling: global node ids -> positions in ``n_id``, first appearance first.

The stream of one hop is ``n_id`` (the targets, positions ``0 .. T-1``) followed by the sampled
neighbours (positions ``T .. T+E-1``). Three launches make the result independent of thread
scheduling:

1. insert every stream element into an open-addressing hash table (atomic CAS on the key) and
   record the smallest stream position of each key (atomic min);
2. flag the neighbours whose position is their key's first position (new nodes), prefix-sum the
   flags (device ``cumsum``);
3. each neighbour reads its key's first position: below ``T`` it is already in ``n_id`` at that
   position; otherwise its local id is ``T + rank`` of that first position, and the first
   occurrence writes the node into ``n_id``.

The CPU driver produces the same numbering with a serial scan over a dense map.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .rng import mix64

__all__ = ["relabel"]

_EMPTY = -1
_NO_POSITION = np.iinfo(np.int64).max


@cuda.jit(device=True)
def _home_slot(node, mask):
    return np.int64(mix64(np.uint64(node)) & np.uint64(mask))


@cuda.jit(device=True)
def _find(table_keys, node, mask):
    slot = _home_slot(node, mask)
    while table_keys[slot] != node:
        slot = (slot + 1) & mask
    return slot


@cuda.jit(cache=True)
def _insert_kernel(n_id, col, table_keys, table_pos, mask):
    p = cuda.grid(1)
    num_targets = n_id.shape[0]
    if p < num_targets + col.shape[0]:
        node = n_id[p] if p < num_targets else col[p - num_targets]
        slot = _home_slot(node, mask)
        while True:
            old = cuda.atomic.cas(table_keys, slot, _EMPTY, node)
            if old == _EMPTY or old == node:
                cuda.atomic.min(table_pos, slot, p)
                break
            slot = (slot + 1) & mask


@cuda.jit(cache=True)
def _flag_kernel(col, num_targets, table_keys, table_pos, mask, flags):
    j = cuda.grid(1)
    if j < col.shape[0]:
        slot = _find(table_keys, col[j], mask)
        flags[j] = 1 if table_pos[slot] == num_targets + j else 0


@cuda.jit(cache=True)
def _assign_kernel(col, num_targets, table_keys, table_pos, mask, ranks, src, n_id_next):
    j = cuda.grid(1)
    if j < col.shape[0]:
        node = col[j]
        first = table_pos[_find(table_keys, node, mask)]
        if first < num_targets:
            src[j] = first
        else:
            local = num_targets + ranks[first - num_targets] - 1
            src[j] = local
            if first == num_targets + j:
                n_id_next[local] = node


def relabel(xp, launch, n_id, col, src):
    """Write local source ids into ``src`` and return ``n_id`` extended by the new nodes.

    ``xp`` is the device array module, ``launch(kernel, n, *args)`` launches ``n`` threads.
    ``n_id`` (T,) and ``col`` (E,) are int64 device arrays; ``src`` (E,) is written.
    """
    num_targets, num_edges = int(n_id.shape[0]), int(col.shape[0])
    if num_edges == 0:
        return n_id
    capacity = 16
    while capacity < 2 * (num_targets + num_edges):
        capacity *= 2
    mask = capacity - 1
    table_keys = xp.full(capacity, _EMPTY, dtype=np.int64)
    table_pos = xp.full(capacity, _NO_POSITION, dtype=np.int64)
    launch(_insert_kernel, num_targets + num_edges, n_id, col, table_keys, table_pos, mask)
    flags = xp.empty(num_edges, dtype=np.int64)
    launch(_flag_kernel, num_edges, col, num_targets, table_keys, table_pos, mask, flags)
    ranks = xp.cumsum(flags)
    num_new = int(ranks[-1])  # sync: the size of the next n_id
    n_id_next = xp.empty(num_targets + num_new, dtype=np.int64)
    n_id_next[:num_targets] = n_id
    launch(_assign_kernel, num_edges, col, num_targets, table_keys, table_pos, mask, ranks, src, n_id_next)
    return n_id_next

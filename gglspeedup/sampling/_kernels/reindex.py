"""GPU relabelling: global node ids -> positions in ``n_id``, first appearance first.

The *stream* of one hop is ``n_id`` (the targets, positions ``0 .. T-1``) followed by the hop's
neighbour slots (positions ``T + e``). A slot ``e`` is either a sampled neighbour or, in the
padded layout of a bounded hop (row ``i`` owns slots ``i*k .. i*k + k - 1``), unused; padding keeps
the order of the sampled neighbours, so "first appearance" is the same as in the packed order.

1. While filling its row, each thread inserts its target and its neighbours into an
   open-addressing hash table (:func:`insert`: a read first, then an atomic CAS on the key only
   for a new key; the smallest stream position per key by ``atomic.min``, skipped when the stored
   one is already smaller, so a hub seen by thousands of rows costs reads, not atomics) and
   records each element's slot (``slot_of``, -1 for an unused slot).
2. :func:`flag_kernel` marks the neighbours whose position is their key's first position (new
   nodes); a device ``cumsum`` ranks them.
3. :func:`compact_kernel` writes each sampled edge to its packed place: the source's local id (a
   target's position, or ``T + rank`` for a new node, whose first occurrence also writes it into
   ``n_id``), and in the padded layout the target and the edge id too.

The result does not depend on thread scheduling; the CPU driver produces the same numbering with
a serial scan over a dense map.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..._rng import mix64

__all__ = ["EMPTY", "NO_POSITION", "table_capacity", "hop_arrays", "insert", "flag_kernel", "compact_kernel"]

EMPTY = -1
NO_POSITION = np.iinfo(np.int64).max


def table_capacity(elements: int) -> int:
    """Hash slots for ``elements`` stream elements: a power of two, at least twice as many."""
    capacity = 16
    while capacity < 2 * elements:
        capacity *= 2
    return capacity


def hop_arrays(xp, num_known: int, slots: int):
    """``(capacity, keys, first, slot_of, pos, col)``: one hop's hash table over ``num_known``
    known ids and ``slots`` draws (emptied), and the per-element arrays its fill + insert writes."""
    capacity = table_capacity(num_known + slots)
    keys = xp.full(capacity, EMPTY, dtype=np.int64)
    first = xp.full(capacity, NO_POSITION, dtype=np.int64)
    slot_of = xp.empty(num_known + slots, dtype=np.int64)
    return capacity, keys, first, slot_of, xp.empty(slots, dtype=np.int64), xp.empty(slots, dtype=np.int64)


@cuda.jit(device=True)
def _home_slot(node, mask):
    return np.int64(mix64(np.uint64(node)) & np.uint64(mask))


@cuda.jit(device=True)
def insert(keys, first, node, position, mask):
    """Enter ``node`` seen at stream ``position``; returns its slot."""
    slot = _home_slot(node, mask)
    while True:
        current = keys[slot]
        if current == EMPTY:  # free when read: claim it (another thread may have been quicker)
            current = cuda.atomic.cas(keys, slot, EMPTY, node)
            if current == EMPTY:
                current = node
        if current == node:
            break
        slot = (slot + 1) & mask
    if first[slot] > position:  # positions only decrease: a smaller stored one needs no atomic
        cuda.atomic.min(first, slot, position)
    return slot


@cuda.jit(cache=True)
def flag_kernel(slot_of, first, num_targets, flags):
    """``flags[e] = 1`` when neighbour slot ``e`` holds the first occurrence of a new node."""
    e = cuda.grid(1)
    if e < flags.shape[0]:
        slot = slot_of[num_targets + e]
        flags[e] = 1 if slot >= 0 and first[slot] == num_targets + e else 0


@cuda.jit(cache=True)
def compact_kernel(num_targets, lo, k, padded, offsets, pos, col, slot_of, first, ranks, src, dst, e_id, n_id_next):
    """Write neighbour slot ``e``'s edge to its packed place ``q``.

    ``num_targets`` counts the nodes entered before the neighbours (every node of ``n_id``),
    ``lo`` the first of them that drew. Padded layout (``padded``): slot ``e`` belongs to row
    ``e // k`` (node ``lo + e // k``) and goes to ``offsets[row] + e % k``, carrying its edge id
    (``pos``) and target (``dst``, ``e_id`` written here). Packed layout: ``q = e`` and ``dst`` /
    ``e_id`` are already final.
    """
    e = cuda.grid(1)
    if e < slot_of.shape[0] - num_targets:
        slot = slot_of[num_targets + e]
        if slot >= 0:
            if padded:
                row = e // k
                q = offsets[row] + e - row * k
                e_id[q] = pos[e]
                dst[q] = lo + row
            else:
                q = e
            position = first[slot]
            if position < num_targets:
                src[q] = position
            else:
                local = num_targets + ranks[position - num_targets] - 1
                src[q] = local
                if position == num_targets + e:
                    n_id_next[local] = col[e]

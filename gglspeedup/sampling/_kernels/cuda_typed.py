"""Typed (heterogeneous) sampling on a CUDA device: the typed hop of :mod:`.typed`, one thread per target.

A call keeps every type's ``n_id`` in one device array of typed ids (``type_base[t] + id``), the
types one after another (``known``), and each hop's small per-relation values in one host table
(:func:`.typed_hops.relation_table`), filled twice: for the draws, and after the hop's sync
(:func:`.typed_hops.after_sync`). The host fills the next hop's draw table after this hop's sync
too, and both go up in one upload: a call of ``H`` hops makes ``H + 1`` uploads. A hop whose
fanouts are all bounded (``k >= 0``) is the untyped hop of :mod:`.cuda` over typed ids: target
``j`` of relation ``r`` owns ``k_r`` slots (relation-major, so slot order is the CPU's edge
order), and the hop is four launches and **one** sync:

1. :func:`_typed_fill_insert_kernel` enters every known node in the relabel hash table
   (:mod:`.reindex`), and each target draws and finishes its row into its slots (local source
   ids become typed ids, edge ids relation-local) and enters its sources;
2. :func:`~.reindex.flag_kernel` marks the first occurrence of each new node, in the same array
   as the rows' counts (counts, then flags); one ``cumsum`` over it gives the rows' edge offsets
   and the new nodes' ranks (offset by the hop's edge count, which the kernels subtract);
3. :func:`_typed_sizes_kernel` gathers each relation's edge offset and new-node rank and the
   corrupt-id flag into one array, read back once (the sync);
4. :func:`_typed_compact_kernel` writes every edge into its relation's ``(2, E_r)`` block (the
   source's position in its type's ``n_id``, the target's position, the edge id), the new nodes
   grouped by type, and the next ``known`` (each type's nodes, then its new ones).

A hop with an unbounded relation (``k == -1``) counts first (:func:`_typed_count_kernel`, a
``cumsum``, one sync for the edge count) and fills packed slots: five launches, two syncs. New
nodes are numbered within their type in order of first appearance, the order of the CPU's serial
relabel, so the output is bit-identical.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..._integrity import relation_spans
from ..._launch import launch_rows, to_host
from ..._rng import row_state
from .cuda import CUDADriver
from .records import Drawn
from .reindex import flag_kernel, hop_arrays, insert
from .rows import row_finish, row_window, split, window_count, window_fill
from .typed_hops import (  # the relation table's rows, then the host helpers
    BLOCK,
    DST,
    DST_BASE,
    EDGE_BASE,
    EDGE_OFF,
    GROUP,
    KNOWN_T,
    NEW_SHIFT,
    ROW_BASE,
    SEG,
    SHIFT_T,
    SLOT,
    SRC_BASE,
    SRC_COUNT,
    SRC_KNOWN,
    SRC_LEN,
    SRC_NEXT,
    STATE,
    TGT,
    K,
    TypedHop,
    after_sync,
    plan_states,
    relation_table,
    split_types,
    virtual_seeds,
)

__all__ = ["TypedCUDADriver"]


@cuda.jit(device=True)
def _last_at_most(table, field, lo, hi, x):
    """The largest ``i`` in ``[lo, hi)`` with ``table[field, i] <= x`` (the row non-decreasing,
    ``table[field, lo] <= x``): the relation (or type) whose bounds hold ``x``."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if table[field, mid] <= x:
            lo = mid
        else:
            hi = mid
    return lo


@cuda.jit(device=True)
def _row_at_most(offsets, lo, hi, x):
    """The largest ``j`` in ``[lo, hi)`` with ``offsets[j] <= x``: the target whose packed edges hold ``x``."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offsets[mid] <= x:
            lo = mid
        else:
            hi = mid
    return lo


@cuda.jit(device=True)
def _target(options, known, table, num_relations, j):
    """``(r, node, tree)`` of target ``j`` of a hop: its relation and its (local, split) node."""
    r = _last_at_most(table, SEG, 0, num_relations, j)
    local = known[table[TGT, r] + j - table[SEG, r]] - table[DST_BASE, r]
    node, tree = split(options, local)
    return r, node, tree


@cuda.jit(device=True)
def _ranks_before(ranks, origin, e):
    """New nodes among slots ``0 .. e - 1`` (``ranks`` the inclusive ``cumsum`` of the flags plus
    ``origin[0]``)."""
    return ranks[e - 1] - origin[0] if e > 0 else 0


@cuda.jit(cache=True)
def _typed_count_kernel(graph, options, known, table, num_relations, counts):
    j = cuda.grid(1)
    if j < table[SEG, num_relations]:
        r, node, tree = _target(options, known, table, num_relations, j)
        row = table[ROW_BASE, r] + node
        start, end = row_window(graph, options, row, tree)
        counts[j + 1] = window_count(graph, options, row, start, end, table[K, r])


@cuda.jit(cache=True)
def _typed_fill_insert_kernel(
    graph, options, known, table, states, num_relations, padded, offsets, counts, pos, col, keys, first, slot_of,
    mask, corrupt,
):  # fmt: skip
    """Thread ``i < len(known)`` enters known node ``i``; thread ``len(known) + j`` draws target
    ``j`` into its slots (bounded: ``k_r`` from ``SLOT[r] + (j - SEG[r]) * k_r``, its count in
    ``counts[j + 1]``; packed: ``offsets[j] ..``), finishes them (``col``: typed source ids,
    ``pos``: relation-local edge ids), enters each source at stream position ``len(known) + slot``
    and marks unused slots ``-1`` in ``slot_of``. Disjoint (``options.stride > 0``): ids are
    virtual and a source's typed id carries its target's tree. A source id outside
    ``[0, SRC_COUNT[r])`` (a corrupt graph) sets ``corrupt[0]``, read with the hop's sizes."""
    i = cuda.grid(1)
    num_known = known.shape[0]
    if i < num_known:
        slot_of[i] = insert(keys, first, known[i], i, mask)
    elif i < num_known + table[SEG, num_relations]:
        j = i - num_known
        r, node, tree = _target(options, known, table, num_relations, j)
        row = table[ROW_BASE, r] + node
        k = table[K, r]
        window_start, window_end = row_window(graph, options, row, tree)
        if padded:
            count = window_count(graph, options, row, window_start, window_end, k)
            counts[j + 1] = count
            start = table[SLOT, r] + (j - table[SEG, r]) * k
        else:
            start = offsets[j]
            count = offsets[j + 1] - start
        window_fill(
            graph, options, row, window_start, window_end, k, row_state(states[STATE, r], node), count, pos, start
        )
        row_finish(graph, options, pos, col, start, start + count)
        base = table[SRC_BASE, r] + tree * options.stride
        bound = table[SRC_COUNT, r]
        for q in range(start, start + count):
            if col[q] < 0 or col[q] >= bound:  # entered in the table (harmless), flagged
                corrupt[0] = 1
            col[q] += base
            slot_of[num_known + q] = insert(keys, first, col[q], num_known + q, mask)
            if not options.has_edge_ids:
                pos[q] -= table[EDGE_BASE, r]
        if padded:
            for q in range(start + count, start + k):
                slot_of[num_known + q] = -1


@cuda.jit(cache=True)
def _typed_sizes_kernel(table, num_relations, padded, offsets, ranks, origin, corrupt, sizes):
    """``sizes``: each relation's first edge (``R + 1``), the new nodes before its slots
    (``R + 1``), then the corrupt-id flag: everything the host reads after a hop's draws
    (``ranks - origin[0]``: the inclusive ``cumsum`` of the new-node flags)."""
    r = cuda.grid(1)
    if r <= num_relations:
        block = table[SLOT, r] if padded else offsets[table[SEG, r]]
        sizes[r] = offsets[table[SEG, r]]
        sizes[num_relations + 1 + r] = _ranks_before(ranks, origin, block)
        if r == 0:
            sizes[2 * num_relations + 2] = corrupt[0]


@cuda.jit(cache=True)
def _typed_compact_kernel(
    known, table, num_relations, num_types, padded, offsets, pos, col, slot_of, first, ranks, origin, edges, e_id,
    grouped, known_next,
):  # fmt: skip
    """Thread ``e`` moves known node ``e`` to the next ``known`` and writes slot ``e``'s edge into
    its relation's ``(2, E_r)`` block of ``edges`` (row 0 the source's position in its type's
    ``n_id``, row 1 the target's) and its edge id; the first occurrence of a new node also writes
    it into ``grouped`` (local id) and the next ``known`` (typed id). ``ranks - origin[0]`` is the
    inclusive ``cumsum`` of the new-node flags."""
    e = cuda.grid(1)
    num_known = known.shape[0]
    if e < num_known:
        t = _last_at_most(table, KNOWN_T, 0, num_types, e)
        known_next[e + table[SHIFT_T, t]] = known[e]
    if e < slot_of.shape[0] - num_known:
        slot = slot_of[num_known + e]
        if slot >= 0:
            r = _last_at_most(table, BLOCK, 0, num_relations, e)
            if padded:
                k = table[K, r]
                local_target = (e - table[BLOCK, r]) // k
                j = table[SEG, r] + local_target
                q = offsets[j] + e - table[BLOCK, r] - local_target * k
            else:
                j = _row_at_most(offsets, table[SEG, r], table[SEG, r + 1], e)
                q = e
            edge_first = table[EDGE_OFF, r]
            width = table[EDGE_OFF, r + 1] - edge_first
            position = first[slot]
            if position < num_known:
                source = position - table[SRC_KNOWN, r]
            else:
                p = position - num_known  # the slot of its first occurrence (same source type)
                rank = ranks[p] - origin[0] + table[NEW_SHIFT, _last_at_most(table, BLOCK, 0, num_relations, p)]
                source = table[SRC_LEN, r] + rank
                if p == e:
                    grouped[table[GROUP, r] + rank] = col[e] - table[SRC_BASE, r]
                    known_next[table[SRC_NEXT, r] + rank] = col[e]
            edges[2 * edge_first + q - edge_first] = source
            edges[2 * edge_first + width + q - edge_first] = table[DST, r] + j - table[SEG, r]
            e_id[q] = pos[e]


class TypedCUDADriver:
    """Typed sampling on one CUDA device (real or simulated); the interface of
    :class:`.typed.TypedCPUDriver`. The untyped :class:`.cuda.CUDADriver` over the same stacked
    graph (:attr:`flat`) holds the records and draws link negatives and exclusions."""

    def __init__(self, stacked, options, seed: int, type_counts, device, times=None, names=None):
        from .cpu import weight_tables

        self.names = names  # (edge types, node types), for error messages
        self.flat = CUDADriver(stacked, options, seed, device, weight_tables=weight_tables, times=times)
        self.device, self.seed = device, int(seed)
        self.graph, self.options = self.flat.graph, self.flat.options
        counts = np.asarray(type_counts, np.int64)
        self.type_base = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self._tables = (None, None, None)  # (plan, span, relation tables): one tuple, read whole by threads

    def _relation_tables(self, plan, span: int) -> np.ndarray:
        """The plan's :func:`relation_table` (typed bases ``t * span`` for a disjoint call, ``span``
        > 0), made again only when the plan or the span changes."""
        made_for, made_span, tables = self._tables
        if made_for is not plan or made_span != span:
            type_base = np.arange(len(self.type_base), dtype=np.int64) * span if span else self.type_base
            tables = relation_table(
                plan, type_base, np.diff(self.type_base), self.flat._slot_limit, plan.fanouts.shape[1]
            )
            self._tables = (plan, span, tables)
        return tables

    def sample(self, seeds: list, fanouts, key: int, options=None) -> Drawn:
        """As :meth:`.typed.TypedCPUDriver.sample`, with arrays of ``device.xp``. A disjoint call
        (``options.stride > 0``) runs the same kernels over virtual local ids, its types' ids kept
        apart in the relabel by a typed base of ``type * span`` (:func:`.typed.virtual_seeds`)."""
        plan, xp = fanouts, self.device.xp
        with self.device:
            options = self.flat._record(options)
            corrupt = xp.zeros(1, dtype=np.int64)  # set by a fill meeting a source id outside its type
            type_base, span = self.type_base, 0
            if options.stride:
                seeds, span = virtual_seeds(xp, seeds, options.stride)
                type_base = np.arange(len(self.type_base), dtype=np.int64) * span
            tables = self._relation_tables(plan, span)
            lengths = np.array([int(ids.shape[0]) for ids in seeds], np.int64)
            parts = [ids if base == 0 else ids + int(base) for ids, base in zip(seeds, type_base.tolist()) if len(ids)]
            known = parts[0] if len(parts) == 1 else xp.concatenate(parts) if parts else xp.empty(0, np.int64)
            known = xp.ascontiguousarray(known, dtype=np.int64)
            starts = np.zeros(len(lengths), np.int64)
            hops = []
            table = self._hop_table(plan, tables, key, 0, lengths, starts)
            device_table = None if table is None else xp.asarray(table)  # hop 0's upload before its draws
            for hop in range(plan.fanouts.shape[1]):
                call = (plan, tables, key, hop)
                known, hop_out, lengths, starts, table, device_table = self._hop(
                    options, call, table, device_table, known, lengths, starts, corrupt
                )
                hops.append(hop_out)
            bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()
            n_id = [
                known[lo:hi] if base == 0 else known[lo:hi] - base
                for lo, hi, base in zip(bounds, bounds[1:], type_base.tolist())
            ]
            if options.stride:
                return split_types(n_id, hops, options.stride)
        return Drawn(n_id, hops)

    def _hop_table(self, plan, tables, key: int, hop: int, lengths, starts):
        """Hop ``hop``'s relation table for this call (host; None past the last hop): its
        call-independent rows, ``STATE``, and the rows ``lengths`` (each type's ``n_id`` size) and
        ``starts`` (where each type's frontier begins, ``expand="new"``) give before its draws. A
        bounded hop whose slots cannot fit on the device is refused here, before its kernels."""
        if hop >= plan.fanouts.shape[1]:
            return None
        num_relations = len(plan.src_type)
        table = tables[hop].copy()
        table[STATE, :num_relations] = plan_states(plan, self.seed, key, hop).view(np.int64)
        known_start = np.concatenate(([0], np.cumsum(lengths)))
        dst = plan.dst_type
        ks = table[K, :num_relations]
        table[SEG, 1 : num_relations + 1] = np.cumsum(np.where(ks == 0, 0, lengths[dst] - starts[dst]))
        table[TGT, :num_relations] = known_start[dst] + starts[dst]
        table[DST, :num_relations] = starts[dst]
        if (ks >= 0).all():
            table[SLOT, 1 : num_relations + 1] = np.cumsum(np.diff(table[SEG, : num_relations + 1]) * ks)
            num_targets = int(table[SEG, num_relations])
            self._check_slots(int(table[SLOT, num_relations]), int(ks.max(initial=0)), num_targets, hop)
        return table

    def _hop(self, options, call, table, device_table, known, lengths, starts, corrupt):
        """One hop: ``(known, TypedHop, lengths, starts, table, device_table)``, the last four for
        the next hop (its tables None after the last). ``call`` is ``(plan, relation tables, key,
        hop)``; ``table`` this hop's relation table (:meth:`_hop_table`), ``device_table`` its
        upload. The table the compact kernel reads, filled after the hop's sync, goes up in one
        upload with the next hop's."""
        device, xp = self.device, self.device.xp
        plan, tables, key, hop = call
        num_relations, num_types = len(plan.src_type), len(lengths)
        known_start = np.concatenate(([0], np.cumsum(lengths)))
        ks = table[K, :num_relations]
        num_targets, num_known = int(table[SEG, num_relations]), int(known.shape[0])
        padded = bool((ks >= 0).all())

        def following(new_counts):  # the next hop's lengths, starts and table (host)
            next_starts = lengths.copy() if options.expand_new else starts
            next_lengths = lengths + new_counts
            return next_lengths, next_starts, self._hop_table(plan, tables, key, hop + 1, next_lengths, next_starts)

        if padded:
            slots = int(table[SLOT, num_relations])
            # the rows' counts, then the slots' new-node flags: one cumsum scans both
            scan = xp.zeros(num_targets + 1 + slots, dtype=np.int64)
            counts, flags = scan[: num_targets + 1], scan[num_targets + 1 :]
            offsets = counts
        else:
            counts = xp.zeros(num_targets + 1, dtype=np.int64)
            launch_rows(
                _typed_count_kernel,
                device,
                num_targets,
                self.graph,
                options,
                known,
                device_table,
                num_relations,
                counts,
            )
            offsets = xp.cumsum(counts)
            slots = int(to_host(offsets[-1:])[0]) if num_targets else 0  # sync: the hop's edge count
        if slots == 0:
            empty = xp.empty(0, dtype=np.int64)
            hop_out = TypedHop(
                (empty, empty, np.zeros(num_relations + 1, np.int64), empty, np.zeros(num_types + 1, np.int64))
            )
            next_lengths, next_starts, next_table = following(np.zeros(num_types, np.int64))
            next_device = None if next_table is None else xp.asarray(next_table)  # the next hop's upload
            return known, hop_out, next_lengths, next_starts, next_table, next_device
        capacity, keys, first, slot_of, pos, col = hop_arrays(xp, num_known, slots)
        launch_rows(
            _typed_fill_insert_kernel, device, num_known + num_targets, self.graph, options, known, device_table,
            device_table.view(np.uint64), num_relations, padded, offsets, counts, pos, col, keys, first, slot_of,
            capacity - 1, corrupt,
        )  # fmt: skip
        if padded:
            launch_rows(flag_kernel, device, slots, slot_of, first, num_known, flags)
            scanned = xp.cumsum(scan)
            offsets, ranks = scanned[: num_targets + 1], scanned[num_targets + 1 :]
            origin = scanned[num_targets : num_targets + 1]  # the hop's edge count, ahead of every rank
        else:
            flags = xp.empty(slots, dtype=np.int64)
            launch_rows(flag_kernel, device, slots, slot_of, first, num_known, flags)
            ranks, origin = xp.cumsum(flags), counts[:1]  # counts[0] stays 0
        sizes = xp.empty(2 * num_relations + 3, dtype=np.int64)
        launch_rows(
            _typed_sizes_kernel,
            device,
            num_relations + 1,
            device_table,
            num_relations,
            padded,
            offsets,
            ranks,
            origin,
            corrupt,
            sizes,
        )
        sizes = to_host(sizes)  # sync: every relation's edges and new nodes, and the corrupt flag
        if sizes[-1]:
            spans = relation_spans(
                plan.edge_base, plan.src_type, np.diff(self.type_base), self.flat.num_edges, self.names
            )
            raise self.flat.corrupt_error(spans)
        edge_offsets = sizes[: num_relations + 1].astype(np.int64)
        new_counts = after_sync(plan, table, sizes[num_relations + 1 : -1], known_start, lengths, padded, edge_offsets)
        type_offsets = table[SHIFT_T, : num_types + 1].copy()
        num_edges, num_new = int(edge_offsets[-1]), int(type_offsets[-1])
        next_lengths, next_starts, next_table = following(new_counts)
        if next_table is None:
            device_table, next_device = xp.asarray(table), None  # the hop's one upload after its sync
        else:  # one upload after the sync: this hop's table for the compact kernel, the next hop's for its draws
            both = xp.asarray(np.concatenate((table, next_table)))  # (2 * FIELDS, W): two C-contiguous halves
            device_table, next_device = both[: len(table)], both[len(table) :]
        edges = xp.empty(2 * num_edges, dtype=np.int64)
        e_id = xp.empty(num_edges, dtype=np.int64)
        grouped = xp.empty(num_new, dtype=np.int64)
        known_next = xp.empty(num_known + num_new, dtype=np.int64)
        launch_rows(
            _typed_compact_kernel, device, max(slots, num_known), known, device_table, num_relations, num_types, padded,
            offsets, pos, col, slot_of, first, ranks, origin, edges, e_id, grouped, known_next,
        )  # fmt: skip
        hop_out = TypedHop((edges, e_id, edge_offsets, grouped, type_offsets))
        return known_next, hop_out, next_lengths, next_starts, next_table, next_device

    def _check_slots(self, slots: int, k: int, num_targets: int, hop: int) -> None:
        """Refuse, before its kernels, a bounded hop whose slots cannot fit in the device's free
        memory (as :meth:`.cuda.CUDADriver._check_slots`)."""
        self.flat._check_slots(num_targets, k, -(-slots // max(num_targets, 1)), hop)

    def negatives(self, *args, **kwargs):
        return self.flat.negatives(*args, **kwargs)

    def excluded_positions(self, sources, rows):
        return self.flat.excluded_positions(sources, rows)

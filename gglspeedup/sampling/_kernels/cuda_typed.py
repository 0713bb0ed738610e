"""Typed (heterogeneous) sampling on a CUDA device: the typed hop of :mod:`.typed`, one thread per target.

A hop is two launches over every relation's targets at once (the layout of :mod:`.typed`: each
target with its relation's row base, fanout and RNG state): a count (:func:`_typed_count_kernel`,
then a ``cumsum`` and one sync for the edge offsets of each relation), and a fill
(:func:`_typed_fill_kernel`) that draws, finishes and writes each edge's target position, its
source's id in the typed id space (``type_base[src type] + local id``) and its relation-local edge
id. The relabel (:func:`relabel_typed`) is the untyped hop's hash table (:mod:`.reindex`) over
typed ids: the first appearance of every source among the nodes already in ``n_id`` and the hop's
edges, new nodes ranked within their type by that position. A hop synchronises twice, both marked
and counted: each relation's edge count, and the new nodes per type. The draws are the CPU's row
bodies, the order the CPU's serial relabel produces, so the output is bit-identical.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..._integrity import relation_spans
from ..._launch import launch_rows, to_host
from ..._rng import row_state
from .cuda import CUDADriver
from .records import Drawn
from .reindex import EMPTY, NO_POSITION, flag_kernel, insert, table_capacity
from .rows import row_finish, row_window, split, window_count, window_fill
from .typed_hops import TypedHop, extend, frontier, hop_targets, plan_states, shift_targets, split_types, virtual_seeds

__all__ = ["TypedCUDADriver", "relabel_typed"]


@cuda.jit(cache=True)
def _typed_count_kernel(graph, options, targets, rel_of, row_base, ks, counts):
    i = cuda.grid(1)
    if i < targets.shape[0]:
        r = rel_of[i]
        node, tree = split(options, targets[i])
        start, end = row_window(graph, options, row_base[r] + node, tree)
        counts[i + 1] = window_count(graph, options, row_base[r] + node, start, end, ks[r])


@cuda.jit(cache=True)
def _typed_fill_kernel(
    graph,
    options,
    targets,
    rel_of,
    segments,
    row_base,
    ks,
    states,
    src_base,
    edge_base,
    offsets,
    pos,
    col,
    dst,
    src_count,
    corrupt,
):
    """Target ``i``: draw into ``pos[offsets[i]:offsets[i + 1]]``, finish (``col``: local source
    ids, then their typed ids; ``pos``: relation-local edge ids) and write its position ``dst``.
    Disjoint (``options.stride > 0``): targets are virtual local ids and the sources' typed ids
    carry the target's tree (``src_base[r] + tree * stride + id``). A source id outside
    ``[0, src_count[r])`` (a corrupt graph) sets ``corrupt[0]``, read with the relabel's sizes."""
    i = cuda.grid(1)
    if i < targets.shape[0]:
        r = rel_of[i]
        node, tree = split(options, targets[i])
        row = row_base[r] + node
        start = offsets[i]
        count = offsets[i + 1] - start
        window_start, window_end = row_window(graph, options, row, tree)
        state = row_state(states[r], node)
        window_fill(graph, options, row, window_start, window_end, ks[r], state, count, pos, start)
        row_finish(graph, options, pos, col, start, start + count)
        base = src_base[r] + tree * options.stride
        bound = src_count[r]
        for q in range(start, start + count):
            if col[q] < 0 or col[q] >= bound:
                corrupt[0] = 1
            col[q] += base
            dst[q] = i - segments[r]
            if not options.has_edge_ids:
                pos[q] -= edge_base[r]


@cuda.jit(cache=True)
def _typed_insert_kernel(known, typed_src, keys, first, slot_of, mask):
    """Stream element ``i`` (the known typed ids, then the hop's sources) into the hash table of
    :mod:`.reindex`: its key's smallest stream position, and its slot in ``slot_of[i]``."""
    i = cuda.grid(1)
    num_known = known.shape[0]
    if i < num_known + typed_src.shape[0]:
        node = known[i] if i < num_known else typed_src[i - num_known]
        slot_of[i] = insert(keys, first, node, i, mask)


def relabel_typed(device, n_id: list, type_base, typed_src, corrupt=None):
    """``(src_local, new_nodes, type_offsets, corrupt)`` for a hop's edges whose sources have typed
    ids ``typed_src``: each source's position in its type's ``n_id`` (extended by the hop's new
    nodes, in order of first appearance, as the CPU's serial relabel does), and the new nodes
    grouped by type as :func:`.typed.sample_typed_hop` groups them (``type_offsets`` on the host).
    ``corrupt`` (optional): a device flag read back in the same synchronisation; the returned
    ``corrupt`` is its value (the rest is then meaningless), ``False`` without one.

    The untyped hop's relabel (:mod:`.reindex`) over typed ids (``type_base[t] + id``): the stream
    is every type's ``n_id`` in type order, then the hop's sources; new nodes are the sources at
    their key's first position, ranked within their type by a per-type running count. Everything
    else is elementwise array code with no data-dependent shape, so the one synchronisation is the
    marked read of the new nodes per type."""
    xp = device.xp
    num_types = len(n_id)
    lengths = np.array([int(ids.shape[0]) for ids in n_id], np.int64)
    num_known, num_edges = int(lengths.sum()), int(typed_src.shape[0])
    if num_edges == 0:
        return typed_src, xp.empty(0, dtype=np.int64), np.zeros(num_types + 1, np.int64), False
    known = xp.concatenate([xp.asarray(ids) + int(type_base[t]) for t, ids in enumerate(n_id)])
    stream = num_known + num_edges
    capacity = table_capacity(stream)
    keys = xp.full(capacity, EMPTY, dtype=np.int64)
    first = xp.full(capacity, NO_POSITION, dtype=np.int64)
    slot_of = xp.empty(stream, dtype=np.int64)
    launch_rows(_typed_insert_kernel, device, stream, known, typed_src, keys, first, slot_of, capacity - 1)
    flags = xp.empty(num_edges, dtype=np.int64)
    launch_rows(flag_kernel, device, num_edges, slot_of, first, num_known, flags)
    bases = xp.asarray(np.asarray(type_base[:num_types], np.int64))  # each type's first typed id
    edge_type = xp.searchsorted(bases[1:], typed_src, side="right")
    rank = xp.zeros(num_edges, dtype=np.int64)  # a new node's place among its type's new nodes
    totals = []
    for t in range(num_types):  # types are few: one running count each, no compaction
        mine = flags * (edge_type == t)
        running = xp.cumsum(mine)
        rank += mine * (running - 1)
        totals.append(running[-1])
    if corrupt is not None:
        totals.append(corrupt[0])
    counts = to_host(xp.stack(totals))  # sync: new nodes per type (the next n_id's shapes)
    if corrupt is not None:
        counts, flagged = counts[:-1], bool(counts[-1])
        if flagged:
            return typed_src, xp.empty(0, dtype=np.int64), np.zeros(num_types + 1, np.int64), True
    type_offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    position = first[slot_of[num_known:]]  # each source's first stream position
    is_known = position < num_known
    start_of_type = xp.asarray(np.concatenate(([0], np.cumsum(lengths)))[:num_types])
    first_edge = xp.where(is_known, 0, position - num_known)  # the first occurrence's edge, if new
    src_local = xp.where(
        is_known, position - start_of_type[edge_type], xp.asarray(lengths)[edge_type] + rank[first_edge]
    )
    num_new = int(type_offsets[-1])
    grouped = xp.empty(num_new + 1, dtype=np.int64)  # the last slot takes every non-first write
    target = xp.where(flags == 1, xp.asarray(type_offsets[:-1])[edge_type] + rank, num_new)
    grouped[target] = typed_src - bases[edge_type]
    return src_local, grouped[:num_new], type_offsets, False


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
        self._uploaded = (None, ())

    def _device_plan(self, plan):
        """The plan's per-relation arrays on the device, uploaded again only when the plan changes."""
        uploaded_for, arrays = self._uploaded  # one tuple: threads read a plan with its own arrays
        if uploaded_for is not plan:
            xp = self.device.xp
            src_count = np.diff(self.type_base)[plan.src_type]  # the bound of each relation's source ids
            arrays = tuple(
                xp.asarray(a) for a in (plan.row_base, self.type_base[plan.src_type], plan.edge_base, src_count)
            )
            self._uploaded = (plan, arrays)
        return arrays

    def sample(self, seeds: list, fanouts, key: int, options=None) -> Drawn:
        """As :meth:`.typed.TypedCPUDriver.sample`, with arrays of ``device.xp``. A disjoint call
        (``options.stride > 0``) runs the same kernels over virtual local ids, its types' ids kept
        apart in the relabel by a typed base of ``type * span`` (:func:`.typed.virtual_seeds`)."""
        plan, xp = fanouts, self.device.xp
        with self.device:
            options = self.flat._record(options)
            row_base, src_base, edge_base, src_count = self._device_plan(plan)
            corrupt = xp.zeros(1, dtype=np.int64)  # set by a fill meeting a source id outside its type
            type_base = self.type_base
            if options.stride:
                seeds, span = virtual_seeds(xp, seeds, options.stride)
                type_base = np.arange(len(self.type_base), dtype=np.int64) * span
                src_base = xp.asarray(np.asarray(type_base)[plan.src_type])
            n_id = [xp.ascontiguousarray(xp.asarray(ids), dtype=np.int64) for ids in seeds]
            hops = []
            starts = [0] * len(n_id)
            for hop in range(plan.fanouts.shape[1]):
                targets, rel_of, segments = hop_targets(plan, frontier(n_id, starts), hop, xp)
                ks = xp.asarray(plan.fanouts[:, hop].copy())
                states = xp.asarray(plan_states(plan, self.seed, key, hop))
                hop_out = self._hop(
                    options, targets, rel_of, segments, (row_base, ks, states, src_base, edge_base, src_count),
                    n_id, type_base, corrupt, plan,
                )  # fmt: skip
                if options.expand_new:
                    shift_targets(plan, hop_out[0], hop_out[2], starts)
                    starts = [len(ids) for ids in n_id]
                n_id = extend(n_id, hop_out[3], hop_out[4], xp)
                hops.append(hop_out)
            if options.stride:
                return split_types(n_id, hops, options.stride)
        return Drawn(n_id, hops)

    def _hop(self, options, targets, rel_of, segments, per_relation, n_id, type_base, corrupt, plan):
        device, graph, xp = self.device, self.graph, self.device.xp
        row_base, ks, states, src_base, edge_base, src_count = per_relation
        num_targets = int(targets.shape[0])
        counts = xp.zeros(num_targets + 1, dtype=np.int64)
        launch_rows(_typed_count_kernel, device, num_targets, graph, options, targets, rel_of, row_base, ks, counts)
        offsets = xp.cumsum(counts)
        edge_offsets = to_host(offsets[xp.asarray(segments)]).astype(np.int64)  # sync: each relation's edges
        num_edges = int(edge_offsets[-1])
        pos = xp.empty(num_edges, dtype=np.int64)
        col = xp.empty(num_edges, dtype=np.int64)
        dst = xp.empty(num_edges, dtype=np.int64)
        if num_edges:
            launch_rows(
                _typed_fill_kernel,
                device,
                num_targets,
                graph,
                options,
                targets,
                rel_of,
                xp.asarray(segments),
                row_base,
                ks,
                states,
                src_base,
                edge_base,
                offsets,
                pos,
                col,
                dst,
                src_count,
                corrupt,
            )
        src_local, new_nodes, type_offsets, flagged = relabel_typed(device, n_id, type_base, col, corrupt)
        if flagged:
            counts = np.diff(self.type_base)
            raise self.flat.corrupt_error(
                relation_spans(plan.edge_base, plan.src_type, counts, self.flat.num_edges, self.names)
            )
        # Relation r's (2, E_r) block starts at 2 * edge_offsets[r]: edge q of it goes to
        # edge_offsets[r] + q (its source) and edge_offsets[r + 1] + q (its target).
        edge = xp.arange(num_edges, dtype=np.int64)
        bounds = xp.asarray(edge_offsets)
        relation = xp.searchsorted(bounds[1:], edge, side="right")
        edges = xp.empty(2 * num_edges, dtype=np.int64)
        edges[bounds[relation] + edge] = src_local
        edges[bounds[relation + 1] + edge] = dst
        return TypedHop((edges, pos, edge_offsets, new_nodes, type_offsets))

    def negatives(self, *args, **kwargs):
        return self.flat.negatives(*args, **kwargs)

    def excluded_positions(self, sources, rows):
        return self.flat.excluded_positions(sources, rows)

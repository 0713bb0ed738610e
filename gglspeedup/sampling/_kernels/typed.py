"""Typed (heterogeneous) sampling on the CPU: every relation of a hop in one kernel call.

The typed graph is one *stacked* CSR (:class:`gglspeedup.HeteroGraph`): relation ``r``'s rows
start at ``row_base[r]``, its entries are local ids of its source type. A hop's targets are laid
out relation by relation (relation ``r``'s are every node of its target type in ``n_id``, in
order), each with its relation's fanout and RNG state (:func:`.rng.relation_state`), and run
through the same row bodies as untyped sampling (:mod:`.rows`): one parallel count, one parallel
fill, then one serial relabel through a single ``global id -> local position`` map over every
type (type ``t``'s node ``i`` at ``type_base[t] + i``), so new nodes enter their type's ``n_id`` in
order of first appearance (relations in order, then targets, then draws).

Each relation's edges are written as one contiguous (2, E_r) block of a flat buffer, so the
per-relation ``edge_index`` handed to the caller is a zero-copy view. The host side of a hop both
typed drivers share (the plan's per-hop helpers, the hop record) is :mod:`.typed_hops`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..._integrity import corrupt_indices_error, relation_spans
from ..._interrupt import interruptible
from ..._intrinsics import prefetch
from ..._parallel import kernel_threads
from ..._rng import row_state
from ..._stop import stop_requested
from ...validation import check_draws
from .blocks import block_rows, draw_buffers, row_blocks
from .cpu import LONG_WORK, CPUDriver, MapPool, map_seeds
from .disjoint import new_table, sample_typed_tree_hop
from .exclusion import row_flagged
from .records import DEGREE_CAP, Drawn, HopPlan, SampleOptions, degree_table, without_exclusions
from .rows import count_of, row_count, row_count_unexcluded, row_fill_split, row_finish
from .typed_hops import frontier, hop_targets, plan_states, record_hop, split_types, typed_work, virtual_seeds

__all__ = ["TypedCPUDriver", "sample_typed_hop"]

_PREFETCH_DISTANCE = 16
_ROW_PREFETCH = 4


class TypedCPUDriver:
    """Typed sampling on the CPU over a stacked graph (see the module docstring).

    Parameters
    ----------
    stacked : CSRGraph
        The typed graph's stacked CSR, host-placed.
    options : SampleOptions
    seed : int
    type_counts : sequence of int
        Nodes per node type, in the graph's node-type order.

    The untyped :class:`~.cpu.CPUDriver` over the same stack (:attr:`flat`) draws negatives and
    finds excluded positions for link batches; its records (weighted tables included) are shared.
    """

    def __init__(self, stacked, options: SampleOptions, seed: int, type_counts, times=None, names=None):
        self.names = names  # (edge types, node types), for error messages
        self.flat = CPUDriver(stacked, options, seed, times=times)
        self.graph, self.options, self.seed = self.flat.graph, self.flat.options, int(seed)
        counts = np.asarray(type_counts, np.int64)
        self.type_base = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.total_nodes = int(self.type_base[-1])
        self.maps = MapPool(self.total_nodes)
        self._degrees = None  # the DegreeTable, built on the first batch (it needs a plan's types)

    def sample(self, seeds: list, fanouts: HopPlan, key: int, options: SampleOptions | None = None) -> Drawn:
        """Sample every hop of a typed batch (:class:`gglspeedup.sampling.drivers.TypedDriver`).

        ``seeds``: one checked int64 host array per node type (empty for types without seeds).
        ``fanouts``: the sampler's :class:`~.records.HopPlan` (per relation: source type, target
        type, row base, edge base, fanouts, keys). ``options`` as in :meth:`.cpu.CPUDriver.sample`. Returns
        :class:`~.records.Drawn`: ``n_id`` one array per type, ``hops`` one :class:`.typed_hops.TypedHop` per
        hop, seed hop first, target positions indexing each type's whole ``n_id`` under either
        hop rule; ``batch`` per type for a disjoint call.
        """
        plan = fanouts
        options = self.options if options is None else options
        if options.stride:
            return self._sample_trees(seeds, plan, key, options)
        plain = without_exclusions(options)
        if self._degrees is None:
            counts = np.diff(self.type_base)
            live = self.graph.live
            self._degrees = degree_table(
                self.graph.indptr, live, options.weighted, plan.dst_type, plan.row_base, counts
            )
        local_map, epoch = self.maps.acquire(sum(len(ids) for ids in seeds))  # one epoch for every type
        n_id = list(seeds)
        hops = []
        with interruptible() as guard, kernel_threads() as region:  # Ctrl-C: see CPUDriver.sample
            for t, ids in enumerate(n_id):
                base = self.type_base[t]
                n_id[t] = map_seeds(ids, local_map[base : base + self._count(t)], epoch)
            starts = [0] * len(n_id)
            for hop in range(plan.fanouts.shape[1]):
                targets, rel_of, segments = hop_targets(plan, frontier(n_id, starts), hop)
                work = typed_work(plan, segments, hop)
                if options.replace:  # rows draw exactly k: refuse an output that cannot fit
                    check_draws("fanouts", int(plan.fanouts[:, hop].max()), work, f"at hop {hop}")
                hop_threads = region.fit(work)
                sizes = np.array([len(ids) for ids in n_id], np.int64)
                hop_inputs = self._hop_inputs(options, plan, targets, rel_of, segments, key, hop)
                src_base = self.type_base[plan.src_type]
                args = (*hop_inputs, self._degrees, src_base, plan.edge_base, local_map, epoch, sizes, plain)
                args += (self._src_count(plan), hop_threads)
                result = guard.run(sample_typed_hop, *args) if work >= LONG_WORK else sample_typed_hop(*args)
                if guard.stopping():
                    break
                *result, corrupt = result
                if corrupt:  # the map is dropped below, not pooled
                    raise self.corrupt_error(plan)
                n_id, starts = record_hop(plan, n_id, hops, starts, options.expand_new, segments, *result)
            if guard.stopping():  # the map is dropped, not pooled; leaving the block raises
                n_id = hops = local_map = result = args = hop_inputs = targets = None
                return None
        self.maps.release(local_map, epoch + max(map(len, n_id), default=0))  # an exception drops it
        return Drawn(n_id, hops)

    def _sample_trees(self, seeds: list, plan: HopPlan, key: int, options: SampleOptions) -> Drawn:
        """Disjoint typed sampling (:func:`.disjoint.sample_typed_tree_hop`) over virtual local ids
        (:func:`virtual_seeds`); the relabel table keys them by ``type * span + id``."""
        virtual, span = virtual_seeds(np, seeds, options.stride)
        n_id = [np.ascontiguousarray(ids, dtype=np.int64) for ids in virtual]
        hops = []
        with kernel_threads() as region:
            flat = np.concatenate(n_id)
            type_of = np.repeat(np.arange(len(n_id), dtype=np.int64), [len(ids) for ids in n_id])
            keys, values = new_table(flat, type_of * span, 4 * len(flat))
            starts = [0] * len(n_id)
            for hop in range(plan.fanouts.shape[1]):
                targets, rel_of, segments = hop_targets(plan, frontier(n_id, starts), hop)
                region.fit(typed_work(plan, segments, hop))
                sizes = np.array([len(ids) for ids in n_id], np.int64)
                hop_inputs = self._hop_inputs(options, plan, targets, rel_of, segments, key, hop)
                *result, keys, values, corrupt = sample_typed_tree_hop(
                    *hop_inputs, plan.edge_base, keys, values, sizes, np.int64(span), self._src_count(plan)
                )
                if corrupt:
                    raise self.corrupt_error(plan)
                n_id, starts = record_hop(plan, n_id, hops, starts, options.expand_new, segments, *result)
        return split_types(n_id, hops, options.stride)

    def _hop_inputs(self, options, plan, targets, rel_of, segments, key: int, hop: int) -> tuple:
        """The leading arguments of both typed hop kernels (shared and per-tree) for ``hop``."""
        states = plan_states(plan, self.seed, key, hop)
        fanouts = plan.fanouts[:, hop].copy()
        return (self.graph, options, targets, rel_of, segments, plan.row_base, fanouts, states, plan.src_type)

    def _count(self, t: int) -> int:
        return int(self.type_base[t + 1] - self.type_base[t])

    def _src_count(self, plan) -> np.ndarray:
        """int64 (R,): nodes of each relation's source type, the bound of its ids in ``indices``."""
        return np.diff(self.type_base)[plan.src_type]

    def corrupt_error(self, plan) -> ValueError:
        """The error for a kernel that met a source id outside its type (a corrupt folder)."""
        spans = relation_spans(plan.edge_base, plan.src_type, np.diff(self.type_base), self.flat.num_edges, self.names)
        return corrupt_indices_error(self.graph.indices, spans)

    def negatives(self, *args, **kwargs):
        return self.flat.negatives(*args, **kwargs)

    def excluded_positions(self, sources, rows):
        return self.flat.excluded_positions(sources, rows)


@njit(parallel=True, cache=True, nogil=True)
def sample_typed_hop(
    graph,
    options,
    targets,
    rel_of,
    segments,
    row_base,
    ks,
    states,
    src_type,
    degrees,
    src_base,
    edge_base,
    local_map,
    epoch,
    sizes,
    plain,
    src_count,
    threads,
    stop_flag=None,
):
    """One typed hop. Target ``i`` is node ``targets[i]`` of relation ``rel_of[i]`` (relation
    ``r``'s targets are ``segments[r] .. segments[r + 1]``), drawn with fanout ``ks[r]`` and state
    ``states[r]`` from stacked row ``row_base[r] + targets[i]``. ``degrees`` is the graph's
    :class:`.records.DegreeTable`, which the count reads instead of ``indptr``.

    Returns ``(edges, e_id, offsets, (grouped, type_offsets), corrupt)``: ``offsets`` (T + 1,) per target, so
    relation ``r``'s edges are ``offsets[segments[r]] ..``; ``edges`` the flat buffer of the
    per-relation (2, E_r) blocks (row 0 the source's position in its type's ``n_id``, row 1 the
    target's position ``i - segments[r]``); ``e_id`` relation-local edge ids; the new nodes
    grouped by type (type order, each type's in order of first appearance), bounded by
    ``type_offsets``. ``local_map`` (a node at position ``j`` of its type's ``n_id`` stored as
    ``epoch + j``, an entry below ``epoch`` unseen) and ``sizes`` (per-type ``n_id`` lengths) are
    updated; ``corrupt`` is true when a source id read from ``graph.indices`` lay outside
    ``[0, src_count[r])`` (a corrupt graph: that type's relabel stopped, the output is partial).
    ``plain``: ``options`` without its exclusions, for the count and the rows that hold no
    excluded edge (see :func:`.cpu.sample_hop`). ``threads``: the Numba threads the call runs on
    (the relabel's types are shared out among them; passed in, as ``numba.get_num_threads()`` in
    compiled code would keep the kernel out of the on-disk cache).
    ``stop_flag`` (optional): polled per block of rows; once set, the kernel returns early with
    partial output (see :mod:`gglspeedup._interrupt`).
    """
    num_targets = targets.shape[0]
    num_relations = row_base.shape[0]
    offsets = np.empty(num_targets + 1, np.int64)
    offsets[0] = 0
    table, table_base, stride = degrees
    for i in prange(num_targets):
        if i + _PREFETCH_DISTANCE < num_targets:  # a node's first relation: a miss, its others hits
            ahead = i + _PREFETCH_DISTANCE
            prefetch(table, table_base[rel_of[ahead]] + targets[ahead] * stride[rel_of[ahead]])
        r = rel_of[i]
        available = np.int64(table[table_base[r] + targets[i] * stride[r]])
        if available == DEGREE_CAP:  # at or past the cap: the row's own count
            offsets[i + 1] = row_count_unexcluded(graph, plain, row_base[r] + targets[i], ks[r])
        else:
            offsets[i + 1] = count_of(plain, ks[r], available)
    for i in range(num_targets):
        row = row_base[rel_of[i]] + targets[i]
        if row_flagged(options, row):  # a link batch's row with excluded edges: recount it
            offsets[i + 1] = row_count(graph, options, row, ks[rel_of[i]])
        offsets[i + 1] += offsets[i]
    num_edges = offsets[num_targets]

    edges = np.empty(2 * num_edges, np.int64)
    e_id, col = draw_buffers(num_edges)
    # Only rows that draw something are filled: with many relations most (node, relation) targets
    # have no edge in that relation (WordNet: 90%), and visiting them cost most of the fill.
    busy = np.empty(num_targets, np.int64)
    num_busy = 0
    for i in range(num_targets):
        if offsets[i + 1] > offsets[i]:
            busy[num_busy] = i
            num_busy += 1
    for block in prange(row_blocks(num_busy)):
        if stop_requested(stop_flag):
            continue
        lo, hi = block_rows(block, num_busy)
        for j in range(lo, hi):
            if j + _ROW_PREFETCH < hi:  # a row's draws hide little: fetch later rows' offsets now
                ahead = busy[j + _ROW_PREFETCH]
                prefetch(graph.indptr, row_base[rel_of[ahead]] + targets[ahead])
            i = busy[j]
            r = rel_of[i]
            node = targets[i]
            start = offsets[i]
            count = offsets[i + 1] - start
            row = row_base[r] + node
            row_fill_split(graph, options, plain, row, ks[r], row_state(states[r], node), count, e_id, start)
            first = offsets[segments[r]]
            width = offsets[segments[r + 1]] - first
            local = i - segments[r]
            for q in range(start, start + count):  # row 1 of relation r's (2, E_r) block
                edges[2 * first + width + q - first] = local
        if hi > lo:  # busy rows are in target order, so a block's edges are one run
            row_finish(graph, options, e_id, col, offsets[busy[lo]], offsets[busy[hi - 1] + 1])

    # Relabel: one serial pass per source type, the types in parallel (their map entries, sizes and
    # relations are disjoint, and a type's new nodes depend only on its own relations, in order).
    num_types = sizes.shape[0]
    type_base = np.zeros(num_types + 1, np.int64)
    for r in range(num_relations):
        type_base[src_type[r] + 1] += offsets[segments[r + 1]] - offsets[segments[r]]
    for t in range(num_types):
        type_base[t + 1] += type_base[t]
    found = np.empty(num_edges, np.int64)
    new_count = np.zeros(num_types, np.int64)
    # The types' passes go to the threads by their edges, largest first, each to the least loaded
    # thread: one type usually holds most sources (a prange over the types measured 4% slower).
    num_bins = max(min(threads, num_types), 1)
    bin_of = _balance(type_base, num_bins)
    corrupt = np.zeros(1, np.uint8)
    for b in prange(num_bins):
        for t in range(num_types):
            if bin_of[t] != b:
                continue
            m = type_base[t]
            for r in range(num_relations):
                if src_type[r] != t:
                    continue
                first = offsets[segments[r]]
                stop = offsets[segments[r + 1]]
                base = src_base[r]
                bound = np.uint64(src_count[r])
                for q in range(first, stop):
                    if stop_requested(stop_flag):
                        break
                    if q + _PREFETCH_DISTANCE < stop:  # the map reads are the pass's misses
                        prefetch(local_map, base + col[q + _PREFETCH_DISTANCE])
                    u = col[q]
                    if np.uint64(u) >= bound:  # a corrupt graph (loaded unverified): never an index
                        corrupt[0] = 1
                        break
                    v = local_map[base + u] - epoch
                    if v < 0:
                        v = sizes[t]
                        local_map[base + u] = epoch + v
                        sizes[t] += 1
                        found[m] = u
                        m += 1
                    edges[2 * first + q - first] = v
                    if not options.has_edge_ids:
                        e_id[q] -= edge_base[r]
            new_count[t] = m - type_base[t]
    type_offsets = np.zeros(num_types + 1, np.int64)
    for t in range(num_types):
        type_offsets[t + 1] = type_offsets[t] + new_count[t]
    grouped = np.empty(type_offsets[num_types], np.int64)
    for t in range(num_types):
        grouped[type_offsets[t] : type_offsets[t + 1]] = found[type_base[t] : type_base[t] + new_count[t]]
    return edges, e_id, offsets, (grouped, type_offsets), corrupt[0] != 0


@register_jitable
def _balance(type_base, num_bins):
    """Thread (bin) of each type's relabel pass: types by edges ``type_base[t + 1] - type_base[t]``,
    largest first, each to the least loaded bin (longest-processing-time first). ``num_bins >= 1``."""
    num_types = type_base.shape[0] - 1
    bin_of = np.zeros(num_types, np.int64)
    load = np.zeros(num_bins, np.int64)
    for t in np.argsort(-np.diff(type_base)):
        b = np.argmin(load)
        bin_of[t] = b
        load[b] += type_base[t + 1] - type_base[t]
    return bin_of

"""Typed (heterogeneous) sampling on a CUDA device: the typed hop of :mod:`.typed`, one thread per target.

A hop is two launches over every relation's targets at once (the layout of :mod:`.typed`: each
target with its relation's row base, fanout and RNG state): a count (:func:`_typed_count_kernel`,
then a ``cumsum`` and one sync for the edge offsets of each relation), and a fill
(:func:`_typed_fill_kernel`) that draws, finishes and writes each edge's target position, its
source's id in the typed id space (``type_base[src type] + local id``) and its relation-local edge
id. The relabel is array code (:func:`relabel_typed`): the first appearance of every source among
the nodes already in ``n_id`` and the hop's edges (a lexicographic sort by id, then position, so
it needs no stable sort), new nodes ranked within their type by that position. The draws are the
CPU's row bodies, the order the CPU's serial relabel produces, so the output is bit-identical.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..._launch import device_view, launch_rows, to_host
from .cuda import CUDADriver
from .rng import row_state
from .rows import row_finish, row_window, split, window_count, window_fill
from .typed import TypedHop

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
    graph, options, targets, rel_of, segments, row_base, ks, states, src_base, edge_base, offsets, pos, col, dst
):
    """Target ``i``: draw into ``pos[offsets[i]:offsets[i + 1]]``, finish (``col``: local source
    ids, then their typed ids; ``pos``: relation-local edge ids) and write its position ``dst``.
    Disjoint (``options.stride > 0``): targets are virtual local ids and the sources' typed ids
    carry the target's tree (``src_base[r] + tree * stride + id``)."""
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
        for q in range(start, start + count):
            col[q] += base
            dst[q] = i - segments[r]
            if not options.has_edge_ids:
                pos[q] -= edge_base[r]


def relabel_typed(xp, n_id: list, type_base, typed_src):
    """``(src_local, new_nodes, type_offsets)`` for a hop's edges whose sources have typed ids
    ``typed_src``: each source's position in its type's ``n_id`` (extended by the hop's new nodes,
    in order of first appearance, as the CPU's serial relabel does), and the new nodes grouped by
    type as :func:`.typed.sample_typed_hop` groups them (``type_offsets`` on the host)."""
    num_types = len(n_id)
    known = [xp.asarray(ids) + int(type_base[t]) for t, ids in enumerate(n_id)]
    lengths = np.array([len(ids) for ids in n_id], np.int64)
    start_of_type = np.concatenate(([0], np.cumsum(lengths)))
    keys = xp.concatenate([*known, typed_src])
    existing = int(start_of_type[-1])
    positions = xp.arange(keys.shape[0], dtype=np.int64)
    order = xp.lexsort(xp.stack((positions, keys)))  # by id, then position: no stable sort needed
    sorted_keys = keys[order]
    head = xp.ones(keys.shape[0], dtype=bool)
    head[1:] = sorted_keys[1:] != sorted_keys[:-1]
    group = xp.cumsum(head) - 1
    first = order[head]  # every id's first position
    group_keys = sorted_keys[head]
    group_type = xp.searchsorted(xp.asarray(type_base[1:]), group_keys, side="right")
    local = xp.empty(first.shape[0], dtype=np.int64)
    old = first < existing
    local[old] = first[old] - xp.asarray(start_of_type[:-1])[group_type[old]]
    new_groups = xp.nonzero(~old)[0]
    new_groups = new_groups[xp.argsort(first[new_groups])]  # first positions are distinct
    new_type = group_type[new_groups]
    new_local = group_keys[new_groups] - xp.asarray(type_base)[new_type]
    counts = to_host(xp.bincount(new_type, minlength=num_types)) if new_type.shape[0] else np.zeros(num_types)
    type_offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)  # sync: new nodes per type
    rank = xp.empty(new_groups.shape[0], dtype=np.int64)  # position among its type's new nodes
    for t in range(num_types):
        mask = new_type == t
        rank[mask] = (xp.cumsum(mask) - 1)[mask]
    local[new_groups] = rank + xp.asarray(lengths)[new_type]
    grouped = xp.empty(new_groups.shape[0], dtype=np.int64)
    grouped[rank + xp.asarray(type_offsets[:-1])[new_type]] = new_local
    inverse = xp.empty(keys.shape[0], dtype=np.int64)
    inverse[order] = group
    return local[inverse[existing:]], grouped, type_offsets


class TypedCUDADriver:
    """Typed sampling on one CUDA device (real or simulated); the interface of
    :class:`.typed.TypedCPUDriver`. The untyped :class:`.cuda.CUDADriver` over the same stacked
    graph (:attr:`flat`) holds the records and draws link negatives and exclusions."""

    def __init__(self, stacked, options, seed: int, type_counts, device, times=None):
        from .cpu import weight_tables

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
            arrays = tuple(xp.asarray(a) for a in (plan.row_base, plan.src_base(self.type_base), plan.edge_base))
            self._uploaded = (plan, arrays)
        return arrays

    def sample_trees(self, seeds: list, plan, key: int, *, options, expand: str = "all", span: int):
        """Disjoint typed sampling: ``seeds`` per type are virtual local ids (``tree * stride +
        id``, ``options.stride > 0``), as is the returned ``n_id``; ``span`` (trees times stride)
        separates the node types' virtual id spaces in the relabel."""
        type_base = np.arange(len(self.type_base), dtype=np.int64) * span
        return self.sample_all(seeds, plan, key, options=options, expand=expand, type_base=type_base)

    def sample_all(self, seeds: list, plan, key: int, *, options=None, expand: str = "all", type_base=None):
        """As :meth:`.typed.TypedCPUDriver.sample_all`, with arrays of ``device.xp``."""
        options = self.options if options is None else device_view(options)
        xp = self.device.xp
        with self.device:
            row_base, src_base, edge_base = self._device_plan(plan)
            if type_base is None:
                type_base = self.type_base
            else:
                src_base = xp.asarray(plan.src_base(type_base))
            n_id = [xp.ascontiguousarray(xp.asarray(ids), dtype=np.int64) for ids in seeds]
            hops = []
            starts = [0] * len(n_id)
            for hop in range(plan.num_hops):
                targets, rel_of, segments = plan.targets(plan.frontier(n_id, starts), hop, xp)
                ks = xp.asarray(plan.fanouts[:, hop].copy())
                states = xp.asarray(plan.states(self.seed, key, hop))
                hop_out = self._hop(
                    options, targets, rel_of, segments, row_base, ks, states, src_base, edge_base, n_id, type_base
                )
                if expand == "new":
                    plan.shift_targets(hop_out[0], hop_out[2], starts)
                    starts = [len(ids) for ids in n_id]
                n_id = plan.extend(n_id, hop_out[3], hop_out[4], xp)
                hops.append(hop_out)
        return n_id, hops

    def _hop(self, options, targets, rel_of, segments, row_base, ks, states, src_base, edge_base, n_id, type_base):
        device, graph, xp = self.device, self.graph, self.device.xp
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
            )
        src_local, new_nodes, type_offsets = relabel_typed(xp, n_id, type_base, col)
        edges = xp.empty(2 * num_edges, dtype=np.int64)
        for r in range(len(edge_offsets) - 1):
            first, stop = int(edge_offsets[r]), int(edge_offsets[r + 1])
            block = edges[2 * first : 2 * stop].reshape(2, stop - first)
            block[0] = src_local[first:stop]
            block[1] = dst[first:stop]
        return TypedHop((edges, pos, edge_offsets, new_nodes, type_offsets))

    def negatives(self, *args, **kwargs):
        return self.flat.negatives(*args, **kwargs)

    def excluded_positions(self, sources, rows):
        return self.flat.excluded_positions(sources, rows)

"""Remote drivers: the local drivers' contract, with each hop's rows drawn by their owners.

:class:`RemoteDriver` and :class:`TypedRemoteDriver` speak the drivers' written contract
(:mod:`gglspeedup.sampling.drivers`: ``sample``, ``negatives``, ``excluded_positions``,
``options``) as :class:`.cpu.CPUDriver` and :class:`.typed.TypedCPUDriver` do, so the samplers' own
host code (seed checks, keys, trees, link batches, outputs) runs on them unchanged. Per hop they
send every owning group one ``"draw"`` request (the distinct targets it owns,
:mod:`.remote_relabel`'s route) through ``exchange(requests, key) -> answers`` (a transport's
``call``), then relabel on this side. A draw depends only on ``(seed, key, hop, node)`` and the
node's row, and the owners draw rows with the local bodies, so the batches are the local drivers'
bit for bit.

The message of a ``"draw"`` request (a dict of arrays and scalars; :mod:`gglspeedup.sampling.remote`
answers it): ``parts`` (the group's partitions holding targets, in its order), ``rel_counts``
(targets per part and relation, part-major), ``ids`` (the targets, part by part, each part's
relation by relation in hop order; type-local ids, int32 while they fit), ``ks`` / ``states`` (per
relation: fanout and RNG state), ``replace``, ``weighted``, ``last``, and where they apply
``times`` (each target's seed time) and ``excl_src`` / ``excl_dst`` / ``excl_rel`` (a link batch's
excluded edges whose rows the group owns). Several batches' hops may share one request
(``gglspeedup.service``'s merged exchange): ``parts`` then lists one run of partitions per batch,
``part_batch`` names each listed partition's batch, and ``ks`` / ``states`` hold one row of
relations per batch. The answer: ``counts`` (draws per target: uint8 while
the fanouts fit, else the narrowest unsigned type holding them), ``nbrs`` and ``e_id`` (per draw,
at the partition's widths: int32 while the graph's ids fit). An ``"edges"`` request (strict
negatives) sends ``parts``, ``part_counts``, ``src``, ``dst`` and ``rel`` and gets ``found``
(uint8 per pair: the edge exists).

The trainer's side costs what the local kernels' relabel costs plus one pass per hop over the
targets (the route: each target's owner) and one over the draws (the gather into target order);
the ids it sends are those runs of the route's output, unchanged, and the answers are read where
they arrived.
"""

from __future__ import annotations

import numpy as np

from ..._rng import hop_state
from .cpu import MapPool, map_seeds
from .disjoint import new_table
from .links import MAX_NEGATIVE_REDRAWS, draw_negatives, negative_inputs
from .records import Drawn, GraphArrays, from_virtual, to_virtual, with_markers
from .remote_relabel import (
    dedup_chained,
    dedup_mapped,
    gather_rows,
    negative_candidates,
    relabel_shared,
    relabel_trees,
    relabel_typed,
    relabel_typed_trees,
    route,
    target_offsets,
)
from .typed_hops import frontier, hop_targets, plan_states, record_hop, split_types, virtual_seeds

__all__ = ["Routes", "RemoteDriver", "TypedRemoteDriver", "gather"]


class Routes:
    """Who owns what, as the trainer sees it: ``owner`` (the partition of every node, over the
    flat id space: node types one after another), ``group_parts`` (each group's partitions, every
    partition in one group) and the wire's id type (int32 while the graph's ids fit)."""

    def __init__(self, owner, group_parts, num_parts: int, wire_dtype):
        self.owner = owner
        self.group_parts = tuple(tuple(int(p) for p in parts) for parts in group_parts)
        order = [p for parts in self.group_parts for p in parts]
        self.order = np.asarray(order, np.int64)
        self.part_rank = np.empty(num_parts, np.int64)
        self.part_rank[self.order] = np.arange(num_parts, dtype=np.int64)
        self.groups, rank = [], 0
        for g, parts in enumerate(self.group_parts):
            self.groups.append((g, rank, rank + len(parts)))
            rank += len(parts)
        self.group_of_part = np.empty(num_parts, np.int64)
        for g, lo, hi in self.groups:
            self.group_of_part[self.order[lo:hi]] = g
        self.wire = np.dtype(wire_dtype)
        self.wire_marker = np.zeros(0, self.wire)  # route's output type


def gather(slot, answers: list, first: int = -1):
    """A hop's draws in target order from the groups' ``answers`` (in slot order), int64:
    ``(offsets, col, e_id)``, or for a shared hop (``first >= 0``) ``(offsets, e_id, edge_index)``
    with the neighbours in ``edge_index[0]`` and their targets in row 1 (:func:`gather_rows`)."""
    if len(answers) == 1:
        counts = answers[0]["counts"]
    else:
        counts = np.concatenate([answer["counts"] for answer in answers])
    offsets = target_offsets(slot, counts)
    num_edges = int(offsets[-1])
    e_id = np.empty(num_edges, np.int64)
    if first >= 0:
        edge_index, col = np.empty((2, num_edges), np.int64), _NO_COL
    else:
        edge_index, col = _NO_EDGE_INDEX, np.empty(num_edges, np.int64)
    lo = 0
    # A serial kernel outside the kernel lock: batches in flight gather from their threads at once
    # (a parallel region's idle worker spun on the cores the servers draw on: gather_rows).
    for answer in answers:
        nbrs, e_ids = answer["nbrs"], answer["e_id"]
        gather_rows(slot, offsets, lo, answer["counts"], nbrs, e_ids, col, e_id, edge_index, first)
        lo += answer["counts"].shape[0]
    return (offsets, e_id, edge_index) if first >= 0 else (offsets, col, e_id)


_NO_EDGE_INDEX, _NO_COL = np.zeros((2, 0), np.int64), np.zeros(0, np.int64)


class _Remote:
    """What both remote drivers share: the exchange of one hop, negatives, exclusions."""

    def _setup(self, exchange, routes: Routes, options, seed: int, type_offsets, dst_type, temporal: bool):
        self.exchange, self.routes, self.seed = exchange, routes, int(seed)
        self.options = with_markers(options)  # the trainer holds no rows: times stay the marker here
        self.type_offsets = np.asarray(type_offsets, np.int64)
        self.dst_type = np.asarray(dst_type, np.int64)
        self.temporal = bool(temporal)
        self.seen = MapPool(int(self.type_offsets[-1]))
        marker = np.zeros(1, np.int64)
        self._no_graph = GraphArrays(marker, marker, marker, np.zeros(1), marker, np.zeros(1))

    def _hop(self, flat, dup, rel, ids, ks, states, times, pairs, key):
        """Send one hop's draws to the owners; ``(slot, answers)``: each target's slot and the
        answers of the groups asked, in slot order (:func:`gather` reads them)."""
        routes = self.routes
        num_parts = routes.order.shape[0]
        slot, source, part_offsets, rel_counts, slot_ids = route(
            flat, dup, rel, ids, routes.owner, routes.part_rank, num_parts, ks.shape[0], routes.wire_marker
        )
        requests = {}
        if np.any(ks != 0):
            flags = {"replace": bool(self.options.replace), "weighted": bool(self.options.weighted)}
            flags["last"] = bool(self.options.last)
            bounds = part_offsets.tolist()
            for g, lo, hi in routes.groups:
                a, b = bounds[lo], bounds[hi]
                if b == a:
                    continue
                payload = {
                    "parts": routes.order[lo:hi],
                    "rel_counts": rel_counts[lo:hi].reshape(-1),
                    "ids": slot_ids[a:b],
                    "ks": ks,
                    "states": states,
                    **flags,
                }
                if self.temporal:
                    payload["times"] = times[source[a:b]]
                if pairs is not None:
                    payload.update(pairs[g])
                requests[g] = ("draw", payload)
        if not requests:
            empty = np.empty(0, np.int64)
            return slot, [{"counts": np.zeros(source.shape[0], np.uint8), "nbrs": empty, "e_id": empty}]
        answers = self.exchange(requests, key)
        return slot, [answers[g] for g in sorted(requests)]

    def _pairs(self, options):
        """A link batch's excluded edges (``options.excluded``: :meth:`excluded_positions`' pairs),
        per group that owns their rows: ``{group: payload entries}``, or ``None``."""
        excluded = options.excluded
        if not isinstance(excluded, np.ndarray) or excluded.dtype != np.int64:
            return None
        sources, rows = excluded.reshape(2, -1)
        rel, node = self._row_relation(rows)
        flat = self.type_offsets[self.dst_type[rel]] + node
        group = self.routes.group_of_part[np.asarray(self.routes.owner[flat], np.int64)]
        out = {}
        for g in range(len(self.routes.group_parts)):
            mine = np.flatnonzero(group == g)
            out[g] = {"excl_src": sources[mine], "excl_dst": node[mine], "excl_rel": rel[mine]}
        return out

    def _row_relation(self, rows):
        """``(relation, node)`` of stacked rows (untyped: relation 0, the row itself)."""
        return np.zeros(rows.shape[0], np.int64), rows

    def excluded_positions(self, sources, rows):
        """Not positions here: the pairs themselves (``[sources, rows]`` flattened), which
        ``sample`` hands to the rows' owners; they find the positions in their partitions."""
        return np.concatenate((np.asarray(sources, np.int64), np.asarray(rows, np.int64)))

    def negatives(
        self, sources, count: int, *, fixed: bool, width: int, strict: bool, key: int, space=None, eligible=None
    ):
        """As :meth:`.cpu.CPUDriver.negatives`: the same draws; strict mode asks the owners of each
        attempt's targets which are edges and redraws only those, attempt by attempt."""
        total = int(self.type_offsets[-1])
        state, space, eligible = negative_inputs(self.seed, key, space, total, eligible)
        out_src, out_dst = np.empty(count, np.int64), np.empty(count, np.int64)
        stayed = np.zeros(count, np.int8)
        if not count:
            return out_src, out_dst, stayed
        if not strict:
            draw_negatives(
                self._no_graph, state, space, sources, fixed, width, False, eligible, out_src, out_dst, stayed
            )
            return out_src, out_dst, stayed
        rel, _ = self._row_relation(np.asarray([space[2]], np.int64))
        pending = np.arange(count, dtype=np.int64)
        for attempt in range(MAX_NEGATIVE_REDRAWS + 1):
            negative_candidates(state, space, sources, fixed, width, eligible, pending, attempt, out_src, out_dst)
            found = self._edges(out_src[pending], out_dst[pending], int(rel[0]), key)
            pending = pending[found != 0]
            if not pending.shape[0]:
                break
        stayed[pending] = 1
        return out_src, out_dst, stayed

    def _edges(self, src, dst, rel: int, key) -> np.ndarray:
        """uint8 per pair: whether ``src -> dst`` is an edge of relation ``rel`` (its owners answer)."""
        routes = self.routes
        flat = self.type_offsets[self.dst_type[rel]] + dst
        zeros = np.zeros(src.shape[0], np.int64)
        slot, source, part_offsets, _, _ = route(
            flat, zeros - 1, zeros, dst, routes.owner, routes.part_rank, len(routes.order), 1, routes.wire_marker
        )
        requests = {}
        for g, lo, hi in routes.groups:
            a, b = int(part_offsets[lo]), int(part_offsets[hi])
            if b > a:
                mine = source[a:b]
                payload = {"parts": routes.order[lo:hi], "part_counts": np.diff(part_offsets[lo : hi + 1])}
                payload.update(src=src[mine], dst=dst[mine], rel=rel)
                requests[g] = ("edges", payload)
        if not requests:
            return np.zeros(0, np.uint8)
        answers = self.exchange(requests, key)
        return np.concatenate([np.asarray(answers[g]["found"], np.uint8) for g in sorted(requests)])[slot]

    def _tree_times(self, options, trees):
        """Each target's time (its tree's seed time) for a temporal call; zeros otherwise (dedup)."""
        if self.temporal and isinstance(options.seed_time, np.ndarray):
            return options.seed_time[trees]
        return np.zeros(trees.shape[0], np.int64)


class RemoteDriver(_Remote):
    """The untyped remote driver (see the module notes): ``exchange(requests, key)`` asks the
    groups, ``routes`` says who owns what, ``options`` / ``seed`` as a :class:`.cpu.CPUDriver`'s."""

    def __init__(self, exchange, routes: Routes, options, seed: int, num_nodes: int, temporal: bool = False):
        self._setup(exchange, routes, options, seed, [0, num_nodes], [0], temporal)
        self.num_nodes = int(num_nodes)
        self.maps = MapPool(self.num_nodes)

    def sample(self, seeds, fanouts, key: int, options=None) -> Drawn:
        """As :meth:`.cpu.CPUDriver.sample`."""
        options = self.options if options is None else options
        if options.stride:
            return self._sample_trees(seeds, fanouts, key, options)
        pairs = self._pairs(options)
        local_map, epoch = self.maps.acquire(len(seeds))
        hops = []
        n_id = map_seeds(seeds, local_map, epoch)  # an exception below drops the map (not pooled)
        first = 0
        for hop, k in enumerate(fanouts):
            num_targets = len(n_id)
            targets = n_id[first:]
            positions = np.arange(first, num_targets, dtype=np.int64)
            dup = dedup_mapped(targets, positions, local_map, epoch)
            ks, states = np.array([k], np.int64), np.array([hop_state(self.seed, key, hop)], np.uint64)
            rel = np.zeros(targets.shape[0], np.int64)
            slot, answers = self._hop(targets, dup, rel, targets, ks, states, None, pairs, key)
            _, e_id, edge_index = gather(slot, answers, first)
            n_id = relabel_shared(n_id, local_map, epoch, edge_index)
            hops.append((edge_index, e_id, (len(n_id), num_targets)))
            if options.expand_new:
                first = num_targets
        self.maps.release(local_map, epoch + len(n_id))
        return Drawn(n_id, hops)

    def _sample_trees(self, seeds, fanouts, key: int, options) -> Drawn:
        """A disjoint call (``options.stride > 0``): virtual ids inside, as the CPU driver's."""
        stride = options.stride
        pairs = self._pairs(options)
        n_id = np.ascontiguousarray(to_virtual(np, seeds, stride), dtype=np.int64)
        keys, values = new_table(n_id, np.zeros(len(n_id), np.int64), 4 * len(n_id))
        hops, first = [], 0
        for hop, k in enumerate(fanouts):
            num_targets = len(n_id)
            trees = n_id[first:] // stride
            nodes = n_id[first:] - trees * stride
            times = self._tree_times(options, trees)
            rel = np.zeros(nodes.shape[0], np.int64)
            seen, epoch = self.seen.acquire(max(nodes.shape[0] - self.seen.size, 0))
            dup = dedup_chained(nodes, rel, times, seen, epoch)
            self.seen.release(seen, epoch + nodes.shape[0])
            ks, states = np.array([k], np.int64), np.array([hop_state(self.seed, key, hop)], np.uint64)
            offsets, col, e_id = gather(*self._hop(nodes, dup, rel, nodes, ks, states, times, pairs, key))
            n_id, edge_index, keys, values = relabel_trees(n_id, first, offsets, col, stride, keys, values)
            hops.append((edge_index, e_id, (len(n_id), num_targets)))
            if options.expand_new:
                first = num_targets
        n_id, batch = from_virtual(n_id, stride)
        return Drawn(n_id, hops, batch)


class TypedRemoteDriver(_Remote):
    """The typed remote driver: :class:`.typed.TypedCPUDriver`'s contract over remote owners.
    ``type_counts`` nodes per type, ``row_base`` / ``dst_type`` per relation (the whole graph's
    stacked layout, which link batches name rows in)."""

    def __init__(self, exchange, routes: Routes, options, seed: int, type_counts, row_base, dst_type, temporal=False):
        offsets = np.concatenate(([0], np.cumsum(np.asarray(type_counts, np.int64))))
        self._setup(exchange, routes, options, seed, offsets, dst_type, temporal)
        self.row_base = np.asarray(row_base, np.int64)
        self.maps = MapPool(int(offsets[-1]))

    def _row_relation(self, rows):
        rel = np.searchsorted(self.row_base, rows, side="right") - 1
        return rel.astype(np.int64), rows - self.row_base[rel]

    def _typed_hop(self, plan, n_id, starts, key, hop, options, pairs, dedup):
        targets, rel_of, segments = hop_targets(plan, frontier(n_id, starts), hop)
        dst = plan.dst_type[rel_of]
        flat_nodes, times = targets, None
        if dedup is None:  # disjoint: virtual local ids
            stride = options.stride
            trees = targets // stride
            flat_nodes = targets - trees * stride
            times = self._tree_times(options, trees)
        flat = self.type_offsets[dst] + flat_nodes
        if dedup is None:
            seen, epoch = self.seen.acquire(max(flat.shape[0] - self.seen.size, 0))
            dup = dedup_chained(flat, rel_of, times, seen, epoch)
            self.seen.release(seen, epoch + flat.shape[0])
        else:
            local_map, epoch = dedup
            positions = np.asarray(starts, np.int64)[dst] + np.arange(targets.shape[0], dtype=np.int64)
            positions -= segments[rel_of]
            dup = dedup_mapped(flat, positions, local_map, epoch)
        ks = np.ascontiguousarray(plan.fanouts[:, hop], np.int64)
        states = plan_states(plan, self.seed, key, hop)
        offsets, col, e_id = gather(*self._hop(flat, dup, rel_of, flat_nodes, ks, states, times, pairs, key))
        return targets, rel_of, segments, offsets, col, e_id

    def sample(self, seeds: list, fanouts, key: int, options=None) -> Drawn:
        """As :meth:`.typed.TypedCPUDriver.sample` (``fanouts`` the sampler's hop plan)."""
        plan = fanouts
        options = self.options if options is None else options
        if options.stride:
            return self._sample_trees(seeds, plan, key, options)
        pairs = self._pairs(options)
        local_map, epoch = self.maps.acquire(sum(len(ids) for ids in seeds))
        n_id = [map_seeds(ids, local_map[base:], epoch) for ids, base in zip(seeds, self.type_offsets[:-1])]
        hops, starts = [], [0] * len(n_id)
        src_base = self.type_offsets[plan.src_type]
        for hop in range(plan.fanouts.shape[1]):
            sizes = np.array([len(ids) for ids in n_id], np.int64)
            _, rel_of, segments, offsets, col, e_id = self._typed_hop(
                plan, n_id, starts, key, hop, options, pairs, (local_map, epoch)
            )
            edges, grouped = relabel_typed(
                rel_of, segments, offsets, col, plan.src_type, src_base, local_map, epoch, sizes
            )
            n_id, starts = record_hop(
                plan, n_id, hops, starts, options.expand_new, segments, edges, e_id, offsets, grouped
            )
        self.maps.release(local_map, epoch + max(map(len, n_id), default=0))
        return Drawn(n_id, hops)

    def _sample_trees(self, seeds: list, plan, key: int, options) -> Drawn:
        """A disjoint typed call: virtual local ids inside, as the typed CPU driver's."""
        pairs = self._pairs(options)
        virtual, span = virtual_seeds(np, seeds, options.stride)
        n_id = [np.ascontiguousarray(ids, dtype=np.int64) for ids in virtual]
        flat = np.concatenate(n_id)
        type_of = np.repeat(np.arange(len(n_id), dtype=np.int64), [len(ids) for ids in n_id])
        keys, values = new_table(flat, type_of * span, 4 * len(flat))
        hops, starts = [], [0] * len(n_id)
        for hop in range(plan.fanouts.shape[1]):
            sizes = np.array([len(ids) for ids in n_id], np.int64)
            targets, rel_of, segments, offsets, col, e_id = self._typed_hop(
                plan, n_id, starts, key, hop, options, pairs, None
            )
            edges, grouped, keys, values = relabel_typed_trees(
                targets, rel_of, segments, offsets, col, plan.src_type, options.stride, keys, values, sizes, span
            )
            n_id, starts = record_hop(
                plan, n_id, hops, starts, options.expand_new, segments, edges, e_id, offsets, grouped
            )
        return split_types(n_id, hops, options.stride)

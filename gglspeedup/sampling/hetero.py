"""HeteroNeighborSampler: typed multi-hop sampling, per-relation fanouts (see DESIGN.md, "Typed graphs")."""

from __future__ import annotations

import numpy as np

from ..heterograph import HeteroGraph, check_edge_type
from ..validation import check_fanouts
from .base import SamplerBase
from .common import check_replace_fanouts, check_seeds, check_tree_count
from .plan import HopPlan, hop_plan
from .temporal import check_seed_time
from .types import Adj, HeteroLinkSampleOutput, HeteroSampleOutput

__all__ = ["HeteroNeighborSampler", "HopPlan"]


class HeteroNeighborSampler(SamplerBase):
    """Sample typed multi-hop neighbourhoods with a fanout per relation, reproducibly.

    Parameters
    ----------
    graph : HeteroGraph
    fanouts : list of int, or dict edge type -> list of int
        Neighbours per target and relation, **seed hop first** (``-1`` every neighbour, ``0``
        none). A list applies to every relation; a dict gives each relation its list (all the
        same length; an edge type left out draws nothing).
    replace, weighted, seed, device, placement
        As :class:`~gglspeedup.NeighborSampler` (``weighted`` needs a graph with weights).
    expand : {"all", "new"}
        As :class:`~gglspeedup.NeighborSampler`: ``"new"`` (PyG's rule) makes only the nodes first
        reached at hop ``h - 1`` targets at hop ``h``.
    disjoint, temporal_strategy
        As :class:`~gglspeedup.NeighborSampler`; trees are numbered over the seeds of every type,
        in the graph's node-type order.
    node_time : dict node type -> array, optional
        Per-type node times (a neighbour of a type left out is always eligible, as in PyG).
    edge_time : dict edge type -> array, optional
        Per-relation edge times, indexed by the relation's edge id (a relation left out is never
        filtered). Either implies ``disjoint``; see :class:`~gglspeedup.NeighborSampler`.

    At hop ``h`` every node of every type in ``n_id`` after hop ``h - 1`` (the seeds at hop 0) is a
    target of every relation into its type (``expand="all"``). The draws of a target in a relation depend only on
    ``(seed, key, hop, edge type, node)`` (the edge type by its names: see
    ``_kernels.rng.edge_type_key``), so the CPU, the simulator and a GPU return the same bits,
    and adding a relation to the graph does not change the others' draws. Batch keys work as in
    :class:`~gglspeedup.NeighborSampler`. Calls are thread-safe.

    Examples
    --------
    >>> import gglspeedup as gg
    >>> graph = gg.HeteroGraph(
    ...     {("author", "writes", "paper"): [[0, 1, 1], [0, 0, 1]], ("paper", "cites", "paper"): [[1], [0]]},
    ...     {"author": 2, "paper": 2},
    ... )
    >>> out = gg.HeteroNeighborSampler(graph, [2]).sample({"paper": [0]})
    >>> out.n_id["paper"].tolist(), sorted(out.n_id["author"].tolist())
    ([0, 1], [0, 1])
    >>> out.num_sampled_nodes, out.adjs[0][("paper", "cites", "paper")].size
    ({'author': [0, 2], 'paper': [1, 1]}, (2, 1))
    """

    _TYPED = True

    @staticmethod
    def _check_graph(graph):
        if not isinstance(graph, HeteroGraph):
            raise TypeError(f"graph must be a HeteroGraph, got {type(graph).__name__}")
        return graph

    @staticmethod
    def _check_weights(graph) -> None:
        if not graph.weighted:
            raise ValueError("weighted=True needs a graph whose relations have weights")

    @staticmethod
    def _csr(graph):
        return graph.stacked

    @staticmethod
    def _node_counts(graph):
        return dict(graph.num_nodes)

    def _plan_hops(self) -> None:
        self._plan = hop_plan(self.graph, self._fanout_matrix())

    def _check_replace(self, fanouts: dict) -> None:
        for edge_type, values in fanouts.items():
            check_replace_fanouts(values, self.replace, name=f"fanouts[{edge_type!r}]")

    @staticmethod
    def _check_fanouts(graph: HeteroGraph, fanouts) -> dict:
        if not isinstance(fanouts, dict):
            checked = check_fanouts(fanouts)
            return {et: list(checked) for et in graph.edge_types}
        if not fanouts:
            raise ValueError("fanouts must name at least one edge type, got an empty dict")
        out, length = {}, None
        for edge_type, values in fanouts.items():
            edge_type = check_edge_type(edge_type, graph.edge_types, "fanouts' key")
            checked = check_fanouts(values, name=f"fanouts[{edge_type!r}]")
            if length is not None and len(checked) != length:
                raise ValueError(
                    f"every relation's fanouts must have the same length: fanouts[{edge_type!r}] has "
                    f"{len(checked)}, an earlier one {length}"
                )
            length = len(checked)
            out[edge_type] = checked
        return {et: out.get(et, [0] * length) for et in graph.edge_types}

    def _fanout_matrix(self) -> np.ndarray:
        return np.array([self.fanouts[et] for et in self.graph.edge_types], np.int64).reshape(
            len(self.graph.edge_types), -1
        )

    @property
    def num_hops(self) -> int:
        return int(self._plan.fanouts.shape[1])

    def _make_driver(self):
        from ._kernels import SampleOptions

        last = self.timeline is not None and self.timeline.last
        options = SampleOptions(self.replace, self.weighted, self.graph.stacked.edge_ids is not None, last=last)
        counts = [self.graph.num_nodes[t] for t in self.graph.node_types]
        times = None if self.timeline is None else self.timeline.times
        names = (self.graph.edge_types, self.graph.node_types)  # for the errors of a corrupt graph
        if not self.device.is_cuda:
            from ._kernels.typed import TypedCPUDriver

            return TypedCPUDriver(self.graph.stacked, options, self.seed, counts, times=times, names=names)
        from ._kernels.cuda_typed import TypedCUDADriver

        return TypedCUDADriver(self.graph.stacked, options, self.seed, counts, self.device, times=times, names=names)

    def __repr__(self) -> str:
        return (
            f"HeteroNeighborSampler(fanouts={self.fanouts}, replace={self.replace}, weighted={self.weighted}, "
            f"seed={self.seed}, device={self.device}, placement={self.placement!r}, graph={self.graph!r})"
        )

    # ------------------------------------------------------------------ public
    def with_fanouts(self, fanouts) -> HeteroNeighborSampler:
        """A sampler like this one drawing ``fanouts`` (shares the placed graph and driver; the
        batch counter continues from this sampler's)."""
        return self._clone(HeteroNeighborSampler, fanouts)

    def sample(self, seeds, key=None, *, seed_time=None) -> HeteroSampleOutput:
        """Sample the typed multi-hop neighbourhood of ``seeds``.

        Parameters
        ----------
        seeds : dict node type -> 1-D integer array-like
            Local ids of that type (duplicates kept); at least one type. A ``(node_type, ids)``
            pair is taken as ``{node_type: ids}``.
        key : int, optional
            Batch key (``None`` uses and advances the sampler's counter).
        seed_time : dict node type -> 1-D array-like, optional
            Temporal samplers: the times of each type's seeds (as :meth:`NeighborSampler.sample`;
            node times default to the seeds' own, where their type has them).

        Returns
        -------
        HeteroSampleOutput
            ``n_id``, ``adjs`` (outermost hop first), ``num_sampled_nodes``, ``num_sampled_edges``;
            disjoint samplers also ``batch`` (node type -> each row's tree); arrays on the
            sampler's device.

        Raises
        ------
        TypeError
            seeds not a dict (or pair), ids not integers, key not an int.
        ValueError
            an empty dict, an unknown node type, ids not 1-D.
        IndexError
            an id outside ``[0, num_nodes[type])``.
        """
        seeds = self._check_seed_dict(seeds)
        tree_time = self._tree_times(seeds, seed_time)
        key = self._next_key(key)
        n_id, adjs, counts_n, counts_e, batch = self._run(seeds, key, None, tree_time)
        return HeteroSampleOutput(n_id, adjs, counts_n, counts_e, batch)

    def _tree_times(self, seeds: list, seed_time, name: str = "seed_time"):
        """The time of every tree (``seeds``: one checked array per type, trees numbered in that
        order), or ``None`` without times; ``seed_time`` a dict node type -> times."""
        timeline = self.timeline
        if timeline is None:
            if seed_time is not None:
                raise ValueError(
                    f"{name} needs a temporal sampler: HeteroNeighborSampler(..., node_time=... or edge_time=...)"
                )
            return None
        if seed_time is not None and not isinstance(seed_time, dict):
            raise TypeError(f"{name} must be a dict node type -> times, got {type(seed_time).__name__}")
        seed_time = seed_time or {}
        for node_type in seed_time:
            if node_type not in self.num_nodes:
                raise ValueError(f"{name} names node type {node_type!r}, which the graph does not have")
        parts = []
        for t, ids in zip(self.graph.node_types, seeds):
            if t in seed_time:
                parts.append(check_seed_time(seed_time[t], len(ids), timeline.dtype, self.device, f"{name}[{t!r}]"))
            elif len(ids) == 0:
                parts.append(np.empty(0, timeline.dtype))
            elif timeline.node_times(t) is not None:
                times = timeline.node_times(t)
                parts.append(times[ids] if isinstance(ids, np.ndarray) else self.device.xp.asarray(times)[ids])
            else:
                raise ValueError(
                    f"{name}[{t!r}] is required: the seeds of node type {t!r} have no node time to default to"
                )
        xp = self.device.xp if self.device.is_cuda else np
        with self.device:
            return xp.concatenate([xp.asarray(p) for p in parts])

    def sample_links(
        self,
        pairs,
        labels=None,
        *,
        edge_type: tuple[str, str, str],
        negatives: str | None = None,
        num_negatives: int = 1,
        strict_negatives: bool = False,
        exclude: str | None = "self",
        reverse_edge_type: tuple[str, str, str] | None = None,
        key: int | None = None,
        pair_time=None,
        check: bool = True,
    ) -> HeteroLinkSampleOutput:
        """Sample the typed neighbourhood of node pairs of one edge type, with negatives.

        ``pairs`` (2, B) holds ``(source, target)`` local ids of ``edge_type``'s source and
        target types; ``labels``, ``negatives``, ``num_negatives``, ``strict_negatives`` and
        ``key`` are as in :meth:`NeighborSampler.sample_links`, with negative sources drawn from
        the source type and negative targets from the target type (strict mode tests
        ``edge_type``'s edges). ``exclude="self"`` keeps every ``edge_type`` edge ``source ->
        target`` of a positive pair out of every hop; ``"reverse"`` also the edges ``target ->
        source`` of ``reverse_edge_type`` (required then, e.g. ``(dst, "rev_name", src)``).

        ``pair_time`` (temporal samplers) as in :meth:`NeighborSampler.sample_links`: the trees of
        a pair's endpoints and negatives carry its time; negatives are drawn among the nodes of
        their type existing then (types with node times). ``check=False`` skips the pairs' range
        scan, as in :meth:`NeighborSampler.sample_links`.

        Returns a :class:`HeteroLinkSampleOutput` (``pair_index`` row 0 into
        ``n_id[edge_type[0]]``, row 1 into ``n_id[edge_type[2]]``).
        """
        from .hetero_links import TypedLinks

        options = (negatives, num_negatives, strict_negatives, exclude, key)
        return self._link_batch(
            TypedLinks(self, edge_type, reverse_edge_type), pairs, labels, options, pair_time, check
        )

    # ------------------------------------------------------------------ internals
    def _run(self, seeds: list, key: int, options, tree_time=None):
        """Drive the hops; returns the output dicts and ``batch`` (``seeds``: one checked array per
        type; ``tree_time``: the trees' times of a temporal call)."""
        graph, plan = self.graph, self._plan
        seed_counts = [len(s) for s in seeds]
        batch = None
        with self.device:
            if self.disjoint:
                n_id, hops, batch = self._run_trees(seeds, key, options, tree_time)
            else:
                n_id, hops = self._driver.sample_all(seeds, plan, key, options=options, expand=self.expand)
        types, edge_types = graph.node_types, graph.edge_types
        counts_n = {t: [seed_counts[i]] for i, t in enumerate(types)}
        counts_e = {et: [] for et in edge_types}
        sizes = list(seed_counts)
        adjs = []
        relation_types = list(zip(edge_types, plan.src_type.tolist(), plan.dst_type.tolist()))  # Python ints
        for edges, e_id, offsets, _new_nodes, type_offsets in hops:
            before = list(sizes)
            for i, count in enumerate(np.diff(type_offsets).tolist()):
                counts_n[types[i]].append(count)
                sizes[i] += count
            layer = {}
            bounds = offsets.tolist()
            for r, (et, src, dst) in enumerate(relation_types):
                first, stop = bounds[r], bounds[r + 1]
                edge_index = edges[2 * first : 2 * stop].reshape(2, stop - first)
                layer[et] = Adj(edge_index, e_id[first:stop], (sizes[src], before[dst]))
                counts_e[et].append(stop - first)
            adjs.append(layer)
        n_id_dict = dict(zip(types, n_id))
        batch = None if batch is None else dict(zip(types, batch))
        return n_id_dict, adjs[::-1], counts_n, counts_e, batch

    def _run_trees(self, seeds: list, key: int, options, tree_time):
        """``(n_id, hops, batch)`` lists per type of a disjoint call: virtual local ids (``tree *
        stride + id``, trees numbered over the types in order) inside the driver, split here."""
        from ._kernels.records import no_exclusions

        stride = max(max(self.num_nodes.values(), default=1), 1)
        trees = sum(len(ids) for ids in seeds)
        check_tree_count(trees * len(seeds), stride)
        xp = self.device.xp if self.device.is_cuda else np
        options = self._driver.options if options is None else options
        if tree_time is not None:
            tree_time = xp.asarray(tree_time)
        options = options._replace(stride=stride, seed_time=no_exclusions() if tree_time is None else tree_time)
        virtual, first = [], 0
        for ids in seeds:
            virtual.append((xp.arange(len(ids), dtype=np.int64) + first) * stride + xp.asarray(ids))
            first += len(ids)
        n_id, hops = self._driver.sample_trees(
            virtual, self._plan, key, options=options, expand=self.expand, span=max(trees, 1) * stride
        )
        batch = [ids // stride for ids in n_id]
        return [ids - b * stride for ids, b in zip(n_id, batch)], hops, batch

    def _check_seed_dict(self, seeds) -> list:
        if isinstance(seeds, tuple) and len(seeds) == 2 and isinstance(seeds[0], str):
            seeds = {seeds[0]: seeds[1]}
        if not isinstance(seeds, dict):
            raise TypeError(
                f"seeds must be a dict node type -> ids (or a (node_type, ids) pair), got {type(seeds).__name__}"
            )
        if not seeds:
            raise ValueError("seeds must name at least one node type, got an empty dict")
        for node_type in seeds:
            if node_type not in self.num_nodes:
                raise ValueError(
                    f"seeds names node type {node_type!r}, which the graph does not have; known: {list(self.num_nodes)}"
                )
        out = [
            check_seeds(seeds[t], self.num_nodes[t], self.device, name=f"seeds[{t!r}]")
            if t in seeds
            else np.empty(0, np.int64)
            for t in self.graph.node_types
        ]
        if self.device.is_cuda:  # one array module for every type's ids (host seeds uploaded once)
            xp = self.device.xp
            with self.device:
                out = [xp.ascontiguousarray(xp.asarray(ids), dtype=np.int64) for ids in out]
        return out

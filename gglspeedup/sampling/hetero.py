"""HeteroNeighborSampler: typed multi-hop sampling, per-relation fanouts (see DESIGN.md, "Typed graphs")."""

from __future__ import annotations

import numpy as np

from ..heterograph import HeteroGraph, check_edge_type
from ..validation import check_fanouts
from .base import SamplerBase
from .common import check_replace_fanouts, check_seeds, check_weight_sums
from .plan import HopPlan, hop_plan, typed_output
from .temporal import typed_tree_times
from .types import HeteroLinkSampleOutput, HeteroSampleOutput

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
        check_weight_sums(graph.stacked)

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

    def _tree_stride(self) -> int:
        return max(max(self.num_nodes.values(), default=1), 1)

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
        tree_time = typed_tree_times(self.timeline, self.graph.node_types, seeds, seed_time, self.device)
        key = self._next_key(key)
        drawn = self._driver.sample(seeds, self._plan, key, self._call_options(tree_time))
        return HeteroSampleOutput(*typed_output(self.graph, self._plan, seeds, drawn))

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
        total_negatives: int | None = None,
    ) -> HeteroLinkSampleOutput:
        """Sample the typed neighbourhood of node pairs of one edge type, with negatives.

        ``pairs`` (2, B) holds ``(source, target)`` local ids of ``edge_type``'s source and
        target types; ``labels``, ``negatives``, ``num_negatives``, ``strict_negatives``,
        ``total_negatives`` and ``key`` are as in :meth:`NeighborSampler.sample_links`, with
        negative sources drawn from the source type and negative targets from the target type
        (strict mode tests ``edge_type``'s edges). ``exclude="self"`` keeps every ``edge_type`` edge ``source ->
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
        pieces = (self.graph, self.device, self.timeline, self.disjoint, self._plan, self._call_options())
        call = TypedLinks(*pieces, edge_type, reverse_edge_type)
        return self._link_batch(call, pairs, labels, options, pair_time, check, total_negatives)

    # ------------------------------------------------------------------ internals
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
            check_seeds(seeds[t], self.num_nodes[t], self.device, name=f"seeds[{t!r}]") if t in seeds else None
            for t in self.graph.node_types
        ]
        if not self.device.is_cuda:
            return [np.empty(0, np.int64) if ids is None else ids for ids in out]
        xp = self.device.xp
        with self.device:  # one array module for every type's ids (host seeds uploaded once)
            none = xp.empty(0, dtype=np.int64)  # every type without seeds: one array, not an upload each
            return [none if ids is None else xp.asarray(ids) for ids in out]  # contiguous int64 already

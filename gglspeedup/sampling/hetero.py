"""HeteroNeighborSampler: typed multi-hop sampling, per-relation fanouts (see DESIGN.md, "Typed graphs")."""

from __future__ import annotations

import threading

import numpy as np

from ..heterograph import HeteroGraph, check_edge_type
from ..validation import check_bool, check_fanouts, check_int
from ._kernels.rng import edge_type_key, hop_state, relation_states
from .sampler import BatchKeys, check_expand, check_replace_fanouts, check_seeds, resolve_placement
from .types import Adj, HeteroLinkSampleOutput, HeteroSampleOutput

__all__ = ["HeteroNeighborSampler", "HopPlan"]

_UINT64_LIMIT = 1 << 64


class HopPlan:
    """What a typed driver needs to run the hops: per relation (the graph's edge-type order) its
    source and target type indices, row and edge bases in the stacked CSR, fanouts (R, hops) and
    RNG keys. Host arrays; built once per fanout setting."""

    def __init__(self, graph: HeteroGraph, fanouts: np.ndarray):
        types = {t: i for i, t in enumerate(graph.node_types)}
        self.src_type = np.array([types[et[0]] for et in graph.edge_types], np.int64)
        self.dst_type = np.array([types[et[2]] for et in graph.edge_types], np.int64)
        self.row_base = graph.row_base[:-1].copy()
        self.edge_base = graph.edge_base[:-1].copy()
        self.fanouts = np.ascontiguousarray(fanouts, np.int64)
        self.num_hops = int(self.fanouts.shape[1])
        self.keys = np.array([edge_type_key(et) for et in graph.edge_types], np.uint64)

    def states(self, seed: int, key: int, hop: int) -> np.ndarray:
        """uint64 (R,): every relation's RNG state at ``hop`` of batch ``key``
        (:func:`._kernels.rng.relation_state` of each relation, in one array operation)."""
        return relation_states(hop_state(seed, key, hop), self.keys)

    def src_base(self, type_base: np.ndarray) -> np.ndarray:
        return type_base[self.src_type]

    def targets(self, n_id: list, hop: int, xp=np):
        """``(targets, rel_of, segments)``: relation ``r``'s targets are ``n_id`` of its target type
        (none when its fanout at ``hop`` is 0), relation by relation; ``segments`` (host) bounds them."""
        lengths = [0 if k == 0 else len(n_id[d]) for d, k in zip(self.dst_type, self.fanouts[:, hop])]
        segments = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        parts = [n_id[d] for d, length in zip(self.dst_type, lengths) if length]
        targets = xp.concatenate(parts) if parts else xp.empty(0, np.int64)
        rel_of = xp.asarray(np.repeat(np.arange(len(lengths), dtype=np.int64), lengths))
        return targets, rel_of, segments

    @staticmethod
    def frontier(n_id: list, starts) -> list:
        """Every type's nodes from ``starts[t]`` on (the last hop's new nodes, under PyG's rule)."""
        return [ids[start:] if start else ids for ids, start in zip(n_id, starts)]

    def shift_targets(self, edges, edge_offsets, starts) -> None:
        """Add ``starts[target type]`` to row 1 of each relation's (2, E_r) block of ``edges``
        (target positions within a frontier become positions in the whole ``n_id``)."""
        for r, t in enumerate(self.dst_type):
            first, stop = int(edge_offsets[r]), int(edge_offsets[r + 1])
            if starts[t] and stop > first:
                edges[2 * first + (stop - first) : 2 * stop] += starts[t]

    def work(self, segments: np.ndarray, hop: int) -> int:
        """Draws a hop makes, about (``-1`` counted as 16 per row), to pick the CPU thread count."""
        ks = self.fanouts[:, hop]
        return int((np.diff(segments) * np.where(ks > 0, ks, 16)).sum())

    @staticmethod
    def extend(n_id: list, new_nodes, type_offsets, xp=np) -> list:
        """Every type's ``n_id`` with its new nodes (``new_nodes`` grouped by type, bounded by the
        host array ``type_offsets``) appended."""
        return [
            xp.concatenate((ids, new_nodes[type_offsets[t] : type_offsets[t + 1]]))
            if type_offsets[t + 1] > type_offsets[t]
            else ids
            for t, ids in enumerate(n_id)
        ]


class HeteroNeighborSampler(BatchKeys):
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

    def __init__(
        self, graph, fanouts, *, replace=False, weighted=False, seed=0, device="cpu", placement="auto", expand="all"
    ):
        from ..device import as_device

        if not isinstance(graph, HeteroGraph):
            raise TypeError(f"graph must be a HeteroGraph, got {type(graph).__name__}")
        self.fanouts = self._check_fanouts(graph, fanouts)
        self.expand = check_expand(expand)
        self.replace, self.weighted = check_bool("replace", replace), check_bool("weighted", weighted)
        self._check_replace(self.fanouts)
        self.seed = check_int("seed", seed, minimum=0, below=_UINT64_LIMIT)
        if self.weighted and not graph.weighted:
            raise ValueError("weighted=True needs a graph whose relations have weights")
        self.device = as_device(device).check_available()
        self.placement = resolve_placement(self.device, placement, graph.stacked, self.weighted)
        self.graph = graph.to(self.device, self.placement)
        self.num_nodes = dict(graph.num_nodes)
        self._key = 0
        self._lock = threading.Lock()
        self._plan = HopPlan(self.graph, self._fanout_matrix())
        self._driver = self._make_driver()

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
        return self._plan.num_hops

    def _make_driver(self):
        from ._kernels import SampleOptions

        options = SampleOptions(self.replace, self.weighted, self.graph.stacked.edge_ids is not None)
        counts = [self.graph.num_nodes[t] for t in self.graph.node_types]
        if not self.device.is_cuda:
            from ._kernels.typed import TypedCPUDriver

            return TypedCPUDriver(self.graph.stacked, options, self.seed, counts)
        from ._kernels.cuda_typed import TypedCUDADriver

        return TypedCUDADriver(self.graph.stacked, options, self.seed, counts, self.device)

    def __repr__(self) -> str:
        return (
            f"HeteroNeighborSampler(fanouts={self.fanouts}, replace={self.replace}, weighted={self.weighted}, "
            f"seed={self.seed}, device={self.device}, placement={self.placement!r}, graph={self.graph!r})"
        )

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_lock"] = None
        state["_driver"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._driver = self._make_driver()

    # ------------------------------------------------------------------ public
    def with_fanouts(self, fanouts) -> HeteroNeighborSampler:
        """A sampler like this one drawing ``fanouts`` (shares the placed graph and driver; the
        batch counter continues from this sampler's)."""
        clone = HeteroNeighborSampler.__new__(HeteroNeighborSampler)
        clone.__dict__.update(self.__dict__)
        clone.fanouts = self._check_fanouts(self.graph, fanouts)
        clone._check_replace(clone.fanouts)
        clone._plan = HopPlan(self.graph, clone._fanout_matrix())
        self._continue_keys(clone)
        return clone

    def sample(self, seeds, key=None) -> HeteroSampleOutput:
        """Sample the typed multi-hop neighbourhood of ``seeds``.

        Parameters
        ----------
        seeds : dict node type -> 1-D integer array-like
            Local ids of that type (duplicates kept); at least one type. A ``(node_type, ids)``
            pair is taken as ``{node_type: ids}``.
        key : int, optional
            Batch key (``None`` uses and advances the sampler's counter).

        Returns
        -------
        HeteroSampleOutput
            ``n_id``, ``adjs`` (outermost hop first), ``num_sampled_nodes``, ``num_sampled_edges``;
            arrays on the sampler's device.

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
        key = self._next_key(key)
        n_id, adjs, counts_n, counts_e = self._run(seeds, key, None)
        return HeteroSampleOutput(n_id, adjs, counts_n, counts_e)

    def sample_links(
        self,
        pairs,
        labels=None,
        *,
        edge_type,
        negatives=None,
        num_negatives=1,
        strict_negatives=False,
        exclude="self",
        reverse_edge_type=None,
        key=None,
    ) -> HeteroLinkSampleOutput:
        """Sample the typed neighbourhood of node pairs of one edge type, with negatives.

        ``pairs`` (2, B) holds ``(source, target)`` local ids of ``edge_type``'s source and
        target types; ``labels``, ``negatives``, ``num_negatives``, ``strict_negatives`` and
        ``key`` are as in :meth:`NeighborSampler.sample_links`, with negative sources drawn from
        the source type and negative targets from the target type (strict mode tests
        ``edge_type``'s edges). ``exclude="self"`` keeps every ``edge_type`` edge ``source ->
        target`` of a positive pair out of every hop; ``"reverse"`` also the edges ``target ->
        source`` of ``reverse_edge_type`` (required then, e.g. ``(dst, "rev_name", src)``).

        Returns a :class:`HeteroLinkSampleOutput` (``pair_index`` row 0 into
        ``n_id[edge_type[0]]``, row 1 into ``n_id[edge_type[2]]``).
        """
        from .hetero_links import sample_typed_links

        return sample_typed_links(
            self, pairs, labels, edge_type, negatives, num_negatives, strict_negatives, exclude, reverse_edge_type, key
        )

    # ------------------------------------------------------------------ internals
    def _run(self, seeds: list, key: int, options):
        """Drive the hops; returns the output dicts (``seeds``: one checked array per type)."""
        graph, plan = self.graph, self._plan
        seed_counts = [len(s) for s in seeds]
        with self.device:
            n_id, hops = self._driver.sample_all(seeds, plan, key, options=options, expand=self.expand)
        types, edge_types = graph.node_types, graph.edge_types
        counts_n = {t: [seed_counts[i]] for i, t in enumerate(types)}
        counts_e = {et: [] for et in edge_types}
        sizes = list(seed_counts)
        adjs = []
        for edges, e_id, offsets, _new_nodes, type_offsets in hops:
            before = list(sizes)
            new_counts = np.diff(type_offsets)
            for i, t in enumerate(types):
                counts_n[t].append(int(new_counts[i]))
                sizes[i] += int(new_counts[i])
            layer = {}
            for r, et in enumerate(edge_types):
                first, stop = int(offsets[r]), int(offsets[r + 1])
                width = stop - first
                edge_index = edges[2 * first : 2 * stop].reshape(2, width)
                size = (sizes[plan.src_type[r]], before[plan.dst_type[r]])
                layer[et] = Adj(edge_index, e_id[first:stop], size)
                counts_e[et].append(width)
            adjs.append(layer)
        n_id_dict = dict(zip(types, n_id))
        return n_id_dict, adjs[::-1], counts_n, counts_e

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

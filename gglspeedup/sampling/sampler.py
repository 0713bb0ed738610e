"""NeighborSampler: multi-hop neighbour sampling on the CPU or a CUDA device (see DESIGN.md)."""

from __future__ import annotations

from ..graph import as_csr_graph
from ..validation import check_fanouts
from .base import SamplerBase
from .common import (
    BatchKeys,
    check_expand,
    check_last,
    check_not_bipartite,
    check_replace_fanouts,
    check_seeds,
    check_tree_count,
    check_weight_sums,
    place_like,
    resolve_placement,
)
from .temporal import tree_times
from .types import LinkSampleOutput, SampleOutput, hop_adjs

__all__ = [
    "NeighborSampler",
    "BatchKeys",
    "check_seeds",
    "check_expand",
    "check_not_bipartite",
    "check_last",
    "check_tree_count",
    "place_like",
    "check_replace_fanouts",
    "resolve_placement",
]


class NeighborSampler(SamplerBase):
    """Sample fixed-fanout multi-hop neighbourhoods of seed nodes, reproducibly.

    Parameters
    ----------
    graph : CSRGraph or scipy sparse matrix
        Row ``v`` lists the nodes whose messages flow into ``v``.
    fanouts : list of int
        Neighbours per target, **seed hop first**: ``[25, 10]`` draws 25 neighbours of every seed,
        then 10 of every node in ``n_id`` after the first hop (seeds included). ``-1`` takes every
        neighbour, ``0`` none.
    replace : bool
        Draw with replacement: exactly ``k`` draws for every target with at least one edge.
    weighted : bool
        Draw proportionally to ``graph.weights`` (required). Without replacement each draw is
        proportional to the weights of the edges not drawn yet (successive sampling, the
        distribution of Efraimidis-Spirakis A-ES); zero-weight edges are never drawn and a row
        whose weights are all zero yields no neighbours.
    seed : int
        Seeds the counter-based RNG: with the same seed, batch key, graph and seeds, every device,
        thread count and placement returns bit-identical output.
    device : str, int or device object
        ``"cpu"`` or ``"cuda[:index]"`` (a real GPU, or numba's simulator under
        ``NUMBA_ENABLE_CUDASIM=1``).
    placement : {"auto", "device", "pinned", "host"}
        Where a CUDA sampler keeps the graph: GPU memory (``"device"``) or page-locked host
        memory read directly by the kernels over PCIe (``"pinned"``, for graphs larger than the
        GPU). ``"auto"`` picks ``"device"`` when the graph takes less than half the free GPU
        memory. A CPU sampler accepts only ``"auto"`` / ``"host"``.
    expand : {"all", "new"}
        Which nodes hop ``h + 1`` draws for. ``"all"`` (the default, layer blocks as GammaGL and
        PyG v1 use them): every node in ``n_id`` after hop ``h``, seeds included, so each
        ``Adj`` is a complete bipartite block for one layer. ``"new"`` (PyG's ``NeighborSampler``
        rule, what :mod:`gglspeedup.pyg` uses): only the nodes first reached at hop ``h`` (the
        seeds at hop 0), so no edge is drawn twice and the hops are PyG's
        ``num_sampled_nodes`` / ``num_sampled_edges``. Either way a node's draws at hop ``h``
        depend only on ``(seed, key, h, node)``, and ``edge_index`` holds positions in ``n_id``.
    disjoint : bool
        Every seed grows its own tree (PyG's ``disjoint=True``): a node reached from two seeds
        gets a row in each tree, and the output's ``batch`` gives each row's seed position. A
        node's draws are those of shared sampling (they depend on ``(seed, key, hop, node)`` only),
        so with ``expand="all"`` the trees together draw exactly what the shared sample draws.
    node_time, edge_time : array-like, optional
        Temporal sampling (implies ``disjoint``): one time per node (``(num_nodes,)``), or one per
        edge indexed like ``e_id`` (the graph's edge ids, else CSR positions). Every tree carries
        its seed's time ``t`` (:meth:`sample`'s ``seed_time``), and a hop of that tree draws only
        edges to neighbours with ``node_time <= t`` (edges with ``edge_time <= t``): ``<=``, so what
        happens at ``t`` itself is visible. int64 or float64 (other numbers widened); NaN raises.
        Rows are sorted by time once, here (a graph whose rows already are is used as is; else
        :attr:`graph` is a row-sorted copy that keeps the edge ids, so ``e_id`` are unchanged, and the
        ``node_order``, so ``graph.original_ids`` still maps ids back).
    temporal_strategy : {"uniform", "last"}
        ``"uniform"``: draw ``k`` of a row's eligible edges as the row would draw among that many
        (weighted too); ``"last"``: take its ``k`` latest eligible edges (oldest first; no
        weights; ``replace`` has no effect). Needs times.

    Notes
    -----
    CPU sampling uses Numba's threads (``numba.set_num_threads`` in the calling thread); a hop
    drawing fewer than about 65k edges runs on one thread. On machines whose cores are shared
    with other work, install ``tbb`` (``pip install tbb``): Numba then uses its work-stealing
    pool instead of OpenMP, whose barriers stall while another process holds a core. The first
    call compiles the kernels (a few seconds, cached on disk for later processes).

    Weighted samplers build two tables at construction (a live-edge count per node and a running
    weight sum per edge: 8 bytes per node and per edge, where the graph lives) so a row costs
    O(k log(deg)).

    Each sampler builds one driver at construction (:class:`~gglspeedup.sampling._kernels.cpu.CPUDriver`
    or ``cuda.CUDADriver``, both :class:`gglspeedup.sampling.drivers.Driver`) that owns the placed
    graph's arrays as the kernels read them; :meth:`sample` checks its arguments and hands them to
    ``driver.sample(seeds, fanouts, key, options)``, ``options`` the one record of the call's
    switches (hop rule, disjoint stride, trees' times).

    Batch keys: each :meth:`sample` call without ``key`` uses an internal counter (0, 1, 2, ...)
    and advances it, so epochs differ; ``sample(seeds, key=k)`` replays batch ``k`` and leaves the
    counter alone. The neighbours drawn for node ``v`` at hop ``h`` depend only on
    ``(seed, key, h, v)`` and the graph, so a duplicated seed gets the same neighbours twice.
    Calls are thread-safe.

    Examples
    --------
    >>> import gglspeedup as gg
    >>> graph = gg.CSRGraph.from_edge_index([[1, 2, 3, 0], [0, 0, 1, 2]], num_nodes=4)
    >>> sampler = gg.NeighborSampler(graph, fanouts=[2, 1])
    >>> n_id, adjs = sampler.sample([0, 0])           # duplicate seeds are kept
    >>> n_id[:2].tolist(), [adj.size for adj in adjs]  # adjs: outermost hop first
    ([0, 0], [(5, 4), (4, 2)])
    """

    @staticmethod
    def _check_graph(graph):
        return check_not_bipartite(as_csr_graph(graph))

    @staticmethod
    def _check_fanouts(graph, fanouts):
        return check_fanouts(fanouts)

    def _check_replace(self, fanouts) -> None:
        check_replace_fanouts(fanouts, self.replace)

    @staticmethod
    def _check_weights(graph) -> None:
        if graph.weights is None:
            raise ValueError("weighted=True needs a graph with weights (CSRGraph(..., weights=w))")
        check_weight_sums(graph)

    def _tree_stride(self) -> int:
        return max(self.num_nodes, 1)

    def _make_driver(self):
        """The CPU or CUDA driver of this sampler: the placed graph's records, built once."""
        from ._kernels import SampleOptions, cpu

        last = self.timeline is not None and self.timeline.last
        options = SampleOptions(self.replace, self.weighted, self.graph.edge_ids is not None, last=last)
        times = None if self.timeline is None else self.timeline.times
        if not self.device.is_cuda:
            return cpu.CPUDriver(self.graph, options, self.seed, times=times)
        from ._kernels import cuda

        return cuda.CUDADriver(
            self.graph, options, self.seed, self.device, weight_tables=cpu.weight_tables, times=times
        )

    def __repr__(self) -> str:
        expand = "" if self.expand == "all" else f", expand={self.expand!r}"
        if self.timeline is not None:
            kind = "edge_time" if self.timeline.edge_level else "node_time"
            expand += f", {kind}, temporal_strategy={self.timeline.strategy!r}"
        elif self.disjoint:
            expand += ", disjoint=True"
        return (
            f"NeighborSampler(fanouts={self.fanouts}, replace={self.replace}, weighted={self.weighted}, "
            f"seed={self.seed}, device={self.device}, placement={self.placement!r}{expand}, graph={self.graph!r})"
        )

    # ------------------------------------------------------------------ public
    def with_fanouts(self, fanouts) -> NeighborSampler:
        """A sampler like this one drawing ``fanouts`` instead (checked like the constructor's).

        It shares the placed graph and its driver, weighted-sampling tables included (no copy, no
        rebuild; the driver is thread-safe), and its batch counter continues from this sampler's,
        so changing fanouts between epochs (the original API's ``set_size``) does not replay
        earlier batches.
        """
        return self._clone(NeighborSampler, fanouts)

    def sample(self, seeds, key=None, *, seed_time=None) -> SampleOutput:
        """Sample the multi-hop neighbourhood of ``seeds``.

        Parameters
        ----------
        seeds : 1-D integer array-like, shape (B,)
            Node ids in ``[0, num_nodes)``; duplicates are kept. NumPy, lists, torch/any DLPack
            tensor; a CUDA sampler also takes CuPy / GPU tensors.
        key : int, optional
            Batch key (>= 0). ``None`` uses and advances the sampler's counter.
        seed_time : 1-D array-like, shape (B,), optional
            Temporal samplers only: each seed's time, inherited by every node of its tree. A
            node-time sampler defaults to the seeds' own ``node_time``; an edge-time sampler needs it.

        Returns
        -------
        SampleOutput
            ``(n_id, adjs)``: ``n_id`` int64 (N,), seeds first then new nodes in order of first
            appearance; ``adjs`` one :class:`Adj` per hop, outermost hop first, with
            ``size == (T_{h+1}, T_h)``. Disjoint samplers also fill ``batch`` (each row's seed
            position; a node of tree ``b`` carries the time ``seed_time[b]``). Arrays are on the
            sampler's device.

        Raises
        ------
        TypeError
            seeds not integer (floats, bools, strings), key not an int, seed_time not numbers.
        ValueError
            seeds not 1-D, or on a GPU for a CPU sampler; key negative; seed_time given to a
            sampler without times, missing for an edge-time sampler, of the wrong length, or NaN.
        IndexError
            a seed outside ``[0, num_nodes)``.
        """
        seeds = self._check_seeds(seeds)
        tree_time = tree_times(self.timeline, seeds, seed_time, self.device)
        key = self._next_key(key)
        n_id, hops, batch = self._driver.sample(seeds, self.fanouts, key, self._call_options(tree_time))
        return SampleOutput(n_id, hop_adjs(hops), batch)

    def sample_links(
        self,
        pairs,
        labels=None,
        *,
        negatives: str | None = None,
        num_negatives: int = 1,
        strict_negatives: bool = False,
        exclude: str | None = "self",
        key: int | None = None,
        pair_time=None,
        check: bool = True,
        total_negatives: int | None = None,
    ) -> LinkSampleOutput:
        """Sample the neighbourhood of node pairs for link prediction, with negatives.

        Parameters
        ----------
        pairs : integer array-like, shape (2, B)
            ``(source, target)`` node ids: row 0 the sources, row 1 the targets. Graph edges or
            not (held-out pairs are the common case); duplicates and self pairs are fine. NumPy,
            lists, DLPack tensors; a CUDA sampler also takes GPU arrays.
        labels : array-like, shape (B,), optional
            Numeric labels of the pairs (default: ``1.0`` each); negatives get ``0``.
        negatives : {None, "binary", "per_source", "triplet"}
            ``"binary"`` (PyG): ``num_negatives * B`` extra pairs, both endpoints uniform over the
            nodes. ``"per_source"`` (DGL's ``Uniform``): each pair's source with
            ``num_negatives`` uniform targets, as extra pairs. ``"triplet"`` (PyG): each pair's
            ``num_negatives`` uniform negative targets as a (B, num_negatives) matrix
            (:attr:`LinkSampleOutput.negative_targets`), not as pairs. Negatives depend only on
            ``(seed, key, pair position, draw)``: every device returns the same ones.
        num_negatives : int
            Negatives per pair (>= 1).
        strict_negatives : bool
            Redraw a negative that is an edge of the graph, up to 16 times; the output counts the
            ones that still are (:attr:`LinkSampleOutput.num_false_negatives`).
        exclude : {"self", "reverse", None}
            ``"self"``: no sampled hop contains an edge ``source -> target`` of a given pair
            (parallel edges included), so a model cannot read the edge it predicts.
            ``"reverse"``: nor ``target -> source`` (graphs stored with both directions).
            A row with excluded edges draws ``min(k, available)`` among the others, with the
            distribution it would have without them; every other row draws exactly what
            :meth:`sample` draws for the same key.
        key : int, optional
            Batch key, as in :meth:`sample` (``None`` uses and advances the counter).
        pair_time : 1-D array-like, shape (B,), optional
            Temporal samplers: each pair's time (required for edge times). Both endpoints' trees,
            and the trees of the pair's negatives, carry it; with node times negatives are drawn
            only among the nodes that exist at that time (``node_time <= pair_time``; the earliest
            node when none does). Without it a node-time sampler gives every tree its own seed's
            node time (each endpoint and negative its own, as :meth:`sample` and PyG) and draws
            negatives uniformly.
            A disjoint sampler gives every endpoint a tree of its own (no deduplication).
        check : bool
            ``False`` skips the range scan of ``pairs`` (a sync per call for GPU pairs), for
            pairs known to lie in ``[0, num_nodes)`` (the link loaders check theirs once). An id
            out of range then reads outside the graph. Dtype and shape are checked either way.
        total_negatives : int, optional
            ``"binary"`` only: draw this many negative pairs (>= 1) instead of
            ``num_negatives * B``, e.g. PyG's ``ceil(amount * B)`` for a fractional ``amount``.
            Negatives are keyed by position, so the first ``total_negatives`` are the ones a
            larger count would draw first.

        Returns
        -------
        LinkSampleOutput
            ``n_id`` (the pairs' distinct endpoints first, in order of first appearance),
            ``adjs``, ``pair_index`` (2, P), ``labels`` (P,), ``negative_targets`` and
            ``num_false_negatives``; arrays on the sampler's device.

        Raises
        ------
        TypeError
            non-integer pairs, non-numeric labels, a non-int ``num_negatives``, a non-bool
            ``strict_negatives``.
        ValueError
            pairs not (2, B) or on a GPU for a CPU sampler, labels not (B,), an unknown
            ``negatives`` or ``exclude``, ``num_negatives < 1``, ``total_negatives < 1`` or given
            without ``negatives="binary"``.
        IndexError
            a pair endpoint outside ``[0, num_nodes)``.

        Examples
        --------
        >>> import gglspeedup as gg
        >>> graph = gg.CSRGraph.from_edge_index([[0, 1, 1, 2], [1, 0, 2, 1]], num_nodes=3)
        >>> out = gg.NeighborSampler(graph, [2]).sample_links([[0], [1]], negatives="binary", key=0)
        >>> out.n_id[out.pair_index[:, 0]].tolist(), out.labels.tolist()
        ([0, 1], [1.0, 0.0])
        >>> bool((out.n_id[out.adjs[0].edge_index] == [[0], [1]]).all(axis=0).any())  # 0 -> 1 excluded
        False
        """
        from .links import UntypedLinks

        options = (negatives, num_negatives, strict_negatives, exclude, key)
        pieces = (self.device, self.num_nodes, self.timeline, self.disjoint, self.fanouts, self._call_options())
        call = UntypedLinks(*pieces)
        return self._link_batch(call, pairs, labels, options, pair_time, check, total_negatives)

    # ------------------------------------------------------------------ validation
    def _check_seeds(self, seeds):
        return check_seeds(seeds, self.num_nodes, self.device)

"""NeighborSampler: multi-hop neighbour sampling on the CPU or a CUDA device (see DESIGN.md)."""

from __future__ import annotations

import threading

import numpy as np

from ..device import as_device, as_device_array, on_gpu, reject_meta, to_numpy
from ..graph import as_csr_graph
from ..validation import check_bool, check_draws, check_fanouts, check_int
from .types import Adj, LinkSampleOutput, SampleOutput

__all__ = [
    "NeighborSampler",
    "BatchKeys",
    "check_seeds",
    "check_expand",
    "check_not_bipartite",
    "check_replace_fanouts",
    "resolve_placement",
]

_PLACEMENTS = ("auto", "device", "pinned", "host")
_UINT64_LIMIT = 1 << 64
_DEVICE_FIT_FRACTION = 0.5  # "auto" keeps the graph in GPU memory below this share of free memory


class BatchKeys:
    """The batch-key counter both samplers keep (``_key``, guarded by ``_lock``)."""

    def _next_key(self, key) -> int:
        """``key`` checked, or the counter's next value (advancing it) when ``key`` is None."""
        if key is None:
            with self._lock:
                key, self._key = self._key, self._key + 1
            return key
        return check_int("key", key, minimum=0, below=_UINT64_LIMIT)

    def _continue_keys(self, clone) -> None:
        """Give ``clone`` a lock of its own and this sampler's counter value."""
        clone._lock = threading.Lock()
        with self._lock:
            clone._key = self._key


class NeighborSampler(BatchKeys):
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
    or ``cuda.CUDADriver``) that owns the placed graph's arrays as the kernels read them;
    :meth:`sample` checks its arguments and hands them to ``driver.sample_all(seeds, fanouts, key)``.

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

    def __init__(
        self, graph, fanouts, *, replace=False, weighted=False, seed=0, device="cpu", placement="auto", expand="all"
    ):
        graph = check_not_bipartite(as_csr_graph(graph))
        self.fanouts = check_fanouts(fanouts)
        self.expand = check_expand(expand)
        self.replace, self.weighted = check_bool("replace", replace), check_bool("weighted", weighted)
        check_replace_fanouts(self.fanouts, self.replace)
        self.seed = check_int("seed", seed, minimum=0, below=_UINT64_LIMIT)
        if self.weighted and graph.weights is None:
            raise ValueError("weighted=True needs a graph with weights (CSRGraph(..., weights=w))")
        self.device = as_device(device).check_available()
        self.placement = resolve_placement(self.device, placement, graph, self.weighted)
        self.graph = graph.to(self.device, self.placement)
        self.num_nodes = graph.num_nodes
        self._key = 0
        self._lock = threading.Lock()
        self._driver = self._make_driver()

    def _make_driver(self):
        """The CPU or CUDA driver of this sampler: the placed graph's records, built once."""
        from ._kernels import SampleOptions, cpu

        options = SampleOptions(self.replace, self.weighted, self.graph.edge_ids is not None)
        if not self.device.is_cuda:
            return cpu.CPUDriver(self.graph, options, self.seed)
        from ._kernels import cuda

        return cuda.CUDADriver(self.graph, options, self.seed, self.device, weight_tables=cpu.weight_tables)

    def __repr__(self) -> str:
        expand = "" if self.expand == "all" else f", expand={self.expand!r}"
        return (
            f"NeighborSampler(fanouts={self.fanouts}, replace={self.replace}, weighted={self.weighted}, "
            f"seed={self.seed}, device={self.device}, placement={self.placement!r}{expand}, graph={self.graph!r})"
        )

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_lock"] = None
        state["_driver"] = None  # rebuilt on arrival: cheaper than pickling weight tables and maps
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._driver = self._make_driver()

    # ------------------------------------------------------------------ public
    def with_fanouts(self, fanouts) -> NeighborSampler:
        """A sampler like this one drawing ``fanouts`` instead (checked like the constructor's).

        It shares the placed graph and its driver, weighted-sampling tables included (no copy, no
        rebuild; the driver is thread-safe), and its batch counter continues from this sampler's,
        so changing fanouts between epochs (the original API's ``set_size``) does not replay
        earlier batches.
        """
        clone = NeighborSampler.__new__(NeighborSampler)
        clone.__dict__.update(self.__dict__)
        clone.fanouts = check_fanouts(fanouts)
        check_replace_fanouts(clone.fanouts, self.replace)
        self._continue_keys(clone)
        return clone

    def sample(self, seeds, key=None) -> SampleOutput:
        """Sample the multi-hop neighbourhood of ``seeds``.

        Parameters
        ----------
        seeds : 1-D integer array-like, shape (B,)
            Node ids in ``[0, num_nodes)``; duplicates are kept. NumPy, lists, torch/any DLPack
            tensor; a CUDA sampler also takes CuPy / GPU tensors.
        key : int, optional
            Batch key (>= 0). ``None`` uses and advances the sampler's counter.

        Returns
        -------
        SampleOutput
            ``(n_id, adjs)``: ``n_id`` int64 (N,), seeds first then new nodes in order of first
            appearance; ``adjs`` one :class:`Adj` per hop, outermost hop first, with
            ``size == (T_{h+1}, T_h)``. Arrays are on the sampler's device.

        Raises
        ------
        TypeError
            seeds not integer (floats, bools, strings), key not an int.
        ValueError
            seeds not 1-D, or on a GPU for a CPU sampler; key negative.
        IndexError
            a seed outside ``[0, num_nodes)``.
        """
        seeds = self._check_seeds(seeds)
        key = self._next_key(key)
        n_id, hops = self._driver.sample_all(seeds, self.fanouts, key, expand=self.expand)
        adjs = [Adj(edge_index, e_id, size) for edge_index, e_id, size in reversed(hops)]
        return SampleOutput(n_id, adjs)

    def sample_links(
        self, pairs, labels=None, *, negatives=None, num_negatives=1, strict_negatives=False, exclude="self", key=None
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
            ``negatives`` or ``exclude``, ``num_negatives < 1``.
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
        from .links import sample_links

        return sample_links(self, pairs, labels, negatives, num_negatives, strict_negatives, exclude, key)

    # ------------------------------------------------------------------ validation
    def _check_seeds(self, seeds):
        return check_seeds(seeds, self.num_nodes, self.device)


def check_not_bipartite(graph):
    """``graph``, refused when bipartite (``num_src_nodes != num_nodes``): an untyped sampler makes
    each hop's sampled sources the next hop's targets, rows a bipartite relation does not have."""
    if graph.num_src_nodes != graph.num_nodes:
        raise ValueError(
            f"graph is bipartite (num_src_nodes = {graph.num_src_nodes}, num_nodes = {graph.num_nodes}): an "
            "untyped sampler makes each hop's sampled sources the next hop's targets, which a bipartite "
            "relation's source ids are not; sample it as a relation of a HeteroGraph (HeteroNeighborSampler)"
        )
    return graph


EXPANDS = ("all", "new")


def check_replace_fanouts(fanouts, replace: bool, name: str = "fanouts") -> None:
    """With replacement a row draws exactly ``k`` edges: refuse a ``k`` whose output for a single
    target would not fit in memory (``fanouts=[10**12]``), at construction."""
    if replace:
        for hop, k in enumerate(fanouts):
            check_draws(f"{name}[{hop}]", k, k, "for every target (replace=True)")


def check_expand(expand) -> str:
    """``expand`` checked: ``"all"`` (every node so far, layer blocks) or ``"new"`` (PyG's rule)."""
    if expand not in EXPANDS:
        raise ValueError(f"expand must be one of {EXPANDS}, got {expand!r}")
    return expand


def resolve_placement(device, placement: str, graph, weighted: bool) -> str:
    """The placement a sampler on ``device`` uses for ``graph`` (a CSRGraph; a typed graph's
    stacked one): ``"auto"`` is ``"device"`` when the graph, with a weighted sampler's two tables
    (8 bytes per row and per edge), takes less than half the free GPU memory, else ``"pinned"``;
    a clear error for a placement the device cannot take."""
    if placement not in _PLACEMENTS:
        raise ValueError(f"placement must be one of {_PLACEMENTS}, got {placement!r}")
    if not device.is_cuda:
        if placement not in ("auto", "host"):
            raise ValueError(
                f"placement {placement!r} needs a CUDA device; a CPU sampler reads the graph from host memory"
            )
        return "host"
    if placement == "host":
        raise ValueError("placement 'host' is for CPU samplers; on a CUDA device use 'device' or 'pinned'")
    if placement != "auto":
        return placement
    if device.simulated:
        return "device"
    import cupy

    with device:
        free = cupy.cuda.runtime.memGetInfo()[0]
    needed = graph.nbytes + (8 * (graph.num_nodes + graph.num_edges) if weighted else 0)
    return "device" if needed < _DEVICE_FIT_FRACTION * free else "pinned"


def check_seeds(seeds, num_nodes: int, device, name: str = "seeds"):
    """``seeds`` as a contiguous int64 1-D array (host, or ``device``'s for GPU input), every id in
    ``[0, num_nodes)``; ``name`` names the argument in errors."""
    if seeds is None:
        raise TypeError(f"{name} must be a 1-D integer array, got None")
    reject_meta(name, seeds)
    seeds_on_gpu = on_gpu(seeds)
    if seeds_on_gpu and not device.is_cuda:
        raise ValueError(
            f"{name} live on a GPU but this sampler runs on {device}; pass host seeds "
            "(e.g. seeds.cpu() / cupy.asnumpy(seeds)) or build the sampler with device='cuda'"
        )
    if seeds_on_gpu:
        seeds = as_device_array(seeds, device)
    else:
        if isinstance(seeds, (list, tuple)) and len(seeds) == 0:
            seeds = np.empty(0, np.int64)
        seeds = to_numpy(seeds)
    dtype = seeds.dtype
    if dtype.kind not in "iu":
        what = "bool" if dtype.kind == "b" else str(dtype)
        raise TypeError(f"{name} must hold integers (int32 or int64), got dtype {what}")
    if seeds.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(seeds.shape)}")
    xp = np if isinstance(seeds, np.ndarray) else device.xp
    if seeds.size:
        bad = (seeds < 0) | (seeds >= num_nodes)
        if xp is np:
            out_of_range = bool(bad.any())
        else:
            from .._launch import to_host

            out_of_range = bool(to_host(bad.any()))  # sync: the one device read of a GPU batch's seeds
        if out_of_range:
            position = int(xp.argmax(bad))
            raise IndexError(
                f"{name} must lie in [0, num_nodes = {num_nodes}): {name}[{position}] = {int(seeds[position])}"
            )
    return xp.ascontiguousarray(seeds, dtype=np.int64)

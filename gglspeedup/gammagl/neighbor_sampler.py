"""NeighborSampler: ``gammagl.loader.NeighborSampler`` (GraphSAGE's loader) with gglspeedup sampling.

>>> import numpy as np
>>> from gglspeedup.gammagl import NeighborSampler
>>> edge_index = np.array([[1, 2, 3, 0, 2], [0, 0, 1, 2, 3]])
>>> loader = NeighborSampler(edge_index, sample_lists=[2, -1], batch_size=2, backend="numpy")
>>> len(loader)
2
>>> dst_node, n_id, adjs = next(iter(loader))
>>> dst_node.tolist(), n_id[:2].tolist(), type(adjs).__name__, [adj.size for adj in adjs]
([0, 1], [0, 1], 'list', [(4, 4), (4, 2)])
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..graph import CSRGraph
from ..loader import BaseLoader
from ..protocols import FeatureSource
from ..validation import check_bool, check_fanouts, check_int
from ._common import (
    gammagl_device,
    host_array,
    loader_options,
    no_hops,
    node_ids,
    ready_sampler_seed,
    sampler_fanouts,
)

__all__ = ["NeighborSampler", "EdgeIndex"]


@dataclass
class EdgeIndex:
    """One sampled hop, as GammaGL's ``gammagl.loader.neighbor_sampler.EdgeIndex``.

    A dataclass, not a tuple (GammaGL's ``GraphSAGE_Sample_Model.inference`` tells one hop from a
    list of hops with ``isinstance(adjs, (List, Tuple))``).

    edge_index : tensor, int64, shape (2, E)
        Row 0: the sampled neighbour (a position in the hop's ``n_id``); row 1: its target, a
        position in ``n_id[:size[1]]``.
    e_id : tensor, int64, shape (E,), or None
        Each edge's column in the ``edge_index`` the loader was built from (``None`` with
        ``return_e_id=False``).
    size : tuple of int
        ``(sources, targets)`` of the hop.
    """

    edge_index: Any
    e_id: Any
    size: tuple


class NeighborSampler(BaseLoader):
    """``gammagl.loader.NeighborSampler`` with GammaGL's arguments, sampling done by gglspeedup.

    Yields ``(dst_node, n_id, adjs)``: the batch's seed ids, every sampled node's id (seeds first)
    and ``adjs``, **always a list** of :class:`EdgeIndex` records, one per hop, outermost hop first
    (GammaGL returns the bare record when there is one hop; its models accept both). Tensors are of
    ``backend`` (TensorLayerX's by default), int64, zero-copy.

    Parameters
    ----------
    edge_index : tensor or array, shape (2, E), or a gglspeedup NeighborSampler
        ``edge_index[0]`` sources, ``edge_index[1]`` targets (messages flow source -> target). A
        ``gammagl.sparse.SparseGraph`` raises ``NotImplementedError``. gglspeedup only: a ready
        :class:`~gglspeedup.NeighborSampler` (e.g. a service cluster's ``cluster.sampler(...)``,
        whose graph lives on its servers) samples instead, with ``sample_lists`` as its fanouts
        (``with_fanouts``) and its own seed and device; ``num_nodes``, ``seed`` and ``device`` are
        then the sampler's (another value raises ``ValueError``).
    sample_lists : list of int
        Neighbours per hop, **seed hop first** (``[25, 10]``); ``-1`` takes every neighbour (GammaGL's
        ``inference`` loaders use ``[-1]``). ``[]``, no hops, yields the seeds alone, as GammaGL's:
        ``n_id`` equal to ``dst_node`` and ``adjs == []``.
    node_idx : tensor, optional
        The seeds to iterate: ``None`` (every node), a bool mask, or integer ids.
    num_nodes : int, optional
        Default: the mask's length, else the largest id in ``edge_index`` / ``node_idx`` plus one.
    return_e_id : bool
        ``False`` yields ``e_id=None``.
    transform : callable, optional
        Called as ``transform(dst_node, n_id, adjs)``; its result is yielded.
    batch_size, shuffle, drop_last
        As GammaGL's (TensorLayerX's ``DataLoader``) options. ``num_workers > 0``, ``sampler``,
        ``batch_sampler``, ``collate_fn``, ``worker_init_fn`` and ``persistent_workers`` raise
        ``NotImplementedError``.
    x : tensor or FeatureSource, optional
        gglspeedup only: feature rows to gather with each batch, which then comes as
        ``(dst_node, n_id, adjs, x[n_id])`` (the loop's ``tlx.gather(x, n_id)`` done here, and in
        the background with ``prefetch``).
    prefetch : int
        gglspeedup only: batches prepared ahead on a background thread (0: none, GammaGL's
        behaviour), so sampling (and the ``x`` gather) overlaps the model's step.
    prefetch_threads : int or None
        gglspeedup only: Numba threads of that background thread (default 1: the model's step keeps
        the cores; sampling a batch takes a small fraction of a step). ``None``: Numba's default.
    prefetch_nice : int
        gglspeedup only: how much lower the background thread's scheduling priority is than the
        process's (Linux nice steps, 0-19; 0: the same). Raised, the thread samples on the cycles
        the model's step leaves idle instead of taking its cores (a batch still waits for it when
        it falls behind; the machine's other processes then also come first).
    seed : int or None
        gglspeedup only: keys the sampler and the shuffle (epoch ``e``'s order is keyed by
        ``(seed, e)``, batch ``i`` samples with key ``e * len(loader) + i``): runs replay exactly.
        ``None``: 0, or a ready sampler's own seed.
    device : str, int or None
        ``"cpu"`` (or GammaGL's ``-1``) or a CUDA device (``"cuda:0"``, ``0``): where sampling runs
        and the tensors live. ``None``: the CPU, or a ready sampler's own device.
    backend : str or None
        ``"tlx"`` (TensorLayerX's framework, from ``TL_BACKEND``), any gglspeedup backend name
        (``"torch"``, ``"numpy"``, ...), or ``None`` for the sampler's own arrays.
    """

    _COUNTERS = ("seeds",)

    def __init__(
        self,
        edge_index,
        sample_lists,
        node_idx=None,
        num_nodes=None,
        return_e_id: bool = True,
        transform=None,
        *,
        x=None,
        prefetch: int = 0,
        prefetch_threads: int | None = 1,
        prefetch_nice: int = 0,
        seed: int | None = None,
        device=None,
        backend: str | None = "tlx",
        **kwargs,
    ):
        from ..feature import FeatureStore
        from ..sampling import NeighborSampler as Sampler

        given = edge_index if isinstance(edge_index, Sampler) else None
        options = loader_options(type(self).__name__, kwargs)
        if type(edge_index).__name__ == "SparseGraph":
            raise NotImplementedError(
                "NeighborSampler: edge_index as a gammagl SparseGraph is not supported; pass the (2, E) edge_index"
            )
        self.sizes = [] if no_hops(sample_lists) else check_fanouts(sample_lists, "sample_lists")
        self.return_e_id = check_bool("return_e_id", return_e_id)
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable or None, got {type(transform).__name__}")
        self.transform = transform
        self.edge_index, self.node_idx = edge_index, node_idx
        if given is not None:
            if num_nodes is not None and num_nodes != given.num_nodes:
                raise ValueError(f"num_nodes is the sampler's ({given.num_nodes}) when one is given, got {num_nodes}")
            seed = ready_sampler_seed(type(self).__name__, given, seed, device)
            self.num_nodes = int(given.num_nodes)
            sampler = given.with_fanouts(sampler_fanouts(self.sizes))
        else:
            edges = host_array("edge_index", edge_index)
            self.num_nodes = _infer_num_nodes(edges, node_idx, num_nodes)
            graph = CSRGraph.from_edge_index(edges, num_nodes=self.num_nodes)
            seed = 0 if seed is None else seed
            device = gammagl_device("cpu" if device is None else device)
            sampler = Sampler(graph, sampler_fanouts(self.sizes), seed=seed, device=device)
        self._seeds = node_ids("node_idx", node_idx, self.num_nodes)
        features = None
        if x is not None:
            features = x if isinstance(x, FeatureSource) else FeatureStore(host_array("x", x), device=sampler.device)
            if len(features) < self.num_nodes:
                raise ValueError(f"x must have a row for each of the {self.num_nodes} nodes, got {len(features)}")
        self._num_items = len(self._seeds)
        if prefetch_threads is not None:
            prefetch_threads = check_int("prefetch_threads", prefetch_threads, minimum=1)
        self.producer_threads = prefetch_threads
        self.producer_nice = check_int("prefetch_nice", prefetch_nice, minimum=0, below=20)
        # Without x there is no feature source to check or pool: the typed path of _setup skips both.
        self._setup(
            sampler,
            features,
            options["batch_size"],
            options["shuffle"],
            options["drop_last"],
            prefetch,
            backend,
            seed,
            reuse_buffers=True,
            typed=features is None,
        )

    @property
    def dataset(self) -> np.ndarray:
        """The seed node ids one epoch visits (``len(loader.dataset)``, as GammaGL's examples read it)."""
        return self._seeds

    def __repr__(self) -> str:
        return f"{type(self).__name__}(sizes={self.sizes})"

    def _items_in_order(self, permutation):
        return self._seeds if permutation is None else self._seeds[permutation]

    def _make_batch(self, epoch: int, index: int, seeds):
        return self._batch(seeds, self._key(epoch, index))

    def sample(self, batch, key=None):
        """One batch for the seed ids ``batch`` (GammaGL's ``collate_fn``), sampled with ``key``
        (default: the sampler's own counter, 0, 1, ...)."""
        return self._batch(node_ids("batch", batch, self.num_nodes), key)

    def _batch(self, seeds: np.ndarray, key):
        start = time.perf_counter()
        out = self.sampler.sample(seeds, key=key)
        sampled = time.perf_counter()
        rows = None if self.features is None else self._gather(out.n_id)
        gathered = time.perf_counter()
        count = len(seeds)
        records = out.adjs if self.sizes else []  # no hops: the one hop drawing nothing is not GammaGL's
        hops = [(adj.edge_index, adj.e_id if self.return_e_id else None) for adj in records]
        dst_node, n_id, hops, rows = self._convert((out.n_id[:count], out.n_id, hops, rows))
        adjs = [EdgeIndex(edge_index, e_id, adj.size) for (edge_index, e_id), adj in zip(hops, records)]
        edges = sum(int(adj.edge_index.shape[1]) for adj in records)
        self._timed(start, sampled, gathered, seeds=count, nodes=int(out.n_id.shape[0]), edges=edges)
        result = (dst_node, n_id, adjs) if rows is None else (dst_node, n_id, adjs, rows)
        return result if self.transform is None else self.transform(*result)


def _infer_num_nodes(edges: np.ndarray, node_idx, num_nodes) -> int:
    """GammaGL's rule: ``num_nodes``, else a bool mask's length, else the largest id in
    ``edge_index`` (and integer ``node_idx``) plus one."""
    if num_nodes is not None:  # a negative count is a bad value (ValueError), a float a bad type
        return check_int("num_nodes", num_nodes, minimum=0, expected="a non-negative int or None")
    largest = int(edges.max()) if edges.size else -1
    if node_idx is not None:
        ids = host_array("node_idx", node_idx)
        if ids.dtype == np.bool_:
            return int(ids.reshape(-1).shape[0])
        if ids.size and ids.dtype.kind in "iu":
            largest = max(largest, int(ids.max()))
    return largest + 1

"""NodeLoader: mini-batches of seed nodes, their sampled neighbourhoods and feature rows.

Untyped (a :class:`~gglspeedup.NeighborSampler`: :class:`Batch`) or typed (a
:class:`~gglspeedup.HeteroNeighborSampler` and seeds per node type:
:class:`~gglspeedup.loader.HeteroBatch`, see :mod:`.hetero`), with the same keys, shuffling,
prefetching and stats.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from ..device import array_module
from ..protocols import Sampler
from ..validation import check_ids_in_range, int_array
from ._base import BaseLoader, check_default_times, check_sampler, label_array, num_nodes_of, take_labels, with_trees
from .hetero import (
    HeteroBatch,
    TypedFeatures,
    check_typed_labels,
    check_typed_seeds,
    is_typed_seeds,
    split_seeds,
    typed_num_nodes,
    typed_sizes,
)

__all__ = ["Batch", "NodeLoader"]


class _BatchFields(NamedTuple):
    x: Any
    y: Any
    adjs: list
    n_id: Any
    batch_size: int


class Batch(_BatchFields):
    """One mini-batch, in the loader's backend.

    x : tensor, shape (N, F)
        Feature rows of ``n_id`` (``features[n_id]``).
    y : tensor, shape (batch_size,), or None
        Labels of the seeds (``labels[seeds]``); ``None`` without labels.
    adjs : list of Adj
        The sampled hops, outermost first (``adjs[-1]`` targets the seeds); ``edge_index`` int64.
    n_id : tensor, int64, shape (N,)
        Global node ids; ``n_id[:batch_size]`` are the seeds.
    batch_size : int
        Number of seeds in this batch.
    batch : tensor, int64, shape (N,), or None
        An attribute, not a field (the batch unpacks as before): a disjoint or temporal sampler's
        tree of each row of ``n_id`` (:attr:`SampleOutput.batch <gglspeedup.SampleOutput>`);
        ``None`` for shared sampling.
    """

    batch = None  # an attribute, not a field: see the docstring


class NodeLoader(BaseLoader):
    """Iterate over seed nodes in mini-batches of sampled neighbourhoods and their features.

    Parameters
    ----------
    sampler : Sampler or HeteroSampler
        Anything with ``sample(seeds, key=None) -> SampleOutput``
        (:class:`gglspeedup.protocols.Sampler`), e.g. a :class:`~gglspeedup.NeighborSampler`;
        or a typed one (:class:`gglspeedup.protocols.HeteroSampler`, ``num_nodes`` a dict), e.g.
        a :class:`~gglspeedup.HeteroNeighborSampler`, which makes the loader typed.
    features : FeatureSource or array, shape (num_nodes, F); typed: dict or HeteroFeatureStore
        A :class:`~gglspeedup.FeatureStore` or any :class:`gglspeedup.protocols.FeatureSource`
        (rows gathered with ``features.gather(n_id, out=...)``), or an array indexed as
        ``features[n_id]``. Typed: a dict node type -> one of those, shape (num_nodes[t], F_t)
        (``None`` or left out: a type without features, absent from ``x``), or a typed store
        with ``gather({type: ids}) -> {type: rows}`` (a ``HeteroFeatureStore``).
    seeds : 1-D integer array-like, shape (S,); typed: dict node type -> 1-D ids
        The nodes to iterate over (e.g. ``split["train"]``), in ``[0, num_nodes)``. Typed: a dict
        (or a ``(node_type, ids)`` pair), ids in ``[0, num_nodes[type])``; the loader visits the
        ``(type, id)`` list, types in the sampler's node-type order, shuffled across types.
    batch_size : int
        Seeds per batch (the last batch may be smaller unless ``drop_last``); typed: seeds of all
        types together.
    labels : array, shape (num_nodes, ...), optional; typed: dict node type -> array
        One entry per node (checked against the sampler's ``num_nodes``, else the feature rows);
        batches carry ``y = labels[batch_seeds]``, on the sampler's device. Typed: one array per
        node type with ``num_nodes[type]`` entries (one array alone: the only seed type's);
        ``y[t] = labels[t][seeds of type t]`` for every seed type ``labels`` names.
    shuffle : bool
        Permute the seeds every epoch, keyed by ``(seed, epoch)``.
    drop_last : bool
        Drop the last, incomplete batch.
    prefetch : int
        Batches prepared ahead on a background thread; ``0`` prepares each batch in the caller's
        thread (no thread at all, handy for debugging).
    workers : int
        Producer threads, each preparing every ``workers``-th batch, so that up to ``workers``
        batches are in preparation at once (``1``, the default: one producer thread). Threads,
        not processes as PyG's and DGL's ``num_workers``: the kernels release the GIL, and a
        remote sampler's batches wait on their servers. Batches still arrive in order, each the
        batch one producer would make (it depends only on its key); the queues hold
        ``ceil(prefetch / workers)`` ready batches per worker. An error in any worker is raised
        in the caller's loop in its batch's place; closing or abandoning the iterator stops
        every worker. ``workers > 1`` needs ``prefetch >= 1``. The sampler and the features are
        called from several threads at once (this package's are thread-safe; their statistics
        are counted under one lock). A collective source (``DistFeature``, whose lookups every
        rank must issue in the same order) is refused with ``workers > 1``.
    backend : str or None
        Framework of the batches (see :func:`gglspeedup.backends.to`); ``None`` keeps the NumPy /
        CuPy arrays the sampler and the feature store return.
    seed : int
        Shuffling seed.
    reuse_buffers : bool
        Gather host feature rows into a pool of at most ``prefetch + 3`` recycled buffers (the
        queue, the batch being prepared, the caller's current and previous batch; two more per
        further worker) instead of fresh
        memory per batch. A buffer returns to the pool when nothing references the batch's ``x``
        any more (the tensor handed to the framework and anything sharing its memory,
        autograd's saved inputs included), so a batch the caller keeps is never overwritten; when
        all pooled buffers are held, fresh memory is used. Applies to feature sources on the CPU
        (GPU outputs come from CuPy's memory pool already).

    Raises
    ------
    TypeError
        a sampler without ``sample`` or whose ``sample`` cannot be called as ``sample(seeds,
        key=...)`` (a ``MultiDeviceSampler``: pass ``sampler.rank(r)``), features that cannot be
        indexed, non-integer seeds, a non-bool ``shuffle`` / ``drop_last`` / ``reuse_buffers``, a
        non-int ``batch_size`` / ``prefetch`` / ``seed`` / ``workers``; typed seeds with an untyped
        sampler or the reverse, untyped features for a typed sampler, one labels array for several
        seed types.
    ValueError
        seeds not 1-D, ``labels`` not one entry per node, an unknown backend, a count out of range
        (``workers > 1`` with ``prefetch=0`` included), ``workers > 1`` with a collective feature
        source (``DistFeature``), a temporal sampler that cannot time the seeds by itself (the
        loader passes no ``seed_time``: edge times, or a seed type without node times);
        typed: a node type the sampler does not know (in seeds, labels or features), features of a
        type whose row count is not ``num_nodes[type]``.
    IndexError
        a seed outside ``[0, num_nodes)`` (when the sampler or the features tell ``num_nodes``);
        typed: outside ``[0, num_nodes[type])``.

    Notes
    -----
    Each ``iter(loader)`` is one epoch and advances :attr:`epoch` (``set_epoch`` pins it, as
    with torch's ``DistributedSampler``). Batch ``i`` of epoch ``e`` samples with
    ``key = e * len(loader) + i``, so it replays exactly. :meth:`stats` reports the time spent
    sampling, gathering, converting and waiting. A typed loader yields
    :class:`~gglspeedup.loader.HeteroBatch` es: batch ``i`` is ``sampler.sample({type: its seeds
    of that type}, key=...)`` (every seed type, maybe empty), with ``x`` per type with features;
    its stats sum nodes and edges over the types.

    Examples
    --------
    >>> import gglspeedup as gg, numpy as np
    >>> graph = gg.HeteroGraph({("author", "writes", "paper"): [[0, 1, 1], [0, 0, 1]]}, {"author": 2, "paper": 2})
    >>> loader = gg.NodeLoader(gg.HeteroNeighborSampler(graph, [2]), {"author": np.eye(2)},
    ...                        {"paper": [0, 1]}, 2, shuffle=False, prefetch=0, backend=None)
    >>> batch = next(iter(loader))
    >>> batch.batch_size, batch.n_id["paper"].tolist(), sorted(batch.x)
    ({'paper': 2}, [0, 1], ['author'])
    """

    _COUNTERS = ("seeds",)

    def __init__(
        self,
        sampler,
        features,
        seeds,
        batch_size,
        *,
        labels=None,
        shuffle=True,
        drop_last=False,
        prefetch=2,
        backend="torch",
        seed=0,
        reuse_buffers=True,
        workers=1,
    ):
        check_sampler(sampler, Sampler, "sample(seeds, key=None)")
        typed = typed_num_nodes(sampler)
        if typed is None and is_typed_seeds(seeds):
            raise TypeError(
                "seeds per node type need a typed sampler (e.g. a HeteroNeighborSampler: num_nodes a dict "
                f"node type -> count), got {type(sampler).__name__}"
            )
        options = (batch_size, shuffle, drop_last, prefetch, backend, seed, reuse_buffers)
        self._setup(sampler, features, *options, typed=typed is not None, workers=workers)
        self._typed = None
        if typed is not None:
            self._setup_typed(features, seeds, labels, typed)
            check_default_times(sampler, [t for t, ids in self.seeds.items() if len(ids)], "seed_time")
            return
        check_default_times(sampler, [None], "seed_time")
        self.seeds = np.array(int_array("seeds", seeds, beyond=IndexError), copy=True)
        self._num_items = len(self.seeds)
        num_nodes = num_nodes_of(sampler, features)
        if num_nodes is not None:
            check_ids_in_range("seeds", self.seeds, num_nodes, what="num_nodes")
        if labels is not None:
            labels = label_array("labels", labels)
            if labels.ndim < 1:
                raise ValueError(f"labels must be an array indexed by node id, got shape {labels.shape}")
            if num_nodes is not None and labels.shape[0] != num_nodes:
                raise ValueError(f"labels must have one entry per node ({num_nodes}), got shape {tuple(labels.shape)}")
            if num_nodes is None and self.seeds.size and labels.shape[0] <= int(self.seeds.max()):
                raise ValueError(f"labels has {labels.shape[0]} entries but seeds reach node {int(self.seeds.max())}")
        self.labels = labels
        self._check_dtypes("labels", self.labels)

    def _setup_typed(self, features, seeds, labels, num_nodes: dict) -> None:
        """The typed mode: seeds, labels and features per node type (see :mod:`.hetero`)."""
        self.seed_types, self._items = check_typed_seeds(seeds, num_nodes)
        self._num_items = self._items.shape[1]
        self.seeds = {t: self._items[1][self._items[0] == i] for i, t in enumerate(self.seed_types)}
        self.labels = check_typed_labels(labels, self.seed_types, num_nodes)
        self._check_dtypes("labels", self.labels)
        self._typed = TypedFeatures(features, num_nodes, self._max_buffers)
        self._pools = self._typed.pools

    def __repr__(self) -> str:
        seeds = len(self.seeds) if self._typed is None else {t: len(ids) for t, ids in self.seeds.items()}
        return (
            f"NodeLoader(seeds={seeds}, batch_size={self.batch_size}, batches={len(self)}, "
            f"shuffle={self.shuffle}, drop_last={self.drop_last}, prefetch={self.prefetch}, workers={self.workers}, "
            f"backend={self.backend!r}, epoch={self.epoch})"
        )

    def order(self, epoch: int) -> np.ndarray:
        """The seeds in the order epoch ``epoch`` visits them (int64, shape (S,)); typed: shape
        (2, S), row 0 each seed's position in :attr:`seed_types`, row 1 its id."""
        return self._items_in_order(self._permutation(epoch))

    def _items_in_order(self, permutation):
        items = self.seeds if self._typed is None else self._items
        return items if permutation is None else items[..., permutation]

    def _make_batch(self, epoch: int, index: int, batch_seeds: np.ndarray) -> Batch:
        if self._typed is not None:
            return self._make_typed_batch(epoch, index, batch_seeds)
        start = time.perf_counter()
        out = self.sampler.sample(batch_seeds, key=self._key(epoch, index))
        n_id, adjs = out
        sampled = time.perf_counter()
        x = self._gather(n_id)
        y = None if self.labels is None else take_labels(self.labels, batch_seeds, array_module(n_id))
        gathered = time.perf_counter()
        batch = self._convert(with_trees(Batch(x, y, list(adjs), n_id, len(batch_seeds)), out))
        edges = sum(int(adj.edge_index.shape[1]) for adj in adjs)
        self._timed(start, sampled, gathered, seeds=len(batch_seeds), nodes=len(n_id), edges=edges)
        return batch

    def _make_typed_batch(self, epoch: int, index: int, items: np.ndarray) -> HeteroBatch:
        start = time.perf_counter()
        seeds = split_seeds(items, self.seed_types)
        out = self.sampler.sample(seeds, key=self._key(epoch, index))
        sampled = time.perf_counter()
        x = self._typed.gather(out.n_id)
        y = None
        if self.labels is not None:
            ids_module = array_module(next(iter(out.n_id.values())))
            y = {t: take_labels(self.labels[t], seeds[t], ids_module) for t in self.seed_types if t in self.labels}
        gathered = time.perf_counter()
        batch_size = {t: len(ids) for t, ids in seeds.items()}
        batch = HeteroBatch(x, y, list(out.adjs), out.n_id, batch_size, out.num_sampled_nodes, out.num_sampled_edges)
        batch = self._convert(with_trees(batch, out))
        nodes, edges = typed_sizes(out.n_id, out.adjs)
        self._timed(start, sampled, gathered, seeds=items.shape[1], nodes=nodes, edges=edges)
        return batch

"""NodeLoader: mini-batches of seed nodes, their sampled neighbourhoods and feature rows."""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from .. import backends
from ..device import aligned_empty, array_module
from ..protocols import Sampler
from ..validation import check_ids_in_range, int_array
from ._base import BaseLoader, num_nodes_of

__all__ = ["Batch", "NodeLoader"]


class Batch(NamedTuple):
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
    """

    x: Any
    y: Any
    adjs: list
    n_id: Any
    batch_size: int


class NodeLoader(BaseLoader):
    """Iterate over seed nodes in mini-batches of sampled neighbourhoods and their features.

    Parameters
    ----------
    sampler : Sampler
        Anything with ``sample(seeds, key=None) -> SampleOutput``
        (:class:`gglspeedup.protocols.Sampler`), e.g. a :class:`~gglspeedup.NeighborSampler`.
    features : FeatureSource or array, shape (num_nodes, F)
        A :class:`~gglspeedup.FeatureStore` or any :class:`gglspeedup.protocols.FeatureSource`
        (rows gathered with ``features.gather(n_id, out=...)``), or an array indexed as
        ``features[n_id]``.
    seeds : 1-D integer array-like, shape (S,)
        The nodes to iterate over (e.g. ``split["train"]``), in ``[0, num_nodes)``.
    batch_size : int
        Seeds per batch (the last batch may be smaller unless ``drop_last``).
    labels : array, shape (num_nodes, ...), optional
        One entry per node (checked against the sampler's ``num_nodes``, else the feature rows);
        batches carry ``y = labels[batch_seeds]``, on the sampler's device.
    shuffle : bool
        Permute the seeds every epoch, keyed by ``(seed, epoch)``.
    drop_last : bool
        Drop the last, incomplete batch.
    prefetch : int
        Batches prepared ahead on a background thread; ``0`` prepares each batch in the caller's
        thread (no thread at all, handy for debugging).
    backend : str or None
        Framework of the batches (see :func:`gglspeedup.backends.to`); ``None`` keeps the NumPy /
        CuPy arrays the sampler and the feature store return.
    seed : int
        Shuffling seed.
    reuse_buffers : bool
        Gather host feature rows into a pool of at most ``prefetch + 3`` recycled buffers (the
        queue, the batch being prepared, the caller's current and previous batch) instead of fresh
        memory per batch. A buffer returns to the pool when nothing references the batch's ``x``
        any more (the tensor handed to the framework and anything sharing its memory,
        autograd's saved inputs included), so a batch the caller keeps is never overwritten; when
        all pooled buffers are held, fresh memory is used. Applies to feature sources on the CPU
        (GPU outputs come from CuPy's memory pool already).

    Raises
    ------
    TypeError
        a sampler without ``sample``, features that cannot be indexed, non-integer seeds, a
        non-bool ``shuffle`` / ``drop_last`` / ``reuse_buffers``, a non-int ``batch_size`` /
        ``prefetch`` / ``seed``.
    ValueError
        seeds not 1-D, ``labels`` not one entry per node, an unknown backend, a count out of range.
    IndexError
        a seed outside ``[0, num_nodes)`` (when the sampler or the features tell ``num_nodes``).

    Notes
    -----
    Each ``iter(loader)`` is one epoch and advances :attr:`epoch` (``set_epoch`` pins it, as
    with torch's ``DistributedSampler``). Batch ``i`` of epoch ``e`` samples with
    ``key = e * len(loader) + i``, so it replays exactly. :meth:`stats` reports the time spent
    sampling, gathering, converting and waiting.
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
    ):
        if not isinstance(sampler, Sampler):
            raise TypeError(
                f"sampler must have a sample(seeds, key=None) method (gglspeedup.protocols.Sampler), "
                f"got {type(sampler).__name__}"
            )
        self._setup(sampler, features, batch_size, shuffle, drop_last, prefetch, backend, seed, reuse_buffers)
        self.seeds = np.array(int_array("seeds", seeds), copy=True)
        self._num_items = len(self.seeds)
        num_nodes = num_nodes_of(sampler, features)
        if num_nodes is not None:
            check_ids_in_range("seeds", self.seeds, num_nodes, what="num_nodes")
        if labels is not None:
            labels = backends.from_(labels)
            if labels.ndim < 1:
                raise ValueError(f"labels must be an array indexed by node id, got shape {labels.shape}")
            if num_nodes is not None and labels.shape[0] != num_nodes:
                raise ValueError(f"labels must have one entry per node ({num_nodes}), got shape {tuple(labels.shape)}")
            if num_nodes is None and self.seeds.size and labels.shape[0] <= int(self.seeds.max()):
                raise ValueError(f"labels has {labels.shape[0]} entries but seeds reach node {int(self.seeds.max())}")
        self.labels = labels

    def __repr__(self) -> str:
        return (
            f"NodeLoader(seeds={len(self.seeds)}, batch_size={self.batch_size}, batches={len(self)}, "
            f"shuffle={self.shuffle}, drop_last={self.drop_last}, prefetch={self.prefetch}, "
            f"backend={self.backend!r}, epoch={self.epoch})"
        )

    def order(self, epoch: int) -> np.ndarray:
        """The seeds in the order epoch ``epoch`` visits them (int64, shape (S,))."""
        return self._items_in_order(self._permutation(epoch))

    def _items_in_order(self, permutation):
        return self.seeds if permutation is None else self.seeds[permutation]

    def _make_batch(self, epoch: int, index: int, batch_seeds: np.ndarray) -> Batch:
        start = time.perf_counter()
        n_id, adjs = self.sampler.sample(batch_seeds, key=self._key(epoch, index))
        sampled = time.perf_counter()
        x = self._gather(n_id)
        y = None
        if self.labels is not None:
            xp = array_module(self.labels)
            if xp is np:  # 64-byte aligned, so TensorFlow and JAX can share it
                y = np.take(
                    self.labels,
                    batch_seeds,
                    axis=0,
                    out=aligned_empty((len(batch_seeds),) + self.labels.shape[1:], self.labels.dtype),
                )
            else:
                y = self.labels[xp.asarray(batch_seeds)]
            ids_module = array_module(n_id)
            if ids_module is not xp:  # host labels, GPU sampler: y joins x and n_id on the device
                y = ids_module.asarray(y)
        gathered = time.perf_counter()
        batch = self._convert(Batch(x, y, list(adjs), n_id, len(batch_seeds)))
        edges = sum(int(adj.edge_index.shape[1]) for adj in adjs)
        self._timed(start, sampled, gathered, seeds=len(batch_seeds), nodes=len(n_id), edges=edges)
        return batch

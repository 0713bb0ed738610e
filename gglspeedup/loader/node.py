"""NodeLoader: mini-batches of seed nodes, their sampled neighbourhoods and feature rows."""

from __future__ import annotations

import functools
import math
import threading
import time
from typing import Any, NamedTuple

import numpy as np

from .. import backends
from .._pool import BufferPool
from ..device import aligned_empty, array_module
from ..protocols import FeatureSource, Sampler
from ..validation import check_bool, check_ids_in_range, check_int, int_array
from ._prefetch import PrefetchIterator

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


# Pooled feature buffers beyond the prefetch queue: the producer's batch in progress, the
# caller's current batch, and the previous one (kept alive by autograd until the next step).
_SPARE_BUFFERS = 3


def _num_nodes(sampler, features) -> int | None:
    """The node count the seeds and labels must fit: the sampler's, else the feature rows'."""
    count = getattr(sampler, "num_nodes", None)
    if isinstance(count, (int, np.integer)):
        return int(count)
    shape = getattr(features, "shape", None)
    if shape is not None and len(shape) >= 1 and isinstance(shape[0], (int, np.integer)):
        return int(shape[0])
    return None


class NodeLoader:
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
        if not hasattr(features, "__getitem__"):
            raise TypeError(
                f"features must be a FeatureStore or an array indexable by ids, got {type(features).__name__}"
            )
        self.seeds = np.array(int_array("seeds", seeds), copy=True)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.prefetch = check_int("prefetch", prefetch, minimum=0)
        self.seed = check_int("seed", seed, minimum=0)
        self.shuffle, self.drop_last = check_bool("shuffle", shuffle), check_bool("drop_last", drop_last)
        self.reuse_buffers = check_bool("reuse_buffers", reuse_buffers)
        num_nodes = _num_nodes(sampler, features)
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
        if backend is not None:
            framework = getattr(backends.adapter(backend), "framework", None)
            if framework is not None:
                framework()  # ImportError naming the extra now, not on the first batch
        self.backend = backend
        self._alignment = backends.needs_alignment(backend) if backend is not None else 0
        self.sampler, self.features = sampler, features
        self._pool = self._make_pool(features)
        self._gather_options = self._trusted_ids(sampler, features)
        self.epoch = 0
        self._stats = {
            "batches": 0,
            "seeds": 0,
            "nodes": 0,
            "edges": 0,
            "sample_s": 0.0,
            "gather_s": 0.0,
            "convert_s": 0.0,
            "wait_s": 0.0,
        }
        self._stats_lock = threading.Lock()

    @staticmethod
    def _trusted_ids(sampler, features) -> dict:
        """``{"check": False}`` when every ``n_id`` the sampler returns is a row of ``features``
        (a FeatureStore with at least the sampler's ``num_nodes`` rows): the store then skips its
        range check, a device sync per batch on a GPU."""
        from ..feature import FeatureStore

        count = getattr(sampler, "num_nodes", None)
        if isinstance(features, FeatureStore) and isinstance(count, (int, np.integer)) and count <= len(features):
            return {"check": False}
        return {}

    def _make_pool(self, features):
        """A buffer pool for a host feature source's rows, or ``None`` (no pooling)."""
        if not self.reuse_buffers or not isinstance(features, FeatureSource):
            return None
        device, dtype = getattr(features, "device", None), getattr(features, "out_dtype", None)
        shape = getattr(features, "shape", None)
        if getattr(device, "xp", None) is not np or dtype is None or shape is None or len(shape) != 2:
            return None
        return BufferPool(shape[1], dtype, self.prefetch + _SPARE_BUFFERS)

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.seeds) // self.batch_size
        return math.ceil(len(self.seeds) / self.batch_size)

    def __repr__(self) -> str:
        return (
            f"NodeLoader(seeds={len(self.seeds)}, batch_size={self.batch_size}, batches={len(self)}, "
            f"shuffle={self.shuffle}, drop_last={self.drop_last}, prefetch={self.prefetch}, "
            f"backend={self.backend!r}, epoch={self.epoch})"
        )

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter(loader)`` epoch ``epoch`` (its order and sampler keys)."""
        self.epoch = check_int("epoch", epoch, minimum=0)

    def order(self, epoch: int) -> np.ndarray:
        """The seeds in the order epoch ``epoch`` visits them (int64, shape (S,))."""
        if not self.shuffle:
            return self.seeds
        rng = np.random.default_rng([self.seed, check_int("epoch", epoch, minimum=0)])
        return self.seeds[rng.permutation(len(self.seeds))]

    def stats(self, reset: bool = False) -> dict:
        """Cumulative counters: ``batches``, ``seeds``, ``nodes`` (rows gathered), ``edges`` (sampled),
        and seconds spent in
        ``sample_s``, ``gather_s``, ``convert_s`` (producer side) and ``wait_s`` (the caller
        blocked waiting for a batch); with a buffer pool, ``buffers_reused``, ``buffers_allocated``
        and ``buffers_unpooled`` (batches gathered into recycled, new pooled and fresh unpooled
        memory). ``reset=True`` zeroes them after reading."""
        with self._stats_lock:
            out = dict(self._stats)
            if self._pool is not None:
                out.update({f"buffers_{name}": value for name, value in self._pool.stats.items()})
                if reset:
                    self._pool.stats.update(reused=0, allocated=0, unpooled=0)
            if reset:
                for name in self._stats:
                    self._stats[name] = 0 if isinstance(self._stats[name], int) else 0.0
        return out

    def _count(self, **values) -> None:
        with self._stats_lock:
            for name, value in values.items():
                self._stats[name] += value

    def _make_batch(self, epoch: int, index: int, batch_seeds: np.ndarray) -> Batch:
        start = time.perf_counter()
        n_id, adjs = self.sampler.sample(batch_seeds, key=epoch * len(self) + index)
        sampled = time.perf_counter()
        if self._pool is not None:
            x = self.features.gather(n_id, out=self._pool.take(len(n_id)), **self._gather_options)
        elif self._gather_options:
            x = self.features.gather(n_id, **self._gather_options)
        else:
            x = self.features[n_id]
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
        batch = Batch(x, y, list(adjs), n_id, len(batch_seeds))
        if self.backend is not None:
            if self._alignment:
                batch = backends.map_arrays(batch, functools.partial(_realign, alignment=self._alignment))
            batch = backends.to(self.backend, batch)
        done = time.perf_counter()
        edges = sum(int(adj.edge_index.shape[1]) for adj in adjs)
        self._count(
            batches=1,
            seeds=len(batch_seeds),
            nodes=len(n_id),
            edges=edges,
            sample_s=sampled - start,
            gather_s=gathered - sampled,
            convert_s=done - gathered,
        )
        return batch

    def _slices(self, epoch: int) -> list:
        order = self.order(epoch)
        return [
            order[start : start + self.batch_size] for start in range(0, len(self) * self.batch_size, self.batch_size)
        ]

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        slices = self._slices(epoch)
        if self.prefetch == 0:
            return self._serial(epoch, slices)
        return PrefetchIterator(self, epoch, slices)

    def _serial(self, epoch: int, slices: list):
        for index, batch_seeds in enumerate(slices):
            yield self._make_batch(epoch, index, batch_seeds)


def _realign(array, alignment: int):
    """``array``, or an aligned copy of a host array that does not start on ``alignment`` bytes.

    The sampler's small index arrays may be 16/32-byte aligned; TensorFlow and JAX need 64. The
    copy happens here, on the producer thread, instead of (with a warning) in the backend."""
    if not isinstance(array, np.ndarray) or array.size == 0 or array.ctypes.data % alignment == 0:
        return array
    out = aligned_empty(array.shape, array.dtype, alignment)
    out[...] = array
    return out

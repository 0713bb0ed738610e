"""What every loader shares: epochs and keys, shuffling, feature gathering, conversion, stats.

A loader iterates ``items`` (seed nodes for :class:`~.node.NodeLoader`, pair columns for
:class:`~.link.LinkLoader`) in batches. Batch ``i`` of epoch ``e`` samples with key
``e * len(loader) + i`` and the order of epoch ``e`` is keyed by ``(seed, e)``, so every batch
replays exactly. A subclass says what one batch is (``_make_batch``) and what it counts.
"""

from __future__ import annotations

import functools
import math
import threading
import time

import numpy as np

from .. import backends
from .._pool import BufferPool
from ..device import aligned_empty
from ..protocols import FeatureSource
from ..validation import check_bool, check_int
from ._prefetch import PrefetchIterator

__all__ = ["BaseLoader", "num_nodes_of"]

# Pooled feature buffers beyond the prefetch queue: the producer's batch in progress, the
# caller's current batch, and the previous one (kept alive by autograd until the next step).
_SPARE_BUFFERS = 3


def num_nodes_of(sampler, features) -> int | None:
    """The node count ids must fit: the sampler's ``num_nodes``, else the feature rows'."""
    count = getattr(sampler, "num_nodes", None)
    if isinstance(count, (int, np.integer)):
        return int(count)
    shape = getattr(features, "shape", None)
    if shape is not None and len(shape) >= 1 and isinstance(shape[0], (int, np.integer)):
        return int(shape[0])
    return None


class BaseLoader:
    """The machinery of :class:`~gglspeedup.NodeLoader` and :class:`~gglspeedup.LinkLoader`.

    Subclasses set ``_num_items`` (how many items one epoch visits), implement
    ``_items_in_order(permutation)`` (the items, permuted) and
    ``_make_batch(epoch, index, items) -> batch``, and list their counters in ``_COUNTERS``.
    """

    _COUNTERS: tuple = ()
    _num_items: int = 0

    def _setup(self, sampler, features, batch_size, shuffle, drop_last, prefetch, backend, seed, reuse_buffers):
        if not hasattr(features, "__getitem__"):
            raise TypeError(
                f"features must be a FeatureStore or an array indexable by ids, got {type(features).__name__}"
            )
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.prefetch = check_int("prefetch", prefetch, minimum=0)
        self.seed = check_int("seed", seed, minimum=0)
        self.shuffle, self.drop_last = check_bool("shuffle", shuffle), check_bool("drop_last", drop_last)
        self.reuse_buffers = check_bool("reuse_buffers", reuse_buffers)
        if backend is not None:
            framework = getattr(backends.adapter(backend), "framework", None)
            if framework is not None:
                framework()  # ImportError naming the extra now, not on the first batch
        self.backend = backend
        self._alignment = backends.needs_alignment(backend) if backend is not None else 0
        self.sampler, self.features = sampler, features
        self._pool = self._make_pool(features)
        self._gather_options = _trusted_ids(sampler, features)
        self.epoch = 0
        self._stats = {name: 0 for name in ("batches",) + self._COUNTERS + ("nodes", "edges")}
        self._stats.update(sample_s=0.0, gather_s=0.0, convert_s=0.0, wait_s=0.0)
        self._stats_lock = threading.Lock()

    def _make_pool(self, features):
        """A buffer pool for a host feature source's rows, or ``None`` (no pooling)."""
        if not self.reuse_buffers or not isinstance(features, FeatureSource):
            return None
        device, dtype = getattr(features, "device", None), getattr(features, "out_dtype", None)
        shape = getattr(features, "shape", None)
        if getattr(device, "xp", None) is not np or dtype is None or shape is None or len(shape) != 2:
            return None
        return BufferPool(shape[1], dtype, self.prefetch + _SPARE_BUFFERS)

    # ------------------------------------------------------------------ epochs
    def __len__(self) -> int:
        if self.drop_last:
            return self._num_items // self.batch_size
        return math.ceil(self._num_items / self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter(loader)`` epoch ``epoch`` (its order and sampler keys)."""
        self.epoch = check_int("epoch", epoch, minimum=0)

    def _permutation(self, epoch: int):
        """The visiting order of epoch ``epoch`` (``None``: the given order)."""
        if not self.shuffle:
            return None
        rng = np.random.default_rng([self.seed, check_int("epoch", epoch, minimum=0)])
        return rng.permutation(self._num_items)

    def _slices(self, epoch: int) -> list:
        items = self._items_in_order(self._permutation(epoch))
        return [
            items[..., start : start + self.batch_size]
            for start in range(0, len(self) * self.batch_size, self.batch_size)
        ]

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        slices = self._slices(epoch)
        if self.prefetch == 0:
            return self._serial(epoch, slices)
        return PrefetchIterator(self, epoch, slices)

    def _serial(self, epoch: int, slices: list):
        for index, items in enumerate(slices):
            yield self._make_batch(epoch, index, items)

    def _key(self, epoch: int, index: int) -> int:
        return epoch * len(self) + index

    # ------------------------------------------------------------------ one batch
    def _gather(self, n_id):
        """The feature rows of ``n_id``: into a pooled buffer, with the store's range check skipped
        for a sampler's ids where that is safe, or by plain indexing."""
        if self._pool is not None:
            return self.features.gather(n_id, out=self._pool.take(len(n_id)), **self._gather_options)
        if self._gather_options:
            return self.features.gather(n_id, **self._gather_options)
        return self.features[n_id]

    def _convert(self, batch):
        """``batch`` in the loader's backend (host arrays realigned first where it needs that)."""
        if self.backend is None:
            return batch
        if self._alignment:
            batch = backends.map_arrays(batch, functools.partial(_realign, alignment=self._alignment))
        return backends.to(self.backend, batch)

    def _timed(self, start: float, sampled: float, gathered: float, **counts) -> None:
        """Record one batch: its counts and the seconds spent sampling, gathering, converting."""
        done = time.perf_counter()
        self._count(
            batches=1, sample_s=sampled - start, gather_s=gathered - sampled, convert_s=done - gathered, **counts
        )

    # ------------------------------------------------------------------ stats
    def stats(self, reset: bool = False) -> dict:
        """Cumulative counters: ``batches``, the loader's item counts, ``nodes`` (rows gathered),
        ``edges`` (sampled), and seconds spent in ``sample_s``, ``gather_s``, ``convert_s``
        (producer side) and ``wait_s`` (the caller blocked waiting for a batch); with a buffer pool,
        ``buffers_reused``, ``buffers_allocated`` and ``buffers_unpooled`` (batches gathered into
        recycled, new pooled and fresh unpooled memory). ``reset=True`` zeroes them after reading."""
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


def _trusted_ids(sampler, features) -> dict:
    """``{"check": False}`` when every ``n_id`` the sampler returns is a row of ``features``
    (a FeatureStore with at least the sampler's ``num_nodes`` rows): the store then skips its
    range check, a device sync per batch on a GPU."""
    from ..feature import FeatureStore

    count = getattr(sampler, "num_nodes", None)
    if isinstance(features, FeatureStore) and isinstance(count, (int, np.integer)) and count <= len(features):
        return {"check": False}
    return {}


def _realign(array, alignment: int):
    """``array``, or an aligned copy of a host array that does not start on ``alignment`` bytes.

    The sampler's small index arrays may be 16/32-byte aligned; TensorFlow and JAX need 64. The
    copy happens here, on the producer thread, instead of (with a warning) in the backend."""
    if not isinstance(array, np.ndarray) or array.size == 0 or array.ctypes.data % alignment == 0:
        return array
    out = aligned_empty(array.shape, array.dtype, alignment)
    out[...] = array
    return out

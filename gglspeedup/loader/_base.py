"""What every loader shares: epochs and keys, shuffling, feature gathering, conversion, stats.

A loader iterates ``items`` (seed nodes for :class:`~.node.NodeLoader`, pair columns for
:class:`~.link.LinkLoader`; typed seeds as ``(type position, id)`` columns) in batches. Batch ``i``
of epoch ``e`` samples with key ``e * len(loader) + i`` and the order of epoch ``e`` is keyed by
``(seed, e)``, so every batch replays exactly. A subclass says what one batch is (``_make_batch``)
and what it counts. The row helpers here (:func:`pool_for`, :func:`gather_rows`,
:func:`take_labels`) serve the untyped loaders and, type by type, the typed ones (:mod:`.hetero`).
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
import time

import numpy as np

from .. import backends
from .._pool import BufferPool
from ..device import aligned_empty, array_module
from ..protocols import FeatureSource
from ..validation import check_bool, check_int
from ._prefetch import PrefetchIterator

__all__ = [
    "BaseLoader",
    "check_indexable",
    "check_default_times",
    "gather_rows",
    "num_nodes_of",
    "pool_for",
    "take_labels",
    "trusted_ids",
]

# Pooled feature buffers beyond the prefetch queue: the producer's batch in progress, the
# caller's current batch, and the previous one (kept alive by autograd until the next step);
# each further worker adds its batch in progress and one more queued (see _max_buffers).
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


def check_feature_rows(sampler, features) -> None:
    """Refuse, at construction, a feature table with fewer rows than the sampler's graph has nodes
    (a batch reaching those nodes would fail, or read past the table, mid-epoch)."""
    count = getattr(sampler, "num_nodes", None)
    shape = getattr(features, "shape", None)
    if not isinstance(count, (int, np.integer)) or shape is None or len(shape) < 1:
        return
    rows = shape[0]
    if isinstance(rows, (int, np.integer)) and rows < count:
        raise ValueError(
            f"features has {int(rows)} rows but the sampler's graph has num_nodes = {int(count)}: one row per node "
            "is needed"
        )


def check_indexable(name: str, table) -> None:
    """Refuse, at construction, features that a batch reads as ``table[n_id]`` (no feature source's
    ``gather``) but that cannot be indexed by an id array: a TensorFlow tensor, a list, a
    memoryview, a string. Each failed only at the first batch, inside its library; a read of no
    rows finds it now."""
    if not hasattr(table, "__getitem__"):
        raise TypeError(f"{name} must be a FeatureStore or an array indexable by ids, got {type(table).__name__}")
    if isinstance(table, (np.ndarray, FeatureSource)):
        return
    try:
        table[np.empty(0, np.int64)]
    except Exception as error:  # whatever the library raises for an array index
        raise TypeError(
            f"{name} must be a FeatureStore or an array indexable by ids, got {type(table).__name__}, which an "
            f"id array cannot index ({type(error).__name__}: {str(error).splitlines()[0][:120]}); pass "
            f"gglspeedup.FeatureStore({name}) (it reads framework tables zero-copy) or a NumPy array"
        ) from None


def check_sampler(sampler, protocol: type, method: str) -> None:
    """Refuse a sampler that lacks ``method`` (the call ``protocol``, a runtime-checkable protocol
    of :mod:`gglspeedup.protocols`, asks for), naming both, or whose method a loader cannot call
    that way (a :class:`~gglspeedup.MultiDeviceSampler`'s ``sample(seeds, rank, key=None)``, a
    ``sample(seeds)`` without ``key``): every batch would raise, naming an argument the loader
    does not take."""
    if not isinstance(sampler, protocol):
        raise TypeError(
            f"sampler must have a {method} method (gglspeedup.protocols.{protocol.__name__}), "
            f"got {type(sampler).__name__}"
        )
    name = method.split("(")[0]
    try:
        signature = inspect.signature(getattr(sampler, name))
    except (TypeError, ValueError):  # no signature to read (a builtin): the first batch tells
        return
    try:  # loaders call sample(seeds, key=k) and sample_links(pairs, labels, key=k, **their options)
        if name == "sample":
            signature.bind(None, key=0)
        else:
            signature.bind_partial(None, None, key=0)
    except TypeError as error:
        raise TypeError(
            f"sampler.{name} cannot be called as {method} ({error}); a multi-device sampler serves one rank "
            "through sampler.rank(rank)"
        ) from None


def check_default_times(sampler, node_types, argument: str) -> None:
    """Refuse a temporal sampler that cannot time a loader's seeds by itself. A loader passes no
    ``seed_time`` / ``pair_time`` (``argument``), so every tree takes its seed's node time; an
    edge-time sampler has none (``node_types`` ``[None]``), nor has a typed sampler for a node type
    left out of its ``node_time`` (``node_types`` the loader's seed types): every batch would raise
    naming an argument the loader does not take."""
    timeline = getattr(sampler, "timeline", None)
    if timeline is None:
        return
    missing = [t for t in node_types if timeline.node_times(t) is None]
    if missing:
        what = "an edge-time sampler" if missing == [None] else f"a sampler without node times for {missing}"
        raise ValueError(
            f"{what} needs each batch's {argument}, which the loader cannot give (each tree would take its "
            f"seed's node time); call the sampler with {argument}=... per batch, or use gglspeedup.pyg's "
            "loaders (time_attr)"
        )


def with_trees(record, out):
    """The batch ``record`` with ``out.batch`` attached (a disjoint or temporal sampler's tree of
    each row of ``n_id``; an attribute, so the batch unpacks as before), when ``out`` has one."""
    trees = getattr(out, "batch", None)
    if trees is not None:
        record.batch = trees
    return record


def label_array(name: str, labels):
    """``labels`` as an array (NumPy, or the framework's via DLPack); ``TypeError`` naming ``name``
    for anything that is not an array (a number, a string, a dict) and for an array of Python
    objects (batches copy labels into fresh buffers, which cannot hold references)."""
    if isinstance(labels, (list, tuple)):
        array = np.asarray(labels)
    elif isinstance(labels, (str, bytes, dict, int, float, bool, np.generic)) or not (
        hasattr(labels, "__dlpack__") or hasattr(labels, "__array__") or hasattr(labels, "__cuda_array_interface__")
    ):
        raise TypeError(f"{name} must be an array with one entry per node, got {type(labels).__name__}")
    else:
        array = backends.from_(labels)
    if array.dtype == object:
        raise TypeError(f"{name} must hold numbers (or fixed-size values), got dtype object")
    return array


class BaseLoader:
    """The machinery of :class:`~gglspeedup.NodeLoader` and :class:`~gglspeedup.LinkLoader`.

    Subclasses set ``_num_items`` (how many items one epoch visits), implement
    ``_items_in_order(permutation)`` (the items, permuted) and
    ``_make_batch(epoch, index, items) -> batch``, and list their counters in ``_COUNTERS``.
    """

    _COUNTERS: tuple = ()
    _num_items: int = 0

    def _setup(
        self,
        sampler,
        features,
        batch_size,
        shuffle,
        drop_last,
        prefetch,
        backend,
        seed,
        reuse_buffers,
        typed=False,
        workers=1,
    ):
        """Check and keep the shared arguments. ``typed``: the features are typed (checked and
        pooled per type by the loader, :class:`~.hetero.TypedFeatures`), so no untyped pool here."""
        if not typed and (isinstance(features, dict) or isinstance(getattr(features, "shape", None), dict)):
            # typed features (a dict, a HeteroFeatureStore) would fail on the first batch's n_id
            raise TypeError(
                "an untyped sampler needs untyped features: a FeatureStore or an array of shape (num_nodes, F), "
                f"got {type(features).__name__} of node types (use a typed sampler, e.g. a HeteroNeighborSampler)"
            )
        if not typed:
            check_indexable("features", features)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.prefetch = check_int("prefetch", prefetch, minimum=0)
        self.workers = check_int("workers", workers, minimum=1)
        if self.workers > 1 and self.prefetch == 0:
            raise ValueError(
                f"workers={self.workers} needs prefetch >= 1: prefetch=0 prepares every batch in the caller's thread"
            )
        sources = features.values() if isinstance(features, dict) else (features,)
        if self.workers > 1 and any(getattr(source, "collective", False) for source in sources):
            # DistFeature: every rank must issue its lookups in the same order, and several
            # producer threads would pair one rank's lookup with another's for a different batch
            raise ValueError(
                f"workers={self.workers} cannot gather from a collective feature source (DistFeature): its "
                "lookups are collectives that every rank must issue in the same order, which several producer "
                "threads do not keep; use workers=1"
            )
        self.seed = check_int("seed", seed, minimum=0)
        self.shuffle, self.drop_last = check_bool("shuffle", shuffle), check_bool("drop_last", drop_last)
        self.reuse_buffers = check_bool("reuse_buffers", reuse_buffers)
        if backend is not None:
            framework = getattr(backends.adapter(backend), "framework", None)
            if framework is not None:
                framework()  # ImportError naming the extra now, not on the first batch
        self.backend = backend
        self._alignment = backends.needs_alignment(backend) if backend is not None else 0
        self._check_dtypes("features", features)
        if not typed:
            check_feature_rows(sampler, features)
        self.sampler, self.features = sampler, features
        from .._backing import backing_file

        self._backing = backing_file(features) if isinstance(features, np.ndarray) else None
        self._pool = None if typed else self._make_pool(features)
        self._pools = [] if self._pool is None else [self._pool]  # every pool stats() reports
        self._gather_options = {} if typed else trusted_ids(getattr(sampler, "num_nodes", None), features)
        self.epoch = 0
        self._stats = {name: 0 for name in ("batches",) + self._COUNTERS + ("nodes", "edges")}
        self._stats.update(sample_s=0.0, gather_s=0.0, convert_s=0.0, wait_s=0.0)
        self._stats_lock = threading.Lock()

    def _check_dtypes(self, name: str, values) -> None:
        """Refuse ``values`` (an array or store, or a dict of them per node type) whose dtype cannot
        reach the backend (:func:`gglspeedup.backends.check_dtype`: big-endian, strings), naming
        ``name``, when the loader is made instead of at its first batch."""
        items = values.items() if isinstance(values, dict) else [(None, values)]
        for key, value in items:
            where = name if key is None else f"{name}[{key!r}]"
            backends.check_dtype(where, self.backend, getattr(value, "dtype", None))

    @property
    def _max_buffers(self) -> int:
        """Pooled buffers per feature source: ``0`` without ``reuse_buffers``. With several
        workers the queues hold up to ``prefetch + workers - 1`` batches and each worker has one
        in progress (``workers = 1``: ``prefetch + 3``, as with one producer)."""
        if not self.reuse_buffers:
            return 0
        return self.prefetch + _SPARE_BUFFERS + 2 * (self.workers - 1)

    def _make_pool(self, features):
        """A buffer pool for a host feature source's rows, or ``None`` (no pooling)."""
        return pool_for(features, self._max_buffers)

    # ------------------------------------------------------------------ epochs
    def __len__(self) -> int:
        if self.drop_last:
            return self._num_items // self.batch_size
        return math.ceil(self._num_items / self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter(loader)`` epoch ``epoch`` (its order and sampler keys: batch ``i``'s
        key is ``epoch * len(loader) + i``, which must stay below 2**64, so ``epoch`` is checked
        here rather than as a ``key`` the first batch cannot take)."""
        below = 2**64 // max(len(self), 1)
        expected = f"an int in [0, {below}) (keys < 2**64)"
        self.epoch = check_int("epoch", epoch, minimum=0, below=below, expected=expected)

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
            return _SerialIterator(self, epoch, slices)
        return PrefetchIterator(self, epoch, slices)

    def _key(self, epoch: int, index: int) -> int:
        return epoch * len(self) + index

    # ------------------------------------------------------------------ one batch
    def _gather(self, n_id):
        """The feature rows of ``n_id`` (see :func:`gather_rows`)."""
        if self._backing is not None:  # a memory-mapped array read by indexing: its file must still hold it
            from .._backing import check_backing

            check_backing(self._backing)
        return gather_rows(self.features, n_id, self._pool, self._gather_options)

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
            for pool in self._pools:  # typed loaders: one pool per node type, summed
                for name, value in pool.stats.items():
                    out[f"buffers_{name}"] = out.get(f"buffers_{name}", 0) + value
                if reset:
                    pool.stats.update(reused=0, allocated=0, unpooled=0)
            if reset:
                for name in self._stats:
                    self._stats[name] = 0 if isinstance(self._stats[name], int) else 0.0
        return out

    def _count(self, **values) -> None:
        with self._stats_lock:
            for name, value in values.items():
                self._stats[name] += value


def pool_for(features, max_buffers: int):
    """A :class:`~gglspeedup._pool.BufferPool` of at most ``max_buffers`` buffers for the rows of a
    host feature source with 2-D ``shape`` and an ``out_dtype``; ``None`` (no pooling) otherwise or
    when ``max_buffers`` is 0."""
    if not max_buffers or not isinstance(features, FeatureSource):
        return None
    device, dtype = getattr(features, "device", None), getattr(features, "out_dtype", None)
    shape = getattr(features, "shape", None)
    if getattr(device, "xp", None) is not np or dtype is None or shape is None or isinstance(shape, dict):
        return None  # a typed store's shape is a dict: its types are pooled one by one
    if len(shape) != 2:
        return None
    return BufferPool(shape[1], dtype, max_buffers)


def gather_rows(features, ids, pool, options: dict):
    """The rows of ``ids``: gathered into a buffer of ``pool`` (when given), with ``options``
    (:func:`trusted_ids`) passed to ``features.gather``, or by plain indexing ``features[ids]``."""
    if pool is not None:
        return features.gather(ids, out=pool.take(len(ids)), **options)
    if options:
        return features.gather(ids, **options)
    return features[ids]


def trusted_ids(num_nodes, features) -> dict:
    """``{"check": False}`` when every id a sampler over ``num_nodes`` nodes returns is a row of
    ``features`` (a FeatureStore with at least ``num_nodes`` rows): the store then skips its range
    check, a device sync per batch on a GPU."""
    from ..feature import FeatureStore

    if isinstance(features, FeatureStore) and isinstance(num_nodes, (int, np.integer)) and num_nodes <= len(features):
        return {"check": False}
    return {}


def take_labels(labels, seeds: np.ndarray, ids_module):
    """``labels[seeds]`` (host ``seeds``) in the array module of the sampler's ids ``ids_module``:
    host labels into a 64-byte aligned array (TensorFlow and JAX share it), device labels indexed
    on the device, host labels moved to a GPU sampler's device."""
    xp = array_module(labels)
    if xp is np:
        shape = (len(seeds),) + labels.shape[1:]
        y = np.take(labels, seeds, axis=0, out=aligned_empty(shape, labels.dtype))
    else:
        y = labels[xp.asarray(seeds)]
    if ids_module is not xp:  # host labels, GPU sampler: y joins x and n_id on the device
        y = ids_module.asarray(y)
    return y


def _realign(array, alignment: int):
    """``array``, or an aligned copy of a host array that does not start on ``alignment`` bytes.

    The sampler's small index arrays may be 16/32-byte aligned; TensorFlow and JAX need 64. The
    copy happens here, on the producer thread, instead of (with a warning) in the backend."""
    if not isinstance(array, np.ndarray) or array.size == 0 or array.ctypes.data % alignment == 0:
        return array
    out = aligned_empty(array.shape, array.dtype, alignment)
    out[...] = array
    return out


class _SerialIterator:
    """An epoch's batches built as they are asked for (``prefetch=0``); ``len()`` is the epoch's
    batch count, as a prefetching epoch's iterator tells it."""

    def __init__(self, loader: BaseLoader, epoch: int, slices: list):
        self._batches = (loader._make_batch(epoch, index, items) for index, items in enumerate(slices))
        self._num_batches = len(slices)

    def __len__(self) -> int:
        return self._num_batches

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._batches)

    def close(self) -> None:
        """End the epoch early (as :meth:`PrefetchIterator.close`): later ``next()`` calls stop."""
        self._batches.close()

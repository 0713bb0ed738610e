"""LinkLoader: mini-batches of node pairs, their negatives, sampled neighbourhoods and features.

Untyped (:class:`LinkBatch`) or, for a typed sampler and pairs of one ``edge_type``, typed
(:class:`~gglspeedup.loader.HeteroLinkBatch`, see :mod:`.hetero`).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from ..protocols import LinkSampler
from ..sampling.link_checks import check_link_options
from ..validation import check_ids_in_range, int_array
from ._base import BaseLoader, check_default_times, check_sampler, num_nodes_of, with_trees
from .hetero import HeteroLinkBatch, TypedFeatures, check_typed_link, typed_num_nodes, typed_sizes

__all__ = ["LinkBatch", "LinkLoader"]


class _LinkBatchFields(NamedTuple):
    x: Any
    adjs: list
    n_id: Any
    pair_index: Any
    labels: Any
    negative_targets: Any
    num_false_negatives: Any
    batch_size: int


class LinkBatch(_LinkBatchFields):
    """One link mini-batch, in the loader's backend.

    x : tensor, shape (N, F)
        Feature rows of ``n_id``.
    adjs : list of Adj
        The sampled hops, outermost first; ``adjs[-1]`` targets the pairs' endpoints
        ``n_id[:adjs[-1].size[1]]``, so ``model(x, adjs)`` returns one row per endpoint.
    n_id : tensor, int64, shape (N,)
        Global node ids, the pairs' distinct endpoints first (order of first appearance).
    pair_index : tensor, int64, shape (2, P)
        Local (source, target) positions of every pair: the batch's pairs, then negative pairs.
        Score pair ``j`` with ``h[pair_index[0, j]]`` and ``h[pair_index[1, j]]``.
    labels : tensor, shape (P,)
        The given labels (or 1.0) of the batch's pairs, then 0 for every negative pair.
    negative_targets : tensor, int64, shape (batch_size, num_negatives), or None
        ``negatives="triplet"``: local positions of each pair's negative targets.
    num_false_negatives : int or None
        ``strict_negatives=True``: negatives that are still graph edges after the redraws.
    batch_size : int
        Pairs of the loader's pair array in this batch (negatives not counted).
    batch : tensor, int64, shape (N,), or None
        An attribute, not a field (the batch unpacks as before): a disjoint or temporal sampler's
        tree of each row of ``n_id`` (:attr:`SampleOutput.batch <gglspeedup.SampleOutput>`);
        ``None`` for shared sampling.
    """

    batch = None  # an attribute, not a field: see the docstring


class LinkLoader(BaseLoader):
    """Iterate over node pairs in mini-batches: negatives, leakage-free neighbourhoods, features.

    Each batch is :meth:`NeighborSampler.sample_links` of the next ``batch_size`` pairs, with
    the feature rows of its ``n_id``.

    Parameters
    ----------
    sampler : LinkSampler or HeteroLinkSampler
        Anything with ``sample_links(pairs, labels=None, *, ..., key=None)``
        (:class:`gglspeedup.protocols.LinkSampler`), e.g. a :class:`~gglspeedup.NeighborSampler`;
        or a typed one (:class:`gglspeedup.protocols.HeteroLinkSampler`), e.g. a
        :class:`~gglspeedup.HeteroNeighborSampler`, with ``edge_type``.
    features : FeatureSource or array, shape (num_nodes, F); typed: dict or HeteroFeatureStore
        As for :class:`~gglspeedup.NodeLoader`.
    pairs : integer array-like, shape (2, E)
        ``(source, target)`` pairs to iterate over (e.g. the training edges, or held-out
        validation pairs with their labels), in ``[0, num_nodes)``; typed: sources in
        ``[0, num_nodes[edge_type[0]])``, targets in ``[0, num_nodes[edge_type[2]])``.
    batch_size : int
        Pairs per batch (the last batch may be smaller unless ``drop_last``).
    labels : array-like, shape (E,), optional
        A number per pair (default: 1.0 each); negatives get 0.
    negatives, num_negatives, strict_negatives, exclude
        As for :meth:`NeighborSampler.sample_links` (checked here, at construction).
    edge_type : tuple (src_type, name, dst_type), optional
        Typed samplers only (required there): the pairs' edge type, forwarded to
        :meth:`HeteroNeighborSampler.sample_links`; batches are then
        :class:`~gglspeedup.loader.HeteroLinkBatch` es.
    reverse_edge_type : tuple, optional
        Typed samplers only: the relation holding the reverse edges, for ``exclude="reverse"``
        between two node types.
    shuffle, drop_last, prefetch, backend, seed, reuse_buffers, workers
        As for :class:`~gglspeedup.NodeLoader`: ``shuffle`` permutes the pair columns every epoch,
        keyed by ``(seed, epoch)``.

    Raises
    ------
    TypeError
        a sampler without ``sample_links`` (or one that takes no ``key``), features that cannot be
        indexed, non-integer pairs, non-numeric labels, a wrongly typed option; ``edge_type``
        missing for a typed sampler or given for an untyped one, an ``edge_type`` that is not a
        3-tuple of str.
    ValueError
        pairs not (2, E), labels not (E,), an unknown ``negatives`` / ``exclude`` / backend, a count
        out of range, a temporal sampler that cannot time the pairs by itself (the loader passes
        no ``pair_time``: edge times, or an endpoint type without node times); typed: an edge type
        the graph lacks, ``exclude="reverse"`` between two node types without (or with a wrongly
        directed) ``reverse_edge_type``, features as for
        :class:`~gglspeedup.NodeLoader`.
    IndexError
        a pair endpoint outside ``[0, num_nodes)`` (when the sampler or the features tell it).

    Notes
    -----
    Batch ``i`` of epoch ``e`` samples (negatives included) with ``key = e * len(loader) + i``,
    so it replays exactly; each ``iter(loader)`` is one epoch, as with :class:`NodeLoader`.
    :meth:`stats` counts ``pairs`` (the loader's pairs), ``negatives`` (negative pairs or triplet
    targets drawn), ``false_negatives`` (strict mode), ``nodes``, ``edges`` and the seconds spent.

    Examples
    --------
    >>> import gglspeedup as gg, numpy as np
    >>> graph = gg.CSRGraph.from_edge_index([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]], num_nodes=4)
    >>> loader = gg.LinkLoader(gg.NeighborSampler(graph, [2]), np.eye(4, dtype=np.float32),
    ...                        [[0, 2], [1, 3]], 2, negatives="binary", backend=None, prefetch=0)
    >>> batch = next(iter(loader))
    >>> batch.pair_index.shape, batch.labels.tolist()
    ((2, 4), [1.0, 1.0, 0.0, 0.0])
    """

    _COUNTERS = ("pairs", "negatives", "false_negatives")

    def __init__(
        self,
        sampler,
        features,
        pairs,
        batch_size,
        *,
        labels=None,
        negatives=None,
        num_negatives=1,
        strict_negatives=False,
        exclude="self",
        edge_type=None,
        reverse_edge_type=None,
        shuffle=True,
        drop_last=False,
        prefetch=2,
        backend="torch",
        seed=0,
        reuse_buffers=True,
        workers=1,
    ):
        check_sampler(sampler, LinkSampler, "sample_links(pairs, labels=None, *, ..., key=None)")
        typed = typed_num_nodes(sampler)
        if typed is not None and edge_type is None:
            raise TypeError("a typed sampler needs edge_type: the (src_type, name, dst_type) of the pairs")
        if typed is None and (edge_type is not None or reverse_edge_type is not None):
            raise TypeError(
                "edge_type and reverse_edge_type need a typed sampler (e.g. a HeteroNeighborSampler: num_nodes "
                f"a dict node type -> count), got {type(sampler).__name__}"
            )
        options = (batch_size, shuffle, drop_last, prefetch, backend, seed, reuse_buffers)
        self._setup(sampler, features, *options, typed=typed is not None, workers=workers)
        self.pairs = np.array(int_array("pairs", pairs, ndim=2, beyond=IndexError), copy=True)
        if self.pairs.shape[0] != 2:
            raise ValueError(f"pairs must have shape (2, E): sources then targets, got shape {self.pairs.shape}")
        self._num_items = self.pairs.shape[1]
        self._columns = np.concatenate([self.pairs, np.arange(self._num_items, dtype=np.int64)[None]])
        checked = typed is not None  # typed pairs are checked against the sampler's own types below
        if typed is None:
            num_nodes = num_nodes_of(sampler, features)
            if num_nodes is not None:
                check_ids_in_range("pairs", self.pairs.reshape(-1), num_nodes, what="num_nodes")
                checked = num_nodes <= (getattr(sampler, "num_nodes", None) or 0)
        # Pairs checked here against the sampler's bounds are not scanned again every batch (on a
        # GPU each scan of device pairs is a sync); only our samplers take the flag.
        from ..sampling import HeteroNeighborSampler, NeighborSampler

        ours = isinstance(sampler, (NeighborSampler, HeteroNeighborSampler))
        self._trusted = {"check": False} if ours and checked else {}
        if labels is not None:
            from ..device import to_numpy
            from ._base import label_array

            labels = to_numpy(label_array("labels", labels))
            if labels.dtype.kind not in "biuf":
                raise TypeError(f"labels must hold numbers (bool, int or float), got dtype {labels.dtype}")
            if labels.shape != (self._num_items,):
                raise ValueError(f"labels must have one entry per pair ({self._num_items},), got shape {labels.shape}")
            if labels.dtype.kind == "f" and not np.isfinite(labels).all():
                position = int(np.argmax(~np.isfinite(labels)))
                raise ValueError(f"labels must be finite numbers: labels[{position}] = {labels[position]}")
            labels = np.array(labels, copy=True)
        self.labels = labels
        self._check_dtypes("labels", self.labels)
        negatives, num_negatives, strict, exclude = check_link_options(
            negatives, num_negatives, strict_negatives, exclude
        )
        self.options = {
            "negatives": negatives,
            "num_negatives": num_negatives,
            "strict_negatives": strict,
            "exclude": exclude,
        }
        self._typed = None
        if typed is not None:
            self.options.update(check_typed_link(sampler, typed, self.pairs, edge_type, reverse_edge_type, exclude))
            self._typed = TypedFeatures(features, typed, self._max_buffers)
            self._pools = self._typed.pools
        types = [None] if typed is None else [self.options["edge_type"][0], self.options["edge_type"][2]]
        check_default_times(sampler, types if self._num_items else [], "pair_time")

    def __repr__(self) -> str:
        options = ", ".join(f"{name}={value!r}" for name, value in self.options.items())
        return (
            f"LinkLoader(pairs={self._num_items}, batch_size={self.batch_size}, batches={len(self)}, {options}, "
            f"shuffle={self.shuffle}, drop_last={self.drop_last}, prefetch={self.prefetch}, workers={self.workers}, "
            f"backend={self.backend!r}, epoch={self.epoch})"
        )

    def order(self, epoch: int) -> np.ndarray:
        """The pairs in the order epoch ``epoch`` visits them (int64, shape (2, E))."""
        return self._items_in_order(self._permutation(epoch))[:2]

    def _items_in_order(self, permutation):
        """(3, E): sources, targets and each pair's column (to slice its label), permuted."""
        return self._columns if permutation is None else self._columns[:, permutation]

    def _make_batch(self, epoch: int, index: int, items: np.ndarray) -> LinkBatch | HeteroLinkBatch:
        start = time.perf_counter()
        pairs = np.ascontiguousarray(items[:2])
        labels = None if self.labels is None else self.labels[items[2]]
        out = self.sampler.sample_links(pairs, labels, key=self._key(epoch, index), **self.options, **self._trusted)
        sampled = time.perf_counter()
        typed = self._typed is not None
        x = self._typed.gather(out.n_id) if typed else self._gather(out.n_id)
        gathered = time.perf_counter()
        count = pairs.shape[1]
        fields = (
            x,
            list(out.adjs),
            out.n_id,
            out.pair_index,
            out.labels,
            out.negative_targets,
            out.num_false_negatives,
            count,
        )
        if typed:
            batch = HeteroLinkBatch(*fields, out.edge_type, out.num_sampled_nodes, out.num_sampled_edges)
        else:
            batch = LinkBatch(*fields)
        batch = self._convert(with_trees(batch, out))
        nodes, edges = typed_sizes(out.n_id, out.adjs) if typed else (len(out.n_id), _edges(out.adjs))
        negatives = out.negative_targets.size if out.negative_targets is not None else out.batch_size - count
        self._timed(
            start,
            sampled,
            gathered,
            pairs=count,
            negatives=int(negatives),
            false_negatives=out.num_false_negatives or 0,
            nodes=nodes,
            edges=edges,
        )
        return batch


def _edges(adjs) -> int:
    return sum(int(adj.edge_index.shape[1]) for adj in adjs)

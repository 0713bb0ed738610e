"""The trainer's samplers over partition servers: :class:`RemoteSampler`, :class:`RemoteHeteroSampler`.

They are the local samplers (:class:`~gglspeedup.NeighborSampler`, :class:`~gglspeedup.HeteroNeighborSampler`:
the same checks, batch keys, disjoint trees, link batches and output records) over a remote driver
(:mod:`gglspeedup.sampling.remote`): each hop asks every group owning targets once, all groups in
one ``transport.call``, with each group's distinct targets, and relabels here. A batch equals the
local sampler's over the unpartitioned graph with the same arguments, bit for bit, however the graph
was cut and however many groups serve it (``n_id`` order, every ``Adj``, ``e_id``, ``batch``).
Batches sampled at once from several threads share requests (:mod:`._merge`): a hop that finds
others waiting goes out with them, one request per group, so a request's fixed cost is paid once
for all of them.
"""

from __future__ import annotations

import threading

import numpy as np

from ..device import Device, as_device
from ..sampling.common import check_flags, check_last
from ..sampling.hetero import HeteroNeighborSampler
from ..sampling.sampler import NeighborSampler
from ..sampling.temporal import Timeline, check_strategy, time_array
from ..validation import check_int
from ._merge import MergedExchange
from ._transport import Transport
from .book import PartitionBook

__all__ = ["RemoteSampler", "RemoteHeteroSampler", "PartitionedGraph"]


class PartitionedGraph:
    """What the remote samplers know of a partitioned graph: its shape, from the book (counts,
    types, the stacked layout's row and edge bases), never its rows."""

    def __init__(self, book: PartitionBook):
        self.book = book
        self.device, self.placement = Device("cpu"), "host"
        self.weighted = book.weighted
        self.num_nodes, self.num_edges = book.num_nodes, book.num_edges
        if book.typed:
            self.node_types, self.edge_types = book.node_types, book.edge_types
            dst_counts = [book.num_nodes[et[2]] for et in book.edge_types]
            self.row_base = np.concatenate(([0], np.cumsum(dst_counts))).astype(np.int64)
            edges = [book.num_edges[et] for et in book.edge_types]
            self.edge_base = np.concatenate(([0], np.cumsum(edges))).astype(np.int64)

    def __repr__(self) -> str:
        return f"PartitionedGraph({self.book!r})"


def _check_book(book) -> PartitionBook:
    if isinstance(book, PartitionBook):
        return book
    if isinstance(book, str) or hasattr(book, "__fspath__"):
        return PartitionBook.load(book)
    raise TypeError(f"book must be a PartitionBook or the path of a partitioned folder, got {type(book).__name__}")


def _check_transport(transport, book: PartitionBook):
    if not isinstance(transport, Transport):
        raise TypeError(f"transport must be a Transport (group_parts, call, close), got {type(transport).__name__}")
    served = [int(p) for parts in transport.group_parts for p in parts]
    if sorted(served) != list(range(book.num_parts)):
        raise ValueError(
            f"transport's groups must serve every partition of the book (0 .. {book.num_parts - 1}) exactly once, "
            f"got {[list(parts) for parts in transport.group_parts]}"
        )
    return transport


def _timeline(book: PartitionBook, node_time, edge_time, strategy, weighted: bool):
    """The :class:`~gglspeedup.sampling.temporal.Timeline` of a temporal partition (``None`` for
    an untimed one); times given here must be the partition's."""
    strategy = check_strategy(strategy)
    given = "node" if node_time is not None else "edge" if edge_time is not None else None
    if node_time is not None and edge_time is not None:
        raise ValueError("give node_time or edge_time, not both (a sampler filters by one kind of time)")
    if book.temporal is None:
        if given is not None:
            raise ValueError(
                f"{given}_time needs a partition sorted by time: partition(graph, path, n, {given}_time=...)"
            )
        if strategy != "uniform":
            raise ValueError(f"temporal_strategy={strategy!r} needs a partition written with node_time or edge_time")
        return None
    check_last(strategy, weighted)
    if given is not None:
        _check_same_times(book, given, node_time if given == "node" else edge_time)
    return _book_timeline(book, strategy)


def _book_timeline(book: PartitionBook, strategy: str) -> Timeline:
    """The timeline of a temporal partition: its node times (the book's mapped arrays) or none."""
    if book.temporal == "node":
        if book.typed:
            node_times = {t: book.node_time(t) for t in book.node_types if book.node_time(t) is not None}
        else:
            node_times = book.node_time()
    else:
        node_times = None
    return Timeline(np.empty(0, book.time_dtype), node_times, strategy)


def _check_same_times(book: PartitionBook, kind: str, values) -> None:
    """Refuse times that are not those the partition was sorted by (compared by digest)."""
    from ..heterograph import check_edge_type
    from .partitioning import times_digest

    name = f"{kind}_time"
    if kind != book.temporal:
        raise ValueError(f"{name} given, but the partition was sorted by {book.temporal}_time")
    if book.typed:
        if not isinstance(values, dict):
            raise TypeError(f"{name} of a typed graph must be a dict, got {type(values).__name__}")
        keys = book.node_types if kind == "node" else book.edge_types
        per = {}
        for key, array in values.items():
            if kind == "edge":  # a (src_type, name, dst_type) tuple of str, as the typed sampler checks it
                key = check_edge_type(key, keys, f"{name}'s key")
            if key not in keys:
                raise ValueError(f"{name} names {key!r}, which the partition does not have")
            per[keys.index(key)] = time_array(f"{name}[{key!r}]", array)
    else:
        per = {0: time_array(name, values)}
    cast = {k: v.astype(book.time_dtype, copy=False) for k, v in per.items()}
    # compared in the partition's type, values kept: 1.6 cast to an int64 partition's 1 (or 2**32
    # to an int32 one's 0) matched the digest, and the batches were not those of these times
    if any(not np.array_equal(cast[k], v) for k, v in per.items()) or times_digest(cast) != book.meta["time_digest"]:
        raise ValueError(f"{name} differs from the times the partition was written with")


class _RemoteMixin:
    """The constructor both remote samplers share (the local samplers' checks, in their order)."""

    def __init__(self, transport, book, fanouts, **options):
        unknown = set(options) - set(_DEFAULTS)
        if unknown:
            raise TypeError(f"{type(self).__name__} got unexpected options {sorted(unknown)}")
        self._remote_init(transport, book, fanouts, {**_DEFAULTS, **options})

    def _remote_init(self, transport, book, fanouts, options: dict) -> None:
        from ..sampling.common import resolve_placement

        book = _check_book(book)
        if book.typed != self._TYPED:
            kind = "a typed" if book.typed else "an untyped"
            other = "RemoteHeteroSampler" if book.typed else "RemoteSampler"
            raise ValueError(f"book describes {kind} graph: sample it with {other}")
        self.transport = _check_transport(transport, book)
        self.book = book
        self.graph = PartitionedGraph(book)
        self.fanouts = self._check_fanouts(self.graph, fanouts)
        flags = options["expand"], options["replace"], options["weighted"], options["disjoint"]
        self.expand, self.replace, self.weighted, self.disjoint = check_flags(*flags)
        self._check_replace(self.fanouts)
        self.seed = check_int("seed", options["seed"], minimum=0, below=2**64)
        if self.weighted and not book.weighted:
            raise ValueError("weighted=True needs a partition written from a graph with weights")
        times = options["node_time"], options["edge_time"], options["temporal_strategy"]
        self.timeline = _timeline(book, *times, self.weighted)
        self.disjoint = self.disjoint or self.timeline is not None
        self.device = as_device(options["device"])
        if self.device.is_cuda:
            raise ValueError(f"device must be 'cpu': a remote sampler returns host arrays, got {self.device}")
        self.placement = resolve_placement(self.device, options["placement"], None, self.weighted)
        self.num_nodes = book.num_nodes if not book.typed else dict(book.num_nodes)
        self._key = 0
        self._lock = threading.Lock()
        self._merged = MergedExchange(self.transport)  # concurrent batches' hops share requests
        self._plan_hops()
        self._driver = self._make_driver()

    def _routes(self):
        from ..sampling.remote import Routes, wire_dtype

        return Routes(self.book.part, self.transport.group_parts, self.book.num_parts, wire_dtype(self.book))

    def _exchange(self, requests, key):
        return self._merged(requests, key)

    def _options(self):
        from ..sampling.remote import remote_options

        return remote_options(self.replace, self.weighted, self.timeline is not None and self.timeline.last)

    def __getstate__(self):
        # Pickled in O(1) of the graph: the book and the transport's servers travel as paths
        # (their own pickling), the timeline as its strategy (its node times are the book's), the
        # driver not at all (rebuilt on arrival).
        state = self.__dict__.copy()
        state["_lock"] = state["_driver"] = state["_merged"] = None
        if self.timeline is not None:
            state["timeline"] = self.timeline.strategy
        return state

    def __setstate__(self, state):
        if isinstance(state.get("timeline"), str):
            state = {**state, "timeline": _book_timeline(state["book"], state["timeline"])}
        state = {**state, "_merged": MergedExchange(state["transport"])}
        super().__setstate__(state)


_DEFAULTS = {
    "replace": False,
    "weighted": False,
    "seed": 0,
    "device": "cpu",
    "placement": "auto",
    "expand": "all",
    "disjoint": False,
    "node_time": None,
    "edge_time": None,
    "temporal_strategy": "uniform",
}


class RemoteSampler(_RemoteMixin, NeighborSampler):
    """:class:`~gglspeedup.NeighborSampler` over partition servers: the same batches, bit for bit.

    Parameters
    ----------
    transport : Transport
        Reaches the groups serving the partitions (``cluster``'s Ray transport, or
        :class:`~gglspeedup.service.LocalTransport` over :class:`~gglspeedup.service.PartServer`
        objects in this process); every partition in exactly one group.
    book : PartitionBook or path
        The partitioned folder's book (:func:`~gglspeedup.service.partition`).
    fanouts, replace, weighted, seed, expand, disjoint, temporal_strategy
        As :class:`~gglspeedup.NeighborSampler` (``weighted`` needs a partition with weights).
    node_time, edge_time
        A temporal partition (written with times) samples temporally whatever is given here; times
        given must be the partition's (checked), and none may be given for an untimed partition.
    device, placement
        ``"cpu"`` / ``"auto"`` only: batches are host arrays.

    :meth:`sample`, :meth:`sample_links` (exclusion, negatives, strict negatives) and
    :meth:`with_fanouts` are :class:`~gglspeedup.NeighborSampler`'s; each hop sends one ``"draw"``
    request per group owning targets (the distinct targets it owns, int32 ids while they fit), all
    at once; a group that does not answer raises :class:`~gglspeedup.service.ServerUnavailable`
    (from the transport), naming it and the batch key. Calls from several threads at once (batches
    kept in flight) share requests, each batch still exactly its own; a sampler over a
    :class:`~gglspeedup.service.LocalTransport` pickles in O(1) (the book and the servers travel
    as paths), one over a cluster's Ray transport not at all (``TypeError``: its connections
    belong to the process that made it, which alone may use it: a forked child, a DataLoader's
    worker, gets a ``RuntimeError``).

    Examples
    --------
    >>> import os, tempfile, gglspeedup as gg
    >>> from gglspeedup.service import LocalTransport, PartServer, partition
    >>> graph = gg.CSRGraph.from_edge_index([[1, 2, 3, 0, 2], [0, 0, 1, 2, 3]], num_nodes=4)
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = os.path.join(tmp.name, "p")
    >>> book = partition(graph, folder, 2, method="range")
    >>> transport = LocalTransport([PartServer(folder, [0]), PartServer(folder, [1])], [(0,), (1,)])
    >>> remote = RemoteSampler(transport, book, [2, 1], seed=3).sample([0, 3], key=5)
    >>> local = gg.NeighborSampler(graph, [2, 1], seed=3).sample([0, 3], key=5)
    >>> remote.n_id.tolist() == local.n_id.tolist(), remote.adjs[0].e_id.tolist() == local.adjs[0].e_id.tolist()
    (True, True)
    >>> tmp.cleanup()
    """

    def _make_driver(self):
        from ..sampling.remote import RemoteDriver

        temporal = self.timeline is not None
        return RemoteDriver(self._exchange, self._routes(), self._options(), self.seed, self.num_nodes, temporal)

    def with_fanouts(self, fanouts) -> RemoteSampler:
        """As :meth:`NeighborSampler.with_fanouts` (shares the transport and the driver)."""
        return self._clone(RemoteSampler, fanouts)

    def __repr__(self) -> str:
        groups = len(self.transport.group_parts)
        return f"RemoteSampler(fanouts={self.fanouts}, seed={self.seed}, groups={groups}, {self.book!r})"


class RemoteHeteroSampler(_RemoteMixin, HeteroNeighborSampler):
    """:class:`~gglspeedup.HeteroNeighborSampler` over partition servers of a typed graph: the same
    batches, bit for bit. Parameters as :class:`RemoteSampler` (``fanouts`` a list or a dict edge
    type -> list; times dicts per type, as the local typed sampler takes them)."""

    def _make_driver(self):
        from ..sampling.remote import TypedRemoteDriver

        counts = [self.book.num_nodes[t] for t in self.book.node_types]
        return TypedRemoteDriver(
            self._exchange,
            self._routes(),
            self._options(),
            self.seed,
            counts,
            self.graph.row_base,
            self._plan.dst_type,
            self.timeline is not None,
        )

    def with_fanouts(self, fanouts) -> RemoteHeteroSampler:
        return self._clone(RemoteHeteroSampler, fanouts)

    def __repr__(self) -> str:
        return f"RemoteHeteroSampler(fanouts={self.fanouts}, seed={self.seed}, {self.book!r})"

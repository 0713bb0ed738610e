"""``service.serve``: partition servers on Ray, and the :class:`Cluster` trainers use.

``serve(path, num_servers)`` starts one Ray actor per server (and per replica), each hosting a
:class:`~.server.PartServer` over a group of the folder's partitions; the servers map their parts in
O(1) (checksums verified once, at start) and warm their kernels before the call returns. A trainer
then draws batches with ``cluster.sampler(...)`` (bit-identical to the local sampler), reads feature
rows with ``cluster.features(...)`` (a :class:`~gglspeedup.FeatureStore` whose fallback is remote)
and labels with ``cluster.labels``. Every request carries the deadline; a server that dies or hangs
is named by :class:`~.errors.ServerUnavailable` (see :mod:`._ray_transport` for the retries that
replicas and restarts allow).

Where Ray runs: with ``address=None`` a local instance is started (the embedded default, on the
loopback address, in a temporary folder of its own: stopped again, and the folder removed, by
:meth:`Cluster.close`); ``address="auto"`` (or ``"host:port"``, ``"ray://host:port"``) joins a
running cluster, whose nodes the servers are spread over. A process already connected to Ray
uses that connection. Ray's token authentication stays as Ray sets it up (on).

Servers started by ``python -m gglspeedup.service serve PATH`` carry names; ``serve(PATH, ...)`` in
a trainer on the same Ray cluster finds them and uses them instead of starting its own (closing
such a cluster leaves them running: their starter stops them).
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import NamedTuple

from ..validation import check_bool, check_int, check_seconds
from ._actors import attach_servers, connect, disconnect, server_threads, split_address, start_servers
from .book import PartitionBook

__all__ = ["serve", "Cluster", "ServerInfo", "PART_SERVER", "group_partitions", "ray_connection", "split_address"]

PART_SERVER = "gglspeedup.service.server:PartServer"


class ServerInfo(NamedTuple):
    """One server (a group of partitions) of a :class:`Cluster`.

    ``index`` is the server's number (what :class:`~.errors.ServerUnavailable` names), ``parts``
    its partitions, ``node`` the IP address of the Ray node its (first) process runs on, ``pid``
    that process's id, ``replicas`` a ``(node, pid)`` pair per replica process, and ``alive``
    whether a process of it answered when the list was made.
    """

    index: int
    parts: tuple
    node: str
    pid: int
    replicas: tuple
    alive: bool


def group_partitions(num_parts: int, num_servers: int) -> list[tuple]:
    """The partitions each of ``num_servers`` servers serves: contiguous runs, as even as can be.

    >>> group_partitions(5, 2)
    [(0, 1, 2), (3, 4)]
    """
    bounds = [-(-g * num_parts // num_servers) for g in range(num_servers + 1)]  # the larger groups first
    return [tuple(range(bounds[g], bounds[g + 1])) for g in range(num_servers)]


@contextlib.contextmanager
def ray_connection(address=None, *, private_network: bool = False):
    """Ray connected for the ``with`` block: this process's connection as it is, the cluster at
    ``address`` (disconnected at the end), or a new local instance with the settings :func:`serve`
    starts one with (stopped, and its temporary folder removed, at the end).
    ``private_network=True`` starts that local instance in a private network namespace this
    thread enters (:mod:`.netns`: loopback only) and leaves at the end; ``PermissionError`` where
    none can be made. The bench and the demo run Ray this way."""
    from ._ray import import_ray

    ray = import_ray()
    if ray.is_initialized() or address is not None or not private_network:
        _, connected = connect(address)
        try:
            yield
        finally:
            if connected:
                disconnect()
        return
    from .netns import private_network as enter

    with enter():
        _, connected = connect(None)
        try:
            yield
        finally:
            if connected:
                disconnect()


def server_tag(book: PartitionBook) -> str:
    """The name named servers of this folder carry (its absolute path, hashed)."""
    return hashlib.sha1(book.path.encode()).hexdigest()[:16]


def serve(
    path,
    num_servers=None,
    *,
    address=None,
    replicas=1,
    max_restarts=1,
    deadline="5s",
    verify=True,
    startup="120s",
    named=False,
    threads=None,
) -> Cluster:
    """Serve the partitioned folder ``path`` with ``num_servers`` Ray actors; a :class:`Cluster`.

    Parameters
    ----------
    path : str or os.PathLike
        A folder written by :func:`~gglspeedup.service.partition`, readable at this path on every
        node that runs a server (a shared or copied folder).
    num_servers : int, optional
        Servers (groups of partitions), in ``[1, num_parts]``; default one per partition.
    address : str, optional
        ``None``: a local Ray instance (or this process's Ray connection, if any). ``"auto"``,
        ``"host:port"`` or ``"ray://host:port"``: join that cluster; servers are spread over its nodes.
        ``"ray://"`` goes through Ray Client (``ray[client]``, in the ``service`` extra); Ray sends
        its token from a driver given an explicit address only with ``RAY_AUTH_MODE=token`` set.
    replicas : int
        Processes per server (``>= 1``): a request goes to one; when it fails, to another.
    max_restarts : int
        How often Ray restarts a dead server process (``-1``: always); a restarted process maps its
        parts again and the failed request is sent to it.
    deadline : float or str
        The time a request may take on one process (``"5s"``, ``"500ms"``, seconds as a number).
    verify : bool
        Servers check their parts' checksums once at start (``False``: map in O(1) unchecked).
    startup : float or str
        The time a server (or a restarted one) may take to map its parts and warm its kernels.
    named : bool
        Give the servers names on the Ray cluster, so that ``serve(path, ...)`` in other processes
        there uses them (what ``python -m gglspeedup.service serve`` does); they live as long as
        this process or until :meth:`Cluster.close`.
    threads : int, optional
        Numba threads each server process's kernels use. Default: on a Ray cluster that is this
        machine alone, its cores shared among the server processes (at least one each, so that
        servers sharing a machine do not oversubscribe its cores); on a larger cluster, Numba's
        default (the node's cores).

    Returns
    -------
    Cluster
        Close it (or use ``with serve(...) as cluster:``) to stop the servers.

    Raises
    ------
    TypeError, ValueError
        a bad argument, named, before anything starts; ``FileNotFoundError`` for a missing folder.
    ConnectionError
        a ``"host:port"`` / ``"ray://host:port"`` address nothing answers at within 10 s (checked
        before ``ray.init``, which retries such an address for minutes).
    ImportError
        Ray is not installed (the ``service`` extra).
    RuntimeError
        a server failed to start (its error in the message): every server started is stopped.
    """
    book = PartitionBook.load(path)
    if num_servers is None:
        num_servers = book.num_parts
    num_servers = check_int("num_servers", num_servers, minimum=1)
    if num_servers > book.num_parts:
        raise ValueError(f"num_servers must be at most the number of partitions ({book.num_parts}), got {num_servers}")
    replicas = check_int("replicas", replicas, minimum=1)
    max_restarts = check_int("max_restarts", max_restarts, minimum=-1)
    deadline, startup = check_seconds("deadline", deadline), check_seconds("startup", startup)
    verify, named = check_bool("verify", verify), check_bool("named", named)
    if threads is not None:
        threads = check_int("threads", threads, minimum=1)
    if address is not None and not isinstance(address, str):
        raise TypeError(f"address must be None or a str ('auto', 'host:port', 'ray://host:port'), got {address!r}")
    groups = group_partitions(book.num_parts, num_servers)
    _, connected = connect(address)
    try:
        transport = None
        if not connected or address is not None:  # servers may already run on this cluster
            transport = attach_servers(server_tag(book), deadline=deadline, startup=startup)
        if transport is None:
            options = [{"path": book.path, "parts": list(parts), "verify": verify} for parts in groups]
            if threads is None:
                threads = server_threads(num_servers * replicas)
            transport = start_servers(
                PART_SERVER,
                options,
                groups,
                replicas=replicas,
                max_restarts=max_restarts,
                deadline=deadline,
                startup=startup,
                tag=server_tag(book) if named else None,
                threads=threads,
            )
    except BaseException:
        if connected:
            disconnect()
        raise
    return Cluster(book, transport, disconnect=connected)


class Cluster:
    """Partition servers on Ray and the trainer's ways to use them (made by :func:`serve`).

    Attributes
    ----------
    book : PartitionBook
        The partitioned folder's book.
    transport : RayTransport
        The servers' transport (:meth:`stats`: requests, retries, bytes moved).
    """

    def __init__(self, book: PartitionBook, transport, *, disconnect: bool = False):
        self.book = book
        self.transport = transport
        self._disconnect = disconnect
        self.closed = False

    @property
    def num_servers(self) -> int:
        return len(self.transport.group_parts)

    @property
    def deadline(self) -> float:
        return self.transport.deadline

    @property
    def servers(self) -> list[ServerInfo]:
        """Each server's :class:`ServerInfo` (partitions, node address, process id), asked of its
        processes now (a process that does not answer keeps what was last known, ``alive`` False)."""
        from ._actors import refresh_replicas

        refresh_replicas(self.transport)
        out = []
        for index, group in enumerate(self.transport.replicas):
            first = group[0]
            pairs = tuple((r.info["node"], int(r.info["pid"])) for r in group)
            alive = any(r.state == "ok" for r in group)
            parts = self.transport.group_parts[index]
            out.append(ServerInfo(index, parts, first.info["node"], int(first.info["pid"]), pairs, alive))
        return out

    # ------------------------------------------------------------------ the trainer's side
    def sampler(self, fanouts, **options):
        """A :class:`~gglspeedup.service.RemoteSampler` (typed graphs: a
        :class:`~gglspeedup.service.RemoteHeteroSampler`) over these servers: ``NeighborSampler``'s
        options and batches, bit for bit (``sample``, ``sample_links``, temporal, disjoint)."""
        self._check_open()
        from .sampler import RemoteHeteroSampler, RemoteSampler

        kind = RemoteHeteroSampler if self.book.typed else RemoteSampler
        return kind(self.transport, self.book, fanouts, **options)

    def features(self, device="cpu", cache_size=0, policy=None, *, presample=None):
        """Feature rows through the servers (see :class:`~.features.RemoteFeatureStore`): a
        cache of ``cache_size`` bytes on ``device`` holds the rows ``policy`` ranks first
        (``None``: ``"degree"``), every other row is asked of its server; typed graphs: a dict
        node type -> store, the budget shared by row bytes (``policy`` not ``"presample"``), or
        ``policy`` as :class:`~gglspeedup.feature.HeteroFeatureStore` takes it (a dict node type ->
        order, a list of ``(node_type, id)`` pairs), its rows cached as that store caches them."""
        self._check_open()
        from .features import remote_features

        return remote_features(self, device, cache_size, policy, presample)

    @property
    def labels(self):
        """Labels through the servers (:class:`~.labels.RemoteLabels`: ``labels[ids]``, or all
        of them as an array); typed graphs: a dict node type -> labels."""
        self._check_open()
        from .labels import remote_labels

        return remote_labels(self)

    def stats(self) -> dict:
        """The transport's counters (requests, retries, failures, restarts, bytes moved)."""
        return self.transport.stats()

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Stop every server process this cluster started (no restart), and the local Ray
        instance when :func:`serve` started one; leaves no process, no shared memory and no file
        behind (that instance's temporary folder, its logs included, is removed; a joined
        cluster's files are its own). Idempotent."""
        if self.closed:
            return
        self.closed = True
        try:
            self.transport.close()
        finally:
            if self._disconnect:
                disconnect()

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("the cluster is closed")

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.num_servers} servers"
        return f"Cluster({self.book.path!r}, {state}, deadline={self.deadline:g}s)"

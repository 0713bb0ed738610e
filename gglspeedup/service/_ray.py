"""Ray's side of the service: importing Ray, and the actor that hosts one server process.

A :class:`ServerHost` is the body of every server actor: it builds its server from a factory
named by a string (``"package.module:Class"``) and plain keyword arguments, so no user object is
pickled into the actor, and answers requests with the server's plain answers over its channel
(:mod:`._channel`: a Unix socket and TCP on the node's Ray address, every connection
authenticated with the cluster's secret). ``describe()`` (through Ray) tells who answers (process
id, node, an incarnation token that changes when Ray restarts the process, where the channel
listens, the secret) and ``inject(...)`` plants faults for the failure tests and the bench's
failure timings: a delay, or a dropped connection (the server breaks its channel connections
while a request is in flight, so the trainer's connection really breaks), for the next requests.
``handle(method, payload)`` also answers through Ray itself (the slower path, for comparisons).
"""

from __future__ import annotations

import importlib
import os
import threading
import time
import uuid

__all__ = ["import_ray", "ServerHost", "INJECTIONS", "ray_errors", "writeable"]

INJECTIONS = ("delay", "drop")


def import_ray():
    """The ``ray`` module, or ``ImportError`` naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise ImportError("gglspeedup.service needs Ray: pip install 'gglspeedup[service]' (ray and pymetis)") from None
    return ray


def ray_errors():
    """``(died, unavailable, task_error, ray_error, timeout)``: the Ray exception classes the
    transport tells apart."""
    from ray import exceptions

    return (
        exceptions.ActorDiedError,
        exceptions.ActorUnavailableError,
        exceptions.RayTaskError,
        exceptions.RayError,
        exceptions.GetTimeoutError,
    )


def build_server(factory: str, options: dict):
    """``Class(**options)`` for ``factory`` = ``"package.module:Class"``."""
    module, _, name = factory.partition(":")
    if not module or not name:
        raise ValueError(f"factory must name 'package.module:Class', got {factory!r}")
    return getattr(importlib.import_module(module), name)(**options)


class ServerHost:
    """The body of a server actor (Ray wraps it with ``ray.remote``).

    Parameters
    ----------
    factory : str
        ``"package.module:Class"`` of the server, importable in the actor's process.
    options : dict
        Plain keyword arguments of the server's constructor (paths, part numbers, flags).
    group, replica : int
        Which server slot this process answers for, and which of its replicas it is.
    max_restarts : int
        The restarts Ray grants the actor (reported, for clients that attach to it).
    secret : str, optional
        The cluster's channel secret (hex; :func:`._channel.new_secret`); default a new one.
    threads : int, optional
        Numba threads a request's kernels may use (default: Numba's, the node's cores).
    """

    def __init__(
        self,
        factory: str,
        options: dict,
        group: int,
        replica: int,
        max_restarts: int = 0,
        secret: str | None = None,
        threads: int | None = None,
    ):
        from ._channel import ChannelServer, new_secret

        self.threads, self._set = threads, threading.local()
        self.server = build_server(factory, options)
        self.group, self.replica, self.max_restarts = int(group), int(replica), int(max_restarts)
        self.incarnation = uuid.uuid4().hex  # new in every process Ray (re)starts
        self.started = time.time()
        self._faults = []  # [kind, remaining count, seconds]
        self.secret = secret or new_secret()
        self.channel = ChannelServer(self._answer, self.secret, _node_address())

    def _answer(self, method: str, payload: dict) -> dict:
        """The server's answer to a channel request (its arrays arrive writable), after any
        planted fault has run."""
        if self._faults:
            self._run_fault()
        if self.threads and not getattr(self._set, "threads", False):  # Numba's count is per thread
            from .._parallel import use_threads

            use_threads(self.threads)
            self._set.threads = True
        if getattr(self.server, "TAKES_ARENA", False):  # it may write its answer where it is sent from
            return self.server.handle(method, payload, arena=self.channel.arena())
        return self.server.handle(method, payload)

    def handle(self, method: str, payload: dict) -> dict:
        """The server's answer to ``(method, payload)`` asked through Ray (arrays Ray hands over
        read-only are copied first), after any planted fault has run."""
        return self._answer(method, writeable(payload))

    def describe(self) -> dict:
        """Who answers: ``pid``, ``node`` (IP address), ``node_id``, ``incarnation``, ``group``,
        ``replica``, ``max_restarts``, ``channel`` (where it listens), ``secret`` (the cluster's,
        for trainers that attach), ``requests`` / ``refused`` (channel requests answered,
        connections refused for want of the secret) and the server's own ``info`` answer when it
        has one."""
        import ray

        context = ray.get_runtime_context()
        info = {}
        if hasattr(self.server, "handle"):
            try:
                info = self.server.handle("info", {})
            except (KeyError, ValueError, NotImplementedError):
                info = {}
        return {
            "pid": os.getpid(),
            "node": ray.util.get_node_ip_address(),
            "node_id": context.get_node_id(),
            "incarnation": self.incarnation,
            "group": self.group,
            "replica": self.replica,
            "max_restarts": self.max_restarts,
            "channel": self.channel.address,
            "secret": self.secret,
            "requests": self.channel.requests,
            "refused": self.channel.refused,
            "info": info,
        }

    def inject(self, kind: str, count: int = 1, seconds: float = 0.0) -> int:
        """Plant a fault for the next ``count`` requests: ``"delay"`` sleeps ``seconds`` before
        answering, ``"drop"`` breaks every channel connection of the process while the request is
        in flight (the reply is lost; then sleeps ``seconds``). Returns the number of faults now
        planted."""
        if kind not in INJECTIONS:
            raise ValueError(f"kind must be one of {INJECTIONS}, got {kind!r}")
        self._faults.append([kind, int(count), float(seconds)])
        return len(self._faults)

    def _run_fault(self) -> None:
        fault = self._faults[0]
        kind, _, seconds = fault
        fault[1] -= 1
        if fault[1] <= 0:
            self._faults.pop(0)
        if kind == "drop":
            self.channel.drop()
        time.sleep(seconds)


def _node_address() -> str:
    """The address Ray registered for this process's node: the channel's TCP listens there only."""
    import ray

    return ray.util.get_node_ip_address()


def writeable(payload: dict, *, floats: bool = True) -> dict:
    """``payload`` with its read-only arrays copied. Ray hands received arrays over read-only (views
    of its buffers); Numba compiles read-only arrays as a type of their own, so a kernel warmed on
    ordinary arrays would compile again on the first request (seconds, against its deadline).
    ``floats=False`` leaves float arrays as they are: they are feature rows (or weights) that the
    receiver copies where it keeps them, and a batch's rows are tens of MB."""
    import numpy as np

    return {
        name: value.copy()
        if isinstance(value, np.ndarray) and not value.flags.writeable and (floats or value.dtype.kind != "f")
        else value
        for name, value in payload.items()
    }

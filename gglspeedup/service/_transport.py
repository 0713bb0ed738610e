"""How a client reaches the servers: the :class:`Transport` contract and its in-process form.

A cluster is a list of *groups*. A group is one server slot: the partitions it serves and the
processes (one per replica) that can answer for them. A client never names a process: it sends a
request to a group, and the transport picks a replica that answers (retrying on another replica,
or on a restarted process, as the cluster allows) or raises
:class:`~gglspeedup.service.errors.ServerUnavailable` within the deadline plus one second.

Messages are plain: a request is ``(method, payload)`` and an answer a payload, where a payload is
a ``dict`` from ``str`` to NumPy arrays of numbers or booleans, NumPy scalars, ``int``, ``float``,
``bool``, ``str`` or ``None`` (:func:`check_plain`). Nothing a user made crosses the wire pickled,
so a server runs no user code and a message has one meaning in every process.

A server is any object with ``handle(method, payload) -> payload`` (the partition server,
:mod:`gglspeedup.service.server`, and the tests' own). :class:`LocalTransport` calls such objects
in this process, one group each: the service's logic without processes, for tests and for
single-machine runs of the remote classes.

>>> class Echo:
...     def handle(self, method, payload):
...         return {"method": method, "twice": payload["values"] * 2}
>>> transport = LocalTransport([Echo(), Echo()], [(0,), (1, 2)])
>>> answers = transport.call({1: ("double", {"values": np.arange(3)})}, key=7)
>>> answers[1]["twice"].tolist(), transport.group_parts
([0, 2, 4], ((0,), (1, 2)))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Transport", "LocalTransport", "check_plain"]

_SCALARS = (int, float, bool, str, type(None), np.generic)


@runtime_checkable
class Transport(Protocol):
    """Requests to groups of servers, all in parallel, each answered or refused in bounded time.

    ``group_parts[g]`` are the partitions group ``g`` serves (every partition in exactly one
    group). ``call({g: (method, payload), ...}, key=k)`` sends every request at once and returns
    ``{g: answer}`` for all of them, or raises ``ServerUnavailable`` naming the first group that
    could not answer (its server, its parts and ``key``). ``close()`` ends every server process the
    transport started.
    """

    group_parts: tuple

    def call(self, requests: Mapping[int, tuple[str, dict]], *, key: int | None = None) -> dict[int, dict]: ...

    def close(self) -> None: ...


def check_plain(payload: Any, what: str) -> dict:
    """``payload`` if it is a plain message (see the module's docstring), else ``TypeError`` naming
    ``what`` and the offending entry. Arrays of objects (strings, Python objects) are refused."""
    if not isinstance(payload, dict):
        raise TypeError(f"{what} must be a dict of arrays and scalars, got {type(payload).__name__}")
    for name, value in payload.items():
        if not isinstance(name, str):
            raise TypeError(f"{what} keys must be str, got {name!r}")
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf":
                raise TypeError(f"{what}[{name!r}] must hold numbers or booleans, got dtype {value.dtype}")
        elif not isinstance(value, _SCALARS):
            raise TypeError(f"{what}[{name!r}] must be an array or a scalar, got {type(value).__name__}")
    return payload


class LocalTransport:
    """The :class:`Transport` over server objects in this process: ``servers[g]`` answers group
    ``g``, whose partitions are ``group_parts[g]``. Requests run one after another; messages are
    checked as plain both ways, so what passes here also passes a process boundary."""

    def __init__(self, servers, group_parts):
        if len(servers) != len(group_parts):
            raise ValueError(f"servers and group_parts differ in length: {len(servers)} != {len(group_parts)}")
        self.servers = list(servers)
        self.group_parts = tuple(tuple(int(p) for p in parts) for parts in group_parts)

    def call(
        self, requests: Mapping[int, tuple[str, dict]], *, key: int | None = None, into: Mapping | None = None
    ) -> dict[int, dict]:
        answers = {}
        for group, (method, payload) in requests.items():
            check_plain(payload, f"the request to group {group}")
            answer = check_plain(self.servers[group].handle(method, payload), f"group {group}'s answer to {method!r}")
            for name, buffer in ((into or {}).get(group) or {}).items():  # as a process boundary would
                value = answer.get(name)
                if isinstance(value, np.ndarray) and value.dtype == buffer.dtype and value.shape == buffer.shape:
                    buffer[...] = value
                    answer = {**answer, name: buffer}
            answers[group] = answer
        return answers

    def close(self) -> None:
        """Nothing to end: the servers live in this process."""

"""The service's one error: a server that did not answer in time (see DESIGN.md, "Service")."""

from __future__ import annotations

__all__ = ["ServerUnavailable"]


class ServerUnavailable(RuntimeError):
    """A server did not answer a request within its deadline: it died (killed, crashed), hung
    (stopped, deadlocked), or its connection dropped.

    Raised by every client call of :mod:`gglspeedup.service` (sampling, features, labels) once no
    replica and no restart can answer, never later than the request's deadline plus one second.

    Attributes
    ----------
    server : int
        The server's index in ``cluster.servers``.
    parts : tuple of int
        The partitions it serves.
    key : int or None
        The batch key of the request (``None`` for requests outside a batch, such as a gather).
    reason : str
        What was seen: ``"deadline"`` (no answer in time), ``"died"`` (the process is gone),
        ``"connection"`` (the transport failed), with Ray's message when there is one.

    >>> error = ServerUnavailable(1, (2, 3), 17, "deadline", "no answer in 5.0 s")
    >>> isinstance(error, RuntimeError), error.parts
    (True, (2, 3))
    >>> str(error)
    'server 1 (parts [2, 3]) is unavailable for batch key 17: deadline: no answer in 5.0 s'
    """

    def __init__(self, server: int, parts, key: int | None, reason: str, detail: str = ""):
        self.server, self.parts, self.key = int(server), tuple(int(p) for p in parts), key
        self.reason, self.detail = reason, detail
        batch = "a request outside a batch" if key is None else f"batch key {key}"
        message = f"server {self.server} (parts {list(self.parts)}) is unavailable for {batch}: {reason}"
        super().__init__(message + (f": {detail}" if detail else ""))

    def __reduce__(self):  # picklable across processes (loader threads, Ray)
        return type(self), (self.server, self.parts, self.key, self.reason, self.detail)

"""A tiny server for tests of the service's transports (no partitions needed).

:class:`EchoServer` answers the plain requests of :mod:`gglspeedup.service._transport`: its
``handle(method, payload)`` is what a partition server offers, minus the graph. The Ray tests
start it in actors by name (``"gglspeedup.testing.service:EchoServer"``).
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["EchoServer", "ECHO_SERVER"]

ECHO_SERVER = "gglspeedup.testing.service:EchoServer"


class EchoServer:
    """Answers ``"echo"`` (the payload back, plus ``"pid"``), ``"scale"`` (``values * factor``
    with the server's ``factor``), ``"info"`` (``parts``, ``pid``) and refuses anything else with
    ``ValueError``.

    >>> EchoServer(factor=3, parts=(1,)).handle("scale", {"values": np.arange(3)})["values"].tolist()
    [0, 3, 6]
    """

    def __init__(self, factor: int = 1, parts=()):
        self.factor = int(factor)
        self.parts = np.asarray(parts, dtype=np.int64)

    def handle(self, method: str, payload: dict) -> dict:
        if method == "echo":
            return {**payload, "pid": os.getpid()}
        if method == "scale":
            return {"values": payload["values"] * self.factor}
        if method == "info":
            return {"parts": self.parts, "pid": os.getpid()}
        raise ValueError(f"EchoServer has no method {method!r}")

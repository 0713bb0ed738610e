"""Helpers for tests of the service: a tiny server, and a server process stopped for sure.

:class:`EchoServer` answers the plain requests of :mod:`gglspeedup.service._transport`: its
``handle(method, payload)`` is what a partition server offers, minus the graph. The Ray tests
start it in actors by name (``"gglspeedup.testing.service:EchoServer"``).

:func:`stop_process` sends a SIGSTOP and returns only once the process has stopped. ``kill``
returns when the signal is queued, and the kernel wakes one thread of the process to act on it;
only when that thread runs are the others stopped. On a loaded machine that takes milliseconds
(measured here at load 6.5: median 1.8 ms, 99th percentile 5.8 ms, at worst 42 ms), while a
server's channel thread, woken by a request sent meanwhile, may answer it: a "stopped" server
then answers a batch. The failure tests and ``bench service`` stop servers with it.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

__all__ = ["EchoServer", "ECHO_SERVER", "stop_process"]

ECHO_SERVER = "gglspeedup.testing.service:EchoServer"


class EchoServer:
    """Answers ``"echo"`` (the payload back, plus ``"pid"``), ``"scale"`` (``values * factor``
    with the server's ``factor``), ``"draws"`` (an answer shaped as a hop's, ``{"draws": n}`` ->
    ``counts`` uint8 (n // 10,), ``nbrs`` and ``e_id`` int32 (n,), made once per size: what a
    call of that size costs, without the sampling), ``"info"`` (``parts``, ``pid``) and refuses
    anything else with ``ValueError``.

    >>> EchoServer(factor=3, parts=(1,)).handle("scale", {"values": np.arange(3)})["values"].tolist()
    [0, 3, 6]
    """

    def __init__(self, factor: int = 1, parts=()):
        self.factor = int(factor)
        self.parts = np.asarray(parts, dtype=np.int64)
        self._draws = {}

    def handle(self, method: str, payload: dict) -> dict:
        if method == "echo":
            return {**payload, "pid": os.getpid()}
        if method == "scale":
            return {"values": payload["values"] * self.factor}
        if method == "draws":
            draws = int(payload["draws"])
            if draws not in self._draws:
                ones = np.ones(draws, np.int32)
                self._draws[draws] = {"counts": np.ones(draws // 10, np.uint8), "nbrs": ones, "e_id": ones}
            return self._draws[draws]
        if method == "info":
            return {"parts": self.parts, "pid": os.getpid()}
        raise ValueError(f"EchoServer has no method {method!r}")


def stop_process(pid: int, seconds: float = 10.0) -> bool:
    """Send ``SIGSTOP`` to process ``pid`` and return once every thread of it is stopped.

    Parameters
    ----------
    pid : int
        The process (all its threads stop).
    seconds : float
        How long the stop may take to land (the thread the kernel wakes for it must run first).

    Returns
    -------
    bool
        True: stopped. False: it exited (or was already dying: a zombie) before it stopped.

    Raises
    ------
    ProcessLookupError
        no process ``pid`` (from ``os.kill``).
    TimeoutError
        a thread of it still runs after ``seconds``.

    >>> import subprocess, sys
    >>> child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    >>> stop_process(child.pid)
    True
    >>> _thread_states(child.pid)
    ['T']
    >>> child.kill(); child.wait()
    -9
    """
    os.kill(pid, signal.SIGSTOP)
    limit = time.monotonic() + seconds
    while True:
        states = _thread_states(pid)
        if not states or "Z" in states or "X" in states:
            return False
        if all(state in "Tt" for state in states):
            return True
        if time.monotonic() > limit:
            raise TimeoutError(f"process {pid} did not stop within {seconds:g} s of SIGSTOP (thread states {states})")
        time.sleep(0.0005)


def _thread_states(pid: int) -> list:
    """The scheduler state letter of each thread of process ``pid`` (``/proc/<pid>/task/*/stat``;
    empty when the process is gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    states = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                states.append(stat.read().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue  # a thread that ended meanwhile
    return states

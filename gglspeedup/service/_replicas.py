"""What the Ray transport knows of each server process: :class:`Replica` (its actor, its state,
its idle channel connections), and the helpers around it: message sizes, a server's refusal
rebuilt as an exception, and the trainer's look at processes on its node (``/proc``).
"""

from __future__ import annotations

import builtins
import math
import os
import signal
import threading
import time

import numpy as np

from ._channel import Connection

__all__ = ["Replica", "message_bytes", "remote_error", "alive", "wait_gone"]

# What a server's refusal may come back as (other exception types arrive as RuntimeError).
_REFUSALS = (
    "ValueError",
    "TypeError",
    "IndexError",
    "KeyError",
    "LookupError",
    "NotImplementedError",
    "ArithmeticError",
    "OverflowError",
    "ZeroDivisionError",
    "MemoryError",
    "RuntimeError",
    "FileNotFoundError",
    "PermissionError",
    "OSError",
)


def message_bytes(payload: dict) -> int:
    """Bytes a plain message carries: its arrays' data plus 8 per scalar (names not counted)."""
    return sum(value.nbytes if isinstance(value, np.ndarray) else 8 for value in payload.values())


def remote_error(kind: str, message: str, group: int, pid) -> Exception:
    """The exception a server raised (``kind`` its type's name), rebuilt in the trainer: the same
    built-in type where it is one of the refusals a server gives, else ``RuntimeError``."""
    where = f" (raised by server {group}, process {pid})"
    if kind in _REFUSALS:
        return getattr(builtins, kind)(message + where)
    return RuntimeError(f"{kind}: {message}{where}")


class Replica:
    """One server process slot: a Ray actor handle, what is known about the process, and the
    idle channel connections to it."""

    def __init__(self, handle, group: int, index: int, info: dict, restarts: int):
        self.handle, self.group, self.index = handle, group, index
        self.info = info  # the last describe() answer: pid, node, node_id, incarnation, channel, secret
        self.state = "ok"
        self.generation = 0  # bumped at every failure handled, so two threads handle one once
        self.restarts_left = math.inf if restarts < 0 else restarts  # Ray's -1: restarted forever
        self.pids = [info["pid"]]  # every process seen in this slot (all must be gone at close)
        self.lock = threading.Lock()  # failure handling and probes
        self._idle: list[Connection] = []  # connections with no request under way
        self._pool = threading.Lock()

    def connection(self, *, unix: bool) -> tuple:
        """``(connection, new)``: an idle connection to the current process, or a new one
        (through its Unix socket when ``unix``: the process is on this node)."""
        incarnation = self.info["incarnation"]
        stale, conn = [], None
        with self._pool:
            while self._idle:
                candidate = self._idle.pop()
                if candidate.incarnation == incarnation and candidate.usable():
                    conn = candidate
                    break
                stale.append(candidate)  # a restarted process's, or one the server broke
        for old in stale:
            old.close()
        if conn is not None:
            return conn, False
        conn = Connection(self.info["channel"], self.info["secret"], unix=unix)
        conn.incarnation = incarnation
        return conn, True

    def release(self, conn: Connection, *, keep: bool) -> None:
        """Keep an answered connection for the next request to the same process (``keep``
        False, or a process since replaced: close it)."""
        with self._pool:
            if keep and conn.incarnation == self.info["incarnation"]:
                self._idle.append(conn)
                return
        conn.close()

    def close_connections(self) -> None:
        with self._pool:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def wait_gone(pid: int, limit: float) -> None:
    """Wait until process ``pid`` has exited (SIGKILL it once ``limit`` passes)."""

    while alive(pid):
        if time.monotonic() > limit:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            limit = float("inf")
        time.sleep(0.02)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False

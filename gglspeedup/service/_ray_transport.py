"""The :class:`~._transport.Transport` over Ray actors: deadlines, failures named, retries.

Each group (server slot) has one or more replica actors (:class:`~._ray.ServerHost`). A call sends
every group's request at once, each to one replica, and waits for all answers with one
``ray.wait``; an answer late past the deadline, a dead process or a broken connection is a failed
attempt, and the group's request moves on:

- to another replica of the group that is known to answer, with a fresh deadline;
- to the same process after a broken connection (Ray reconnects), within the request's own
  deadline (a retried request returns the same answer: a draw depends only on its inputs);
- to the process Ray restarted (``max_restarts``), once it answers a probe within ``startup``
  seconds, with a fresh deadline. A process that missed its deadline (hung: stopped, deadlocked,
  or too slow) is killed first when restarts remain, so that Ray restarts it;
- nowhere: :class:`~.errors.ServerUnavailable` naming the server, its parts and the batch key,
  at the latest when the attempt's deadline passes (plus the time to notice a death, well under
  a second) after the last process that could answer failed.

A SIGKILLed process surfaces as Ray's ``ActorDiedError`` (no restart left: at once) or
``ActorUnavailableError`` (being restarted: after about 1-2 s); a stopped one only through the
deadline. Replica states: ``ok`` (answers), ``check`` (to be probed before use: restarted or
reconnecting), ``suspect`` (missed a deadline and cannot be restarted: used only when nothing
else can answer), ``dead``.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Mapping

import numpy as np

from ._ray import import_ray, ray_errors, writeable
from ._transport import check_plain
from .errors import ServerUnavailable

__all__ = ["RayTransport", "Replica", "message_bytes"]

_PROBE_PAUSE = 0.05  # seconds between probes of a process Ray is restarting
# Seconds between looks at the processes on this node that owe an answer: Ray reports a killed
# process only after 1-2 s, /proc at once (a SIGKILLed server is then named, or its request
# moved, within this time).
_LOCAL_POLL = 0.05


def message_bytes(payload: dict) -> int:
    """Bytes a plain message carries: its arrays' data plus 8 per scalar (names not counted)."""
    return sum(value.nbytes if isinstance(value, np.ndarray) else 8 for value in payload.values())


class Replica:
    """One server process slot: a Ray actor handle and what is known about the process."""

    def __init__(self, handle, group: int, index: int, info: dict, restarts: int):
        self.handle, self.group, self.index = handle, group, index
        self.info = info  # the last describe() answer: pid, node, node_id, incarnation
        self.state = "ok"
        self.generation = 0  # bumped at every failure handled, so two threads handle one once
        self.restarts_left = math.inf if restarts < 0 else restarts  # Ray's -1: restarted forever
        self.pids = [info["pid"]]  # every process seen in this slot (all must be gone at close)
        self.lock = threading.Lock()


class _Attempt:
    __slots__ = ("expires", "generation", "group", "method", "payload", "pid", "ref", "replica", "tries")

    def __init__(self, group, method, payload, replica, ref, expires, tries):
        self.group, self.method, self.payload = group, method, payload
        self.replica, self.generation, self.ref = replica, replica.generation, ref
        self.pid = int(replica.info["pid"])
        self.expires, self.tries = expires, tries


class RayTransport:
    """Requests to groups of Ray actor replicas, with a deadline, retries and named failures.

    Parameters
    ----------
    replicas : list of list of Replica
        ``replicas[g]``: group ``g``'s processes.
    group_parts : sequence of sequence of int
        The partitions each group serves.
    deadline : float
        Seconds a request may take on one process.
    startup : float
        Seconds a restarted process may take to answer its first probe (it maps its parts and
        warms its kernels first).
    node_id : str or None
        This process's Ray node: processes on it are killed directly (a stopped process does not
        exit on Ray's polite request), others through Ray.
    """

    def __init__(self, replicas, group_parts, *, deadline: float, startup: float, node_id=None):
        if len(replicas) != len(group_parts):
            raise ValueError(f"replicas and group_parts differ in length: {len(replicas)} != {len(group_parts)}")
        self.replicas = [list(group) for group in replicas]
        self.group_parts = tuple(tuple(int(p) for p in parts) for parts in group_parts)
        self.deadline, self.startup, self.node_id = float(deadline), float(startup), node_id
        # every process may fail once per restart it has, plus once more and a reconnect (with
        # restarts forever, counted as 30 per process, so a request still gives up)
        self.max_tries = max(sum(min(r.restarts_left, 30) + 2 for r in group) for group in self.replicas)
        self._lock = threading.Lock()
        self._turn = [0] * len(self.replicas)
        self._stats = dict.fromkeys(
            ("calls", "requests", "retries", "failures", "bytes_sent", "bytes_received", "restarts"), 0
        )
        self.owner = True  # False for servers another process started (close() leaves them running)
        self.closed = False

    # ------------------------------------------------------------------ the contract
    def call(self, requests: Mapping[int, tuple[str, dict]], *, key: int | None = None) -> dict[int, dict]:
        """Send every ``{group: (method, payload)}`` request at once; ``{group: answer}``, or
        :class:`~.errors.ServerUnavailable` for the first group no process could answer."""
        if self.closed:
            raise RuntimeError("the transport is closed (cluster.close() was called)")
        ray = import_ray()
        died, unavailable, task_error, ray_error, _ = ray_errors()
        for group, (_method, payload) in requests.items():
            if not 0 <= group < len(self.replicas):
                raise IndexError(f"group must lie in [0, {len(self.replicas)}), got {group}")
            check_plain(payload, f"the request to group {group}")
        attempts = {g: self._submit(g, m, p, self._choose(g, key), tries=0) for g, (m, p) in requests.items()}
        self._count(calls=1, requests=len(attempts), bytes_sent=sum(message_bytes(p) for _, p in requests.values()))
        answers = {}
        while attempts:
            pending = list(attempts.values())
            wait = max(0.0, min(a.expires for a in pending) - time.monotonic())
            if any(self._is_local(a.replica) for a in pending):
                wait = min(wait, _LOCAL_POLL)  # a local process's death is seen here, before Ray reports it
            ready, _ = ray.wait([a.ref for a in pending], num_returns=len(pending), timeout=wait)
            ready = set(ready)
            now = time.monotonic()
            for group, attempt in list(attempts.items()):
                reason = detail = None
                if attempt.ref not in ready and self._is_local(attempt.replica) and not _alive(attempt.pid):
                    reason, detail = "exited", f"process {attempt.pid} is gone"
                elif attempt.ref in ready:
                    try:
                        answer = ray.get(attempt.ref, timeout=0)
                    except died as error:
                        reason, detail = "died", _first_line(error)
                    except unavailable as error:
                        reason, detail = "connection", _first_line(error)
                    except task_error:
                        raise  # the server refused the request (a bug or bad input): not a failure to answer
                    except ray_error as error:
                        reason, detail = "connection", _first_line(error)
                    else:
                        check_plain(answer, f"group {group}'s answer to {attempt.method!r}")
                        answers[group] = writeable(answer, floats=False)  # ids as an in-process server's
                        self._count(bytes_received=message_bytes(answer))
                        del attempts[group]
                        continue
                elif now >= attempt.expires:
                    reason, detail = "deadline", f"no answer in {self.deadline:g} s"
                else:
                    continue
                attempts[group] = self._retry(attempt, reason, detail, key)
        return answers

    def close(self) -> None:
        """Kill every replica process (no restart) and wait until the local ones are gone; only
        forget them when another process started them (:attr:`owner` False)."""
        if self.closed:
            return
        self.closed = True
        if not self.owner:
            return
        ray = import_ray()
        for replica in self.all_replicas():
            try:
                ray.kill(replica.handle, no_restart=True)
            except Exception:  # already gone, or Ray disconnected: nothing to kill
                pass
        # Ray's kill asks a process to exit and forces it only seconds later: a stopped one waits
        # that long. Processes on this node get a second to exit, then SIGKILL.
        limit = time.monotonic() + 1.0
        for replica in self.all_replicas():
            for pid in replica.pids:
                if self._is_local(replica):
                    _wait_gone(pid, limit)

    # ------------------------------------------------------------------ introspection
    def all_replicas(self) -> list:
        return [replica for group in self.replicas for replica in group]

    def stats(self) -> dict:
        """Counters since construction: ``calls``, ``requests`` (one per group per call),
        ``retries``, ``failures`` (attempts that failed), ``restarts`` (new processes seen),
        ``bytes_sent`` / ``bytes_received`` (message data, :func:`message_bytes`)."""
        with self._lock:
            return dict(self._stats)

    def reset_stats(self) -> None:
        with self._lock:
            for name in self._stats:
                self._stats[name] = 0

    def _count(self, **values) -> None:
        with self._lock:
            for name, value in values.items():
                self._stats[name] += value

    # ------------------------------------------------------------------ attempts
    def _choose(self, group: int, key, exclude=None) -> Replica:
        """The next replica of ``group`` to ask: round robin over those that answer, then one to
        probe (restarted or reconnecting), then a suspect one; ServerUnavailable when none."""
        replicas = self.replicas[group]
        with self._lock:
            start = self._turn[group]
            self._turn[group] = (start + 1) % len(replicas)
        order = replicas[start:] + replicas[:start]
        if exclude is not None:
            order = [r for r in order if r is not exclude] + [exclude]
        for wanted in ("ok", "check", "suspect"):
            for replica in order:
                if replica.state == wanted and (wanted != "check" or self._probe(replica)):
                    return replica
        last = exclude or replicas[0]
        raise ServerUnavailable(group, self.group_parts[group], key, "died", f"no process left (pids {last.pids})")

    def _submit(self, group, method, payload, replica, *, tries, expires=None) -> _Attempt:
        ref = replica.handle.handle.remote(method, payload)
        expires = time.monotonic() + self.deadline if expires is None else expires
        return _Attempt(group, method, payload, replica, ref, expires, tries)

    def _retry(self, attempt: _Attempt, reason: str, detail: str, key) -> _Attempt:
        """The next attempt of a failed one, or ServerUnavailable."""
        group, replica = attempt.group, attempt.replica
        self._count(failures=1)
        incarnation = replica.info["incarnation"]
        self._handle_failure(replica, attempt.generation, reason)
        reason = "died" if reason == "exited" else reason  # seen here rather than reported by Ray
        tries = attempt.tries + 1
        if tries >= self.max_tries:
            raise ServerUnavailable(group, self.group_parts[group], key, reason, detail)
        try:
            chosen = self._choose(group, key, exclude=replica)
        except ServerUnavailable:
            raise ServerUnavailable(group, self.group_parts[group], key, reason, detail) from None
        expires = None
        if chosen is replica and replica.info["incarnation"] == incarnation:
            # the same process after a broken connection: still within the request's deadline
            if reason != "connection" or time.monotonic() >= attempt.expires:
                raise ServerUnavailable(group, self.group_parts[group], key, reason, detail)
            expires = attempt.expires
        self._count(retries=1)
        return self._submit(group, attempt.method, attempt.payload, chosen, tries=tries, expires=expires)

    def _handle_failure(self, replica: Replica, generation: int, reason: str) -> None:
        """Record a failed attempt on ``replica`` (once, however many threads saw it fail)."""
        with replica.lock:
            if replica.generation != generation or replica.state == "dead":
                return
            replica.generation += 1
            if reason == "died" or (reason == "exited" and replica.restarts_left <= 0):
                replica.state = "dead"
            elif reason == "deadline" and replica.restarts_left > 0:
                self._kill(replica)  # hung or too slow: Ray restarts it
                replica.state = "check"
            elif reason == "deadline":
                replica.state = "suspect"
            else:
                replica.state = "check"

    def _probe(self, replica: Replica) -> bool:
        """Whether ``replica`` (restarting or reconnecting) answers within ``startup`` seconds
        (or, with no restart left, the deadline); refreshes its info and state."""
        ray = import_ray()
        died, unavailable, _, ray_error, timeout = ray_errors()
        with replica.lock:
            if replica.state != "check":
                return replica.state == "ok"
            limit = time.monotonic() + (self.startup if replica.restarts_left > 0 else self.deadline)
            while True:
                remaining = limit - time.monotonic()
                if remaining <= 0:
                    replica.state = "suspect"
                    return False
                try:
                    info = ray.get(replica.handle.describe.remote(), timeout=remaining)
                except died:
                    replica.state = "dead"
                    return False
                except timeout:
                    replica.state = "suspect"
                    return False
                except (unavailable, ray_error):
                    time.sleep(_PROBE_PAUSE)
                    continue
                if info["incarnation"] != replica.info["incarnation"]:
                    replica.restarts_left -= 1
                    replica.pids.append(info["pid"])
                    self._count(restarts=1)
                replica.info, replica.state = info, "ok"
                replica.generation += 1
                return True

    def _is_local(self, replica: Replica) -> bool:
        return self.node_id is not None and replica.info.get("node_id") == self.node_id

    def _kill(self, replica: Replica) -> None:
        """End ``replica``'s process so that Ray restarts it: directly on this node (SIGKILL ends
        a stopped process too; Ray's own kill waits for it to exit politely first)."""
        if self._is_local(replica):
            try:
                import os

                os.kill(int(replica.info["pid"]), signal.SIGKILL)
                return
            except ProcessLookupError:
                return
        import_ray().kill(replica.handle, no_restart=False)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _wait_gone(pid: int, limit: float) -> None:
    """Wait until process ``pid`` has exited (SIGKILL it once ``limit`` passes)."""
    import os

    while _alive(pid):
        if time.monotonic() > limit:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            limit = float("inf")
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False

"""The :class:`~._transport.Transport` over Ray actors: deadlines, failures named, retries.

Each group (server slot) has one or more replica actors (:class:`~._ray.ServerHost`). Ray starts,
places and restarts them and tells who they are (``describe()``: process, node, incarnation, where
the process's channel listens, the cluster's secret); the requests themselves travel over the
direct channel (:mod:`._channel`: a socket per connection to a server process, frames of raw array
bytes, every connection authenticated with the secret), tens of microseconds a call where a Ray call
costs a millisecond or two. A call sends every group's request at once, each to one replica over a
connection kept from earlier calls (or a new one), and polls all of them under the deadline; an
answer late past the deadline, a dead process or a broken connection is a failed attempt, and the
group's request moves on:

- to another replica of the group that is known to answer, with a fresh deadline;
- to the same process after a broken connection (a new connection), within the request's own
  deadline (a retried request returns the same answer: a draw depends only on its inputs);
- to the process Ray restarted (``max_restarts``), once it answers a probe (through Ray) within
  ``startup`` seconds, with a fresh deadline. A process that missed its deadline (hung: stopped,
  deadlocked, or too slow) is killed first when restarts remain, so that Ray restarts it;
- nowhere: :class:`~.errors.ServerUnavailable` naming the server, its parts and the batch key,
  at the latest when the attempt's deadline passes (plus the time to notice a death, well under
  a second) after the last process that could answer failed.

A SIGKILLed process's connections are reset by the kernel at once: the transport sees the reset,
and for a process on its node reads ``/proc`` to tell a death (reason ``"died"``) from a dropped
connection; a process elsewhere is probed through Ray (dead, restarting, or alive and reconnected).
A stopped one is caught only by the deadline. A server's refusal (bad input, a bug) comes back as
the exception it raised (by type name), not as a failure. Replica states: ``ok`` (answers),
``check`` (to be probed before use: restarted or reconnecting), ``suspect`` (missed a deadline and
cannot be restarted: used only when nothing else can answer), ``dead``.
"""

from __future__ import annotations

import math
import os
import select
import signal
import threading
import time
from collections.abc import Mapping

from ._ray import import_ray, ray_errors
from ._replicas import Replica, alive, message_bytes, remote_error, wait_gone
from ._transport import check_plain
from .errors import ServerUnavailable

__all__ = ["RayTransport", "Replica", "message_bytes", "remote_error"]

_PROBE_PAUSE = 0.05  # seconds between probes of a process Ray is restarting
# A killed process's sockets are closed a moment before /proc shows it gone: a reset connection
# to a process on this node is looked at for this long before it counts as a dropped connection.
_DYING = 0.05
_POLL_MS = 2**31 - 1  # the longest wait poll() takes (its timeout is a C int of milliseconds)


class _Attempt:
    __slots__ = (
        "conn",
        "error",
        "expires",
        "generation",
        "group",
        "into",
        "method",
        "payload",
        "pid",
        "replica",
        "tries",
    )

    def __init__(self, group, method, payload, replica, expires, tries, into):
        self.group, self.method, self.payload, self.into = group, method, payload, into
        self.replica, self.generation = replica, replica.generation
        self.pid = int(replica.info["pid"])
        self.expires, self.tries = expires, tries
        self.conn = self.error = None


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
        This process's Ray node: processes on it are reached through their Unix socket and
        killed directly (a stopped process does not exit on Ray's polite request), others
        through TCP and Ray.
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
            (
                "calls",
                "requests",
                "retries",
                "failures",
                "bytes_sent",
                "bytes_received",
                "header_bytes",
                "restarts",
                "connections",
            ),
            0,
        )
        self.owner = True  # False for servers another process started (close() leaves them running)
        self.closed = False
        self.pid = os.getpid()  # the process whose connections these are (see call)

    # ------------------------------------------------------------------ the contract
    def call(
        self, requests: Mapping[int, tuple[str, dict]], *, key: int | None = None, into: Mapping | None = None
    ) -> dict[int, dict]:
        """Send every ``{group: (method, payload)}`` request at once; ``{group: answer}``, or
        :class:`~.errors.ServerUnavailable` for the first group no process could answer (a
        server's refusal of a request is raised as its own exception). ``into``: ``{group:
        {name: buffer}}``, where an answer's array of that name, dtype and shape is received
        (the answer then holds that buffer)."""
        if self.closed:
            raise RuntimeError("the transport is closed (cluster.close() was called)")
        if os.getpid() != self.pid:
            # A forked child (a DataLoader's worker) shares the parent's sockets and failure state:
            # its requests interleaved with other processes' frames, hung, crashed, or killed servers
            # it took for hung
            raise RuntimeError(
                f"a cluster's transport is used in process {os.getpid()}, forked from process {self.pid} that made "
                "it: its connections belong to that process; sample and gather there (num_workers=0, or the "
                "loader's thread workers=), or attach to named servers in the child (serve(path, address=...))"
            )
        for group, (_method, payload) in requests.items():
            if not 0 <= group < len(self.replicas):
                raise IndexError(f"group must lie in [0, {len(self.replicas)}), got {group}")
            check_plain(payload, f"the request to group {group}")
        attempts: dict[int, _Attempt] = {}
        into = into or {}
        try:
            for group, (method, payload) in requests.items():
                chosen = self._choose(group, key)
                attempts[group] = self._submit(group, method, payload, chosen, tries=0, into=into.get(group))
            self._count(calls=1, requests=len(attempts), bytes_sent=sum(message_bytes(p) for _, p in requests.values()))
            return self._wait(attempts, key)
        finally:
            for attempt in attempts.values():  # left unanswered (an error): their answers are not wanted
                if attempt.conn is not None:
                    attempt.conn.close()

    def _wait(self, attempts: dict, key) -> dict:
        """Poll every attempt's connection until each group answered or failed for good."""
        answers = {}
        while attempts:
            if all(a.error is None for a in attempts.values()):
                poller, by_fd = select.poll(), {}
                for group, attempt in attempts.items():
                    poller.register(attempt.conn.sock, attempt.conn.events())
                    by_fd[attempt.conn.sock.fileno()] = group
                wait = min(a.expires for a in attempts.values()) - time.monotonic()
                # poll takes a C int of milliseconds: a deadline past 24.8 days waits in pieces
                for fd, _ in poller.poll(min(max(0, math.ceil(wait * 1000)), _POLL_MS)):
                    attempt = attempts[by_fd[fd]]
                    try:
                        frame = attempt.conn.advance()
                    except OSError as error:
                        attempt.error = error
                        continue
                    if frame is not None:
                        self._answered(attempt, frame)
                        answers[attempt.group] = frame.message
                        del attempts[attempt.group]
            now = time.monotonic()
            for group, attempt in list(attempts.items()):
                began = time.monotonic()
                if attempt.error is not None:
                    reason, detail = self._broken(attempt)
                elif now >= attempt.expires:
                    reason, detail = "deadline", f"no answer in {self.deadline:g} s"
                else:
                    continue
                attempt.conn, conn = None, attempt.conn
                if conn is not None:
                    conn.close()
                attempts[group] = self._retry(attempt, reason, detail, key)
                # Time spent here (a probe waits seconds for a restart) is this loop's, not the other
                # servers': nobody read their answers meanwhile, so their deadlines move by it (else
                # a healthy server would be failed, and killed, for the wait on another).
                spent = time.monotonic() - began
                for other, pending in attempts.items():
                    if other != group:
                        pending.expires += spent
        return answers

    def _answered(self, attempt: _Attempt, frame) -> None:
        """Count an answer and keep its connection; raise the server's refusal if it was one."""
        conn, attempt.conn = attempt.conn, None
        attempt.replica.release(conn, keep=not self.closed)
        self._count(header_bytes=frame.header_bytes)
        if frame.error is not None:
            raise remote_error(*frame.error, attempt.group, attempt.pid)
        check_plain(frame.message, f"group {attempt.group}'s answer to {attempt.method!r}")
        self._count(bytes_received=message_bytes(frame.message))

    def _broken(self, attempt: _Attempt) -> tuple:
        """``(reason, detail)`` of a connection that failed: ``"exited"`` when the process (on
        this node) is gone, else ``"connection"``."""
        if self._is_local(attempt.replica):
            limit = time.monotonic() + _DYING
            while True:
                if not alive(attempt.pid):
                    return "exited", f"process {attempt.pid} is gone"
                if time.monotonic() >= limit:
                    break
                time.sleep(0.005)
        error = attempt.error
        return "connection", f"{type(error).__name__}: {error}" if str(error) else type(error).__name__

    def close(self) -> None:
        """Kill every replica process (no restart) and wait until the local ones are gone; only
        forget them when another process started them (:attr:`owner` False)."""
        if self.closed:
            return
        self.closed = True
        for replica in self.all_replicas():
            replica.close_connections()
        if not self.owner:
            return
        ray = import_ray()
        # Ray shut down in this process took the servers with it (a kill would start a new instance)
        for replica in self.all_replicas() if ray.is_initialized() else ():
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
                    wait_gone(pid, limit)

    # ------------------------------------------------------------------ introspection
    def all_replicas(self) -> list:
        return [replica for group in self.replicas for replica in group]

    def __reduce__(self):
        # Its connections, secret and failure state belong to this process: pickle found a lock
        # deep inside and said only "cannot pickle '_thread.lock' object"
        raise TypeError(
            "a cluster's RayTransport (and the cluster's samplers and feature stores over it) cannot be pickled: "
            "its connections belong to this process; in another process, serve(path, address=...) attaches to "
            "servers started with named=True (python -m gglspeedup.service serve), or use threads (loader workers=)"
        )

    def stats(self) -> dict:
        """Counters since construction: ``calls``, ``requests`` (one per group per call),
        ``retries``, ``failures`` (attempts that failed), ``restarts`` (new processes seen),
        ``bytes_sent`` / ``bytes_received`` (message data, :func:`message_bytes`),
        ``header_bytes`` (the frames' headers, both ways) and ``connections`` (channel
        connections opened)."""
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

    def _submit(self, group, method, payload, replica, *, tries, expires=None, into=None) -> _Attempt:
        """Start ``(method, payload)`` on ``replica`` (a connection failing at once is an attempt
        with its error set, handled by the caller's loop)."""
        expires = time.monotonic() + self.deadline if expires is None else expires
        attempt = _Attempt(group, method, payload, replica, expires, tries, into)
        try:
            attempt.conn, new = replica.connection(unix=self._is_local(replica))
            self._count(header_bytes=attempt.conn.request(method, payload, into), connections=int(new))
        except OSError as error:
            attempt.error = error
        return attempt

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
            reason = "died" if replica.state == "dead" else reason  # a probe through Ray found it dead
            raise ServerUnavailable(group, self.group_parts[group], key, reason, detail) from None
        expires = None
        if chosen is replica and replica.info["incarnation"] == incarnation:
            # the same process after a broken connection: still within the request's deadline
            if reason != "connection" or time.monotonic() >= attempt.expires:
                raise ServerUnavailable(group, self.group_parts[group], key, reason, detail)
            expires = attempt.expires
        self._count(retries=1)
        return self._submit(
            group, attempt.method, attempt.payload, chosen, tries=tries, expires=expires, into=attempt.into
        )

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
            if not ray.is_initialized():
                # Ray was shut down in this process (ray.shutdown(), or the close() of a cluster that
                # started it, which stopped these servers too): a call through Ray would start a new
                # local instance, and fail unnamed there
                replica.state = "dead"
                return False
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

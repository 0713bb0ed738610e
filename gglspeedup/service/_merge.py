"""Concurrent batches' hops share requests: one ``"draw"`` request per group for all that wait.

A remote sampler asks every owning group once per hop. Through Ray each request costs both sides
about a millisecond of CPU whatever its size (measured on the 2-core development machine: an
empty call to two servers 1.1 ms in the trainer and 0.8 ms in each server; one with 80k draws
each 2.6 and 1.5 ms, one with 640k draws 5.7 and 4.3 ms), more than drawing and relabelling a
batch's hop. When several threads sample at once (a loader keeping batches in flight, a pool),
:class:`MergedExchange` sends the hops that are waiting together, the way a database commits a
group: a call that finds fewer than :data:`IN_FLIGHT` merged calls under way sends at once, alone
if nothing waits (no delay is ever added); calls arriving meanwhile queue, and the next sender
takes the whole queue. One thread sampling alone sends exactly what it would have sent.

A merged request is a ``"draw"`` request whose listed partitions repeat, one run per batch, with
``part_batch`` naming each listed partition's batch and ``ks`` / ``states`` one row per batch (see
:mod:`gglspeedup.sampling._kernels.remote`): the server draws each batch's targets with its own
fanouts and states, so every batch gets exactly its own answer, a contiguous run of the merged
one. Link batches with exclusions, strict-negative checks and requests of other methods travel
alone.
"""

from __future__ import annotations

import threading

import numpy as np

from .errors import ServerUnavailable

__all__ = ["MergedExchange", "IN_FLIGHT"]

IN_FLIGHT = 2  # merged calls under way at once: the servers draw one while the trainer relabels the other
_FLAGS = ("replace", "weighted", "last")


class _Waiting:
    __slots__ = ("answers", "error", "key", "requests", "taken")

    def __init__(self, requests: dict, key):
        self.requests, self.key = requests, key
        self.taken = False  # a sender has it
        self.answers = self.error = None


class MergedExchange:
    """``exchange(requests, key) -> answers`` over ``transport``, merging concurrent draws."""

    def __init__(self, transport):
        self.transport = transport
        self._ready = threading.Condition()
        self._queue: list[_Waiting] = []
        self._under_way = 0

    def __call__(self, requests: dict, key):
        if not all(method == "draw" and "excl_src" not in payload for method, payload in requests.values()):
            return self.transport.call(requests, key=key)
        waiting = _Waiting(requests, key)
        with self._ready:
            self._queue.append(waiting)
            while waiting.answers is None and waiting.error is None:
                if not waiting.taken and self._under_way < IN_FLIGHT:
                    taken, self._queue = self._queue, []
                    for other in taken:
                        other.taken = True
                    self._under_way += 1
                    self._ready.release()
                    results = None
                    try:
                        results = self._send(taken)
                    finally:
                        self._ready.acquire()
                        self._under_way -= 1
                        if results is None:  # the sender itself failed: no waiter may wait forever
                            results = [(None, RuntimeError("the request these batches shared failed"))] * len(taken)
                        for other, (answers, error) in zip(taken, results):  # under the lock: all at once
                            other.answers, other.error = answers, error
                        self._ready.notify_all()
                else:
                    self._ready.wait()
        if waiting.error is not None:
            raise waiting.error
        return waiting.answers

    def _send(self, taken: list) -> list:
        """Ask every group once for the ``taken`` batches' hops (those with the same flags merged):
        ``(answers, error)`` per batch, a failure naming each batch's own key."""
        results = {}
        for batches in _by_flags(taken):
            try:
                if len(batches) == 1:
                    results[id(batches[0])] = (self.transport.call(batches[0].requests, key=batches[0].key), None)
                    continue
                groups = sorted({g for waiting in batches for g in waiting.requests})
                merged = {g: ("draw", _merged([w.requests[g][1] for w in batches if g in w.requests])) for g in groups}
                answers = self.transport.call(merged, key=batches[0].key)
                own = {id(waiting): {} for waiting in batches}
                for g in groups:
                    asked = [w for w in batches if g in w.requests]
                    for waiting, answer in zip(asked, _split(answers[g], [w.requests[g][1] for w in asked])):
                        own[id(waiting)][g] = answer
                results.update((key, (answer, None)) for key, answer in own.items())
            except ServerUnavailable as error:
                for waiting in batches:
                    named = (error.server, error.parts, waiting.key, error.reason, error.detail)
                    results[id(waiting)] = (None, ServerUnavailable(*named))
            except BaseException as error:  # any other failure reaches every batch it concerned
                results.update((id(waiting), (None, error)) for waiting in batches)
        return [results[id(waiting)] for waiting in taken]


def _by_flags(taken: list) -> list:
    """The taken batches in runs that can share a request (the same draw flags), in order."""
    runs: dict = {}
    for waiting in taken:
        payload = next(iter(waiting.requests.values()))[1]
        runs.setdefault(tuple(bool(payload.get(flag, False)) for flag in _FLAGS), []).append(waiting)
    return list(runs.values())


def _merged(payloads: list) -> dict:
    """One group's ``"draw"`` request for several batches' ``payloads`` (each one batch's)."""
    if len(payloads) == 1:
        return payloads[0]
    merged = {flag: payloads[0][flag] for flag in _FLAGS if flag in payloads[0]}
    sizes = [p["parts"].shape[0] for p in payloads]
    merged["parts"] = np.concatenate([p["parts"] for p in payloads])
    merged["part_batch"] = np.repeat(np.arange(len(payloads), dtype=np.int32), sizes)
    for name in ("rel_counts", "ids", "ks", "states") + (("times",) if "times" in payloads[0] else ()):
        merged[name] = np.concatenate([p[name] for p in payloads])
    return merged


def _split(answer: dict, payloads: list) -> list:
    """Each batch's run of a merged ``answer`` (views, no copy)."""
    if len(payloads) == 1:
        return [answer]
    counts = answer["counts"]
    bounds = np.cumsum([0] + [p["ids"].shape[0] for p in payloads])
    draws = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))[bounds]
    out = []
    for b in range(len(payloads)):
        lo, hi = int(draws[b]), int(draws[b + 1])
        out.append(
            {"counts": counts[bounds[b] : bounds[b + 1]], "nbrs": answer["nbrs"][lo:hi], "e_id": answer["e_id"][lo:hi]}
        )
    return out

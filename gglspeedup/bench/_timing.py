"""How the gather benchmarks time their contenders: interleaved rounds, calls back to back, and
the paired ratio of two contenders' rounds (:mod:`gglspeedup.bench.gather`, ``bench gpu``)."""

from __future__ import annotations

import time

__all__ = ["time_interleaved", "time_back_to_back", "paired_ratio"]


def time_interleaved(contenders: dict, repeats: int, sync=None) -> dict:
    """Per contender, the wall seconds of every round and the CPU seconds of its cheapest call.

    One warm-up call each (compilation, page faults), then rounds interleaved so a burst of load
    hits every contender alike. CPU time (``time.process_time``: all threads of this process)
    tells how much work a call is when the machine is shared and a thread may wait for a core.
    Returns ``{name: (wall seconds per round, min CPU seconds)}``.
    """
    for call in contenders.values():
        call()
    if sync:
        sync()
    wall = {name: [] for name in contenders}
    cpu = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, call in contenders.items():
            cpu_start, start = time.process_time(), time.perf_counter()
            call()
            if sync:
                sync()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - cpu_start)
    return {name: (wall[name], min(cpu[name])) for name in contenders}


def time_back_to_back(contenders: dict, calls: int, repeats: int, sync=None) -> dict:
    """Per contender, the host wall seconds per call of ``calls`` calls made back to back with one
    ``sync`` after the last, in every round: what a caller that does not wait between batches
    sees (the per-call host work overlaps the device's). One warm-up call each, then rounds
    interleaved as :func:`time_interleaved` does. Returns ``{name: [seconds per call, per round]}``.
    """
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    for call in contenders.values():
        call()
    if sync:
        sync()
    wall = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, call in contenders.items():
            start = time.perf_counter()
            for _ in range(calls):
                call()
            if sync:
                sync()
            wall[name].append((time.perf_counter() - start) / calls)
    return wall


def paired_ratio(rounds, reference_rounds) -> float:
    """Median over rounds of ``reference time / time`` taken in the same round: on a noisy machine
    the two calls of one round share its load, so this ratio moves far less than a ratio of bests."""
    import numpy as np

    return float(np.median(np.asarray(reference_rounds) / np.asarray(rounds)))

"""``python -m gglspeedup.bench multi``: multi-process sampling throughput and scaling.

Example (the issue's target: 2 CPU processes, each on 1 core, against 1 process on 1 core)::

    python -m gglspeedup.bench multi --procs 2 --graph powerlaw:500k:16 --fanouts 25,10

One :class:`~gglspeedup.MultiDeviceSampler` over ``--procs`` CPU devices is built in this process
and handed to ``--procs`` spawned worker processes (its graph travels through shared memory).
The workers then run three configurations, each ``--repeats`` times, interleaved so that load on
a shared machine hits them alike; within a configuration every active worker starts at the same
wall-clock instant and samples its own seed batches (rank ``r``: batches of seed ``seed + r``)
for ``--duration`` seconds:

- ``1 proc x 1 thread``: rank 0 alone with one Numba thread (the baseline);
- ``N procs x T threads``: every rank at once, ``T = --threads-per-proc`` (default
  ``cores // N``, at least 1);
- ``1 proc x C threads``: rank 0 alone with every core (what one process gets from threads).

Sampled edges are counted over all hops of a batch. ``speedup`` is the N-process total divided by
the 1-process-1-thread baseline (the issue's target: >= 1.7 for 2 processes on 2 cores);
``efficiency`` is ``speedup / N``; ``vs_threads`` compares the N-process total with one process
using all cores. The median round is reported.

A control runs in the same session: a pure-Python counting loop, first in 1 process, then in N at
once. Its ratio (``control_speedup``) is how much parallel CPU the machine actually gave during
the run (on a machine shared with other jobs it can be far below N), so a low ``speedup`` can be
told apart from a busy machine.
"""

from __future__ import annotations

import os
import time

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from ._options import add_common_arguments

    parser.add_argument("--procs", type=int, default=2, help="worker processes, one CPU 'device' each (default 2)")
    add_common_arguments(parser, graph="powerlaw:500k:16", fanouts="25,10", batch=1024)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per timed round (default 3)")
    add_common_arguments(parser, repeats=(3, "rounds per configuration; median reported (default 3)"))
    parser.add_argument(
        "--threads-per-proc",
        type=int,
        default=None,
        help="Numba threads per process in the N-process run (default cores // procs, >= 1)",
    )
    add_common_arguments(parser, seed=(0, "seed of the batches and of the sampler"))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _worker(rank, sampler, batch, seed, commands, results):
    """Sample rank ``rank``'s batches whenever the parent says so; report edges and seconds."""
    import numba

    from ._common import seed_batches

    try:
        batches = seed_batches(sampler.graph.num_nodes, batch, 64, seed=seed + rank)
        for seeds in batches[:2]:  # warm-up: JIT compile (or load the cache), touch the graph
            sampler.sample(seeds, rank)
        results.put(("ready", rank, None))
        while True:
            command = commands.get()
            if command is None:
                return
            kind, threads, start_at, duration = command
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))  # (no torch import here)
            while time.time() < start_at:
                time.sleep(0.001)
            begin = time.perf_counter()
            edges = done = 0
            while True:
                if kind == "spin":  # the control: pure interpreter work, no memory traffic
                    for _ in range(10_000):
                        edges += 1
                else:
                    _, adjs = sampler.sample(batches[done % len(batches)], rank)
                    edges += sum(int(adj.e_id.shape[0]) for adj in adjs)
                done += 1
                elapsed = time.perf_counter() - begin
                if elapsed >= duration:
                    break
            results.put(("round", rank, (edges, elapsed, done)))
    except BaseException as error:  # report, so the parent fails instead of waiting
        results.put(("error", rank, f"{type(error).__name__}: {error}"))
        raise


def _round(kind, active, threads, duration, command_queues, results, procs):
    start_at = time.time() + 0.3
    for rank in active:
        command_queues[rank].put((kind, threads, start_at, duration))
    per_rank = {}
    while len(per_rank) < len(active):
        kind, rank, payload = _get(results, procs, timeout=duration + 120)
        if kind == "error":
            raise RuntimeError(f"bench worker rank {rank} failed: {payload}")
        edges, elapsed, done = payload
        per_rank[rank] = {"edges_per_s": edges / elapsed, "batches": done, "seconds": elapsed}
    return per_rank


def _get(results, procs, timeout):
    import queue

    deadline = time.monotonic() + timeout
    while True:
        try:
            return results.get(timeout=1.0)
        except queue.Empty:
            dead = [rank for rank, p in enumerate(procs) if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(
                    f"bench worker rank(s) {dead} exited with codes {[procs[r].exitcode for r in dead]}"
                ) from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"bench workers sent nothing for {timeout:.0f} s") from None


def run(args) -> dict:
    """Measure and print the table; return the results as a dict (for ``--json``)."""
    from ..multigpu import MultiDeviceSampler
    from ._common import format_table, load_graph, machine_info, parse_fanouts

    procs = int(args.procs)
    if procs < 1:
        raise ValueError(f"--procs must be >= 1, got {procs}")
    if args.repeats < 1 or args.duration <= 0 or args.batch < 1:
        raise ValueError("--repeats and --batch must be >= 1 and --duration > 0")
    if args.threads_per_proc is not None and args.threads_per_proc < 1:  # 0 read as the default, -1 failed a worker
        raise ValueError(f"--threads-per-proc must be >= 1, got {args.threads_per_proc}")
    cores = _cores()
    per_proc = args.threads_per_proc or max(1, cores // procs)
    fanouts = parse_fanouts(args.fanouts)
    graph, description = load_graph(args.graph)
    sampler = MultiDeviceSampler(graph, ["cpu"] * procs, fanouts, seed=args.seed)
    configs = [
        ("1 proc x 1 thread", "sample", [0], 1),
        (f"{procs} procs x {per_proc} thread{'s' if per_proc > 1 else ''}", "sample", list(range(procs)), per_proc),
        (f"1 proc x {cores} threads", "sample", [0], cores),
        ("control: 1 proc", "spin", [0], 1),
        (f"control: {procs} procs", "spin", list(range(procs)), 1),
    ]
    rounds = _measure(sampler, configs, procs, args)
    rows = [_config_row(name, kind, active, threads, rounds[name]) for name, kind, active, threads in configs]
    baseline, multi, threaded, spin_one, spin_many = (row["total_medges_s"] for row in rows)
    summary = {
        "speedup": multi / baseline,
        "efficiency": multi / baseline / procs,
        "vs_threads": multi / threaded,
        "control_speedup": spin_many / spin_one,
        "definition": (
            f"speedup = total sampled edges/s of {procs} processes x {per_proc} thread(s) (each sampling "
            "its own batches, all at once) / 1 process x 1 thread; efficiency = speedup / procs; "
            f"vs_threads = {procs}-process total / 1 process x {cores} threads; control_speedup = the "
            f"same ratio for a pure-Python counting loop ({procs} processes / 1), i.e. how much parallel "
            "CPU this machine gave us during the run"
        ),
    }
    _print(rows, summary, description, fanouts, args, cores, format_table)
    return {
        "command": "multi",
        "graph": description,
        "fanouts": fanouts,
        "batch": args.batch,
        "duration_s": args.duration,
        "repeats": args.repeats,
        "machine": machine_info(),
        "configs": rows,
        **summary,
    }


def _measure(sampler, configs, procs: int, args) -> dict:
    """Every config's rounds (``args.repeats``, after one untimed round of the sampling ones) from
    ``procs`` spawned workers, which are stopped however this ends."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    command_queues = [ctx.Queue() for _ in range(procs)]
    workers = [
        ctx.Process(target=_worker, args=(r, sampler, args.batch, args.seed, command_queues[r], results), daemon=True)
        for r in range(procs)
    ]
    for worker in workers:
        worker.start()
    rounds = {name: [] for name, _, _, _ in configs}
    try:
        ready = 0
        while ready < procs:
            kind, rank, payload = _get(results, workers, timeout=600)
            if kind == "error":
                raise RuntimeError(f"bench worker rank {rank} failed: {payload}")
            ready += kind == "ready"
        for _name, kind, active, threads in configs[:3]:  # untimed: thread pools start, caches fill
            _round(kind, active, threads, min(0.5, args.duration), command_queues, results, workers)
        for _ in range(args.repeats):
            for name, kind, active, threads in configs:
                rounds[name].append(_round(kind, active, threads, args.duration, command_queues, results, workers))
    finally:
        for queue_ in command_queues:
            queue_.put(None)
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.terminate()
    return rounds


def _config_row(name: str, kind: str, active: list, threads: int, rounds: list) -> dict:
    """One config's row: its median round's total and per-rank rates, and every round's total."""
    totals = [sum(r["edges_per_s"] for r in one.values()) for one in rounds]
    median = sorted(range(len(totals)), key=totals.__getitem__)[len(totals) // 2]
    chosen = rounds[median]
    return {
        "config": name,
        "procs": len(active),
        "threads_per_proc": threads,
        "unit": "M loop iterations/s" if kind == "spin" else "M sampled edges/s",
        "total_medges_s": totals[median] / 1e6,
        "per_rank_medges_s": [round(chosen[r]["edges_per_s"] / 1e6, 3) for r in active],
        "rounds_total_medges_s": [round(t / 1e6, 3) for t in totals],
    }


def _print(rows, summary, description, fanouts, args, cores, format_table) -> None:
    print(
        f"graph {description['spec']}: {description['num_nodes']} nodes, {description['num_edges']} edges; "
        f"fanouts {fanouts}, batch {args.batch}, {args.duration:g} s rounds x {args.repeats} (median); "
        f"{cores} usable cores"
    )
    table_rows = [dict(row, per_rank=", ".join(f"{v:.2f}" for v in row["per_rank_medges_s"])) for row in rows[:3]]
    print(
        format_table(
            table_rows,
            [
                ("config", "configuration", ""),
                ("total_medges_s", "total M edges/s", ".2f"),
                ("per_rank", "per rank M edges/s", ""),
            ],
        )
    )
    print(
        f"speedup {summary['speedup']:.2f}x, efficiency {summary['efficiency']:.0%}, "
        f"vs one process with threads {summary['vs_threads']:.2f}x; control (pure-Python loop, "
        f"{len(rows[4]['per_rank_medges_s'])} procs vs 1) {summary['control_speedup']:.2f}x"
    )
    print(summary["definition"])

"""``python -m gglspeedup.bench service``: batches through partition servers on Ray vs the local sampler.

Example::

    python -m gglspeedup.bench service --graph powerlaw:2000000:32 --servers 1,2,4

The graph is partitioned once (``--method``, into as many parts as the largest server count;
fewer servers serve several parts each) and served by Ray actors on this machine, started in a
private network namespace this process makes (so Ray listens on that namespace's loopback only;
``--address`` joins an existing cluster instead). For each server count, the service's sampler and
the local in-process ``NeighborSampler`` (same graph, fanouts, seed and batches, same machine and
threads) are timed in alternating rounds; the first batches are compared bit for bit first (the
self-check: a difference stops the bench). Reported per count: batches/s of both, the paired ratio
(median over rounds), the CPU time a batch took (median over rounds; the service's summed over the
trainer and every server process on this machine, the local sampler's in this process, each thread's
scheduler time in nanoseconds: on a shared machine the steadier figure), and the bytes the transport
moved per batch (the messages' arrays and the frames' headers, both ways) against the minimum: each
hop's distinct target ids sent once and its drawn edges (neighbour and edge id) received once, at
the partition's id widths (plus each distinct row once with ``--dim``). The same rounds also go
through a :class:`~gglspeedup.NodeLoader` with its default prefetching (one producer thread,
``prefetch=2``: one batch in flight), one over the service's sampler and one over the local
sampler, same settings, seeds and batches (``loader`` columns): what a training loop over the loader
would see when its own step takes no time; and again with two producer threads (``workers=2``: two
batches in flight, both loaders; ``loader x2`` columns), as a user of a remote sampler would run it
to keep the servers busy while the trainer relabels. ``best / best`` pairs each side's faster
loader setting round by round (two workers can slow the local loader, which would flatter the
``loader x2`` ratio).

Failure timings (``--failures``, two servers, ``--deadline``): the time from a SIGKILL to the
named error (no restarts), from a SIGSTOP (once every thread of the server has stopped) to the
named error, and the stall of the batch that
meets a killed server with ``max_restarts=1`` (detection, restart, map, warm-up, retry), whose
batch is checked against the local one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from ._options import SAMPLING, add_common_arguments

    add_common_arguments(parser, *SAMPLING, batches=(20, "timed batches per round (default 20)"))
    parser.add_argument("--servers", default="1,2,4", help="server counts, comma-separated (default 1,2,4)")
    parser.add_argument("--method", default="range", help="partitioning: range or metis (default range)")
    parser.add_argument("--dim", type=int, default=0, help="float32 feature width gathered per batch (default 0: none)")
    parser.add_argument("--deadline", default="2s", help="the servers' deadline (default 2s)")
    parser.add_argument("--failures", type=int, default=1, help="measure the failure timings (1) or not (0)")
    parser.add_argument("--address", default=None, help="an existing Ray cluster to use (default: a local one)")
    add_common_arguments(parser, "seed", "threads")


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in str(text).split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--servers must list server counts, e.g. 1,2,4, got {text!r}") from None
    if not counts or min(counts) < 1:
        raise ValueError(f"--servers must list server counts >= 1, got {text!r}")
    return sorted(set(counts))


@contextlib.contextmanager
def ray_here(address):
    """Ray for the bench: this process's connection, ``address``'s cluster, or a local instance in a
    private network namespace (stopped, and the namespace left, on exit)."""
    from ..service.cluster import ray_connection

    try:
        with ray_connection(address, private_network=True):
            yield
    except PermissionError as error:
        raise RuntimeError(f"bench service starts Ray in a private network namespace: {error}") from None


def _minimum(out, id_bytes: int, edge_id_bytes: int, row_bytes: int) -> int:
    """The bytes a batch must move: each hop's targets once (ids out), its edges once (neighbour and
    edge id back), each distinct row once."""
    total = sum(adj.size[1] * id_bytes + adj.e_id.shape[0] * (id_bytes + edge_id_bytes) for adj in out.adjs)
    return total + out.n_id.shape[0] * row_bytes


def _pass(sampler, store, batches, pids=()) -> tuple:
    """``(seconds, CPU seconds of pids)`` of one round."""
    cpu = _cpu_times(pids)
    start = time.perf_counter()
    for key, seeds in enumerate(batches):
        n_id = sampler.sample(seeds, key=key).n_id
        if store is not None:
            store[n_id]
    return time.perf_counter() - start, _cpu_used(cpu, _cpu_times(pids))


def _loader_pass(sampler, features, timed, workers: int = 1) -> float:
    """Seconds of one epoch over the ``timed`` batches through a NodeLoader with its default
    prefetching (no shuffling, NumPy batches): the loader's ``workers`` threads sample and gather
    ahead."""
    import numpy as np

    from ..loader import NodeLoader

    seeds = np.concatenate(timed)
    loader = NodeLoader(sampler, features, seeds, len(timed[0]), shuffle=False, backend=None, workers=workers)
    start = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - start


def _cpu_times(pids) -> dict:
    """CPU seconds each thread of the processes ``pids`` has used so far, keyed by ``(pid, tid)``:
    the scheduler's nanosecond count (``/proc/<pid>/task/<tid>/schedstat``; a round's CPU is a
    few milliseconds a batch, below the 10 ms clock ticks of ``/proc/<pid>/stat``), or where the
    kernel keeps none, the process's user and system ticks (key ``(pid, None)``)."""
    times = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                    times[pid, tid] = int(stat.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                times = {key: value for key, value in times.items() if key[0] != pid}
                times[pid, None] = _ticks(pid)
                break
    return times


def _ticks(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` (every thread, exited ones included)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_used(before: dict, after: dict) -> float:
    """CPU seconds used between two :func:`_cpu_times` readings (threads started meanwhile count
    whole; a thread that ended meanwhile loses its share of the round)."""
    return sum(seconds - before.get(key, 0.0) for key, seconds in after.items())


def _local_pids(cluster) -> list:
    """This process and every server process on this machine (all of them without ``--address``)."""
    return [os.getpid()] + [s.pid for s in cluster.servers if os.path.exists(f"/proc/{s.pid}/stat")]


def _self_check(remote, local, store, x, batches) -> None:
    import numpy as np

    from ..testing import assert_same_sample

    for key, seeds in enumerate(batches[:2]):
        out = remote.sample(seeds, key=key)
        try:
            assert_same_sample(out, local.sample(seeds, key=key))
        except AssertionError as error:
            raise RuntimeError(
                f"self-check: batch {key} through the servers differs from the local one: {error}"
            ) from None
        if store is not None and not np.array_equal(store[out.n_id], x[out.n_id]):
            raise RuntimeError(f"self-check: batch {key}'s feature rows differ from x[n_id]")


def _measure(cluster, local, x, batches, args) -> dict:
    import numpy as np

    from ..feature import FeatureStore

    remote = cluster.sampler(local.fanouts, seed=args.seed)
    store = cluster.features() if x is not None else None
    local_store = None if x is None else FeatureStore(x)
    _self_check(remote, local, store, x, batches)
    warm, timed = batches[: args.warmup], batches[args.warmup :]
    _pass(remote, store, warm)
    _pass(local, local_store, warm)
    seconds, cpu = {"service": [], "local": []}, {"service": [], "local": []}
    looped = {"service": [], "local": [], "service_x2": [], "local_x2": []}
    pids = _local_pids(cluster) if args.address is None else [os.getpid()]
    # The loaders' rows: the stores, or zero-wide rows when no features are gathered.
    rows = {"service": store, "local": local_store}
    if x is None:
        rows = dict.fromkeys(rows, np.zeros((local.num_nodes, 0), np.float32))
    for _ in range(args.repeats):
        cluster.transport.reset_stats()
        wall, used = _pass(remote, store, timed, pids)
        seconds["service"].append(wall)
        cpu["service"].append(used)
        moved = cluster.stats()
        wall, used = _pass(local, local_store, timed, [os.getpid()])
        seconds["local"].append(wall)
        cpu["local"].append(used)
        looped["service"].append(_loader_pass(remote, rows["service"], timed))
        looped["local"].append(_loader_pass(local, rows["local"], timed))
        looped["service_x2"].append(_loader_pass(remote, rows["service"], timed, workers=2))
        looped["local_x2"].append(_loader_pass(local, rows["local"], timed, workers=2))
    book = cluster.book
    id_bytes = np.dtype(book.meta["index_dtype"]).itemsize
    edge_id_bytes = np.dtype(book.meta["edge_id_dtype"]).itemsize
    row_bytes = 0 if x is None else x.shape[1] * x.itemsize
    minimum = sum(_minimum(local.sample(s, key=k), id_bytes, edge_id_bytes, row_bytes) for k, s in enumerate(timed))
    service, local_s = np.array(seconds["service"]), np.array(seconds["local"])
    loader_service, loader_local = np.array(looped["service"]), np.array(looped["local"])
    loader2_service, loader2_local = np.array(looped["service_x2"]), np.array(looped["local_x2"])
    moved_bytes = moved["bytes_sent"] + moved["bytes_received"] + moved.get("header_bytes", 0)
    return {
        "servers": cluster.num_servers,
        "service_batches_per_s": len(timed) / float(np.median(service)),
        "local_batches_per_s": len(timed) / float(np.median(local_s)),
        "ratio": float(np.median(local_s / service)),
        "bytes_per_batch": moved_bytes / len(timed),
        "minimum_per_batch": minimum / len(timed),
        "bytes_vs_minimum": moved_bytes / max(minimum, 1),
        "calls_per_batch": moved["calls"] / len(timed),
        "service_cpu_ms": 1e3 * float(np.median(cpu["service"])) / len(timed),
        "local_cpu_ms": 1e3 * float(np.median(cpu["local"])) / len(timed),
        "service_processes": len(pids),
        "loader_service_batches_per_s": len(timed) / float(np.median(loader_service)),
        "loader_local_batches_per_s": len(timed) / float(np.median(loader_local)),
        "loader_ratio": float(np.median(loader_local / loader_service)),
        "loader2_service_batches_per_s": len(timed) / float(np.median(loader2_service)),
        "loader2_local_batches_per_s": len(timed) / float(np.median(loader2_local)),
        "loader2_ratio": float(np.median(loader2_local / loader2_service)),
        # each side at its best setting, round by round: two workers may slow the local loader
        # (its producers' parallel regions take the kernel lock in turn), flattering loader2_ratio
        "loader_best_ratio": float(
            np.median(np.minimum(loader_local, loader2_local) / np.minimum(loader_service, loader2_service))
        ),
    }


def _failures(folder, local, batches, args) -> dict:
    """Seconds from a kill / a stop to the named error, and the stall of a restarted server."""
    from ..service import ServerUnavailable, serve
    from ..testing import assert_same_sample
    from ..testing.service import stop_process

    def timed_error(sig) -> float:
        with serve(folder, 2, max_restarts=0, deadline=args.deadline) as cluster:
            sampler = cluster.sampler(local.fanouts, seed=args.seed)
            sampler.sample(batches[0], key=0)
            pid = cluster.servers[1].pid
            if sig == signal.SIGSTOP:
                # Only once every thread has stopped: until the thread woken for the signal runs
                # (milliseconds on a loaded machine) the server's channel may answer the batch.
                stop_process(pid)
            else:
                os.kill(pid, sig)
            start = time.perf_counter()
            try:
                sampler.sample(batches[1], key=1)
            except ServerUnavailable:
                return time.perf_counter() - start
            finally:
                if sig == signal.SIGSTOP:
                    os.kill(pid, signal.SIGCONT)
            raise RuntimeError("a stopped or killed server was not named")

    results = {"kill_named_s": timed_error(signal.SIGKILL), "stop_named_s": timed_error(signal.SIGSTOP)}
    with serve(folder, 2, max_restarts=1, deadline=args.deadline) as cluster:
        sampler = cluster.sampler(local.fanouts, seed=args.seed)
        start = time.perf_counter()
        for key in range(3):
            sampler.sample(batches[key], key=key)
        normal = (time.perf_counter() - start) / 3
        os.kill(cluster.servers[1].pid, signal.SIGKILL)
        start = time.perf_counter()
        out = sampler.sample(batches[3], key=3)
        results["restart_stall_s"] = time.perf_counter() - start - normal
        assert_same_sample(out, local.sample(batches[3], key=3))
    results["deadline_s"] = cluster.deadline
    return results


_COLUMNS = [
    ("servers", "servers", "d"),
    ("service_batches_per_s", "service batches/s", ".1f"),
    ("local_batches_per_s", "local batches/s", ".1f"),
    ("ratio", "service / local", ".2f"),
    ("service_cpu_ms", "service CPU ms", ".2f"),
    ("local_cpu_ms", "local CPU ms", ".2f"),
    ("loader_service_batches_per_s", "loader: service", ".1f"),
    ("loader_local_batches_per_s", "local", ".1f"),
    ("loader_ratio", "service / local", ".2f"),
    ("loader2_service_batches_per_s", "loader x2: service", ".1f"),
    ("loader2_local_batches_per_s", "local", ".1f"),
    ("loader2_ratio", "service / local", ".2f"),
    ("loader_best_ratio", "best / best", ".2f"),
    ("bytes_per_batch", "bytes/batch", ",.0f"),
    ("minimum_per_batch", "minimum", ",.0f"),
    ("bytes_vs_minimum", "x minimum", ".3f"),
]


def run(args) -> dict:
    import numpy as np

    from .. import __version__
    from ..sampling import NeighborSampler
    from ..service import partition, serve
    from ..validation import check_seconds, parse_fanouts
    from ._common import format_table, load_graph, machine_info, seed_batches, set_threads
    from ._options import check_timing_args

    check_timing_args(args)
    counts = _counts(args.servers)
    if args.method not in ("range", "metis"):
        raise ValueError(f"--method must be range or metis, got {args.method!r}")
    if args.dim < 0:
        raise ValueError(f"--dim must be >= 0, got {args.dim}")
    check_seconds("--deadline", args.deadline)  # serve() read it only after the graph's build and partition
    if args.failures not in (0, 1):  # 2 measured them as 1 did
        raise ValueError(f"--failures must be 0 or 1, got {args.failures}")
    fanouts = parse_fanouts(args.fanouts)
    set_threads(args.threads)
    graph, description = load_graph(args.graph)
    if max(counts) > graph.num_nodes:
        raise ValueError(f"--servers asks for {max(counts)} servers of a {graph.num_nodes}-node graph")
    x = None
    if args.dim:
        x = np.random.default_rng(args.seed).random((graph.num_nodes, args.dim), dtype=np.float32)
    batches = seed_batches(graph.num_nodes, args.batch, args.warmup + args.batches, args.seed)
    local = NeighborSampler(graph, fanouts, seed=args.seed)
    rows, failures = [], None
    with tempfile.TemporaryDirectory(prefix="gglspeedup-bench-service-") as tmp:
        folder = os.path.join(tmp, "parts")
        start = time.perf_counter()
        partition(graph, folder, max(counts), features=x, method=args.method, memory="1G")
        partition_s = time.perf_counter() - start
        with ray_here(args.address):
            for count in counts:
                start = time.perf_counter()
                with serve(folder, count, deadline=args.deadline) as cluster:
                    row = {"start_s": time.perf_counter() - start}
                    row.update(_measure(cluster, local, x, batches, args))
                rows.append(row)
            if args.failures and max(counts) >= 2 and args.address is None:
                failures = _failures(folder, local, batches, args)
    results = {
        "command": "service",
        "graph": description,
        "fanouts": fanouts,
        "batch": args.batch,
        "batches": args.batches,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "method": args.method,
        "dim": args.dim,
        "partition_s": partition_s,
        "version": __version__,
        "machine": machine_info(),
        "rows": rows,
        "failures": failures,
    }
    print(
        f"service vs local sampler, {description['num_nodes']:,} nodes / {description['num_edges']:,} edges, "
        f"{args.method} parts ({partition_s:.1f} s), fanouts {fanouts}, batch {args.batch}, "
        f"{args.batches} batches x {args.repeats} rounds, features {args.dim or 'none'}; self-check passed"
    )
    print(format_table(rows, _COLUMNS))
    if failures:
        print(
            f"failures (deadline {failures['deadline_s']:g} s): kill named in {failures['kill_named_s']:.2f} s, "
            f"stop named in {failures['stop_named_s']:.2f} s, restart stall {failures['restart_stall_s']:.2f} s"
        )
    return results

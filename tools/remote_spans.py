"""Where a remote batch's CPU goes, piece by piece, against the local sampler.

    NUMBA_NUM_THREADS=1 python tools/remote_spans.py [--graph powerlaw:2000000:32] [--batches 40]
    python tools/remote_spans.py --ray [--batches 100]

Partitions the graph into 2 range parts in a temporary folder and times [15, 10] batches of 1024
seeds with the calling thread's CPU clock.

In one process (the default): serves the parts from this process (``LocalTransport`` over two
``PartServer`` s: no channel, no Ray, so the figures are the sampling side's own) and reports the
remote sampler's whole batch, its trainer-side kernels (dedup, route, gather into target order,
relabel) and its servers' draws (``OwnedRows.draw`` and the draw kernel inside it), then the local
``NeighborSampler`` on the same batches. Run with one Numba thread so every kernel's CPU is this
thread's.

``--ray``: serves the parts from two Ray actors (a local Ray instance in a private network
namespace, as ``bench service`` starts it) and reports, per batch, the trainer's sampling thread (on
one Numba thread) piece by piece: its kernels, the transport's call (sending: ``Connection.request``;
receiving: ``_wait``, the frames read, the copy out of the shared memory), and the CPU of every
process (each thread's scheduler time), the trainer's and each server's.

``--ray --threads``: also every thread of the trainer and of each server, per batch: CPU and
run-queue wait (ms, ``/proc/<pid>/task/<tid>/schedstat``), time slices, minor page faults and
voluntary / involuntary context switches (``stat`` and ``status``), the busiest threads first.
``--trainer-threads N`` runs the trainer on N Numba threads (default 1, so that the pieces
above are the sampling thread's; the node's cores show what a user's trainer spends, its TBB worker
included). ``--inflight K`` samples from K threads at once (a loader's producers; the batches
dealt round robin), the pieces then summed over them.
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import time


def _timer(spans):
    def timed(owner, name, label):
        function = getattr(owner, name)

        def wrapper(*a, **k):
            start = time.thread_time()
            try:
                return function(*a, **k)
            finally:
                spans[label] += time.thread_time() - start

        setattr(owner, name, wrapper)

    return timed


def in_process(graph, folder, book, batches, count: int) -> dict:
    import gglspeedup as gg
    from gglspeedup.sampling import remote as owner_side
    from gglspeedup.sampling._kernels import remote as trainer_side
    from gglspeedup.service import LocalTransport, PartServer, RemoteSampler

    spans = collections.defaultdict(float)
    timed = _timer(spans)
    transport = LocalTransport([PartServer(folder, [0]), PartServer(folder, [1])], [(0,), (1,)])
    remote, local = RemoteSampler(transport, book, [15, 10]), gg.NeighborSampler(graph, [15, 10])
    for key, seeds in enumerate(batches[:5]):  # compile / load the kernels, fill the pools
        remote.sample(seeds, key=key)
        local.sample(seeds, key=key)
    for name in ("dedup_mapped", "route", "gather", "relabel_shared"):
        timed(trainer_side, name, f"trainer {name}")
    timed(owner_side.OwnedRows, "draw", "servers OwnedRows.draw")
    timed(owner_side, "draw_owned_rows", "servers draw kernel")
    totals = {}
    for name, sampler in (("remote batch", remote), ("local batch", local)):
        start = time.thread_time()
        for key, seeds in enumerate(batches[5:]):
            sampler.sample(seeds, key=key)
        totals[name] = time.thread_time() - start
    return {**totals, **spans}


_COUNTERS = ("CPU ms", "wait ms", "slices", "minor faults", "voluntary", "involuntary")


def thread_counters(pid: int) -> dict:
    """``{tid: (name, CPU ms, wait ms, slices, minor faults, voluntary, involuntary switches)}``
    of every thread of process ``pid`` now (threads that end while read are left out)."""
    counters = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return counters
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/stat") as stat:
                text = stat.read()
            with open(f"{base}/schedstat") as sched:
                run, wait, slices = (int(value) for value in sched.read().split()[:3])
            with open(f"{base}/status") as status:
                switches = dict(line.split(":", 1) for line in status if "ctxt_switches:" in line)
        except (OSError, ValueError):
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        minor = int(text.rsplit(")", 1)[1].split()[7])
        voluntary, involuntary = (int(switches[f"{kind}_ctxt_switches"]) for kind in ("voluntary", "nonvoluntary"))
        counters[int(tid)] = (name, run / 1e6, wait / 1e6, slices, minor, voluntary, involuntary)
    return counters


def print_thread_counters(label: str, before: dict, after: dict, count: int) -> None:
    """Each thread's counters per batch between two :func:`thread_counters` readings (threads
    using under 1 us of CPU a batch left out), the busiest first, and the process's sum."""
    rows, total = [], [0.0] * len(_COUNTERS)
    for tid, (name, *now) in after.items():
        then = before.get(tid, (name,) + (0,) * len(_COUNTERS))[1:]
        per_batch = [(a - b) / count for a, b in zip(now, then)]
        total = [t + x for t, x in zip(total, per_batch)]
        if per_batch[0] >= 1e-3:
            rows.append((per_batch, tid, name))
    print(f"{label} (per batch): " + ", ".join(_COUNTERS))
    for per_batch, tid, name in sorted(rows, reverse=True):
        print(f"  {tid:>8} {name[:22]:22s}" + "".join(f"{x:9.3f}" for x in per_batch))
    print(f"  {'all':>8} {'':22s}" + "".join(f"{x:9.3f}" for x in total))


def through_ray(
    folder, batches, count: int, threads: bool = False, trainer_threads: int = 1, inflight: int = 1
) -> dict:
    import threading

    import numba

    from gglspeedup.bench.service import _cpu_times, _cpu_used, ray_here
    from gglspeedup.sampling._kernels import remote as trainer_side
    from gglspeedup.service import _channel, _wire, serve

    spans = collections.defaultdict(float)
    timed = _timer(spans)
    with ray_here(None), serve(folder, 2) as cluster:
        remote = cluster.sampler([15, 10])
        numba.set_num_threads(trainer_threads)
        for key, seeds in enumerate(batches[:5]):
            remote.sample(seeds, key=key)
        for name in ("dedup_mapped", "route", "gather", "relabel_shared"):
            timed(trainer_side, name, f"trainer {name}")
        for name in ("call", "_wait"):
            timed(type(cluster.transport), name, f"transport {name}")
        timed(_channel.Connection, "request", "transport sending (Connection.request)")
        timed(_wire.FrameReader, "_next", "transport frames read (FrameReader._next)")
        timed(_wire.FrameReader, "_copy_shared", "transport copy out of shared memory")
        pids = [os.getpid()] + [server.pid for server in cluster.servers]
        before = {pid: _cpu_times([pid]) for pid in pids}
        per_thread = {pid: thread_counters(pid) for pid in pids} if threads else {}
        used = [0.0] * inflight
        done, release = threading.Barrier(inflight + 1), threading.Event()

        def produce(worker: int) -> None:
            start = time.thread_time()
            for key in range(5 + worker, len(batches), inflight):
                remote.sample(batches[key], key=key)
            used[worker] = time.thread_time() - start
            done.wait()
            release.wait()  # alive until every counter is read (a thread that ended is not listed)

        workers = [threading.Thread(target=produce, args=(w,)) for w in range(inflight)]
        wall = time.perf_counter()
        for worker in workers:
            worker.start()
        done.wait()
        wall = time.perf_counter() - wall
        print(f"{count / wall:.1f} batches/s, {inflight} in flight (a thread each)")
        totals = {"trainer sampling threads": sum(used)}
        for i, pid in enumerate(per_thread):
            label = "trainer" if i == 0 else f"server {i - 1}"
            print_thread_counters(f"{label}, pid {pid}", per_thread[pid], thread_counters(pid), count)
        for i, pid in enumerate(pids):
            spent = _cpu_used(before[pid], _cpu_times([pid]))
            totals["process: trainer" if i == 0 else f"process: server {i - 1}"] = spent
        release.set()
        for worker in workers:
            worker.join()
    return {**totals, **spans}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graph", default="powerlaw:2000000:32")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--ray", action="store_true", help="serve the parts from two Ray actors (see the notes)")
    parser.add_argument("--threads", action="store_true", help="with --ray: every thread's counters (see the notes)")
    parser.add_argument("--trainer-threads", type=int, default=1, help="with --ray: the trainer's Numba threads")
    parser.add_argument("--inflight", type=int, default=1, help="with --ray: batches sampled at once, a thread each")
    args = parser.parse_args(argv)

    from gglspeedup.bench._common import load_graph, seed_batches
    from gglspeedup.service import partition

    graph, _ = load_graph(args.graph)
    scratch = tempfile.TemporaryDirectory(prefix="remote-spans-")  # removed when the run ends
    folder = os.path.join(scratch.name, "parts")
    book = partition(graph, folder, 2, method="range", memory="1G")
    batches = seed_batches(graph.num_nodes, 1024, 5 + args.batches, 0)
    if args.ray:
        figures = through_ray(folder, batches, args.batches, args.threads, args.trainer_threads, args.inflight)
    else:
        figures = in_process(graph, folder, book, batches, args.batches)
    for name, seconds in figures.items():
        print(f"{name:44s} {1e3 * seconds / args.batches:7.3f} ms a batch")


if __name__ == "__main__":
    main()

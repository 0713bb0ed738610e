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
namespace, as ``bench service`` starts it) and reports, per batch, the trainer's main thread (on
one Numba thread) piece by piece: its kernels, the transport's call (sending: ``Connection.request``;
receiving: ``_wait``, the frames read, the copy out of the shared memory), and the CPU of every
process (each thread's scheduler time), the trainer's and each server's.
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


def through_ray(folder, batches, count: int) -> dict:
    import numba

    from gglspeedup.bench.service import _cpu_times, _cpu_used, ray_here
    from gglspeedup.sampling._kernels import remote as trainer_side
    from gglspeedup.service import _channel, _wire, serve

    spans = collections.defaultdict(float)
    timed = _timer(spans)
    with ray_here(None), serve(folder, 2) as cluster:
        remote = cluster.sampler([15, 10])
        numba.set_num_threads(1)
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
        start = time.thread_time()
        for key, seeds in enumerate(batches[5:]):
            remote.sample(seeds, key=key)
        totals = {"trainer main thread": time.thread_time() - start}
        for i, pid in enumerate(pids):
            used = _cpu_used(before[pid], _cpu_times([pid]))
            totals["process: trainer" if i == 0 else f"process: server {i - 1}"] = used
    return {**totals, **spans}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graph", default="powerlaw:2000000:32")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--ray", action="store_true", help="serve the parts from two Ray actors (see the notes)")
    args = parser.parse_args(argv)

    from gglspeedup.bench._common import load_graph, seed_batches
    from gglspeedup.service import partition

    graph, _ = load_graph(args.graph)
    scratch = tempfile.TemporaryDirectory(prefix="remote-spans-")  # removed when the run ends
    folder = os.path.join(scratch.name, "parts")
    book = partition(graph, folder, 2, method="range", memory="1G")
    batches = seed_batches(graph.num_nodes, 1024, 5 + args.batches, 0)
    if args.ray:
        figures = through_ray(folder, batches, args.batches)
    else:
        figures = in_process(graph, folder, book, batches, args.batches)
    for name, seconds in figures.items():
        print(f"{name:44s} {1e3 * seconds / args.batches:7.3f} ms a batch")


if __name__ == "__main__":
    main()

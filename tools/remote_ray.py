"""Remote sampling through Ray actors against the local sampler, in one run: batches/s and bytes.

    unshare -n bash -c 'ip link set lo up && python tools/remote_ray.py [--nodes 1000000]
        [--servers 2] [--fanouts 15,10] [--batch 1024] [--batches 30] [--rounds 5] [--inflight 1,2]'

Partitions a papers-like graph (``range``, one part per server) into a temporary folder, serves it
with ``gglspeedup.service.serve`` (one Ray actor per server, a local Ray instance) and draws the
same batches (same keys) with ``cluster.sampler(fanouts)`` and with ``NeighborSampler`` over the
unpartitioned graph, rounds alternating; checks that every remote batch equals the local one.
``--inflight K`` keeps K remote batches in flight from K threads (their hops share requests:
``gglspeedup.service._merge``); the local sampler runs one batch at a time on every core, as in
training. Printed per setting: the median round's batches/s of each, their ratio, and how many
batches a request carried; once, bytes per batch through the transport against the minimum (4 B
per distinct target id asked, 8 B per drawn edge: its int32 neighbour and edge id, and one count
byte per target).

Also printed per setting: the CPU time (``/proc``) of the trainer process and of each server
process per remote batch. ``--calls`` only measures what one call to two servers costs with
answers of a hop's size (no partition, no sampling): the same two server actors asked through the
service's channel (the transport) and through Ray itself, rounds alternating.

Needs Ray; runs only inside a private network namespace (it refuses when it sees an interface
other than ``lo``).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tools/remote_inprocess.py, also when loaded by path
from remote_inprocess import bytes_per_batch  # the same count of bytes


def _only_loopback() -> bool:
    import socket

    return {name for _, name in socket.if_nameindex()} <= {"lo"}  # this namespace's (not /sys's)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000000)
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--fanouts", default="15,10")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inflight", default="1,4,8,16")
    parser.add_argument("--method", default="range", choices=["range", "metis"])
    parser.add_argument("--calls", action="store_true", help="only measure what a Ray call costs (see _calls)")
    args = parser.parse_args(argv)
    if not _only_loopback():
        sys.exit("run inside a private network namespace: unshare -n bash -c 'ip link set lo up && python ...'")
    if args.calls:
        return _calls()

    import gglspeedup as gg
    from gglspeedup.datasets.papers_like import load_papers_like
    from gglspeedup.service import partition, serve

    fanouts = [int(k) for k in args.fanouts.split(",")]
    graph, _ = load_papers_like(args.nodes)
    scratch = tempfile.TemporaryDirectory(prefix="remote-ray-")  # removed when the run ends
    folder = os.path.join(scratch.name, "parts")
    partition(graph, folder, args.servers, method=args.method)
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, graph.num_nodes, args.batch) for _ in range(args.batches)]
    local = gg.NeighborSampler(graph, fanouts)
    with serve(folder, args.servers, verify=False) as cluster:
        remote = cluster.sampler(fanouts)
        transport = cluster.transport
        for key, seeds in enumerate(batches):  # warm both, and check every batch once
            _same(remote.sample(seeds, key=key), local.sample(seeds, key=key))
        sent = bytes_per_batch(transport, remote, batches)
        print(
            f"graph papers-like:{args.nodes} ({graph.num_edges} edges), {args.servers} servers ({args.method}), "
            f"fanouts {fanouts}, batch {args.batch}: {args.batches} batches x {args.rounds} rounds"
        )
        print(f"bytes per batch {sent[0]:,.0f}, minimum {sent[1]:,.0f}, x {sent[0] / sent[1]:.3f}")
        processes = [os.getpid()] + [server.pid for server in cluster.servers]
        for inflight in [int(k) for k in args.inflight.split(",")]:
            rates = {"local": [], "remote": []}
            shared, cpu = _count_batches(transport), np.zeros(len(processes))
            with ThreadPoolExecutor(inflight) as pool:
                for _ in range(args.rounds):
                    rates["local"].append(_rate(lambda b, k: local.sample(b, key=k), batches, None, 1))
                    before = _cpu_seconds(processes)
                    rates["remote"].append(_rate(lambda b, k: remote.sample(b, key=k), batches, pool, inflight))
                    cpu += _cpu_seconds(processes) - before
            del transport.call
            cpu *= 1e3 / (args.rounds * len(batches))
            ratios = [r / q for r, q in zip(rates["remote"], rates["local"])]
            print(
                f"in flight {inflight}: local {statistics.median(rates['local']):.1f} batches/s "
                f"({min(rates['local']):.1f}-{max(rates['local']):.1f}), remote "
                f"{statistics.median(rates['remote']):.1f} ({min(rates['remote']):.1f}-{max(rates['remote']):.1f}), "
                f"ratio median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}); "
                f"batches per request {sum(shared) / max(len(shared), 1):.2f}; CPU ms per remote batch: trainer "
                f"{cpu[0]:.2f}, servers {', '.join(f'{c:.2f}' for c in cpu[1:])}"
            )


def _cpu_seconds(pids) -> np.ndarray:
    """User + system CPU seconds of each process so far (``/proc``), threads included."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = []
    for pid in pids:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        out.append((int(fields[11]) + int(fields[12])) / ticks)
    return np.array(out)


def _calls() -> None:
    """What one call to two servers costs with answers of a hop's size: an empty answer, and
    ``counts`` / ``nbrs`` / ``e_id`` of 80k and 640k draws (a batch's hop 2 on one of two servers,
    and eight such merged), each server answering from memory (``EchoServer``'s ``"draws"``),
    through the channel (``transport.call``) and through Ray (the actor's ``handle``); wall time
    and CPU per call, the median of 5 alternating rounds."""
    import ray

    from gglspeedup.service._actors import connect, start_servers
    from gglspeedup.testing.service import ECHO_SERVER

    connect(None)
    options = [{"factor": 1, "parts": [0]}, {"factor": 1, "parts": [1]}]
    transport = start_servers(ECHO_SERVER, options, [(0,), (1,)], deadline=60.0)
    handles = [group[0].handle for group in transport.replicas]
    pids = [os.getpid()] + [group[0].info["pid"] for group in transport.replicas]

    def channel(payload):
        transport.call({0: ("draws", payload), 1: ("draws", payload)})

    def through_ray(payload):
        ray.get([handle.handle.remote("draws", payload) for handle in handles])

    for draws, reps in ((0, 300), (80_000, 100), (640_000, 30)):
        payload = {"draws": draws}
        results = {"channel": [], "ray": []}
        for _ in range(5):
            for name, call in (("channel", channel), ("ray", through_ray)):
                call(payload)
                before, start = _cpu_seconds(pids), time.perf_counter()
                for _ in range(reps):
                    call(payload)
                wall = (time.perf_counter() - start) / reps * 1e3
                results[name].append([wall, *((_cpu_seconds(pids) - before) / reps * 1e3)])
        for name, rows in results.items():
            wall, caller, first, second = np.median(np.array(rows), axis=0)
            print(
                f"{draws} draws from each of 2 servers, {name}: {wall:.3f} ms a call; CPU ms: caller {caller:.3f}, "
                f"servers {first:.3f}, {second:.3f}"
            )
    transport.close()
    ray.shutdown()


def _rate(sample, batches, pool, inflight: int) -> float:
    start = time.perf_counter()
    if inflight == 1:
        for key, seeds in enumerate(batches):
            sample(seeds, key)
    else:
        # Each batch dropped once done, as training drops it: a list of the round's batches kept
        # every output alive, so each batch's arrays took fresh pages (about 700 minor faults a
        # batch, 0.9 ms of the trainer's CPU that in flight 1 never paid).
        collections.deque(pool.map(sample, batches, range(len(batches))), maxlen=0)
    return len(batches) / (time.perf_counter() - start)


def _count_batches(transport) -> list:
    """Wrap ``transport.call`` to record how many batches each call carries (merged requests)."""
    real, shared = transport.call, []

    def call(requests, **options):
        shared.append(max(len(set(p["part_batch"].tolist())) if "part_batch" in p else 1 for _, p in requests.values()))
        return real(requests, **options)

    transport.call = call
    return shared


def _same(a, b) -> None:
    same = np.array_equal(a.n_id, b.n_id) and all(
        np.array_equal(x.edge_index, y.edge_index) and np.array_equal(x.e_id, y.e_id) for x, y in zip(a.adjs, b.adjs)
    )
    if not same:
        raise AssertionError("a remote batch differs from the local sampler's")


if __name__ == "__main__":
    main()

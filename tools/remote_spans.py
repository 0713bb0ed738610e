"""Where a remote batch's CPU goes, piece by piece, against the local sampler (one process).

    NUMBA_NUM_THREADS=1 python tools/remote_spans.py [--graph powerlaw:2000000:32] [--batches 40]

Partitions the graph into 2 range parts in a temporary folder, serves them from this process
(``LocalTransport`` over two ``PartServer`` s: no channel, no Ray, so the figures are the sampling
side's own), and times [15, 10] batches of 1024 seeds with this thread's CPU clock: the remote
sampler's whole batch, its trainer-side kernels (dedup, route, gather into target order, relabel)
and its servers' draws (``OwnedRows.draw`` and the draw kernel inside it), then the local
``NeighborSampler`` on the same batches. Run with one Numba thread so every kernel's CPU is this
thread's. What the channel and the processes add is measured through Ray by ``bench service``
(CPU per batch of the trainer and both servers).
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import time


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graph", default="powerlaw:2000000:32")
    parser.add_argument("--batches", type=int, default=40)
    args = parser.parse_args(argv)

    import gglspeedup as gg
    from gglspeedup.bench._common import load_graph, seed_batches
    from gglspeedup.sampling import remote as owner_side
    from gglspeedup.sampling._kernels import remote as trainer_side
    from gglspeedup.service import LocalTransport, PartServer, RemoteSampler, partition

    spans = collections.defaultdict(float)

    def timed(module, name, label):
        function = getattr(module, name)

        def wrapper(*a, **k):
            start = time.thread_time()
            try:
                return function(*a, **k)
            finally:
                spans[label] += time.thread_time() - start

        setattr(module, name, wrapper)

    graph, _ = load_graph(args.graph)
    folder = os.path.join(tempfile.mkdtemp(), "parts")
    book = partition(graph, folder, 2, method="range", memory="1G")
    transport = LocalTransport([PartServer(folder, [0]), PartServer(folder, [1])], [(0,), (1,)])
    remote, local = RemoteSampler(transport, book, [15, 10]), gg.NeighborSampler(graph, [15, 10])
    batches = seed_batches(graph.num_nodes, 1024, 5 + args.batches, 0)
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
    for name, seconds in {**totals, **spans}.items():
        print(f"{name:28s} {1e3 * seconds / args.batches:7.3f} ms a batch")


if __name__ == "__main__":
    main()

"""Remote sampling in one process (LocalTransport, 2 groups) against the local sampler: batches/s
and bytes per batch against the minimum (4 B per distinct target id asked, 8 B per drawn edge: its
int32 neighbour and edge id, one count byte per target).

    python tools/remote_inprocess.py [--nodes 1000000] [--method range] [--rounds 10] [--clock wall|cpu]

papers-like graph, [15, 10], batch 1024, 20 batches per round; each batch is drawn by both
samplers in turn (which goes first alternates), so both see the same machine. ``--clock cpu``
times this thread's CPU (``time.thread_time``): run it with ``NUMBA_NUM_THREADS=1`` so every
kernel runs on this thread; on a shared machine it is the steadier figure, since time spent
waiting for a core is not counted. The servers' work runs here too, one after the other: this
isolates the sampling side's own cost; through Ray see ``tools/remote_ray.py``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000000)
    parser.add_argument("--method", default="range", choices=["range", "metis"])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"])
    args = parser.parse_args(argv)
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter

    import gglspeedup as gg
    from gglspeedup.datasets.papers_like import load_papers_like
    from gglspeedup.service import LocalTransport, PartServer, RemoteSampler, partition

    graph, _ = load_papers_like(args.nodes)
    scratch = tempfile.TemporaryDirectory(prefix="remote-inprocess-")  # removed when the run ends
    folder = os.path.join(scratch.name, "p")
    book = partition(graph, folder, 2, method=args.method)
    transport = LocalTransport([PartServer(folder, [0]), PartServer(folder, [1])], [(0,), (1,)])
    remote = RemoteSampler(transport, book, [15, 10])
    local = gg.NeighborSampler(graph, [15, 10])
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, graph.num_nodes, 1024) for _ in range(20)]
    for key, seeds in enumerate(batches[:3]):
        remote.sample(seeds, key=key)
        local.sample(seeds, key=key)
    ratios, per_batch = [], {"local": [], "remote": []}
    for round_ in range(args.rounds):
        spent = {"local": 0.0, "remote": 0.0}
        for key, seeds in enumerate(batches):
            order = ("local", "remote") if (key + round_) % 2 else ("remote", "local")
            for name in order:
                sampler = local if name == "local" else remote
                start = clock()
                sampler.sample(seeds, key=key)
                spent[name] += clock() - start
        ratios.append(spent["local"] / spent["remote"])
        for name, value in spent.items():
            per_batch[name].append(value / len(batches) * 1e3)
    moved, minimum = bytes_per_batch(transport, remote, batches)
    print(
        f"papers-like:{args.nodes} ({graph.num_edges} edges), 2 groups ({args.method}), [15, 10], batch 1024, "
        f"{args.rounds} rounds of {len(batches)}, clock {args.clock}"
    )
    print(
        f"ms per batch: local {np.median(per_batch['local']):.2f}, remote {np.median(per_batch['remote']):.2f}; "
        f"remote / local batches/s: median {np.median(ratios):.3f} (quartiles {np.quantile(ratios, 0.25):.3f}-"
        f"{np.quantile(ratios, 0.75):.3f})"
    )
    print(f"bytes per batch {moved:,.0f}, minimum {minimum:,.0f}, x {moved / minimum:.3f}")


def bytes_per_batch(transport, remote, batches) -> tuple:
    """``(bytes moved, minimum)`` per batch of ``remote.sample`` over ``batches``: every request's
    and answer's arrays through ``transport`` (its ``call`` wrapped meanwhile), and the minimum (the
    module docstring's). ``tools/remote_ray.py`` counts the same way."""
    real = transport.call
    moved = minimum = 0

    def call(requests, **options):
        nonlocal moved, minimum
        answers = real(requests, **options)
        for group, (_method, payload) in requests.items():
            answer = answers[group]
            moved += sum(v.nbytes for v in (*payload.values(), *answer.values()) if isinstance(v, np.ndarray))
            minimum += 4 * payload["ids"].shape[0] + 8 * answer["nbrs"].shape[0] + answer["counts"].shape[0]
        return answers

    transport.call = call
    try:
        for key, seeds in enumerate(batches):
            remote.sample(seeds, key=key)
    finally:
        transport.call = real
    return moved / len(batches), minimum / len(batches)


if __name__ == "__main__":
    main()

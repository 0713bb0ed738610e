"""Time two commits' CPU samplers in alternating processes: the A/B for changes of a few percent.

    python tools/alternate_commits.py BASE HEAD [--graph untyped|wordnet|igbh-like:N] [--fanouts 25,10] [--pairs 8]
        [--clock wall|cpu] [--threads N]

Each commit is checked out once into a worktree under ``--worktrees`` (default
``/tmp/gglspeedup-worktrees``); then ``--pairs`` pairs of processes run, one per commit, the order
swapped every pair. A process loads the graph, warms the sampler on 5 batches and times 7 rounds of
20 batches of 1024 seeds (typed graphs: of the labelled types); its figure is the median round.
Printed: each commit's median, every pair's ratio BASE / HEAD (> 1: HEAD faster) and their median.

``--clock cpu`` times each round by the process's CPU time (every thread's) instead of the wall
clock, and ``--threads N`` sets ``NUMBA_NUM_THREADS`` in both commits' processes: with
``--threads 1 --clock cpu`` a round costs its instructions and cache misses, not the scheduler's
time slices, which is what a change of a few percent needs on a machine other work is loading.

Why processes: the in-process A/B (``tools/compare_commits.py``) loads both packages side by side,
and on identical code it reads 0.87-0.92 for whichever is "this checkout"; a two-package round-robin
written the same way read 1.10 (untyped) and 1.32-1.34 (typed) on identical code. Separate
processes share nothing but the machine, whose speed drifts over minutes, so only adjacent pairs
are compared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POWERLAW = "powerlaw:2000000:32"


def link_sampler(graph_name: str, fanouts: list):
    """``(batches, sample)`` of link batches on the power-law graph: 20 batches of 1024 edges as
    (source, target) pairs, each sampled with one binary negative per pair and ``exclude`` the
    part of ``graph_name`` after ``links:`` (``none``: nothing excluded)."""
    import numpy as np

    import gglspeedup as gg
    from gglspeedup.bench import _common
    from gglspeedup.bench.link import edge_batches

    graph, _ = _common.load_graph(POWERLAW)
    rows = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    pairs = [np.stack((graph.indices[p], rows[p])).astype(np.int64) for p in edge_batches(graph, 1024, 20, 0)]
    sampler = gg.NeighborSampler(graph, fanouts, seed=0)
    default = graph_name.split(":")[1]

    def sample(pairs, exclude=None if default == "none" else default):
        return sampler.sample_links(pairs, negatives="binary", exclude=exclude)

    return pairs, sample


def exclusion_cost(fanouts: list, rounds: int) -> float:
    """Median over ``2 * rounds`` rounds of the cost of reverse exclusion, % of the speed without:
    each round times the 20 link batches with ``exclude="reverse"`` and with none, in alternating
    order, in this process (one package: no in-process A/B bias)."""
    import numpy as np

    batches, sample = link_sampler("links:reverse", fanouts)
    for pairs in batches[:5]:
        sample(pairs)
        sample(pairs, exclude=None)
    costs = []
    for r in range(2 * rounds):
        rate = {}
        for exclude in ("reverse", None) if r % 2 == 0 else (None, "reverse"):
            start, edges = time.perf_counter(), 0
            for pairs in batches:
                edges += sum(int(adj.e_id.shape[0]) for adj in sample(pairs, exclude=exclude).adjs)
            rate[exclude] = edges / (time.perf_counter() - start)
        costs.append(100 * (1 - rate["reverse"] / rate[None]))  # sampled edges/s, as bench link
    return float(np.median(costs))


def measure(graph_name: str, fanouts: list, rounds: int, clock=time.perf_counter) -> float:
    """Median ms per batch of this process's ``gglspeedup`` (the child's side) by ``clock``; for
    ``links:cost`` the median exclusion cost in % (:func:`exclusion_cost`)."""
    import numpy as np

    import gglspeedup as gg

    if graph_name == "links:cost":
        return exclusion_cost(fanouts, rounds)
    if graph_name == "untyped":
        from gglspeedup.bench import _common

        graph, _ = _common.load_graph(POWERLAW)
        sample = gg.NeighborSampler(graph, fanouts, seed=0).sample
        batches = _common.seed_batches(graph.num_nodes, 1024, 20, seed=0)
    elif graph_name.startswith("links:"):
        batches, sample = link_sampler(graph_name, fanouts)
    else:
        from gglspeedup.bench.hetero import load_typed, typed_seed_batches

        graph, labelled = load_typed(graph_name)[:2]
        sample = gg.HeteroNeighborSampler(graph, fanouts, seed=1).sample
        batches = typed_seed_batches(graph, list(labelled), 1024, 20, seed=0)
    for seeds in batches[:5]:
        sample(seeds)
    times = []
    for _ in range(rounds):
        start = clock()
        for seeds in batches:
            sample(seeds)
        times.append((clock() - start) * 1e3 / len(batches))
    return float(np.median(times))


def worktree(folder: str, revision: str) -> str:
    path = os.path.join(
        folder, subprocess.check_output(["git", "-C", ROOT, "rev-parse", "--short", revision], text=True).strip()
    )
    if not os.path.isdir(path):
        subprocess.run(
            ["git", "-C", ROOT, "worktree", "add", "--detach", "-f", path, revision], check=True, capture_output=True
        )
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("head")
    parser.add_argument(
        "--graph",
        default="untyped",
        help="untyped (the 2M-node power-law graph), links:reverse or links:none (link batches on it), "
        "links:cost (the cost of reverse exclusion, each process 2 x --rounds paired rounds), or a typed dataset",
    )
    parser.add_argument("--fanouts", default="25,10")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--worktrees", default="/tmp/gglspeedup-worktrees")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="round times: wall clock or CPU time")
    parser.add_argument("--threads", type=int, default=None, help="NUMBA_NUM_THREADS of every process")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    fanouts = [int(k) for k in args.fanouts.split(",")]
    if args.child:
        print(
            measure(args.graph, fanouts, args.rounds, time.process_time if args.clock == "cpu" else time.perf_counter)
        )
        return
    paths = {name: worktree(args.worktrees, revision) for name, revision in (("base", args.base), ("head", args.head))}
    figures = {"base": [], "head": []}
    for pair in range(args.pairs):
        for name in ("base", "head") if pair % 2 == 0 else ("head", "base"):
            command = [sys.executable, os.path.abspath(__file__), "--child", args.base, args.head]
            command += ["--graph", args.graph, "--fanouts", args.fanouts, "--rounds", str(args.rounds)]
            command += ["--clock", args.clock]
            env = dict(os.environ, PYTHONPATH=paths[name])
            if args.threads is not None:
                env["NUMBA_NUM_THREADS"] = str(args.threads)
            output = subprocess.run(command, cwd=paths[name], env=env, check=True, capture_output=True, text=True)
            figures[name].append(float(output.stdout.split()[-1]))
    how = f"{args.clock} clock" + ("" if args.threads is None else f", {args.threads} thread(s)")
    print(
        f"{args.graph}, fanouts {fanouts}: {args.pairs} pairs of processes x {args.rounds} rounds of 20 batches ({how})"
    )
    if args.graph == "links:cost":
        for name, revision in (("base", args.base), ("head", args.head)):
            costs, median = " ".join(f"{c:.1f}" for c in figures[name]), statistics.median(figures[name])
            print(f"  {name} {revision}: exclusion cost per process {costs}%, median {median:.1f}%")
        return
    ratios = [b / h for b, h in zip(figures["base"], figures["head"])]
    for name, revision in (("base", args.base), ("head", args.head)):
        print(f"  {name} {revision}: {statistics.median(figures[name]):.3f} ms a batch (median of processes)")
    print(f"  base / head per pair: {' '.join(f'{r:.3f}' for r in ratios)}")
    print(f"  median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}); > 1: head faster")


if __name__ == "__main__":
    main()

"""Time two commits' CPU samplers (or attention) in alternating processes: the A/B for changes of a
few percent, which also checks that both compute the same bits.

    python tools/alternate_commits.py BASE HEAD [--graph untyped|wordnet|igbh-like:N] [--fanouts 25,10] [--pairs 8]
        [--clock wall|cpu] [--threads N]
    python tools/alternate_commits.py BASE HEAD --graph attention:diffusion  # or attention:fractional,
                                                                             # pooling:layer, pooling:maps

Each commit is checked out once into a worktree under ``--worktrees`` (default
``/tmp/gglspeedup-worktrees``); then ``--pairs`` pairs of processes run, one per commit, the order
swapped every pair. A process loads the graph, warms the sampler on 5 batches and times 7 rounds of
20 batches of 1024 seeds (typed graphs: of the labelled types); its figure is the median round.
The attention modes time rounds of 10 calls, forward and backward, of public entry points on
fixed inputs (:func:`attention_calls`). Every process also hashes what it computed (the warm-up
batches' samples; the attention modes' outputs and gradients), and both commits' hashes must
agree. Printed: each commit's median, every pair's ratio BASE / HEAD (> 1: HEAD faster) and their
median, and whether the outputs were identical bit for bit.

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
import hashlib
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


def digest(value, sha=None):
    """SHA-256 (hex) of nested outputs: arrays and tensors by dtype, shape and bytes; tuples, lists
    and dicts (sorted keys) item by item; anything else by ``repr``."""
    sha = sha or hashlib.sha256()
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if hasattr(value, "dtype") and hasattr(value, "tobytes"):
        sha.update(f"{value.dtype}{value.shape}".encode())
        sha.update(value.tobytes())
    elif isinstance(value, dict):
        for key in sorted(value, key=repr):
            sha.update(repr(key).encode())
            digest(value[key], sha)
    elif isinstance(value, (tuple, list)):
        sha.update(f"{type(value).__name__}{len(value)}".encode())
        for item in value:
            digest(item, sha)
    else:
        sha.update(repr(value).encode())
    return sha.hexdigest()


def attention_calls(mode: str):
    """``(calls, outputs)`` of an attention mode: ``calls`` one forward and backward each, on fixed
    inputs (seeded), ``outputs(call)`` what one call computed (outputs and every gradient).

    - ``attention:diffusion``: ``diffusion_attention`` (5 hops, dropout 0.1) on a fresh pattern
      each call (``SequencePattern.csc(512, batch=4, step=i)``: the build, the out-CSR, the passes);
    - ``attention:fractional``: ``fractional_attention`` on one fixed pattern of 4 x 512 tokens;
    - ``pooling:layer``: ``AttentionPooling`` (softmax, sparsemax, gfusedmax; 2 heads) on 256 graphs
      of 10-40 nodes: the layer's one-kernel CPU path;
    - ``pooling:maps``: the torch maps ``softmax``, ``sparsemax``, ``gfusedmax`` (learnt ``lam``,
      ``gamma``) on the same batch's scores.
    """
    import numpy as np
    import torch

    from gglspeedup import attention

    torch.set_num_threads(1)  # torch's own work stays out of the kernels' way, the same in both
    generator = torch.Generator().manual_seed(0)
    if mode.startswith("attention:"):
        pattern = attention.SequencePattern(window=64, num_random=32, num_global=4, seed=0)
        q, k, v = (torch.randn(4, 512, 4, 16, generator=generator, requires_grad=True) for _ in range(3))
        weight = torch.randn(4, 512, 4, 16, generator=generator)
        fixed = pattern.csc(512, batch=4)

        def call(i):
            torch.manual_seed(i)  # the dropout's seed
            if mode == "attention:diffusion":
                graph = pattern.csc(512, batch=4, step=i)
                out = attention.diffusion_attention(q, k, v, graph, hops=5, alpha=0.1, dropout=0.1)
            else:
                graph = fixed
                out = attention.fractional_attention(q * 0.25, k, v, graph, gamma=0.5, terms=6, steps=2)
            (out * weight).sum().backward()
            grads = [t.grad.clone() for t in (q, k, v)]
            for t in (q, k, v):
                t.grad = None
            return graph.indices, out, grads

        return [lambda i=i: call(i) for i in range(10)]
    rng = np.random.default_rng(0)
    sizes = rng.integers(10, 41, 256)
    ptr = np.concatenate(([0], np.cumsum(sizes)))
    edges = [rng.integers(0, n, (2, 2 * n)) + ptr[g] for g, n in enumerate(sizes)]
    batch = attention.graph_batch(ptr, np.concatenate(edges, axis=1))
    x = torch.randn(int(ptr[-1]), 64, generator=generator, requires_grad=True)
    torch.manual_seed(0)
    layers = [attention.AttentionPooling(64, 32, m, heads=2, learn_lam=True, learn_gamma=True) for m in
              ("softmax", "sparsemax", "gfusedmax")]  # fmt: skip
    scores = torch.randn(int(ptr[-1]), 2, generator=generator, dtype=torch.float64, requires_grad=True)
    lam = torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True)
    gamma = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)

    def call(i):
        if mode == "pooling:layer":
            layer = layers[i % 3]
            out = layer(x, batch)
            out.sum().backward()
            grads = [x.grad.clone()] + [p.grad.clone() for p in layer.parameters() if p.grad is not None]
            layer.zero_grad()
        else:
            maps = (
                lambda: attention.softmax(scores, batch),
                lambda: attention.sparsemax(scores, batch, gamma=gamma),
                lambda: attention.gfusedmax(scores, batch, lam=lam, gamma=gamma),
            )
            out = maps[i % 3]()
            (out * torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape).sin()).sum().backward()
            grads = [t.grad.clone() for t in (scores, lam, gamma) if t.grad is not None]
        for t in (x, scores, lam, gamma):
            t.grad = None
        return out, grads

    return [lambda i=i: call(i) for i in range(10)]


def measure(graph_name: str, fanouts: list, rounds: int, clock=time.perf_counter) -> tuple:
    """``(figure, digest)`` of this process's ``gglspeedup`` (the child's side): the median ms per
    batch (per call in the attention modes) by ``clock``, and the hash of the outputs (:func:`digest`); for
    ``links:cost`` the median exclusion cost in % (:func:`exclusion_cost`) and no hash."""
    import numpy as np

    import gglspeedup as gg

    if graph_name == "links:cost":
        return exclusion_cost(fanouts, rounds), "-"
    if graph_name.startswith(("attention:", "pooling:")):
        calls = attention_calls(graph_name)
        outputs = digest([call() for call in calls])  # warm-up, and the hash
        times = []
        for _ in range(rounds):
            start = clock()
            for call in calls:
                call()
            times.append((clock() - start) * 1e3 / len(calls))
        return float(np.median(times)), outputs
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
    outputs = digest([sample(seeds) for seeds in batches[:5]])  # warm-up, and the hash
    times = []
    for _ in range(rounds):
        start = clock()
        for seeds in batches:
            sample(seeds)
        times.append((clock() - start) * 1e3 / len(batches))
    return float(np.median(times)), outputs


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
            *measure(args.graph, fanouts, args.rounds, time.process_time if args.clock == "cpu" else time.perf_counter)
        )
        return
    paths = {name: worktree(args.worktrees, revision) for name, revision in (("base", args.base), ("head", args.head))}
    figures = {"base": [], "head": []}
    digests = {"base": set(), "head": set()}
    for pair in range(args.pairs):
        for name in ("base", "head") if pair % 2 == 0 else ("head", "base"):
            command = [sys.executable, os.path.abspath(__file__), "--child", args.base, args.head]
            command += ["--graph", args.graph, "--fanouts", args.fanouts, "--rounds", str(args.rounds)]
            command += ["--clock", args.clock]
            env = dict(os.environ, PYTHONPATH=paths[name])
            if args.threads is not None:
                env["NUMBA_NUM_THREADS"] = str(args.threads)
            output = subprocess.run(command, cwd=paths[name], env=env, check=True, capture_output=True, text=True)
            figure, outputs = output.stdout.split()[-2:]
            figures[name].append(float(figure))
            digests[name].add(outputs)
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
    same = len(digests["base"] | digests["head"]) == 1
    print(f"  outputs {'identical' if same else 'DIFFERENT'} bit for bit: {sorted(digests['base'] | digests['head'])}")


if __name__ == "__main__":
    main()

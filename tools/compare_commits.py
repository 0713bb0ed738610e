"""Time this checkout's CPU sampler and gather against another commit's, in one process.

    python tools/compare_commits.py --base HEAD~5 [--graph powerlaw:2M:32] [--fanouts 25,10]

The other commit's ``gglspeedup`` package is exported with ``git archive`` into a temporary folder
as ``gglspeedup_base`` (absolute self-imports rewritten), so both versions run side by side in
this process on the same graph, the same seed batches and the same feature table. Rounds are
interleaved (base, then this checkout, every round) and each ratio is paired: the median over
rounds of the ratio within one round, the figure a noisy shared machine moves least. The samplers
must also agree bit for bit (same seed, same keys): a refactor that changes a draw fails here.

Measured: ``NeighborSampler.sample`` (sampled edges/s over all hops) and ``FeatureStore.gather``
of the sampled ``n_id`` rows into a reused buffer and into fresh memory (GB/s of useful bytes).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def export_base(revision: str, folder: str):
    """``revision``'s package, importable as ``gglspeedup_base`` from ``folder``."""
    archive = subprocess.run(
        ["git", "-C", ROOT, "archive", revision, "gglspeedup"], check=True, capture_output=True
    ).stdout
    with tempfile.TemporaryFile() as handle:
        handle.write(archive)
        handle.seek(0)
        with tarfile.open(fileobj=handle) as tar:
            tar.extractall(folder, filter="data")
    package = os.path.join(folder, "gglspeedup_base")
    os.rename(os.path.join(folder, "gglspeedup"), package)
    pattern = re.compile(r"\bgglspeedup(?=[.\"'\s])")
    for directory, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                with open(path) as source:
                    text = source.read()
                with open(path, "w") as target:
                    target.write(pattern.sub("gglspeedup_base", text))
    sys.path.insert(0, folder)
    return importlib.import_module("gglspeedup_base")


def paired(new_rounds, base_rounds) -> float:
    """Median over rounds of base time / new time (> 1: this checkout is faster)."""
    return float(np.median(np.asarray(base_rounds) / np.asarray(new_rounds)))


def interleave(calls: dict, repeats: int) -> dict:
    for call in calls.values():  # warm-up: compilation, page faults
        call()
    rounds = {name: [] for name in calls}
    for number in range(repeats):
        for name, call in list(calls.items())[:: 1 if number % 2 == 0 else -1]:  # alternate who goes first
            start = time.perf_counter()
            call()
            rounds[name].append(time.perf_counter() - start)
    return rounds


def main(argv=None) -> int:
    from gglspeedup.bench._options import add_common_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against (e.g. HEAD~5, a hash)")
    add_common_arguments(
        parser,
        graph=("powerlaw:2M:32", "a --graph spec (default powerlaw:2M:32)"),
        fanouts=("25,10", "sampler fanouts, seed hop first (default 25,10)"),
        batch=1024,
        batches=(20, "batches per timed pass (default 20)"),
        dim=(128, "feature width for the gather, float32 (default 128)"),
        repeats=(9, "interleaved rounds (default 9)"),
    )
    parser.add_argument(
        "--links",
        action="store_true",
        help="also link sampling (binary negatives, reverse exclusion), untyped on --graph and typed on "
        "igbh-like:200000 (papers citing papers), each checked bit for bit",
    )
    args = parser.parse_args(argv)

    import gglspeedup as new
    from gglspeedup.bench._common import load_graph, seed_batches
    from gglspeedup.validation import parse_fanouts

    with tempfile.TemporaryDirectory() as folder:
        base = export_base(args.base, folder)
        base_sampling = importlib.import_module("gglspeedup_base.sampling")
        base_feature = importlib.import_module("gglspeedup_base.feature")
        fanouts = parse_fanouts(args.fanouts)
        graph, description = load_graph(args.graph)
        base_graph = base.CSRGraph(graph.indptr, graph.indices, _checked=True)
        batches = seed_batches(graph.num_nodes, args.batch, args.batches, seed=2)
        build = {
            f"base {args.base}": lambda: base_sampling.NeighborSampler(base_graph, fanouts, seed=1),
            "this checkout": lambda: new.NeighborSampler(graph, fanouts, seed=1),
        }
        # The sampler built first runs measurably faster here (its relabel map gets the better
        # pages: up to 1.25x on this VM), so each version is built first once: two legs, and the
        # ratio is their geometric mean.
        legs, rows, first = [], [], None
        for order in (list(build), list(build)[::-1]):
            samplers = {name: build[name]() for name in order}
            outputs = {name: [s.sample(b, key=k) for k, b in enumerate(batches)] for name, s in samplers.items()}
            one, other = outputs.values()
            for a, b in zip(one, other):  # identical draws: same n_id and edges, every hop
                assert np.array_equal(a.n_id, b.n_id), "the two versions sample different nodes"
                for adj_a, adj_b in zip(a.adjs, b.adjs):
                    assert np.array_equal(adj_a.edge_index, adj_b.edge_index)
                    assert np.array_equal(adj_a.e_id, adj_b.e_id)
            first = first or one
            edges = sum(int(adj.e_id.shape[0]) for out in one for adj in out.adjs)

            def sample_pass(sampler):
                return lambda: [sampler.sample(b, key=k) for k, b in enumerate(batches)]

            rounds = interleave({name: sample_pass(samplers[name]) for name in build}, args.repeats)
            rows += [
                (
                    f"sample ({order[0].split()[0]} built first)",
                    name,
                    edges / min(r) / 1e6,
                    edges / float(np.median(r)) / 1e6,
                    "M edges/s",
                )
                for name, r in rounds.items()
            ]
            legs.append(paired(*[rounds[name] for name in reversed(list(rounds))]))
            del samplers, outputs
        sample_ratio = float(np.sqrt(legs[0] * legs[1]))

        x = np.random.default_rng(3).random((graph.num_nodes, args.dim), dtype=np.float32)
        ids = np.concatenate([np.asarray(out.n_id) for out in first])
        stores = {f"base {args.base}": base_feature.FeatureStore(x), "this checkout": new.FeatureStore(x)}
        buffer = np.empty((len(ids), args.dim), np.float32)
        nbytes = ids.size * args.dim * 4
        gather_ratios = {}
        for mode in ("reused out", "fresh out"):
            calls = {
                name: (lambda s=store: s.gather(ids, out=buffer)) if mode == "reused out" else (lambda s=store: s[ids])
                for name, store in stores.items()
            }
            rounds = interleave(calls, args.repeats)
            rows += [
                (f"gather, {mode}", name, nbytes / min(r) / 1e9, nbytes / float(np.median(r)) / 1e9, "GB/s")
                for name, r in rounds.items()
            ]
            gather_ratios[mode] = paired(*[rounds[name] for name in reversed(list(rounds))])

        link_ratios = _links(base, new, args, graph, base_graph, fanouts, rows) if args.links else {}

    print(
        f"{description['num_nodes']:,} nodes / {description['num_edges']:,} edges, fanouts {fanouts}, "
        f"batch {args.batch} x {args.batches}, gather {ids.size:,} rows x {args.dim} float32, "
        f"{args.repeats} interleaved rounds; outputs identical bit for bit"
    )
    for what, name, best, median, unit in rows:
        print(f"  {what:20s} {name:24s} best {best:7.2f}  median {median:7.2f} {unit}")
    print(
        f"this checkout / base, paired: sample {sample_ratio:.3f}x, gather (reused out) "
        f"{gather_ratios['reused out']:.3f}x, gather (fresh out) {gather_ratios['fresh out']:.3f}x"
    )
    for what, ratio in link_ratios.items():
        print(f"this checkout / base, paired: {what} {ratio:.3f}x")
    return 0


def _same(a, b, path="output") -> None:
    """``a`` and ``b`` (records, lists, dicts, arrays, scalars) equal bit for bit."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _same(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, (list, tuple)) and not isinstance(a, np.ndarray):
        assert len(a) == len(b), path
        for index, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{index}]")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert np.array_equal(np.asarray(a), np.asarray(b)), f"the two versions differ at {path}"
    else:
        assert a == b, f"the two versions differ at {path}"


def _links(base, new, args, graph, base_graph, fanouts, rows) -> dict:
    """Link sampling of both versions, untyped and typed, checked equal, then timed interleaved."""
    rng = np.random.default_rng(4)
    options = {"negatives": "binary", "exclude": "reverse"}
    pick = rng.integers(0, graph.num_edges, args.batch * args.batches)
    targets = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    pairs = np.stack([np.asarray(graph.indices)[pick], targets[pick]])
    chunks = np.array_split(pairs, args.batches, axis=1)
    base_typed = importlib.import_module("gglspeedup_base.datasets.synthetic_hetero").load_igbh_like(200_000, 0)
    new_typed = importlib.import_module("gglspeedup.datasets.synthetic_hetero").load_igbh_like(200_000, 0)
    relation = ("paper", "cites", "paper")
    typed_graph = new_typed.graph if hasattr(new_typed, "graph") else new_typed[0]
    base_typed_graph = base_typed.graph if hasattr(base_typed, "graph") else base_typed[0]
    citations = typed_graph[relation]  # its CSR: rows the cited papers, indices the citing ones
    cites = np.asarray(citations.indices)
    cited = np.repeat(np.arange(len(citations.indptr) - 1), np.diff(citations.indptr))
    pick = rng.integers(0, len(cites), args.batch * args.batches)
    typed_chunks = np.array_split(np.stack([cites[pick], cited[pick]]), args.batches, axis=1)
    typed_options = dict(options, edge_type=relation, reverse_edge_type=relation)
    versions = {
        f"base {args.base}": (
            base.NeighborSampler(base_graph, fanouts, seed=1),
            base.HeteroNeighborSampler(base_typed_graph, fanouts, seed=1),
        ),
        "this checkout": (
            new.NeighborSampler(graph, fanouts, seed=1),
            new.HeteroNeighborSampler(typed_graph, fanouts, seed=1),
        ),
    }
    calls = {"links": {}, "typed links": {}}
    outputs = {}
    for name, (untyped, typed) in versions.items():
        outputs[name] = (
            [untyped.sample_links(c, key=k, **options) for k, c in enumerate(chunks)],
            [typed.sample_links(c, key=k, **typed_options) for k, c in enumerate(typed_chunks)],
        )
        calls["links"][name] = lambda s=untyped: [s.sample_links(c, key=k, **options) for k, c in enumerate(chunks)]
        calls["typed links"][name] = lambda s=typed: [
            s.sample_links(c, key=k, **typed_options) for k, c in enumerate(typed_chunks)
        ]
    one, other = outputs.values()
    for x, y in zip(one[0] + one[1], other[0] + other[1]):
        _same(tuple(x), tuple(y))
    ratios = {}
    for what, versions_calls in calls.items():
        rounds = interleave(versions_calls, args.repeats)
        count = args.batch * args.batches
        rows += [
            (what, name, count / min(t) / 1e3, count / float(np.median(t)) / 1e3, "k pairs/s")
            for name, t in rounds.items()
        ]
        ratios[what] = paired(*[rounds[name] for name in reversed(list(rounds))])
    return ratios


if __name__ == "__main__":
    sys.exit(main())

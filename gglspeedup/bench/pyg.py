"""``python -m gglspeedup.bench pyg``: PyG's own loaders, on PyG's sampler and on gglspeedup.pyg.

Example::

    python -m gglspeedup.bench pyg --graph powerlaw:200000:16 --fanouts 15,10 --batch 1024 --dim 128

One batch is one call of a PyG loader (``loader(index)``: PyG's ``collate_fn`` and ``filter_fn``,
so sampling, PyG's record conversion, ``filter_data`` and the feature fetch), the same seed nodes
(or, ``--task link``, the same graph edges with ``--negatives``) for every contender:

- ``pyg``: PyG's ``NeighborLoader`` / ``LinkNeighborLoader`` on a ``Data`` with PyG's own sampler
  (needs ``pyg-lib`` or ``torch-sparse``; reported unavailable without them);
- ``gglspeedup Sampler + Data``: PyG's ``NodeLoader`` / ``LinkLoader`` on the same ``Data``,
  driven by :class:`gglspeedup.pyg.Sampler` (features by PyG's ``filter_data``);
- ``gglspeedup Sampler + stores``: the same loader class on ``(gglspeedup.pyg.FeatureStore,
  gglspeedup.pyg.GraphStore)`` (features gathered by gglspeedup's feature store).

Rounds are interleaved (``bench sample``'s rules); reported: batches/s (median round) and the
ratio to PyG's own. Then the conversion overhead: in the same run, gglspeedup's sampler alone
(``sample`` / ``sample_links``) against the conversion of its output to PyG's records
(:func:`gglspeedup.pyg.sampler_output` and the link metadata), batch by batch; the target is a
conversion of at most 10% of the sampler's own time.
"""

from __future__ import annotations

import os
import time

import numpy as np

__all__ = ["add_arguments", "run"]

TASKS = ("node", "link")


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from ._options import add_common_arguments

    add_common_arguments(parser, graph="powerlaw:200000:16")
    parser.add_argument("--task", default="node,link", help="node, link or node,link (default node,link)")
    add_common_arguments(
        parser,
        "fanouts",
        batch=(1024, "seed nodes / positive edges per batch (default 1024)"),
        dim=128,
        batches=10,
        warmup=2,
        repeats=3,
    )
    parser.add_argument("--negatives", default="binary:1", help="link task: binary:K, triplet:K or none")
    add_common_arguments(
        parser,
        device=("cpu", "where gglspeedup samples and gathers (default cpu)"),
        seed=(0, "seed of the batches, features and samplers"),
        threads=None,
    )


def _tasks(text: str) -> list:
    tasks = [t.strip() for t in text.split(",") if t.strip()]
    if not tasks or any(t not in TASKS for t in tasks):
        raise ValueError(f"--task must name node and/or link, got {text!r}")
    return list(dict.fromkeys(tasks))


def _negatives(text: str):
    from .link import parse_negatives

    mode, k = parse_negatives(text)
    if mode == "per_source":
        raise ValueError("--negatives: PyG has binary and triplet negatives, not per_source")
    return mode, k


def _pyg_own_available():
    import torch_geometric.typing as pyg_typing

    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        raise RuntimeError("PyG's NeighborSampler needs pyg-lib or torch-sparse, neither is importable")
    return "pyg-lib" if pyg_typing.WITH_PYG_LIB else "torch-sparse"


def _contenders(task, data, stores, fanouts, args, negatives):
    """name -> (build() -> loader, note); a build may raise RuntimeError / ImportError (unavailable)."""
    import warnings

    from torch_geometric.loader import LinkLoader, LinkNeighborLoader, NeighborLoader, NodeLoader

    from .. import pyg

    def ours(source):
        return pyg.Sampler(source, fanouts, seed=args.seed, device=args.device)

    neg = None if negatives[0] is None else {"mode": negatives[0], "amount": negatives[1]}

    def own():
        backend = _pyg_own_available()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if task == "node":
                return NeighborLoader(data, fanouts, batch_size=args.batch), f"PyG's NeighborSampler ({backend})"
            return LinkNeighborLoader(data, fanouts, neg_sampling=neg, batch_size=args.batch), backend

    if task == "node":
        with_data = lambda: (NodeLoader(data, ours(data), batch_size=args.batch), "filter_data")  # noqa: E731
        with_stores = lambda: (  # noqa: E731
            NodeLoader(stores, ours(stores), input_nodes=_arange(data.num_nodes), batch_size=args.batch),
            "FeatureStore.multi_get_tensor",
        )
    else:
        pairs = (None, data.edge_index)
        with_data = lambda: (LinkLoader(data, ours(data), neg_sampling=neg, batch_size=args.batch), "filter_data")  # noqa: E731
        with_stores = lambda: (  # noqa: E731
            LinkLoader(stores, ours(stores), edge_label_index=pairs, neg_sampling=neg, batch_size=args.batch),
            "FeatureStore.multi_get_tensor",
        )
    return {"pyg": own, "gglspeedup Sampler + Data": with_data, "gglspeedup Sampler + stores": with_stores}


def _arange(n):
    import torch

    return torch.arange(n)


def _conversion(task, graph, fanouts, args, negatives, batches, warmup) -> dict:
    """Sampler time and conversion time per batch (median round), gglspeedup's own sampler."""
    from ..pyg.outputs import link_metadata, sampler_output
    from ..sampling import NeighborSampler

    sampler = NeighborSampler(graph, fanouts, seed=args.seed, device=args.device)
    indices = np.asarray(graph.indices, dtype=np.int64)
    targets = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), graph.degree())
    mode, k = negatives if task == "link" else (None, 1)

    def sample(batch, key):
        if task == "node":
            return sampler.sample(batch, key=key)
        return sampler.sample_links(
            np.stack([indices[batch], targets[batch]]), negatives=mode, num_negatives=k, key=key
        )

    def convert(out):
        record = sampler_output(out)
        if task == "link":
            record.metadata = link_metadata(
                None, out.pair_index, out.negative_targets, out.batch_size, None, mode == "triplet"
            )
        return record

    for key, batch in enumerate(warmup):
        convert(sample(batch, key))
    rounds = []
    for _ in range(args.repeats):
        sample_s = convert_s = 0.0
        for key, batch in enumerate(batches):
            start = time.perf_counter()
            out = sample(batch, key)
            middle = time.perf_counter()
            convert(out)
            sample_s, convert_s = sample_s + middle - start, convert_s + time.perf_counter() - middle
        rounds.append((sample_s, convert_s))
    sample_s, convert_s = sorted(rounds)[len(rounds) // 2]
    shares = sorted(c / s for s, c in rounds if s > 0)
    return {
        "sample_ms": 1e3 * sample_s / len(batches),
        "convert_ms": 1e3 * convert_s / len(batches),
        "convert_share": shares[len(shares) // 2] if shares else float("nan"),
        "round_shares": [round(v, 4) for v in shares],
    }


def run(args) -> dict:
    """Measure the contenders of every task; print the tables; return a dict."""
    from .. import __version__
    from ._common import load_graph, machine_info, parse_fanouts, set_threads, wait_passively
    from ._options import check_at_least_one

    tasks, fanouts, negatives = _tasks(args.task), parse_fanouts(args.fanouts), _negatives(args.negatives)
    check_at_least_one(args, "batch", "batches", "repeats", "dim")
    # Numba's sampling / gather threads waited for torch's spinning ones (PyG's torch.stack of a
    # batch's edges took 15 ms instead of 0.1 on 2 cores), so both sides wait passively, as in
    # ``bench gather``.
    wait_passively()
    try:
        import torch
        import torch_geometric
        from torch_geometric.data import Data

        from .. import pyg
    except ImportError as error:
        raise ImportError(
            f"bench pyg needs torch and torch_geometric: pip install gglspeedup[torch,pyg] ({error})"
        ) from error
    set_threads(args.threads)
    graph, graph_info = load_graph(args.graph)
    targets = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), graph.degree())
    edge_index = torch.from_numpy(np.stack([np.asarray(graph.indices, dtype=np.int64), targets]))
    x = np.random.default_rng(args.seed).random((graph.num_nodes, args.dim), dtype=np.float32)
    data = Data(x=torch.from_numpy(x), edge_index=edge_index, num_nodes=graph.num_nodes)
    stores = (pyg.FeatureStore({"x": x}, device=args.device), pyg.GraphStore(graph))
    results = {
        "command": "pyg",
        "graph": graph_info,
        "fanouts": fanouts,
        "batch": int(args.batch),
        "dim": int(args.dim),
        "batches": int(args.batches),
        "warmup": int(args.warmup),
        "repeats": int(args.repeats),
        "negatives": args.negatives,
        "device": str(args.device),
        "seed": int(args.seed),
        "versions": {"gglspeedup": __version__, "torch_geometric": torch_geometric.__version__},
        "tasks": {},
    }
    for task in tasks:
        results["tasks"][task] = _measure_task(task, graph, data, stores, fanouts, args, negatives)
    results["machine"] = dict(machine_info(), omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"))
    _print_report(results)
    return results


def _measure_task(task: str, graph, data, stores, fanouts, args, negatives) -> dict:
    """One task's contenders timed side by side (PyG's own first, when it runs here), each row
    with its rate and its ratio to PyG's own; and the conversion cost of our records."""
    import torch

    from ._common import seed_batches, time_contenders
    from .link import edge_batches

    count = args.warmup + args.batches
    if task == "node":
        raw = seed_batches(graph.num_nodes, args.batch, count, args.seed)
    else:
        raw = edge_batches(graph, args.batch, count, args.seed)
    indexes = [torch.from_numpy(b) for b in raw]
    rows, prepared = [], {}
    for name, build in _contenders(task, data, stores, fanouts, args, negatives).items():
        row = {"name": name}
        rows.append(row)
        start = time.perf_counter()
        try:
            loader, note = build()
        except (RuntimeError, ImportError) as error:
            row["status"] = f"unavailable: {error}"
            continue
        row.update(status="ok", note=note, setup_s=round(time.perf_counter() - start, 3))
        prepared[name] = (_one_batch(loader), indexes[args.warmup :], indexes[: args.warmup], None)
    timings = time_contenders(prepared, args.repeats)
    own = timings.get("pyg")
    for row in rows:
        timing = timings.get(row["name"])
        if timing is None:
            continue
        row.update(
            batches_per_s=timing.batches_per_s,
            ms_per_batch=timing.ms_per_batch,
            edges_per_batch=timing.edges / timing.batches,
            round_s=[round(t, 4) for t in timing.round_seconds],
        )
        if own is not None:
            row["ratio_vs_pyg"] = own.seconds / timing.seconds
    conversion = _conversion(task, graph, fanouts, args, negatives, raw[args.warmup :], raw[: args.warmup])
    return {"results": rows, "conversion": conversion}


def _one_batch(loader):
    """``loader(index)`` (one whole PyG batch) -> its number of sampled edges."""

    def batch(index) -> int:
        out = loader(index)
        return int(out.edge_index.size(1))

    return batch


def _print_report(results: dict) -> None:
    from ._common import edge_columns, format_table

    graph, machine = results["graph"], results["machine"]
    threads = ", ".join(f"{k} {machine[k]}" for k in ("numba_threads", "torch_threads") if k in machine)
    print(
        f"pyg: graph {graph['spec']} ({graph['num_nodes']:,} nodes, {graph['num_edges']:,} edges), fanouts "
        f"{results['fanouts']}, batch {results['batch']}, features {results['dim']} x float32, device "
        f"{results['device']}, torch_geometric {results['versions']['torch_geometric']}\n"
        f"machine: {machine['usable_cores']} usable cores of {machine['cpu_count']}, {threads}, "
        f"OMP_WAIT_POLICY={machine['omp_wait_policy']}; "
        f"{results['batches']} timed batches x {results['repeats']} rounds (median) after {results['warmup']} "
        f"warm-up batches (the first again before each pass), seed {results['seed']}"
    )
    columns = edge_columns(
        ("ratio_vs_pyg", "vs PyG's own", ".2f"), rates=("batches_per_s", "ms_per_batch", "edges_per_batch")
    )
    for task, block in results["tasks"].items():
        table = [
            dict(row, detail=row.get("note") if row["status"] == "ok" else row["status"]) for row in block["results"]
        ]
        print(f"\n{task} batches (PyG loader end to end: sampling, records, filter, features)")
        print(format_table(table, columns))
        c = block["conversion"]
        print(
            f"conversion to PyG's records: {c['convert_ms']:.3f} ms per batch against {c['sample_ms']:.3f} ms of "
            f"gglspeedup sampling = {100 * c['convert_share']:.1f}% (target <= 10%)"
        )

"""``python -m gglspeedup.bench link``: link-prediction sampling, ours beside DGL's edge sampler.

Example (the issue's CPU target)::

    python -m gglspeedup.bench link --graph powerlaw:2000000:32 --fanouts 15,10 --batch 1024 \\
        --negatives per_source:1 --exclude reverse --peers dgl

Each batch is ``--batch`` graph edges drawn uniformly (the same edges for every contender).
Ours: :meth:`NeighborSampler.sample_links` on the pairs ``(source, target)`` of those edges.
DGL 2.1: ``as_edge_prediction_sampler(NeighborSampler(fanouts), exclude=..., reverse_eids=...,
negative_sampler=...)`` on their edge ids, with ``Uniform(k)`` for ``per_source:k`` and
``GlobalUniform(k)`` for ``binary:k`` (``triplet`` has no DGL counterpart). ``--exclude reverse``
is DGL's ``"reverse_id"``: ``reverse_eids`` maps every edge to the edge stored the other way
(itself when there is none). Both sample the neighbourhood of every endpoint, negatives included,
with the hop semantics of ``bench sample``. Each contender also runs with ``exclude=None`` in the
same interleaved rounds, so the cost of exclusion is measured side by side. Reported: sampled
neighbourhood edges/s over all hops (the median round, and the fastest).
"""

from __future__ import annotations

import numpy as np

__all__ = ["add_arguments", "run", "parse_negatives", "reverse_positions"]

OURS = "gglspeedup"
PEERS = ("dgl",)


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from ._options import SAMPLING, add_common_arguments

    add_common_arguments(parser, *SAMPLING, batch=(1024, "positive edges per batch (default 1024)"))
    parser.add_argument(
        "--negatives",
        default="per_source:1",
        help="MODE:K with MODE binary, per_source or triplet, or none (default per_source:1)",
    )
    parser.add_argument(
        "--exclude", default="reverse", choices=("self", "reverse", "none"), help="excluded edges (default reverse)"
    )
    add_common_arguments(parser, "device")
    parser.add_argument(
        "--placement", default="auto", choices=("auto", "device", "pinned", "host"), help="our GPU graph placement"
    )
    add_common_arguments(parser, "peers", "seed", threads=(None, "CPU threads for Numba / torch / DGL"))


def parse_negatives(text: str) -> tuple:
    """``"per_source:1"`` -> ``("per_source", 1)``; ``"none"`` -> ``(None, 1)``; ``"binary"`` -> ``("binary", 1)``."""
    mode, _, count = text.strip().partition(":")
    if mode == "none":
        return None, 1
    if mode not in ("binary", "per_source", "triplet"):
        raise ValueError(f"--negatives must be MODE:K with MODE binary, per_source, triplet or none, got {text!r}")
    try:
        k = int(count) if count else 1
    except ValueError:
        raise ValueError(f"--negatives: K must be an int, got {count!r}") from None
    if k < 1:
        raise ValueError(f"--negatives: K must be >= 1, got {k}")
    return mode, k


def reverse_positions(graph) -> np.ndarray:
    """For every CSR position ``p`` (edge ``indices[p] -> row``), the position of an edge stored the
    other way (``row -> indices[p]``), or ``p`` itself where there is none."""
    n = graph.num_nodes
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices, dtype=np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    codes = rows * n + indices
    order = np.argsort(codes, kind="stable")
    wanted = indices * n + rows
    slot = np.minimum(np.searchsorted(codes, wanted, sorter=order), len(codes) - 1)
    found = codes[order[slot]] == wanted
    return np.where(found, order[slot], np.arange(len(codes), dtype=np.int64))


def edge_batches(graph, batch: int, count: int, seed: int) -> list:
    """``count`` batches of ``batch`` CSR positions drawn uniformly without replacement per batch."""
    rng = np.random.default_rng([seed, 0x1EE])
    size = min(batch, graph.num_edges)
    return [np.sort(rng.choice(graph.num_edges, size=size, replace=False)).astype(np.int64) for _ in range(count)]


def _prepare_ours(graph, rows, fanouts, seed, device, placement, negatives, exclude):
    from ..sampling import NeighborSampler

    sampler = NeighborSampler(graph, fanouts, seed=seed, device=device, placement=placement)
    mode, k = negatives
    indices = np.asarray(graph.indices)
    sync = lambda: None  # noqa: E731
    if device.is_cuda and not device.simulated:
        sync = lambda: device.xp.cuda.get_current_stream().synchronize()  # noqa: E731

    def convert(positions):
        pairs = np.stack([indices[positions], rows[positions]]).astype(np.int64)
        if device.is_cuda:
            with device:
                return device.xp.asarray(pairs)
        return pairs

    def sample(pairs) -> int:
        out = sampler.sample_links(pairs, negatives=mode, num_negatives=k, exclude=exclude)
        return sum(int(adj.e_id.shape[0]) for adj in out.adjs)

    return sample, convert, sync, f"sample_links on {device}"


def _prepare_dgl(graph, fanouts, seed, device, negatives, exclude, reverse):
    from . import peers

    dgl = peers.import_dgl()
    import torch

    torch_device, sync = peers._torch_device(device)
    mode, k = negatives
    if mode == "triplet":
        raise peers.PeerUnavailable("DGL has no triplet negative sampler")
    # Copies: DGL 2.1's GlobalUniform segfaults on the read-only arrays of a memory-mapped graph.
    indptr = torch.from_numpy(np.array(graph.indptr, dtype=np.int64))
    indices = torch.from_numpy(np.array(graph.indices, dtype=np.int64))
    dgl_graph = dgl.graph(("csc", (indptr, indices, torch.empty(0, dtype=torch.int64))), num_nodes=graph.num_nodes)
    try:
        dgl_graph = dgl_graph.to(torch_device)  # edge ids = CSR positions (no eids given)
    except Exception as error:
        raise peers.PeerUnavailable(f"dgl {dgl.__version__} cannot sample on {device}: {error}") from None
    dgl.seed(seed)
    negative_sampler = None
    if mode == "per_source":
        negative_sampler = dgl.dataloading.negative_sampler.Uniform(k)
    elif mode == "binary":
        negative_sampler = dgl.dataloading.negative_sampler.GlobalUniform(k)
    options = {}
    if exclude == "reverse":
        options = {"exclude": "reverse_id", "reverse_eids": torch.from_numpy(reverse).to(torch_device)}
    elif exclude == "self":
        options = {"exclude": "self"}
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler(list(reversed(fanouts))), negative_sampler=negative_sampler, **options
    )

    def sample(eids) -> int:
        blocks = sampler.sample(dgl_graph, eids)[-1]
        return sum(int(block.num_edges()) for block in blocks)

    note = f"as_edge_prediction_sampler, {dgl.utils.get_num_threads()} threads"
    return sample, (lambda positions: torch.from_numpy(positions).to(torch_device)), sync, note, dgl.__version__


def run(args) -> dict:
    """Measure ours and the peers, each with and without exclusion; print the table; return a dict."""
    from .. import __version__
    from ..device import as_device
    from . import _common
    from ._options import check_at_least_one, check_peers
    from .peers import Contender

    fanouts = _common.parse_fanouts(args.fanouts)
    negatives = parse_negatives(args.negatives)
    exclude = None if args.exclude == "none" else args.exclude
    wanted = _common.parse_names(args.peers, PEERS) if args.peers else []
    wanted = list(PEERS) if wanted is None else wanted
    check_at_least_one(args, "batch", "batches", "repeats")
    device = as_device(args.device).check_available()
    check_peers(args, wanted)  # before the graph is built
    graph, graph_info = _common.load_graph(args.graph)
    if graph.num_edges == 0:
        raise ValueError(f"--graph {args.graph} has no edges to predict")
    batches = edge_batches(graph, args.batch, args.warmup + args.batches, args.seed)
    warmup, timed = batches[: args.warmup], batches[args.warmup :]
    _common.apply_threads(args.threads, wanted)
    rows_of_edges = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(np.asarray(graph.indptr)))
    reverse = reverse_positions(graph) if exclude == "reverse" and "dgl" in wanted else None

    def make(name, setting):
        def ours():
            prepared = _prepare_ours(
                graph, rows_of_edges, fanouts, args.seed, device, args.placement, negatives, setting
            )
            sample, convert, sync, note = prepared
            return Contender(name, f"gglspeedup {__version__}", sample, convert, sync, note)

        def dgl():
            sample, convert, sync, note, version = _prepare_dgl(
                graph, fanouts, args.seed, device, negatives, setting, reverse
            )
            return Contender(name, f"dgl {version}", sample, convert, sync, note)

        return ours if name == OURS else dgl

    rows, prepared = [], {}
    for name in [OURS, *wanted]:
        for setting in [exclude] if exclude is None else [exclude, None]:
            label = name if setting == exclude else f"{name} exclude=None"
            _common.prepare_contender(rows, prepared, label, make(name, setting), timed, warmup, exclude=setting)
    _ratios(rows, _common.time_rows(rows, prepared, args.repeats), exclude)
    results = {
        "command": "link",
        "graph": graph_info,
        "fanouts": fanouts,
        **_common.timing_settings(args),
        "negatives": args.negatives,
        "exclude": exclude,
        "device": str(device),
        "placement": args.placement,
        **_common.run_footer(args, rows),
    }
    _print_report(results)
    return results


def _ratios(rows: list, timings: dict, exclude) -> None:
    """``ratio``: ours / this row at the same exclusion setting; ``exclusion_cost``: how much slower a
    contender runs with exclusion than with ``exclude=None`` (median rounds, same run)."""
    ours = {row["exclude"]: row["name"] for row in rows if row["name"].startswith(OURS) and row["name"] in timings}
    for row in rows:
        if row["name"] not in timings:
            continue
        mine = ours.get(row["exclude"])
        if mine is not None:
            # None (shown '-') over a row of no edges (--fanouts 0), where the division was a traceback
            row["ratio"] = timings[mine].edges_per_s / row["edges_per_s"] if row["edges_per_s"] else None
            best = row["best_edges_per_s"]
            row["best_ratio"] = timings[mine].best_edges_per_s / best if best else None
        if exclude is not None and row["exclude"] == exclude:
            free = f"{row['name']} exclude=None"
            if free in timings:
                cost = timings[free].edges_per_s / row["edges_per_s"] - 1 if row["edges_per_s"] else None
                row["exclusion_cost"] = cost


def _print_report(results: dict) -> None:
    from ._common import VS_PEER, edge_columns, print_edge_report, shown_edge_row

    graph = results["graph"]
    columns = edge_columns(*VS_PEER, ("exclusion_pct", "exclusion cost %", ".1f"))
    header = (
        f"link: graph {graph['spec']} ({graph['num_nodes']:,} nodes, {graph['num_edges']:,} edges), fanouts "
        f"{results['fanouts']}, batch {results['batch']} edges, negatives {results['negatives']}, exclude "
        f"{results['exclude']}, device {results['device']}"
    )
    table = []
    for row in results["results"]:
        shown = shown_edge_row(row)
        if row.get("exclusion_cost") is not None:
            shown["exclusion_pct"] = 100 * row["exclusion_cost"]
        table.append(shown)
    print_edge_report(header, results, columns, table)

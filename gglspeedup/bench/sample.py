"""``python -m gglspeedup.bench sample``: sampled edges/s, ours beside DGL / PyG / NumPy.

Example (the issue's CPU target)::

    python -m gglspeedup.bench sample --graph powerlaw:2000000:32 --fanouts 25,10 \\
        --batch 1024 --peers dgl,numpy --json sample.json

Every contender gets the same graph, the same seed batches (``--seed``), the same warm-up
batches and the same number of timed rounds, interleaved; the median round is reported, and the
fastest round beside it (the figure least disturbed by other load on a shared machine). Sampled
edges are counted over all hops of a batch. The ratio columns are ours / peer in sampled edges/s.
"""

from __future__ import annotations

import time

__all__ = ["add_arguments", "run"]

OURS = "gglspeedup"
WIDE = "gglspeedup, int64 graph"


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from ._common import GRAPH_SPEC_HELP

    parser.add_argument("--graph", default="powerlaw:2000000:32", help=GRAPH_SPEC_HELP)
    parser.add_argument("--fanouts", default="25,10", help="comma-separated, seeds' hop first (default 25,10)")
    parser.add_argument("--batch", type=int, default=1024, help="seeds per batch (default 1024)")
    parser.add_argument("--batches", type=int, default=20, help="timed batches per round (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed batches first (default 3)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds; the median is reported (default 3)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")
    parser.add_argument(
        "--placement",
        default="auto",
        choices=("auto", "device", "pinned", "host"),
        help="where our GPU sampler reads the graph: GPU memory or pinned host memory (UVA)",
    )
    parser.add_argument(
        "--peers",
        default=None,
        help="comma-separated peers from numpy,dgl,pyg (default: all; unavailable ones are listed)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the batches and of every sampler")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for Numba / torch / DGL")
    parser.add_argument(
        "--widths",
        action="store_true",
        help="also time our sampler on an int64 copy of the graph (the width before int32 indices), same rounds",
    )


def _prepare_ours(graph, fanouts, seed, device, placement="auto"):
    from .. import __version__
    from ..sampling import NeighborSampler
    from .peers import Contender

    sampler = NeighborSampler(graph, fanouts, seed=seed, device=device, placement=placement)
    xp, sync = device.xp, (lambda: None)
    if device.is_cuda and not device.simulated:
        sync = lambda: xp.cuda.get_current_stream().synchronize()  # noqa: E731

    def sample(seeds) -> int:
        _n_id, adjs = sampler.sample(seeds)
        return sum(int(adj.e_id.shape[0]) for adj in adjs)

    def convert(seeds):
        with device:
            return xp.asarray(seeds)

    placement = getattr(getattr(sampler, "graph", None), "placement", None)
    note = f"NeighborSampler on {device}" + (f", graph {placement}" if placement else "")
    return Contender(OURS, f"gglspeedup {__version__}", sample, convert=convert, sync=sync, note=note)


def _validate(args):
    from ..device import as_device
    from . import peers
    from ._common import parse_fanouts, parse_names

    fanouts = parse_fanouts(args.fanouts)
    wanted = parse_names(args.peers, peers.PEERS)
    for option in ("batch", "batches", "repeats"):
        if getattr(args, option) < 1:
            raise ValueError(f"--{option} must be >= 1, got {getattr(args, option)}")
    if args.warmup < 0:
        raise ValueError(f"--warmup must be >= 0, got {args.warmup}")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    return fanouts, list(wanted or peers.PEERS), as_device(args.device).check_available()


def run(args) -> dict:
    """Measure every contender; print the table; return the results as a JSON-able dict."""
    import numpy as np

    from ..graph import CSRGraph
    from . import peers
    from ._common import (
        apply_threads,
        edge_timing_fields,
        load_graph,
        machine_with_peers,
        seed_batches,
        time_contenders,
    )

    fanouts, wanted, device = _validate(args)
    graph, graph_info = load_graph(args.graph)
    batches = seed_batches(graph.num_nodes, args.batch, args.warmup + args.batches, seed=args.seed)
    warmup, timed = batches[: args.warmup], batches[args.warmup :]
    if "dgl" in wanted:
        try:
            peers.import_dgl()  # before the thread settings, so that DGL's follow them
        except peers.PeerUnavailable:
            pass  # reported below, when the peer is prepared
    apply_threads(args.threads)

    # Prepare everyone first, then time them interleaved round by round (time_contenders).
    rows, prepared = [], {}
    names = [OURS, *([WIDE] if getattr(args, "widths", False) else []), *wanted]
    for name in names:
        row = {"name": name}
        rows.append(row)
        start = time.perf_counter()
        try:
            if name == OURS:
                contender = _prepare_ours(graph, fanouts, args.seed, device, args.placement)
            elif name == WIDE:
                wide = CSRGraph(graph.indptr, graph.indices, edge_ids=graph.edge_ids, dtype=np.int64, _checked=True)
                contender = _prepare_ours(wide, fanouts, args.seed, device, args.placement)
            else:
                contender = peers.prepare(name, graph, fanouts, seed=args.seed, device=device)
        except (ImportError, peers.PeerUnavailable) as error:
            row["status"] = f"unavailable: {error}"
            continue
        row.update(status="ok", version=contender.version, note=contender.note)
        row["setup_s"] = round(time.perf_counter() - start, 3)
        prepared[name] = (
            contender.sample,
            [contender.convert(b) for b in timed],
            [contender.convert(b) for b in warmup],
            contender.sync,
        )
    timings = time_contenders(prepared, args.repeats)
    for row in rows:
        timing = timings.get(row["name"])
        if timing is not None:
            row.update(edge_timing_fields(timing))
    if OURS in timings:
        for row in rows:
            if row["name"] in timings:
                row["ratio"] = timings[OURS].edges_per_s / row["edges_per_s"]
                row["best_ratio"] = timings[OURS].best_edges_per_s / row["best_edges_per_s"]

    results = {
        "command": "sample",
        "graph": graph_info,
        "fanouts": fanouts,
        "batch": int(args.batch),
        "batches": int(args.batches),
        "warmup": int(args.warmup),
        "repeats": int(args.repeats),
        "device": str(device),
        "placement": args.placement,
        "seed": int(args.seed),
        "threads": args.threads,
        "machine": machine_with_peers(),
        "results": rows,
    }
    _print_report(results)
    return results


def _print_report(results: dict) -> None:
    from ._common import format_table, machine_line, shown_edge_row

    graph = results["graph"]
    print(
        f"sample: graph {graph['spec']} ({graph['num_nodes']:,} nodes, {graph['num_edges']:,} edges), "
        f"fanouts {results['fanouts']}, batch {results['batch']}, device {results['device']}\n" + machine_line(results)
    )
    columns = [
        ("name", "contender", ""),
        ("edges_per_s_m", "M edges/s", ".2f"),
        ("batches_per_s", "batches/s", ".1f"),
        ("ms_per_batch", "ms/batch", ".2f"),
        ("edges_per_batch", "edges/batch", ",.0f"),
        ("ratio", "ours/peer", ".2f"),
        ("best_edges_per_s_m", "best M e/s", ".2f"),
        ("best_ratio", "best ours/peer", ".2f"),
        ("detail", "notes", ""),
    ]
    print(format_table([shown_edge_row(row) for row in results["results"]], columns))

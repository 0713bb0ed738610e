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

__all__ = ["add_arguments", "run"]

OURS = "gglspeedup"
WIDE = "gglspeedup, int64 graph"


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from ._options import SAMPLING, add_common_arguments

    add_common_arguments(parser, *SAMPLING, "device", fanouts="25,10")
    parser.add_argument(
        "--placement",
        default="auto",
        choices=("auto", "device", "pinned", "host"),
        help="where our GPU sampler reads the graph: GPU memory or pinned host memory (UVA)",
    )
    add_common_arguments(
        parser,
        peers=(None, "comma-separated peers from numpy,dgl,pyg (default: all; unavailable ones are listed)"),
        seed=0,
        threads=(None, "CPU threads for Numba / torch / DGL"),
    )
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
    from ._options import check_peers, check_timing_args

    fanouts = parse_fanouts(args.fanouts)
    if args.peers is not None and not args.peers.strip():
        wanted = []  # --peers '': gglspeedup alone, as PeersMissing's message and every other command read it
    else:
        wanted = list(parse_names(args.peers, peers.PEERS) or peers.PEERS)
    check_timing_args(args)
    device = as_device(args.device).check_available()
    check_peers(args, wanted)  # before the graph is built
    return fanouts, wanted, device


def run(args) -> dict:
    """Measure every contender; print the table; return the results as a JSON-able dict."""
    import numpy as np

    from ..graph import CSRGraph
    from . import _common, peers

    fanouts, wanted, device = _validate(args)
    graph, graph_info = _common.load_graph(args.graph)
    batches = _common.seed_batches(graph.num_nodes, args.batch, args.warmup + args.batches, seed=args.seed)
    warmup, timed = batches[: args.warmup], batches[args.warmup :]
    _common.apply_threads(args.threads, wanted)

    def make(name):
        if name == OURS:
            return lambda: _prepare_ours(graph, fanouts, args.seed, device, args.placement)
        if name == WIDE:

            def wide():
                copy = CSRGraph(graph.indptr, graph.indices, edge_ids=graph.edge_ids, dtype=np.int64, _checked=True)
                return _prepare_ours(copy, fanouts, args.seed, device, args.placement)

            return wide
        return lambda: peers.prepare(name, graph, fanouts, seed=args.seed, device=device)

    # Prepare everyone first, then time them interleaved round by round (time_contenders).
    rows, prepared = [], {}
    for name in [OURS, *([WIDE] if getattr(args, "widths", False) else []), *wanted]:
        _common.prepare_contender(rows, prepared, name, make(name), timed, warmup)
    _common.set_ratios(rows, _common.time_rows(rows, prepared, args.repeats), OURS)
    results = {
        "command": "sample",
        "graph": graph_info,
        "fanouts": fanouts,
        **_common.timing_settings(args),
        "device": str(device),
        "placement": args.placement,
        **_common.run_footer(args, rows),
    }
    _print_report(results)
    return results


def _print_report(results: dict) -> None:
    from ._common import VS_PEER, edge_columns, print_edge_report

    graph = results["graph"]
    columns = edge_columns(*VS_PEER, rates=("edges_per_s_m", "batches_per_s", "ms_per_batch", "edges_per_batch"))
    header = (
        f"sample: graph {graph['spec']} ({graph['num_nodes']:,} nodes, {graph['num_edges']:,} edges), "
        f"fanouts {results['fanouts']}, batch {results['batch']}, device {results['device']}"
    )
    print_edge_report(header, results, columns)

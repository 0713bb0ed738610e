"""``python -m gglspeedup.bench temporal``: temporal sampling's edges/s beside plain sampling.

Example (the issue's target: temporal >= 70% of plain, rows sorted by time)::

    python -m gglspeedup.bench temporal --graph powerlaw:2000000:32 --fanouts 15,10 --batch 1024 \\
        --peers pyg --json temporal.json

Every node gets a time, uniform over ``[0, 10**6)`` (``--time edge``: every edge), drawn from
``--seed``; every seed gets a time uniform over the same range, so about half of each row is
eligible for a tree. Contenders, all on the same graph, seeds and seed times, timed in alternated
rounds (``time_contenders``):

- ``plain``: ``NeighborSampler(graph, fanouts)``, shared sampling (the reference of every ratio);
- ``plain disjoint``: ``disjoint=True``, one tree per seed without times (what temporal implies);
- ``plain disjoint, sorted rows``: the same on the time-sorted copy the temporal rows sample, which
  carries edge ids (the sort's permutation, so ``e_id`` stays the original edge): the temporal
  rows' own hop and graph without the window search, i.e. what they cost without times;
- ``temporal <strategy>, sorted rows``: the graph handed over with every row already ascending
  in time (the sampler checks it once and uses it as is), the sorted copy with its edge ids;
- ``temporal <strategy>, built in time order``: the same rows without edge ids (``e_id`` are
  positions, as in ``plain``'s graph; edge times given per position): a graph the caller built
  from its events in time order (``CSRGraph.from_edge_index(..., keep_edge_ids=False)``, whose
  stable sort keeps each row in event order), which the sampler samples as is;
- ``temporal uniform, unsorted rows``: the graph as generated; the sampler sorts a copy of its
  rows once at construction (its ``setup s`` is that cost; the draws are the sorted case's);
- ``pyg plain`` / ``pyg temporal <strategy>`` (``--peers pyg``, where pyg-lib is installed):
  ``torch.ops.pyg.neighbor_sample`` on the same CSR (the time-sorted one for temporal calls, as
  PyG's ``NeighborSampler`` sorts it), with ``node_time`` / ``edge_time``, ``seed_time`` and
  ``disjoint=True``. PyG expands only the nodes new at each hop of a tree, so it samples fewer
  edges per batch (the ``edges/batch`` column); edges/s stays comparable;
- ``dgl``: GraphBolt's ``temporal_sample_neighbors``, reported unavailable with the reason when
  its native library does not load (DGL 2.1 ships it for torch 2.0-2.2 only).

``vs plain`` is the median over rounds of a row's edges/s over its own library's ``plain`` edges/s
in the same round (:func:`._common.paired_ratio`); ``ours/pyg`` compares a temporal row of ours
with pyg-lib's row of the same strategy, the same way.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["add_arguments", "run", "make_times", "time_ordered"]

PLAIN = "plain"
PEERS = ("pyg", "dgl")
TIME_RANGE = 10**6
_TORCH_CSR: dict = {}  # id(graph) -> pyg-lib's (rowptr, col), while one run's contenders are prepared


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from ._options import SAMPLING, add_common_arguments

    add_common_arguments(parser, *SAMPLING)
    parser.add_argument(
        "--time", default="node", choices=("node", "edge"), help="filter by node times or edge times (default node)"
    )
    parser.add_argument(
        "--strategies", default="uniform", help="comma-separated temporal strategies: uniform, last (default uniform)"
    )
    add_common_arguments(
        parser,
        peers=("pyg,dgl", "comma-separated peers from: pyg, dgl ('' for none)"),
        seed=(0, "seed of the times, the batches and every sampler"),
        threads=None,
    )


def make_times(graph, kind: str, seed: int) -> np.ndarray:
    """int64 times uniform over ``[0, TIME_RANGE)``: one per node (``kind="node"``) or per edge id."""
    rng = np.random.default_rng([seed, 20])
    count = graph.num_nodes if kind == "node" else graph.num_edges
    return rng.integers(0, TIME_RANGE, count, dtype=np.int64)


def time_ordered(sorted_graph, given: dict) -> tuple:
    """``(graph, times)``: ``sorted_graph``'s rows without its edge ids (a graph built in time order,
    whose ``e_id`` are positions) and ``given``'s times for it (edge times moved to positions)."""
    from ..graph import CSRGraph

    if sorted_graph.edge_ids is None:
        return sorted_graph, given
    graph = CSRGraph(sorted_graph.indptr, sorted_graph.indices, _checked=True)
    if "edge_time" in given:
        return graph, {"edge_time": given["edge_time"][sorted_graph.edge_ids]}
    return graph, given


def _validate(args):
    from ._common import parse_fanouts, parse_names
    from ._options import check_peers, check_timing_args

    fanouts = parse_fanouts(args.fanouts)
    check_timing_args(args)
    strategies = parse_names(args.strategies, ("uniform", "last"), "--strategies") or ["uniform", "last"]
    wanted = [] if not args.peers.strip() else parse_names(args.peers, PEERS) or list(PEERS)
    check_peers(args, wanted, _why_unavailable)  # before the graph is built
    return fanouts, strategies, wanted


def _why_unavailable(name: str) -> str | None:
    """This command's peers: pyg-lib's ``neighbor_sample`` (``pyg``), GraphBolt (``dgl``)."""
    if name == "dgl":
        return _dgl_reason()
    try:
        import pyg_lib  # noqa: F401
    except ImportError as error:
        return f"pyg-lib does not import ({error}); see scripts/peer_env_pyg.sh"
    return None


def _ours(sampler, seed_times):
    """``sample(i) -> edges`` of batch ``i`` (the seeds and times are looked up, not converted)."""

    def sample(item) -> int:
        seeds, tree_time = item
        out = sampler.sample(seeds, seed_time=tree_time) if tree_time is not None else sampler.sample(seeds)
        return sum(int(adj.e_id.shape[0]) for adj in out.adjs)

    return sample


def _pyg_contender(graph, fanouts, times, kind, strategy, seed):
    """pyg-lib's ``neighbor_sample`` on ``graph`` (temporal when ``strategy`` is given)."""
    from .peers import PeerUnavailable

    try:
        import pyg_lib
        import torch
    except ImportError as error:
        raise PeerUnavailable(f"pyg-lib does not import ({error}); see scripts/peer_env_pyg.sh") from None
    if id(graph) not in _TORCH_CSR:  # one int64 copy per graph, shared by its contenders
        _TORCH_CSR.clear()
        _TORCH_CSR[id(graph)] = (
            torch.from_numpy(np.asarray(graph.indptr, dtype=np.int64)),
            torch.from_numpy(np.asarray(graph.indices, dtype=np.int64)),
        )
    rowptr, col = _TORCH_CSR[id(graph)]
    torch.manual_seed(seed)
    extra = {}
    if strategy is not None:
        extra = dict(disjoint=True, temporal_strategy=strategy)
        if kind == "node":
            extra["node_time"] = torch.from_numpy(times)
        else:  # one time per CSR position of this (sorted) graph
            extra["edge_time"] = torch.from_numpy(times)

    def sample(item) -> int:
        seeds, tree_time = item
        call = dict(extra)
        if strategy is not None:
            call["seed_time"] = tree_time
        out = torch.ops.pyg.neighbor_sample(rowptr, col, seeds, list(fanouts), csc=True, **call)
        return int(out[0].numel())

    def convert(item):
        seeds, tree_time = item
        return torch.from_numpy(seeds), (None if tree_time is None else torch.from_numpy(tree_time))

    return sample, convert, f"pyg-lib {pyg_lib.__version__}, torch {torch.__version__}"


def _dgl_reason() -> str:
    """Why GraphBolt's temporal sampler is not measured here."""
    from .peers import PeerUnavailable, import_dgl

    try:
        dgl = import_dgl()
        import dgl.graphbolt as graphbolt
    except (PeerUnavailable, ImportError) as error:
        return str(error)
    error = getattr(graphbolt, "GRAPHBOLT_LOAD_ERROR", None)
    if error is not None:
        return f"dgl {dgl.__version__}: GraphBolt's native library does not load here ({error.splitlines()[0]})"
    return f"dgl {dgl.__version__}: GraphBolt loads, but this bench does not drive its temporal_sample_neighbors yet"


def run(args) -> dict:
    """Measure every contender; print the table; return the results as a JSON-able dict."""
    from .. import __version__
    from ..sampling import NeighborSampler
    from ..sampling.temporal import position_times, sort_by_time
    from . import _common
    from .peers import Contender

    fanouts, strategies, wanted = _validate(args)
    graph, graph_info = _common.load_graph(args.graph)
    times = make_times(graph, args.time, args.seed)
    batches = _common.seed_batches(graph.num_nodes, args.batch, args.warmup + args.batches, seed=args.seed)
    rng = np.random.default_rng([args.seed, 21])
    seed_times = [rng.integers(0, TIME_RANGE, len(b), dtype=np.int64) for b in batches]
    if "pyg" in wanted:
        try:  # imported before the clocks start (its load is no part of a contender's setup)
            import pyg_lib  # noqa: F401
        except ImportError:
            pass  # reported when the contender is prepared
    _common.apply_threads(args.threads)
    given = {"node_time": times} if args.time == "node" else {"edge_time": times}

    start = time.perf_counter()
    per_position = position_times(graph, given.get("node_time"), given.get("edge_time"))[0]
    sorted_graph, sorted_times = sort_by_time(graph, per_position)
    del per_position
    sort_s = time.perf_counter() - start

    rows, prepared = [], {}

    def add(name, make, library="gglspeedup", timed_seed_times=True):
        items = [(b, t if timed_seed_times else None) for b, t in zip(batches, seed_times)]

        def contender():
            sample, convert, version, note = make()
            return Contender(name, version, sample, convert, None, note)

        _common.prepare_contender(
            rows, prepared, name, contender, items[args.warmup :], items[: args.warmup], library=library
        )

    ours = f"gglspeedup {__version__}"

    def our_sampler(graph_, note, **options):
        def make():
            sampler = NeighborSampler(graph_, fanouts, seed=args.seed, **options)
            return _ours(sampler, seed_times), (lambda item: item), ours, note

        return make

    add(PLAIN, our_sampler(graph, "shared sampling"), timed_seed_times=False)
    add("plain disjoint", our_sampler(graph, "disjoint=True, no times", disjoint=True), timed_seed_times=False)
    add(  # the temporal rows' floor: their graph (edge ids: the sort's), their hop, no times
        "plain disjoint, sorted rows",
        our_sampler(sorted_graph, "disjoint=True, no times, the time-sorted copy (edge ids)", disjoint=True),
        timed_seed_times=False,
    )
    for strategy in strategies:
        note = f"{args.time}_time, rows given sorted"
        add(f"temporal {strategy}, sorted rows", our_sampler(sorted_graph, note, **given, temporal_strategy=strategy))
    built, built_times = time_ordered(sorted_graph, given)
    for strategy in strategies:
        sampler = our_sampler(
            built, f"{args.time}_time, rows in time order, no edge ids", **built_times, temporal_strategy=strategy
        )
        add(f"temporal {strategy}, built in time order", sampler)
    add(
        f"temporal {strategies[0]}, unsorted rows",
        our_sampler(graph, f"{args.time}_time, rows sorted by the sampler", **given, temporal_strategy=strategies[0]),
    )
    if "pyg" in wanted:

        def pyg(strategy, on_graph, on_times):
            def make():
                sample, convert, version = _pyg_contender(on_graph, fanouts, on_times, args.time, strategy, args.seed)
                what = "neighbor_sample" if strategy is None else f"neighbor_sample, {args.time}_time, disjoint"
                return sample, convert, version, what

            return make

        for strategy in strategies:
            pyg_times = times if args.time == "node" else sorted_times
            add(f"pyg temporal {strategy}", pyg(strategy, sorted_graph, pyg_times), library="pyg")
        add("pyg plain", pyg(None, graph, None), library="pyg", timed_seed_times=False)
    _TORCH_CSR.clear()
    if "dgl" in wanted:
        rows.append({"name": "dgl temporal", "library": "dgl", "status": f"unavailable: {_dgl_reason()}"})

    timings = _common.time_rows(rows, prepared, args.repeats)
    for row in rows:
        timing = timings.get(row["name"])
        if timing is None:
            continue
        row["round_edges"] = list(timing.round_edges)
        plain = PLAIN if row["library"] == "gglspeedup" else "pyg plain"
        if plain in timings:
            row["vs_plain"] = _common.paired_ratio(timing, timings[plain])
    pairs = [(PLAIN, "pyg plain")] + [(f"temporal {s}, sorted rows", f"pyg temporal {s}") for s in strategies]
    for mine, peer in pairs:  # ours / pyg-lib, same round, shown on both rows
        if mine in timings and peer in timings:
            ratio = _common.paired_ratio(timings[mine], timings[peer])
            for row in rows:
                if row["name"] in (mine, peer):
                    row["ours_vs_pyg"] = ratio

    results = {
        "command": "temporal",
        "graph": graph_info,
        "fanouts": fanouts,
        **_common.timing_settings(args),
        "time": args.time,
        "strategies": strategies,
        "sort_s": round(sort_s, 3),
        **_common.run_footer(args, rows),
    }
    _print_report(results)
    return results


def _print_report(results: dict) -> None:
    from ._common import edge_columns, print_edge_report

    graph = results["graph"]
    columns = edge_columns(
        ("vs_plain", "vs plain", ".2f"), ("ours_vs_pyg", "ours/pyg", ".2f"), "best_edges_per_s_m", "setup_s"
    )
    header = (
        f"temporal: graph {graph['spec']} ({graph['num_nodes']:,} nodes, {graph['num_edges']:,} edges), "
        f"fanouts {results['fanouts']}, batch {results['batch']}, {results['time']} times uniform over "
        f"[0, {TIME_RANGE}), seed times too; rows sorted by time in {results['sort_s']} s"
    )
    print_edge_report(header, results, columns)

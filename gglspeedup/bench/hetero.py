"""``python -m gglspeedup.bench hetero``: typed sampling, ours beside DGL's, and typed vs untyped.

Example (the issue's CPU target)::

    python -m gglspeedup.bench hetero --dataset igbh-like:2000000 --fanouts 15,10 --batch 1024 --peers dgl

Contenders, on the same typed graph and the same seed batches, timed in interleaved rounds:

``gglspeedup``
    :class:`~gglspeedup.HeteroNeighborSampler` with ``--fanouts`` for every relation.
``gglspeedup untyped``
    the untyped :class:`~gglspeedup.NeighborSampler` on ``graph.to_homogeneous()`` with the same
    fanouts and the same seeds (mapped to homogeneous ids). A fanout there applies to a node's
    in-edges of every relation together, so it samples fewer edges per batch than the typed
    sampler (which draws ``min(k, deg)`` per relation); the comparison is in edges/s. Reported
    as typed edges/s / untyped edges/s (the design's target: within 20%, i.e. >= 0.80).
``dgl``
    DGL 2.1's ``dgl.dataloading.NeighborSampler(fanouts).sample_blocks`` on a ``dgl.heterograph``
    built from our relations' CSRs: relation ``(s, r, d)`` becomes DGL's canonical edge type
    ``(s, r, d)`` with edges ``s -> d``, stored as DGL's CSC (rows = ``d`` nodes, entries = ``s``
    ids, exactly our relation's arrays). DGL samples the in-edges of each block's destination
    nodes and makes every source node of a block a destination of the next, as ours does, so both
    draw ``min(k, deg)`` in-neighbours per relation of every node reached so far.

Seeds: batches of ``--batch`` distinct nodes of ``--seed-type``, slices of a seeded permutation as
in ``bench sample``. The default is the types the dataset labels: ``paper`` for ``igbh-like``
(IGBH labels papers only), every type for ``wordnet`` (every synset has its lexicographer file;
the batch then holds each type in proportion to its size: about 70% nouns), every type for a
``file:`` graph. ``--seed-type all`` draws from every node of every type, ``--seed-type noun``
from one type. Sampled edges are counted over every relation and hop.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["add_arguments", "run", "load_typed", "typed_seed_batches", "DATASET_HELP"]

OURS = "gglspeedup"
UNTYPED = "gglspeedup untyped"
PEERS = ("dgl",)
TARGET_TYPED_VS_UNTYPED = 0.8
DATASET_HELP = (
    "typed graph: 'igbh-like:NUM_PAPERS[:SEED]' (synthetic IGBH-shaped graph, types paper / author / "
    "institute / fos; NUM_PAPERS may read 2M), 'wordnet' (bundled), or 'file:PATH' (a HeteroGraph "
    "saved with HeteroGraph.save)"
)


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from ._options import SAMPLING, add_common_arguments

    parser.add_argument("--dataset", default="igbh-like:2000000", help=DATASET_HELP)
    add_common_arguments(
        parser, *SAMPLING[1:], fanouts=("15,10", "comma-separated per relation, seeds' hop first (15,10)")
    )
    parser.add_argument(
        "--seed-type",
        default=None,
        help="node type of the seeds, or 'all' (default: the labelled type, e.g. paper; all types without one)",
    )
    add_common_arguments(parser, "peers", "seed", threads=(None, "CPU threads for Numba / torch / DGL"))


# ---------------------------------------------------------------------------------- data
def load_typed(text: str):
    """The typed graph a ``--dataset`` string names (read by
    :func:`gglspeedup.datasets.spec.load_spec_typed_graph`, the one dataset-string grammar).

    Returns
    -------
    graph : HeteroGraph
    labelled : list of str
        The node types the dataset labels, the default seed types: ``paper`` for ``igbh-like``
        (IGBH labels papers only), every type for ``wordnet`` (each synset has its
        lexicographer file), none for ``file:``.
    description : dict
        ``{"spec", "num_nodes", "num_edges", "total_nodes", "total_edges", "load_s"}`` (per type
        and per relation) for the report.

    Raises
    ------
    ValueError
        a string of no typed form (the message names ``--dataset`` and the forms expected).
    """
    from ..datasets.spec import TYPED_KINDS, load_spec_typed_graph, parse_spec

    if not isinstance(text, str):
        raise TypeError(f"--dataset must be a str, got {type(text).__name__}")
    kind = text.strip().partition(":")[0].lower()
    if kind not in (*TYPED_KINDS, "file"):
        raise ValueError(f"--dataset {text!r} is not understood; {DATASET_HELP}")
    start = time.perf_counter()
    try:
        graph = load_spec_typed_graph(parse_spec(text, graph_only=True))
    except ValueError as error:
        raise ValueError(str(error).replace("--graph", "--dataset", 1)) from None
    labelled = {"igbh-like": ["paper"], "wordnet": list(graph.node_types)}.get(kind, [])
    description = {
        "spec": text,
        "num_nodes": {t: int(n) for t, n in graph.num_nodes.items()},
        "num_edges": {"/".join(et): int(n) for et, n in graph.num_edges.items()},
        "total_nodes": int(sum(graph.num_nodes.values())),
        "total_edges": int(sum(graph.num_edges.values())),
        "load_s": round(time.perf_counter() - start, 3),
    }
    return graph, labelled, description


def seed_types(graph, labelled, option) -> list:
    """The node types seeds are drawn from: ``option`` (a type or ``"all"``), else ``labelled``."""
    if option is None:
        return list(labelled) if labelled else list(graph.node_types)
    if option.strip().lower() == "all":
        return list(graph.node_types)
    if option not in graph.num_nodes:
        raise ValueError(f"--seed-type must be a node type of the graph or 'all'; known: {list(graph.node_types)}")
    return [option]


def typed_seed_batches(graph, types, batch_size: int, num_batches: int, seed: int = 0) -> list:
    """``num_batches`` dicts ``{type: int64 ids}`` of ``batch_size`` distinct nodes of ``types``.

    The batches are :func:`~gglspeedup.bench._common.seed_batches` over the nodes of ``types``
    laid end to end (in the graph's type order), split back by type, so a batch over several
    types holds each type in proportion to its node count.
    """
    from ._common import seed_batches

    types = [t for t in graph.node_types if t in types]
    counts = np.array([graph.num_nodes[t] for t in types], np.int64)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    out = []
    for ids in seed_batches(int(bounds[-1]), batch_size, num_batches, seed=seed):
        owner = np.searchsorted(bounds, ids, side="right") - 1
        out.append({t: ids[owner == i] - bounds[i] for i, t in enumerate(types) if (owner == i).any()})
    return out


# ---------------------------------------------------------------------------------- contenders
def _prepare_ours(graph, fanouts, seed):
    from .. import __version__
    from ..sampling import HeteroNeighborSampler
    from .peers import Contender

    sampler = HeteroNeighborSampler(graph, fanouts, seed=seed)

    def sample(seeds) -> int:
        counts = sampler.sample(seeds).num_sampled_edges
        return sum(sum(per_hop) for per_hop in counts.values())

    note = f"HeteroNeighborSampler, {len(graph.edge_types)} relations"
    return Contender(OURS, f"gglspeedup {__version__}", sample, note=note)


def _prepare_untyped(graph, fanouts, seed):
    from .. import __version__
    from ..sampling import NeighborSampler
    from .peers import Contender

    homogeneous, offsets = graph.to_homogeneous()
    sampler = NeighborSampler(homogeneous, fanouts, seed=seed)

    def convert(seeds):
        parts = [np.asarray(seeds[t], np.int64) + offsets[t] for t in graph.node_types if t in seeds]
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    def sample(seeds) -> int:
        _n_id, adjs = sampler.sample(seeds)
        return sum(int(adj.e_id.shape[0]) for adj in adjs)

    note = f"NeighborSampler on to_homogeneous() ({homogeneous.num_nodes:,} nodes)"
    return Contender(UNTYPED, f"gglspeedup {__version__}", sample, convert=convert, note=note)


def dgl_heterograph(graph):
    """A ``dgl.heterograph`` holding ``graph``'s relations as CSC (edges ``src -> dst``; edge ids
    = positions in each relation's CSR)."""
    from . import peers

    dgl = peers.import_dgl()
    import torch

    data = {}
    for edge_type in graph.edge_types:
        relation = graph[edge_type].to("cpu")
        indptr = torch.from_numpy(np.array(relation.indptr, dtype=np.int64))
        indices = torch.from_numpy(np.array(relation.indices, dtype=np.int64))
        data[edge_type] = ("csc", (indptr, indices, torch.empty(0, dtype=torch.int64)))
    num_nodes = {t: int(n) for t, n in graph.num_nodes.items()}
    return dgl.heterograph(data, num_nodes_dict=num_nodes).formats("csc")


def _prepare_dgl(graph, fanouts, seed):
    from . import peers

    dgl = peers.import_dgl()
    import torch

    dgl_graph = dgl_heterograph(graph)
    dgl.seed(seed)
    # DGL lists fanouts per layer, input layer first, so its last fanout applies to the seeds.
    sampler = dgl.dataloading.NeighborSampler(list(reversed(fanouts)))

    def convert(seeds):
        return {t: torch.from_numpy(np.asarray(ids, np.int64)) for t, ids in seeds.items()}

    def sample(seeds) -> int:
        _, _, blocks = sampler.sample_blocks(dgl_graph, seeds)
        return sum(int(block.num_edges()) for block in blocks)

    note = f"NeighborSampler.sample_blocks on a heterograph, {dgl.utils.get_num_threads()} threads"
    return peers.Contender("dgl", f"dgl {dgl.__version__}", sample, convert=convert, note=note)


# ---------------------------------------------------------------------------------- command
def _validate(args):
    from ._common import parse_fanouts, parse_names
    from ._options import check_peers, check_timing_args

    fanouts = parse_fanouts(args.fanouts)
    wanted = parse_names(args.peers, PEERS) if args.peers else []
    wanted = list(PEERS) if wanted is None else wanted
    check_timing_args(args)
    check_peers(args, wanted)  # before the graph is built
    return fanouts, wanted


def run(args) -> dict:
    """Measure ours (typed and untyped) and the peers; print the table; return a JSON-able dict."""
    from . import _common

    fanouts, wanted = _validate(args)
    graph, labelled, graph_info = load_typed(args.dataset)
    types = seed_types(graph, labelled, args.seed_type)
    batches = typed_seed_batches(graph, types, args.batch, args.warmup + args.batches, seed=args.seed)
    warmup, timed = batches[: args.warmup], batches[args.warmup :]
    _common.apply_threads(args.threads, wanted)

    rows, prepared = [], {}
    makers = {OURS: _prepare_ours, UNTYPED: _prepare_untyped, "dgl": _prepare_dgl}
    for name in [OURS, UNTYPED, *wanted]:
        _common.prepare_contender(
            rows, prepared, name, lambda name=name: makers[name](graph, fanouts, args.seed), timed, warmup
        )
    timings = _common.time_rows(rows, prepared, args.repeats)
    _common.set_ratios(rows, timings, OURS, paired=True)
    typed_vs_untyped = None
    if OURS in timings and UNTYPED in timings and timings[UNTYPED].edges:  # none with --fanouts 0
        typed, untyped = timings[OURS], timings[UNTYPED]
        typed_vs_untyped = {
            "median": typed.edges_per_s / untyped.edges_per_s,
            "best": typed.best_edges_per_s / untyped.best_edges_per_s,
            "paired": _common.paired_ratio(typed, untyped),
            "target": TARGET_TYPED_VS_UNTYPED,
        }
    results = {
        "command": "hetero",
        "dataset": graph_info,
        "seed_types": types,
        "fanouts": fanouts,
        **_common.timing_settings(args),
        "device": "cpu",
        **_common.run_footer(args, rows),
        "typed_vs_untyped": typed_vs_untyped,
    }
    _print_report(results)
    return results


def _print_report(results: dict) -> None:
    from ._common import VS_PEER, edge_columns, print_edge_report

    data = results["dataset"]
    types = ", ".join(f"{t} {n:,}" for t, n in data["num_nodes"].items())
    columns = edge_columns(*VS_PEER, "paired_ratio")
    header = (
        f"hetero: dataset {data['spec']} ({types}; {data['total_edges']:,} edges in {len(data['num_edges'])} "
        f"relations), seeds of {'/'.join(results['seed_types'])}, fanouts {results['fanouts']} per relation, "
        f"batch {results['batch']}, device {results['device']}"
    )
    print_edge_report(header, results, columns)
    ratio = results["typed_vs_untyped"]
    if ratio is not None:
        verdict = "met" if ratio["median"] >= ratio["target"] else "NOT met"
        print(
            f"typed / untyped edges/s: {ratio['median']:.3f} (median rounds), {ratio['best']:.3f} (fastest), "
            f"{ratio['paired']:.3f} (paired); target >= {ratio['target']:.2f}: {verdict}"
        )

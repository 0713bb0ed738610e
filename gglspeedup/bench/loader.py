"""``python -m gglspeedup.bench loader``: NodeLoader throughput with and without recycled buffers.

Example::

    python -m gglspeedup.bench loader --graph powerlaw:2M:16 --dim 128 --batch 1024 --fanouts 15,10,5

Two loaders over the same sampler, feature store and seeds differ only in ``reuse_buffers``: one
gathers every batch's rows into fresh memory (page faults on first write), the other into its pool
of recycled buffers. Rounds are interleaved (one pass of ``--batches`` batches each, the same
batches every round), and the caller holds each batch until the next arrives, as a training step
does. Reported per loader: batches/s over the pass, the gather's GB/s (the loader's own
``gather_s``), and the paired ratio pool / fresh (median over rounds of the ratio within a round).
"""

from __future__ import annotations

import time

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from ._options import add_common_arguments

    add_common_arguments(
        parser,
        graph="powerlaw:1M:16",
        dim=(128, "feature width, float32 (default 128)"),
        fanouts="15,10,5",
        batch=1024,
        batches=(20, "batches per timed pass (default 20)"),
        repeats=(7, "timed rounds; medians and best reported (default 7)"),
    )
    parser.add_argument(
        "--prefetch",
        type=int,
        default=0,
        help="batches prepared ahead on the loader's thread (default 0: all in this thread, so "
        "the pass time is the loader's own work)",
    )
    parser.add_argument("--backend", default="numpy", help="framework of the batches (default numpy)")
    add_common_arguments(parser, "threads", seed=(0, "seed of the table, the graph and the batches"))


def _pass(loader, batches: int) -> tuple[float, dict]:
    """Wall seconds for ``batches`` batches of epoch 0, holding each until the next (as a step does)."""
    loader.set_epoch(0)
    loader.stats(reset=True)
    start = time.perf_counter()
    held = None
    for index, batch in enumerate(loader):
        held = batch
        if index + 1 == batches:
            break
    seconds = time.perf_counter() - start
    del held
    return seconds, loader.stats(reset=True)


_COLUMNS = [
    ("loader", "loader", ""),
    ("batches_per_s_best", "batches/s best", ".1f"),
    ("batches_per_s_median", "median", ".1f"),
    ("gather_gbps_best", "gather GB/s best", ".2f"),
    ("gather_gbps_median", "median", ".2f"),
    ("gather_share", "gather share", ".2f"),
]


def _loader_row(name: str, rounds: list, batches: int, row_bytes: int) -> dict:
    """One loader's row from its rounds ``(seconds, stats)``: batches/s and gather GB/s (best and
    median) and the gather's median share of a pass."""
    import numpy as np

    seconds = np.array([s for s, _ in rounds])
    gather = np.array([stats["gather_s"] for _, stats in rounds])
    nbytes = row_bytes * np.array([stats["nodes"] for _, stats in rounds])
    return {
        "loader": name,
        "batches_per_s_best": batches / seconds.min(),
        "batches_per_s_median": batches / float(np.median(seconds)),
        "gather_gbps_best": float((nbytes / gather).max()) / 1e9,
        "gather_gbps_median": float(np.median(nbytes / gather)) / 1e9,
        "gather_share": float(np.median(gather / seconds)),
    }


def _paired(slow: list, fast: list, value) -> float:
    """The median over rounds of ``value(slow round) / value(fast round)``."""
    import numpy as np

    return float(np.median(np.array([value(*r) for r in slow]) / np.array([value(*r) for r in fast])))


def run(args) -> dict:
    import numpy as np

    from .. import __version__
    from ..backends import adapter
    from ..feature import FeatureStore
    from ..loader import NodeLoader
    from ..sampling import NeighborSampler
    from ..validation import parse_fanouts
    from ._common import format_table, load_graph, machine_info, set_threads
    from ._options import check_at_least_one

    # Before the graph and the table are built: --batches 0 ran an empty pass, --repeats 0 failed
    # in a median of nothing, the rest in the loader, all after the build.
    check_at_least_one(args, "batch", "batches", "repeats", "dim")
    if args.prefetch < 0:
        raise ValueError(f"--prefetch must be >= 0, got {args.prefetch}")
    if args.backend != "none":
        adapter(args.backend)  # the name checked; its framework is imported later, by the loader
    set_threads(args.threads)
    fanouts = parse_fanouts(args.fanouts)
    graph, description = load_graph(args.graph)
    rng = np.random.default_rng(args.seed)
    x = rng.random((graph.num_nodes, args.dim), dtype=np.float32)
    row_bytes = x.shape[1] * x.itemsize
    seeds = rng.permutation(graph.num_nodes)[: args.batch * args.batches]
    sampler = NeighborSampler(graph, fanouts, seed=args.seed)
    store = FeatureStore(x)
    backend = None if args.backend in ("none", "numpy") else args.backend
    loaders = {
        "fresh buffers (reuse_buffers=False)": NodeLoader(
            sampler, store, seeds, args.batch, prefetch=args.prefetch, backend=backend, reuse_buffers=False
        ),
        "recycled buffers (reuse_buffers=True)": NodeLoader(
            sampler, store, seeds, args.batch, prefetch=args.prefetch, backend=backend
        ),
    }
    for loader in loaders.values():  # warm-up: compilation, the pool's first allocations
        _pass(loader, min(args.batches, 3))
    rounds = {name: [] for name in loaders}
    for _ in range(args.repeats):
        for name, loader in loaders.items():
            rounds[name].append(_pass(loader, args.batches))
    fresh, pooled = list(loaders)
    rows = [_loader_row(name, rounds[name], args.batches, row_bytes) for name in loaders]
    paired_total = _paired(rounds[fresh], rounds[pooled], lambda seconds, stats: seconds)
    paired_gather = _paired(rounds[fresh], rounds[pooled], lambda seconds, stats: stats["gather_s"])
    reuse = rounds[pooled][-1][1]
    results = {
        "command": "loader",
        "graph": description,
        "fanouts": fanouts,
        "batch": args.batch,
        "batches": args.batches,
        "dim": args.dim,
        "prefetch": args.prefetch,
        "backend": args.backend,
        "repeats": args.repeats,
        "version": __version__,
        "machine": machine_info(),
        "rows": rows,
        "paired_speedup_pass": paired_total,
        "paired_speedup_gather": paired_gather,
        "pool_last_round": {k: v for k, v in reuse.items() if k.startswith("buffers_")},
    }
    print(
        f"NodeLoader, {description['num_nodes']:,} nodes / {description['num_edges']:,} edges, float32 x {args.dim}, "
        f"fanouts {fanouts}, batch {args.batch}, {args.batches} batches x {args.repeats} rounds, "
        f"prefetch {args.prefetch}, backend {args.backend}"
    )
    print(format_table(rows, _COLUMNS))
    print(
        f"recycled / fresh, paired (median over rounds): pass {paired_total:.2f}x, gather {paired_gather:.2f}x; "
        f"pool in the last round: {results['pool_last_round']}"
    )
    return results

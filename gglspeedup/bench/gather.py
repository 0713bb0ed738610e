"""``python -m gglspeedup.bench gather``: feature-gather GB/s beside the tier's copy ceiling and peers.

Example (the issue's CPU target)::

    python -m gglspeedup.bench gather --rows 2000000 --dim 128 --ids 200000 \\
        --cache 0,0.1,0.2,0.5,1.0 --batch-from sampler --device cpu

GB/s counts useful bytes: ``len(ids) * row_bytes`` per call. In the same run, interleaved round by
round, it measures the ceiling for the tier the gather reads (CPU: a parallel contiguous copy of
the same number of bytes with the same threads; GPU: a device-to-device copy and a pinned
host-to-device copy of the same bytes) and the peers ``numpy.take(mode="clip")`` (into a reused
and into a fresh output: each the peer of ours with the same output) and ``torch.index_select``.
The best and median of ``--repeats`` rounds are reported, and each ratio twice: best against
best, and the median over rounds of the ratio within one round ("paired", the steadier figure on a
shared machine). On the CPU the ceiling is the faster of two contiguous copies, one with streamed
(non-temporal) stores as our gather uses for large outputs and one through the cache.
With ``--batch-from sampler`` the ids are the ``n_id`` of sampled mini-batches of a synthetic
power-law graph with ``--rows`` nodes, seeded from a random ``--train-fraction`` of them (the
training set), and the hit rates of the ``degree`` and ``presample`` cache policies at each budget
are measured on held-out sampled batches from the same training set.
"""

from __future__ import annotations

import time

__all__ = ["add_arguments", "run", "gpu_contenders", "time_interleaved", "time_back_to_back", "paired_ratio"]

from ._timing import paired_ratio, time_back_to_back, time_interleaved

OURS = "gglspeedup"
RANDOM_READ = "random-row read (same rows, no writes)"
FRESH_TAKE = "numpy.take clip (fresh out)"


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from .._argtypes import at_least
    from ._options import add_common_arguments, device_text, numeric_dtype, seed_int

    parser.add_argument("--rows", type=int, default=2_000_000, help="table rows / graph nodes (default 2M)")
    add_common_arguments(parser, dim=(128, "row width in elements (default 128)"))
    parser.add_argument("--dtype", default="float32", type=numeric_dtype, help="table dtype (default float32)")
    parser.add_argument("--ids", type=int, default=200_000, help="rows gathered per call (default 200k)")
    parser.add_argument("--cache", default="0,0.1,0.2,0.5,1.0", help="device-cache budgets, table fractions in [0, 1]")
    parser.add_argument(
        "--batch-from",
        choices=("sampler", "uniform"),
        default="sampler",
        help="ids: n_id of sampled mini-batches, or uniform random rows",
    )
    parser.add_argument(
        "--avg-degree", type=at_least(0, float), default=16, help="power-law graph's mean degree (default 16)"
    )
    add_common_arguments(
        parser,
        fanouts=("15,10,5", "sampler fanouts, seeds' hop first"),
        batch=(1024, "seeds per sampled batch (default 1024)"),
    )
    parser.add_argument(
        "--train-fraction",
        type=float,
        default=1.0,
        help="with --batch-from sampler: seeds come from this random fraction of the nodes "
        "(the training set; ogbn-products ~0.08, papers100M ~0.011; default 1.0)",
    )
    parser.add_argument(
        "--presample-batches",
        type=at_least(1),
        default=32,
        help="batches the presample policy counts, and again held out to score it",
    )
    parser.add_argument("--repeats", type=at_least(1), default=9, help="timed rounds (default 9)")
    parser.add_argument("--device", default="cpu", type=device_text, help="cpu or cuda:N (default cpu)")
    parser.add_argument("--threads", type=at_least(1), default=None, help="CPU threads for Numba / torch")
    parser.add_argument("--seed", type=seed_int, default=0, help="seed of the table, the graph and the batches")


def _parse_ratios(text: str) -> list[float]:
    try:
        ratios = [float(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise ValueError(f"--cache must list fractions like '0,0.1,1.0', got {text!r}") from None
    if not ratios or not all(0 <= r <= 1 for r in ratios):  # 2 ran as 1.0, labelled 2; nan slipped past r < 0
        raise ValueError(f"--cache must list fractions of the table in [0, 1], got {text!r}")
    return ratios


def _training_nodes(num_nodes: int, fraction: float, seed: int):
    """A seeded random ``fraction`` of the nodes (at least one), sorted; ``None`` for all nodes."""
    import numpy as np

    if fraction >= 1:
        return None
    count = max(1, round(fraction * num_nodes))
    return np.sort(np.random.default_rng(seed + 7).choice(num_nodes, count, replace=False))


def _sampled_ids(graph, fanouts, batch, count, seed, train=None):
    """The n_id of consecutive sampled batches (seeds from ``train``, default every node),
    concatenated and cut to ``count`` ids."""
    import numpy as np

    from ..sampling import NeighborSampler
    from ._common import seed_batches

    sampler = NeighborSampler(graph, fanouts, seed=seed)
    pool = graph.num_nodes if train is None else len(train)
    parts, total = [], 0
    for positions in seed_batches(pool, batch, 10_000, seed=seed):
        seeds = positions if train is None else train[positions]
        n_id = np.asarray(sampler.sample(seeds)[0])
        parts.append(n_id)
        total += len(n_id)
        if total >= count:
            break
    return np.ascontiguousarray(np.concatenate(parts)[:count], dtype=np.int64)


def _policy_hit_rates(graph, fanouts, batch, num_batches, ratios, seed, train=None):
    """Held-out hit rates of the degree and presample orders at each budget (seeds from ``train``)."""
    from ..feature import policies

    start = time.perf_counter()
    halves = policies.presample_halves(graph, fanouts, batch, num_batches, seeds=train, seed=seed)
    presample_s = time.perf_counter() - start
    held_out = policies.presample_counts(graph, fanouts, batch, num_batches, seeds=train, seed=seed + 2)
    degree = policies.degree_order(graph)
    rows = []
    for ratio in ratios:
        cached = int(ratio * graph.num_nodes)
        presample, info = policies.presample_policy(graph, cached, halves)
        rows.append(
            {
                "cache": ratio,
                "degree": policies.expected_hit_rate(held_out, degree[:cached]),
                "presample": policies.expected_hit_rate(held_out, presample[:cached]),
                "order_from": info["order_from"],
            }
        )
    return rows, presample_s


def _cpu_contenders(x, ids, store):
    import numba
    import numpy as np

    from ..device import aligned_empty
    from ..feature import copy_contiguous, read_rows, word_dtype

    count, row_bytes = len(ids), x.shape[1] * x.dtype.itemsize
    ours_out, take_out = aligned_empty((count, x.shape[1]), x.dtype), aligned_empty((count, x.shape[1]), x.dtype)
    word = word_dtype(row_bytes)
    source = x[:count].view(word)  # the same number of bytes, contiguous (rows of the same table)
    table_words = x.view(word)
    copy_out = aligned_empty((count, row_bytes // word.itemsize), word)

    def one_thread(call):
        # per-core efficiency: on a shared machine the second thread may find no free core
        def timed():
            threads = numba.get_num_threads()
            numba.set_num_threads(1)
            try:
                call()
            finally:
                numba.set_num_threads(threads)

        return timed

    contenders = {
        f"{OURS} (warm out)": lambda: store.gather(ids, out=ours_out),
        f"{OURS} (warm out, 1 thread)": one_thread(lambda: store.gather(ids, out=ours_out)),
        f"{OURS} (fresh out)": lambda: store[ids],
        "numpy.take clip (warm out)": lambda: np.take(x, ids, axis=0, mode="clip", out=take_out),
        FRESH_TAKE: lambda: np.take(x, ids, axis=0, mode="clip"),  # the peer of our fresh output
        "numpy x[ids] (fresh out)": lambda: x[ids],
        # the ceiling is the faster of the two (streamed stores, like ours on large outputs, won here)
        "parallel contiguous copy": lambda: copy_contiguous(source, copy_out, True),
        "parallel contiguous copy (cached stores)": lambda: copy_contiguous(source, copy_out, False),
        # the random-row ceiling: the gather's own rows read with its prefetching, nothing written
        RANDOM_READ: lambda: read_rows(table_words, ids),
    }
    try:
        import torch
    except ImportError:
        return contenders
    table, index = torch.from_numpy(x), torch.from_numpy(ids)
    torch_out = torch.empty((count, x.shape[1]), dtype=table.dtype)
    contenders["torch.index_select (warm out)"] = lambda: torch.index_select(table, 0, index, out=torch_out)
    return contenders


def gpu_contenders(x, ids, device, ratios, graph):
    """Ours per cache ratio, the D2D and pinned H2D copy ceilings, cupy.take / torch peers."""
    import cupy
    import numpy as np

    from ..device import pinned_empty
    from ..feature import FeatureStore

    count, dim = len(ids), x.shape[1]
    contenders, stores = {}, {}
    policy = None if graph is not None else np.arange(len(x))
    if x.dtype.kind == "V":  # bfloat16 & co.: CuPy moves them as same-size unsigned bits
        x = x.view(f"u{x.dtype.itemsize}")
    with device:
        device_ids = cupy.asarray(ids)
        out = cupy.empty((count, dim), dtype=x.dtype)
        for ratio in ratios:
            store = FeatureStore(x, device=device, cache_size=int(ratio * x.nbytes), graph=graph, policy=policy)
            stores[ratio] = store
            contenders[f"{OURS} cache={ratio:g}"] = lambda s=store: s.gather(device_ids, out=out)
            # ids a sampler produced are in range by construction: the loader gathers them unchecked,
            # which saves the range check's kernels and its device-to-host sync
            contenders[f"{OURS} cache={ratio:g}, check=False"] = lambda s=store: s.gather(
                device_ids, out=out, check=False
            )
            # the range check done by the gather kernel, raised at a later call: no sync of its own
            contenders[f"{OURS} cache={ratio:g}, check=deferred"] = lambda s=store: s.gather(
                device_ids, out=out, check="deferred"
            )
        source = cupy.asarray(x[:count])
        copy_out = cupy.empty_like(source)
        contenders["device-to-device copy"] = lambda: copy_out.__setitem__(Ellipsis, source)
        pinned = pinned_empty((count, dim), x.dtype)
        pinned[...] = x[:count]
        contenders["pinned host-to-device copy"] = lambda: copy_out.set(pinned)
        if len(x) * dim * x.dtype.itemsize < 0.5 * cupy.cuda.runtime.memGetInfo()[0]:
            table = cupy.asarray(x)
            contenders["cupy.take (table on GPU)"] = lambda: cupy.take(table, device_ids, axis=0, out=out)
            contenders.update(_torch_gpu_peer(table, device_ids, out))
    return contenders, stores


def _torch_gpu_peer(table, device_ids, out) -> dict:
    """``torch.index_select`` on the same GPU arrays (zero-copy through DLPack), when torch has CUDA."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    try:  # a dtype torch cannot index on the GPU (e.g. bfloat16 moved as uint16) leaves the peer out
        torch_table, torch_ids, torch_out = (torch.from_dlpack(a) for a in (table, device_ids, out))
        torch.index_select(torch_table, 0, torch_ids[:1], out=torch_out[:1])
    except (RuntimeError, TypeError, BufferError):
        return {}
    return {"torch.index_select (table on GPU)": lambda: torch.index_select(torch_table, 0, torch_ids, out=torch_out)}


def _note_environment(results) -> None:
    """Threading layer, OMP wait policy and load average: a shared or oversubscribed machine shows
    in the median column first (GNU OpenMP's default waiting made median calls ~20 ms slower
    here at a load average of 6 on 2 cores)."""
    import os

    import numba

    try:
        load = [round(value, 2) for value in os.getloadavg()]
    except OSError:  # not available on this platform
        load = None
    results["environment"] = {
        "threading_layer": numba.threading_layer(),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "loadavg": load,
    }
    print(
        f"numba threading layer {numba.threading_layer()}, OMP_WAIT_POLICY="
        f"{os.environ.get('OMP_WAIT_POLICY')}, load average {load}"
    )


def run(args) -> dict:
    import numpy as np

    from ._common import machine_info, parse_fanouts, set_threads, wait_passively

    # torch's OpenMP threads spin after each call: interleaved after torch.index_select, our
    # gather waited for cores and its median went from 9.4 to 17.7 ms (2 cores). Passive
    # waiting lets every contender start on idle cores (torch's own median: 13.4 -> 11.4 ms).
    wait_passively()
    from ..device import as_device
    from ..feature import FeatureStore

    set_threads(args.threads)
    device = as_device(args.device)
    if device.simulated:
        raise ValueError("the gather benchmark needs a real GPU for cuda devices (the simulator runs ~1 ms per thread)")
    ratios = _parse_ratios(args.cache)
    fanouts = parse_fanouts(args.fanouts)
    if args.rows < 1 or args.dim < 1 or args.ids < 1:
        raise ValueError("--rows, --dim and --ids must be >= 1")
    if args.batch < 1:  # before the table is built (it was refused by the sampler after it)
        raise ValueError(f"--batch must be >= 1, got {args.batch}")
    if not 0 < args.train_fraction <= 1:
        raise ValueError(f"--train-fraction must be in (0, 1], got {args.train_fraction}")
    rng = np.random.default_rng(args.seed)
    x = rng.random((args.rows, args.dim), dtype=np.float32).astype(args.dtype, copy=False)
    results = {"machine": machine_info(), "args": {k: v for k, v in vars(args).items() if not k.startswith("_")}}
    ids, graph, train = _gather_ids(args, fanouts, rng, results)
    useful = len(ids) * args.dim * x.dtype.itemsize
    print(
        f"table {x.shape} {x.dtype} ({x.nbytes / 2**30:.2f} GiB), {len(ids)} ids from {args.batch_from}, "
        f"{useful / 2**20:.1f} MiB per gather, device {device}"
    )
    if device.is_cuda:
        contenders, stores = gpu_contenders(x, ids, device, ratios, graph)
        sync = lambda: device.xp.cuda.get_current_stream().synchronize()  # noqa: E731
    else:
        store = FeatureStore(x)  # one tier on the CPU: every cache ratio reads the same table
        contenders, stores, sync = _cpu_contenders(x, ids, store), {}, None
    timings = time_interleaved(contenders, args.repeats, sync)
    _note_environment(results)
    rows, results["ceiling"] = _gather_rows(timings, useful, device.is_cuda)
    rows_by_name = {row["name"]: row for row in rows}
    for ratio, store in stores.items():
        store.reset_stats()
        store.gather(ids)
        rows_by_name[f"{OURS} cache={ratio:g}"]["hit_rate"] = store.stats()["hit_rate"]
    _print_gather(rows, results["ceiling"], device.is_cuda)
    results["gather"] = rows
    if graph is not None:
        _policy_report(args, graph, fanouts, ratios, train, results)
    return results


def _gather_ids(args, fanouts, rng, results):
    """``(ids, graph, train)``: ``--ids`` uniform rows, or the ``n_id`` of sampled batches of a
    synthetic power-law graph seeded from its training nodes (``--batch-from sampler``)."""
    import numpy as np

    if args.batch_from != "sampler":
        return rng.integers(0, args.rows, args.ids, dtype=np.int64), None, None
    from .. import datasets

    start = time.perf_counter()
    avg = int(args.avg_degree) if args.avg_degree == int(args.avg_degree) else args.avg_degree
    graph = datasets.synthetic_powerlaw(args.rows, avg, seed=args.seed)
    results["graph"] = {
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "build_s": round(time.perf_counter() - start, 2),
    }
    train = _training_nodes(graph.num_nodes, args.train_fraction, args.seed)
    results["train_nodes"] = graph.num_nodes if train is None else len(train)
    return _sampled_ids(graph, fanouts, args.batch, args.ids, args.seed, train), graph, train


def _gather_rows(timings: dict, useful: int, gpu: bool):
    """``(rows, ceiling)``: every contender's GB/s and ratios, ``ceiling`` the stricter copy (the
    one faster in this run, best round and per round). GPU rows also carry their ratio to the pinned
    host-to-device copy (the bound of pinned rows), CPU rows to ``numpy.take`` (fresh to fresh)."""
    import numpy as np

    copies = ["parallel contiguous copy", "parallel contiguous copy (cached stores)"]
    ceilings = ["device-to-device copy"] if gpu else copies
    ceiling = min(ceilings, key=lambda name: min(timings[name][0]))
    ceiling_rounds = np.min([timings[name][0] for name in ceilings], axis=0)
    peer_key, peer = ("h2d", "pinned host-to-device copy") if gpu else ("take", "numpy.take clip (warm out)")
    rows = []
    for name, (rounds, cpu) in timings.items():
        best, fresh = min(rounds), "(fresh out)" in name and FRESH_TAKE in timings
        peer_rounds = timings[FRESH_TAKE if fresh else peer][0]  # like for like
        rows.append(
            {
                "name": name,
                "best_gbs": useful / best / 1e9,
                "median_gbs": useful / float(np.median(rounds)) / 1e9,
                "cpu_gbs": useful / cpu / 1e9 if cpu > 0 else None,
                "vs_ceiling": min(timings[ceiling][0]) / best,
                "paired_vs_ceiling": paired_ratio(rounds, ceiling_rounds),
                f"vs_{peer_key}": min(peer_rounds) / best,
                f"paired_vs_{peer_key}": paired_ratio(rounds, peer_rounds),
            }
        )
        if RANDOM_READ in timings:  # the CPU's random-row ceiling (reads only)
            rows[-1]["vs_random_read"] = min(timings[RANDOM_READ][0]) / best
    return rows, ceiling


def _print_gather(rows, ceiling: str, gpu: bool) -> None:
    from ._common import format_table

    peer, peer_key = ("H2D", "h2d") if gpu else ("numpy.take", "take")
    columns = [
        ("name", "contender", ""),
        ("best_gbs", "GB/s best", ".2f"),
        ("median_gbs", "GB/s median", ".2f"),
        ("cpu_gbs", "GB per CPU-s", ".2f"),
        ("vs_ceiling", "x ceiling", ".2f"),
        ("paired_vs_ceiling", "paired", ".2f"),
        (f"vs_{peer_key}", f"x {peer}", ".2f"),
        (f"paired_vs_{peer_key}", "paired", ".2f"),
        ("vs_random_read", "x random read", ".2f"),
        ("hit_rate", "hit rate", ".3f"),
    ]
    print(format_table(rows, columns))
    fresh = "" if gpu else " (fresh outputs against its fresh output)"
    print(f"x ceiling: best against the best of '{ceiling}' (the faster copy here).")
    print(f"x {peer}: best against best{fresh}; 'paired': the median over rounds of the same ratio in one round.")
    if not gpu:
        print(f"x random read: best against the best of '{RANDOM_READ}' (what random rows cost here).")
        print("CPU: one tier (the caller's table), so the cache ratios do not change the CPU gather.")


def _policy_report(args, graph, fanouts, ratios, train, results) -> None:
    """The degree and presample policies' hit rates on held-out sampled batches, printed and kept."""
    from ._common import format_table

    policy_rows, presample_s = _policy_hit_rates(
        graph, fanouts, args.batch, args.presample_batches, ratios, args.seed, train
    )
    print(
        f"\ncache policy hit rates on {args.presample_batches} held-out sampled batches, seeds from "
        f"{results['train_nodes']} training nodes "
        f"(presample counted {args.presample_batches} batches in {presample_s:.1f} s; it falls back "
        "to the degree order where its two halves predict each other worse):"
    )
    columns = [
        ("cache", "cache ratio", "g"),
        ("degree", "degree", ".4f"),
        ("presample", "presample", ".4f"),
        ("order_from", "presample order from", ""),
    ]
    print(format_table(policy_rows, columns))
    results["policies"] = policy_rows
    results["presample_s"] = presample_s

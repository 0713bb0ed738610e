"""``python -m gglspeedup.bench soak --minutes N``: node, link and typed loaders with prefetching run
in turn for ``N`` minutes while a thread samples the process's resident memory every second.

Not a throughput measurement: a leak check. Each round is one epoch of each loader (a
:class:`~gglspeedup.NodeLoader` over a :class:`~gglspeedup.NeighborSampler`, a
:class:`~gglspeedup.LinkLoader` with binary negatives and reverse exclusion, and a typed
``NodeLoader`` over a :class:`~gglspeedup.HeteroNeighborSampler`), every batch's features checked
against the table. The report gives RSS at 1 minute (the warm-up, compilation and buffer pools
done) and at the end, and calls the run flat when the two differ by at most 2%.

Example::

    python -m gglspeedup.bench soak --minutes 20 --json soak.json
"""

from __future__ import annotations

import threading
import time

import numpy as np

__all__ = ["add_arguments", "run", "rss_mib", "FLAT"]

FLAT = 0.02  # |RSS at the end / RSS at 1 minute - 1| at most this: flat
_WARM_S = 60.0


def add_arguments(parser) -> None:
    parser.add_argument("--minutes", type=float, default=20.0, help="how long to run (default 20)")
    parser.add_argument("--nodes", type=int, default=200_000, help="nodes of the random graph (default 200,000)")
    parser.add_argument("--batch-size", type=int, default=1024, help="seeds (or pairs) per batch (default 1024)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between RSS samples (default 1)")


def rss_mib() -> float:
    """Resident memory of this process in MiB (``VmRSS``; NaN where /proc is missing)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) / 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    return float("nan")


def _loaders(num_nodes: int, batch_size: int) -> dict:
    import gglspeedup as gg

    rng = np.random.default_rng(0)
    edge_index = rng.integers(0, num_nodes, (2, 10 * num_nodes))
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes)
    x = rng.random((num_nodes, 32), dtype=np.float32)
    store = gg.FeatureStore(x)
    sampler = gg.NeighborSampler(graph, [10, 5])
    half = num_nodes // 2
    typed_graph = gg.HeteroGraph(
        {
            ("a", "to", "b"): np.stack([edge_index[0] % half, edge_index[1] % half]),
            ("b", "to", "a"): np.stack([edge_index[1] % half, edge_index[0] % half]),
        },
        {"a": half, "b": half},
    )
    typed_x = {"a": x[:half], "b": x[half : 2 * half]}
    pairs = edge_index[:, : 8 * batch_size]
    options = {"prefetch": 2, "backend": None}
    loaders = {
        "node": (gg.NodeLoader(sampler, store, np.arange(min(num_nodes, 16 * batch_size)), batch_size, **options), x),
        "link": (
            gg.LinkLoader(sampler, store, pairs, batch_size, negatives="binary", exclude="reverse", **options),
            x,
        ),
        "typed": (
            gg.NodeLoader(
                gg.HeteroNeighborSampler(typed_graph, [10, 5]),
                gg.HeteroFeatureStore(typed_x),
                {"a": np.arange(min(half, 8 * batch_size))},
                batch_size,
                **options,
            ),
            typed_x,
        ),
    }
    return loaders


def _check(batch, x) -> None:
    """Every gathered row is the table's row (a soak that returned wrong rows would not be one)."""
    if isinstance(x, dict):
        for node_type, rows in batch.x.items():
            np.testing.assert_array_equal(rows, x[node_type][np.asarray(batch.n_id[node_type])])
    else:
        np.testing.assert_array_equal(batch.x, x[np.asarray(batch.n_id)])


class _Sampler(threading.Thread):
    """Samples RSS every ``interval`` seconds until stopped: ``(seconds since start, MiB)``."""

    def __init__(self, interval: float, start: float):
        super().__init__(name="gglspeedup-soak-rss", daemon=True)
        self.interval, self.start_s, self.samples = interval, start, []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append((time.perf_counter() - self.start_s, rss_mib()))
            self.stop.wait(self.interval)


def _at(samples: list, seconds: float) -> float:
    """RSS of the first sample at or after ``seconds`` (the last one when the run was shorter)."""
    return next((mib for t, mib in samples if t >= seconds), samples[-1][1])


def run(args) -> dict:
    if not args.minutes > 0:
        raise ValueError(f"--minutes must be > 0, got {args.minutes}")
    if not args.interval > 0:
        raise ValueError(f"--interval must be > 0 seconds, got {args.interval}")
    if args.nodes < 16 or args.batch_size < 1:
        raise ValueError(f"--nodes must be >= 16 and --batch-size >= 1, got {args.nodes} and {args.batch_size}")
    start = time.perf_counter()
    sampler = _Sampler(args.interval, start)
    sampler.start()
    loaders = _loaders(args.nodes, args.batch_size)
    batches = dict.fromkeys(loaders, 0)
    rounds = 0
    deadline = start + 60.0 * args.minutes
    try:
        while rounds == 0 or time.perf_counter() < deadline:  # at least one round
            for name, (loader, x) in loaders.items():
                for batch in loader:
                    _check(batch, x)
                    batches[name] += 1
            rounds += 1
    finally:
        sampler.stop.set()
        sampler.join()
    samples = sampler.samples + [(time.perf_counter() - start, rss_mib())]
    at_warm, at_end = _at(samples, _WARM_S), samples[-1][1]
    drift = at_end / at_warm - 1.0
    result = {
        "minutes": args.minutes,
        "rounds": rounds,
        "batches": batches,
        "rss_at_1_min_mib": round(at_warm, 1),
        "rss_at_end_mib": round(at_end, 1),
        "rss_peak_mib": round(max(mib for _, mib in samples), 1),
        "drift": round(drift, 4),
        "flat": abs(drift) <= FLAT,
        "samples": [(round(t, 2), round(mib, 1)) for t, mib in samples],
    }
    print(
        f"soak: {args.minutes:g} min, {rounds} rounds, batches {batches}; RSS {result['rss_at_1_min_mib']} MiB at "
        f"1 min, {result['rss_at_end_mib']} MiB at the end (peak {result['rss_peak_mib']}): drift "
        f"{100 * drift:+.2f}% -> {'flat' if result['flat'] else 'NOT flat'} (within {100 * FLAT:.0f}%)"
    )
    return result

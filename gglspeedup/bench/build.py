"""``python -m gglspeedup.bench build``: building a CSR graph in memory, ours beside the stable argsort.

Example (the billion-edge issue's in-memory target, on the 64M-edge benchmark graph)::

    python -m gglspeedup.bench build --graph powerlaw:2000000:32 --repeats 3

The graph's edges are shuffled into a random order (an edge list as a user has it; a sorted one
would flatter the argsort) and handed, as one int64 ``[2, E]`` array, to each contender in
interleaved rounds:

- ``gglspeedup``: ``CSRGraph.from_edge_index`` (parallel counting sort; edge ids kept, as before);
- ``gglspeedup, no edge ids``: the same with ``keep_edge_ids=False``;
- ``argsort``: what ``from_edge_index`` did until this release (a stable ``np.argsort`` of the
  targets, ``bincount`` + ``cumsum`` for ``indptr``, int64 outputs).

Every contender's output is checked equal to the argsort's. Memory is NumPy's peak allocation
during a build (``tracemalloc``), beyond the input. ``CPU s`` is the process's CPU time over the
build (all threads: ours runs on every core, the argsort on one), the figure that holds when other
jobs share the cores; ``x argsort`` compares wall-clock medians, ``x argsort CPU`` CPU medians.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc

import numpy as np

__all__ = ["add_arguments", "run", "argsort_csr"]


def add_arguments(parser) -> None:
    from ._options import add_common_arguments

    add_common_arguments(
        parser,
        "graph",
        repeats=(3, "interleaved rounds; the median is reported (default 3)"),
        seed=(0, "seed of the edge shuffle"),
        threads=(None, "CPU threads for Numba"),
    )


def argsort_csr(edge_index: np.ndarray, num_nodes: int):
    """The previous ``CSRGraph.from_edge_index`` (direction "in"): ``(indptr, indices, edge_ids)``,
    int64, rows in input order (a stable argsort of the targets)."""
    rows, cols = edge_index[1], edge_index[0]
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=num_nodes), out=indptr[1:])
    return indptr, cols[order], order


def _edge_list(graph, seed):
    indptr = np.asarray(graph.indptr)
    targets = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(indptr))
    order = np.random.default_rng(seed).permutation(graph.num_edges)
    return np.stack([np.asarray(graph.indices, dtype=np.int64)[order], targets[order]])


def _timed(build):
    tracemalloc.start()
    start, cpu_start = time.perf_counter(), time.process_time()
    result = build()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, seconds, cpu, peak


def run(args) -> dict:
    from ..graph import CSRGraph
    from ._common import apply_threads, format_table, load_graph, machine_info, table_columns
    from ._options import check_at_least_one

    check_at_least_one(args, "repeats")
    apply_threads(args.threads)
    graph, graph_info = load_graph(args.graph)
    edge_index = _edge_list(graph, args.seed)
    num_nodes = graph.num_nodes
    del graph
    contenders = {
        "gglspeedup": lambda: CSRGraph.from_edge_index(edge_index, num_nodes),
        "gglspeedup, no edge ids": lambda: CSRGraph.from_edge_index(edge_index, num_nodes, keep_edge_ids=False),
        "argsort (previous from_edge_index)": lambda: argsort_csr(edge_index, num_nodes),
    }
    CSRGraph.from_edge_index(edge_index[:, :100_000], num_nodes)  # compile the kernels outside the clock
    seconds = {name: [] for name in contenders}
    cpu_seconds = {name: [] for name in contenders}
    peaks = {name: 0 for name in contenders}
    reference = None
    for _ in range(args.repeats):
        for name, build in contenders.items():
            result, elapsed, cpu, peak = _timed(build)
            seconds[name].append(elapsed)
            cpu_seconds[name].append(cpu)
            peaks[name] = max(peaks[name], peak)
            if name.startswith("argsort"):
                reference = result
            elif reference is not None:
                _check_equal(result, reference)
            del result
    _check_equal(contenders["gglspeedup"](), reference)
    baseline = statistics.median(seconds["argsort (previous from_edge_index)"])
    cpu_baseline = statistics.median(cpu_seconds["argsort (previous from_edge_index)"])
    rows = []
    for name in contenders:
        median = statistics.median(seconds[name])
        cpu_median = statistics.median(cpu_seconds[name])
        rows.append(
            {
                "name": name,
                "median_s": median,
                "best_s": min(seconds[name]),
                "speedup": baseline / median,
                "edges_per_s_m": edge_index.shape[1] / median / 1e6,
                "peak_mb": peaks[name] / 2**20,
                "seconds": seconds[name],
                "cpu_s": cpu_median,
                "cpu_speedup": cpu_baseline / cpu_median,
                "cpu_seconds": cpu_seconds[name],
            }
        )
    results = {
        "command": "build",
        "graph": graph_info,
        "num_edges": int(edge_index.shape[1]),
        "input_mb": edge_index.nbytes / 2**20,
        "repeats": args.repeats,
        "threads": args.threads,
        "machine": machine_info(),
        "results": rows,
    }
    print(
        f"build: {edge_index.shape[1]:,} edges (int64 input, {results['input_mb']:.0f} MiB, shuffled), "
        f"{num_nodes:,} nodes, {args.repeats} interleaved rounds\n{_machine_text(results['machine'])}"
    )
    columns = table_columns(
        "name",
        ("median_s", "median s", ".2f"),
        ("best_s", "best s", ".2f"),
        "edges_per_s_m",
        ("speedup", "x argsort", ".1f"),
        ("cpu_s", "CPU s", ".2f"),
        ("cpu_speedup", "x argsort CPU", ".1f"),
        ("peak_mb", "peak MiB", ",.0f"),
    )
    print(format_table(rows, columns))
    return results


def _machine_text(machine: dict) -> str:
    keys = ("numba_threads", "numba_threading_layer")
    threads = ", ".join(f"{k} {machine[k]}" for k in keys if k in machine)
    return f"machine: {machine['usable_cores']} usable cores of {machine['cpu_count']}, {threads}"


def _check_equal(result, reference) -> None:
    indptr, indices, edge_ids = reference
    ours = (result.indptr, result.indices, result.edge_ids)
    for name, mine, theirs in zip(("indptr", "indices", "edge_ids"), ours, (indptr, indices, edge_ids)):
        if mine is not None and not np.array_equal(mine, theirs):
            raise AssertionError(f"bench build: {name} differs from the argsort's")

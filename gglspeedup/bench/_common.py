"""Shared pieces of the benchmark commands: graph specs, seed batches, timing, machine facts.

Every contender in one run reads the same graph, the same seed batches and the same clock, so the
ratios in a table compare like with like even on a busy machine. Nothing heavy is imported at
module level; frameworks load only when a contender or a graph spec needs them.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..datasets.spec import load_spec_graph, parse_spec
from ..validation import parse_fanouts

__all__ = [
    "load_graph",
    "parse_fanouts",
    "parse_names",
    "seed_batches",
    "set_threads",
    "machine_info",
    "Timing",
    "time_pass",
    "time_contenders",
    "paired_ratio",
    "format_table",
    "prepare_contender",
    "time_rows",
    "set_ratios",
    "timing_settings",
    "run_footer",
    "wait_passively",
    "EDGE_RATES",
    "VS_PEER",
    "EDGE_COLUMNS",
    "table_columns",
    "edge_columns",
    "print_edge_report",
]


def load_graph(spec: str):
    """The :class:`~gglspeedup.graph.CSRGraph` a ``--graph`` spec names (see ``datasets.spec.GRAPH_SPEC_HELP``;
    parsed by :func:`gglspeedup.datasets.spec.parse_spec`, the one dataset-string grammar).

    Returns
    -------
    graph : CSRGraph
    description : dict
        ``{"spec", "num_nodes", "num_edges", "load_s"}`` for the report.

    Raises
    ------
    ValueError
        for a malformed spec, or a dataset path without its files (the message names ``--graph``).
    """
    start = time.perf_counter()
    graph = load_spec_graph(parse_spec(spec, graph_only=True))
    description = {
        "spec": spec,
        "num_nodes": int(graph.num_nodes),
        "num_edges": int(graph.num_edges),
        "load_s": round(time.perf_counter() - start, 3),
    }
    return graph, description


def parse_names(text, known: Sequence[str], option: str = "--peers") -> list[str] | None:
    """``"dgl,numpy"`` -> ``["dgl", "numpy"]`` (``None`` or ``"all"`` -> ``None``: every one)."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("", "all")):
        return None
    names = [name.strip().lower() for name in (text.split(",") if isinstance(text, str) else text)]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"{option} must name some of {', '.join(known)}; unknown: {', '.join(unknown)}")
    return list(dict.fromkeys(names))


def seed_batches(num_nodes: int, batch_size: int, num_batches: int, seed: int = 0) -> list[np.ndarray]:
    """``num_batches`` int64 seed batches of ``batch_size`` distinct node ids each (at most every
    node: a larger ``batch_size`` is said on stderr): consecutive slices of a seeded permutation, as
    a shuffling loader makes them, a new one when it is used up. Every contender gets this list."""
    if num_nodes < 1:
        raise ValueError(f"the graph must have at least one node to draw seeds from, got {num_nodes}")
    if batch_size < 1:
        raise ValueError(f"--batch must be >= 1, got {batch_size}")
    if num_batches < 1:
        raise ValueError(f"--batches must be >= 1, got {num_batches}")
    rng = np.random.default_rng(seed)
    if batch_size > num_nodes:  # distinct seeds: a batch holds every node at most once (said on stderr)
        print(f"note: --batch {batch_size} > the graph's {num_nodes} nodes: batches of them", file=sys.stderr)
    batch_size = min(batch_size, num_nodes)
    batches, order, cursor = [], rng.permutation(num_nodes), 0
    for _ in range(num_batches):
        if cursor + batch_size > num_nodes:
            order, cursor = rng.permutation(num_nodes), 0
        batches.append(np.ascontiguousarray(order[cursor : cursor + batch_size], dtype=np.int64))
        cursor += batch_size
    return batches


def set_threads(threads: int | None) -> None:
    """Use ``threads`` CPU threads in Numba and torch (``None``: leave the defaults)."""
    if threads is None:
        return
    if threads < 1:
        raise ValueError(f"--threads must be >= 1, got {threads}")
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    if "torch" in sys.modules or _installed("torch"):
        import torch

        torch.set_num_threads(threads)


def apply_threads(threads: int | None, peers: Sequence[str] = ()) -> None:
    """:func:`set_threads`, and DGL's thread count too when DGL is imported. With ``"dgl"`` in
    ``peers``, DGL is imported first (if it can be), so that its thread count follows; a DGL that
    cannot load is reported later, when its contender is prepared."""
    if "dgl" in peers:
        from .peers import PeerUnavailable, import_dgl

        try:
            import_dgl()
        except PeerUnavailable:
            pass
    set_threads(threads)
    if threads is not None and "dgl" in sys.modules:
        sys.modules["dgl"].utils.set_num_threads(threads)


def wait_passively() -> None:
    """Make OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE`` unless already set) when
    torch is not imported yet: torch's OpenMP threads spin after each op, and Numba's threads then
    wait for cores. Call it before anything imports torch; the setting is read when torch loads."""
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def machine_info() -> dict[str, Any]:
    """Cores, thread counts and versions, for the table header and the JSON."""
    import numba

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "usable_cores": usable,
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "numba_threads": numba.get_num_threads(),
    }
    try:  # known once a parallel kernel has run (the contenders' warm-up)
        info["numba_threading_layer"] = numba.threading_layer()
    except ValueError:
        pass
    if "torch" in sys.modules or _installed("torch"):
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    return info


def machine_with_peers() -> dict[str, Any]:
    """:func:`machine_info`, with DGL's thread count when DGL is imported."""
    machine = machine_info()
    if "dgl" in sys.modules:
        machine["dgl_threads"] = sys.modules["dgl"].utils.get_num_threads()
    return machine


def machine_line(results: dict) -> str:
    """The report's second header line: cores, thread counts, batches x rounds, seed."""
    machine = results["machine"]
    keys = ("numba_threads", "numba_threading_layer", "torch_threads", "dgl_threads")
    threads = ", ".join(f"{k} {machine[k]}" for k in keys if k in machine)
    return (
        f"machine: {machine['usable_cores']} usable cores of {machine['cpu_count']}, {threads}; "
        f"{results['batches']} timed batches x {results['repeats']} rounds (median) after "
        f"{results['warmup']} warm-up batches (the first again before each pass), seed {results['seed']}"
    )


def edge_timing_fields(timing: Timing) -> dict[str, Any]:
    """A sampling contender's row fields from its :class:`Timing`."""
    return {
        "edges_per_s": timing.edges_per_s,
        "best_edges_per_s": timing.best_edges_per_s,
        "batches_per_s": timing.batches_per_s,
        "ms_per_batch": timing.ms_per_batch,
        "edges_per_batch": timing.edges / timing.batches,
        "round_s": [round(t, 4) for t in timing.round_seconds],
    }


def shown_edge_row(row: dict) -> dict:
    """``row`` with the table's derived columns: M edges/s (median and best) and the notes."""
    shown = dict(row)
    if "edges_per_s" in row:
        shown["edges_per_s_m"] = row["edges_per_s"] / 1e6
        shown["best_edges_per_s_m"] = row["best_edges_per_s"] / 1e6
    shown["detail"] = row["status"] if row["status"] != "ok" else f"{row['version']}; {row['note']}"
    return shown


@dataclass
class Timing:
    """One contender's measurement: its median round (by wall time) of passes over every batch."""

    seconds: float  # wall time of the median round (all timed batches)
    batches: int
    edges: int  # sampled edges in that round, all hops of all batches
    round_seconds: list = field(default_factory=list)
    round_edges: list = field(default_factory=list)

    @property
    def best_edges_per_s(self) -> float:
        """The fastest round's rate: the figure least disturbed by other load on the machine."""
        rates = [e / s for e, s in zip(self.round_edges, self.round_seconds) if s > 0]
        return max(rates) if rates else self.edges_per_s

    @property
    def edges_per_s(self) -> float:
        return self.edges / self.seconds if self.seconds > 0 else float("inf")

    @property
    def batches_per_s(self) -> float:
        return self.batches / self.seconds if self.seconds > 0 else float("inf")

    @property
    def ms_per_batch(self) -> float:
        return 1e3 * self.seconds / self.batches


def time_pass(sample: Callable[[Any], int], batches: Sequence[Any], sync: Callable[[], None] | None = None):
    """One timed pass of ``sample(batch) -> sampled edges`` over ``batches``: (seconds, edges).

    ``sync`` (e.g. a GPU stream synchronisation) runs before the clock stops.
    """
    edges = 0
    start = time.perf_counter()
    for batch in batches:
        edges += int(sample(batch))
    if sync is not None:
        sync()
    return time.perf_counter() - start, edges


def time_contenders(contenders: dict, rounds: int = 1) -> dict[str, Timing]:
    """Time several contenders, interleaved round by round, and report each one's median round.

    ``contenders`` maps a name to ``(sample, batches, warmup, sync)``. Each contender's
    ``warmup`` batches run first, untimed (JIT compilation, allocator warm-up). Then, ``rounds``
    times, every contender makes one timed pass over its ``batches`` in turn, so a burst of load
    on a shared machine hits every contender alike; the pass with the median wall time is
    reported for each. Each pass starts with the contender's first warm-up batch, untimed: the
    one before it may have evicted its arrays (pyg-lib's graph copy did: BENCHMARKS.md, "Each
    pass warmed"), and a training loop samples one graph batch after batch."""
    if rounds < 1:
        raise ValueError(f"--repeats must be >= 1, got {rounds}")
    for sample, _, warmup, sync in contenders.values():
        for batch in warmup:
            sample(batch)
        if sync is not None:
            sync()
    seconds = {name: [] for name in contenders}
    edges = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, (sample, batches, warmup, sync) in contenders.items():
            for batch in warmup[:1]:  # this contender's arrays back in the cache, untimed
                sample(batch)
            elapsed, count = time_pass(sample, batches, sync)
            seconds[name].append(elapsed)
            edges[name].append(count)
    timings = {}
    for name in contenders:
        median = sorted(range(rounds), key=seconds[name].__getitem__)[rounds // 2]
        timings[name] = Timing(
            seconds=seconds[name][median],
            batches=len(contenders[name][1]),
            edges=edges[name][median],
            round_seconds=seconds[name],
            round_edges=edges[name],
        )
    return timings


def paired_ratio(mine: Timing, other: Timing) -> float:
    """The median over rounds of ``mine``'s edges/s / ``other``'s edges/s *in the same round*
    (both timed by one :func:`time_contenders` call): a burst of load hits both halves of a pair."""
    ratios = sorted(
        (a_edges / a_s) / (b_edges / b_s)
        for a_edges, a_s, b_edges, b_s in zip(
            mine.round_edges, mine.round_seconds, other.round_edges, other.round_seconds
        )
        if a_s > 0 and b_s > 0 and b_edges > 0
    )
    if not ratios:
        return float("nan")
    middle = len(ratios) // 2
    return ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2


def format_table(rows: Sequence[dict], columns: Sequence[tuple[str, str, str]]) -> str:
    """A plain-text table: ``columns`` are ``(key, header, format)``; missing values print '-'."""
    cells = [[header for _, header, _ in columns]]
    for row in rows:
        line = []
        for key, _, fmt in columns:
            value = row.get(key)
            line.append("-" if value is None else (format(value, fmt) if fmt else str(value)))
        cells.append(line)
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    out = []
    for index, line in enumerate(cells):
        out.append(
            "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))
        )
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


# ---------------------------------------------------------------------------- contender runs
# The steps every side-by-side command takes: prepare each contender into a row (or say why it is
# unavailable), time them interleaved, put the timings and ratios on the rows, then report.


def prepare_contender(rows: list, prepared: dict, name: str, make: Callable[[], Any], timed, warmup, **fields):
    """Add contender ``name``'s row to ``rows`` (with ``fields``) and return it.

    ``make()`` sets the contender up and returns an object with ``sample``, ``convert``, ``sync``,
    ``version`` and ``note`` (a :class:`.peers.Contender`). On success the row gets its status,
    version, note and set-up time, and ``prepared[name]`` the entry :func:`time_contenders` takes
    (``timed`` and ``warmup`` converted); an ``ImportError`` or ``PeerUnavailable`` from ``make``
    marks the row unavailable with the reason, and the run goes on with the others.
    """
    from .peers import PeerUnavailable

    row = {"name": name, **fields}
    rows.append(row)
    start = time.perf_counter()
    try:
        contender = make()
    except (ImportError, PeerUnavailable) as error:
        row["status"] = f"unavailable: {error}"
        return row
    row.update(status="ok", version=contender.version, note=contender.note)
    row["setup_s"] = round(time.perf_counter() - start, 3)
    convert = contender.convert
    prepared[name] = (contender.sample, [convert(b) for b in timed], [convert(b) for b in warmup], contender.sync)
    return row


def time_rows(rows: Sequence[dict], prepared: dict, rounds: int) -> dict[str, Timing]:
    """:func:`time_contenders` over ``prepared``, each timed row given its
    :func:`edge_timing_fields`; returns the timings."""
    timings = time_contenders(prepared, rounds)
    for row in rows:
        timing = timings.get(row["name"])
        if timing is not None:
            row.update(edge_timing_fields(timing))
    return timings


def set_ratios(rows: Sequence[dict], timings: dict, ours: str, paired: bool = False) -> None:
    """``ratio`` (median rounds) and ``best_ratio`` (fastest rounds) of ``ours`` over each timed row
    (``None`` over no edges), with ``paired`` the :func:`paired_ratio` too; nothing if ``ours`` is untimed."""
    if ours not in timings:
        return
    mine = timings[ours]
    for row in rows:
        timing = timings.get(row["name"])
        if timing is None:
            continue
        row["ratio"] = mine.edges_per_s / row["edges_per_s"] if row["edges_per_s"] else None
        row["best_ratio"] = mine.best_edges_per_s / row["best_edges_per_s"] if row["best_edges_per_s"] else None
        if paired:
            row["paired_ratio"] = paired_ratio(mine, timing)


def timing_settings(args) -> dict[str, int]:
    """The results' batch, batches, warmup and repeats (the command line's)."""
    return {key: int(getattr(args, key)) for key in ("batch", "batches", "warmup", "repeats")}


def run_footer(args, rows: list) -> dict[str, Any]:
    """The results' seed, threads, machine (:func:`machine_with_peers`) and rows."""
    return {"seed": int(args.seed), "threads": args.threads, "machine": machine_with_peers(), "results": rows}


# The edge-sampling reports' columns (key: header, format): the contender's name, the rate columns
# (EDGE_RATES, or a command's own), the command's comparisons (e.g. VS_PEER), then the notes.
EDGE_RATES = ("edges_per_s_m", "ms_per_batch", "edges_per_batch")
VS_PEER = ("ratio", "best_edges_per_s_m", "best_ratio")
EDGE_COLUMNS = {
    "name": ("contender", ""),
    "edges_per_s_m": ("M edges/s", ".2f"),
    "batches_per_s": ("batches/s", ".1f"),
    "ms_per_batch": ("ms/batch", ".2f"),
    "edges_per_batch": ("edges/batch", ",.0f"),
    "ratio": ("ours/peer", ".2f"),
    "best_edges_per_s_m": ("best M e/s", ".2f"),
    "best_ratio": ("best ours/peer", ".2f"),
    "paired_ratio": ("paired", ".2f"),
    "setup_s": ("setup s", ".2f"),
    "detail": ("notes", ""),
}


def table_columns(*columns) -> list[tuple[str, str, str]]:
    """:func:`format_table` columns: each a key of :data:`EDGE_COLUMNS` or a command's own ``(key, header, format)``."""
    return [column if isinstance(column, tuple) else (column, *EDGE_COLUMNS[column]) for column in columns]


def edge_columns(*columns, rates: Sequence[str] = EDGE_RATES) -> list[tuple[str, str, str]]:
    """:func:`table_columns`: the contender's name, ``rates``, each of ``columns``, then the notes."""
    return table_columns("name", *rates, *columns, "detail")


def print_edge_report(header: str, results: dict, columns: Sequence[tuple[str, str, str]], table=None) -> None:
    """Print ``header``, the :func:`machine_line`, then the rows (``table``, or every result row
    through :func:`shown_edge_row`) in ``columns``."""
    print(header + "\n" + machine_line(results))
    if table is None:
        table = [shown_edge_row(row) for row in results["results"]]
    print(format_table(table, columns))

"""``python -m gglspeedup.bench inference``: layer-wise full-graph inference, nodes/s and memory.

Example (issue 20's target, on the 64M-edge benchmark graph)::

    python -m gglspeedup.bench inference --graph powerlaw:2000000:32 --layers 3

A GraphSAGE (mean) of ``--layers`` layers with random weights runs over every node with
:func:`gglspeedup.inference.layerwise` (full neighbourhoods, no sampling) on random float32
features. Reported: nodes/s (all nodes times layers over the wall time), the resident memory
before the run (graph, features, model) and its peak during it, sampled every 20 ms from
``/proc/self/status`` (``VmRSS`` and its anonymous part ``RssAnon``), beside the bound the
design promises: two layer tables (the one read, the one written) plus the cache budget. With
``--out-dir`` the layer tables are memory-mapped files, so the anonymous memory should stay near
the cache budget plus one batch. ``--peers dgl`` also times DGL's recipe (``SAGEConv`` with
``MultiLayerFullNeighborSampler(1)`` and a ``DataLoader`` over all nodes, layer by layer) on the
same graph and features when DGL imports. The contenders run in ``--rounds`` paired rounds (the
order alternates from round to round: ours first in odd rounds, DGL first in even ones), each
round with its ``dgl s / ours s`` ratio, so a ratio is same-run under a shared machine's load.
Ours runs the layers fused (the SAGE layers' mean is one CSR kernel over the previous table, see
:func:`gglspeedup.inference.layerwise`); ``--blocks`` also times ours with ``fused=False`` (every
layer called on a block). The time spent inside the convolutions (torch's for ours on blocks,
DGL's for DGL) is reported apart from the rest (building the blocks, gathering rows, writing
outputs); a fused run has no convolution call to time ("-").
"""

from __future__ import annotations

import threading
import time

import numpy as np

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    from ._options import add_common_arguments

    add_common_arguments(parser, "graph")
    parser.add_argument("--layers", type=int, default=3, help="SAGE layers (default 3)")
    add_common_arguments(parser, dim=(64, "input feature width (default 64)"))
    parser.add_argument("--hidden", type=int, default=64, help="hidden width (default 64)")
    parser.add_argument("--out", type=int, default=16, help="output width (default 16)")
    parser.add_argument("--batch-size", type=int, default=8192, help="target nodes per batch (default 8192)")
    parser.add_argument("--cache-size", default="0", help="cache budget per layer's store (default 0)")
    parser.add_argument("--out-dir", default=None, help="keep layer outputs in memory-mapped files there")
    parser.add_argument("--rounds", type=int, default=1, help="paired rounds of every contender (default 1)")
    parser.add_argument("--blocks", action="store_true", help="also time ours with fused=False (layers on blocks)")
    add_common_arguments(
        parser,
        peers=("", "'dgl' to also time DGL's layer-wise recipe"),
        threads=(None, "CPU threads for Numba and torch"),
    )


def _status_kib(fields=("VmRSS", "RssAnon")) -> dict:
    values = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            name = line.split(":", 1)[0]
            if name in fields:
                values[name] = int(line.split()[1])
    return values


class _PeakMemory:
    """Peak VmRSS / RssAnon (KiB) over a block, sampled by a thread every ``interval`` s."""

    def __init__(self, interval: float = 0.02):
        self.interval, self.peak, self._stop = interval, {}, threading.Event()

    def _poll(self):
        while not self._stop.is_set():
            for name, value in _status_kib().items():
                self.peak[name] = max(self.peak.get(name, 0), value)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        for name, value in _status_kib().items():
            self.peak[name] = max(self.peak.get(name, 0), value)


def _mib(kib: int) -> float:
    return round(kib / 1024, 1)


class _Timed:
    """A layer that adds its own wall time to ``clock[0]`` (the model's share of a run)."""

    def __init__(self, layer, clock):
        self.layer, self.clock = layer, clock

    def __call__(self, *inputs):
        start = time.perf_counter()
        try:
            return self.layer(*inputs)
        finally:
            self.clock[0] += time.perf_counter() - start


def _ours(model, graph, x, args, clock, fused=True):
    """Ours: fused (the layers themselves, which ``layerwise`` recognises; their time inside is
    not measured: ``clock`` becomes None) or on blocks (each layer wrapped in a timer)."""
    import contextlib
    import os
    import tempfile

    import torch

    from ..inference import layerwise

    out_dir = args.out_dir
    if out_dir is not None:  # a fresh folder per run: layerwise writes new files only
        out_dir = tempfile.mkdtemp(prefix="layerwise-", dir=os.fspath(out_dir))
    convs = list(model.convs) if fused else [_Timed(conv, clock) for conv in model.convs]
    if fused:
        clock[0] = None
    try:
        with torch.no_grad():
            return layerwise(
                convs,
                graph,
                x,
                batch_size=args.batch_size,
                activation=torch.relu,
                cache_size=args.cache_size,
                out_dir=out_dir,
                fused=fused,
            )
    finally:
        if out_dir is not None:
            with contextlib.suppress(OSError):  # the run's folder, left only where a file stays in it
                os.rmdir(out_dir)


def _ours_blocks(model, graph, x, args, clock):
    return _ours(model, graph, x, args, clock, fused=False)


def _dgl(model, graph, x, args, clock):
    """DGL's documented recipe (examples/pytorch/graphsage: ``SAGE.inference``), with DGL's own
    mean ``SAGEConv`` given our layers' weights."""
    import torch

    from .peers import import_dgl

    dgl = import_dgl()
    indptr = torch.from_numpy(np.asarray(graph.indptr, dtype=np.int64))
    indices = torch.from_numpy(np.asarray(graph.indices, dtype=np.int64))
    # our rows list in-neighbours: DGL's CSC (destination-major) layout
    g = dgl.graph(("csc", (indptr, indices, torch.empty(0, dtype=torch.int64))), num_nodes=graph.num_nodes)
    convs = []
    for conv in model.convs:
        dgl_conv = dgl.nn.SAGEConv(conv.lin_l.in_features, conv.lin_l.out_features, "mean")
        with torch.no_grad():
            dgl_conv.fc_neigh.weight.copy_(conv.lin_l.weight)
            dgl_conv.fc_self.weight.copy_(conv.lin_r.weight)
            dgl_conv.fc_self.bias.copy_(conv.lin_l.bias)  # DGL keeps the mean aggregator's bias in fc_self
        convs.append(dgl_conv.eval())
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
    loader = dgl.dataloading.DataLoader(
        g, torch.arange(g.num_nodes()), sampler, batch_size=args.batch_size, shuffle=False, drop_last=False
    )
    h = torch.from_numpy(x)
    with torch.no_grad():
        for index, conv in enumerate(convs):
            y = torch.empty(g.num_nodes(), conv.fc_self.out_features)
            for input_nodes, output_nodes, blocks in loader:
                start = time.perf_counter()
                out = conv(blocks[0], h[input_nodes])
                clock[0] += time.perf_counter() - start
                if index != len(convs) - 1:
                    out = torch.relu(out)
                y[output_nodes] = out
            h = y
    return h.numpy()


def _timed_run(name, function, model, graph, x, args, layer_bytes, cache) -> dict:
    before, clock = _status_kib(), [0.0]
    start = time.perf_counter()
    with _PeakMemory() as peak:
        output = function(model, graph, x, args, clock)
    seconds = time.perf_counter() - start
    return {
        "contender": name,
        "seconds": round(seconds, 2),
        "nodes_per_s": round(graph.num_nodes * args.layers / seconds),
        "layer_calls_s": None if clock[0] is None else round(clock[0], 2),
        "rest_s": None if clock[0] is None else round(seconds - clock[0], 2),
        "rss_before_mib": _mib(before["VmRSS"]),
        "peak_rss_mib": _mib(peak.peak["VmRSS"]),
        "peak_extra_mib": _mib(peak.peak["VmRSS"] - before["VmRSS"]),
        "peak_extra_anon_mib": _mib(peak.peak["RssAnon"] - before["RssAnon"]),
        "bound_mib": round((2 * layer_bytes + cache) / 2**20, 1),
        "_output": output,
        "_seconds": seconds,
    }


def _tiny_graph(graph):
    from ..graph import CSRGraph

    # the warm-up reads x[:nodes]: a graph below 300 nodes has fewer rows ("x must have one row per
    # graph node (300), got 200 rows" ended --graph powerlaw:200:4)
    nodes = min(300, graph.num_nodes)
    edges = np.random.default_rng(1).integers(0, nodes, size=(2, 10 * nodes))
    return CSRGraph.from_edge_index(edges, num_nodes=nodes, dtype=graph.index_dtype, keep_edge_ids=False)


def _check_out_dir(out_dir) -> None:
    """``--out-dir``: an existing, writable folder (each run makes a fresh folder in it), checked
    before the graph is built; a missing one or a file was a traceback after the build."""
    import os

    if out_dir is None:
        return
    if not os.path.isdir(out_dir):
        what = "is not a folder" if os.path.lexists(out_dir) else "does not exist"
        raise ValueError(f"--out-dir must be an existing folder, got {out_dir!r}, which {what}")
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise ValueError(f"--out-dir must be a writable folder, got {out_dir!r}")


def run(args) -> dict:
    import torch

    from ..device import parse_size
    from ..examples.torch_models import SAGE, SAGEConv
    from ._common import apply_threads, format_table, load_graph, machine_info, parse_names
    from ._options import check_at_least_one, check_peers

    cache = parse_size(args.cache_size, "--cache-size")
    if args.rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {args.rounds}")
    # zero widths ran and reported nodes/s of an empty model; --layers and --batch-size failed after the build
    check_at_least_one(args, "layers", "dim", "hidden", "out", "batch_size")
    _check_out_dir(args.out_dir)
    wanted = (parse_names(args.peers, ("dgl",)) or ["dgl"]) if args.peers.strip() else []
    missing = check_peers(args, wanted)  # before the graph is built
    apply_threads(args.threads)
    if args.threads:
        torch.set_num_threads(args.threads)
    graph, description = load_graph(args.graph)
    x = np.random.default_rng(0).standard_normal((graph.num_nodes, args.dim), dtype=np.float32)
    torch.manual_seed(0)
    model = SAGE(args.dim, args.hidden, args.out, num_layers=args.layers, conv=SAGEConv).eval()
    widest = max([args.hidden] * (args.layers - 1) + [args.out])
    layer_bytes = graph.num_nodes * widest * 4
    contenders = {"gglspeedup": _ours}
    if args.blocks:
        contenders["gglspeedup (blocks)"] = _ours_blocks
    if "dgl" in wanted and "dgl" not in missing:
        contenders["dgl"] = _dgl
    tiny = _tiny_graph(graph)
    for function in contenders.values():  # warm-up: Numba compiles, first allocations
        function(model, tiny, x[: tiny.num_nodes], args, [0.0])
    rows, outputs = [], {}
    names = list(contenders)
    for round_index in range(1, args.rounds + 1):
        order = names if round_index % 2 else names[::-1]  # alternate who runs first
        timed = {}
        for name in order:
            outputs[name] = None  # the previous round's output freed before this run
            row = _timed_run(name, contenders[name], model, graph, x, args, layer_bytes, cache)
            row["round"] = round_index
            timed[name] = row
            print(format_table([row], _COLUMNS), flush=True)
            outputs[name] = row.pop("_output")
        for name in names:
            if name != "gglspeedup":
                ratio = timed[name]["_seconds"] / max(timed["gglspeedup"]["_seconds"], 1e-9)
                timed[name]["ours_speedup"] = round(ratio, 2)
        for row in timed.values():
            row.pop("_seconds")
        rows.extend(timed[name] for name in names)
    if "dgl" in outputs:
        difference = float(np.abs(outputs["dgl"] - outputs["gglspeedup"]).max())
        print(f"max |gglspeedup - dgl| = {difference:.3g}")
    print(format_table(rows, _COLUMNS))
    results = {
        "graph": description,
        "layers": args.layers,
        "widths": [args.dim, args.hidden, args.out],
        "batch_size": args.batch_size,
        "cache_size": cache,
        "out_dir": args.out_dir,
        "rounds": args.rounds,
        "rows": rows,
        "machine": machine_info(),
    }
    if "dgl" in outputs:
        results["max_abs_difference_vs_dgl"] = difference
        from .peers import import_dgl

        results["machine"]["dgl"] = import_dgl().__version__
    return results


_COLUMNS = (
    ("round", "round", ""),
    ("contender", "contender", ""),
    ("seconds", "s", ""),
    ("ours_speedup", "its s / ours", ""),
    ("nodes_per_s", "nodes/s (x layers)", ","),
    ("layer_calls_s", "in convs s", ""),
    ("rest_s", "rest s", ""),
    ("rss_before_mib", "RSS before MiB", ""),
    ("peak_rss_mib", "peak RSS MiB", ""),
    ("peak_extra_mib", "peak extra MiB", ""),
    ("peak_extra_anon_mib", "extra anon MiB", ""),
    ("bound_mib", "bound MiB", ""),
)

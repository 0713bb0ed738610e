"""``python -m gglspeedup.bench attention-pooling``: attention pooling, ours beside attpool2.

Example (attpool2 is the peer when it is importable, i.e. run from its venv, built by
``scripts/peer_env_attpool2.sh``)::

    PYTHONPATH=. /work/peers/attpool2/venv/bin/python -m gglspeedup.bench attention-pooling

Batches (one fixed structure each; *fresh node features, so fresh scores, every iteration*:
nothing is reused from an earlier call but the graph structure):

``my-test``
    attpool2's ``my-test.py`` generator, re-implemented: 10 graphs of 5-9 nodes, each pair of
    nodes an edge with probability 1/2 (upper triangle), features ``rand + 1`` of width 10.
``32x30-300``
    32 graphs of 30-300 nodes (uniform), ``2 n`` random node pairs per graph (degree 4; seed 0:
    5,516 nodes, 11,032 pairs), features of width 64.

Contenders, timed forward + backward (``sum(y * y)``) in interleaved rounds, median round, with
paired per-round ratios:

``layer``
    ours: :class:`~gglspeedup.attention.AttentionPooling` with ``heads`` (one call); attpool2:
    ``FastFlexAddAttention`` (1 head) or ``MultipleAttention`` of them (heads), same sizes.
``map``
    the mapping alone on ``(N, heads)`` scores (a linear score, standardised per graph, as in the
    layers): ours one call; attpool2 its ``Softmax`` / ``Sparsemax`` / ``Gfusedmax`` module once
    per head.
``fused lasso``
    gfusedmax's fused-lasso part alone (ours :func:`~gglspeedup.attention.fused_lasso`,
    attpool2's ``torch_gfusedlasso``): the split between the solver and the rest.
``demo step``
    one training iteration of the demo model (:mod:`gglspeedup.examples.tu_pooling`) on PROTEINS
    batches of 32 graphs, gfusedmax readout vs softmax readout (the target: <= 2x).

attpool2's gfusedmax starts an 8-process pool when imported (``mp_utils``, before torch, as it
requires); ``--attpool2-pool serial`` replaces it with an in-process map.
"""

from __future__ import annotations

import os
import time

import numpy as np

__all__ = ["add_arguments", "run", "attpool2_batch", "degree4_batch"]

BATCHES = ("my-test", "32x30-300")
MAPPINGS = ("gfusedmax", "sparsemax", "softmax")


def add_arguments(parser) -> None:
    from .._argtypes import at_least
    from ._options import seed_int

    parser.add_argument("--batches", default=",".join(BATCHES), help="comma-separated: my-test, 32x30-300")
    parser.add_argument("--heads", default="1,4", help="comma-separated head counts (default 1,4)")
    parser.add_argument("--mappings", default=",".join(MAPPINGS), help="comma-separated maps (default all three)")
    parser.add_argument("--lam", type=at_least(0, float), default=1.0, help="gfusedmax's lam (default 1.0, attpool2's)")
    parser.add_argument("--iters", type=int, default=5, help="timed iterations per round (default 5)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds; the median is reported (default 5)")
    from ._options import PeersOption

    parser.add_argument(
        "--peers", default="attpool2", action=PeersOption, help="'attpool2' (when importable) or '' for none"
    )
    parser.set_defaults(peers_given=False)
    parser.add_argument("--attpool2-pool", choices=("shipped", "serial"), default="shipped", help="attpool2's pool")
    parser.add_argument("--no-demo", action="store_true", help="skip the demo-model training step")
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch threads (default 1, as attpool2 was run; 0 leaves torch's default)",
    )
    parser.add_argument("--seed", type=seed_int, default=0, help="seed of the batches and weights")


def attpool2_batch(seed: int):
    """``(sizes, per-graph (E, 2) edges, feature width)`` like attpool2's my-test.py generator."""
    rng = np.random.default_rng(seed)
    sizes = [int(n) for n in rng.integers(5, 10, size=10)]
    edges = [np.stack(np.nonzero(np.triu((1 - np.eye(n)) * rng.random((n, n))) >= 0.5), axis=-1) for n in sizes]
    return sizes, edges, 10


def degree4_batch(seed: int):
    """32 graphs of 30-300 nodes with ``2 n`` random pairs each (degree 4)."""
    rng = np.random.default_rng(seed)
    sizes = [int(n) for n in rng.integers(30, 301, size=32)]
    edges = [rng.integers(0, n, size=(2 * n, 2)) for n in sizes]
    return sizes, edges, 64


def _import_attpool2(pool: str):
    """attpool2's modules (its ``mp_utils`` must come before torch), or the reason it is absent."""
    import sys

    if "torch" in sys.modules and "attpool2.mp_utils" not in sys.modules:
        return None, "torch was imported before attpool2 (its mp_utils refuses); run the bench as its own process"
    try:
        import attpool2.mp_utils as mp_utils
        import attpool2.torch_attention as attention
        import attpool2.torch_mapping as mapping
        import attpool2.torch_mapping_func as mapping_func
    except Exception as error:  # not installed, pygfl missing, ...
        return None, f"{type(error).__name__}: {error}"
    if pool == "serial" and not isinstance(mp_utils._torch_pool, _SerialPool):
        mp_utils._torch_pool.terminate()
        mp_utils._torch_pool = _SerialPool()
    return (attention, mapping, mapping_func), None


class _SerialPool:
    """attpool2's pool interface, in process."""

    def starmap(self, function, arguments):
        return [function(*args) for args in arguments]


def _contenders(kind, mapping, heads, sizes, edges, width, lam, attpool2, torch):
    """``{name: step(x) -> 1}`` for one row; ``x`` is a fresh ``(N, width)`` feature tensor."""
    from ..attention import (
        AttentionPooling,
        fused_lasso,
        gfusedmax,
        graph_batch,
        softmax,
        sparsemax,
        standardize_scores,
    )

    out = 4 * heads
    batch = graph_batch(sizes=sizes, edge_index=edges)
    torch.manual_seed(0)
    ours_layer = AttentionPooling(width, out, mapping, lam=lam, heads=heads)
    linear = torch.nn.Linear(width, heads)

    def score(x):  # the layer's scores: standardised inside each graph, as both layers do
        return standardize_scores(linear(x), batch)

    ours_map = {
        "softmax": lambda s: softmax(s, batch),
        "sparsemax": lambda s: sparsemax(s, batch),
        "gfusedmax": lambda s: gfusedmax(s, batch, lam=lam),
    }[mapping]
    steps = {}

    def backward(y):
        (y * y).sum().backward()
        return 1

    if kind == "layer":
        steps["ours"] = lambda x: backward(ours_layer(x, batch))
    elif kind == "map":
        steps["ours"] = lambda x: backward(ours_map(score(x)))
    else:
        steps["ours"] = lambda x: backward(fused_lasso(score(x), batch, lam=lam))
    if attpool2 is not None:
        attention, maps, functions = attpool2
        if kind == "layer":
            if heads == 1:
                layer = attention.FastFlexAddAttention(width, out, mapping, True, lam=lam)
            else:
                layer = attention.MultipleAttention(
                    lambda size: attention.FastFlexAddAttention(width, size, mapping, True, lam=lam), out, heads
                )
            steps["attpool2"] = lambda x: backward(layer(x, sizes, edges))
        elif kind == "map":
            module = {"softmax": maps.Softmax(), "sparsemax": maps.Sparsemax(), "gfusedmax": maps.Gfusedmax(lam=lam)}[
                mapping
            ]
            steps["attpool2"] = lambda x: backward(
                torch.stack([module(s, sizes, edges) for s in score(x).unbind(1)], 1)
            )
        else:
            steps["attpool2"] = lambda x: backward(
                torch.stack([functions.torch_gfusedlasso.apply(s, edges, sizes, lam) for s in score(x).unbind(1)], 1)
            )
    return steps


def _demo_steps(torch, seed):
    from ..datasets.tu import load_tu
    from ..examples.tu_pooling import GraphClassifier, batches

    data = load_tu("proteins")
    rng = np.random.default_rng(seed)
    graph_batches = list(batches(data, rng.permutation(data.num_graphs)[:320], 32))
    steps = {}
    for mapping in ("softmax", "gfusedmax"):
        torch.manual_seed(seed)
        model = GraphClassifier(data.x.shape[1], 64, data.num_classes, mapping)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(b, model=model, optimizer=optimizer):
            x, ptr, edge_index, y = b
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x, ptr, edge_index), y).backward()
            optimizer.step()
            return 1

        steps[f"demo {mapping}"] = step
    return steps, graph_batches


def _names(text, known, option):
    from ._common import parse_names

    return parse_names(text, known, option) or list(known)


def run(args) -> dict:
    """Measure every row; print the table; return a JSON-able dict."""
    wanted_batches = _names(args.batches, BATCHES, "--batches")
    mappings = _names(args.mappings, MAPPINGS, "--mappings")
    try:
        heads_list = [int(h) for h in str(args.heads).split(",") if h.strip()]
    except ValueError:
        heads_list = []  # int("x")'s own message named neither the option nor the form
    if not heads_list or min(heads_list) < 1:
        raise ValueError(f"--heads must list ints >= 1, got {args.heads!r}")
    from ._options import check_at_least_one

    check_at_least_one(args, "iters", "repeats")  # --iters 0 divided by zero after the first timings
    if args.torch_threads < 0:  # ran silently with torch's default, as 0 does
        raise ValueError(f"--torch-threads must be >= 1, or 0 for torch's default, got {args.torch_threads}")
    attpool2, absent = (None, "not requested")
    if "attpool2" in str(args.peers):
        from ._options import check_peers

        attpool2, absent = _import_attpool2(args.attpool2_pool)  # before torch: attpool2 requires it
        check_peers(args, ["attpool2"], lambda name: absent)  # before any batch is built
    import torch

    from ._common import format_table, machine_info, paired_ratio, time_contenders

    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    makers = {"my-test": attpool2_batch, "32x30-300": degree4_batch}
    rows = []
    for batch_name in wanted_batches:
        sizes, edges, width = makers[batch_name](args.seed)
        generator = torch.Generator().manual_seed(args.seed)
        inputs = [torch.rand(sum(sizes), width, generator=generator) + 1 for _ in range(args.iters)]
        warm = [torch.rand(sum(sizes), width, generator=generator) + 1]
        for heads in heads_list:
            for mapping in mappings:
                for kind in ("layer", "map") + (("fused lasso",) if mapping == "gfusedmax" else ()):
                    steps = _contenders(kind, mapping, heads, sizes, edges, width, args.lam, attpool2, torch)
                    timings = time_contenders({n: (s, inputs, warm, None) for n, s in steps.items()}, args.repeats)
                    row = {"batch": batch_name, "heads": heads, "mapping": mapping, "kind": kind}
                    row["ours_ms"] = timings["ours"].ms_per_batch
                    if "attpool2" in timings:
                        row["attpool2_ms"] = timings["attpool2"].ms_per_batch
                        row["speedup"] = paired_ratio(timings["ours"], timings["attpool2"])
                        row["speedup_range"] = _ratio_range(timings["ours"], timings["attpool2"])
                    rows.append(row)
                    print(_row_line(row), flush=True)
    demo = None
    if not args.no_demo:
        steps, graph_batches = _demo_steps(torch, args.seed)
        timings = time_contenders(
            {n: (s, graph_batches, graph_batches[:2], None) for n, s in steps.items()}, args.repeats
        )
        demo = {
            "softmax_ms": timings["demo softmax"].ms_per_batch,
            "gfusedmax_ms": timings["demo gfusedmax"].ms_per_batch,
            "gfusedmax_over_softmax": 1.0 / paired_ratio(timings["demo gfusedmax"], timings["demo softmax"]),
        }
    machine = machine_info()
    peer = f"absent: {absent}" if attpool2 is None else f"pool {args.attpool2_pool}"
    header = (
        f"attention pooling: ours vs attpool2 ({peer}); "
        f"lam {args.lam}; {args.iters} iterations x {args.repeats} rounds (median), fresh features each iteration\n"
        f"machine: {machine['usable_cores']} usable cores, numba_threads {machine['numba_threads']}, "
        f"torch_threads {torch.get_num_threads()}, torch {torch.__version__}, numpy {machine['numpy']}, "
        f"numba {machine['numba']} ({machine.get('numba_threading_layer', '?')})"
    )
    columns = [
        ("batch", "batch", ""),
        ("heads", "heads", ""),
        ("mapping", "map", ""),
        ("kind", "what", ""),
        ("ours_ms", "ours ms", ".2f"),
        ("attpool2_ms", "attpool2 ms", ".2f"),
        ("speedup", "speedup", ".1f"),
        ("speedup_text", "rounds' range", ""),
    ]
    shown = [
        dict(r, speedup_text="{:.1f}-{:.1f}".format(*r["speedup_range"]) if "speedup_range" in r else None)
        for r in rows
    ]
    print(header)
    print(format_table(shown, columns))
    if demo is not None:
        print(
            f"demo training step (PROTEINS, 32 graphs): softmax {demo['softmax_ms']:.1f} ms, gfusedmax "
            f"{demo['gfusedmax_ms']:.1f} ms, ratio {demo['gfusedmax_over_softmax']:.2f} (paired median)"
        )
    return {
        "machine": machine,
        "rows": rows,
        "demo": demo,
        "attpool2": absent or "ok",
        "pid": os.getpid(),
        "time": time.time(),
    }


def _ratio_range(mine, other):
    ratios = [(o / m) for m, o in zip(mine.round_seconds, other.round_seconds) if m > 0]
    return (min(ratios), max(ratios)) if ratios else (float("nan"), float("nan"))


def _row_line(row):
    text = f"  {row['batch']} heads={row['heads']} {row['mapping']} {row['kind']}: ours {row['ours_ms']:.2f} ms"
    if "attpool2_ms" in row:
        text += f", attpool2 {row['attpool2_ms']:.2f} ms, speedup {row['speedup']:.1f}x"
    return text

"""``python -m gglspeedup.bench attention``: Diffuser's attention, ours beside Diffuser's DGL code.

Example (the issue's configuration: window 64, 64 random keys, 64 global tokens, batch 8, hidden
256, 4 heads, 5 hops; run it in the Diffuser peer environment for the peer side)::

    DGLBACKEND=pytorch PYTHONPATH=$PWD /work/peers/diffuser/venv/bin/python -m gglspeedup.bench attention

Measured, each contender in the same process, in alternated rounds (median and range):

``pattern per step``
    ours: ``SequencePattern.csc(L, batch=B, step=s, shared=True)`` (fresh random keys every step,
    one graph the batch shares, in-CSR built) and ``csc(L, batch=B, step=s)`` (fresh per
    sequence too); ``cached``: ``csc(L, batch=B)`` of a fixed pattern. Diffuser: its
    ``graphTrainer._from_adj_to_batched_graphs`` (``dgl.graph`` per sequence, ``dgl.batch``) and
    the in-CSR DGL builds lazily in the first layer (``adj_tensors("csc")``).
``layer forward + backward``
    Diffuser's ``DiffuserSelfAttention`` (DGL) and ours (:class:`gglspeedup.attention.DiffuserSelfAttention`),
    same weights, training mode (dropout 0.1), on Diffuser's seed-0 pattern (``compat="diffuser"``).
    GFLOP/s counts the same useful work for both (scores, hops, their backward: ``2 E H D`` per
    pass) beside the machine's float32 matmul rate measured in the same run.
``peak memory``
    one forward + backward per contender in a fresh subprocess: peak resident memory above the
    resident memory after the inputs were made (``/proc/self/clear_refs``).
``one-off construction``
    ours at ``--build-len`` tokens (default 16384) and Diffuser's ``_create_adj_mat`` (its fixed
    4096 matrix), in subprocesses: seconds and peak MiB.
``--layer-len 16384``
    our layer's forward + backward alone at those lengths (a subprocess each: seconds and peak MiB)
    on our own fixed pattern (same window, random and global counts). Diffuser's DGL layer is not
    run there: its adjacency alone needs about 13 GB at 16384 tokens.

The peer columns read "unavailable" when DGL or Diffuser's source (``DIFFUSER_SRC``) is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types

import numpy as np

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    from .._argtypes import at_least

    parser.add_argument("--seq-len", default="1024,4096", help="comma-separated sequence lengths")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds per measurement")
    parser.add_argument("--steps", type=int, default=5, help="pattern builds timed per round")
    parser.add_argument("--build-len", type=int, default=16384, help="one-off construction length")
    parser.add_argument("--threads", type=at_least(1), default=None)
    parser.add_argument("--no-memory", action="store_true", help="skip the subprocess memory probes")
    parser.add_argument(
        "--layer-len",
        default="",
        help="comma-separated lengths at which only our layer's forward + backward is probed (seconds and "
        "peak MiB, a subprocess each, on our own fixed pattern: Diffuser's needs a max_len**2 shuffle)",
    )


def _config(args):
    return types.SimpleNamespace(
        hidden_size=args.hidden,
        num_attention_heads=args.heads,
        attention_probs_dropout_prob=0.1,
        attention_window=[64] * 12,
        num_rand=64,
        num_glob=64,
    )


def _peer():
    try:
        from .diffuser_peer import load

        return load()
    except ImportError as error:
        return str(error)


def _median_range(times):
    return float(np.median(times)), float(min(times)), float(max(times))


def _alternate(contenders: dict, rounds: int, repeat: int) -> dict:
    """Median / min / max seconds per call of each contender over ``rounds`` alternated rounds."""
    times = {name: [] for name in contenders}
    for call in contenders.values():  # warm-up (compiles, caches)
        call(0)
    for r in range(rounds):
        for name, call in contenders.items():
            start = time.perf_counter()
            for i in range(repeat):
                call(r * repeat + i + 1)
            times[name].append((time.perf_counter() - start) / repeat)
    return {name: _median_range(t) for name, t in times.items()}


def _matmul_gflops(threads) -> float:
    import torch

    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(3))
    return 2 * 2048**3 / best / 1e9


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _layer_flops(edges: int, heads: int, head_dim: int, hops: int = 5) -> float:
    per_pass = 2.0 * edges * heads * head_dim
    return per_pass * ((1 + hops) + (2 * hops + 2))


def _lengths(option: str, text: str) -> list[int]:
    """The comma-separated token counts of ``--<option>``, each >= 1 (``ValueError`` naming it)."""
    try:
        lengths = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--{option} must be comma-separated integers, got {text!r}") from None
    if any(length < 1 for length in lengths):
        raise ValueError(f"--{option} lengths must be >= 1, got {text!r}")
    return lengths


def run(args) -> dict:
    from ._common import apply_threads, machine_with_peers
    from ._options import check_at_least_one

    # every option checked before anything is measured (a 0 failed after the first timings)
    check_at_least_one(args, "rounds", "steps", "batch", "hidden", "heads", "build_len")
    lengths = _lengths("seq-len", args.seq_len)
    if not lengths:
        raise ValueError("--seq-len must name at least one length")
    layer_lengths = _lengths("layer-len", args.layer_len)
    peer = _peer()
    apply_threads(args.threads)
    config = _config(args)
    results = {"machine": None, "config": vars(args).copy(), "rows": []}
    results["config"].pop("_module", None)
    available = not isinstance(peer, str)
    trainer = None
    if available:
        trainer = types.SimpleNamespace(config=config)
        peer[0].graphTrainer._create_adj_mat(trainer)
    peak = _matmul_gflops(args.threads)
    results["machine_matmul_gflops"] = peak
    for length in lengths:
        row = _measure_length(length, args, config, peer if available else None, trainer if available else None)
        results["rows"].append(row)
        _print_row(row, peak)
    if not args.no_memory:
        build = {"ours": _probe("build", "ours", args.build_len, args)}
        build["ours compat (4096)"] = _probe("build", "ours compat", 4096, args)
        if available:
            build["diffuser _create_adj_mat (4096)"] = _probe("build", "diffuser", 4096, args)
        results["build"] = build
        for name, value in build.items():
            print(f"one-off construction {name}: {value}")
    layer_only = {}
    for length in layer_lengths:
        layer_only[length] = _probe("layer", "ours own pattern", length, args)
        print(f"layer fwd+bwd ours (own fixed pattern) at {length} tokens, subprocess: {layer_only[length]}")
    if layer_only:
        results["layer_only"] = layer_only
    results["machine"] = machine_with_peers()
    results["peer"] = "diffuser (DGL)" if available else f"unavailable: {peer}"
    return results


def _measure_length(length, args, config, peer, trainer) -> dict:
    """One sequence length: pattern per step and layer forward + backward, alternated rounds."""
    import torch

    from ..attention import DiffuserSelfAttention, SequencePattern

    compat = SequencePattern(64, 64, 64, compat="diffuser", seed=0)
    fresh = SequencePattern(64, 64, 64, seed=0)
    row = {"seq_len": length}
    ids = torch.zeros(args.batch, length, dtype=torch.long)
    steps = {
        "ours fresh (shared)": lambda s: fresh.csc(length, batch=args.batch, step=s, shared=True),
        "ours fresh (per sequence)": lambda s: fresh.csc(length, batch=args.batch, step=s),
        "ours cached": lambda s: compat.csc(length, batch=args.batch),
    }
    if peer is not None:
        graphtrainer, diffuser_att = peer
        build = graphtrainer.graphTrainer._from_adj_to_batched_graphs
        steps["diffuser"] = lambda s: build(trainer, ids).adj_tensors("csc")
    row["pattern_s"] = _alternate(steps, args.rounds, args.steps)
    torch.manual_seed(0)
    ours = DiffuserSelfAttention(config, 0).train()
    graph = compat.csc(length, batch=args.batch, shared=True)
    x = torch.randn(args.batch, length, args.hidden, requires_grad=True)
    layers = {"ours": lambda _: ours(x, g=graph)[0].sum().backward()}
    if peer is not None:
        theirs = diffuser_att.DiffuserSelfAttention(config, layer_id=0).train()
        theirs.load_state_dict(ours.state_dict())
        dgl_graph = build(trainer, ids)
        mask = torch.zeros(args.batch, length)
        layers["diffuser (DGL)"] = lambda _: theirs(x, g=dgl_graph, attention_mask=mask)[0].sum().backward()
    row["layer_s"] = _alternate(layers, args.rounds, 1)
    flops = _layer_flops(graph.num_edges * args.batch, args.heads, args.hidden // args.heads)
    row["layer_gflops"] = {name: flops / t[0] / 1e9 for name, t in row["layer_s"].items()}
    row["edges_per_sequence"] = graph.num_edges
    if not args.no_memory:
        row["peak_mib"] = {name: _probe("layer", name, length, args) for name in layers}
    return row


def _print_row(row, peak):
    length = row["seq_len"]
    print(f"== {length} tokens, {row['edges_per_sequence']} edges per sequence; machine matmul {peak:.1f} GFLOP/s")
    for name, (median, low, high) in row["pattern_s"].items():
        print(f"pattern per step  {name:28s} {median * 1e3:10.3f} ms  [{low * 1e3:.3f}, {high * 1e3:.3f}]")
    for name, (median, low, high) in row["layer_s"].items():
        gflops = row["layer_gflops"][name]
        print(f"layer fwd+bwd     {name:28s} {median:10.3f} s   [{low:.3f}, {high:.3f}]  {gflops:.2f} GFLOP/s")
    for name, value in row.get("peak_mib", {}).items():
        print(f"peak memory       {name:28s} {value}")


# -- memory probes in fresh subprocesses -------------------------------------------------------------
def _probe(kind, name, length, args) -> dict | str:
    code = (
        "import json, sys; from gglspeedup.bench.attention import _probe_body; "
        "print('PROBE', json.dumps(_probe_body("
        f"{kind!r}, {name!r}, {length}, {args.batch}, {args.hidden}, {args.heads})))"
    )
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    for line in done.stdout.splitlines():
        if line.startswith("PROBE "):
            return json.loads(line[6:])
    return f"failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"


def _rss_mib(field="VmRSS") -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def _probe_body(kind, name, length, batch, hidden, heads) -> dict:
    import torch

    from ..attention import DiffuserSelfAttention, SequencePattern

    if kind == "build":
        if name == "diffuser":
            from .diffuser_peer import load

            graphtrainer, _ = load()
            holder = types.SimpleNamespace(config=types.SimpleNamespace(attention_window=64, num_rand=64, num_glob=64))
            call = lambda: graphtrainer.graphTrainer._create_adj_mat(holder)  # noqa: E731
        else:
            SequencePattern(64, 64, 64).csc(256, step=0)  # compile outside the measurement
            compat = name == "ours compat"
            pattern = SequencePattern(64, 64, 64, compat="diffuser" if compat else None, max_len=max(length, 4096))
            call = lambda: pattern.csc(length) if compat else pattern.csc(length, step=0)  # noqa: E731
        before = _rss_mib()
        _reset_peak()
        seconds = _timed(call)
        return {"seconds": round(seconds, 3), "peak_mib": round(_rss_mib("VmHWM") - before, 1)}
    config = types.SimpleNamespace(
        hidden_size=hidden,
        num_attention_heads=heads,
        attention_probs_dropout_prob=0.1,
        attention_window=[64],
        num_rand=64,
        num_glob=64,
    )
    x = torch.randn(batch, length, hidden, requires_grad=True)
    if name in ("ours", "ours own pattern"):
        layer = DiffuserSelfAttention(config, 0).train()
        compat = "diffuser" if name == "ours" else None  # past 4096 tokens Diffuser's shuffle needs GBs
        graph = SequencePattern(64, 64, 64, compat=compat).csc(length, batch=batch, shared=True)
        small = SequencePattern(64, 64, 64).csc(128, batch=1)
        layer(torch.randn(1, 128, hidden), g=small)[0].sum().backward()  # compile first
        call = lambda: layer(x, g=graph)[0].sum().backward()  # noqa: E731
    else:
        from .diffuser_peer import load

        graphtrainer, diffuser_att = load()
        trainer = types.SimpleNamespace(config=config)
        graphtrainer.graphTrainer._create_adj_mat(trainer)
        layer = diffuser_att.DiffuserSelfAttention(config, layer_id=0).train()
        graph = graphtrainer.graphTrainer._from_adj_to_batched_graphs(trainer, torch.zeros(batch, length))
        graph.adj_tensors("csc")
        mask = torch.zeros(batch, length)
        call = lambda: layer(x, g=graph, attention_mask=mask)[0].sum().backward()  # noqa: E731
    before = _rss_mib()
    _reset_peak()
    seconds = _timed(call)
    return {"seconds": round(seconds, 3), "peak_mib": round(_rss_mib("VmHWM") - before, 1)}

"""Where the Diffuser layer's GPU time goes: each part of one forward and one backward timed alone.

    python tools/gpu_diffuser_probe.py [--json PATH] [--size full|tiny] [--repeats N]

The H200 run of ``python -m gglspeedup.bench.gpu.checks attention`` measured the training-mode
:class:`~gglspeedup.attention.DiffuserSelfAttention` (batch 8, hidden 256, 4 heads, float32,
dropout 0.1, 5 hops, pattern window / random / global = 64 / 64 / 64 shared by the batch) at
147 / 454 ms forward / forward + backward at 1024 tokens, against 0.33 / 1.07 ms for torch's dense
attention. This probe runs that layer's steps one by one (as ``sequence.diffusion``'s autograd
Function runs them, through the same :class:`~gglspeedup.attention.sequence._ops.GraphOps`) at
1024 and 4096 tokens (``--size full``) on ``cuda:0``:

- the pattern's build (``SequencePattern.csc``) and its transpose (built on first use, kept);
- the projections (three ``nn.Linear``), the edge scores and softmax (with the edge dropout's
  draws), each of the 5 propagation hops, the two gathers into the out-CSR's order;
- the backward's node-dropout gradient, each transposed hop, the out-CSR positions, the scores'
  backward and the keys' gradient;
- the whole layer, forward and backward, with the package's kernel launches and syncs
  (:func:`gglspeedup._launch.counters`) and, on a real GPU, torch's synchronising calls
  (``torch.cuda.set_sync_debug_mode``) per forward and per backward.

Every part: ``ms`` (median of ``--repeats`` runs, a sync before and after each, so it is device
time plus the host's launch time) and ``host_ms`` (until the call returns, no sync after: where
``host_ms`` is close to ``ms`` the part is host-bound). Prints one table per length and writes
the JSON (``--json``). Under ``NUMBA_ENABLE_CUDASIM=1`` it runs at ``--size tiny`` on numba's
simulator (how CI proves it; its times mean nothing there, the counts are the real ones).
"""

from __future__ import annotations

import argparse
import json
import time
import types
import warnings

import numpy as np

SIZES = {
    "full": {"tokens": (1024, 4096), "batch": 8, "hidden": 256, "heads": 4, "pattern": (64, 64, 64)},
    "tiny": {"tokens": (8,), "batch": 2, "hidden": 8, "heads": 2, "pattern": (2, 1, 1)},
}
HOPS, ALPHA, DROPOUT = 5, 0.1, 0.1


class _Probe:
    """Timings and counts on one device: ``part(name, call)`` times ``call`` and records a row."""

    def __init__(self, device, torch, repeats: int):
        self.device, self.torch, self.repeats = device, torch, repeats
        self.real = not device.simulated
        self.rows = []

    def sync(self) -> None:
        if self.real:
            self.torch.cuda.synchronize()  # the device: torch's stream and CuPy's (the legacy default)

    def counted(self, call):
        """``(result, launches, package syncs, torch syncs)`` of one ``call``."""
        from gglspeedup import _launch

        self.sync()
        _launch.reset_counters()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if self.real:
                self.torch.cuda.set_sync_debug_mode("warn")
            try:
                result = call()
            finally:
                if self.real:
                    self.torch.cuda.set_sync_debug_mode("default")
        self.sync()
        counts = _launch.counters()
        torch_syncs = sum("synchroniz" in str(w.message) for w in caught) if self.real else None
        return result, counts["launches"], counts["syncs"], torch_syncs

    def part(self, stage: str, name: str, call, setup=None):
        """Time ``call(*setup())`` (``setup``'s time excluded; it makes what a call changes or
        caches anew): ``first_ms`` (the first call, compiling included), median ``ms`` and
        ``host_ms`` of the next ``repeats``; the launches and syncs of one call."""
        args = setup() if setup is not None else ()
        start = time.perf_counter()
        result, launches, syncs, torch_syncs = self.counted(lambda: call(*args))
        first = time.perf_counter() - start
        walls, hosts = [], []
        for _ in range(self.repeats):
            args = setup() if setup is not None else ()
            self.sync()
            start = time.perf_counter()
            call(*args)
            hosts.append(time.perf_counter() - start)
            self.sync()
            walls.append(time.perf_counter() - start)
        row = {
            "stage": stage,
            "part": name,
            "first_ms": round(1e3 * first, 4),
            "ms": round(1e3 * float(np.median(walls)), 4),
            "host_ms": round(1e3 * float(np.median(hosts)), 4),
            "launches": launches,
            "syncs": syncs,
            "torch_syncs": torch_syncs,
        }
        self.rows.append(row)
        return result


def _layer(size, tokens, on, torch):
    from gglspeedup.attention import DiffuserSelfAttention

    config = types.SimpleNamespace(
        hidden_size=size["hidden"],
        num_attention_heads=size["heads"],
        attention_probs_dropout_prob=DROPOUT,
        attention_window=[size["pattern"][0]],
    )
    torch.manual_seed(0)
    layer = DiffuserSelfAttention(config, 0).to(on).train()
    x = torch.randn(size["batch"], tokens, size["hidden"], device=on, requires_grad=True)
    return layer, x


def probe_length(size, tokens, device, torch, repeats) -> dict:
    """Every part at ``tokens`` tokens (module docstring): ``{"tokens", "edges_per_sequence", "rows", "layer"}``."""
    from gglspeedup.attention import SequencePattern
    from gglspeedup.attention.sequence import diffusion as fused
    from gglspeedup.attention.sequence._ops import MODE_SOFTMAX, graph_ops

    on = "cuda:0" if not device.simulated else "cpu"
    probe = _Probe(device, torch, repeats)
    batch, heads = size["batch"], size["heads"]
    depth = size["hidden"] // heads

    def build():  # a new pattern each time: a pattern keeps the graphs it built
        return SequencePattern(*size["pattern"], seed=0, device=device).csc(tokens, batch=batch, shared=True)

    probe.part("pattern", "csc (build)", lambda pattern: pattern.csc(tokens, batch=batch, shared=True),
               setup=lambda: (SequencePattern(*size["pattern"], seed=0, device=device),))  # fmt: skip
    probe.part("pattern", "transpose (first use)", lambda graph: graph.transpose(), setup=lambda: (build(),))
    graph = build()

    layer, x = _layer(size, tokens, on, torch)
    with torch.no_grad():
        q, k, v = probe.part("forward", "projections (3 Linear)", lambda: layer._project(x, graph, None)[:3])
    flat = [t.reshape(batch * tokens, heads, depth).contiguous() for t in (q, k, v)]
    q, k, v = flat
    ops = graph_ops(graph, batch, heads, depth)
    seed = 12345

    def dropouts():
        edges = fused._dropout(DROPOUT, seed, 0, ops.repeats * ops.num_edges, heads, q.device)
        nodes = [fused._dropout(DROPOUT, seed, 1 + t, ops.rows, heads * depth, q.device) for t in range(HOPS)]
        return edges, nodes

    edges, nodes = dropouts()
    attn = probe.part(
        "forward", "scores + softmax + edge dropout draws", lambda: ops.scores(q, k, None, MODE_SOFTMAX, edges)
    )
    states = [v]
    for t in range(HOPS):
        states.append(
            probe.part(
                "forward",
                f"hop {t} (spmm + node dropout)",
                lambda t=t: ops.spmm(
                    attn, states[t], 1.0 - ALPHA, self_rows=v, self_scale=ALPHA, edges=edges, nodes=nodes[t]
                ),
            )
        )
    weights = probe.part("forward", "attention into out-CSR order", lambda: ops.transpose_weights(attn))
    bits_t = probe.part("forward", "edge keep bits into out-CSR order", lambda: ops.transpose_weights(edges.bits))
    edges_t = edges._replace(bits=bits_t)

    grad_out = torch.randn(batch * tokens, heads, depth, device=on)
    p = probe.part("backward", "node dropout gradient (torch)", lambda: fused._node_dropout_grad(grad_out, nodes[-1]))
    p = p.contiguous()
    grad_v = p * ALPHA
    grad_weights = torch.zeros_like(weights)
    for t in range(HOPS - 1, -1, -1):
        before = None if t == 0 else nodes[t - 1]

        def hop(p=p, t=t, before=before, dw=None, total=None):
            return ops.spmm_t(
                weights, p, 1.0 - ALPHA, dw=grad_weights if dw is None else dw, hx=states[t], dw_scale=1.0 - ALPHA,
                edges=edges_t, nodes=before, total=grad_v if total is None else total,
                sum_scale=ALPHA if t > 0 else 1.0, transposed=True,
            )  # fmt: skip

        # timed on copies of the accumulators (the pass adds into them), then run once for real
        probe.part(
            "backward",
            f"hop {t} transposed (spmm_t + edge grads)",
            lambda dw, total, hop=hop: hop(dw=dw, total=total),
            setup=lambda: (grad_weights.clone(), grad_v.clone()),
        )
        p = hop()
    probe.part(
        "backward",
        "out-CSR positions (first use)",
        lambda fresh: fresh.positions(),
        setup=lambda: (graph_ops(graph, batch, heads, depth),),
    )
    probe.part(
        "backward",
        "scores backward + grad q",
        lambda grad: ops.score_grad(weights, grad, None, MODE_SOFTMAX, k, edges=edges, permuted=True),
        setup=lambda: (grad_weights.clone(),),
    )
    grad_score = grad_weights.clone()
    grad_q = ops.score_grad(weights, grad_score, None, MODE_SOFTMAX, k, edges=edges, permuted=True)
    grad_k = probe.part(
        "backward", "grad k (spmm_t of the scores' grad)", lambda: ops.spmm_t(grad_score, q, transposed=True)
    )
    # the parts are the layer's attention: the fused Function on the same inputs and seed gives
    # the same output and gradients, bit for bit (same kernels, same order)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = fused.DiffusionAttention.apply(
        *leaves, graph_ops(graph, batch, heads, depth), None, HOPS, ALPHA, DROPOUT, seed
    )
    grads = torch.autograd.grad(out, leaves, grad_out)
    ours = (states[-1], grad_q, grad_k, grad_v)
    same = {
        name: bool(torch.equal(a, b))
        for name, a, b in zip(("output", "grad q", "grad k", "grad v"), ours, (out, *grads))
    }
    return {
        "tokens": tokens,
        "edges_per_sequence": int(graph.num_edges),
        "parts_equal_the_layer": same,
        "rows": probe.rows,
        "layer": _whole_layer(probe, layer, x, graph),
    }


def _whole_layer(probe, layer, x, graph) -> dict:
    """The layer's forward and backward (``out.sum().backward()``), timed and counted apart."""

    def forward():
        return layer(x, g=graph)[0]

    out, f_launches, f_syncs, f_torch = probe.counted(forward)
    _, b_launches, b_syncs, b_torch = probe.counted(lambda: out.sum().backward())
    forward_s, both_s = [], []
    for _ in range(probe.repeats):
        layer.zero_grad(set_to_none=True)
        x.grad = None
        probe.sync()
        start = time.perf_counter()
        out = forward()
        probe.sync()
        middle = time.perf_counter()
        out.sum().backward()
        probe.sync()
        forward_s.append(middle - start)
        both_s.append(time.perf_counter() - start)
    return {
        "ms_forward": round(1e3 * float(np.median(forward_s)), 4),
        "ms_forward_backward": round(1e3 * float(np.median(both_s)), 4),
        "forward": {"launches": f_launches, "syncs": f_syncs, "torch_syncs": f_torch},
        "backward": {"launches": b_launches, "syncs": b_syncs, "torch_syncs": b_torch},
    }


def run(size_name: str, repeats: int) -> dict:
    import torch

    from gglspeedup.device import as_device

    size = SIZES[size_name]
    device = as_device("cuda:0").check_available()
    lengths = [probe_length(size, tokens, device, torch, repeats) for tokens in size["tokens"]]
    return {
        "device": "numba's CUDA simulator (times meaningless)" if device.simulated else "cuda:0",
        "size": size_name,
        "config": {**size, "hops": HOPS, "alpha": ALPHA, "dropout": DROPOUT, "dtype": "float32"},
        "repeats": repeats,
        "lengths": lengths,
    }


def table(result: dict) -> str:
    lines = [f"Diffuser layer parts on {result['device']} ({result['repeats']} repeats, median)"]
    for length in result["lengths"]:
        layer = length["layer"]
        lines.append(
            f"\n{length['tokens']} tokens, {length['edges_per_sequence']} edges a sequence: layer forward "
            f"{layer['ms_forward']:.2f} ms, forward + backward {layer['ms_forward_backward']:.2f} ms; launches / "
            f"syncs / torch syncs: forward {_counts(layer['forward'])}, backward {_counts(layer['backward'])}"
        )
        lines.append(
            f"| {'stage':8} | {'part':44} | {'first ms':>10} | {'ms':>10} | {'host ms':>9} | launches | syncs "
            "| torch syncs |"
        )
        for row in length["rows"]:
            lines.append(
                f"| {row['stage']:8} | {row['part']:44} | {row['first_ms']:10.3f} | {row['ms']:10.3f} | "
                f"{row['host_ms']:9.3f} | "
                f"{row['launches']:8d} | {row['syncs']:5d} | {_maybe(row['torch_syncs']):>11} |"
            )
        total = {
            stage: sum(r["ms"] for r in length["rows"] if r["stage"] == stage) for stage in ("forward", "backward")
        }
        same = all(length["parts_equal_the_layer"].values())
        lines.append(
            f"sum of parts: forward {total['forward']:.2f} ms, backward {total['backward']:.2f} ms; the parts' "
            f"output and gradients {'equal' if same else 'DIFFER FROM'} the layer's attention "
            f"({length['parts_equal_the_layer']})"
        )
    return "\n".join(lines)


def _maybe(value) -> str:
    return "-" if value is None else str(value)


def _counts(counts: dict) -> str:
    return f"{counts['launches']} / {counts['syncs']} / {_maybe(counts['torch_syncs'])}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be at least 1, got {args.repeats}")
    result = run(args.size, args.repeats)
    print(table(result), flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The ``attention`` check of ``python -m gglspeedup.bench gpu``: the attention kernels timed on ``cuda:0``.

Four ops at 1024 / 4096 / 16384 tokens (``--size full``), each on the GPU and the same code on the
CPU, forward and forward + backward (a sync after every call, the median of the timed calls after
a warm-up call that compiles):

``softmax`` / ``sparsemax`` / ``gfusedmax``
    the pooling maps (:class:`~gglspeedup.attention.pooling._state.MappingState` and its ``vjp``,
    what the torch maps and the NumPy maps run) over a batch of graphs of 64 nodes with ``2 n``
    random node pairs each (degree 4; 16 / 64 / 256 graphs: a token is a node of a graph in the
    batch), 4 heads, float64 scores (standard normal), ``lam = gamma = 1``. The input is already on
    the device; the timed call is the driver's work (gfusedmax's certificate read included).
``diffuser``
    :class:`~gglspeedup.attention.DiffuserSelfAttention` in training mode (dropout 0.1, 5 hops),
    hidden 256, 4 heads, batch 8, float32, on our own fixed pattern (window 64, 64 random and 64
    global tokens, one graph shared by the batch); forward + backward is ``out.sum().backward()``.
``sdpa``
    torch's dense attention (``scaled_dot_product_attention``) with the same batch, heads and head
    dim (8 x 4 x 64), float32, forward + backward, on the GPU (attention alone, no projections),
    with the memory it needed (``torch.cuda.max_memory_allocated`` above what was allocated before).
    Under the simulator torch has no CUDA: the row is torch dense on the CPU, labelled ``cpu``.

CPU == GPU: at one length per op (the first), the GPU's outputs and gradients against the CPU's,
within the tolerance the tests document (``tests/conftest.py::assert_same_bits``): bit for bit on
the simulator, 1024 ulps of the values' scale on a real GPU (NVVM fuses multiply-adds, libdevice
rounds ``exp`` its own way); for the Diffuser row the op is the layer's attention
(:func:`~gglspeedup.attention.diffusion_attention`, dropout 0.1 keyed by the same torch seed) on the
same inputs, the layer's cuBLAS / MKL projections aside. A value past it fails the check (the
figures stay).

Bounded: the whole check stops starting measurements after ``budget_s`` (full: 120 s; the rows
left are marked ``skipped``); a CPU (or GPU) row whose forward + backward call is projected (the
previous length's, scaled by the tokens) past ``call_cap_s`` (8 s) is skipped with that reason
(the CPU Diffuser layer at 16384 tokens, likely). Each timing takes calls until ``slice_s`` of
them (at least one, at most ``max_repeats``).
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["attention", "SIZES", "POOLING_OPS"]

POOLING_OPS = ("softmax", "sparsemax", "gfusedmax")

SIZES = {
    "full": {
        "tokens": (1024, 4096, 16384),
        "graph_nodes": 64,
        "pool_heads": 4,
        "batch": 8,
        "hidden": 256,
        "heads": 4,
        "pattern": (64, 64, 64),
        "budget_s": 120.0,
        "call_cap_s": 8.0,
        "slice_s": 1.0,
        "max_repeats": 10,
    },
    "tiny": {
        "tokens": (8, 12),
        "graph_nodes": 4,
        "pool_heads": 2,
        "batch": 1,
        "hidden": 8,
        "heads": 2,
        "pattern": (2, 1, 1),
        "budget_s": 300.0,
        "call_cap_s": 60.0,
        "slice_s": 0.0,
        "max_repeats": 1,
    },
}


def _sizes(size) -> dict:
    """This check's sizes from a name, its own dict, or the runner's size dict (``checks.SIZES``)."""
    if isinstance(size, str):
        return SIZES[size]
    if "tokens" in size:
        return size
    from .checks import SIZES as RUNNER

    return SIZES["tiny" if size is RUNNER["tiny"] or size == RUNNER["tiny"] else "full"]


class _Clock:
    """The check's budget: ``left()`` seconds before no new measurement starts."""

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def _timed(call, sync, size) -> dict:
    """Median / best ms of ``call`` (synced after each) after one warm-up call; the warm-up's seconds."""
    start = time.perf_counter()
    call()
    sync()
    warm = time.perf_counter() - start
    seconds = []
    while len(seconds) < max(1, size["max_repeats"]) and (not seconds or sum(seconds) < size["slice_s"]):
        start = time.perf_counter()
        call()
        sync()
        seconds.append(time.perf_counter() - start)
    return {
        "ms": 1e3 * float(np.median(seconds)),
        "ms_best": 1e3 * min(seconds),
        "repeats": len(seconds),
        "warm_s": warm,
    }


def _row(op, tokens, device, forward, both, **extra) -> dict:
    return {
        "op": op,
        "tokens": tokens,
        "device": device,
        "ms_forward": round(forward["ms"], 4),
        "ms_forward_backward": round(both["ms"], 4),
        "max_abs_diff_vs_cpu": None,
        "repeats": both["repeats"],
        "warmup_s": round(forward["warm_s"] + both["warm_s"], 3),
        **extra,
    }


def _skipped(op, tokens, device, reason) -> dict:
    return {"op": op, "tokens": tokens, "device": device, "skipped": reason}


def _gate(clock, projected, size) -> str | None:
    """Why a measurement is not started (the budget spent, or a call projected past the cap), or None."""
    if clock.left() <= 0:
        return f"the check's {clock.seconds:.0f} s budget was spent"
    if projected is not None and projected > size["call_cap_s"]:
        return f"one forward + backward projected at {projected:.1f} s > the {size['call_cap_s']:.0f} s cap per call"
    return None


def _compare(pairs, simulated: bool) -> dict:
    """Max |gpu - cpu| over ``(name, gpu, cpu)`` host arrays, and whether every pair is within the
    documented tolerance (floats: 0 on the simulator, else 1024 ulps of the CPU values' scale, as
    ``assert_allclose(rtol=tol, atol=tol * scale)``; integers exactly)."""
    worst, within, failed = 0.0, True, []
    for name, gpu, cpu in pairs:
        gpu, cpu = np.asarray(gpu), np.asarray(cpu)
        if gpu.shape != cpu.shape:
            raise AssertionError(f"{name}: GPU shape {gpu.shape} != CPU shape {cpu.shape}")
        if cpu.dtype.kind != "f" or simulated:
            ok = np.array_equal(gpu, cpu)
            diff = float(np.max(np.abs(gpu.astype(np.float64) - cpu), initial=0.0))
        else:
            tol = 1024 * np.finfo(cpu.dtype).eps
            scale = float(np.max(np.abs(cpu), initial=0.0))
            diff = float(np.max(np.abs(gpu.astype(np.float64) - cpu), initial=0.0))
            ok = bool(np.all(np.abs(gpu - cpu) <= tol * scale + tol * np.abs(cpu)))
        worst = max(worst, diff)
        if not ok:
            within = False
            failed.append(name)
    return {"max_abs_diff": worst, "within": within, "failed": failed}


def _pooling_batch(tokens: int, nodes: int, seed: int):
    """``tokens / nodes`` graphs of ``nodes`` nodes, ``2 nodes`` random pairs each (degree 4)."""
    from ...attention import graph_batch

    graphs = max(1, tokens // nodes)
    rng = np.random.default_rng(seed)
    edges = [rng.integers(0, nodes, size=(2 * nodes, 2)) for _ in range(graphs)]
    return graph_batch(sizes=[nodes] * graphs, edge_index=edges), graphs


def _pooling_rows(op, size, device, sync, clock, check) -> list:
    from ...attention.pooling._state import MappingState, driver_for, per_head
    from ...device import Device, to_numpy

    heads, rows, last = size["pool_heads"], [], {}
    drivers = {"gpu": driver_for(device), "cpu": driver_for(Device("cpu"))}
    syncs = {"gpu": sync, "cpu": lambda: None}
    lam = per_head("lam", 1.0, heads, positive=False) if op == "gfusedmax" else None
    gamma = per_head("gamma", 1.0, heads, positive=True) if op != "softmax" else None
    for tokens in size["tokens"]:
        batch, graphs = _pooling_batch(tokens, size["graph_nodes"], seed=tokens)
        rng = np.random.default_rng(tokens + 1)
        x_host = rng.standard_normal((heads, batch.num_nodes))
        grad_host = rng.standard_normal((heads, batch.num_nodes))
        states = {}
        for where in ("gpu", "cpu"):
            previous = last.get(where)
            projected = None if previous is None else previous[0] * tokens / previous[1]
            reason = _gate(clock, projected, size)
            if reason:
                rows.append(_skipped(op, tokens, where, reason))
                continue
            driver = drivers[where]
            x, grad = driver.xp.asarray(x_host), driver.xp.asarray(grad_host)

            def forward(driver=driver, x=x, batch=batch):
                return MappingState(op, driver, batch, x, lam, gamma)

            forward_s = _timed(forward, syncs[where], size)
            both = _timed(lambda forward=forward, grad=grad: forward().vjp(grad), syncs[where], size)
            last[where] = (both["ms"] / 1e3, tokens)
            rows.append(_row(op, tokens, where, forward_s, both, graphs=graphs, heads=heads))
            if tokens == size["tokens"][0]:
                state = forward()
                states[where] = (state, state.vjp(grad))
        if len(states) == 2:  # CPU == GPU at the first length
            (gs, gv), (cs, cv) = states["gpu"], states["cpu"]
            pairs = [("output", to_numpy(gs.output), to_numpy(cs.output))]
            pairs += [(f"grad {i}", to_numpy(g), to_numpy(c)) for i, (g, c) in enumerate(zip(gv, cv)) if c is not None]
            if op == "gfusedmax":
                pairs += [(n, to_numpy(getattr(gs, n)), to_numpy(getattr(cs, n))) for n in ("fused", "label", "bnd")]
            check[op] = {"tokens": tokens, **_compare(pairs, device.simulated)}
            rows[-2]["max_abs_diff_vs_cpu"] = check[op]["max_abs_diff"]
    return rows


def _diffuser_rows(size, device, torch, clock, check) -> list:
    """The Diffuser layer on the GPU and the CPU, and torch's dense attention, at every length."""
    import types

    from ...attention import DiffuserSelfAttention, SequencePattern

    window, randoms, globs = size["pattern"]
    config = types.SimpleNamespace(
        hidden_size=size["hidden"],
        num_attention_heads=size["heads"],
        attention_probs_dropout_prob=0.1,
        attention_window=[window],
    )
    where_torch = {"gpu": "cpu" if device.simulated else "cuda:0", "cpu": "cpu"}
    patterns = {
        "gpu": SequencePattern(window, randoms, globs, seed=0, device=device),
        "cpu": SequencePattern(window, randoms, globs, seed=0),
    }
    sync = _torch_sync(torch, device)
    syncs = {"gpu": sync, "cpu": lambda: None}
    rows, last = [], {}
    b, heads, depth = size["batch"], size["heads"], size["hidden"] // size["heads"]
    for tokens in size["tokens"]:
        graphs = {w: p.csc(tokens, batch=b, shared=True) for w, p in patterns.items()}
        _same_pattern(graphs["gpu"], graphs["cpu"], tokens)
        for where in ("gpu", "cpu"):
            previous = last.get(where)
            reason = _gate(clock, None if previous is None else previous[0] * tokens / previous[1], size)
            if reason:
                rows.append(_skipped("diffuser", tokens, where, reason))
                continue
            torch.manual_seed(0)
            on = where_torch[where]
            layer = DiffuserSelfAttention(config, 0).to(on).train()
            x = torch.randn(b, tokens, size["hidden"], device=on, requires_grad=True)
            graph = graphs[where]

            def both(layer=layer, x=x, graph=graph):
                layer.zero_grad(set_to_none=True)
                x.grad = None
                layer(x, g=graph)[0].sum().backward()

            forward = _timed(lambda layer=layer, x=x, graph=graph: layer(x, g=graph), syncs[where], size)
            timed = _timed(both, syncs[where], size)
            last[where] = (timed["ms"] / 1e3, tokens)
            extra = {"edges_per_sequence": int(graph.num_edges)}
            if where == "gpu" and not device.simulated:
                extra["peak_mib"] = _peak_mib(torch, both)
            rows.append(_row("diffuser", tokens, where, forward, timed, **extra))
            del layer, x
        if tokens == size["tokens"][0] and clock.left() > 0:
            check["diffuser"] = {
                "tokens": tokens,
                **_diffusion_check(torch, graphs, where_torch, (b, tokens, heads, depth), device),
            }
            for row in rows:
                if row["tokens"] == tokens and row["device"] == "gpu" and "skipped" not in row:
                    row["max_abs_diff_vs_cpu"] = check["diffuser"]["max_abs_diff"]
        rows.append(_dense_row(torch, device, (b, heads, tokens, depth), clock, size, last))
    return rows


def _same_pattern(gpu, cpu, tokens) -> None:
    from ...device import to_numpy

    for name in ("indptr", "indices"):
        if not np.array_equal(to_numpy(getattr(gpu, name)), to_numpy(getattr(cpu, name))):
            raise AssertionError(f"the GPU's pattern at {tokens} tokens differs from the CPU's ({name})")


def _diffusion_check(torch, graphs, where_torch, shape, device) -> dict:
    """The layer's attention op on the same inputs on both devices: outputs and q / k / v gradients."""
    from ...attention import diffusion_attention

    generator = torch.Generator().manual_seed(2)
    inputs = [0.5 * torch.randn(*shape, generator=generator) for _ in range(3)]
    upstream = torch.randn(*shape, generator=generator)
    results = {}
    for where in ("gpu", "cpu"):
        on = where_torch[where]
        q, k, v = (t.to(on).requires_grad_() for t in inputs)
        torch.manual_seed(3)  # the dropout's key: the same draws on both devices
        out = diffusion_attention(q, k, v, graphs[where], hops=5, alpha=0.1, dropout=0.1)
        grads = torch.autograd.grad(out, (q, k, v), upstream.to(on))
        results[where] = [t.detach().cpu().numpy() for t in (out, *grads)]
    names = ("output", "grad q", "grad k", "grad v")
    return _compare(list(zip(names, results["gpu"], results["cpu"])), device.simulated)


def _dense_row(torch, device, shape, clock, size, last) -> dict:
    """torch's dense attention on the GPU (the CPU under the simulator), forward and forward + backward."""
    tokens = shape[2]
    where = "cpu" if device.simulated else "gpu"
    previous = last.get("sdpa")
    reason = _gate(clock, None if previous is None else previous[0] * (tokens / previous[1]) ** 2, size)
    if reason:
        return _skipped("sdpa", tokens, where, reason)
    on = "cpu" if device.simulated else "cuda:0"
    generator = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(*shape, generator=generator).to(on).requires_grad_() for _ in range(3))
    upstream = torch.randn(*shape, generator=generator).to(on)
    attend = torch.nn.functional.scaled_dot_product_attention

    def both():
        q.grad = k.grad = v.grad = None
        attend(q, k, v).backward(upstream)

    sync = _torch_sync(torch, device)
    try:
        forward = _timed(lambda: attend(q, k, v), sync, size)
        timed = _timed(both, sync, size)
        extra = {} if device.simulated else {"peak_mib": _peak_mib(torch, both)}
    except torch.cuda.OutOfMemoryError as error:  # dense attention's own limit: a figure, not a failure
        return _skipped("sdpa", tokens, where, f"out of GPU memory: {str(error).splitlines()[0]}")
    last["sdpa"] = (timed["ms"] / 1e3, tokens)
    return _row("sdpa", tokens, where, forward, timed, **extra)


def _torch_sync(torch, device):
    return (lambda: None) if device.simulated else torch.cuda.synchronize


def _peak_mib(torch, call) -> float:
    """MiB torch's allocator held above what was allocated before one ``call`` (CuPy's and the
    graph's arrays are not counted)."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    call()
    torch.cuda.synchronize()
    return round((torch.cuda.max_memory_allocated() - before) / 2**20, 1)


def _ms(ms: dict, op: str, device: str) -> str:
    value = ms.get((op, device))
    return "skipped" if value is None else f"{value:.2f}"


def attention(size="full") -> dict:
    """Run the check at ``size`` (a name of :data:`SIZES`, such a dict, or the runner's size dict):
    ``{"status", "summary", "figures"}``; status ``fail`` when CPU and GPU differ past the tolerance."""
    import numba
    import torch

    from ._common import _device, _sync

    size = _sizes(size)
    device = _device()
    clock = _Clock(size["budget_s"])
    check, rows = {}, []
    for op in POOLING_OPS:
        rows += _pooling_rows(op, size, device, lambda: _sync(device), clock, check)
    rows += _diffuser_rows(size, device, torch, clock, check)
    order = {name: i for i, name in enumerate((*POOLING_OPS, "diffuser", "sdpa"))}
    rows.sort(key=lambda r: (order[r["op"]], r["tokens"], r["device"] != "gpu"))
    off = [op for op, result in check.items() if not result["within"]]
    tolerance = "bit for bit (the simulator)" if device.simulated else "1024 ulps of the values' scale (a real GPU)"
    figures = {
        "gpu": "numba's CUDA simulator (times meaningless)" if device.simulated else "cuda:0",
        "sdpa_on": "cpu: torch has no CUDA under the simulator" if device.simulated else "cuda:0",
        "pooling": {"graph_nodes": size["graph_nodes"], "degree": 4, "heads": size["pool_heads"], "dtype": "float64"},
        "diffuser": {
            "batch": size["batch"],
            "hidden": size["hidden"],
            "heads": size["heads"],
            "pattern": dict(zip(("window", "random", "global"), size["pattern"])),
            "dtype": "float32",
            "dropout": 0.1,
        },
        "tolerance": tolerance,
        "check": check,
        "budget_s": size["budget_s"],
        "call_cap_s": size["call_cap_s"],
        "numba_threads": numba.get_num_threads(),
        "torch_threads": torch.get_num_threads(),
        "rows": rows,
    }
    result = {"status": "fail" if off else "pass", "summary": _summary(rows, check, size, device.simulated)}
    if off:
        result["details"] = "\n".join(f"{op} at {check[op]['tokens']} tokens: {check[op]}" for op in off)
    return {**result, "figures": figures}


def _summary(rows: list, check: dict, size: dict, simulated: bool) -> str:
    """One line: on a GPU the forward + backward ms of every op at the largest length (the CPU's
    beside), then the CPU == GPU verdict and the skipped rows."""
    off = [op for op, result in check.items() if not result["within"]]
    tolerance = "bit for bit" if simulated else "1024 ulps"
    verdict = (
        f"CPU != GPU past the tolerance: {', '.join(off)}" if off else f"{len(check)} ops CPU == GPU ({tolerance})"
    )
    if simulated:
        summary = "simulator (times meaningless), torch dense on the CPU (no CUDA); " + verdict
    else:
        top = size["tokens"][-1]
        ms = {
            (r["op"], r["device"]): r["ms_forward_backward"] for r in rows if r["tokens"] == top and "skipped" not in r
        }
        parts = [
            f"{op} {_ms(ms, op, 'gpu')}" + (f" (CPU {_ms(ms, op, 'cpu')})" if op != "sdpa" else "")
            for op in (*POOLING_OPS, "diffuser", "sdpa")
        ]
        summary = f"fwd+bwd ms at {top} tokens on the GPU: " + ", ".join(parts) + "; " + verdict
    skipped = sum("skipped" in r for r in rows)
    return summary + (f"; {skipped} rows skipped" if skipped else "")

"""The ``attention`` check of ``python -m gglspeedup.bench gpu``: the attention kernels timed on ``cuda:0``.

Four ops at 1024 / 4096 / 16384 tokens (``--size full``), each on the GPU and the same code on the
CPU, forward and forward + backward (a sync after every call, the median of the timed calls after
a warm-up call that compiles):

``softmax`` / ``sparsemax`` / ``gfusedmax``
    the pooling maps (``MappingState`` and its ``vjp``, what the torch maps and the NumPy maps
    run; public in :mod:`gglspeedup.attention.pooling_numpy`) over a batch of graphs of 64 nodes with ``2 n``
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
rounds ``exp`` its own way); integers exactly. For the Diffuser row: the pattern built on each
device, and the layer's attention (:func:`~gglspeedup.attention.diffusion_attention`, dropout 0.1
keyed by the same torch seed) on the same inputs, the layer's cuBLAS / MKL projections aside. A
value past it fails the check (the figures stay).

Bounded: no measurement starts after ``budget_s`` (full: 120 s, compiling included, or
:func:`attention`'s ``budget_s``; the rows left are ``skipped``), in this order: at the first length
every op's GPU row, the dense row, every CPU row and CPU == GPU check (an H200 run spent 120 s on the
GPU's long rows before any of them); then the longer lengths' GPU, dense and CPU rows. A row whose
forward + backward call is projected (the same op and device at the previous length, scaled by the
tokens, by their square for ``sdpa``) past ``call_cap_s`` (8 s) is skipped with that reason (the
CPU Diffuser layer at 16384 tokens, likely). Each timing takes calls until ``slice_s`` (1 s) of
them, at least one, at most ``max_repeats`` (10). A GPU row that runs out of memory is a
``skipped`` row saying so.
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
    """This check's sizes from a name of :data:`SIZES` or such a dict."""
    return SIZES[size] if isinstance(size, str) else size


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
            within = False
            failed.append(f"{name} (shape {gpu.shape} != {cpu.shape})")
            continue
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


class _Cases:
    """What each row runs: ``make(op, tokens, where)`` -> ``(forward, forward_backward, extra)``
    calls on ``where`` ("gpu": ``cuda:0`` or the simulator; "cpu"), and the CPU == GPU check of an
    op at one length."""

    def __init__(self, size: dict, device, torch):
        from ...attention.pooling_numpy import driver_for, per_head
        from ...device import Device

        self.size, self.device, self.torch = size, device, torch
        self.on = {"gpu": "cpu" if device.simulated else "cuda:0", "cpu": "cpu"}  # torch tensors' device
        self.drivers = {"gpu": driver_for(device), "cpu": driver_for(Device("cpu"))}
        heads = size["pool_heads"]
        self.lam = per_head("lam", 1.0, heads, positive=False)
        self.gamma = per_head("gamma", 1.0, heads, positive=True)
        self.batches, self.graphs, self.patterns = {}, {}, {}

    def sync(self, where: str) -> None:
        """Wait for everything queued on the GPU (CuPy's stream and torch's), nothing on the CPU."""
        if where == "gpu" and not self.device.simulated:
            self.torch.cuda.synchronize()

    def make(self, op, tokens, where):
        if op in POOLING_OPS:
            return self._pooling(op, tokens, where)
        return self._diffuser(tokens, where) if op == "diffuser" else self._sdpa(tokens, where)

    # -- the pooling maps --------------------------------------------------------------------
    def _batch(self, tokens):
        """``tokens / nodes`` graphs of ``nodes`` nodes, ``2 nodes`` random pairs each (degree 4), and
        standard normal head-major scores and output gradients."""
        if tokens not in self.batches:
            from ...attention import graph_batch

            nodes, heads = self.size["graph_nodes"], self.size["pool_heads"]
            graphs = max(1, tokens // nodes)
            rng = np.random.default_rng(tokens)
            edges = [rng.integers(0, nodes, size=(2 * nodes, 2)) for _ in range(graphs)]
            batch = graph_batch(sizes=[nodes] * graphs, edge_index=edges)
            scores, grad = rng.standard_normal((2, heads, batch.num_nodes))
            self.batches[tokens] = (batch, graphs, scores, grad)
        return self.batches[tokens]

    def _pooling(self, op, tokens, where):
        from ...attention.pooling_numpy import MappingState

        batch, graphs, scores, grad = self._batch(tokens)
        driver = self.drivers[where]
        x, grad = driver.xp.asarray(scores), driver.xp.asarray(grad)
        lam = self.lam if op == "gfusedmax" else None
        gamma = self.gamma if op != "softmax" else None

        def forward():
            return MappingState(op, driver, batch, x, lam, gamma)

        return forward, lambda: forward().vjp(grad), {"graphs": graphs, "heads": self.size["pool_heads"]}

    def _pooling_check(self, op, tokens) -> dict:
        from ...device import to_numpy

        runs = {}
        for where in ("gpu", "cpu"):
            forward, _, _ = self._pooling(op, tokens, where)
            state = forward()
            _, _, _, grad = self._batch(tokens)
            values = [state.output, *(g for g in state.vjp(self.drivers[where].xp.asarray(grad)) if g is not None)]
            if op == "gfusedmax":
                values += [state.fused, state.label, state.bnd]
            runs[where] = [to_numpy(v) for v in values]
        names = ["output", *(f"grad {i}" for i in range(len(runs["cpu"]) - 1))]
        if op == "gfusedmax":
            names[-3:] = ["fused", "label", "bnd"]
        return _compare(list(zip(names, runs["gpu"], runs["cpu"])), self.device.simulated)

    # -- the Diffuser layer and torch's dense attention ---------------------------------------
    def _graph(self, tokens, where):
        """Our own fixed pattern built on ``where``, one graph for the batch (the GPU's is compared
        with the CPU's by the check)."""
        if (tokens, where) not in self.graphs:
            from ...attention import SequencePattern

            if where not in self.patterns:
                on = self.device if where == "gpu" else "cpu"
                self.patterns[where] = SequencePattern(*self.size["pattern"], seed=0, device=on)
            self.graphs[tokens, where] = self.patterns[where].csc(tokens, batch=self.size["batch"], shared=True)
        return self.graphs[tokens, where]

    def _diffuser(self, tokens, where):
        import types

        from ...attention import DiffuserSelfAttention

        torch, size, on = self.torch, self.size, self.on[where]
        config = types.SimpleNamespace(
            hidden_size=size["hidden"],
            num_attention_heads=size["heads"],
            attention_probs_dropout_prob=0.1,
            attention_window=[size["pattern"][0]],
        )
        graph = self._graph(tokens, where)
        torch.manual_seed(0)
        layer = DiffuserSelfAttention(config, 0).to(on).train()
        x = torch.randn(size["batch"], tokens, size["hidden"], device=on, requires_grad=True)

        def both():
            layer.zero_grad(set_to_none=True)
            x.grad = None
            layer(x, g=graph)[0].sum().backward()

        return (lambda: layer(x, g=graph)), both, {"edges_per_sequence": int(graph.num_edges)}

    def _shape(self, tokens):
        size = self.size
        return size["batch"], tokens, size["heads"], size["hidden"] // size["heads"]

    def _diffuser_check(self, tokens) -> dict:
        """The pattern built on both devices, and the layer's attention op on the same inputs on both:
        outputs and q / k / v gradients."""
        from ...attention import diffusion_attention
        from ...device import to_numpy

        torch = self.torch
        generator = torch.Generator().manual_seed(2)
        inputs = [0.5 * torch.randn(*self._shape(tokens), generator=generator) for _ in range(3)]
        upstream = torch.randn(*self._shape(tokens), generator=generator)
        runs = {}
        for where in ("gpu", "cpu"):
            on = self.on[where]
            q, k, v = (t.to(on).requires_grad_() for t in inputs)
            torch.manual_seed(3)  # the dropout's key: the same draws on both devices
            out = diffusion_attention(q, k, v, self._graph(tokens, where), hops=5, alpha=0.1, dropout=0.1)
            grads = torch.autograd.grad(out, (q, k, v), upstream.to(on))
            runs[where] = [t.detach().cpu().numpy() for t in (out, *grads)]
        graphs = [self._graph(tokens, where) for where in ("gpu", "cpu")]
        pairs = [(name, *(to_numpy(getattr(g, name)) for g in graphs)) for name in ("indptr", "indices")]
        pairs += list(zip(("output", "grad q", "grad k", "grad v"), runs["gpu"], runs["cpu"]))
        return _compare(pairs, self.device.simulated)

    def check(self, op, tokens) -> dict:
        return self._diffuser_check(tokens) if op == "diffuser" else self._pooling_check(op, tokens)

    def _sdpa(self, tokens, where):
        """torch's dense attention, ``(batch, heads, tokens, head dim)`` float32 (on the CPU under the simulator)."""
        torch, on = self.torch, self.on[where]
        b, _, heads, depth = self._shape(tokens)
        generator = torch.Generator().manual_seed(4)
        q, k, v = (torch.randn(b, heads, tokens, depth, generator=generator).to(on).requires_grad_() for _ in range(3))
        upstream = torch.randn(b, heads, tokens, depth, generator=generator).to(on)
        attend = torch.nn.functional.scaled_dot_product_attention

        def both():
            q.grad = k.grad = v.grad = None
            attend(q, k, v).backward(upstream)

        return (lambda: attend(q, k, v)), both, {}


def _measure(cases, op, tokens, where, clock, last) -> dict:
    """One row: the gate (budget, projected call), then forward and forward + backward timed; on a
    real GPU the Diffuser and dense rows also say the memory torch's allocator needed."""
    size, torch = cases.size, cases.torch
    previous = last.get((op, where))
    power = 2 if op == "sdpa" else 1  # dense attention grows with the square of the tokens
    reason = _gate(clock, None if previous is None else previous[0] * (tokens / previous[1]) ** power, size)
    if reason:
        return _skipped(op, tokens, where, reason)
    try:
        forward, both, extra = cases.make(op, tokens, where)
        sync = lambda: cases.sync(where)  # noqa: E731
        forward_s, both_s = _timed(forward, sync, size), _timed(both, sync, size)
        if where == "gpu" and not cases.device.simulated and op in ("diffuser", "sdpa"):
            extra["peak_mib"] = _peak_mib(torch, both)
    except torch.cuda.OutOfMemoryError as error:  # a figure of its own (dense attention's limit), not a crash
        torch.cuda.empty_cache()
        return _skipped(op, tokens, where, f"out of GPU memory: {str(error).splitlines()[0]}")
    last[op, where] = (both_s["ms"] / 1e3, tokens)
    return _row(op, tokens, where, forward_s, both_s, **extra)


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


def attention(size="full", budget_s: float | None = None) -> dict:
    """Run the check at ``size`` (a name of :data:`SIZES`, or such a dict):
    ``{"status", "summary", "figures"}``, ``fail`` when CPU and GPU differ past the tolerance;
    ``budget_s`` (seconds, or ``"10min"``): when measurements stop starting (default the size's)."""
    import numba
    import torch

    from ...validation import check_seconds
    from ._common import _device

    size = _sizes(size) if budget_s is None else {**_sizes(size), "budget_s": check_seconds("budget_s", budget_s)}
    device = _device()
    clock = _Clock(size["budget_s"])
    cases = _Cases(size, device, torch)
    ops, tokens = (*POOLING_OPS, "diffuser"), size["tokens"]
    check, rows, last = {}, [], {}
    sdpa_on = "cpu" if device.simulated else "gpu"
    first, longer = tokens[:1], tokens[1:]
    # most wanted first (a spent budget cuts long rows, not short ones or checks): module docstring
    plan = [(op, n, "gpu") for op in ops for n in first] + [("sdpa", n, sdpa_on) for n in first]
    plan += [(op, n, "cpu") for op in ops for n in first]
    for op, n, where in plan:
        rows.append(_measure(cases, op, n, where, clock, last))
    for op in ops:
        if clock.left() > 0:
            check[op] = {"tokens": tokens[0], **cases.check(op, tokens[0])}
    plan = [(op, n, "gpu") for op in ops for n in longer] + [("sdpa", n, sdpa_on) for n in longer]
    plan += [(op, n, "cpu") for op in ops for n in longer]
    for op, n, where in plan:
        rows.append(_measure(cases, op, n, where, clock, last))
    for row in rows:
        if row["device"] == "gpu" and "skipped" not in row and row["tokens"] == check.get(row["op"], {}).get("tokens"):
            row["max_abs_diff_vs_cpu"] = check[row["op"]]["max_abs_diff"]
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

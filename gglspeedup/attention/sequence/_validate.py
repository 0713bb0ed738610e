"""Argument checks of the fused attention functions (raised before any kernel runs; the callers then
build their executor, :func:`~._ops.graph_ops`)."""

from __future__ import annotations

import math

__all__ = ["check_inputs", "check_fraction"]


def check_inputs(q, k, v, graph, key_padding_mask, hops, alpha, dropout):
    """``(B, L, H, D, pad, repeats)`` for ``q, k, v`` on ``graph`` (``repeats``: sequences per graph
    row, ``B`` for a shared graph), or raise naming the argument."""
    import torch

    from ...device import reject_meta
    from ...validation import check_int
    from .graph import AttentionGraph

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        reject_meta(name, t)  # no data for the kernels to read
        if t.dim() != 4:
            raise ValueError(f"{name} must have shape (batch, seq_len, heads, head_dim), got {tuple(t.shape)}")
        if t.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{name} must be float32 or float64, got {t.dtype}")
    if q.shape != k.shape or q.shape != v.shape:
        raise ValueError(
            f"q, k and v must have the same shape, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(f"q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.device != k.device or q.device != v.device:
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    if not isinstance(graph, AttentionGraph):
        raise TypeError(f"graph must be an AttentionGraph (SequencePattern.csc), got {type(graph).__name__}")
    batch, length, heads, depth = (int(s) for s in q.shape)
    if graph.shared:
        if graph.num_nodes != length:
            raise ValueError(f"graph is a shared {graph.num_nodes}-token pattern but q has seq_len {length}")
        repeats = batch
    else:
        if graph.num_nodes != batch * length:
            raise ValueError(
                f"graph has {graph.num_nodes} nodes but q holds batch * seq_len = {batch} * {length} = "
                f"{batch * length} tokens"
            )
        repeats = 1
    real_gpu = graph.device.is_cuda and not graph.device.simulated
    if real_gpu != (q.device.type == "cuda"):
        raise ValueError(
            f"q is on {q.device} but the graph was built on {graph.device}: build the pattern on the same device"
        )
    if graph.device.is_cuda and (heads > 16 or depth > 128):
        raise ValueError(
            f"on a GPU heads must be <= 16 and head_dim <= 128 (per-thread scratch), got {heads} and {depth}"
        )
    hops = check_int("hops", hops, minimum=0)
    check_fraction("alpha", alpha, "[0, 1]", lambda a: 0.0 <= a <= 1.0)
    check_fraction("dropout", dropout, "[0, 1)", lambda p: 0.0 <= p < 1.0)
    pad = None
    if key_padding_mask is not None:
        if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
            raise TypeError("key_padding_mask must be a bool torch.Tensor (True at padding tokens)")
        reject_meta("key_padding_mask", key_padding_mask)
        if tuple(key_padding_mask.shape) != (batch, length):
            raise ValueError(
                f"key_padding_mask must have shape (batch, seq_len) = {(batch, length)}, "
                f"got {tuple(key_padding_mask.shape)}"
            )
        pad = key_padding_mask.to(device=q.device).reshape(-1).to(torch.uint8).contiguous()
    return batch, length, heads, depth, pad, repeats


def check_fraction(name, value, interval, inside) -> float:
    """``value`` (a Python or NumPy real number, not a bool) as a float for which ``inside`` holds,
    or raise naming ``name``: ``TypeError`` for anything else, ``ValueError`` outside ``interval``
    (NaN included)."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a float in {interval}, got {type(value).__name__} {value!r}")
    value = float(value)
    if not (math.isfinite(value) and inside(value)):
        raise ValueError(f"{name} must be a float in {interval}, got {value!r}")
    return value

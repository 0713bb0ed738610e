"""Attention pooling of one graph batch across processes or devices, split at graph boundaries.

Pooling never mixes graphs, so a batch splits cleanly: each part takes a run of whole graphs, the
runs balanced by node count (:func:`partition_graphs`), and pools only those. Two ways to use it:

- **Processes** (a ``torch.distributed`` group, gloo on CPUs, NCCL on GPUs): every rank knows the
  batch's ``ptr`` and edges, takes its part with :func:`split_batch` (its node range, local
  ``ptr`` and edge index), runs the model on its own nodes only, computes its share of the loss,
  and after ``backward`` calls :func:`sum_gradients`: the summed gradients are those of one
  process running the whole batch (the loss being a sum over graphs).
- **Devices in one process**: :func:`pool_across_devices` runs the module's math on each part on
  its own device (the parameters copied there inside the autograd graph) and concatenates the
  pooled rows on the first device; backward flows to the one set of parameters.

>>> partition_graphs([0, 10, 12, 40, 41, 60], 2).tolist()
[0, 3, 5]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .batch import graph_batch

__all__ = ["partition_graphs", "split_batch", "LocalBatch", "sum_gradients", "pool_across_devices"]


def partition_graphs(ptr, parts: int) -> np.ndarray:
    """Graph boundaries ``(parts + 1,)``: part ``r`` takes graphs ``b[r] .. b[r + 1]``, cut where the
    node count comes closest to ``r / parts`` of the batch (parts may be empty when graphs are few)."""
    ptr = graph_batch(ptr).ptr
    if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)) or parts < 1:
        raise ValueError(f"parts must be an int >= 1, got {parts!r}")
    if ptr.shape[0] == 1:  # no graphs
        return np.zeros(parts + 1, np.int64)
    targets = ptr[-1] * np.arange(1, parts) / parts
    right = np.clip(np.searchsorted(ptr, targets), 1, ptr.shape[0] - 1)
    closer_left = np.abs(ptr[right - 1] - targets) <= np.abs(ptr[right] - targets)
    cuts = np.maximum.accumulate(np.where(closer_left, right - 1, right))
    return np.concatenate([[0], cuts, [ptr.shape[0] - 1]]).astype(np.int64)


class LocalBatch(NamedTuple):
    """One part of a batch: graphs ``graphs[0] .. graphs[1]``, rows ``nodes[0] .. nodes[1]`` of the
    batch, their ``ptr`` from 0 and their edges as a ``(2, E)`` index of local rows (``None``
    when the batch has none)."""

    graphs: tuple
    nodes: tuple
    ptr: np.ndarray
    edge_index: np.ndarray | None


def split_batch(ptr=None, edge_index=None, *, rank: int, world_size: int, sizes=None) -> LocalBatch:
    """Rank ``rank``'s part of the batch (see :func:`partition_graphs`)."""
    batch = graph_batch(ptr, edge_index, sizes=sizes)
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int in [0, world_size = {world_size}), got {rank!r}")
    bounds = partition_graphs(batch.ptr, world_size)
    g0, g1 = int(bounds[rank]), int(bounds[rank + 1])
    n0, n1 = int(batch.ptr[g0]), int(batch.ptr[g1])
    local_edges = None
    if batch.has_edges:
        arrays = batch.arrays
        e0, e1 = int(arrays.edge_ptr[g0]), int(arrays.edge_ptr[g1])
        local_edges = np.stack([arrays.edge_u[e0:e1], arrays.edge_v[e0:e1]]) - n0
    return LocalBatch((g0, g1), (n0, n1), batch.ptr[g0 : g1 + 1] - n0, local_edges)


def sum_gradients(module, group=None) -> None:
    """All-reduce (sum) every parameter gradient of ``module`` over ``group``: after each rank's
    ``backward`` on its own graphs, every rank holds the whole batch's gradient."""
    import torch.distributed as dist

    for parameter in module.parameters():
        if parameter.requires_grad:
            if parameter.grad is None:
                parameter.grad = parameter.detach().new_zeros(parameter.shape)
            dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM, group=group)


def pool_across_devices(module, x, ptr=None, edge_index=None, devices=("cpu",), *, sizes=None):
    """``module(x, ptr, edge_index)`` computed in parts, one per device, rows concatenated on
    ``devices[0]`` (the one-device result up to rounding: torch's matrix products over row subsets
    may round apart, about 1e-16 in float64; gradients reach ``module``'s parameters and ``x``).
    ``module`` is an :class:`~gglspeedup.attention.AttentionPooling`."""
    import torch
    from torch.func import functional_call

    batch = graph_batch(ptr, edge_index, sizes=sizes, num_nodes=x.shape[0])
    devices = [torch.device(d) for d in devices]
    if not devices:
        raise ValueError("devices must name at least one device")
    parameters = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    outputs = []
    for rank, device in enumerate(devices):
        part = split_batch(batch, rank=rank, world_size=len(devices))
        if part.graphs[0] == part.graphs[1]:
            continue
        state = {name: value.to(device) for name, value in {**parameters, **buffers}.items()}
        rows = x[part.nodes[0] : part.nodes[1]].to(device)
        edges = part.edge_index if batch.has_edges else None
        out = functional_call(module, state, (rows, part.ptr, edges))
        outputs.append(out.to(devices[0]))
    if not outputs:
        return x.new_zeros((0, module.output_size), device=devices[0])
    return torch.cat(outputs)

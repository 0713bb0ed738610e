"""Attention maps over a batch of graphs, as differentiable torch functions.

Each map turns per-node scores into per-node weights that sum to one inside every graph of the
batch, for all graphs and all heads in one call (scores ``[N]`` or ``[N, heads]``):

``softmax(scores, ptr)``
    ``exp(s_i) / sum_graph exp(s_j)``.
``sparsemax(scores, ptr, gamma)``
    the Euclidean projection of ``s / gamma`` onto the simplex (sparse weights).
``gfusedmax(scores, ptr, edge_index, lam, gamma)``
    ``sparsemax(f / gamma)`` with ``f`` the graph fused lasso of the scores on the graph's own
    edges, ``f = argmin 1/2 ||f - s||^2 + lam sum_(i,j) |f_i - f_j|`` (neighbours get equal
    weights in fused groups). ``fused_lasso(scores, ptr, edge_index, lam)`` is ``f`` alone.

Every map is a :class:`torch.autograd.Function` with an exact hand-written backward: softmax's
Jacobian, sparsemax's support-set projection, and the fused lasso's average over each connected
fused group, taken from the solver's certified structure (never from comparing floats), with
gradients for ``lam`` and ``gamma`` (numbers, or one per head; a tensor that requires grad gets
one). The solver is exact: see :mod:`gglspeedup.attention.pooling._kernels.fused_lasso`.

The batch is ``ptr`` (node offsets, PyG's ``ptr``) or ``sizes``, plus, for the fused maps, a
global ``(2, E)`` edge index or attpool2's list of per-graph ``(E_g, 2)`` arrays; pass a
:class:`~gglspeedup.attention.GraphBatch` from :func:`~gglspeedup.attention.graph_batch` as
``ptr`` to skip even the cache lookup. Work runs where the scores live: Numba kernels on the CPU
(parallel over graphs and heads), numba-cuda kernels on a GPU (scores stay on the device).
Computation is float64 inside; outputs and gradients come back in the scores' dtype.

>>> import torch
>>> s = torch.tensor([3.0, 2.9, 0.0, 1.0], dtype=torch.float64, requires_grad=True)
>>> w = gfusedmax(s, sizes=[3, 1], edge_index=[[[0, 1], [1, 2]], []], lam=0.1)
>>> w.detach().tolist()
[0.5, 0.5, 0.0, 1.0]
"""

from __future__ import annotations

import contextlib

import numpy as np

from ...device import Device, reject_meta
from ._state import MappingState, check_finite, driver_for, per_head, reduce_heads
from .batch import graph_batch

__all__ = ["softmax", "sparsemax", "gfusedmax", "fused_lasso"]


def _torch():
    try:
        import torch
    except ImportError as error:  # pragma: no cover - torch is what these functions are for
        raise ImportError("gglspeedup.attention's torch maps need PyTorch: pip install 'gglspeedup[torch]'") from error
    return torch


def _device(tensor) -> Device:
    return Device("cuda", tensor.device.index or 0) if tensor.device.type == "cuda" else Device("cpu")


@contextlib.contextmanager
def _stream(tensor):
    """Make torch's current stream CuPy's for the kernels of one call (no-op on the CPU)."""
    if tensor.device.type != "cuda":
        yield
        return
    import cupy

    torch = _torch()
    with (
        cupy.cuda.Device(tensor.device.index or 0),
        cupy.cuda.ExternalStream(torch.cuda.current_stream(tensor.device).cuda_stream),
    ):
        yield


def _to_driver(tensor, driver):
    """A torch tensor ``[N]`` / ``[N, H]`` as a C-contiguous float64 ``[H, N]`` driver array."""
    values = tensor.detach().to(dtype=_torch().float64)
    values = (values[None] if values.dim() == 1 else values.T).contiguous()
    if driver.xp is np:
        return values.cpu().numpy()
    return driver.xp.asarray(values)


def _from_driver(array, like, squeeze):
    """A driver array ``[H, N]`` as a new torch tensor ``[N]`` / ``[N, H]`` in ``like``'s dtype: a copy
    (the state keeps ``array`` for the backward; a float64 output that was a view of it refused
    in-place operations, "Output 0 of PoolingMap is a view", where a float32 one took them)."""
    torch = _torch()
    array = array[0] if squeeze else array.T
    tensor = torch.from_numpy(array) if isinstance(array, np.ndarray) else torch.as_tensor(array, device=like.device)
    return tensor.to(dtype=like.dtype, memory_format=torch.contiguous_format, copy=True)


def _parameter(name, value, reference):
    torch = _torch()
    if torch.is_tensor(value):
        reject_meta(name, value)
        return value
    if isinstance(value, (list, tuple, np.ndarray)):  # one per head: checked with the heads (``per_head``)
        array = np.asarray(value)
        if array.dtype.kind in "iuf":
            return torch.tensor(array.astype(np.float64), device=reference.device)
    elif not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating)):
        return torch.tensor(float(value), dtype=torch.float64, device=reference.device)
    raise TypeError(f"{name} must be a real number, one per head, or a tensor, got {value!r}")


class _MapFunction:
    """``torch.autograd.Function`` of the four maps (made on first use so that importing this
    module does not import torch)."""

    _cls = None

    @classmethod
    def get(cls):
        if cls._cls is None:
            torch = _torch()
            from .._autograd import first_order_only

            class PoolingMap(torch.autograd.Function):
                @staticmethod
                def forward(ctx, scores, lam, gamma, kind, batch):
                    driver = driver_for(_device(scores))
                    heads = 1 if scores.dim() == 1 else scores.shape[1]
                    lam_h = (
                        per_head("lam", lam, heads, positive=False) if kind in ("gfusedmax", "fused_lasso") else None
                    )
                    gamma_h = (
                        per_head("gamma", gamma, heads, positive=True) if kind in ("sparsemax", "gfusedmax") else None
                    )
                    with _stream(scores):
                        x = _to_driver(scores, driver)
                        check_finite(x, driver.xp)
                        state = MappingState(kind, driver, batch, x, lam_h, gamma_h)
                        output = _from_driver(state.output, scores, scores.dim() == 1)
                    ctx.state, ctx.squeeze = state, scores.dim() == 1
                    ctx.params = ((lam.shape, lam.dtype), (gamma.shape, gamma.dtype))
                    return output

                @staticmethod
                @first_order_only("the pooling map")
                def backward(ctx, grad_output):
                    state = ctx.state
                    with _stream(grad_output):
                        grad_x, grad_lam, grad_gamma = state.vjp(_to_driver(grad_output, state.driver))
                        grad_scores = _from_driver(grad_x, grad_output, ctx.squeeze)
                    needs = ctx.needs_input_grad
                    lam_grad = (
                        _gradient(grad_lam, *ctx.params[0], grad_output) if needs[1] and grad_lam is not None else None
                    )
                    gamma_grad = (
                        _gradient(grad_gamma, *ctx.params[1], grad_output)
                        if needs[2] and grad_gamma is not None
                        else None
                    )
                    return (grad_scores if needs[0] else None), lam_grad, gamma_grad, None, None

            cls._cls = PoolingMap
        return cls._cls


def _gradient(per_head_values, shape, dtype, like):
    """A parameter's gradient (its shape and dtype, on ``like``'s device) from per-head values of
    the driver's library (:func:`~._state.reduce_heads`, summed by torch)."""
    torch = _torch()
    values = per_head_values
    tensor = torch.from_numpy(values) if isinstance(values, np.ndarray) else torch.as_tensor(values, device=like.device)
    return reduce_heads(tensor, shape).to(device=like.device, dtype=dtype)


def _apply(kind, scores, ptr, edge_index, sizes, lam, gamma):
    torch = _torch()
    if not torch.is_tensor(scores):
        raise TypeError(f"scores must be a torch tensor (NumPy arrays: use {kind}_numpy), got {type(scores).__name__}")
    reject_meta("scores", scores)  # before anything reads it: the kernels need its data
    if not scores.is_floating_point():
        raise TypeError(f"scores must be a floating-point tensor, got dtype {scores.dtype}")
    if scores.dim() not in (1, 2):
        raise ValueError(f"scores must have shape (N,) or (N, heads), got {tuple(scores.shape)}")
    batch = graph_batch(ptr, edge_index, sizes=sizes, num_nodes=scores.shape[0])
    if kind in ("gfusedmax", "fused_lasso") and not batch.has_edges:
        raise ValueError(f"{kind} needs the graphs' edges: give edge_index")
    # a map's own parameters are checked as given (None refused by name); the others are placeholders
    lam_t = _parameter("lam", lam if kind in ("gfusedmax", "fused_lasso") else 0.0, scores)
    gamma_t = _parameter("gamma", gamma if kind in ("sparsemax", "gfusedmax") else 1.0, scores)
    return _MapFunction.get().apply(scores, lam_t, gamma_t, kind, batch)


def softmax(scores, ptr=None, *, sizes=None):
    """Softmax over each graph of the batch.

    Parameters
    ----------
    scores : torch.Tensor
        float ``(N,)`` or ``(N, heads)``.
    ptr : array-like (B + 1,) or GraphBatch, optional
        Node offsets; or give ``sizes`` (nodes per graph).

    Returns
    -------
    torch.Tensor
        The weights, the scores' shape and dtype; each graph's (and head's) weights sum to 1.
    """
    return _apply("softmax", scores, ptr, None, sizes, None, None)


def sparsemax(scores, ptr=None, gamma=1.0, *, sizes=None):
    """``sparsemax(scores / gamma)`` over each graph (``gamma > 0``: a number, one per head, or a
    tensor that may require grad). Shapes as :func:`softmax`."""
    return _apply("sparsemax", scores, ptr, None, sizes, None, gamma)


def gfusedmax(scores, ptr=None, edge_index=None, lam=1.0, gamma=1.0, *, sizes=None):
    """``sparsemax(fused_lasso(scores, lam) / gamma)`` over each graph.

    ``edge_index``: a global ``(2, E)`` index or a list of per-graph ``(E_g, 2)`` local arrays;
    read as undirected simple graphs. ``lam >= 0`` (``0``: plain sparsemax) and ``gamma > 0``:
    numbers, one per head, or tensors (gradients for both). Shapes as :func:`softmax`.
    """
    return _apply("gfusedmax", scores, ptr, edge_index, sizes, lam, gamma)


def fused_lasso(scores, ptr=None, edge_index=None, lam=1.0, *, sizes=None):
    """The exact graph fused lasso of each graph's scores (values, not weights), differentiable in
    ``scores`` and ``lam``."""
    return _apply("fused_lasso", scores, ptr, edge_index, sizes, lam, None)

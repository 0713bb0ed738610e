"""The attention-pooling layer's fast path on the CPU: standardise, map and pool in one kernel.

:class:`~gglspeedup.attention.AttentionPooling` computes its scores and projections with torch's
linear layers, then hands both to :func:`pool_layer`, one ``torch.autograd.Function`` whose
forward and backward are each one Numba kernel call over every (graph, head) problem
(:mod:`._kernels.layer`, run by the CPU pooling driver). It computes exactly what the composition ``standardize_scores``
-> ``softmax`` / ``sparsemax`` / ``gfusedmax`` -> weighted sum computes, with the same exact
backward (the fused lasso's from its certified groups), minus the composition's dozens of small
torch operations and copies: tensors are read and written in place through NumPy views, in their
own layout (``[N, heads]``, ``[N, C]``), and the backward keeps only what it needs (the
standardised scores, the weights, the fused groups). Tensors on a GPU take the composition.
"""

from __future__ import annotations

import numpy as np
import torch

from ...device import Device
from .._autograd import first_order_only
from ._state import GAMMA_MIN, CertificateError, check_finite, driver_for, per_head, reduce_heads

__all__ = ["pool_layer", "linear_pool_layer", "linear_parameters"]

_NO_PARAM = np.zeros(0)


def _numpy(tensor):
    """A NumPy view of a CPU tensor (a contiguous copy first when it is not row-major)."""
    return tensor.detach().contiguous().numpy()


def _per_head(name, value, heads, positive):
    """``lam`` / ``gamma`` (a tensor of shape ``()`` or ``(heads,)``) as float64 ``(heads,)``."""
    if torch.is_tensor(value) and value.dim() <= 1 and value.numel() in (1, heads):
        # a writable copy: a read-only array is another Numba type (another compile)
        array = np.array(np.broadcast_to(value.detach().to(torch.float64).reshape(-1).numpy(), (heads,)))
        if np.isfinite(array).all() and ((array >= GAMMA_MIN).all() if positive else (array >= 0).all()):
            return array
    return per_head(name, value, heads, positive=positive)  # the general checks and their messages


def _gradient(per_head_values, shape, dtype):
    """A parameter's gradient from the per-problem ``[heads, B]`` values (:func:`~._state.reduce_heads`)."""
    return reduce_heads(torch.from_numpy(per_head_values.sum(axis=1)), shape).to(dtype=dtype)


def _cast(tensor, dtype):
    """``tensor.to(dtype)``, without the call when it has that dtype (a call costs ~1.5 us)."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


class _PoolLayer(torch.autograd.Function):
    """``(scores, proj, lam, gamma, mapping, norm, batch, bounds) -> out``; ``proj`` None means
    ``scores`` holds ``[scores | proj]`` (one linear layer's output), with one gradient for it. The
    kernels are the CPU pooling driver's (:meth:`~._kernels.cpu.CPUPoolingDriver.layer_forward`)."""

    @staticmethod
    def forward(ctx, scores, proj, lam, gamma, mapping, norm, batch, bounds):
        out = _forward(ctx, scores, proj, lam, gamma, mapping, norm, batch, bounds)
        ctx.save_for_backward(scores if proj is None else proj)
        return out

    @staticmethod
    @first_order_only("AttentionPooling (its CPU path)")
    def backward(ctx, grad_out):
        (proj,) = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad_scores, grad_proj, lam_grad, gamma_grad = _backward(ctx, grad_out, proj, needs[2], needs[3])
        return grad_scores, grad_proj, lam_grad, gamma_grad, None, None, None, None


class _LinearPoolLayer(torch.autograd.Function):
    """``(x, score_weight, proj_weight, score_bias, proj_bias, lam, gamma, mapping, norm, batch,
    bounds) -> out``: :class:`_PoolLayer` of ``[scores | proj] = x @ [Ws | Wp].T + [bs | bp]``
    with the linear map inside the one Function (its five autograd nodes, forward and backward,
    cost more than their arithmetic on a small batch). The same numbers: the product and the sum
    are the ones torch's autograd computes for ``mm(x, W.t()) + b`` (``dL/dW = g.t().mm(x)``,
    ``dL/dx = g.mm(W)``, ``dL/db = g.sum(0)``); mm then the bias, not addmm (the same numbers:
    the product rounded, then the bias added), whose thin ``(N, heads + C)`` output cost about
    100 us more on 32 graphs of 30-300 nodes. Softmax's kernel adds the bias itself where it reads
    a score or projection (the same float32 / float64 adds as torch's ``add_``, without its pass
    over ``[N, heads + C]``); ``both`` is then saved without it."""

    @staticmethod
    def forward(ctx, x, score_weight, proj_weight, score_bias, proj_bias, lam, gamma, mapping, norm, batch, bounds):
        weight = _cast(torch.cat([score_weight, proj_weight]), x.dtype)
        bias = _cast(torch.cat([score_bias, proj_bias]), x.dtype)
        both = torch.mm(x, weight.t())
        if mapping == "softmax":  # the kernel adds the bias where it reads both (the same float adds)
            out = _forward(ctx, both, None, lam, gamma, mapping, norm, batch, bounds, bias.numpy())
        else:
            out = _forward(ctx, both.add_(bias), None, lam, gamma, mapping, norm, batch, bounds)
        ctx.save_for_backward(both, x, weight)
        heads = bounds.shape[0] - 1
        ctx.sizes = (heads, weight.shape[0] - heads)
        params = (score_weight.dtype, proj_weight.dtype, score_bias.dtype, proj_bias.dtype)
        ctx.linear_params = None if all(p_dtype == x.dtype for p_dtype in params) else params
        return out

    @staticmethod
    @first_order_only("AttentionPooling (its CPU path)")
    def backward(ctx, grad_out):
        both, x, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad_both, _, lam_grad, gamma_grad = _backward(ctx, grad_out, both, needs[5], needs[6])
        grad_x = grad_both.mm(weight) if needs[0] else None
        if not (needs[1] or needs[2] or needs[3] or needs[4]):
            return grad_x, None, None, None, None, lam_grad, gamma_grad, None, None, None, None
        # one split call per product, not four slices (a few us a call on a small batch)
        score_w, proj_w = grad_both.t().mm(x).split_with_sizes(ctx.sizes)
        score_b, proj_b = grad_both.sum(0).split_with_sizes(ctx.sizes)
        grads = [g if need else None for g, need in zip((score_w, proj_w, score_b, proj_b), needs[1:5])]
        if ctx.linear_params is not None:  # parameters narrower than x: their gradients in their dtypes
            grads = [g if g is None else _cast(g, p_dtype) for g, p_dtype in zip(grads, ctx.linear_params)]
        return (grad_x, *grads, lam_grad, gamma_grad, None, None, None, None)


def _forward(ctx, scores, proj, lam, gamma, mapping, norm, batch, bounds, bias=None):
    """The pooled output; keeps in ``ctx`` what :func:`_backward` needs but the saved tensor.
    ``bias`` (softmax, ``proj`` None): the NumPy bias of ``scores``' columns, added by the kernel."""
    heads = bounds.shape[0] - 1
    s = _numpy(scores)
    p, p0 = (s, heads) if proj is None else (_numpy(proj), 0)
    if mapping != "softmax":  # softmax's kernel sums each graph's scores: checked below, from the sums
        check_finite(s[:, :heads].T, np)
    # None: 0 and 1 (no tensors made for them: each costs a few us a call)
    lam_h = _per_head("lam", 0.0 if lam is None else lam, heads, False) if mapping == "gfusedmax" else _NO_PARAM
    gamma_h = _NO_PARAM
    if mapping != "softmax":
        gamma_h = _per_head("gamma", 1.0 if gamma is None else gamma, heads, True)
    dtype = scores.dtype if proj is None else proj.dtype
    out = torch.empty((batch.num_graphs, bounds[-1]), dtype=dtype)
    driver = driver_for(Device("cpu"))
    arrays = batch.arrays
    state, status, _ = driver.layer_forward(mapping, norm, arrays, s, p, p0, bounds, lam_h, gamma_h, out.numpy(), bias)
    if status is None:  # a graph's sum of softmax scores was not finite: find the score (float64 sums may overflow)
        check_finite((s[:, :heads] if bias is None else s[:, :heads] + bias[:heads]).T, np)
    if mapping == "gfusedmax" and status.any():
        h, g = (int(v) for v in np.argwhere(status)[0])
        raise CertificateError(
            f"the fused lasso's optimality certificate failed on graph {g}, head {h} (status "
            f"{int(status[h, g])}); please report this batch"
        )
    ctx.params = tuple(None if v is None else (v.shape, v.dtype) for v in (lam, gamma))
    ctx.state = (driver, mapping, norm, arrays.ptr, bounds, p0, gamma_h, bias, state, s.shape, scores.dtype)
    return out


def _backward(ctx, grad_out, proj, needs_lam, needs_gamma):
    """``(dL/dscores, dL/dproj or None when in scores, dL/dlam, dL/dgamma)`` of :func:`_forward`."""
    driver, mapping, norm, ptr, bounds, p0, gamma_h, bias, state, shape, scores_dtype = ctx.state
    p = _numpy(proj)
    if p0:  # one tensor [scores | proj], one gradient
        grad_scores = grad_proj = torch.empty(shape, dtype=scores_dtype)
    else:
        grad_scores, grad_proj = torch.empty(shape, dtype=scores_dtype), torch.empty(p.shape, dtype=proj.dtype)
    grad_lam, grad_gamma = driver.layer_backward(
        mapping, norm, ptr, p, p0, bounds, gamma_h, _numpy(grad_out), state, grad_scores.numpy(), grad_proj.numpy(),
        bias,
    )  # fmt: skip
    lam_grad = _gradient(grad_lam, *ctx.params[0]) if needs_lam and mapping == "gfusedmax" else None
    gamma_grad = _gradient(grad_gamma, *ctx.params[1]) if needs_gamma and mapping != "softmax" else None
    return grad_scores, (None if p0 else grad_proj), lam_grad, gamma_grad


def pool_layer(scores, proj, batch, mapping, norm, lam, gamma, bounds):
    """``out[g, c] = sum_(i in g) map(standardise(scores[:, h(c)]))_i proj[i, c]`` on CPU tensors.

    Parameters
    ----------
    scores : torch.Tensor ``(N, heads)``, or ``(N, heads + C)`` holding ``[scores | proj]``
    proj : torch.Tensor ``(N, C)`` or None (then in ``scores``)
    batch : GraphBatch
    mapping : {"softmax", "sparsemax", "gfusedmax"}
    norm : bool
        Standardise each graph's scores first.
    lam, gamma : torch.Tensor or None
        ``()`` or ``(heads,)``; gradients when they require them.
    bounds : numpy.ndarray
        int64 ``(heads + 1,)``: head ``h`` pools columns ``bounds[h] .. bounds[h + 1]`` of ``proj``.

    Returns
    -------
    torch.Tensor
        ``(B, C)``, ``proj``'s dtype.
    """
    return _PoolLayer.apply(scores, proj, lam, gamma, mapping, bool(norm), batch, bounds)


def linear_pool_layer(x, score_func, proj_func, batch, mapping, norm, lam, gamma, bounds):
    """:func:`pool_layer` of ``score_func(x)`` and ``proj_func(x)`` (two ``torch.nn.Linear``, no
    activation), the linear maps inside the one autograd Function; computed in ``x``'s dtype (the
    layers' parameters widened to it). Same returns as :func:`pool_layer`."""
    (score_weight, score_bias), (proj_weight, proj_bias) = linear_parameters(score_func), linear_parameters(proj_func)
    return _LinearPoolLayer.apply(
        x, score_weight, proj_weight, score_bias, proj_bias, lam, gamma, mapping, bool(norm), batch, bounds
    )


def linear_parameters(layer):
    """``(weight, bias)`` of a ``torch.nn.Linear`` (``bias`` None without one): read from its
    ``_parameters`` where both are there (not ``Module.__getattr__``: about 1 us a lookup), else
    as attributes, since a parametrized tensor (``torch.nn.utils.parametrize``: weight norm,
    spectral norm, ...) leaves ``_parameters`` and is computed by a property."""
    params = layer._parameters
    if "weight" in params and "bias" in params:
        return params["weight"], params["bias"]
    return layer.weight, layer.bias

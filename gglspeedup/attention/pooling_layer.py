"""The attention-pooling layer's fast path on the CPU: standardise, map and pool in one kernel.

:class:`~gglspeedup.attention.AttentionPooling` computes its scores and projections with torch's
linear layers, then hands both to :func:`pool_layer`, one ``torch.autograd.Function`` whose
forward and backward are each one Numba kernel call over every (graph, head) problem
(:mod:`._kernels.pooling_layer`). It computes exactly what the composition ``standardize_scores``
-> ``softmax`` / ``sparsemax`` / ``gfusedmax`` -> weighted sum computes, with the same exact
backward (the fused lasso's from its certified groups), minus the composition's dozens of small
torch operations and copies: tensors are read and written in place through NumPy views, in their
own layout (``[N, heads]``, ``[N, C]``), and the backward keeps only what it needs (the
standardised scores, the weights, the fused groups). Tensors on a GPU take the composition.
"""

from __future__ import annotations

import numpy as np
import torch

from .._parallel import lock_for, pays
from ._kernels import pooling_layer as kernels
from ._kernels.pooling_driver import fused_work
from .pooling_numpy import GAMMA_MIN, CertificateError, check_finite, per_head

__all__ = ["pool_layer"]

KINDS = {"softmax": kernels.SOFTMAX, "sparsemax": kernels.SPARSEMAX, "gfusedmax": kernels.GFUSEDMAX}
_NO_FUSED = (np.zeros((0, 0)), np.zeros((0, 0), np.int64), np.zeros((0, 0), np.int64))
_NO_PARAM = np.zeros(0)
_NO_WORK = tuple(fused_work(np, 0, 0, 0))  # softmax and sparsemax never touch it


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


def _reduce(per_head_values, shape, dtype):
    """Per-head gradients to the parameter's shape (a shared number sums its heads)."""
    values = torch.from_numpy(per_head_values)
    if values.numel() != int(np.prod(shape)) or len(shape) == 0:
        values = values.sum()
    return values.reshape(shape).to(dtype=dtype)


class _PoolLayer(torch.autograd.Function):
    """``(scores, proj, lam, gamma, kind, norm, batch, bounds) -> out``; ``proj`` None means
    ``scores`` holds ``[scores | proj]`` (one linear layer's output), with one gradient for it."""

    @staticmethod
    def forward(ctx, scores, proj, lam, gamma, kind, norm, batch, bounds):
        heads = bounds.shape[0] - 1
        s = _numpy(scores)
        p, p0 = (s, heads) if proj is None else (_numpy(proj), 0)
        check_finite(s[:, :heads].T, np)
        lam_h = _per_head("lam", lam, heads, False) if kind == kernels.GFUSEDMAX else _NO_PARAM
        gamma_h = _per_head("gamma", gamma, heads, True) if kind != kernels.SOFTMAX else _NO_PARAM
        graph = batch.arrays
        nodes, graphs = s.shape[0], batch.num_graphs
        z = np.empty((heads, nodes))
        weights = np.empty((heads, nodes))
        spread = np.empty((heads, graphs))
        status = np.zeros((heads, graphs), np.int64)
        residual = np.empty((heads, graphs))
        if kind == kernels.GFUSEDMAX:
            work = fused_work(np, heads, nodes, graph.edge_u.shape[0])
            fused = (np.empty((heads, nodes)), np.empty((heads, nodes), np.int64), np.empty((heads, nodes), np.int64))
        else:
            work, fused = _NO_WORK, _NO_FUSED
        dtype = scores.dtype if proj is None else proj.dtype
        out = torch.empty((graphs, bounds[-1]), dtype=dtype)
        parallel = pays(z.size, "fused" if kind == kernels.GFUSEDMAX else "pooling")
        with lock_for(parallel):
            kernels.forward_flat(
                parallel, kind, norm, *graph, *work, s, 0, p, p0, bounds, lam_h, gamma_h, z, *fused,
                weights, spread, out.numpy(), status, residual,
            )  # fmt: skip
        if status.any():
            h, g = (int(v) for v in np.argwhere(status)[0])
            raise CertificateError(
                f"the fused lasso's optimality certificate failed on graph {g}, head {h} (status "
                f"{int(status[h, g])}); please report this batch"
            )
        ctx.save_for_backward(scores if proj is None else proj)
        ctx.params = ((lam.shape, lam.dtype), (gamma.shape, gamma.dtype))
        ctx.state = (kind, norm, graph.ptr, bounds, p0, gamma_h, (z, *fused, weights, spread), s.shape, scores.dtype)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        kind, norm, ptr, bounds, p0, gamma_h, state, shape, scores_dtype = ctx.state
        (proj,) = ctx.saved_tensors
        p = _numpy(proj)
        heads, nodes = state[0].shape
        graphs = ptr.shape[0] - 1
        if p0:  # one tensor [scores | proj], one gradient
            grad_scores = grad_proj = torch.empty(shape, dtype=scores_dtype)
        else:
            grad_scores, grad_proj = torch.empty(shape, dtype=scores_dtype), torch.empty(p.shape, dtype=proj.dtype)
        grad_lam = np.empty((heads, graphs))
        grad_gamma = np.empty((heads, graphs))
        work = fused_work(np, heads, nodes, 0) if kind == kernels.GFUSEDMAX else _NO_WORK
        gw, gf = np.empty((heads, nodes)), np.empty((heads, nodes))
        parallel = pays(nodes * heads, "fused" if kind == kernels.GFUSEDMAX else "pooling")
        with lock_for(parallel):
            kernels.backward_flat(
                parallel, kind, norm, ptr, *work, p, p0, bounds, gamma_h, _numpy(grad_out), *state,
                grad_scores.numpy(), 0, grad_proj.numpy(), gw, gf, grad_lam, grad_gamma,
            )  # fmt: skip
        needs = ctx.needs_input_grad
        lam_grad = _reduce(grad_lam.sum(axis=1), *ctx.params[0]) if needs[2] and kind == kernels.GFUSEDMAX else None
        gamma_grad = _reduce(grad_gamma.sum(axis=1), *ctx.params[1]) if needs[3] and kind != kernels.SOFTMAX else None
        return grad_scores, (None if p0 else grad_proj), lam_grad, gamma_grad, None, None, None, None


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
    lam_t = lam if lam is not None else scores.new_zeros(())
    gamma_t = gamma if gamma is not None else scores.new_ones(())
    return _PoolLayer.apply(scores, proj, lam_t, gamma_t, KINDS[mapping], bool(norm), batch, bounds)

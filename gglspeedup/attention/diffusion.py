"""Diffuser's multi-hop attention, fused: ``diffusion_attention(q, k, v, graph, hops=5, alpha=0.1)``.

Per query token ``y`` and head, over the keys ``x`` of its row in the pattern (Diffuser's
``DiffuserSelfAttention.forward``, github asFeng/Diffuser ``models/diffuser_att.py``):

1. score ``s_yx = k_x . q_y`` (``q`` already scaled, as Diffuser divides it by ``sqrt(D)``);
2. mask: ``s_yx = -10000`` when ``x`` or ``y`` is padding (``key_padding_mask``);
3. edge softmax over the row: ``a_yx = exp(s_yx - max) / sum``; attention dropout on ``a``;
4. ``hops`` times: ``h <- (1 - alpha) * A h + alpha * v`` from ``h = v``, dropout after each hop.

One ``torch.autograd.Function`` per stage with a hand-written backward (softmax backward and the
SDDMM backward for the scores; the transposed propagation through the pattern's out-CSR for the
hops, with the edge gradients accumulated in the same pass). Kept for backward: the attention
``(B * E, H)`` and the ``hops - 1`` intermediate node states; never an ``(E, H, D)`` tensor.
"""

from __future__ import annotations

import torch

from ._ops import MODE_SOFTMAX
from ._validate import check_inputs

__all__ = ["diffusion_attention"]


class EdgeScores(torch.autograd.Function):
    """``(q, k) -> (B * E, H)`` edge softmax (or ``exp``) of ``k_src . q_dst``, masked."""

    @staticmethod
    def forward(ctx, q, k, ops, pad, mode):
        attn = ops.scores(q, k, pad, mode)
        ctx.save_for_backward(q, k, attn)
        ctx.ops, ctx.pad, ctx.mode = ops, pad, mode
        return attn

    @staticmethod
    def backward(ctx, grad_attn):
        q, k, attn = ctx.saved_tensors
        ops = ctx.ops
        grad_score = ops.softmax_back(attn, grad_attn.contiguous().clone(), ctx.pad, ctx.mode)
        grad_q = ops.spmm(grad_score, k) if ctx.needs_input_grad[0] else None
        grad_k = ops.spmm_t(grad_score, q) if ctx.needs_input_grad[1] else None
        return grad_q, grad_k, None, None, None


class Hops(torch.autograd.Function):
    """``(attn, v) -> h_T`` with ``h_{t+1} = drop_t((1 - alpha) * A h_t + alpha * v)``, ``h_0 = v``."""

    @staticmethod
    def forward(ctx, attn, v, ops, hops, alpha, masks, keep_scale):
        states = [v]
        h = v
        for t in range(hops):
            h = ops.spmm(attn, h, 1.0 - alpha, self_rows=v, self_scale=alpha)
            if masks is not None:
                h.mul_(masks[t]).mul_(keep_scale)
            states.append(h)
        ctx.save_for_backward(attn, *states[:-1])
        ctx.ops, ctx.hops, ctx.alpha, ctx.masks, ctx.keep_scale = ops, hops, alpha, masks, keep_scale
        return h

    @staticmethod
    def backward(ctx, grad_out):
        attn, *states = ctx.saved_tensors
        ops, alpha = ctx.ops, ctx.alpha
        grad = grad_out.contiguous()
        grad_attn = torch.zeros_like(attn) if ctx.needs_input_grad[0] else None
        grad_v = torch.zeros_like(grad)
        for t in range(ctx.hops - 1, -1, -1):
            if ctx.masks is not None:
                grad = grad * ctx.masks[t] * ctx.keep_scale
            grad_v.add_(grad, alpha=alpha)
            grad = ops.spmm_t(attn, grad, 1.0 - alpha, dw=grad_attn, hx=states[t], dw_scale=1.0 - alpha)
        grad_v.add_(grad)
        return grad_attn, grad_v, None, None, None, None, None


def diffusion_attention(q, k, v, graph, hops: int = 5, alpha: float = 0.1, key_padding_mask=None, dropout: float = 0.0):
    """Diffuser's attention on ``graph``: scores, mask, edge softmax, ``hops`` diffusion steps.

    Parameters
    ----------
    q, k, v : torch.Tensor (B, L, H, D)
        float32 or float64, on the pattern's device (CPU tensors for a simulated CUDA pattern).
        ``q`` is used as given (Diffuser scales it by ``1 / sqrt(D)`` before).
    graph : AttentionGraph
        ``B * L`` nodes (one row per token of each sequence), or a shared ``L``-node graph.
    hops : int
        Diffusion steps (Diffuser: 5).
    alpha : float
        Teleport weight of ``v`` per hop (Diffuser: 0.1).
    key_padding_mask : torch.Tensor (B, L) bool, optional
        True at padding tokens: edges touching them score -10000 (Diffuser's ``masked_fill``).
    dropout : float
        In ``[0, 1)``: dropout on the attention and after every hop (pass 0 in evaluation).

    Returns
    -------
    torch.Tensor (B, L, H, D)
    """
    batch, length, heads, depth, pad, ops = check_inputs(q, k, v, graph, key_padding_mask, hops, alpha, dropout)
    flat = [t.reshape(batch * length, heads, depth).contiguous() for t in (q, k, v)]
    attn = EdgeScores.apply(flat[0], flat[1], ops, pad, MODE_SOFTMAX)
    masks, keep_scale = None, 1.0
    if dropout > 0.0:
        keep_scale = 1.0 / (1.0 - dropout)
        attn = torch.nn.functional.dropout(attn, p=dropout)
        masks = [(torch.rand_like(flat[2]) >= dropout).to(flat[2].dtype) for _ in range(hops)]
    out = Hops.apply(attn, flat[2], ops, hops, float(alpha), masks, keep_scale)
    return out.reshape(batch, length, heads, depth)

"""Diffuser's multi-hop attention, fused: ``diffusion_attention(q, k, v, graph, hops=5, alpha=0.1)``.

Per query token ``y`` and head, over the keys ``x`` of its row in the pattern (Diffuser's
``DiffuserSelfAttention.forward``, github asFeng/Diffuser ``models/diffuser_att.py``):

1. score ``s_yx = k_x . q_y`` (``q`` already scaled, as Diffuser divides it by ``sqrt(D)``);
2. mask: ``s_yx = -10000`` when ``x`` or ``y`` is padding (``key_padding_mask``);
3. edge softmax over the row: ``a_yx = exp(s_yx - max) / sum``; attention dropout on ``a``;
4. ``hops`` times: ``h <- (1 - alpha) * A h + alpha * v`` from ``h = v``, dropout after each hop.

One ``torch.autograd.Function`` for the whole layer with a hand-written backward: the transposed
propagation through the pattern's out-CSR for each hop, with the edges' gradient, the value
gradient and the previous hop's dropout in the same pass, then the
softmax backward fused with the query gradient, then the key gradient. Kept for backward: ``q``,
``k``, ``v``, the attention ``(B * E, H)`` (one copy, in the out-CSR's order: the transposed passes
read it and write the edges' gradient in sequence, the softmax backward goes through the edge
permutation), the ``hops - 1`` intermediate node states and the
dropout keep bits (one bit per edge and head, one per node element and hop); never an
``(E, H, D)`` tensor. Dropout draws come
from the package's keyed RNG, seeded from torch's generator (``torch.manual_seed`` reproduces a
call), so the CPU and a GPU drop the same elements.
"""

from __future__ import annotations

import torch

from .._autograd import first_order_only
from ._ops import MODE_SOFTMAX, graph_ops
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
    @first_order_only("the attention scores (fractional / sharded attention)")
    def backward(ctx, grad_attn):
        q, k, attn = ctx.saved_tensors
        ops = ctx.ops
        grad_score = grad_attn.contiguous().clone()
        grad_q = ops.score_grad(attn, grad_score, ctx.pad, ctx.mode, k)  # grad_score: in place
        grad_k = ops.spmm_t(grad_score, q) if ctx.needs_input_grad[1] else None
        return grad_q, grad_k, None, None, None


class DiffusionAttention(torch.autograd.Function):
    """``(q, k, v) -> h_T``: scores, edge softmax, edge dropout, ``hops`` diffusion steps with
    node dropout after each, as one operation (see the module docstring)."""

    @staticmethod
    def forward(ctx, q, k, v, ops, pad, hops, alpha, dropout, seed):
        edges = nodes = None
        rows, heads, depth = q.shape
        if dropout > 0.0:
            edges = _dropout(dropout, seed, 0, ops.repeats * ops.num_edges, heads, q.device)
            nodes = [_dropout(dropout, seed, 1 + t, rows, heads * depth, q.device) for t in range(hops)]
        attn = ops.scores(q, k, pad, MODE_SOFTMAX, edges=edges)
        states = [v]
        for t in range(hops):
            hop = None if nodes is None else nodes[t]
            states.append(ops.spmm(attn, states[t], 1.0 - alpha, self_rows=v, self_scale=alpha, edges=edges, nodes=hop))
        edges_t = edges
        if hops > 0 and any(ctx.needs_input_grad[:3]):
            # Kept in the out-CSR's order only (no dropout in it: the scores' backward needs the
            # dropped edges' attention too), beside the keep bits in that order (a byte an edge):
            # the backward's transposed passes read and write in sequence and the scores' backward
            # goes through the permutation, so one (B * E, H) copy is alive beside the edges'
            # gradient instead of three.
            attn = ops.transpose_weights(attn)
            if edges is not None:
                edges_t = edges._replace(bits=ops.transpose_weights(edges.bits))
        ctx.save_for_backward(q, k, attn, *states[:-1])
        ctx.ops, ctx.pad, ctx.hops, ctx.alpha, ctx.edges, ctx.nodes = ops, pad, hops, alpha, edges, nodes
        ctx.edges_t = edges_t
        return states[-1] if hops > 0 else v.clone()

    @staticmethod
    @first_order_only("diffusion_attention")
    def backward(ctx, grad_out):
        q, k, weights, *states = ctx.saved_tensors  # weights: the attention in the out-CSR's order
        ops, alpha, hops, edges, nodes = ctx.ops, ctx.alpha, ctx.hops, ctx.edges, ctx.nodes
        if hops == 0:
            return None, None, grad_out.contiguous().clone(), None, None, None, None, None, None
        want_scores = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        # p = d loss / d (hop t's propagation before its dropout) = keep_t * scale * d loss / d h_{t+1}
        # (read from grad_out as it comes: a broadcast gradient, as of a sum, is never materialised)
        p = _node_dropout_grad(grad_out, nodes[hops - 1]).contiguous() if nodes is not None else grad_out.contiguous()
        del grad_out
        grad_v = p * alpha
        grad_weights = torch.zeros_like(weights) if want_scores else None  # in the out-CSR's order too
        # p alternates between two buffers; the first p is ours when hop dropout made it (not
        # autograd's gradient, never written) and is free once the first pass has read it
        buffers = (torch.empty_like(p), p if nodes is not None else torch.empty_like(p))
        for i, t in enumerate(range(hops - 1, -1, -1)):
            # d loss / d h_t = (1 - alpha) A^T p; for t > 0 it becomes the next p through hop t-1's
            # dropout in the same pass and adds alpha * p to grad_v (t = 0: all of it); the edges
            # gain (1 - alpha) p[query] . h_t[key]
            before = None if (nodes is None or t == 0) else nodes[t - 1]
            p = ops.spmm_t(
                weights, p, 1.0 - alpha, dw=grad_weights, hx=states[t], dw_scale=1.0 - alpha, edges=ctx.edges_t,
                nodes=before, total=grad_v, sum_scale=alpha if t > 0 else 1.0, out=buffers[i % 2], transposed=True,
            )  # fmt: skip
        del buffers, p
        if not want_scores:
            return None, None, grad_v, None, None, None, None, None, None
        grad_score = grad_weights  # becomes d loss / d score in place, in the out-CSR's order
        grad_q = ops.score_grad(weights, grad_score, ctx.pad, MODE_SOFTMAX, k, edges=edges, permuted=True)
        del weights
        grad_k = ops.spmm_t(grad_score, q, transposed=True) if ctx.needs_input_grad[1] else None
        return grad_q, grad_k, grad_v, None, None, None, None, None, None


def _dropout(p, seed, stream, rows, count, device):
    from ._ops import Dropout, dropout_key

    bits = torch.empty((rows, (count + 7) // 8), dtype=torch.uint8, device=device)
    return Dropout(float(p), 1.0 / (1.0 - float(p)), dropout_key(seed, stream), bits)


def _node_dropout_grad(grad, nodes):
    """``grad * keep * scale`` with the keep bits of one hop (``(rows, ceil(H * D / 8))`` bytes)."""
    rows, heads, depth = grad.shape
    shifts = torch.arange(8, dtype=torch.uint8, device=grad.device)
    keep = ((nodes.bits[:, :, None] >> shifts) & 1).reshape(rows, 8 * nodes.bits.shape[1])[:, : heads * depth]
    scale = torch.tensor(nodes.scale, dtype=grad.dtype)
    return torch.where(keep.reshape(rows, heads, depth).bool(), grad * scale, torch.zeros((), dtype=grad.dtype))


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
    batch, length, heads, depth, pad, repeats = check_inputs(q, k, v, graph, key_padding_mask, hops, alpha, dropout)
    ops = graph_ops(graph, repeats, heads, depth)
    flat = [t.reshape(batch * length, heads, depth).contiguous() for t in (q, k, v)]
    seed = int(torch.randint(0, 2**62, (1,))) if dropout > 0.0 else 0  # torch's CPU generator: no sync
    out = DiffusionAttention.apply(*flat, ops, pad, hops, float(alpha), float(dropout), seed)
    return out.reshape(batch, length, heads, depth)

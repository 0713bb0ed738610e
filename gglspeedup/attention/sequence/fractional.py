"""Fractional attention (github CKQu1/fractional-attn), fused: a fractional power of the attention graph's Laplacian.

The operator of fractional-attn's ``attn_rw/frac_diffuser_forward_dgl.py``, per sequence and head:

- edge weights ``W[y, x] = exp(k_x . q_y)`` on the pattern's edges (0 when ``x`` or ``y`` is padding);
- out-degrees ``outdeg_x = sum_y W[y, x]`` and ``rho = max_x outdeg_x``;
- ``P = W + diag(rho - outdeg)`` (so ``P / rho`` is column-stochastic and ``rho I - P`` is the
  Laplacian ``diag(outdeg) - W``);
- ``L_gamma = rho**gamma * sum_{n=0..terms} binom(gamma, n) (-P / rho)**n``, the truncated binomial
  series of ``(rho I - P)**gamma``, and the output ``L_gamma**steps v`` (messages flow from keys to
  queries, as in that script's ``update_all``).

What we do not copy from its model class ``DiffuserFracSelfAttention`` (``models/diffuser_att.py``
at commit 8b071fd): it builds ``B`` with ``- rho - outdeg`` on the diagonal (the sign flipped, so
the series diverges: outputs near 1e22 at 512 tokens), takes one ``rho`` over every token of the
batch (coupling the sequences), adds each series term once per head inside its head loop (the
heads get different series), applies ``L_gamma`` as ``L[src, dst] @ h`` (the transposed
direction) on dense ``(B*N, B*N)`` matrices with a Python loop over edges, and computes it under
``torch.no_grad`` (queries and keys get no gradient). Here ``rho`` is per sequence and head, every
head has the same series, and everything has a gradient.

Computed as Horner's scheme ``w <- (P / rho) w + a_n u`` with the kernels of
:mod:`gglspeedup.attention.sequence.diffusion` (``terms`` fused propagations per step); the backward recomputes
a step's ``terms`` intermediate states from its input instead of keeping them.

Large scores: ``P / rho`` does not change when every weight of a sequence and head is multiplied
by one constant, so the weights are computed as ``exp(k_x . q_y - m)`` with ``m`` the largest
score of that sequence and head (the largest weight is 1: ``exp`` neither overflows nor
underflows to an all-zero sequence), and ``rho**(gamma * steps)`` as
``rho_m**(gamma * steps) * exp(gamma * steps * m)``. Only the output itself can then exceed the
dtype: it scales as ``exp(gamma * steps * m)``, and where it does (``k . q`` past about
``log(max float) / (gamma * steps)``: 35 in float32, 283 in float64 with the defaults) a
``ValueError`` names ``q`` and ``k`` instead of returning inf or NaN. Scores that are themselves
not finite raise the same error as :func:`~gglspeedup.attention.diffusion_attention`.
"""

from __future__ import annotations

import math

import torch

from .._autograd import first_order_only
from ._ops import MODE_EXP, MODE_SCORE, graph_ops
from ._validate import check_fraction, check_inputs
from .diffusion import EdgeScores

__all__ = ["fractional_attention", "binomial_coefficients"]

# The series converges slowly (its error at the Laplacian's zero mode is |binom(gamma - 1, terms)|,
# about terms**-gamma / Gamma(1 - gamma): 0.018 at gamma = 0.5 and 1024 terms), so no term count
# is "converged"; the limit is the cost: each term is one propagation over every edge per step, and
# a step holds all its terms' states (each the size of v) at once. 1024 copies of v are already
# more memory than a training batch has; a count past it is a mistake (10**8 did not finish).
_MAX_TERMS = 1024


def binomial_coefficients(gamma: float, terms: int) -> list[float]:
    """``[binom(gamma, n) * (-1)**n for n in 0..terms]``: the series of ``(1 - z)**gamma``.

    ``gamma`` is any finite real number (a Python or NumPy number, not a bool), ``terms`` an int
    ``>= 0``; anything else raises ``TypeError`` / ``ValueError`` naming the argument.

    >>> binomial_coefficients(0.5, 2)
    [1.0, -0.5, -0.125]
    """
    from ...validation import check_int

    gamma = check_fraction("gamma", gamma, "(-inf, inf)", lambda g: True)  # NaN and inf are refused
    terms = check_int("terms", terms, minimum=0)
    out, c = [1.0], 1.0
    for n in range(1, terms + 1):
        c *= (gamma - n + 1) / n
        out.append(c * (-1) ** n)
    return out


class ShiftedWeights(torch.autograd.Function):
    """``(q, k) -> (W, m)``: ``W[e] = exp(k_x . q_y - m[b, h])`` per edge and head ``(B * E, H)``
    (0 when masked), ``m`` ``(B, H)`` the largest unmasked score of each sequence and head (0 where
    there is none): a constant of the forward (not differentiated), so the gradient is the one of
    ``exp(score)`` scaled, computed by the exp mode's backward."""

    @staticmethod
    def forward(ctx, q, k, ops, pad, edges_per_sequence):
        weights = ops.scores(q, k, pad, MODE_SCORE)  # -inf when masked; raises on a non-finite score
        shift = torch.segment_reduce(weights, "max", lengths=edges_per_sequence, axis=0, unsafe=True)
        shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))  # no unmasked edge
        total = weights.shape[0]  # known here: no device sync for repeat_interleave's output size
        weights.sub_(shift.repeat_interleave(edges_per_sequence, dim=0, output_size=total)).exp_()
        ctx.save_for_backward(q, k, weights)
        ctx.ops, ctx.pad, ctx.mode = ops, pad, MODE_EXP
        ctx.mark_non_differentiable(shift)
        return weights, shift

    @staticmethod
    @first_order_only("fractional_attention")
    def backward(ctx, grad_weights, _grad_shift):
        return EdgeScores.backward(ctx, grad_weights)


class ColumnSums(torch.autograd.Function):
    """``(B * E, H)`` edge weights -> ``(rows, H)`` out-degree of every key row."""

    @staticmethod
    def forward(ctx, weights, ops):
        ctx.ops = ops
        return ops.colsum(weights, weights.shape[1])

    @staticmethod
    @first_order_only("fractional_attention")
    def backward(ctx, grad):
        sources = ctx.ops.sources().to(grad.device)
        return grad.index_select(0, sources), None


class Series(torch.autograd.Function):
    """``steps`` applications of ``S = sum_n a_n (W~ + diag(d~))**n`` to ``v`` (Horner)."""

    @staticmethod
    def forward(ctx, weights, diag, v, ops, coefficients, steps, masks, keep_scale):
        inputs = []
        u = v
        for s in range(steps):
            inputs.append(u)
            u = _apply_series(ops, weights, diag, u, coefficients)[0]
            if masks is not None:
                u.mul_(masks[s]).mul_(keep_scale)
        ctx.save_for_backward(weights, diag, *inputs)
        ctx.ops, ctx.coefficients, ctx.steps, ctx.masks, ctx.keep_scale = ops, coefficients, steps, masks, keep_scale
        return u

    @staticmethod
    @first_order_only("fractional_attention")
    def backward(ctx, grad_out):
        weights, diag, *inputs = ctx.saved_tensors
        ops, a = ctx.ops, ctx.coefficients
        terms = len(a) - 1
        grad_w = torch.zeros_like(weights)
        grad_diag = torch.zeros_like(diag)
        grad = grad_out.contiguous()
        for s in range(ctx.steps - 1, -1, -1):
            if ctx.masks is not None:
                grad = grad * ctx.masks[s] * ctx.keep_scale
            u = inputs[s]
            states = _apply_series(ops, weights, diag, u, a)[1]  # states[n] = w_n, n = 1 .. terms
            grad_u = torch.zeros_like(grad)
            g = grad
            for n in range(terms):
                grad_u.add_(g, alpha=a[n])
                w_next = states[n + 1]
                grad_diag.add_((g * w_next).sum(dim=-1))
                g = ops.spmm_t(weights, g, 1.0, diag=diag, dw=grad_w, hx=w_next, dw_scale=1.0)
            grad_u.add_(g, alpha=a[terms])
            grad = grad_u
        return grad_w, grad_diag, grad, None, None, None, None, None


def _apply_series(ops, weights, diag, u, a):
    """``(S u, [None, w_1, ..., w_terms])`` by Horner: ``w_terms = a_terms u``, ``w_n = P w_{n+1} + a_n u``."""
    terms = len(a) - 1
    states = [None] * (terms + 1)
    w = u * a[terms]
    states[terms] = w
    for n in range(terms - 1, -1, -1):
        w = ops.spmm(weights, w, 1.0, self_rows=u, self_scale=a[n], diag=diag)
        if n > 0:
            states[n] = w
    return w, states


def fractional_attention(
    q, k, v, graph, gamma: float = 0.5, terms: int = 6, steps: int = 5, key_padding_mask=None, dropout: float = 0.0
):
    """The fractional-attention operator ``L_gamma**steps v`` on ``graph`` (see the module docstring).

    Parameters
    ----------
    q, k, v : torch.Tensor (B, L, H, D)
        float32 or float64; ``q`` is used as given (scaled by ``1 / sqrt(D)`` in the modules).
    graph : AttentionGraph
        Each query's keys in its own sequence (a hand-built graph joining two raises ``ValueError``).
    gamma : float
        The fractional power, in ``(0, 1]`` (fractional-attn: 0.5).
    terms : int
        Terms of the binomial series after the constant, in ``[1, 1024]`` (fractional-attn: 6).
        Each costs one propagation over every edge per step and holds one more state the size of
        ``v`` while a step runs; more than 1024 raises ``ValueError``.
    steps : int
        Applications of ``L_gamma`` (fractional-attn's model: 5 random-walk steps).
    key_padding_mask : torch.Tensor (B, L) bool, optional
        True at padding tokens (their edges weigh 0).
    dropout : float
        Dropout after every step, in ``[0, 1)``.

    Returns
    -------
    torch.Tensor (B, L, H, D)
    """
    gamma = check_fraction("gamma", gamma, "(0, 1]", lambda g: 0.0 < g <= 1.0)
    from ...validation import check_int

    terms = check_int("terms", terms, minimum=1)
    if terms > _MAX_TERMS:
        raise ValueError(
            f"terms must be <= {_MAX_TERMS} (each term is one propagation over every edge per step and one "
            f"more state the size of v held at once), got {terms}"
        )
    steps = check_int("steps", steps, minimum=1)
    batch, length, heads, depth, pad, repeats = check_inputs(q, k, v, graph, key_padding_mask, 0, 0.0, dropout)
    if graph._joining_edge is not None:  # rho, the shift and the out-degrees are per sequence
        query, key = graph._joining_edge
        raise ValueError(
            f"graph joins two sequences: query {query} (sequence {query // length}) attends to key {key} "
            f"(sequence {key // length}); fractional attention's operator is per sequence (its rho is each "
            "sequence's largest out-degree), so each query's keys must lie in its own sequence "
            "(diffusion_attention takes such a graph)"
        )
    dropout = float(dropout)  # a NumPy float32 would keep 1 / (1 - dropout) in float32
    if length == 0:  # sequences of no tokens: nothing to attend (and no largest weight per sequence)
        return v.clone()
    ops = graph_ops(graph, repeats, heads, depth)
    flat = [t.reshape(batch * length, heads, depth).contiguous() for t in (q, k, v)]
    edges_per_sequence = _edges_per_sequence(graph, batch).to(q.device)
    # weights exp(score - shift): the largest of each sequence and head is 1 (see the module docstring)
    weights, shift = ShiftedWeights.apply(flat[0], flat[1], ops, pad, edges_per_sequence)
    outdeg = ColumnSums.apply(weights, ops)  # (B * L, H)
    rho = outdeg.reshape(batch, length, heads).amax(dim=1)  # (B, H): one per sequence and head, >= 1
    rho = torch.where(rho > 0, rho, torch.ones_like(rho))  # a sequence of padding only has no edges
    # the output's scale: rho**(gamma * steps) of the unshifted weights
    power = float(gamma) * steps
    scale = rho**power * torch.exp(power * shift)
    rho_nodes = rho.repeat_interleave(length, dim=0)
    rho_edges = rho.repeat_interleave(edges_per_sequence, dim=0, output_size=weights.shape[0])
    scaled = (weights / rho_edges).contiguous()
    diag = (1.0 - outdeg / rho_nodes).contiguous()
    masks, keep_scale = None, 1.0
    if dropout > 0.0:
        keep_scale = 1.0 / (1.0 - dropout)
        masks = [(torch.rand_like(flat[2]) >= dropout).to(flat[2].dtype) for _ in range(steps)]
    coefficients = binomial_coefficients(float(gamma), terms)
    out = Series.apply(scaled, diag, flat[2], ops, coefficients, steps, masks, keep_scale)
    out = out * scale.repeat_interleave(length, dim=0)[:, :, None]
    # an output past the dtype (its scale, or the product) raises; inf / nan in v propagates as in diffusion
    if not bool(torch.isfinite(out).all()) and bool(torch.isfinite(v).all()):  # sync on a GPU
        raise _overflow(shift, power, q.dtype)
    return out.reshape(batch, length, heads, depth)


def _overflow(shift, power: float, dtype) -> ValueError:
    top = float(shift.max())
    limit = math.log(torch.finfo(dtype).max) / power
    return ValueError(
        f"q and k give attention scores k . q up to {top:.6g}: fractional attention's output scales as "
        f"rho**(gamma * steps) = exp({power:g} * score) and overflows {str(dtype).replace('torch.', '')} "
        f"(scores up to about {limit:.3g} fit); scale q or k down (e.g. q by 1 / sqrt(head_dim))"
    )


def _edges_per_sequence(graph, batch: int):
    """int64 tensor (B,): edges of each sequence in the ``(B * E, H)`` edge layout."""
    from ...device import to_numpy

    if graph.shared:
        return torch.full((batch,), graph.num_edges, dtype=torch.int64)
    indptr = to_numpy(graph.indptr).astype("int64")
    bounds = indptr[:: graph.seq_len]
    return torch.from_numpy(bounds[1:] - bounds[:-1])

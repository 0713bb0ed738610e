"""Row bodies of the fused attention kernels (diffusion and fractional), for ``njit`` and ``cuda.jit``.

Layout: ``q``, ``k``, ``v`` and node features are ``(repeats * n, H, D)`` where ``n`` is the
pattern's node count and ``repeats`` the sequences sharing it (1 for a batched pattern): row
``r = b * n + y`` uses pattern row ``y`` and keys ``b * n + x``. Edge scalars are
``(repeats * E, H)``: edge ``e`` of copy ``b`` is ``b * E + e``. No ``(E, H, D)`` tensor exists.

Arithmetic is in the inputs' dtype (float32 or float64) in a fixed order the CPU and the CUDA
simulator share: dot products as a pairwise tree over ``D`` (:func:`tree_sum`), sums over a row's edges
in edge order, ``exp`` in float64. Scratch arrays come from the drivers (the CPU allocates them
per block of rows, a CUDA thread uses local memory), so the bodies are the same code on both.
"""

from __future__ import annotations

import math

import numpy as np
from numba.extending import register_jitable

__all__ = [
    "MASKED_SCORE",
    "head_products",
    "tree_sum",
    "score_row",
    "spmm_row",
    "spmm_t_row",
    "softmax_back_row",
    "colsum_row",
]

MASKED_SCORE = -10000.0  # Diffuser's masked_fill value for an edge touching a padding token
MODE_SOFTMAX = 0  # diffusion attention: edge softmax over each query's keys
MODE_EXP = 1  # fractional attention: edge weight exp(k . q), 0 when masked


@register_jitable
def head_products(a, ar, b, br, heads, depth, prod):
    """``prod[h, d] = a[ar, h, d] * b[br, h, d]`` for every head (``prod``: (>= H, >= D) scratch)."""
    for h in range(heads):
        for d in range(depth):
            prod[h, d] = a[ar, h, d] * b[br, h, d]


@register_jitable
def tree_sum(prod, h, depth):
    """``sum_d prod[h, d]`` as a pairwise tree (fixed order, vectorisable without reassociation)."""
    width = depth
    while width > 1:
        half = (width + 1) >> 1
        for d in range(width - half):
            prod[h, d] = prod[h, d] + prod[h, d + half]
        width = half
    return prod[h, 0]


@register_jitable
def score_row(r, indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, prod, bad):
    """Scores ``k[key] . q[r]`` of row ``r``'s edges, masked, then softmax over the row (or
    ``exp``) per head, into ``attn``; ``bad[r] = 1`` when a score is not finite."""
    b = r // n
    y = r - b * n
    e0 = indptr[y]
    e1 = indptr[y + 1]
    base = b * num_edges
    heads = q.shape[1]
    depth = q.shape[2]
    for e in range(e0, e1):
        x = b * n + indices[e]
        head_products(q, r, k, x, heads, depth, prod)
        masked = has_mask and (pad[r] != 0 or pad[x] != 0)
        for h in range(heads):
            s = tree_sum(prod, h, depth)
            if not math.isfinite(s):
                bad[r] = 1
            if masked:
                attn[base + e, h] = MASKED_SCORE if mode == MODE_SOFTMAX else 0.0
            elif mode == MODE_EXP:
                attn[base + e, h] = math.exp(np.float64(s))
            else:
                attn[base + e, h] = s
    for h in range(heads):
        if mode == MODE_SOFTMAX and e1 > e0:
            top = attn[base + e0, h]
            for e in range(e0 + 1, e1):
                if attn[base + e, h] > top:
                    top = attn[base + e, h]
            # Sums start from their first term: numba types ``float32 * 0`` as float64, NumPy (the
            # simulator) as float32, and the two must add in the same precision.
            for e in range(e0, e1):
                attn[base + e, h] = math.exp(np.float64(attn[base + e, h] - top))
            total = attn[base + e0, h]
            for e in range(e0 + 1, e1):
                total += attn[base + e, h]
            for e in range(e0, e1):
                attn[base + e, h] = attn[base + e, h] / total


@register_jitable
def spmm_row(
    r, indptr, indices, n, num_edges, weights, x, out, acc, ar, scale, has_self, self_scale, self_rows, has_diag, diag
):
    """``out[r] = scale * sum_e weights[e] * x[key_e] (+ self_scale * self_rows[r]) (+ diag[r] * x[r])``
    per head; ``acc[ar]`` is the (H, D) accumulator (scratch on the CPU, ``out`` itself on CUDA)."""
    b = r // n
    y = r - b * n
    base = b * num_edges
    heads = x.shape[1]
    depth = x.shape[2]
    for h in range(heads):
        for d in range(depth):
            acc[ar, h, d] = x[r, h, d] * 0
    for e in range(indptr[y], indptr[y + 1]):
        key = b * n + indices[e]
        for h in range(heads):
            w = weights[base + e, h]
            for d in range(depth):
                acc[ar, h, d] += w * x[key, h, d]
    for h in range(heads):
        for d in range(depth):
            value = scale * acc[ar, h, d]
            if has_self:
                value = value + self_scale * self_rows[r, h, d]
            if has_diag:
                value = value + diag[r, h] * x[r, h, d]
            out[r, h, d] = value


@register_jitable
def spmm_t_row(
    r,
    tindptr,
    tqueries,
    tedges,
    n,
    num_edges,
    weights,
    g,
    out,
    acc,
    ar,
    scale,
    has_diag,
    diag,
    want_dw,
    dw,
    hx,
    dw_scale,
    prod,
):
    """The transposed product for key row ``r``: ``out[r] = scale * sum_{(y, e)} weights[e] * g[y]
    (+ diag[r] * g[r])``; with ``want_dw`` also ``dw[e] += dw_scale * g[y] . hx[r]`` (each edge
    belongs to exactly one key row, so no two threads write one edge)."""
    b = r // n
    x = r - b * n
    base = b * num_edges
    heads = g.shape[1]
    depth = g.shape[2]
    for h in range(heads):
        for d in range(depth):
            acc[ar, h, d] = g[r, h, d] * 0
    for t in range(tindptr[x], tindptr[x + 1]):
        query = b * n + tqueries[t]
        e = base + tedges[t]
        for h in range(heads):
            w = weights[e, h]
            for d in range(depth):
                acc[ar, h, d] += w * g[query, h, d]
        if want_dw:
            head_products(g, query, hx, r, heads, depth, prod)
            for h in range(heads):
                dw[e, h] += dw_scale * tree_sum(prod, h, depth)
    for h in range(heads):
        for d in range(depth):
            value = scale * acc[ar, h, d]
            if has_diag:
                value = value + diag[r, h] * g[r, h, d]
            out[r, h, d] = value


@register_jitable
def softmax_back_row(r, indptr, indices, n, num_edges, attn, grad, has_mask, pad, mode):
    """In place: ``grad`` (d loss / d attention) becomes d loss / d score for row ``r``'s edges:
    softmax ``a * (g - sum a g)`` or exp ``a * g``; 0 on masked edges (their score is a constant)."""
    b = r // n
    y = r - b * n
    e0 = indptr[y]
    e1 = indptr[y + 1]
    base = b * num_edges
    if e1 == e0:
        return
    for h in range(attn.shape[1]):
        total = attn[base + e0, h] * grad[base + e0, h]
        if mode == MODE_SOFTMAX:
            for e in range(e0 + 1, e1):
                total += attn[base + e, h] * grad[base + e, h]
        for e in range(e0, e1):
            if has_mask and (pad[r] != 0 or pad[b * n + indices[e]] != 0):
                grad[base + e, h] = grad[base + e, h] * 0
            elif mode == MODE_SOFTMAX:
                grad[base + e, h] = attn[base + e, h] * (grad[base + e, h] - total)
            else:
                grad[base + e, h] = attn[base + e, h] * grad[base + e, h]


@register_jitable
def colsum_row(r, tindptr, tedges, n, num_edges, weights, out):
    """``out[r, h] = sum of weights[e, h]`` over the edges leaving key row ``r`` (its out-degree)."""
    b = r // n
    x = r - b * n
    base = b * num_edges
    t0 = tindptr[x]
    t1 = tindptr[x + 1]
    for h in range(weights.shape[1]):
        if t1 == t0:
            out[r, h] = 0.0
            continue
        total = weights[base + tedges[t0], h]
        for t in range(t0 + 1, t1):
            total += weights[base + tedges[t], h]
        out[r, h] = total

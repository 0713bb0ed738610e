"""Row bodies of the fused attention kernels (diffusion and fractional), for ``njit`` and ``cuda.jit``.

Layout: ``q``, ``k``, ``v`` and node features are ``(repeats * n, H, D)`` where ``n`` is the
pattern's node count and ``repeats`` the sequences sharing it (1 for a batched pattern): row
``r = b * n + y`` uses pattern row ``y`` and keys ``b * n + x``. Edge scalars are
``(repeats * E, H)``: edge ``e`` of copy ``b`` is ``b * E + e``. No ``(E, H, D)`` tensor exists.

Arithmetic is in the inputs' dtype (float32 or float64) in a fixed order the CPU and the CUDA
simulator share: dot products in 64-byte lanes (:mod:`.lanes`: explicit vector instructions on the
CPU, the same operations as scalars elsewhere), sums over a row's edges in edge order, ``exp`` in
float64. Sums over edges accumulate in ``acc[ar]``, an ``(H, D)`` row: block scratch on the CPU
(it stays in cache and aliases nothing, so the loop vectoriser needs no run-time checks), the
output row itself on CUDA; ``lanes`` is the scalar dot product's scratch (a CUDA thread's local array).

Dropout is keyed, not stored as tensors: the keep bits of an edge (one per head) are drawn by the
score pass from ``row_state(key, query row)`` and kept as ``(repeats * E, ceil(H / 8))`` bytes; a
node's (one per ``(h, d)``) by the forward propagation of each hop, ``(rows, ceil(H * D / 8))``
bytes. A kept value is scaled by ``1 / (1 - p)``; the draws are the package's counter-based RNG, so
the CPU and a GPU keep the same elements.
"""

from __future__ import annotations

import math

import numpy as np
from numba.extending import register_jitable

from ...._rng import draw, row_state, uniform_01
from .lanes import dot_lanes, dots_into

__all__ = [
    "MASKED_SCORE",
    "draw_keep_bits",
    "kept",
    "score_row",
    "spmm_row",
    "spmm_t_row",
    "transpose_weights_row",
    "score_grad_row",
    "colsum_row",
]

MASKED_SCORE = -10000.0  # Diffuser's masked_fill value for an edge touching a padding token
MODE_SOFTMAX = 0  # diffusion attention: edge softmax over each query's keys
MODE_EXP = 1  # edge weight exp(k . q), 0 when masked (the backward of fractional attention's weights)
MODE_SCORE = 2  # the score k . q itself, -inf when masked (fractional attention shifts it before exp)


@register_jitable
def draw_keep_bits(state, count, p, bits, row):
    """``bits[row, i >> 3]`` bit ``i & 7`` = 1 when draw ``i`` of ``state`` is kept (uniform >= p)."""
    for byte in range((count + 7) >> 3):
        value = 0
        for bit in range(8):
            i = byte * 8 + bit
            if i < count and uniform_01(draw(state, i)) >= p:
                value = value | (1 << bit)
        bits[row, byte] = value


@register_jitable
def kept(bits, row, i):
    """The keep bit ``i`` of ``row`` (see :func:`draw_keep_bits`)."""
    return (bits[row, i >> 3] >> (i & 7)) & 1


@register_jitable
def _row_span(r, n, num_edges, indptr):
    """``(b, e0, e1, base)`` of row ``r`` of a batch of ``n``-token sequences sharing one pattern:
    its sequence ``b``, its edges ``[e0, e1)`` in the pattern's ``indptr`` (or its out-edges in the
    transposed pattern's) and ``base = b * num_edges``, where sequence ``b``'s edge scalars start."""
    b = r // n
    y = r - b * n
    return b, indptr[y], indptr[y + 1], b * num_edges


@register_jitable
def _open_row(r, n, num_edges, indptr, acc, ar):
    """:func:`_row_span` of row ``r``, with the row's accumulator ``acc[ar]`` zeroed."""
    for h in range(acc.shape[1]):
        for d in range(acc.shape[2]):
            acc[ar, h, d] = 0.0
    return _row_span(r, n, num_edges, indptr)


@register_jitable
def score_row(
    r, indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, lanes, bad, drop_edges, p, key, edge_bits
):
    """Scores ``k[key] . q[r]`` of row ``r``'s edges, masked, then softmax over the row (or
    ``exp``, or the scores as they are: ``mode``) per head, into ``attn``; ``bad[r] = 1`` when a
    score is not finite. With ``drop_edges``, also the row's edge keep bits (probability ``1 - p``)
    into ``edge_bits``."""
    b, e0, e1, base = _row_span(r, n, num_edges, indptr)
    heads = q.shape[1]
    for e in range(e0, e1):
        x = b * n + indices[e]
        masked = has_mask and (pad[r] != 0 or pad[x] != 0)
        for h in range(heads):
            s = dot_lanes(q, r, k, x, h, lanes)
            if not math.isfinite(s):
                bad[r] = 1
            if masked:
                if mode == MODE_SOFTMAX:
                    attn[base + e, h] = MASKED_SCORE
                elif mode == MODE_EXP:
                    attn[base + e, h] = 0.0
                else:
                    attn[base + e, h] = -math.inf
            elif mode == MODE_EXP:
                attn[base + e, h] = math.exp(np.float64(s))
            else:
                attn[base + e, h] = s
    if drop_edges:
        state = row_state(key, r)
        for e in range(e0, e1):  # one draw per (edge, head), numbered within the row
            draw_keep_bits(row_state(state, e - e0), heads, p, edge_bits, base + e)
    if mode != MODE_SOFTMAX or e1 == e0:
        return
    for h in range(heads):
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
def _finish_row(
    r, x, out, acc, ar, scale, has_self, self_scale, self_rows, has_diag, diag, drop_nodes, node_bits, node_scale
):
    """``out[r] = scale * acc[ar] (+ self_scale * self_rows[r]) (+ diag[r] * x[r])``, then node
    dropout (``drop_nodes``: bit ``h * D + d`` of ``node_bits[r]`` keeps, times ``node_scale``)."""
    depth = out.shape[2]
    for h in range(out.shape[1]):
        for d in range(depth):
            value = scale * acc[ar, h, d]
            if has_self:
                value = value + self_scale * self_rows[r, h, d]
            if has_diag:
                value = value + diag[r, h] * x[r, h, d]
            if drop_nodes:
                value = value * node_scale if kept(node_bits, r, h * depth + d) else value * 0
            out[r, h, d] = value


@register_jitable
def spmm_row(
    r,
    indptr,
    indices,
    n,
    num_edges,
    weights,
    x,
    out,
    acc,
    ar,
    scale,
    has_self,
    self_scale,
    self_rows,
    has_diag,
    diag,
    drop_edges,
    edge_bits,
    edge_scale,
    drop_nodes,
    p,
    key,
    node_bits,
    node_scale,
):
    """``out[r] = scale * sum_e w_e * x[key_e] (+ self_scale * self_rows[r]) (+ diag[r] * x[r])``
    per head, ``w_e = weights[e]`` (``drop_edges``: ``weights[e] * edge_scale`` where the edge's
    keep bit is set, else the edge is skipped). ``drop_nodes``: draws row ``r``'s node keep bits
    (probability ``1 - p``, from ``row_state(key, r)``) into ``node_bits`` and applies them."""
    b, e0, e1, base = _open_row(r, n, num_edges, indptr, acc, ar)
    heads = x.shape[1]
    depth = x.shape[2]
    for e in range(e0, e1):
        source = b * n + indices[e]
        for h in range(heads):
            w = weights[base + e, h]
            if drop_edges:
                if not kept(edge_bits, base + e, h):
                    continue
                w = w * edge_scale
            for d in range(depth):  # written out: a call per (edge, head) costs more than the loop
                acc[ar, h, d] += w * x[source, h, d]
    if drop_nodes:
        draw_keep_bits(row_state(key, r), heads * x.shape[2], p, node_bits, r)
    _finish_row(
        r, x, out, acc, ar, scale, has_self, self_scale, self_rows, has_diag, diag, drop_nodes, node_bits, node_scale
    )


@register_jitable
def spmm_t_row(
    r,
    tindptr,
    tqueries,
    tedges,
    n,
    num_edges,
    weights,
    transposed,
    g,
    out,
    acc,
    ar,
    lanes,
    scale,
    has_diag,
    diag,
    want_dw,
    dw,
    hx,
    dw_scale,
    drop_edges,
    edge_bits,
    edge_scale,
    drop_nodes,
    node_bits,
    node_scale,
    want_sum,
    total,
    sum_scale,
):
    """The transposed product for key row ``r``: ``out[r] = scale * sum_{(y, e)} w_e * g[y]
    (+ diag[r] * g[r])`` (``w_e`` as in :func:`spmm_row`), then node dropout with the given bits;
    with ``want_dw`` also ``dw[e] += dw_scale * g[y] . hx[r]`` (each edge belongs to exactly one
    key row, so no two rows write one edge), with ``want_sum`` also ``total[r] += sum_scale *
    out[r]``. ``transposed``: ``weights``, ``dw`` and ``edge_bits`` are in the out-CSR's order
    (:func:`transpose_weights_row`), read and written in sequence instead of at ``e``."""
    b, t0, t1, base = _open_row(r, n, num_edges, tindptr, acc, ar)
    heads = g.shape[1]
    depth = g.shape[2]
    for t in range(t0, t1):
        query = b * n + tqueries[t]
        e = base + tedges[t]
        at = base + t if transposed else e  # where this edge's scalars are
        for h in range(heads):
            w = weights[at, h]
            if drop_edges:
                if not kept(edge_bits, at, h):
                    continue
                w = w * edge_scale
            for d in range(depth):
                acc[ar, h, d] += w * g[query, h, d]
        if want_dw:
            dots_into(g, query, hx, r, dw, at, dw_scale, lanes)
    _finish_row(r, g, out, acc, ar, scale, False, scale, g, has_diag, diag, drop_nodes, node_bits, node_scale)
    if want_sum:
        for h in range(heads):
            for d in range(g.shape[2]):
                total[r, h, d] = total[r, h, d] + sum_scale * out[r, h, d]


@register_jitable
def transpose_weights_row(r, tindptr, tedges, n, num_edges, weights, back, drop_edges, edge_bits, edge_scale, out):
    """``out[base + t] = weights[base + tedges[t]]`` for key row ``r``'s out-edges ``t``, with edge
    dropout applied (``* edge_scale`` kept, ``0`` dropped): the weights in the order the transposed
    passes walk them, gathered once instead of once per pass. ``back``: the other way,
    ``out[base + tedges[t]] = weights[base + t]`` (no dropout)."""
    _, t0, t1, base = _row_span(r, n, num_edges, tindptr)
    for t in range(t0, t1):
        e = base + tedges[t]
        for h in range(weights.shape[1]):
            if back:
                out[e, h] = weights[base + t, h]
                continue
            w = weights[e, h]
            if drop_edges:
                w = w * edge_scale if kept(edge_bits, e, h) else w * 0
            out[base + t, h] = w


@register_jitable
def score_grad_row(
    r, indptr, indices, n, num_edges, attn, permuted, positions, grad, has_mask, pad, mode, drop_edges, edge_bits,
    edge_scale, k, grad_q, acc, ar,
):  # fmt: skip
    """In place: ``grad`` (d loss / d weight, the weight being the attention after edge dropout)
    becomes d loss / d score for row ``r``'s edges: softmax ``a * (g' - sum a g')`` or exp
    ``a * g'`` with ``g' = g * keep * edge_scale``; 0 on masked edges (their score is a constant).
    Then ``grad_q[r] = sum_e (d loss / d score_e) * k[key_e]``. ``permuted``: ``attn`` and ``grad``
    are in the out-CSR's order (:func:`transpose_weights_row`; ``attn`` without dropout), edge
    ``e``'s read and written at ``positions[e]`` (the diffusion backward keeps only those copies);
    ``edge_bits`` stay in the in-CSR's order."""
    b, e0, e1, base = _open_row(r, n, num_edges, indptr, acc, ar)
    heads = attn.shape[1]
    depth = k.shape[2]
    for e in range(e0, e1):
        at = base + (positions[e] if permuted else e)
        for h in range(heads):
            if drop_edges:
                keep = kept(edge_bits, base + e, h)
                grad[at, h] = grad[at, h] * edge_scale if keep else grad[at, h] * 0
    for h in range(heads if e1 > e0 else 0):
        at = base + (positions[e0] if permuted else e0)
        total = attn[at, h] * grad[at, h]
        if mode == MODE_SOFTMAX:
            for e in range(e0 + 1, e1):
                at = base + (positions[e] if permuted else e)
                total += attn[at, h] * grad[at, h]
        for e in range(e0, e1):
            at = base + (positions[e] if permuted else e)
            if has_mask and (pad[r] != 0 or pad[b * n + indices[e]] != 0):
                grad[at, h] = grad[at, h] * 0
            elif mode == MODE_SOFTMAX:
                grad[at, h] = attn[at, h] * (grad[at, h] - total)
            else:
                grad[at, h] = attn[at, h] * grad[at, h]
    for e in range(e0, e1):
        source = b * n + indices[e]
        at = base + (positions[e] if permuted else e)
        for h in range(heads):
            w = grad[at, h]
            for d in range(depth):
                acc[ar, h, d] += w * k[source, h, d]
    for h in range(heads):
        for d in range(k.shape[2]):
            grad_q[r, h, d] = acc[ar, h, d]


@register_jitable
def colsum_row(r, tindptr, tedges, n, num_edges, weights, out):
    """``out[r, h] = sum of weights[e, h]`` over the edges leaving key row ``r`` (its out-degree)."""
    _, t0, t1, base = _row_span(r, n, num_edges, tindptr)
    for h in range(weights.shape[1]):
        if t1 == t0:
            out[r, h] = 0.0
            continue
        total = weights[base + tedges[t0], h]
        for t in range(t0 + 1, t1):
            total += weights[base + tedges[t], h]
        out[r, h] = total

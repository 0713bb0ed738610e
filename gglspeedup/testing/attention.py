"""Dense float64 references of the fused attention operators (for tests and the agreement tools).

They evaluate the same definitions as :func:`gglspeedup.attention.diffusion_attention` and
:func:`gglspeedup.attention.fractional_attention` on a dense ``(N, N)`` matrix per head with plain
torch operations, so torch's autograd gives their gradients. Small inputs only (``N`` = all tokens).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["dense_adjacency", "dense_diffusion", "dense_fractional", "dropout_masks"]


def dense_adjacency(graph, repeats: int = 1):
    """Bool ``(N, N)`` torch matrix, ``[query, key]``, of ``graph`` repeated ``repeats`` times."""
    import torch

    from ..device import to_numpy

    indptr, indices = to_numpy(graph.indptr).astype(np.int64), to_numpy(graph.indices).astype(np.int64)
    n = indptr.shape[0] - 1
    rows = np.repeat(np.arange(n), np.diff(indptr))
    adjacency = torch.zeros((repeats * n, repeats * n), dtype=torch.bool)
    for b in range(repeats):
        adjacency[b * n + rows, b * n + indices] = True
    return adjacency


def _flat(t):
    batch, length, heads, depth = t.shape
    return t.reshape(batch * length, heads, depth).permute(1, 0, 2)  # (H, N, D)


def dense_diffusion(q, k, v, graph, hops=5, alpha=0.1, key_padding_mask=None, dropout_masks=None):
    """Diffuser's layer math, dense, in the inputs' dtype: returns ``(B, L, H, D)``.

    ``dropout_masks``: optional ``(attention_mask (H, N, N) scaled, [hop masks (N, H, D) scaled])``.
    """
    import torch

    batch, length, heads, depth = q.shape
    adjacency = dense_adjacency(graph, batch if graph.shared else 1)
    qf, kf, vf = _flat(q), _flat(k), _flat(v)
    scores = qf @ kf.transpose(1, 2)  # (H, N_query, N_key)
    if key_padding_mask is not None:
        pad = key_padding_mask.reshape(-1)
        masked = pad[:, None] | pad[None, :]
        scores = scores.masked_fill(masked[None], -10000.0)
    scores = scores.masked_fill(~adjacency[None], -math.inf)
    attn = torch.softmax(scores, dim=-1)
    attn = torch.nan_to_num(attn, nan=0.0)  # rows without keys
    if dropout_masks is not None:
        attn = attn * dropout_masks[0]
    h = vf
    for t in range(hops):
        h = (1.0 - alpha) * (attn @ h) + alpha * vf
        if dropout_masks is not None:
            h = h * dropout_masks[1][t].permute(1, 0, 2)
    return h.permute(1, 0, 2).reshape(batch, length, heads, depth)


def dense_fractional(q, k, v, graph, gamma=0.5, terms=6, steps=1, key_padding_mask=None):
    """The fractional operator, dense: ``W[y, x] = exp(k_x . q_y)`` on edges (0 when masked),
    ``outdeg_x = sum_y W[y, x]``, ``rho`` = max out-degree per sequence and head,
    ``P = W + diag(rho - outdeg)``, ``L_gamma = rho**gamma * sum_n binom(gamma, n) (-P / rho)**n``
    (``n = 0 .. terms``), output ``L_gamma**steps v``. Returns ``(B, L, H, D)``."""
    import torch

    batch, length, heads, depth = q.shape
    repeats = batch if graph.shared else 1
    adjacency = dense_adjacency(graph, repeats)
    qf, kf, vf = _flat(q), _flat(k), _flat(v)
    weights = torch.exp(qf @ kf.transpose(1, 2)) * adjacency[None]
    if key_padding_mask is not None:
        pad = key_padding_mask.reshape(-1)
        weights = weights.masked_fill((pad[:, None] | pad[None, :])[None], 0.0)
    outdeg = weights.sum(dim=1)  # (H, N): column sums
    seq = torch.arange(batch * length) // length
    out = torch.zeros_like(vf)
    for b in range(batch):
        rows = seq == b
        w = weights[:, rows][:, :, rows]
        od = outdeg[:, rows]
        rho = od.amax(dim=1)  # (H,)
        p = (w + torch.diag_embed(rho[:, None] - od)) / rho[:, None, None]
        eye = torch.eye(int(rows.sum()), dtype=q.dtype).expand_as(p)
        series = eye.clone()
        power = eye
        coefficient = 1.0
        for n in range(1, terms + 1):
            coefficient *= (gamma - n + 1) / n
            power = power @ (-p)
            series = series + coefficient * power
        operator = rho[:, None, None] ** gamma * series
        h = vf[:, rows]
        for _ in range(steps):
            h = operator @ h
        out[:, rows] = h
    return out.permute(1, 0, 2).reshape(batch, length, heads, depth)


def dropout_masks(graph, batch, heads, depth, hops, p, seed, dtype=None):
    """The dropout masks :func:`gglspeedup.attention.diffusion_attention` draws for ``seed`` (the
    int it takes from torch's generator), recomputed here in NumPy from the same keyed draws, in the
    form :func:`dense_diffusion` takes: ``(attention (H, N, N), [hop t (N, H, D)])``, kept
    entries ``1 / (1 - p)``, dropped ``0``.

    Edge ``e`` of query row ``r`` (``e0`` its row's first edge) keeps head ``h`` when
    ``uniform_01(draw(row_state(row_state(key_0, r), e - e0), h)) >= p``; hop ``t`` keeps element
    ``(r, h, d)`` when ``uniform_01(draw(row_state(key_{1 + t}, r), h * D + d)) >= p``.
    """
    import torch

    from .._splitmix import GAMMA, dropout_key, mix64
    from ..device import to_numpy

    node_mul = np.uint64(0xD6E8FEB86659FD93)
    indptr = to_numpy(graph.indptr).astype(np.int64)
    indices = to_numpy(graph.indices).astype(np.int64)
    n = indptr.shape[0] - 1
    repeats = batch if graph.shared else 1
    rows = repeats * n
    dtype = dtype or torch.float64
    scale = 1.0 / (1.0 - p)

    def uniform(states, count):  # (len(states), count) uniforms of draws 0 .. count - 1
        with np.errstate(over="ignore"):
            bits = mix64(states[:, None] + (np.arange(count, dtype=np.uint64)[None, :] + np.uint64(1)) * GAMMA)
        return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)

    def row_states(key, node_ids):
        with np.errstate(over="ignore"):
            return mix64(np.uint64(key) ^ (node_ids.astype(np.uint64) * node_mul))

    degree = np.diff(indptr)
    query = np.repeat(np.arange(rows) % n, np.tile(degree, repeats))  # pattern row of every edge
    copy = np.repeat(np.arange(rows) // n, np.tile(degree, repeats))
    global_row = copy * n + query
    position = np.arange(repeats * indptr[-1]) - np.repeat(np.tile(indptr[:-1], repeats), np.tile(degree, repeats))
    position -= np.repeat(np.arange(repeats) * indptr[-1], indptr[-1])
    with np.errstate(over="ignore"):
        edge_states = mix64(row_states(dropout_key(seed, 0), global_row) ^ (position.astype(np.uint64) * node_mul))
    keep = uniform(edge_states, heads) >= p  # (repeats * E, H)
    attention = torch.zeros((heads, rows, rows), dtype=dtype)
    key_rows = copy * n + np.tile(indices, repeats)
    attention[:, torch.from_numpy(global_row), torch.from_numpy(key_rows)] = torch.from_numpy(keep.T * scale).to(dtype)
    hop_masks = []
    for t in range(hops):
        states = row_states(dropout_key(seed, 1 + t), np.arange(rows))
        kept = uniform(states, heads * depth) >= p
        hop_masks.append(torch.from_numpy(kept.reshape(rows, heads, depth) * scale).to(dtype))
    return attention, hop_masks

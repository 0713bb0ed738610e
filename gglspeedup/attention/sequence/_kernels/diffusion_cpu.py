"""CPU driver of the fused attention kernels: ``@njit(parallel=True)`` loops over blocks of rows.

One parallel region per pass. Rows are taken in blocks of :data:`BLOCK`; a block allocates its scratch once:
the ``(H, D)`` accumulator row and the scalar dot product's lanes (the CPU's vector dot products do
not touch them). Arrays
are NumPy views of the caller's tensors (no copies).

The row bodies live in :mod:`.diffusion_rows`. Numba's on-disk cache checks only the file of the
``njit`` function (this one), so a change there comes with a change here: ``score_row``'s third
mode (the scores as they are, ``MODE_SCORE``, for fractional attention's shifted weights).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ...._threading import prefer_tbb
from . import diffusion_rows
from .lanes import SCRATCH_BYTES

__all__ = ["BLOCK", "scores", "spmm", "spmm_t", "transpose_weights", "score_grad", "colsum"]

prefer_tbb()

BLOCK = 16


@njit(parallel=True, cache=True, nogil=True)
def scores(indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, bad, drop_edges, p, key, edge_bits):
    rows = q.shape[0]
    for block in prange((rows + BLOCK - 1) // BLOCK):
        lanes = np.empty(SCRATCH_BYTES // q.itemsize, q.dtype)
        for r in range(block * BLOCK, min(rows, (block + 1) * BLOCK)):
            diffusion_rows.score_row(
                r, indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, lanes, bad, drop_edges, p, key,
                edge_bits,
            )  # fmt: skip


@njit(parallel=True, cache=True, nogil=True)
def spmm(
    indptr, indices, n, num_edges, weights, x, out, scale, has_self, self_scale, self_rows, has_diag, diag,
    drop_edges, edge_bits, edge_scale, drop_nodes, p, key, node_bits, node_scale,
):  # fmt: skip
    rows = x.shape[0]
    for block in prange((rows + BLOCK - 1) // BLOCK):
        acc = np.empty((1, x.shape[1], x.shape[2]), x.dtype)
        for r in range(block * BLOCK, min(rows, (block + 1) * BLOCK)):
            diffusion_rows.spmm_row(
                r, indptr, indices, n, num_edges, weights, x, out, acc, 0, scale, has_self, self_scale, self_rows,
                has_diag, diag, drop_edges, edge_bits, edge_scale, drop_nodes, p, key, node_bits, node_scale,
            )  # fmt: skip


@njit(parallel=True, cache=True, nogil=True)
def spmm_t(
    tindptr, tqueries, tedges, n, num_edges, weights, transposed, g, out, scale, has_diag, diag, want_dw, dw, hx,
    dw_scale,
    drop_edges, edge_bits, edge_scale, drop_nodes, node_bits, node_scale, want_sum, total, sum_scale,
):  # fmt: skip
    rows = g.shape[0]
    for block in prange((rows + BLOCK - 1) // BLOCK):
        lanes = np.empty(SCRATCH_BYTES // g.itemsize, g.dtype)
        acc = np.empty((1, g.shape[1], g.shape[2]), g.dtype)
        for r in range(block * BLOCK, min(rows, (block + 1) * BLOCK)):
            diffusion_rows.spmm_t_row(
                r, tindptr, tqueries, tedges, n, num_edges, weights, transposed, g, out, acc, 0, lanes, scale,
                has_diag, diag, want_dw, dw, hx, dw_scale, drop_edges, edge_bits, edge_scale, drop_nodes, node_bits,
                node_scale, want_sum, total, sum_scale,
            )  # fmt: skip


@njit(parallel=True, cache=True, nogil=True)
def score_grad(
    indptr, indices, n, num_edges, attn, permuted, positions, grad, has_mask, pad, mode, drop_edges, edge_bits,
    edge_scale, k, grad_q,
):  # fmt: skip
    rows = grad_q.shape[0]
    for block in prange((rows + BLOCK - 1) // BLOCK):
        acc = np.empty((1, k.shape[1], k.shape[2]), k.dtype)
        for r in range(block * BLOCK, min(rows, (block + 1) * BLOCK)):
            diffusion_rows.score_grad_row(
                r, indptr, indices, n, num_edges, attn, permuted, positions, grad, has_mask, pad, mode, drop_edges,
                edge_bits, edge_scale, k, grad_q, acc, 0,
            )  # fmt: skip


@njit(parallel=True, cache=True, nogil=True)
def transpose_weights(tindptr, tedges, n, num_edges, weights, back, drop_edges, edge_bits, edge_scale, out, rows):
    for block in prange((rows + BLOCK - 1) // BLOCK):
        for r in range(block * BLOCK, min(rows, (block + 1) * BLOCK)):
            diffusion_rows.transpose_weights_row(
                r, tindptr, tedges, n, num_edges, weights, back, drop_edges, edge_bits, edge_scale, out
            )


@njit(parallel=True, cache=True, nogil=True)
def colsum(tindptr, tedges, n, num_edges, weights, out):
    for r in prange(out.shape[0]):
        diffusion_rows.colsum_row(r, tindptr, tedges, n, num_edges, weights, out)

"""CPU driver of the fused attention kernels: ``@njit(parallel=True)`` loops over the shared rows.

Rows are split in blocks; each block allocates its scratch (the dot-product tree, the ``(H, D)``
accumulator) once. Arrays are NumPy views of the caller's tensors (no copies).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..._threading import prefer_tbb
from .diffusion_rows import colsum_row, score_row, softmax_back_row, spmm_row, spmm_t_row

__all__ = ["scores", "spmm", "spmm_t", "softmax_back", "colsum"]

prefer_tbb()

_BLOCK = 16


@njit(parallel=True, cache=True, nogil=True)
def scores(indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, bad):
    rows = q.shape[0]
    for block in prange((rows + _BLOCK - 1) // _BLOCK):
        prod = np.empty((q.shape[1], q.shape[2]), q.dtype)
        for r in range(block * _BLOCK, min(rows, (block + 1) * _BLOCK)):
            score_row(r, indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, prod, bad)


@njit(parallel=True, cache=True, nogil=True)
def spmm(indptr, indices, n, num_edges, weights, x, out, scale, has_self, self_scale, self_rows, has_diag, diag):
    rows = x.shape[0]
    for block in prange((rows + _BLOCK - 1) // _BLOCK):
        acc = np.empty((1, x.shape[1], x.shape[2]), x.dtype)
        for r in range(block * _BLOCK, min(rows, (block + 1) * _BLOCK)):
            spmm_row(
                r,
                indptr,
                indices,
                n,
                num_edges,
                weights,
                x,
                out,
                acc,
                0,
                scale,
                has_self,
                self_scale,
                self_rows,
                has_diag,
                diag,
            )


@njit(parallel=True, cache=True, nogil=True)
def spmm_t(tindptr, tqueries, tedges, n, num_edges, weights, g, out, scale, has_diag, diag, want_dw, dw, hx, dw_scale):
    rows = g.shape[0]
    for block in prange((rows + _BLOCK - 1) // _BLOCK):
        acc = np.empty((1, g.shape[1], g.shape[2]), g.dtype)
        prod = np.empty((g.shape[1], g.shape[2]), g.dtype)
        for r in range(block * _BLOCK, min(rows, (block + 1) * _BLOCK)):
            spmm_t_row(
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
                0,
                scale,
                has_diag,
                diag,
                want_dw,
                dw,
                hx,
                dw_scale,
                prod,
            )


@njit(parallel=True, cache=True, nogil=True)
def softmax_back(indptr, indices, n, num_edges, attn, grad, has_mask, pad, mode, rows):
    for r in prange(rows):
        softmax_back_row(r, indptr, indices, n, num_edges, attn, grad, has_mask, pad, mode)


@njit(parallel=True, cache=True, nogil=True)
def colsum(tindptr, tedges, n, num_edges, weights, out):
    for r in prange(out.shape[0]):
        colsum_row(r, tindptr, tedges, n, num_edges, weights, out)

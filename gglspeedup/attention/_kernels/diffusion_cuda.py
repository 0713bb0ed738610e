"""GPU driver of the fused attention kernels: ``@cuda.jit``, one thread per row, the same row bodies.

A thread's scratch is local memory (``MAX_HEADS x MAX_HEAD_DIM`` products for the dot-product trees); the
accumulators are the output rows themselves. Launches go through :func:`gglspeedup._launch.launch_rows`.
"""

from __future__ import annotations

from numba import cuda, float32, float64

from ..._launch import launch_rows
from .diffusion_rows import colsum_row, score_row, softmax_back_row, spmm_row, spmm_t_row

__all__ = ["MAX_HEADS", "MAX_HEAD_DIM", "scores", "spmm", "spmm_t", "softmax_back", "colsum"]

MAX_HEADS = 16  # the per-thread dot-product scratch (local memory): heads x head_dim products
MAX_HEAD_DIM = 128


def _kernels(dtype):
    local = float32 if dtype == "float32" else float64

    @cuda.jit
    def scores_kernel(indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, bad):
        r = cuda.grid(1)
        if r < q.shape[0]:
            prod = cuda.local.array((MAX_HEADS, MAX_HEAD_DIM), local)
            score_row(r, indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, prod, bad)

    @cuda.jit
    def spmm_kernel(
        indptr, indices, n, num_edges, weights, x, out, scale, has_self, self_scale, self_rows, has_diag, diag
    ):
        r = cuda.grid(1)
        if r < x.shape[0]:
            spmm_row(
                r,
                indptr,
                indices,
                n,
                num_edges,
                weights,
                x,
                out,
                out,
                r,
                scale,
                has_self,
                self_scale,
                self_rows,
                has_diag,
                diag,
            )

    @cuda.jit
    def spmm_t_kernel(
        tindptr, tqueries, tedges, n, num_edges, weights, g, out, scale, has_diag, diag, want_dw, dw, hx, dw_scale
    ):
        r = cuda.grid(1)
        if r < g.shape[0]:
            prod = cuda.local.array((MAX_HEADS, MAX_HEAD_DIM), local)
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
                out,
                r,
                scale,
                has_diag,
                diag,
                want_dw,
                dw,
                hx,
                dw_scale,
                prod,
            )

    @cuda.jit
    def softmax_back_kernel(indptr, indices, n, num_edges, attn, grad, has_mask, pad, mode, rows):
        r = cuda.grid(1)
        if r < rows:
            softmax_back_row(r, indptr, indices, n, num_edges, attn, grad, has_mask, pad, mode)

    @cuda.jit
    def colsum_kernel(tindptr, tedges, n, num_edges, weights, out):
        r = cuda.grid(1)
        if r < out.shape[0]:
            colsum_row(r, tindptr, tedges, n, num_edges, weights, out)

    return {
        "scores": scores_kernel,
        "spmm": spmm_kernel,
        "spmm_t": spmm_t_kernel,
        "softmax_back": softmax_back_kernel,
        "colsum": colsum_kernel,
    }


_KERNELS = {"float32": _kernels("float32"), "float64": _kernels("float64")}


def _launch(name, device, rows, dtype, *args):
    launch_rows(_KERNELS[str(dtype)][name], device, rows, *args)


def scores(device, indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, bad):
    _launch("scores", device, q.shape[0], q.dtype, indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, bad)


def spmm(
    device, indptr, indices, n, num_edges, weights, x, out, scale, has_self, self_scale, self_rows, has_diag, diag
):
    _launch(
        "spmm", device, x.shape[0], x.dtype, indptr, indices, n, num_edges, weights, x, out, scale, has_self,
        self_scale,
        self_rows, has_diag, diag,
    )  # fmt: skip


def spmm_t(
    device, tindptr, tqueries, tedges, n, num_edges, weights, g, out, scale, has_diag, diag, want_dw, dw, hx, dw_scale
):
    _launch(
        "spmm_t", device, g.shape[0], g.dtype, tindptr, tqueries, tedges, n, num_edges, weights, g, out, scale,
        has_diag,
        diag, want_dw, dw, hx, dw_scale,
    )  # fmt: skip


def softmax_back(device, indptr, indices, n, num_edges, attn, grad, has_mask, pad, mode, rows):
    _launch(
        "softmax_back", device, rows, attn.dtype, indptr, indices, n, num_edges, attn, grad, has_mask, pad, mode, rows
    )


def colsum(device, tindptr, tedges, n, num_edges, weights, out):
    _launch("colsum", device, out.shape[0], weights.dtype, tindptr, tedges, n, num_edges, weights, out)

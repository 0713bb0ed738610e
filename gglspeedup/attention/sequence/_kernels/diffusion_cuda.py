"""GPU driver of the fused attention kernels: ``@cuda.jit``, one thread per row, the same row bodies.

A thread's only scratch is the scalar dot product's lanes (local memory, 256 bytes); sums over
edges accumulate in the thread's output row. Launches go through :func:`gglspeedup._launch.launch_rows`.
"""

from __future__ import annotations

from numba import cuda, float32, float64

from ...._launch import launch_rows
from . import diffusion_rows
from .lanes import SCRATCH_BYTES

__all__ = ["scores", "spmm", "spmm_t", "transpose_weights", "score_grad", "colsum"]


def _kernels(dtype):
    local = float32 if dtype == "float32" else float64
    width = SCRATCH_BYTES // (4 if dtype == "float32" else 8)

    @cuda.jit
    def scores_kernel(indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, bad, drop_edges, p, key, bits):
        r = cuda.grid(1)
        if r < q.shape[0]:
            lanes = cuda.local.array(width, local)
            diffusion_rows.score_row(
                r, indptr, indices, n, num_edges, q, k, has_mask, pad, mode, attn, lanes, bad, drop_edges, p, key, bits
            )

    @cuda.jit
    def spmm_kernel(
        indptr, indices, n, num_edges, weights, x, out, scale, has_self, self_scale, self_rows, has_diag, diag,
        drop_edges, edge_bits, edge_scale, drop_nodes, p, key, node_bits, node_scale,
    ):  # fmt: skip
        r = cuda.grid(1)
        if r < x.shape[0]:
            diffusion_rows.spmm_row(
                r, indptr, indices, n, num_edges, weights, x, out, out, r, scale, has_self, self_scale, self_rows,
                has_diag, diag, drop_edges, edge_bits, edge_scale, drop_nodes, p, key, node_bits, node_scale,
            )  # fmt: skip

    @cuda.jit
    def spmm_t_kernel(
        tindptr, tqueries, tedges, n, num_edges, weights, transposed, g, out, scale, has_diag, diag, want_dw, dw, hx,
    dw_scale,
        drop_edges, edge_bits, edge_scale, drop_nodes, node_bits, node_scale, want_sum, total, sum_scale,
    ):  # fmt: skip
        r = cuda.grid(1)
        if r < g.shape[0]:
            lanes = cuda.local.array(width, local)
            diffusion_rows.spmm_t_row(
                r, tindptr, tqueries, tedges, n, num_edges, weights, transposed, g, out, out, r, lanes, scale,
                has_diag, diag, want_dw, dw, hx, dw_scale, drop_edges, edge_bits, edge_scale, drop_nodes, node_bits,
                node_scale, want_sum, total, sum_scale,
            )  # fmt: skip

    @cuda.jit
    def score_grad_kernel(
        indptr, indices, n, num_edges, attn, permuted, positions, grad, has_mask, pad, mode, drop_edges, edge_bits,
        edge_scale, k, grad_q,
    ):  # fmt: skip
        r = cuda.grid(1)
        if r < grad_q.shape[0]:
            diffusion_rows.score_grad_row(
                r, indptr, indices, n, num_edges, attn, permuted, positions, grad, has_mask, pad, mode, drop_edges,
                edge_bits, edge_scale, k, grad_q, grad_q, r,
            )  # fmt: skip

    @cuda.jit
    def transpose_weights_kernel(
        tindptr, tedges, n, num_edges, weights, back, drop_edges, edge_bits, edge_scale, out, rows
    ):
        r = cuda.grid(1)
        if r < rows:
            diffusion_rows.transpose_weights_row(
                r, tindptr, tedges, n, num_edges, weights, back, drop_edges, edge_bits, edge_scale, out
            )

    @cuda.jit
    def colsum_kernel(tindptr, tedges, n, num_edges, weights, out):
        r = cuda.grid(1)
        if r < out.shape[0]:
            diffusion_rows.colsum_row(r, tindptr, tedges, n, num_edges, weights, out)

    return {
        "scores": scores_kernel,
        "spmm": spmm_kernel,
        "spmm_t": spmm_t_kernel,
        "transpose_weights": transpose_weights_kernel,
        "score_grad": score_grad_kernel,
        "colsum": colsum_kernel,
    }


_KERNELS = {"float32": _kernels("float32"), "float64": _kernels("float64")}


def _launch(name, device, rows, dtype, *args):
    # dtype is NumPy's on the simulator and torch's for CUDA tensors ("torch.float32"): a real
    # GPU's diffusion layer failed on every call with KeyError before this took both spellings.
    launch_rows(_KERNELS[str(dtype).removeprefix("torch.")][name], device, rows, *args)


def scores(device, *args):
    """``args`` as the CPU driver's :func:`~.diffusion_cpu.scores` (``q`` is ``args[4]``)."""
    q = args[4]
    _launch("scores", device, q.shape[0], q.dtype, *args)


def spmm(device, *args):
    """``args`` as the CPU driver's :func:`~.diffusion_cpu.spmm` (``x`` is ``args[5]``)."""
    x = args[5]
    _launch("spmm", device, x.shape[0], x.dtype, *args)


def spmm_t(device, *args):
    """``args`` as the CPU driver's :func:`~.diffusion_cpu.spmm_t` (``g`` is ``args[7]``)."""
    g = args[7]
    _launch("spmm_t", device, g.shape[0], g.dtype, *args)


def transpose_weights(device, *args):
    """``args`` as the CPU driver's :func:`~.diffusion_cpu.transpose_weights` (``rows`` last);
    also the edges' uint8 keep bits, through the float32 set's kernel (typed at its first call)."""
    dtype = str(args[4].dtype).removeprefix("torch.")
    _launch("transpose_weights", device, args[-1], dtype if dtype in _KERNELS else "float32", *args)


def score_grad(device, *args):
    """``args`` as the CPU driver's :func:`~.diffusion_cpu.score_grad` (``grad_q`` is ``args[15]``)."""
    grad_q = args[15]
    _launch("score_grad", device, grad_q.shape[0], grad_q.dtype, *args)


def colsum(device, tindptr, tedges, n, num_edges, weights, out):
    _launch("colsum", device, out.shape[0], weights.dtype, tindptr, tedges, n, num_edges, weights, out)

"""The CUDA pooling kernels and driver: one thread per (head, graph) problem.

Each thread runs exactly the bodies the CPU kernels run (:mod:`.fused_lasso`, :mod:`.sparsemax`),
so the simulator reproduces the CPU's bits. Where the work goes on a real GPU, honestly:

- softmax and sparsemax are small per-graph reductions; one thread per graph and head is plenty
  for pooling batches (tens to thousands of graphs) and keeps scores on the device;
- the exact fused lasso is an irregular serial algorithm (maximum flows inside shrinking sets);
  it runs one problem per thread too. That keeps scores, groups and gradients on the device with
  no host round trip (the per-call host syncs are the input checks and the certificate's status
  read), but a GPU thread is far slower than a CPU core on such code: a batch of a few hundred
  (graph, head) problems fills a fraction of one GPU. It is correct and device-resident, not a
  GPU speed claim (no GPU figure has been measured for it).

Launches go through :func:`gglspeedup._launch.launch_rows` (CuPy's current stream: the torch
entry points make torch's current stream CuPy's for the call).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..._launch import launch_rows
from .fused_lasso import FUSED_WORK_INT_FIELDS, FusedWork, fused_lasso_problem, fused_lasso_vjp_problem
from .sparsemax import softmax_problem, softmax_vjp_problem, sparsemax_problem, sparsemax_vjp_problem

__all__ = ["CUDAPoolingDriver"]


@cuda.jit(cache=True)
def _softmax_kernel(ptr, x, out):
    p = cuda.grid(1)
    graphs = ptr.shape[0] - 1
    if p < x.shape[0] * graphs:
        softmax_problem(p % graphs, p // graphs, ptr, x, out)


@cuda.jit(cache=True)
def _softmax_backward_kernel(ptr, a, grad_a, grad_x):
    p = cuda.grid(1)
    graphs = ptr.shape[0] - 1
    if p < a.shape[0] * graphs:
        softmax_vjp_problem(p % graphs, p // graphs, ptr, a, grad_a, grad_x)


@cuda.jit(cache=True)
def _sparsemax_kernel(ptr, x, gamma, out):
    p = cuda.grid(1)
    graphs = ptr.shape[0] - 1
    if p < x.shape[0] * graphs:
        h = p // graphs
        sparsemax_problem(p % graphs, h, ptr, x, gamma[h], out)


@cuda.jit(cache=True)
def _sparsemax_backward_kernel(ptr, x, a, gamma, grad_a, grad_x, grad_gamma):
    p = cuda.grid(1)
    graphs = ptr.shape[0] - 1
    if p < x.shape[0] * graphs:
        h = p // graphs
        g = p % graphs
        grad_gamma[h, g] = sparsemax_vjp_problem(g, h, ptr, x, a, gamma[h], grad_a, grad_x)


@cuda.jit(cache=True)
def _fused_kernel(graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax):
    p = cuda.grid(1)
    graphs = graph.ptr.shape[0] - 1
    if p < s.shape[0] * graphs:
        h = p // graphs
        g = p % graphs
        code, left = fused_lasso_problem(g, h, graph, s, lam[h], work, fused, label, bnd)
        status[h, g] = code
        residual[h, g] = left
        if with_sparsemax and code == 0:
            sparsemax_problem(g, h, graph.ptr, fused, gamma[h], weights)


@cuda.jit(cache=True)
def _fused_backward_kernel(
    ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma
):
    p = cuda.grid(1)
    graphs = ptr.shape[0] - 1
    if p < fused.shape[0] * graphs:
        h = p // graphs
        g = p % graphs
        if weights.shape[0] > 0:
            grad_gamma[h, g] = sparsemax_vjp_problem(g, h, ptr, fused, weights, gamma[h], grad_out, grad_fused)
            grad_lam[h, g] = fused_lasso_vjp_problem(g, h, ptr, label, bnd, grad_fused, work, grad_s)
        else:
            grad_lam[h, g] = fused_lasso_vjp_problem(g, h, ptr, label, bnd, grad_out, work, grad_s)


class CUDAPoolingDriver:
    """The pooling maps on one CUDA device (real or simulated); arrays are ``device.xp`` arrays
    (CuPy, or NumPy under the simulator), head-major float64 ``[heads, num_nodes]``."""

    def __init__(self, device):
        self.device = device
        self.xp = device.xp

    def upload(self, arrays):
        """A :class:`BatchArrays` record of host arrays, on this device."""
        if self.xp is np:
            return arrays
        with self.device:
            return type(arrays)._make(self.xp.asarray(value) for value in arrays)

    def _run(self, kernel, problems, *args):
        with self.device:
            launch_rows(kernel, self.device, problems, *args)

    def softmax(self, ptr, x):
        out = self.xp.zeros_like(x)
        self._run(_softmax_kernel, x.shape[0] * (ptr.shape[0] - 1), ptr, x, out)
        return out

    def softmax_vjp(self, ptr, a, grad_a):
        grad_x = self.xp.zeros_like(a)
        self._run(_softmax_backward_kernel, a.shape[0] * (ptr.shape[0] - 1), ptr, a, grad_a, grad_x)
        return grad_x

    def sparsemax(self, ptr, x, gamma):
        out = self.xp.zeros_like(x)
        self._run(_sparsemax_kernel, x.shape[0] * (ptr.shape[0] - 1), ptr, x, gamma, out)
        return out

    def sparsemax_vjp(self, ptr, x, a, gamma, grad_a):
        xp = self.xp
        grad_x = xp.zeros_like(x)
        grad_gamma = xp.zeros((x.shape[0], ptr.shape[0] - 1))
        self._run(_sparsemax_backward_kernel, grad_gamma.size, ptr, x, a, gamma, grad_a, grad_x, grad_gamma)
        return grad_x, grad_gamma

    def _work(self, heads, num_nodes, num_edges):
        xp = self.xp
        ints = [xp.empty((heads, num_nodes), np.int64) for _ in FUSED_WORK_INT_FIELDS]
        return FusedWork(
            *ints, xp.empty((heads, num_edges)), xp.empty((heads, num_nodes)), xp.empty((heads, num_nodes))
        )

    def fused(self, graph, s, lam, gamma, with_sparsemax):
        xp = self.xp
        heads, num_nodes = s.shape
        graphs = graph.ptr.shape[0] - 1
        work = self._work(heads, num_nodes, graph.edge_u.shape[0])
        fused = xp.zeros_like(s)
        label = xp.zeros((heads, num_nodes), np.int64)
        bnd = xp.zeros((heads, num_nodes), np.int64)
        weights = xp.zeros_like(s) if with_sparsemax else xp.zeros((0, 0))
        status = xp.zeros((heads, graphs), np.int64)
        residual = xp.zeros((heads, graphs))
        self._run(
            _fused_kernel,
            heads * graphs,
            graph,
            s,
            lam,
            gamma,
            work,
            fused,
            label,
            bnd,
            weights,
            status,
            residual,
            bool(with_sparsemax),
        )
        return fused, label, bnd, weights, status, residual

    def fused_vjp(self, ptr, fused, weights, label, bnd, gamma, grad_out):
        xp = self.xp
        heads, num_nodes = fused.shape
        graphs = ptr.shape[0] - 1
        work = self._work(heads, num_nodes, 0)
        grad_fused = xp.zeros_like(fused) if weights.shape[0] > 0 else xp.zeros((0, 0))
        grad_s = xp.zeros_like(fused)
        grad_lam = xp.zeros((heads, graphs))
        grad_gamma = xp.zeros((heads, graphs))
        self._run(
            _fused_backward_kernel,
            heads * graphs,
            ptr,
            fused,
            weights,
            label,
            bnd,
            gamma,
            grad_out,
            work,
            grad_fused,
            grad_s,
            grad_lam,
            grad_gamma,
        )
        return grad_s, grad_lam, grad_gamma

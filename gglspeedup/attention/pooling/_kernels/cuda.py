"""The CUDA pooling kernels and driver: one thread per (head, graph) problem.

Each thread runs exactly the step the CPU kernels run (:mod:`.steps`), so the simulator
reproduces the CPU's bits. Where the work goes on a real GPU, honestly:

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

The problem bodies live in :mod:`.sparsemax` and :mod:`.fused_lasso`; Numba's on-disk cache checks
only this file, so a change there comes with a line here (last: sparsemax shifted by its largest
score, so its support never empties).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ...._launch import launch_rows
from . import steps
from .driver import PoolingDriverBase

__all__ = ["CUDAPoolingDriver"]


@cuda.jit(cache=True)
def _softmax_kernel(ptr, x, out):
    p = cuda.grid(1)
    if p < x.shape[0] * (ptr.shape[0] - 1):
        steps.softmax_forward_step(p, ptr, x, out)


@cuda.jit(cache=True)
def _softmax_backward_kernel(ptr, a, grad_a, grad_x):
    p = cuda.grid(1)
    if p < a.shape[0] * (ptr.shape[0] - 1):
        steps.softmax_backward_step(p, ptr, a, grad_a, grad_x)


@cuda.jit(cache=True)
def _sparsemax_kernel(ptr, x, gamma, out):
    p = cuda.grid(1)
    if p < x.shape[0] * (ptr.shape[0] - 1):
        steps.sparsemax_forward_step(p, ptr, x, gamma, out)


@cuda.jit(cache=True)
def _sparsemax_backward_kernel(ptr, x, a, gamma, grad_a, grad_x, grad_gamma):
    p = cuda.grid(1)
    if p < x.shape[0] * (ptr.shape[0] - 1):
        steps.sparsemax_backward_step(p, ptr, x, a, gamma, grad_a, grad_x, grad_gamma)


@cuda.jit(cache=True)
def _fused_kernel(graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax):
    p = cuda.grid(1)
    if p < s.shape[0] * (graph.ptr.shape[0] - 1):
        steps.fused_forward_step(
            p, graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax
        )


@cuda.jit(cache=True)
def _fused_backward_kernel(
    ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma
):
    p = cuda.grid(1)
    if p < fused.shape[0] * (ptr.shape[0] - 1):
        steps.fused_backward_step(
            p, ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma
        )


_KERNELS = {
    "softmax": _softmax_kernel,
    "softmax_vjp": _softmax_backward_kernel,
    "sparsemax": _sparsemax_kernel,
    "sparsemax_vjp": _sparsemax_backward_kernel,
    "fused": _fused_kernel,
    "fused_vjp": _fused_backward_kernel,
}


class CUDAPoolingDriver(PoolingDriverBase):
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

    def _run(self, name, problems, size, *args):
        with self.device:
            launch_rows(_KERNELS[name], self.device, problems, *args)

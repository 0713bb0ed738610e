"""The CPU pooling kernels: ``@njit(parallel=True)`` loops over (head, graph) problems.

Each kernel runs one problem per ``prange`` iteration through the shared bodies of
:mod:`.fused_lasso` and :mod:`.sparsemax` (the CUDA kernels in :mod:`.pooling_cuda` run the same
bodies, one thread per problem). Problems touch disjoint slices of every array, so they need no
synchronisation; Numba's threads release the GIL, so no process pool is needed. Per-problem
results (status, residual, ``dL/dlam`` and ``dL/dgamma`` shares) land in ``[heads, graphs]``
arrays that the host sums.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..._threading import prefer_tbb
from .fused_lasso import FUSED_WORK_INT_FIELDS, FusedWork, fused_lasso_problem, fused_lasso_vjp_problem
from .sparsemax import softmax_problem, softmax_vjp_problem, sparsemax_problem, sparsemax_vjp_problem

__all__ = [
    "CPUPoolingDriver",
    "KERNEL_LOCK",
    "softmax_forward",
    "softmax_backward",
    "sparsemax_forward",
    "sparsemax_backward",
    "fused_forward",
    "fused_backward",
]

prefer_tbb()  # before any parallel launch: see gglspeedup._threading

# Numba's parallel regions are not meant to be entered from several Python threads at once.
KERNEL_LOCK = threading.Lock()


# One step per (head, graph) problem; each kernel below exists twice, parallel over problems and
# serial (entering a parallel region costs a scheduler time slice on a busy machine, more than a
# small batch's whole work), as distinct functions so that each has its own cache slot.
@register_jitable
def _softmax_forward_step(p, ptr, x, out):
    graphs = ptr.shape[0] - 1
    softmax_problem(p % graphs, p // graphs, ptr, x, out)


@register_jitable
def _softmax_backward_step(p, ptr, a, grad_a, grad_x):
    graphs = ptr.shape[0] - 1
    softmax_vjp_problem(p % graphs, p // graphs, ptr, a, grad_a, grad_x)


@register_jitable
def _sparsemax_forward_step(p, ptr, x, gamma, out):
    graphs = ptr.shape[0] - 1
    h = p // graphs
    sparsemax_problem(p % graphs, h, ptr, x, gamma[h], out)


@register_jitable
def _sparsemax_backward_step(p, ptr, x, a, gamma, grad_a, grad_x, grad_gamma):
    graphs = ptr.shape[0] - 1
    h = p // graphs
    g = p % graphs
    grad_gamma[h, g] = sparsemax_vjp_problem(g, h, ptr, x, a, gamma[h], grad_a, grad_x)


@register_jitable
def _fused_forward_step(p, graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax):
    graphs = graph.ptr.shape[0] - 1
    h = p // graphs
    g = p % graphs
    code, left = fused_lasso_problem(g, h, graph, s, lam[h], work, fused, label, bnd)
    status[h, g] = code
    residual[h, g] = left
    if with_sparsemax and code == 0:
        sparsemax_problem(g, h, graph.ptr, fused, gamma[h], weights)


@register_jitable
def _fused_backward_step(
    p, ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma
):
    graphs = ptr.shape[0] - 1
    h = p // graphs
    g = p % graphs
    if weights.shape[0] > 0:
        grad_gamma[h, g] = sparsemax_vjp_problem(g, h, ptr, fused, weights, gamma[h], grad_out, grad_fused)
        grad_lam[h, g] = fused_lasso_vjp_problem(g, h, ptr, label, bnd, grad_fused, work, grad_s)
    else:
        grad_lam[h, g] = fused_lasso_vjp_problem(g, h, ptr, label, bnd, grad_out, work, grad_s)


@njit(parallel=True, cache=True, nogil=True)
def softmax_forward(ptr, x, out):
    for p in prange(x.shape[0] * (ptr.shape[0] - 1)):
        _softmax_forward_step(p, ptr, x, out)


@njit(cache=True, nogil=True)
def softmax_forward_serial(ptr, x, out):
    for p in range(x.shape[0] * (ptr.shape[0] - 1)):
        _softmax_forward_step(p, ptr, x, out)


@njit(parallel=True, cache=True, nogil=True)
def softmax_backward(ptr, a, grad_a, grad_x):
    for p in prange(a.shape[0] * (ptr.shape[0] - 1)):
        _softmax_backward_step(p, ptr, a, grad_a, grad_x)


@njit(cache=True, nogil=True)
def softmax_backward_serial(ptr, a, grad_a, grad_x):
    for p in range(a.shape[0] * (ptr.shape[0] - 1)):
        _softmax_backward_step(p, ptr, a, grad_a, grad_x)


@njit(parallel=True, cache=True, nogil=True)
def sparsemax_forward(ptr, x, gamma, out):
    for p in prange(x.shape[0] * (ptr.shape[0] - 1)):
        _sparsemax_forward_step(p, ptr, x, gamma, out)


@njit(cache=True, nogil=True)
def sparsemax_forward_serial(ptr, x, gamma, out):
    for p in range(x.shape[0] * (ptr.shape[0] - 1)):
        _sparsemax_forward_step(p, ptr, x, gamma, out)


@njit(parallel=True, cache=True, nogil=True)
def sparsemax_backward(ptr, x, a, gamma, grad_a, grad_x, grad_gamma):
    for p in prange(x.shape[0] * (ptr.shape[0] - 1)):
        _sparsemax_backward_step(p, ptr, x, a, gamma, grad_a, grad_x, grad_gamma)


@njit(cache=True, nogil=True)
def sparsemax_backward_serial(ptr, x, a, gamma, grad_a, grad_x, grad_gamma):
    for p in range(x.shape[0] * (ptr.shape[0] - 1)):
        _sparsemax_backward_step(p, ptr, x, a, gamma, grad_a, grad_x, grad_gamma)


@njit(parallel=True, cache=True, nogil=True)
def fused_forward(graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax):
    """The fused lasso of every problem (``fused``, ``label``, ``bnd``, ``status``, ``residual``)
    and, when ``with_sparsemax``, ``weights = sparsemax(fused / gamma)``."""
    for p in prange(s.shape[0] * (graph.ptr.shape[0] - 1)):
        _fused_forward_step(p, graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax)


@njit(cache=True, nogil=True)
def fused_forward_serial(graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax):
    for p in range(s.shape[0] * (graph.ptr.shape[0] - 1)):
        _fused_forward_step(p, graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax)


@njit(parallel=True, cache=True, nogil=True)
def fused_backward(ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma):
    """Backward of :func:`fused_forward`. With sparsemax (``weights.shape[0] > 0``) ``grad_out``
    is ``dL/dweights``, turned into ``dL/dfused`` in ``grad_fused`` first; otherwise it is
    ``dL/dfused`` already."""
    for p in prange(fused.shape[0] * (ptr.shape[0] - 1)):
        _fused_backward_step(
            p, ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma
        )


@njit(cache=True, nogil=True)
def fused_backward_serial(
    ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma
):
    for p in range(fused.shape[0] * (ptr.shape[0] - 1)):
        _fused_backward_step(
            p, ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma
        )


def _pick(parallel, serial, work, threshold):
    """The parallel kernel when the batch has ``threshold`` units of work or more, else the serial."""
    return parallel if work >= threshold else serial


# node x head counts from which a parallel region pays for itself (on a busy 2-core machine)
PARALLEL_MIN_FUSED = 2048
PARALLEL_MIN_MAPS = 1 << 15


class CPUPoolingDriver:
    """The pooling maps on the CPU; arrays are NumPy, head-major float64 ``[heads, num_nodes]``.
    Same interface as :class:`~.pooling_cuda.CUDAPoolingDriver`."""

    xp = np

    def upload(self, arrays):
        return arrays

    def softmax(self, ptr, x):
        out = np.zeros_like(x)
        with KERNEL_LOCK:
            _pick(softmax_forward, softmax_forward_serial, x.size, PARALLEL_MIN_MAPS)(ptr, x, out)
        return out

    def softmax_vjp(self, ptr, a, grad_a):
        grad_x = np.zeros_like(a)
        with KERNEL_LOCK:
            _pick(softmax_backward, softmax_backward_serial, a.size, PARALLEL_MIN_MAPS)(ptr, a, grad_a, grad_x)
        return grad_x

    def sparsemax(self, ptr, x, gamma):
        out = np.zeros_like(x)
        with KERNEL_LOCK:
            _pick(sparsemax_forward, sparsemax_forward_serial, x.size, PARALLEL_MIN_MAPS)(ptr, x, gamma, out)
        return out

    def sparsemax_vjp(self, ptr, x, a, gamma, grad_a):
        grad_x = np.zeros_like(x)
        grad_gamma = np.zeros((x.shape[0], ptr.shape[0] - 1))
        kernel = _pick(sparsemax_backward, sparsemax_backward_serial, x.size, PARALLEL_MIN_MAPS)
        with KERNEL_LOCK:
            kernel(ptr, x, a, gamma, grad_a, grad_x, grad_gamma)
        return grad_x, grad_gamma

    @staticmethod
    def _work(heads, num_nodes, num_edges):
        ints = [np.empty((heads, num_nodes), np.int64) for _ in FUSED_WORK_INT_FIELDS]
        return FusedWork(
            *ints, np.empty((heads, num_edges)), np.empty((heads, num_nodes)), np.empty((heads, num_nodes))
        )

    def fused(self, graph, s, lam, gamma, with_sparsemax):
        heads, num_nodes = s.shape
        graphs = graph.ptr.shape[0] - 1
        work = self._work(heads, num_nodes, graph.edge_u.shape[0])
        fused = np.zeros_like(s)
        label = np.zeros((heads, num_nodes), np.int64)
        bnd = np.zeros((heads, num_nodes), np.int64)
        weights = np.zeros_like(s) if with_sparsemax else np.zeros((0, 0))
        status = np.zeros((heads, graphs), np.int64)
        residual = np.zeros((heads, graphs))
        kernel = _pick(fused_forward, fused_forward_serial, s.size, PARALLEL_MIN_FUSED)
        with KERNEL_LOCK:
            kernel(graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, bool(with_sparsemax))
        return fused, label, bnd, weights, status, residual

    def fused_vjp(self, ptr, fused, weights, label, bnd, gamma, grad_out):
        heads, num_nodes = fused.shape
        graphs = ptr.shape[0] - 1
        work = self._work(heads, num_nodes, 0)
        grad_fused = np.zeros_like(fused) if weights.shape[0] > 0 else np.zeros((0, 0))
        grad_s = np.zeros_like(fused)
        grad_lam = np.zeros((heads, graphs))
        grad_gamma = np.zeros((heads, graphs))
        kernel = _pick(fused_backward, fused_backward_serial, fused.size, PARALLEL_MIN_MAPS)
        with KERNEL_LOCK:
            kernel(ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma)
        return grad_s, grad_lam, grad_gamma

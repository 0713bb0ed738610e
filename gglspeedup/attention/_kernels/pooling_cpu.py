"""The CPU pooling kernels: ``@njit(parallel=True)`` loops over (head, graph) problems.

Each kernel runs one problem per ``prange`` iteration through the steps of :mod:`.pooling_steps`
(the CUDA kernels in :mod:`.pooling_cuda` run the same steps, one thread per problem). Problems
touch disjoint slices of every array, so they need no synchronisation; Numba's threads release the
GIL, so no process pool is needed. Per-problem results (status, residual, ``dL/dlam`` and
``dL/dgamma`` shares) land in ``[heads, graphs]`` arrays that the host sums.

The problem bodies live in :mod:`.sparsemax` and :mod:`.fused_lasso`; Numba's on-disk cache checks
only this file, so a change there comes with a line here (last: sparsemax shifted by its largest
score, so its support never empties).
"""

from __future__ import annotations

import types

from numba import njit, prange

from ..._parallel import lock_for, pays
from . import pooling_steps as steps
from .pooling_driver import PoolingDriver

__all__ = [
    "CPUPoolingDriver",
    "softmax_forward",
    "softmax_backward",
    "sparsemax_forward",
    "sparsemax_backward",
    "fused_forward",
    "fused_backward",
]


def _parallel_and_serial(loop):
    """``(parallel, serial)``: ``loop``, a ``prange`` over (head, graph) problems, compiled with and
    without ``parallel=True`` (entering a parallel region costs a scheduler time slice on a busy
    machine, more than a small batch's whole work). The serial one compiles a copy named
    ``<name>_serial``: Numba's cache tells functions apart by name, not by their flags."""
    serial = types.FunctionType(loop.__code__, loop.__globals__, f"{loop.__name__}_serial", loop.__defaults__)
    serial.__qualname__ = f"{loop.__qualname__}_serial"
    return njit(parallel=True, cache=True, nogil=True)(loop), njit(cache=True, nogil=True)(serial)


def softmax_forward(ptr, x, out):
    for p in prange(x.shape[0] * (ptr.shape[0] - 1)):
        steps.softmax_forward_step(p, ptr, x, out)


def softmax_backward(ptr, a, grad_a, grad_x):
    for p in prange(a.shape[0] * (ptr.shape[0] - 1)):
        steps.softmax_backward_step(p, ptr, a, grad_a, grad_x)


def sparsemax_forward(ptr, x, gamma, out):
    for p in prange(x.shape[0] * (ptr.shape[0] - 1)):
        steps.sparsemax_forward_step(p, ptr, x, gamma, out)


def sparsemax_backward(ptr, x, a, gamma, grad_a, grad_x, grad_gamma):
    for p in prange(x.shape[0] * (ptr.shape[0] - 1)):
        steps.sparsemax_backward_step(p, ptr, x, a, gamma, grad_a, grad_x, grad_gamma)


def fused_forward(graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax):
    """The fused lasso of every problem (``fused``, ``label``, ``bnd``, ``status``, ``residual``)
    and, when ``with_sparsemax``, ``weights = sparsemax(fused / gamma)``."""
    for p in prange(s.shape[0] * (graph.ptr.shape[0] - 1)):
        steps.fused_forward_step(
            p, graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax
        )


def fused_backward(ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma):
    """Backward of :func:`fused_forward`. With sparsemax (``weights.shape[0] > 0``) ``grad_out``
    is ``dL/dweights``, turned into ``dL/dfused`` in ``grad_fused`` first; otherwise it is
    ``dL/dfused`` already."""
    for p in prange(fused.shape[0] * (ptr.shape[0] - 1)):
        steps.fused_backward_step(
            p, ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused, grad_s, grad_lam, grad_gamma
        )


# Each kernel twice, parallel over problems and serial, each with its own cache slot.
softmax_forward, softmax_forward_serial = _parallel_and_serial(softmax_forward)
softmax_backward, softmax_backward_serial = _parallel_and_serial(softmax_backward)
sparsemax_forward, sparsemax_forward_serial = _parallel_and_serial(sparsemax_forward)
sparsemax_backward, sparsemax_backward_serial = _parallel_and_serial(sparsemax_backward)
fused_forward, fused_forward_serial = _parallel_and_serial(fused_forward)
fused_backward, fused_backward_serial = _parallel_and_serial(fused_backward)


# name -> (parallel kernel, serial kernel)
_KERNELS = {
    "softmax": (softmax_forward, softmax_forward_serial),
    "softmax_vjp": (softmax_backward, softmax_backward_serial),
    "sparsemax": (sparsemax_forward, sparsemax_forward_serial),
    "sparsemax_vjp": (sparsemax_backward, sparsemax_backward_serial),
    "fused": (fused_forward, fused_forward_serial),
    "fused_vjp": (fused_backward, fused_backward_serial),
}


class CPUPoolingDriver(PoolingDriver):
    """The pooling maps on the CPU; arrays are NumPy, head-major float64 ``[heads, num_nodes]``.
    Same interface as :class:`~.pooling_cuda.CUDAPoolingDriver`."""

    def _run(self, name, problems, size, *args):
        kernel, serial = _KERNELS[name]
        # The parallel kernel from the policy's node x head count (gglspeedup._parallel; the fused
        # lasso's forward has its own, lower one), under the kernel lock.
        parallel = pays(size, "fused" if name == "fused" else "pooling")
        with lock_for(parallel):
            (kernel if parallel else serial)(*args)

"""The CPU pooling kernels: ``@njit(parallel=True)`` loops over (head, graph) problems.

Each kernel runs one problem per ``prange`` iteration through the steps of :mod:`.steps` (the
CUDA kernels in :mod:`.cuda` run the same steps, one thread per problem). Problems
touch disjoint slices of every array, so they need no synchronisation; Numba's threads release the
GIL, so no process pool is needed. Per-problem results (status, residual, ``dL/dlam`` and
``dL/dgamma`` shares) land in ``[heads, graphs]`` arrays that the host sums.

The problem bodies live in :mod:`.sparsemax` and :mod:`.fused_lasso`; Numba's on-disk cache checks
only this file, so a change there comes with a line here (last: sparsemax shifted by its largest
score, so its support never empties).

:class:`CPUPoolingDriver` also runs the attention-pooling layer's CPU path (:meth:`~CPUPoolingDriver.layer_forward`,
:meth:`~CPUPoolingDriver.layer_backward`: the kernels of :mod:`.layer`, one call per direction).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import prange

from ...._parallel import lock_for, parallel_and_serial, pays
from . import layer, steps
from .driver import PoolingDriverBase, fused_work

__all__ = [
    "CPUPoolingDriver",
    "LayerState",
    "softmax_forward",
    "softmax_backward",
    "sparsemax_forward",
    "sparsemax_backward",
    "fused_forward",
    "fused_backward",
]


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
softmax_forward, softmax_forward_serial = parallel_and_serial(softmax_forward)
softmax_backward, softmax_backward_serial = parallel_and_serial(softmax_backward)
sparsemax_forward, sparsemax_forward_serial = parallel_and_serial(sparsemax_forward)
sparsemax_backward, sparsemax_backward_serial = parallel_and_serial(sparsemax_backward)
fused_forward, fused_forward_serial = parallel_and_serial(fused_forward)
fused_backward, fused_backward_serial = parallel_and_serial(fused_backward)


# name -> (parallel kernel, serial kernel)
_KERNELS = {
    "softmax": (softmax_forward, softmax_forward_serial),
    "softmax_vjp": (softmax_backward, softmax_backward_serial),
    "sparsemax": (sparsemax_forward, sparsemax_forward_serial),
    "sparsemax_vjp": (sparsemax_backward, sparsemax_backward_serial),
    "fused": (fused_forward, fused_forward_serial),
    "fused_vjp": (fused_backward, fused_backward_serial),
}


# the layer kernel's map, by the map's name
_LAYER_KINDS = {"softmax": layer.SOFTMAX, "sparsemax": layer.SPARSEMAX, "gfusedmax": layer.GFUSEDMAX}
_NO_FUSED = (np.zeros((0, 0)), np.zeros((0, 0), np.int64), np.zeros((0, 0), np.int64))
# softmax's and sparsemax's certificate: nothing to certify (read-only: never written)
_CERTIFIED, _CERTIFIED_RESIDUAL = np.zeros((0, 0), np.int64), np.zeros((0, 0))
_CERTIFIED.flags.writeable = _CERTIFIED_RESIDUAL.flags.writeable = False


def _bias(mapping, bias, scores):
    """The plain kernels' ``bias`` argument: ``bias``, or an empty array of ``scores``' dtype (one
    Numba type per dtype: the kernel adds the bias in the scores' dtype)."""
    if bias is None:
        return np.zeros(0, scores.dtype)
    if mapping != "softmax" or bias.dtype != scores.dtype:  # a caller's bug: the kernel would ignore it
        raise ValueError(f"a bias is folded into the softmax layer's kernel only, in the scores' dtype {scores.dtype}")
    return bias


class LayerState(NamedTuple):
    """What the layer's backward reads of its forward: float64 ``[heads, N]`` standardised scores
    ``z``, the fused values, int64 group labels and boundary counts (``(0, 0)`` arrays unless
    gfusedmax), the weights, and float64 ``[heads, B]`` per-graph ``std`` (``spread``)."""

    z: np.ndarray
    fused: np.ndarray
    label: np.ndarray
    bnd: np.ndarray
    weights: np.ndarray
    spread: np.ndarray


class CPUPoolingDriver(PoolingDriverBase):
    """The pooling maps on the CPU; arrays are NumPy, head-major float64 ``[heads, num_nodes]``.
    Same interface as :class:`~.cuda.CUDAPoolingDriver`, plus the layer's one-kernel path."""

    def _run(self, name, problems, size, *args):
        kernel, serial = _KERNELS[name]
        # The parallel kernel from the policy's node x head count (gglspeedup._parallel; the fused
        # lasso's forward has its own, lower one), under the kernel lock.
        parallel = pays(size, "fused" if name == "fused" else "pooling")
        with lock_for(parallel):
            (kernel if parallel else serial)(*args)

    def layer_forward(self, mapping, norm, graph, scores, proj, p0, bounds, lam, gamma, out, bias=None):
        """The layer's forward, every (head, graph) problem in one kernel call: standardise (when
        ``norm``), map (``mapping``: ``"softmax"``, ``"sparsemax"`` or ``"gfusedmax"``) and pool.

        ``graph``: the batch's :class:`~.structure.BatchArrays`; ``scores`` ``[N, >= heads]`` (any
        float dtype, row major: the first ``heads`` columns are the scores); ``proj`` ``[N, ...]``
        whose columns ``p0 + bounds[h] .. p0 + bounds[h + 1]`` head ``h`` pools (it may be
        ``scores`` itself); ``lam`` / ``gamma`` float64 ``(heads,)`` (read where the map has
        them); ``out`` ``(B, C)``, written; ``bias`` (softmax only) None, or ``scores``' dtype
        ``(p0 + C,)``: the bias of ``scores`` (which is then ``proj``) column by column, added
        where the kernel reads them. Returns ``(state, status, residual)``: the
        :class:`LayerState` the backward needs and the fused lasso's int64 / float64 ``[heads, B]``
        certificate status (0: certified) and residual (``(0, 0)`` for softmax and sparsemax, whose
        kernels leave the fused lasso out). Softmax's ``status`` is None when a graph's sum of
        scores was not finite: a score may not be (the caller checks them; this driver does not
        scan them before the kernel).
        """
        heads, graphs = bounds.shape[0] - 1, graph.ptr.shape[0] - 1
        nodes = scores.shape[0]
        z, weights, spread = np.empty((heads, nodes)), np.empty((heads, nodes)), np.empty((heads, graphs))
        bias = _bias(mapping, bias, scores)
        if mapping != "gfusedmax":  # the kernel without the fused lasso: no status, no scratch
            parallel = pays(z.size, "pooling")
            with lock_for(parallel):
                finite = layer.plain_forward_flat(
                    parallel, _LAYER_KINDS[mapping], norm, graph.ptr, scores, 0, proj, p0, bounds, gamma, bias, z,
                    weights, spread, out,
                )  # fmt: skip
            state = LayerState(z, *_NO_FUSED, weights, spread)
            return state, (_CERTIFIED if finite else None), _CERTIFIED_RESIDUAL
        status, residual = np.zeros((heads, graphs), np.int64), np.empty((heads, graphs))
        work = fused_work(np, heads, nodes, graph.edge_u.shape[0])
        fused = (np.empty((heads, nodes)), np.empty((heads, nodes), np.int64), np.empty((heads, nodes), np.int64))
        parallel = pays(z.size, "fused")
        with lock_for(parallel):
            layer.forward_flat(
                parallel, layer.GFUSEDMAX, norm, *graph, *work, scores, 0, proj, p0, bounds, lam, gamma, z, *fused,
                weights, spread, out, status, residual,
            )  # fmt: skip
        return LayerState(z, *fused, weights, spread), status, residual

    def layer_backward(
        self, mapping, norm, ptr, proj, p0, bounds, gamma, grad_out, state, grad_scores, grad_proj, bias=None
    ):
        """The layer's backward from ``dL/dout`` ``(B, C)``, in one kernel call: writes
        ``grad_scores`` (its first ``heads`` columns) and ``grad_proj`` (the pooled columns, from
        ``p0``; they may be one array) and returns float64 ``[heads, B]`` ``(dL/dlam, dL/dgamma)``
        per problem (``dL/dlam`` None unless gfusedmax). ``proj``, ``p0``, ``bounds``, ``gamma`` and
        ``bias`` as the forward had them; ``state`` its :class:`LayerState`."""
        heads, nodes = state.z.shape
        graphs = ptr.shape[0] - 1
        grad_gamma, gw, gf = np.empty((heads, graphs)), np.empty((heads, nodes)), np.empty((heads, nodes))
        bias = _bias(mapping, bias, proj)
        if mapping != "gfusedmax":
            parallel = pays(nodes * heads, "pooling")
            with lock_for(parallel):
                layer.plain_backward_flat(
                    parallel, _LAYER_KINDS[mapping], norm, ptr, proj, p0, bounds, gamma, bias, grad_out, state.z,
                    state.weights, state.spread, grad_scores, 0, grad_proj, gw, gf, grad_gamma,
                )  # fmt: skip
            return None, grad_gamma
        grad_lam = np.empty((heads, graphs))
        work = fused_work(np, heads, nodes, 0)
        parallel = pays(nodes * heads, "fused")
        with lock_for(parallel):
            layer.backward_flat(
                parallel, layer.GFUSEDMAX, norm, ptr, *work, proj, p0, bounds, gamma, grad_out, *state, grad_scores,
                0, grad_proj, gw, gf, grad_lam, grad_gamma,
            )  # fmt: skip
        return grad_lam, grad_gamma

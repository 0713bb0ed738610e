"""The whole attention-pooling layer after its two linear maps, as one kernel per direction.

Per (graph ``g``, head ``h``) problem, forward: the head's raw scores ``scores[:, h]`` of the
graph, standardised (``z = (s - mean) / (std + 1e-7)``, unbiased ``std``, ``0`` where it is 0)
when ``norm``; the weights ``w = map(z)`` (softmax, sparsemax, or the exact fused lasso then
sparsemax: the bodies of :mod:`.sparsemax` and :mod:`.fused_lasso`); and the pooled output
``out[g, c] = sum_i w_i proj[i, c]`` for the head's columns ``bounds[h] .. bounds[h + 1]``.
Backward, from ``dL/dout``: ``dL/dproj[i, c] = w_i dL/dout[g, c]``, ``dL/dw_i = sum_c proj[i, c]
dL/dout[g, c]``, the map's exact vector-Jacobian product (with ``dL/dlam``, ``dL/dgamma``), and
the standardisation's::

    dL/ds_i = (gz_i - mean(gz)) / (std + eps) - [std > 0] z_i sum_j gz_j z_j / ((n - 1) std)

``scores`` ``[N, heads]`` and ``proj`` ``[N, C]`` are read where they lie (any float dtype, row
major, as a linear layer returns them); the arithmetic is float64. Problems write disjoint slices
(their graph's rows, their head's row or columns), so they run in parallel with no
synchronisation. One body per direction serves every kernel; the CPU kernels are below.
Softmax and sparsemax layers run their own kernels (:func:`plain_forward_problem`): the same
standardisation, map and pooling steps without the fused lasso, whose mere presence in a
kernel cost about 15 us a call on a small batch.

The problem bodies live in :mod:`.sparsemax` and :mod:`.fused_lasso`; Numba's on-disk cache checks
only this file, so a change there comes with a line here (last: the softmax layer's problem in
fewer passes, :mod:`.softmax_layer`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ...._parallel import parallel_and_serial
from ...._threading import prefer_tbb
from .fused_lasso import FusedWork, fused_lasso_problem, fused_lasso_vjp_problem
from .softmax_layer import softmax_backward_problem, softmax_forward_problem
from .sparsemax import softmax_problem, softmax_vjp_problem, sparsemax_problem, sparsemax_vjp_problem
from .structure import BatchArrays

__all__ = [
    "SOFTMAX",
    "SPARSEMAX",
    "GFUSEDMAX",
    "EPS",
    "forward_flat",
    "backward_flat",
    "plain_forward_flat",
    "plain_backward_flat",
]

prefer_tbb()  # before any parallel launch: see gglspeedup._threading

SOFTMAX = 0
SPARSEMAX = 1
GFUSEDMAX = 2
EPS = 1e-7  # attpool2's standardisation: (s - mean) / (std + 1e-7)


@register_jitable
def _standardize(g, h, norm, ptr, scores, s0, z, spread):
    """``z[h, graph g] =`` the graph's scores of head ``h``, standardised when ``norm`` (``spread[h,
    g]`` keeps ``std`` for the backward)."""
    n0 = ptr[g]
    n1 = ptr[g + 1]
    count = n1 - n0
    if norm:
        total = 0.0
        for i in range(n0, n1):
            total += scores[i, s0 + h]
        mean = total / max(count, 1)
        squares = 0.0
        for i in range(n0, n1):
            centred = scores[i, s0 + h] - mean
            z[h, i] = centred
            squares += centred * centred
        var = squares / max(count - 1, 1)
        std = math.sqrt(var) if var > 0.0 else 0.0
        spread[h, g] = std
        scale = 1.0 / (std + EPS)
        for i in range(n0, n1):
            z[h, i] = z[h, i] * scale
    else:
        for i in range(n0, n1):
            z[h, i] = scores[i, s0 + h]


@register_jitable
def _pool(g, h, ptr, proj, p0, bounds, weights, out):
    """``out[g, c] = sum_i weights[h, i] proj[i, p0 + c]`` over head ``h``'s columns."""
    n0 = ptr[g]
    n1 = ptr[g + 1]
    for c in range(bounds[h], bounds[h + 1]):
        acc = 0.0
        for i in range(n0, n1):
            acc += weights[h, i] * proj[i, p0 + c]
        out[g, c] = acc


@register_jitable
def layer_forward_problem(
    g, h, kind, norm, graph, scores, s0, proj, p0, bounds, lam, gamma, work, z, fused, label, bnd, weights, spread,
    out,
):  # fmt: skip
    """Forward of graph ``g``, head ``h``; returns ``(status, residual)`` of the fused lasso (0s
    for the other maps). ``spread[h, g]`` keeps ``std`` for the backward."""
    ptr = graph.ptr
    _standardize(g, h, norm, ptr, scores, s0, z, spread)
    status = 0
    residual = 0.0
    if kind == SOFTMAX:
        softmax_problem(g, h, ptr, z, weights)
    elif kind == SPARSEMAX:
        sparsemax_problem(g, h, ptr, z, gamma[h], weights)
    else:
        status, residual = fused_lasso_problem(g, h, graph, z, lam[h], work, fused, label, bnd)
        if status == 0:
            sparsemax_problem(g, h, ptr, fused, gamma[h], weights)
    _pool(g, h, ptr, proj, p0, bounds, weights, out)
    return status, residual


@register_jitable
def plain_forward_problem(g, h, kind, norm, ptr, scores, s0, proj, p0, bounds, gamma, bias, z, weights, spread, out):
    """:func:`layer_forward_problem` of softmax (``kind`` SOFTMAX) or sparsemax, the same steps
    without the fused lasso: a kernel that holds the fused lasso's code pays about 15 us a call on
    a small batch even when it never runs it (measured on my-test: 17 us against 2 us). Softmax
    adds ``bias`` (empty: none) where it reads and returns the scores' sum
    (:func:`.softmax_layer.softmax_forward_problem`); sparsemax takes no bias and returns 0."""
    if kind == SOFTMAX:  # the same steps in fewer passes (:mod:`.softmax_layer`)
        return softmax_forward_problem(g, h, norm, ptr, scores, s0, proj, p0, bounds, bias, z, weights, spread, out)
    _standardize(g, h, norm, ptr, scores, s0, z, spread)
    sparsemax_problem(g, h, ptr, z, gamma[h], weights)
    _pool(g, h, ptr, proj, p0, bounds, weights, out)
    return 0.0


@register_jitable
def _pool_backward(g, h, ptr, proj, p0, bounds, weights, grad_out, gw, grad_proj):
    """``dL/dproj`` of head ``h``'s columns and ``gw[h, i] = dL/dw_i``."""
    n0 = ptr[g]
    n1 = ptr[g + 1]
    c0 = bounds[h]
    c1 = bounds[h + 1]
    for i in range(n0, n1):
        acc = 0.0
        for c in range(c0, c1):
            acc += proj[i, p0 + c] * grad_out[g, c]
            grad_proj[i, p0 + c] = weights[h, i] * grad_out[g, c]
        gw[h, i] = acc


@register_jitable
def _standardize_backward(g, h, norm, ptr, z, spread, gf, grad_scores, s0):
    """``dL/dscores`` of the graph's head ``h`` from ``gf[h] = dL/dz``."""
    n0 = ptr[g]
    n1 = ptr[g + 1]
    if not norm:
        for i in range(n0, n1):
            grad_scores[i, s0 + h] = gf[h, i]
        return
    count = n1 - n0
    std = spread[h, g]
    mean = 0.0
    dot = 0.0
    for i in range(n0, n1):
        mean += gf[h, i]
        dot += gf[h, i] * z[h, i]
    mean = mean / max(count, 1)
    inverse = 1.0 / (std + EPS)
    scale = dot / ((count - 1) * std) if std > 0.0 else 0.0
    for i in range(n0, n1):
        grad_scores[i, s0 + h] = (gf[h, i] - mean) * inverse - scale * z[h, i]


@register_jitable
def layer_backward_problem(
    g, h, kind, norm, ptr, proj, p0, bounds, gamma, z, fused, label, bnd, weights, spread, grad_out, work, gw, gf,
    grad_scores, s0, grad_proj,
):  # fmt: skip
    """Backward of graph ``g``, head ``h`` (``gw``, ``gf``: ``[heads, N]`` scratch); writes the
    graph's rows of ``grad_scores[:, h]`` and of the head's columns of ``grad_proj``; returns
    ``(dL/dlam, dL/dgamma)`` of this problem."""
    _pool_backward(g, h, ptr, proj, p0, bounds, weights, grad_out, gw, grad_proj)
    grad_lam = 0.0
    grad_gamma = 0.0
    if kind == SOFTMAX:
        softmax_vjp_problem(g, h, ptr, weights, gw, gf)
    elif kind == SPARSEMAX:
        grad_gamma = sparsemax_vjp_problem(g, h, ptr, z, weights, gamma[h], gw, gf)
    else:
        grad_gamma = sparsemax_vjp_problem(g, h, ptr, fused, weights, gamma[h], gw, gf)
        grad_lam = fused_lasso_vjp_problem(g, h, ptr, label, bnd, gf, work, gw)
        for i in range(ptr[g], ptr[g + 1]):
            gf[h, i] = gw[h, i]
    _standardize_backward(g, h, norm, ptr, z, spread, gf, grad_scores, s0)
    return grad_lam, grad_gamma


@register_jitable
def plain_backward_problem(
    g, h, kind, norm, ptr, proj, p0, bounds, gamma, bias, z, weights, spread, grad_out, gw, gf, grad_scores, s0,
    grad_proj,
):  # fmt: skip
    """:func:`layer_backward_problem` of softmax or sparsemax (see :func:`plain_forward_problem`);
    returns ``dL/dgamma`` of this problem."""
    if kind == SOFTMAX:
        softmax_backward_problem(
            g, h, norm, ptr, proj, p0, bounds, bias, z, weights, spread, grad_out, gw, gf, grad_scores, s0, grad_proj
        )
        return 0.0
    _pool_backward(g, h, ptr, proj, p0, bounds, weights, grad_out, gw, grad_proj)
    grad_gamma = sparsemax_vjp_problem(g, h, ptr, z, weights, gamma[h], gw, gf)
    _standardize_backward(g, h, norm, ptr, z, spread, gf, grad_scores, s0)
    return grad_gamma


# The arguments of one direction, as the kernels pass them around: ``inputs`` is ``(scores, s0,
# proj, p0, bounds, lam, gamma)`` forward and ``(proj, p0, bounds, gamma, grad_out)`` backward;
# ``state`` is ``(z, fused, label, bnd, weights, spread)``; ``outputs`` is ``(out, status,
# residual)`` forward and ``(grad_scores, s0, grad_proj, gw, gf, grad_lam, grad_gamma)`` backward.
@register_jitable
def _forward_step(p, kind, norm, graph, work, inputs, state, outputs):
    scores, s0, proj, p0, bounds, lam, gamma = inputs
    z, fused, label, bnd, weights, spread = state
    out, status, residual = outputs
    graphs = graph.ptr.shape[0] - 1
    h = p // graphs
    g = p % graphs
    status[h, g], residual[h, g] = layer_forward_problem(
        g, h, kind, norm, graph, scores, s0, proj, p0, bounds, lam, gamma, work, z, fused, label, bnd, weights,
        spread, out,
    )  # fmt: skip


@register_jitable
def _backward_step(p, kind, norm, ptr, work, inputs, state, outputs):
    proj, p0, bounds, gamma, grad_out = inputs
    z, fused, label, bnd, weights, spread = state
    grad_scores, s0, grad_proj, gw, gf, grad_lam, grad_gamma = outputs
    graphs = ptr.shape[0] - 1
    h = p // graphs
    g = p % graphs
    grad_lam[h, g], grad_gamma[h, g] = layer_backward_problem(
        g, h, kind, norm, ptr, proj, p0, bounds, gamma, z, fused, label, bnd, weights, spread, grad_out, work, gw,
        gf, grad_scores, s0, grad_proj,
    )  # fmt: skip


def layer_forward(kind, norm, graph, work, inputs, state, outputs):
    """Every (head, graph) problem of the layer's forward (``prange``; a serial twin below)."""
    for p in prange(state[0].shape[0] * (graph.ptr.shape[0] - 1)):
        _forward_step(p, kind, norm, graph, work, inputs, state, outputs)


def layer_backward(kind, norm, ptr, work, inputs, state, outputs):
    """Every (head, graph) problem of the layer's backward (``prange``; a serial twin below)."""
    for p in prange(state[0].shape[0] * (ptr.shape[0] - 1)):
        _backward_step(p, kind, norm, ptr, work, inputs, state, outputs)


layer_forward, layer_forward_serial = parallel_and_serial(layer_forward)
layer_backward, layer_backward_serial = parallel_and_serial(layer_backward)


# The entry points take every array flat and build the records inside: Numba types a record of
# mixed arrays passed from Python slowly (about 0.1 ms per call, more than a small batch's whole
# work), flat arrays in about a microsecond. They are not cached on disk (the kernels they call
# are): an entry point calling a parallel kernel, loaded from a cache another process wrote,
# crashed the process (a segmentation fault in the float32 layer, seen twice in CI on two test
# workers; the same cache with only this entry point's file removed ran). Compiled per process
# they never did; compiling both links the cached kernels: the first forward and backward of a
# process take about 4 s more on 2 cores.
@njit(nogil=True)
def forward_flat(
    parallel, kind, norm, ptr, edge_ptr, edge_u, edge_v, adj_ptr, adj_nbr, adj_eid, adj_dir, order0, comp_ptr,
    graph_comp, level, cursor, queued, ring, queue, order, seg, mark, stack_a, stack_b, flow, exc, acc, scores, s0,
    proj, p0, bounds, lam, gamma, z, fused, label, bnd, weights, spread, out, status, residual,
):  # fmt: skip
    """:func:`layer_forward` (``parallel``) or its serial twin, on flat arrays: the batch's
    :class:`BatchArrays` fields, the :class:`FusedWork` fields, then the rest."""
    graph = BatchArrays(ptr, edge_ptr, edge_u, edge_v, adj_ptr, adj_nbr, adj_eid, adj_dir, order0, comp_ptr, graph_comp)
    work = FusedWork(level, cursor, queued, ring, queue, order, seg, mark, stack_a, stack_b, flow, exc, acc)
    inputs = (scores, s0, proj, p0, bounds, lam, gamma)
    state = (z, fused, label, bnd, weights, spread)
    outputs = (out, status, residual)
    if parallel:
        layer_forward(kind, norm, graph, work, inputs, state, outputs)
    else:
        layer_forward_serial(kind, norm, graph, work, inputs, state, outputs)


@njit(nogil=True)  # not cached: see forward_flat
def backward_flat(
    parallel, kind, norm, ptr, level, cursor, queued, ring, queue, order, seg, mark, stack_a, stack_b, flow, exc,
    acc, proj, p0, bounds, gamma, grad_out, z, fused, label, bnd, weights, spread, grad_scores, s0, grad_proj, gw,
    gf, grad_lam, grad_gamma,
):  # fmt: skip
    """:func:`layer_backward` (``parallel``) or its serial twin, on flat arrays (the
    :class:`FusedWork` fields first)."""
    work = FusedWork(level, cursor, queued, ring, queue, order, seg, mark, stack_a, stack_b, flow, exc, acc)
    inputs = (proj, p0, bounds, gamma, grad_out)
    state = (z, fused, label, bnd, weights, spread)
    outputs = (grad_scores, s0, grad_proj, gw, gf, grad_lam, grad_gamma)
    if parallel:
        layer_backward(kind, norm, ptr, work, inputs, state, outputs)
    else:
        layer_backward_serial(kind, norm, ptr, work, inputs, state, outputs)


# The softmax and sparsemax layers' kernels (:func:`plain_forward_problem`): ``inputs`` is
# ``(scores, s0, proj, p0, bounds, gamma, bias)`` forward and ``(proj, p0, bounds, gamma, bias,
# grad_out)`` backward, ``state`` ``(z, weights, spread)``, ``outputs`` ``(out, sums)`` forward and
# ``(grad_scores, s0, grad_proj, gw, gf, grad_gamma)`` backward.
@register_jitable
def _plain_forward_step(p, kind, norm, ptr, inputs, state, outputs):
    scores, s0, proj, p0, bounds, gamma, bias = inputs
    z, weights, spread = state
    out, sums = outputs
    graphs = ptr.shape[0] - 1
    h = p // graphs
    g = p % graphs
    sums[h, g] = plain_forward_problem(
        g, h, kind, norm, ptr, scores, s0, proj, p0, bounds, gamma, bias, z, weights, spread, out
    )


@register_jitable
def _plain_backward_step(p, kind, norm, ptr, inputs, state, outputs):
    proj, p0, bounds, gamma, bias, grad_out = inputs
    z, weights, spread = state
    grad_scores, s0, grad_proj, gw, gf, grad_gamma = outputs
    graphs = ptr.shape[0] - 1
    h = p // graphs
    g = p % graphs
    grad_gamma[h, g] = plain_backward_problem(
        g, h, kind, norm, ptr, proj, p0, bounds, gamma, bias, z, weights, spread, grad_out, gw, gf, grad_scores, s0,
        grad_proj,
    )  # fmt: skip


def plain_forward(kind, norm, ptr, inputs, state, outputs):
    """Every (head, graph) problem of a softmax / sparsemax layer's forward (``prange``; a serial
    twin below)."""
    for p in prange(state[0].shape[0] * (ptr.shape[0] - 1)):
        _plain_forward_step(p, kind, norm, ptr, inputs, state, outputs)


def plain_backward(kind, norm, ptr, inputs, state, outputs):
    """Every (head, graph) problem of a softmax / sparsemax layer's backward (``prange``; a serial
    twin below)."""
    for p in prange(state[0].shape[0] * (ptr.shape[0] - 1)):
        _plain_backward_step(p, kind, norm, ptr, inputs, state, outputs)


plain_forward, plain_forward_serial = parallel_and_serial(plain_forward)
plain_backward, plain_backward_serial = parallel_and_serial(plain_backward)


@njit(nogil=True)  # not cached: see forward_flat
def plain_forward_flat(
    parallel, kind, norm, ptr, scores, s0, proj, p0, bounds, gamma, bias, z, weights, spread, out
):  # fmt: skip
    """:func:`plain_forward` (``parallel``) or its serial twin, on flat arrays; returns whether
    every (head, graph) problem's sum of scores was finite (always true for sparsemax)."""
    inputs = (scores, s0, proj, p0, bounds, gamma, bias)
    state = (z, weights, spread)
    sums = np.empty(spread.shape)
    if parallel:
        plain_forward(kind, norm, ptr, inputs, state, (out, sums))
    else:
        plain_forward_serial(kind, norm, ptr, inputs, state, (out, sums))
    for value in sums.ravel():
        if not math.isfinite(value):
            return False
    return True


@njit(nogil=True)  # not cached: see forward_flat
def plain_backward_flat(
    parallel, kind, norm, ptr, proj, p0, bounds, gamma, bias, grad_out, z, weights, spread, grad_scores, s0,
    grad_proj, gw, gf, grad_gamma,
):  # fmt: skip
    """:func:`plain_backward` (``parallel``) or its serial twin, on flat arrays."""
    inputs = (proj, p0, bounds, gamma, bias, grad_out)
    state = (z, weights, spread)
    outputs = (grad_scores, s0, grad_proj, gw, gf, grad_gamma)
    if parallel:
        plain_backward(kind, norm, ptr, inputs, state, outputs)
    else:
        plain_backward_serial(kind, norm, ptr, inputs, state, outputs)

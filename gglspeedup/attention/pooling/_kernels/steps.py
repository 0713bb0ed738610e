"""One step per (head, graph) problem of the pooling maps: what a CPU ``prange`` iteration
(:mod:`.cpu`) and a CUDA thread (:mod:`.cuda`) run for problem ``p``.

Problem ``p`` is graph ``p % graphs`` of head ``p // graphs``; each step runs the shared bodies of
:mod:`.sparsemax` and :mod:`.fused_lasso` and writes the problem's own slices (and its
``[heads, graphs]`` entry of status, residual, ``dL/dlam`` and ``dL/dgamma``), so both devices
compute the same bits.
"""

from __future__ import annotations

from numba.extending import register_jitable

from .fused_lasso import fused_lasso_problem, fused_lasso_vjp_problem
from .sparsemax import softmax_problem, softmax_vjp_problem, sparsemax_problem, sparsemax_vjp_problem

__all__ = [
    "softmax_forward_step",
    "softmax_backward_step",
    "sparsemax_forward_step",
    "sparsemax_backward_step",
    "fused_forward_step",
    "fused_backward_step",
]


@register_jitable
def softmax_forward_step(p, ptr, x, out):
    graphs = ptr.shape[0] - 1
    softmax_problem(p % graphs, p // graphs, ptr, x, out)


@register_jitable
def softmax_backward_step(p, ptr, a, grad_a, grad_x):
    graphs = ptr.shape[0] - 1
    softmax_vjp_problem(p % graphs, p // graphs, ptr, a, grad_a, grad_x)


@register_jitable
def sparsemax_forward_step(p, ptr, x, gamma, out):
    graphs = ptr.shape[0] - 1
    h = p // graphs
    sparsemax_problem(p % graphs, h, ptr, x, gamma[h], out)


@register_jitable
def sparsemax_backward_step(p, ptr, x, a, gamma, grad_a, grad_x, grad_gamma):
    graphs = ptr.shape[0] - 1
    h = p // graphs
    g = p % graphs
    grad_gamma[h, g] = sparsemax_vjp_problem(g, h, ptr, x, a, gamma[h], grad_a, grad_x)


@register_jitable
def fused_forward_step(p, graph, s, lam, gamma, work, fused, label, bnd, weights, status, residual, with_sparsemax):
    graphs = graph.ptr.shape[0] - 1
    h = p // graphs
    g = p % graphs
    code, left = fused_lasso_problem(g, h, graph, s, lam[h], work, fused, label, bnd)
    status[h, g] = code
    residual[h, g] = left
    if with_sparsemax and code == 0:
        sparsemax_problem(g, h, graph.ptr, fused, gamma[h], weights)


@register_jitable
def fused_backward_step(
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

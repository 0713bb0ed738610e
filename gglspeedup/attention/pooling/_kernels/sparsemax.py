"""Softmax and sparsemax of one (graph, head) problem, forward and backward, one body for both
targets.

Sparsemax (Martins & Astudillo 2016) of ``z = x / gamma`` is the Euclidean projection onto the
simplex, ``a_i = max(z_i - tau, 0)`` with ``sum a = 1``. ``tau`` is found without sorting (a CUDA
thread has no sort) by Michelot's algorithm: start from every node, ``tau = (sum z - 1) / k``
over the support, drop the support's nodes with ``z_i <= tau``, repeat until none drops. In exact
arithmetic ``tau`` only grows, so a dropped node never returns; the loop also never re-admits one
(rounding could otherwise make it cycle), ends after at most ``n`` passes (two or three in
practice) and yields the support ``{i : z_i > tau}`` the sorting method finds (a node exactly at
``tau`` gets weight 0 and is outside the support).

Sparsemax does not change when a constant is added to ``z``, so ``z = (x - max x) / gamma``: the
largest ``z`` is exactly 0 and ``tau <= -1 / k < 0`` at every pass, so a largest node always stays
in the support and ``k`` never reaches 0, whatever ``gamma`` (unshifted, ``x / gamma`` of 1e16 and
more rounds ``tau`` up to the largest ``z``, every node drops and ``(sum - 1) / k`` divides by
zero). A ``z`` that overflows to ``-inf`` (a tiny ``gamma``) is simply outside the support.

Backward: with ``S`` the support and ``q = 1_S (g - mean_S g)``, ``dL/dx = q / gamma`` and
``dL/dgamma = -sum q x / gamma^2`` (``gamma^2`` must be a normal float64: the callers refuse
``gamma < 2**-511``, see ``pooling._state.GAMMA_MIN``). Softmax: ``dL/dx = a (g - sum a g)``.

Arrays are head-major ``[heads, num_nodes]``; all arithmetic is float64 in a fixed order, so the
CPU and the CUDA simulator give the same bits.
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

__all__ = ["softmax_problem", "softmax_vjp_problem", "sparsemax_problem", "sparsemax_vjp_problem"]


@register_jitable
def softmax_problem(g, h, ptr, x, out):
    n0 = ptr[g]
    n1 = ptr[g + 1]
    if n1 == n0:
        return
    top = x[h, n0]
    for i in range(n0 + 1, n1):
        top = max(top, x[h, i])
    total = 0.0
    for i in range(n0, n1):
        value = math.exp(x[h, i] - top)
        out[h, i] = value
        total += value
    for i in range(n0, n1):
        out[h, i] = out[h, i] / total


@register_jitable
def softmax_vjp_problem(g, h, ptr, a, grad_a, grad_x):
    n0 = ptr[g]
    n1 = ptr[g + 1]
    dot = 0.0
    for i in range(n0, n1):
        dot += a[h, i] * grad_a[h, i]
    for i in range(n0, n1):
        grad_x[h, i] = a[h, i] * (grad_a[h, i] - dot)


@register_jitable
def sparsemax_problem(g, h, ptr, x, gamma, out):
    """``out[h, n0:n1] = sparsemax(x[h, n0:n1] / gamma)`` (``out`` marks the support while the
    threshold is found, so no scratch is needed)."""
    n0 = ptr[g]
    n1 = ptr[g + 1]
    if n1 == n0:
        return
    count = n1 - n0
    top = x[h, n0]
    for i in range(n0 + 1, n1):
        top = max(top, x[h, i])
    total = 0.0
    for i in range(n0, n1):
        out[h, i] = 1.0
        total += (x[h, i] - top) / gamma
    tau = (total - 1.0) / count
    while True:
        # drop the support's nodes at or below tau; the support only shrinks, so rounding in tau
        # can never make the loop cycle; z = 0 (a largest node) is never dropped, as tau < 0
        kept = 0
        kept_total = 0.0
        for i in range(n0, n1):
            if out[h, i] > 0.0:
                z = (x[h, i] - top) / gamma
                if z > tau:
                    kept += 1
                    kept_total += z
                else:
                    out[h, i] = 0.0
        if kept == count:
            break
        count = kept
        tau = (kept_total - 1.0) / count
    for i in range(n0, n1):
        if out[h, i] > 0.0:
            out[h, i] = (x[h, i] - top) / gamma - tau


@register_jitable
def sparsemax_vjp_problem(g, h, ptr, x, a, gamma, grad_a, grad_x):
    """``grad_x = J^T grad_a`` (support-set projection, divided by ``gamma``); returns
    ``dL/dgamma``."""
    n0 = ptr[g]
    n1 = ptr[g + 1]
    support = 0
    total = 0.0
    for i in range(n0, n1):
        if a[h, i] > 0.0:
            support += 1
            total += grad_a[h, i]
    mean = total / support if support > 0 else 0.0
    grad_gamma = 0.0
    for i in range(n0, n1):
        if a[h, i] > 0.0:
            q = grad_a[h, i] - mean
            grad_x[h, i] = q / gamma
            grad_gamma -= q * x[h, i]
        else:
            grad_x[h, i] = 0.0
    return grad_gamma / (gamma * gamma)

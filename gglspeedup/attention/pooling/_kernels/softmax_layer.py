"""The softmax layer's (graph, head) problem in fewer passes over the nodes, the same bits.

:func:`~.layer.plain_forward_problem` runs standardisation, softmax and pooling as three bodies,
ten passes over a graph's nodes (sum, centre, scale; max, exp, divide; one per pooled column);
:func:`softmax_forward_problem` runs four, and :func:`softmax_backward_problem` three instead of
six. Every value is the one the separate bodies compute, with its sums in the same order:

- the largest standardised score is found while centring: ``z_i = round(c_i * scale)`` with
  ``scale > 0`` is non-decreasing in ``c_i``, so ``max_i z_i = round(max_i c_i * scale)`` exactly
  (at most the sign of a zero differs, and ``exp(z - top)`` does not see it: the scores are
  finite, checked before any kernel runs);
- scaling, ``exp`` and its sum share a pass; dividing and pooling share one, each column keeping
  its own sum over the nodes in node order (row by row, not column by column: ``proj`` is row
  major);
- backward, ``dL/dw``, ``dL/dproj`` and softmax's dot product share a pass, and softmax's
  Jacobian product the standardisation's two sums;
- the linear map's bias is added where a score or projection is read (in their dtype: the bits
  of torch's ``add_``), not by a pass of its own over ``[N, heads + C]`` before the kernel;
- the forward returns each graph's sum of scores, finite exactly when its scores are (float32;
  float64 sums may also overflow): the caller checks the scores only when one is not, instead of
  a scan of its own before the kernel.

CPU only (the layer's kernels in :mod:`.layer`); the shared bodies of :mod:`.sparsemax` stay what
the maps and the CUDA kernels run.
"""

from __future__ import annotations

import math

import numpy as np
from numba.extending import register_jitable

__all__ = ["softmax_forward_problem", "softmax_backward_problem"]

EPS = 1e-7  # as .layer.EPS (attpool2's standardisation): repeated to keep this module a leaf


@register_jitable
def _at(a, bias, biased, i, c):
    """``a[i, c] + bias[c]`` when ``biased``, else ``a[i, c]``: the linear map's bias added in
    ``a``'s dtype, as torch adds it (``bias`` has ``a``'s dtype)."""
    if biased:
        return a[i, c] + bias[c]
    return a[i, c]


@register_jitable
def softmax_forward_problem(g, h, norm, ptr, scores, s0, proj, p0, bounds, bias, z, weights, spread, out):
    """:func:`~.layer.plain_forward_problem` of softmax: ``z[h]``, ``weights[h]`` and
    ``spread[h, g]`` of graph ``g`` and ``out[g]``'s columns of head ``h``, in four passes.
    ``bias``: empty, or the bias of ``scores``' and ``proj``'s columns (one array: the layer's
    ``[scores | proj]``), added where they are read. Returns the float64 sum of the graph's
    scores of head ``h``: not finite when one of them is not (or, for float64 scores, when the
    sum overflows)."""
    n0 = ptr[g]
    n1 = ptr[g + 1]
    count = n1 - n0
    c0 = bounds[h]
    c1 = bounds[h + 1]
    biased = bias.shape[0] > 0
    top = 0.0
    check = 0.0
    if norm:
        for i in range(n0, n1):
            check += _at(scores, bias, biased, i, s0 + h)
        mean = check / max(count, 1)
        squares = 0.0
        top_centred = -math.inf
        for i in range(n0, n1):
            centred = _at(scores, bias, biased, i, s0 + h) - mean
            z[h, i] = centred
            squares += centred * centred
            top_centred = max(top_centred, centred)
        var = squares / max(count - 1, 1)
        std = math.sqrt(var) if var > 0.0 else 0.0
        spread[h, g] = std
        scale = 1.0 / (std + EPS)
        top = top_centred * scale
        total = 0.0
        for i in range(n0, n1):
            value = z[h, i] * scale
            z[h, i] = value
            value = math.exp(value - top)
            weights[h, i] = value
            total += value
    else:
        top = -math.inf
        for i in range(n0, n1):
            value = _at(scores, bias, biased, i, s0 + h)
            z[h, i] = value
            check += value
            top = max(top, value)
        total = 0.0
        for i in range(n0, n1):
            value = math.exp(z[h, i] - top)
            weights[h, i] = value
            total += value
    acc = np.zeros(c1 - c0)
    for i in range(n0, n1):
        weight = weights[h, i] / total
        weights[h, i] = weight
        for c in range(c0, c1):
            acc[c - c0] += weight * _at(proj, bias, biased, i, p0 + c)
    for c in range(c0, c1):
        out[g, c] = acc[c - c0]
    return check


@register_jitable
def softmax_backward_problem(
    g, h, norm, ptr, proj, p0, bounds, bias, z, weights, spread, grad_out, gw, gf, grad_scores, s0, grad_proj
):
    """:func:`~.layer.plain_backward_problem` of softmax (``gw``, ``gf``: ``[heads, N]`` scratch;
    ``bias`` as the forward had it), in three passes."""
    n0 = ptr[g]
    n1 = ptr[g + 1]
    c0 = bounds[h]
    c1 = bounds[h + 1]
    biased = bias.shape[0] > 0
    dot = 0.0
    for i in range(n0, n1):
        acc = 0.0
        weight = weights[h, i]
        for c in range(c0, c1):
            acc += _at(proj, bias, biased, i, p0 + c) * grad_out[g, c]
            grad_proj[i, p0 + c] = weight * grad_out[g, c]
        gw[h, i] = acc
        dot += weight * acc
    if not norm:
        for i in range(n0, n1):
            grad_scores[i, s0 + h] = weights[h, i] * (gw[h, i] - dot)
        return
    mean = 0.0
    dot_z = 0.0
    for i in range(n0, n1):
        value = weights[h, i] * (gw[h, i] - dot)
        gf[h, i] = value
        mean += value
        dot_z += value * z[h, i]
    count = n1 - n0
    mean = mean / max(count, 1)
    std = spread[h, g]
    inverse = 1.0 / (std + EPS)
    scale = dot_z / ((count - 1) * std) if std > 0.0 else 0.0
    for i in range(n0, n1):
        grad_scores[i, s0 + h] = (gf[h, i] - mean) * inverse - scale * z[h, i]

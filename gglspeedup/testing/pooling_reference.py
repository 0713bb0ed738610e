"""Exact references for the attention pooling maps, by methods independent of the library's.

- :func:`fused_lasso_reference` solves the graph fused lasso through its *dual*, the
  box-constrained least-squares problem ``min_{|x_e| <= lam} 1/2 ||s - D^T x||^2`` (``D`` the
  edge-node incidence matrix), with SciPy's bounded-variable least squares (``method="bvls"``:
  an active-set method that terminates with the exact solution up to rounding), then
  ``f = s - D^T x``. The library instead splits sets by maximum flows; the two share nothing but
  the problem.
- :func:`fused_lasso_jacobian_reference` differentiates that solver by central differences
  (the solution is piecewise linear in ``s`` and ``lam``, so away from breakpoints the quotient
  is exact up to the solver's rounding over ``eps``): a Jacobian that never looks at groups.
- :func:`sparsemax_reference` sorts (Martins & Astudillo's algorithm), :func:`softmax_reference`
  exponentiates; :func:`gfusedmax_reference` composes.

All in float64 on one graph's local ids (``edges`` of shape ``(E, 2)``, either direction,
repeats and self loops allowed: they are read as one undirected simple graph, like the library).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "simple_edges",
    "fused_lasso_reference",
    "fused_lasso_jacobian_reference",
    "fused_groups_reference",
    "sparsemax_reference",
    "softmax_reference",
    "gfusedmax_reference",
]


def simple_edges(edges, num_nodes: int) -> np.ndarray:
    """``(E', 2)`` sorted unique ``(min, max)`` pairs of ``edges`` without self loops."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    edges = np.sort(edges[edges[:, 0] != edges[:, 1]], axis=1)
    return np.unique(edges, axis=0) if edges.size else np.zeros((0, 2), np.int64)


def fused_lasso_reference(scores, edges, lam: float) -> np.ndarray:
    """``argmin_f 1/2 ||f - s||^2 + lam sum_(i,j) |f_i - f_j|`` of one graph (dual BVLS)."""
    from scipy.optimize import lsq_linear

    s = np.asarray(scores, dtype=np.float64)
    pairs = simple_edges(edges, s.shape[0])
    if lam == 0 or pairs.shape[0] == 0:
        return s.copy()
    incidence = np.zeros((pairs.shape[0], s.shape[0]))
    incidence[np.arange(pairs.shape[0]), pairs[:, 0]] = 1.0
    incidence[np.arange(pairs.shape[0]), pairs[:, 1]] = -1.0
    dual = lsq_linear(incidence.T, s, bounds=(-lam, lam), method="bvls", tol=1e-15, max_iter=100 * s.shape[0] + 100)
    return s - incidence.T @ dual.x


def fused_lasso_jacobian_reference(scores, edges, lam: float, eps: float = 1e-6):
    """``(df/ds, df/dlam)`` of :func:`fused_lasso_reference` by central differences."""
    s = np.asarray(scores, dtype=np.float64)
    n = s.shape[0]
    jacobian = np.empty((n, n))
    for i in range(n):
        step = np.zeros(n)
        step[i] = eps
        jacobian[:, i] = (fused_lasso_reference(s + step, edges, lam) - fused_lasso_reference(s - step, edges, lam)) / (
            2 * eps
        )
    lower = max(lam - eps, 0.0)
    d_lam = (fused_lasso_reference(s, edges, lam + eps) - fused_lasso_reference(s, edges, lower)) / (lam + eps - lower)
    return jacobian, d_lam


def fused_groups_reference(fused, edges, tol: float = 1e-9) -> np.ndarray:
    """Fused groups of a solution: connected components of the edges whose endpoints' values
    agree within ``tol``, each node labelled by its group's smallest node id."""
    fused = np.asarray(fused, dtype=np.float64)
    label = np.arange(fused.shape[0])

    def find(i):
        while label[i] != i:
            label[i] = label[label[i]]
            i = label[i]
        return i

    for u, v in simple_edges(edges, fused.shape[0]):
        if abs(fused[u] - fused[v]) <= tol:
            a, b = find(u), find(v)
            label[max(a, b)] = min(a, b)
    return np.array([find(i) for i in range(fused.shape[0])], dtype=np.int64)


def sparsemax_reference(z) -> np.ndarray:
    """Sparsemax by sorting: ``k = max{k : 1 + k z_(k) > sum_{j <= k} z_(j)}``."""
    z = np.asarray(z, dtype=np.float64)
    if z.size == 0:
        return z.copy()
    ordered = np.sort(z)[::-1]
    cumulative = np.cumsum(ordered)
    ks = np.arange(1, z.size + 1)
    k = ks[1 + ks * ordered > cumulative][-1]
    tau = (cumulative[k - 1] - 1) / k
    return np.maximum(z - tau, 0.0)


def softmax_reference(z) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    if z.size == 0:
        return z.copy()
    e = np.exp(z - z.max())
    return e / e.sum()


def gfusedmax_reference(scores, edges, lam: float, gamma: float) -> np.ndarray:
    return sparsemax_reference(fused_lasso_reference(scores, edges, lam) / gamma)

"""The pooling maps on NumPy arrays: :func:`softmax_numpy`, :func:`sparsemax_numpy`,
:func:`gfusedmax_numpy` and :func:`fused_lasso_numpy`, each returning a :class:`PoolingResult`
with the map's exact backward (the forward state is :class:`~._state.MappingState`, which the
torch functions share).

>>> import numpy as np
>>> result = gfusedmax_numpy(np.array([3.0, 2.9, 0.0, 1.0]), sizes=[3, 1], edge_index=[[[0, 1], [1, 2]], []], lam=0.1)
>>> result.fused.round(6).tolist(), result.groups.tolist(), result.output.round(6).tolist()
([2.9, 2.9, 0.1, 1.0], [0, 0, 2, 3], [0.5, 0.5, 0.0, 1.0])
"""

from __future__ import annotations

import numpy as np

from ...device import as_device, reject_meta, to_numpy
from ._state import CertificateError, MappingState, check_finite, driver_for, per_head, reduce_heads
from .batch import graph_batch

__all__ = [
    "PoolingResult",
    "softmax_numpy",
    "sparsemax_numpy",
    "gfusedmax_numpy",
    "fused_lasso_numpy",
    "CertificateError",
]


class PoolingResult:
    """A map's output on NumPy arrays, with its exact backward.

    Attributes
    ----------
    output : numpy.ndarray
        The weights (softmax, sparsemax, gfusedmax) or the fused values (fused_lasso), float64, in
        the scores' shape (``(N,)`` or ``(N, heads)``).
    fused : numpy.ndarray or None
        The fused-lasso values (gfusedmax, fused_lasso).
    groups : numpy.ndarray or None
        int64, each node's fused group, named by the group's smallest node id (batch-global).
    boundary : numpy.ndarray or None
        int64, each node's boundary edges counted +1 towards a lower group, -1 towards a higher one.
    residual : numpy.ndarray or None
        Per graph (``(B,)`` or ``(B, heads)``): ``sum |r|`` of the certified KKT residual; the
        output is the exact solution for scores ``s - r`` (``0`` in exact arithmetic).
    """

    def __init__(self, state: MappingState, squeeze: bool, lam_shape, gamma_shape):
        self._state, self._squeeze = state, squeeze
        self._lam_shape, self._gamma_shape = lam_shape, gamma_shape
        self.output = self._shape(state.output)
        self.fused = None if state.fused is None else self._shape(state.fused)
        self.groups = None if state.label is None else self._shape(state.label)
        self.boundary = None if state.bnd is None else self._shape(state.bnd)
        self.residual = None if state.residual is None else self._shape(state.residual)

    def _shape(self, array):
        array = to_numpy(array)  # copies in either shape: vjp reads the state's arrays
        return array[0].copy() if self._squeeze else np.array(array.T, order="C")

    def vjp(self, grad_output):
        """``(grad_scores, grad_lam, grad_gamma)`` for ``dL/doutput`` (the output's shape);
        ``grad_lam`` / ``grad_gamma`` have the shape ``lam`` / ``gamma`` were given in (``None``
        where the map has no such parameter)."""
        grad = np.asarray(grad_output, dtype=np.float64)
        if grad.shape != self.output.shape:
            raise ValueError(f"grad_output must have the output's shape {self.output.shape}, got {grad.shape}")
        state = self._state
        grad_hn = state.driver.xp.asarray(np.ascontiguousarray(grad[None] if self._squeeze else grad.T))
        grad_x, grad_lam, grad_gamma = state.vjp(grad_hn)
        return (
            self._shape(grad_x),
            None if grad_lam is None else reduce_heads(to_numpy(grad_lam), self._lam_shape),
            None if grad_gamma is None else reduce_heads(to_numpy(grad_gamma), self._gamma_shape),
        )


def _run(kind, scores, ptr, edge_index, sizes, lam, gamma, device) -> PoolingResult:
    device = as_device(device)
    reject_meta("scores", scores)
    array = np.asarray(to_numpy(scores))
    if array.dtype.kind not in "fiu" or array.dtype.kind == "b":
        raise TypeError(f"scores must be a real array, got dtype {array.dtype}")
    if array.ndim not in (1, 2):
        raise ValueError(f"scores must have shape (N,) or (N, heads), got {array.shape}")
    squeeze = array.ndim == 1
    x = np.ascontiguousarray((array[None] if squeeze else array.T), dtype=np.float64)
    heads = x.shape[0]
    batch = graph_batch(ptr, edge_index, sizes=sizes, num_nodes=x.shape[1])
    if kind in ("gfusedmax", "fused_lasso") and not batch.has_edges:
        raise ValueError(f"{kind} needs the graphs' edges: give edge_index")
    check_finite(x, np)
    # checked wherever the map takes them (None included: refused by name, not handed to the kernels)
    lam_h = per_head("lam", lam, heads, positive=False) if kind in ("gfusedmax", "fused_lasso") else None
    gamma_h = per_head("gamma", gamma, heads, positive=True) if kind in ("sparsemax", "gfusedmax") else None
    driver = driver_for(device)
    state = MappingState(kind, driver, batch, driver.xp.asarray(x), lam_h, gamma_h)
    return PoolingResult(
        state, squeeze, np.shape(lam) if lam is not None else (), np.shape(gamma) if gamma is not None else ()
    )


def softmax_numpy(scores, ptr=None, *, sizes=None, device="cpu") -> PoolingResult:
    """Softmax over each graph's scores (``(N,)`` or ``(N, heads)``, any real dtype; computed in
    float64). ``device``: where the kernels run (``"cpu"``, ``"cuda:0"``; the CUDA simulator
    too)."""
    return _run("softmax", scores, ptr, None, sizes, None, None, device)


def sparsemax_numpy(scores, ptr=None, gamma=1.0, *, sizes=None, device="cpu") -> PoolingResult:
    """``sparsemax(scores / gamma)`` over each graph; ``gamma > 0`` a number or one per head."""
    return _run("sparsemax", scores, ptr, None, sizes, None, gamma, device)


def gfusedmax_numpy(
    scores, ptr=None, edge_index=None, lam=1.0, gamma=1.0, *, sizes=None, device="cpu"
) -> PoolingResult:
    """``sparsemax(fused_lasso(scores, lam) / gamma)`` over each graph, the fused lasso on the
    graph's own undirected edges (see :func:`fused_lasso_numpy`)."""
    return _run("gfusedmax", scores, ptr, edge_index, sizes, lam, gamma, device)


def fused_lasso_numpy(scores, ptr=None, edge_index=None, lam=1.0, *, sizes=None, device="cpu") -> PoolingResult:
    """The exact graph fused lasso ``argmin_f 1/2 ||f - s||^2 + lam sum_(i,j) |f_i - f_j|`` of each
    graph and head, with its certified groups (``result.groups``) and residual."""
    return _run("fused_lasso", scores, ptr, edge_index, sizes, lam, None, device)

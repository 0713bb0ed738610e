"""The pooling maps on NumPy arrays, and the machinery the torch functions share.

:class:`MappingState` runs one map's forward on a device's driver (CPU kernels, or CUDA kernels
on a GPU or the simulator) and keeps what its backward needs (O(nodes x heads) numbers: the
output, the fused values, group labels and boundary counts); ``vjp`` applies the exact
transposed Jacobian. The NumPy entry points (:func:`softmax_numpy`, :func:`sparsemax_numpy`,
:func:`gfusedmax_numpy`, :func:`fused_lasso_numpy`) wrap it in a :class:`PoolingResult`.

>>> import numpy as np
>>> result = gfusedmax_numpy(np.array([3.0, 2.9, 0.0, 1.0]), sizes=[3, 1], edge_index=[[[0, 1], [1, 2]], []], lam=0.1)
>>> result.fused.round(6).tolist(), result.groups.tolist(), result.output.round(6).tolist()
([2.9, 2.9, 0.1, 1.0], [0, 0, 2, 3], [0.5, 0.5, 0.0, 1.0])
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..device import as_device, reject_meta, to_numpy
from .pooling_batch import GraphBatch, graph_batch

__all__ = [
    "PoolingResult",
    "MappingState",
    "softmax_numpy",
    "sparsemax_numpy",
    "gfusedmax_numpy",
    "fused_lasso_numpy",
    "driver_for",
    "per_head",
    "CertificateError",
    "GAMMA_MIN",
]

# The smallest sparsemax temperature: sparsemax's backward divides by gamma**2, which must be a normal
# float64 (2**-1022 and up), so gamma >= 2**-511 (about 1.5e-154). The forward has no bound of its own
# (its scores are shifted by their largest: see ``_kernels/sparsemax.py``).
GAMMA_MIN = 2.0**-511

MAPPINGS = ("softmax", "sparsemax", "gfusedmax", "fused_lasso")


class CertificateError(RuntimeError):
    """The fused lasso's optimality certificate failed (never observed; a bug report is welcome)."""


@functools.cache
def driver_for(device):
    """The pooling driver of a :class:`~gglspeedup.device.Device` (one per device, made once)."""
    if device.is_cuda:
        from ._kernels.pooling_cuda import CUDAPoolingDriver

        return CUDAPoolingDriver(device.check_available())
    from ._kernels.pooling_cpu import CPUPoolingDriver

    return CPUPoolingDriver()


def per_head(name: str, value: Any, heads: int, *, positive: bool) -> np.ndarray:
    """``lam`` / ``gamma`` (a number, or one per head) as float64 ``(heads,)``, checked: finite, and
    ``>= 0`` (``positive=False``) or ``>= GAMMA_MIN`` (``positive=True``: a temperature)."""
    reject_meta(name, value)
    array = np.asarray(to_numpy(value) if not isinstance(value, (int, float)) else value)
    if array.dtype.kind not in "iuf" or array.dtype.kind == "b":
        raise TypeError(f"{name} must be a real number or one per head, got {value!r}")
    if array.ndim > 1 or (array.ndim == 1 and array.shape[0] not in (1, heads)):
        raise ValueError(f"{name} must be a number or have one entry per head ({heads}), got shape {array.shape}")
    array = np.broadcast_to(array.astype(np.float64).reshape(-1), (heads,)).copy()
    bad = ~np.isfinite(array) | ((array <= 0) if positive else (array < 0))
    if bad.any():
        expected = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be finite and {expected}, got {float(array[np.argmax(bad)])}")
    if positive and (array < GAMMA_MIN).any():
        raise ValueError(
            f"{name} must be >= 2**-511 = {GAMMA_MIN:.3g} (the backward divides by {name}**2, which must be a "
            f"normal float64), got {float(array[np.argmax(array < GAMMA_MIN)])}"
        )
    return array


def check_finite(x, xp) -> None:
    """Raise ``ValueError`` naming the first non-finite score (``x`` head-major ``[H, N]``)."""
    if not bool(xp.isfinite(x).all()):  # sync on a GPU (the one input scan of a call)
        heads, nodes = np.nonzero(~np.isfinite(to_numpy(x)))
        h, i = int(heads[0]), int(nodes[0])
        where = f"scores[{i}]" if x.shape[0] == 1 else f"scores[{i}, {h}]"
        raise ValueError(f"scores must be finite, got {where} = {float(to_numpy(x)[h, i])}")


class MappingState:
    """One forward of a map over a batch, and its exact backward.

    Parameters
    ----------
    kind : {"softmax", "sparsemax", "gfusedmax", "fused_lasso"}
    driver : the device's pooling driver (:func:`driver_for`)
    batch : GraphBatch
    x : float64 ``[heads, num_nodes]`` array of the driver's library, C-contiguous
    lam, gamma : float64 ``(heads,)`` host arrays (ignored where the map has none)
    """

    def __init__(self, kind, driver, batch: GraphBatch, x, lam=None, gamma=None):
        xp = driver.xp
        self.kind, self.driver, self.batch = kind, driver, batch
        self.lam, self.gamma = lam, gamma
        self.ptr = batch.placed((id(driver), "ptr"), lambda: xp.asarray(batch.ptr))
        self.x = x
        self.fused = self.label = self.bnd = self.residual = None
        if kind == "softmax":
            self.output = driver.softmax(self.ptr, x)
        elif kind == "sparsemax":
            self.gamma_x = xp.asarray(gamma)
            self.output = driver.sparsemax(self.ptr, x, self.gamma_x)
        else:
            arrays = batch.placed((id(driver), "arrays"), lambda: driver.upload(batch.arrays))
            self.lam_x, self.gamma_x = xp.asarray(lam), xp.asarray(gamma if gamma is not None else np.ones_like(lam))
            with_sparsemax = kind == "gfusedmax"
            fused, label, bnd, weights, status, residual = driver.fused(
                arrays, x, self.lam_x, self.gamma_x, with_sparsemax
            )
            failed = to_numpy(status)  # sync on a GPU: the certificate must hold before returning
            if failed.any():
                h, g = (int(v) for v in np.argwhere(failed)[0])
                raise CertificateError(
                    f"the fused lasso's optimality certificate failed on graph {g}, head {h} (status "
                    f"{int(failed[h, g])}); please report this batch"
                )
            self.fused, self.label, self.bnd, self.residual = fused, label, bnd, residual
            self.output = weights if with_sparsemax else fused

    def vjp(self, grad_output):
        """``(dL/dx, dL/dlam per head or None, dL/dgamma per head or None)`` for ``dL/doutput``
        (``[heads, num_nodes]`` float64 on the driver's library)."""
        driver, ptr = self.driver, self.ptr
        if self.kind == "softmax":
            return driver.softmax_vjp(ptr, self.output, grad_output), None, None
        if self.kind == "sparsemax":
            grad_x, grad_gamma = driver.sparsemax_vjp(ptr, self.x, self.output, self.gamma_x, grad_output)
            return grad_x, None, grad_gamma.sum(axis=1)
        weights = self.output if self.kind == "gfusedmax" else driver.xp.zeros((0, 0))
        grad_x, grad_lam, grad_gamma = driver.fused_vjp(
            ptr, self.fused, weights, self.label, self.bnd, self.gamma_x, grad_output
        )
        return grad_x, grad_lam.sum(axis=1), (grad_gamma.sum(axis=1) if self.kind == "gfusedmax" else None)


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
        array = to_numpy(array)
        return array[0].copy() if self._squeeze else np.ascontiguousarray(array.T)

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
            None if grad_lam is None else _reduce(to_numpy(grad_lam), self._lam_shape),
            None if grad_gamma is None else _reduce(to_numpy(grad_gamma), self._gamma_shape),
        )


def _reduce(per_head_values, shape):
    return (
        per_head_values.reshape(shape)
        if math.prod(shape) == per_head_values.size
        else per_head_values.sum().reshape(shape)
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
    lam_h = per_head("lam", lam, heads, positive=False) if lam is not None else None
    gamma_h = per_head("gamma", gamma, heads, positive=True) if gamma is not None else None
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

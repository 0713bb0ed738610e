"""What the pooling maps' torch functions, NumPy functions and layer share: the forward state on a
device's driver and its exact backward, the parameter checks, the per-head gradients' reduction.

:class:`MappingState` runs one map's forward on a device's driver (CPU kernels, or CUDA kernels on a
GPU or the simulator) and keeps what its backward needs (O(nodes x heads) numbers: the output, the
fused values, group labels and boundary counts); ``vjp`` applies the exact transposed Jacobian.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ...device import reject_meta, to_numpy
from .batch import GraphBatch

__all__ = [
    "MappingState",
    "driver_for",
    "per_head",
    "check_stored",
    "check_finite",
    "reduce_heads",
    "CertificateError",
    "GAMMA_MIN",
]

# The smallest sparsemax temperature: sparsemax's backward divides by gamma**2, which must be a normal
# float64 (2**-1022 and up), so gamma >= 2**-511 (about 1.5e-154). The forward has no bound of its own
# (its scores are shifted by their largest: see ``_kernels/sparsemax.py``).
GAMMA_MIN = 2.0**-511


class CertificateError(RuntimeError):
    """The fused lasso's optimality certificate failed (never observed; a bug report is welcome)."""


@functools.cache
def driver_for(device):
    """The pooling driver of a :class:`~gglspeedup.device.Device` (one per device, made once)."""
    if device.is_cuda:
        from ._kernels.cuda import CUDAPoolingDriver

        return CUDAPoolingDriver(device.check_available())
    from ._kernels.cpu import CPUPoolingDriver

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


def check_stored(name: str, value: Any, *, positive: bool) -> None:
    """Raise ``ValueError`` naming ``name`` when a layer's parameter (torch's default dtype, float32
    unless changed) cannot hold ``value``: past its largest float ``torch.full`` raised "value
    cannot be converted to type float without overflow", and a temperature below its smallest
    positive float was stored as 0 (refused only at the first forward, as "got 0.0")."""
    import torch

    dtype = torch.get_default_dtype()
    stored = torch.tensor(float(value), dtype=torch.float64).to(dtype).item()
    if not math.isfinite(stored) or (positive and stored == 0.0):
        kind = str(dtype).replace("torch.", "")
        raise ValueError(
            f"{name} = {value!r} does not fit the layer's {kind} parameter (it would hold {stored}); give a "
            f"value {kind} holds, or build the layer under torch.set_default_dtype(torch.float64)"
        )


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


def reduce_heads(per_head_values, shape):
    """A parameter's gradient from its per-head values ``(heads,)``: kept, one per head, when the
    parameter holds one per head (``shape`` ``(heads,)``); summed when it is one number shared by
    the heads (``shape`` ``()``, or ``(1,)`` with several heads). NumPy arrays and torch tensors
    alike, each summed by its own library."""
    if len(shape) and math.prod(shape) == per_head_values.shape[0]:
        return per_head_values.reshape(shape)
    return per_head_values.sum().reshape(shape)

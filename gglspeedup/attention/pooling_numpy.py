"""Moved to :mod:`gglspeedup.attention.pooling.numpy_maps` (the NumPy maps) and
``gglspeedup.attention.pooling._state`` (the machinery the torch functions share) in issue 41
(attention in two rooms); this path keeps its public names for existing imports."""

from .pooling._state import GAMMA_MIN, CertificateError, MappingState, driver_for, per_head
from .pooling.numpy_maps import (
    PoolingResult,
    fused_lasso_numpy,
    gfusedmax_numpy,
    softmax_numpy,
    sparsemax_numpy,
)

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

"""NumPy backend: host arrays. Tensors on the CPU come back as NumPy views of the same memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..device import DLPACK_CPU, DLPACK_CUDA_HOST
from ._common import prepare

__all__ = ["NAME", "EXTRA", "from_array", "from_bfloat16_bits"]

NAME = "numpy"
EXTRA = None  # a core dependency


def from_array(array: Any) -> np.ndarray:
    """A NumPy view of ``array`` (host memory only).

    Raises
    ------
    ValueError
        for device (GPU) memory, which NumPy cannot view; use the ``cupy`` backend or
        :func:`gglspeedup.backends.from_`.
    """
    if isinstance(array, np.ndarray):
        return array
    from . import host_bfloat16

    bf16 = host_bfloat16(array)  # DLPack carries no NumPy bfloat16: an ml_dtypes view of the bits
    if bf16 is not None:
        return bf16
    source = prepare(array)
    if isinstance(source, np.ndarray):
        return source
    device_type = int(source.__dlpack_device__()[0])
    if device_type not in (DLPACK_CPU, DLPACK_CUDA_HOST):
        raise ValueError(
            f"the numpy backend views host memory only; got a {type(array).__name__} on DLPack "
            f"device type {device_type} (use backends.to('cupy', ...) or backends.from_(...))"
        )
    return np.from_dlpack(source)


def from_bfloat16_bits(bits: np.ndarray) -> np.ndarray:
    """An ``ml_dtypes.bfloat16`` view of ``bits`` (uint16 bfloat16 bit patterns): a NumPy bfloat16
    array stays one, zero-copy."""
    from .._bfloat16 import bfloat16_dtype

    return bits.view(bfloat16_dtype())

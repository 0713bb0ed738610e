"""NumPy's view of framework ``bfloat16`` tensors: ``ml_dtypes.bfloat16`` over the same bits.

Shared by the feature stores (bfloat16 tables) and the backends (``to("numpy", ...)`` /
``from_``): DLPack has no NumPy bfloat16, so these go through the bits instead.
"""

from __future__ import annotations

import numpy as np

from .device import array_library, to_numpy

__all__ = ["bfloat16_dtype", "bfloat16_table"]


def bfloat16_dtype():
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes ships with the test extra and with jax
        raise ImportError(
            "a bfloat16 table needs ml_dtypes for a NumPy bfloat16 dtype: pip install ml_dtypes"
        ) from None
    return np.dtype(ml_dtypes.bfloat16)


def bfloat16_table(x) -> np.ndarray:
    """A framework bfloat16 tensor as an ``ml_dtypes.bfloat16`` array over the same bits."""
    if array_library(x) == "torch":
        import torch

        bits = x.detach().cpu().contiguous().view(torch.int16).numpy()  # .numpy() refuses bfloat16
    elif array_library(x) == "paddle":
        # NumPy reads no DLPack bfloat16 (Paddle 3 exports it as such: np.asarray would copy) and
        # older Paddles export uint16: the same bits viewed as int16 are read in place either way
        bits = to_numpy(x.view("int16"))
    else:
        bits = to_numpy(x)  # TF and JAX hand out ml_dtypes bfloat16
    return bits.view(bfloat16_dtype()) if bits.dtype.itemsize == 2 and bits.dtype.kind in "iu" else bits

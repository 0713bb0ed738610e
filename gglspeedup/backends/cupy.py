"""CuPy backend: GPU arrays (needs the ``gpu`` extra and a CUDA GPU)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import import_framework, prepare

__all__ = ["NAME", "EXTRA", "framework", "from_array"]

NAME = "cupy"
EXTRA = "gpu"


def framework():
    """The ``cupy`` module (``ImportError`` naming the ``gpu`` extra when missing)."""
    return import_framework("cupy", EXTRA)


def from_array(array: Any):
    """A CuPy view of device memory ``array`` (a CuPy array, or a GPU tensor of any framework).

    Raises
    ------
    ValueError
        for host (NumPy) memory: moving it to the GPU is a copy, not a view.
    """
    cupy = framework()
    if isinstance(array, cupy.ndarray):
        return array
    if isinstance(array, np.ndarray):
        raise ValueError(
            "the cupy backend views GPU memory only; got a NumPy (host) array: copy it with "
            "cupy.asarray(array) or keep the data on the GPU"
        )
    return cupy.from_dlpack(prepare(array))

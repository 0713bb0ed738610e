"""TensorLayerX / GammaGL backend: delegates to the framework TensorLayerX runs on.

The target follows TensorLayerX: ``tensorlayerx.BACKEND`` when TensorLayerX is already imported,
else the ``TL_BACKEND`` environment variable, else ``"tensorflow"`` (TensorLayerX's default).
TensorLayerX itself is never imported here.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["NAME", "EXTRA", "SUPPORTED", "target", "framework", "from_array"]

NAME = "tlx"
EXTRA = None
# TL_BACKEND value -> gglspeedup backend
SUPPORTED = {"torch": "torch", "tensorflow": "tensorflow", "paddle": "paddle"}
DEFAULT = "tensorflow"


def target() -> str:
    """The gglspeedup backend TensorLayerX currently runs on.

    Raises
    ------
    ValueError
        for a TensorLayerX backend without a DLPack adapter here (mindspore, jittor, oneflow).
    """
    module = sys.modules.get("tensorlayerx")
    value = getattr(module, "BACKEND", None) if module is not None else None
    value = value or os.environ.get("TL_BACKEND") or DEFAULT
    key = str(value).strip().lower()
    if key not in SUPPORTED:
        raise ValueError(f"TL_BACKEND={value!r} is not supported; expected one of {sorted(SUPPORTED)}")
    return SUPPORTED[key]


def _delegate():
    from . import adapter

    return adapter(target())


def framework():
    """The framework module TensorLayerX runs on."""
    return _delegate().framework()


def from_array(array: Any):
    """A tensor of TensorLayerX's current framework sharing ``array``'s memory."""
    return _delegate().from_array(array)

"""PyTorch backend: ``torch.Tensor`` sharing memory through DLPack (CPU or CUDA)."""

from __future__ import annotations

from typing import Any

from ._common import import_framework, prepare

__all__ = ["NAME", "EXTRA", "framework", "from_array", "from_bfloat16_bits"]

NAME = "torch"
EXTRA = "torch"


def framework():
    """The ``torch`` module (``ImportError`` naming the ``torch`` extra when missing)."""
    return import_framework("torch", EXTRA)


def from_array(array: Any):
    """A ``torch.Tensor`` sharing ``array``'s memory, dtype and device.

    Torch accepts strided and read-only NumPy input; a read-only array gives a tensor that must
    not be written.
    """
    torch = framework()
    if isinstance(array, torch.Tensor):
        return array
    return torch.from_dlpack(prepare(array))


def from_bfloat16_bits(bits: Any):
    """A ``torch.bfloat16`` tensor viewing ``bits`` (uint16 bfloat16 bit patterns), zero-copy."""
    torch = framework()
    return torch.from_dlpack(prepare(bits)).view(torch.bfloat16)

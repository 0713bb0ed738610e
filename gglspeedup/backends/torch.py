"""PyTorch backend: ``torch.Tensor`` sharing memory through DLPack (CPU or CUDA).

Torch has no negative strides, and its ``from_dlpack`` aborts the whole process (a C++ error,
"Storage size calculation overflowed", thrown through the import) on an array that has them (a
reversed NumPy view, ``a[::-1]``): such input is copied into a compact buffer; nothing else is.
"""

from __future__ import annotations

from typing import Any

from ._common import compact, import_framework, prepare

__all__ = ["NAME", "EXTRA", "framework", "from_array", "from_bfloat16_bits"]

NAME = "torch"
EXTRA = "torch"


def framework():
    """The ``torch`` module (``ImportError`` naming the ``torch`` extra when missing)."""
    return import_framework("torch", EXTRA)


def from_array(array: Any):
    """A ``torch.Tensor`` sharing ``array``'s memory, dtype and device.

    Torch accepts strided and read-only NumPy input; a read-only array gives a tensor that must
    not be written. Input with a negative stride is copied (torch cannot view it).
    """
    torch = framework()
    if isinstance(array, torch.Tensor):
        return array
    source = prepare(array)
    if any(stride < 0 for stride in getattr(source, "strides", None) or ()):
        source = compact(source)  # a view torch cannot express: a copy instead of an abort
    return torch.from_dlpack(source)


def from_bfloat16_bits(bits: Any):
    """A ``torch.bfloat16`` tensor viewing ``bits`` (uint16 bfloat16 bit patterns), zero-copy."""
    torch = framework()
    return torch.from_dlpack(prepare(bits)).view(torch.bfloat16)

"""TensorFlow backend: ``tf.Tensor`` sharing memory through a DLPack capsule.

TensorFlow's ``from_dlpack`` accepts only a capsule (not an object with ``__dlpack__``) and
rejects strided buffers: strided input is copied into a compact buffer first (the only copy).
This module imports TensorFlow on first use; it is the only place in the package that does.
"""

from __future__ import annotations

from typing import Any

from ._common import compact, import_framework, prepare

__all__ = ["NAME", "EXTRA", "framework", "from_array"]

NAME = "tensorflow"
EXTRA = "tensorflow"


def framework():
    """The ``tensorflow`` module (``ImportError`` naming the ``tensorflow`` extra when missing)."""
    return import_framework("tensorflow", EXTRA)


def from_array(array: Any):
    """A ``tf.Tensor`` sharing ``array``'s memory and dtype (compact input is never copied)."""
    tf = framework()
    if isinstance(array, tf.Tensor):
        return array
    source = compact(prepare(array))
    return tf.experimental.dlpack.from_dlpack(source.__dlpack__())

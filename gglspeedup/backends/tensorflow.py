"""TensorFlow backend: ``tf.Tensor`` sharing memory through a DLPack capsule.

TensorFlow's ``from_dlpack`` accepts only a capsule (not an object with ``__dlpack__``), rejects
strided buffers, and aborts the whole process (``Check failed: IsAligned()``) when a host buffer
does not start on a 64-byte boundary. Strided input is copied into a compact buffer and
under-aligned host input into an aligned one (with a ``UserWarning``), as is read-only NumPy input
(TensorFlow asks for a DLPack version that cannot mark memory read-only, and NumPy then refuses
the export); nothing else is copied.
This module imports TensorFlow on first use; it is the only place in the package that does.
"""

from __future__ import annotations

from typing import Any

from ._common import compact, ensure_aligned, import_framework, prepare, settle_gpu_work

__all__ = ["NAME", "EXTRA", "ALIGNMENT", "framework", "from_array", "from_bfloat16_bits"]

NAME = "tensorflow"
EXTRA = "tensorflow"
ALIGNMENT = 64  # Eigen's EIGEN_MAX_ALIGN_BYTES in TensorFlow's CPU build


def framework():
    """The ``tensorflow`` module (``ImportError`` naming the ``tensorflow`` extra when missing)."""
    return import_framework("tensorflow", EXTRA)


def from_array(array: Any):
    """A ``tf.Tensor`` sharing ``array``'s memory and dtype (compact, aligned input is never copied)."""
    tf = framework()
    if isinstance(array, tf.Tensor):
        return array
    source = ensure_aligned(compact(prepare(array)), ALIGNMENT, "TensorFlow")
    settle_gpu_work(source)  # TensorFlow's stream is not ordered after ours
    return tf.experimental.dlpack.from_dlpack(source.__dlpack__())


def from_bfloat16_bits(bits: Any):
    """A ``tf.bfloat16`` tensor over ``bits`` (uint16 bfloat16 bit patterns; ``tf.bitcast`` does
    not copy)."""
    tf = framework()
    return tf.bitcast(from_array(bits), tf.bfloat16)

"""Paddle backend: ``paddle.Tensor`` sharing memory through DLPack.

Importing Paddle after TensorFlow in one process crashes it (a segfault in Paddle's C extension).
The package never imports TensorFlow unless the tensorflow backend is asked for, and this adapter
raises ``ImportError`` instead of importing Paddle when TensorFlow is already loaded and Paddle
is not: import ``paddle`` before ``tensorflow`` in scripts that use both.
"""

from __future__ import annotations

import sys
from typing import Any

from ._common import compact, dtype_name, import_framework, prepare, settle_gpu_work

__all__ = ["NAME", "EXTRA", "framework", "from_array", "from_bfloat16_bits"]

NAME = "paddle"
EXTRA = "paddle"


def framework():
    """The ``paddle`` module (``ImportError`` naming the ``paddle`` extra when missing, or
    explaining the import order when TensorFlow was imported first)."""
    if "paddle" not in sys.modules and "tensorflow" in sys.modules:
        raise ImportError(
            "paddle cannot be imported after tensorflow in the same process (it crashes the "
            "interpreter); import paddle before tensorflow at the top of your script"
        )
    if "paddle" not in sys.modules:
        from .._threading import prefer_tbb

        prefer_tbb()  # libpaddle.so links libtbb.so.12, which pip's tbb puts outside the loader's path
    return import_framework("paddle", EXTRA)


def from_array(array: Any):
    """A ``paddle.Tensor`` sharing ``array``'s memory, dtype and device (input with a negative
    stride, which Paddle misreads, is copied). uint16 input raises ``TypeError``: Paddle has no
    uint16 type, and would read it as bfloat16."""
    paddle = framework()
    if isinstance(array, paddle.Tensor):
        return array
    source = prepare(array)
    if dtype_name(source) == "uint16":
        raise TypeError(
            f"cannot convert a {type(array).__name__} of dtype uint16 to paddle: Paddle has no uint16 type (its "
            "bfloat16 is stored as uint16, so DLPack's uint16 would arrive as paddle.bfloat16, other numbers); "
            "convert it first, e.g. array.astype('int32'); bfloat16 bits (a GPU FeatureStore's bfloat16 rows): "
            "pass array.view('int16') and view the tensor as paddle.bfloat16"
        )
    if any(stride < 0 for stride in getattr(source, "strides", None) or ()):
        # Paddle takes a negative stride as a huge unsigned one: it reads outside the buffer
        # (garbage rows) or fails allocating 2**64 bytes; a compact copy instead, as for torch.
        source = compact(source)
    settle_gpu_work(source)  # Paddle takes the capsule without a stream: nothing orders it after ours
    return paddle.utils.dlpack.from_dlpack(source)


def from_bfloat16_bits(bits: Any):
    """A ``paddle.bfloat16`` tensor viewing ``bits`` (uint16 bfloat16 bit patterns), zero-copy."""
    paddle = framework()
    return from_array(bits.view("int16")).view(paddle.bfloat16)  # Paddle's view_dtype has no uint16 kernel

"""Zero-copy conversion of sampler output to training frameworks over DLPack.

>>> import numpy as np
>>> from gglspeedup import backends
>>> t = backends.to("torch", np.arange(3))          # doctest: +SKIP
>>> adj_t = backends.to("torch", adj)                # Adj of torch tensors   # doctest: +SKIP
>>> x_t, adjs_t = backends.to("paddle", (x, adjs))   # a tuple in, a tuple out # doctest: +SKIP

Backends (one small module each, imported on first use): ``numpy``, ``cupy``, ``torch``,
``tensorflow`` (alias ``tf``), ``paddle``, ``jax`` and ``tlx`` (TensorLayerX / GammaGL: follows
``TL_BACKEND`` and delegates to the matching module). Each adapter module exposes
``from_array(array) -> tensor`` and imports its framework only when first asked.

Quirks handled inside the adapters: TensorFlow accepts only DLPack capsules and compact buffers;
JAX accepts only DLPack objects, needs ``jax_enable_x64`` for 64-bit types (the adapter enables it
with a one-time warning, never downcasts) and copies NumPy buffers that are not 64-byte aligned
(the adapter makes that copy itself, aligned, and warns); TensorFlow and JAX get a copy, with a
warning, of a read-only NumPy array (NumPy exports one only to DLPack 1.0 consumers, which they
are not); Paddle's CPU tensors report a ``None`` device id (wrapped) and Paddle misreads negative
strides (such input is copied, as for torch); importing TensorFlow before Paddle crashes the
process, so the package never imports TensorFlow unless asked for it, and the paddle adapter
refuses (``ImportError``) instead of crashing when TensorFlow was imported first.
"""

from __future__ import annotations

import copy
import importlib
from typing import Any

import numpy as np

from ..device import DLPACK_CPU, DLPACK_CUDA, DLPACK_CUDA_HOST, DLPACK_CUDA_MANAGED, array_library
from ._common import import_framework, prepare

__all__ = ["to", "from_", "map_arrays", "adapter", "names", "available", "needs_alignment", "check_dtype"]

# backend name -> adapter module (relative to this package)
_ADAPTERS = {
    "numpy": ".numpy",
    "cupy": ".cupy",
    "torch": ".torch",
    "tensorflow": ".tensorflow",
    "paddle": ".paddle",
    "jax": ".jax",
    "tlx": ".tlx",
}
_ALIASES = {"np": "numpy", "cp": "cupy", "pytorch": "torch", "tf": "tensorflow", "tensorlayerx": "tlx"}
_SCALARS = (bool, int, float, complex, str, bytes)


def names() -> list[str]:
    """Every backend name ``to`` accepts (aliases excluded)."""
    return list(_ADAPTERS)


def available() -> list[str]:
    """The backends whose framework is installed here (found, not imported)."""
    from .. import _config

    flags = {
        "numpy": True,
        "cupy": _config.HAS_CUPY,
        "torch": _config.HAS_TORCH,
        "tensorflow": _config.HAS_TENSORFLOW,
        "paddle": _config.HAS_PADDLE,
        "jax": _config.HAS_JAX,
    }
    return [name for name, ok in flags.items() if ok]


def needs_alignment(name: str) -> int:
    """Byte alignment backend ``name`` needs to share a host buffer (0: any alignment).

    TensorFlow aborts on, and JAX copies, host buffers not aligned to 64 bytes; ``tlx`` follows
    its target. Producers that can choose (the loader) allocate or re-align accordingly.
    """
    key = _canonical(name)
    if key == "tlx":
        key = adapter("tlx").target()
    return int(getattr(adapter(key), "ALIGNMENT", 0))


def _canonical(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"backend name must be a str, got {type(name).__name__} {name!r}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _ADAPTERS:
        raise ValueError(f"unknown backend {name!r}; expected one of {sorted(_ADAPTERS)}")
    return key


def adapter(name: str):
    """The adapter module for backend ``name`` (imported lazily; its framework is not imported)."""
    return importlib.import_module(_ADAPTERS[_canonical(name)], __name__)


def map_arrays(obj: Any, leaf) -> Any:
    """``obj`` with ``leaf(array)`` in place of every array, keeping the containers.

    Named tuples (:class:`~gglspeedup.Adj`, :class:`~gglspeedup.SampleOutput`, loader batches,
    any user record) come back as the same named tuple, lists as lists, tuples as tuples, dicts
    as dicts of the same type (``OrderedDict``, ``defaultdict`` with its factory); ``None`` and
    Python scalars pass through untouched and NumPy scalars become Python scalars (so an
    ``Adj``'s ``size`` is always a tuple of Python ints).
    :func:`to` and :func:`from_` are this with a backend's converter as ``leaf``; loaders use it
    to post-process whole batches.

    >>> import numpy as np
    >>> map_arrays({"a": np.zeros(2), "b": (None, [np.ones(1)])}, lambda a: a.shape)
    {'a': (2,), 'b': (None, [(1,)])}
    """
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, _SCALARS):
        return obj
    # Lists, not generators, so no stdlib frame calls back into this module (warnings raised by
    # an adapter then point at the caller of ``to``).
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # named tuples: Adj, SampleOutput, Batch
        out = type(obj)._make([map_arrays(item, leaf) for item in obj])
        extra = getattr(obj, "__dict__", None)  # attributes beside the fields (SampleOutput.batch)
        if extra:
            out.__dict__.update({name: map_arrays(value, leaf) for name, value in extra.items()})
        return out
    if isinstance(obj, (list, tuple)):
        return type(obj)([map_arrays(item, leaf) for item in obj])
    if isinstance(obj, dict):
        converted = {key: map_arrays(value, leaf) for key, value in obj.items()}
        if type(obj) is dict:
            return converted
        out = copy.copy(obj)  # an OrderedDict, a defaultdict (its factory too), a user's dict subclass
        out.update(converted)
        return out
    return leaf(obj)


# dtype kinds DLPack carries: bool, signed / unsigned integers, floats, complex numbers
_DLPACK_KINDS = "biufc"


def _checked(convert, backend: str):
    """``convert`` behind a dtype check: arrays DLPack cannot carry raise a ``TypeError`` naming
    the dtype (instead of DLPack's ``BufferError``); NumPy bfloat16 arrays (``ml_dtypes``) travel
    as their uint16 bits and are reinterpreted by adapters that can do so without a copy, and so
    do other frameworks' bfloat16 host tensors (a framework's own pass through untouched)."""

    def leaf(array):
        if not isinstance(array, np.ndarray) and "bfloat16" in str(getattr(array, "dtype", "")):
            if array_library(array) == backend:
                return convert(array)  # the framework's own bfloat16 tensor, as it is
            # Another framework's: not every from_dlpack reads DLPack's bfloat16 (TensorFlow's and
            # JAX's refuse torch's, JAX's dtype is ml_dtypes'), so its bits travel, as NumPy's do.
            array = host_bfloat16(array)
        dtype = getattr(array, "dtype", None)
        if not isinstance(dtype, np.dtype) or (dtype.kind in _DLPACK_KINDS and (dtype.isnative or backend == "numpy")):
            return convert(array)
        if dtype.name == "bfloat16" and isinstance(array, np.ndarray):
            from_bits = getattr(adapter(backend), "from_bfloat16_bits", None)
            if from_bits is not None:
                return from_bits(array.view(np.uint16))
            raise TypeError(
                f"the {backend} backend cannot view a NumPy bfloat16 array without a copy; convert "
                f"array.view(numpy.uint16) and reinterpret the bits in {backend}"
            )
        check_dtype(f"a {type(array).__name__}", backend, dtype)
        return convert(array)  # another dtype the numpy backend keeps (a big-endian array)

    return leaf


def check_dtype(what: str, backend: str | None, dtype) -> None:
    """Raise ``TypeError`` naming ``what`` when arrays of ``dtype`` cannot reach ``backend``
    (``None``: no conversion): bytes swapped (big-endian; the numpy backend keeps them) or a kind
    DLPack does not carry (strings, objects, dates, records; NumPy bfloat16 travels as its bits).
    Loaders call it when made, so such features or labels are named before the first batch."""
    if backend is None or not isinstance(dtype, np.dtype) or dtype.name == "bfloat16":
        return
    if not dtype.isnative and _canonical(backend) != "numpy":
        raise TypeError(
            f"cannot convert {what} of dtype {dtype} to {backend}: its bytes are swapped "
            "(big-endian) and DLPack carries native byte order only; convert it first, e.g. "
            "array.astype(array.dtype.newbyteorder('='))"
        )
    if dtype.kind not in _DLPACK_KINDS:
        raise TypeError(
            f"cannot convert {what} of dtype {dtype} to {backend}: DLPack carries "
            "bool, signed and unsigned integer, float (float16/32/64, bfloat16) and complex arrays "
            "only; encode strings, objects, dates and records as numbers first"
        )


def to(name: str, obj: Any) -> Any:
    """Convert ``obj`` zero-copy to backend ``name``, keeping dtype and device.

    Parameters
    ----------
    name : str
        ``"numpy"``, ``"cupy"``, ``"torch"``, ``"tensorflow"`` (``"tf"``), ``"paddle"``, ``"jax"``
        or ``"tlx"``.
    obj : array, tensor, Adj, SampleOutput, tuple, list, dict or None
        NumPy/CuPy arrays and any tensor with ``__dlpack__``. An :class:`Adj` comes back as an
        ``Adj`` of tensors (``edge_index`` int64, shape (2, E); ``size`` a tuple of Python ints); a
        :class:`SampleOutput` as a ``SampleOutput``; lists, tuples (named tuples included) and dicts
        keep their type; ``None`` and Python/NumPy scalars pass through.

    Returns
    -------
    The same structure with every array replaced by a ``name`` tensor sharing its memory.

    Raises
    ------
    ValueError
        for an unknown backend name (the message lists the names).
    ImportError
        when the framework is not installed (the message names the pip extra).
    TypeError
        for leaves that are not arrays or tensors, and for arrays of a dtype DLPack cannot carry
        (strings, objects, datetimes, records, byte-swapped numbers for any backend but
        ``"numpy"``): the message names the dtype.
    """
    key = _canonical(name)
    if key == "tlx":  # the framework TensorLayerX runs on, so that its adapter's hooks (bfloat16) apply
        key = adapter("tlx").target()
    return map_arrays(obj, _checked(adapter(key).from_array, key))


def host_bfloat16(obj: Any):
    """A framework ``bfloat16`` tensor in host memory as an ``ml_dtypes.bfloat16`` NumPy array over
    the same bits (DLPack has no NumPy bfloat16); ``None`` for anything else. A GPU bfloat16
    tensor raises ``TypeError`` naming the dtype and the way round (NumPy and CuPy have no
    bfloat16 device arrays)."""
    if isinstance(obj, np.ndarray) or "bfloat16" not in str(getattr(obj, "dtype", "")):
        return None
    from .._bfloat16 import bfloat16_table

    device = getattr(obj, "device", None)
    if getattr(device, "type", "cpu") not in ("cpu", None) or "gpu" in str(device).lower():
        raise TypeError(
            f"a bfloat16 tensor on {device} has no NumPy/CuPy counterpart (neither has bfloat16 device arrays): "
            "convert it first, e.g. tensor.float(), or move it to the CPU for an ml_dtypes.bfloat16 array"
        )
    return bfloat16_table(obj)


def _leaf_from(obj: Any):
    if isinstance(obj, np.ndarray) or array_library(obj) == "cupy":
        return obj
    bf16 = host_bfloat16(obj)
    if bf16 is not None:
        return bf16
    source = prepare(obj)
    if isinstance(source, np.ndarray) or array_library(source) == "cupy":
        return source
    device_type = int(source.__dlpack_device__()[0])
    if device_type in (DLPACK_CPU, DLPACK_CUDA_HOST):
        return np.from_dlpack(source)
    if device_type in (DLPACK_CUDA, DLPACK_CUDA_MANAGED):
        return import_framework("cupy", "gpu").from_dlpack(source)
    raise ValueError(f"cannot bring a tensor on DLPack device type {device_type} back to NumPy/CuPy")


def from_(obj: Any) -> Any:
    """Convert framework tensors back to NumPy (host memory) or CuPy (GPU memory), zero-copy.

    Accepts the same structures as :func:`to` (an ``Adj`` of torch tensors comes back as an
    ``Adj`` of arrays). Tensors that require grad are detached first.
    """
    return map_arrays(obj, _leaf_from)

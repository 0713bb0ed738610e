"""JAX backend: ``jax.Array`` sharing memory through DLPack.

Quirks handled here:

- ``jax.dlpack.from_dlpack`` accepts objects with ``__dlpack__`` only (not capsules) and rejects
  strided buffers (strided input is copied into a compact buffer first).
- Without ``jax_enable_x64`` JAX turns int64 (the sampler's ids and ``edge_index``) into an int32
  copy. Policy: converting a 64-bit array while x64 is off **enables** ``jax_enable_x64`` and
  warns once (``UserWarning``); nothing is ever downcast. Enable it yourself at start-up
  (``jax.config.update("jax_enable_x64", True)``) to avoid the warning.
- JAX copies host buffers that are not 64-byte aligned. Such input is copied here into an aligned
  buffer (the same cost JAX would pay) with a ``UserWarning``; 64-byte aligned input (the feature
  store's output, torch/paddle/TF tensors, ``device.aligned_empty``) passes through zero-copy.
- JAX asks for a DLPack version that cannot mark memory read-only, so NumPy refuses to export a
  read-only array (``BufferError``): such input is copied here, with a ``UserWarning``.
"""

from __future__ import annotations

import warnings
from typing import Any

from ._common import compact, dtype_name, ensure_aligned, import_framework, prepare, user_stacklevel

__all__ = ["NAME", "EXTRA", "ALIGNMENT", "framework", "from_array"]

NAME = "jax"
EXTRA = "jax"
ALIGNMENT = 64
_WIDE_TYPES = frozenset({"int64", "uint64", "float64", "complex128"})
_state = {"warned_x64": False}


def framework():
    """The ``jax`` module (``ImportError`` naming the ``jax`` extra when missing)."""
    return import_framework("jax", EXTRA)


def _ensure_x64(jax, name: str) -> None:
    if jax.config.jax_enable_x64:
        return
    jax.config.update("jax_enable_x64", True)
    if not _state["warned_x64"]:
        _state["warned_x64"] = True
        warnings.warn(
            f"converting a {name} array to JAX needs 64-bit types: gglspeedup enabled "
            "jax_enable_x64 (set jax.config.update('jax_enable_x64', True) at start-up to "
            "silence this)",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


def from_array(array: Any):
    """A ``jax.Array`` sharing ``array``'s memory and dtype (see the module notes for copies)."""
    jax = framework()
    if isinstance(array, jax.Array):
        return array
    source = compact(prepare(array))
    name = dtype_name(source)
    if name in _WIDE_TYPES:
        _ensure_x64(jax, name)
    return jax.dlpack.from_dlpack(ensure_aligned(source, ALIGNMENT, "JAX"))

"""Input checks and conversions for :class:`~gglspeedup.feature.FeatureStore`.

Tables become 2-D C-contiguous NumPy arrays (zero-copy whenever the input already is one);
id arrays become 1-D int32/int64 arrays on the store's device, range-checked before any kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._bfloat16 import bfloat16_table as _bfloat16_table
from .._launch import to_host
from ..device import array_library, as_device_array, on_gpu, reject_meta, to_numpy
from ..validation import ints_beyond_int64
from ._kernels.gather import first_out_of_range

__all__ = ["as_table", "as_ids", "check_mode", "check_out", "open_npy"]

_REJECTED_KINDS = {"O": "object", "U": "str", "S": "bytes", "M": "datetime", "m": "timedelta"}


def as_table(x: Any) -> np.ndarray:
    """``x`` as a 2-D C-contiguous NumPy array (a view when it already is one, else a copy).

    Accepts NumPy arrays (memory-mapped ones included), any host tensor with ``__dlpack__``
    (torch, TensorFlow, Paddle, JAX) and nested sequences. A framework ``bfloat16`` tensor becomes
    an ``ml_dtypes.bfloat16`` array sharing its memory (Paddle's, which NumPy sees as uint16 bits,
    included).

    Raises
    ------
    TypeError
        for object, string, bytes, datetime or structured dtypes.
    ValueError
        when ``x`` is not 2-D.
    """
    if x is None:
        raise TypeError("x must be a 2-D array of feature rows, got None")
    reject_meta("x (the feature table)", x)
    if not isinstance(x, np.ndarray) and "bfloat16" in str(getattr(x, "dtype", "")):
        table = _bfloat16_table(x)
    else:
        try:
            table = to_numpy(x)
        except (TypeError, ValueError) as error:
            raise TypeError(f"x must be an array or a host tensor, got {type(x).__name__}: {error}") from None
    table = np.asarray(table)  # np.memmap and other ndarray subclasses -> plain ndarray view
    kind = table.dtype.kind
    if kind in _REJECTED_KINDS or table.dtype.fields is not None:
        name = _REJECTED_KINDS.get(kind, "structured")
        raise TypeError(f"x must hold numbers (float, int, uint, bool or bfloat16), got {name} dtype {table.dtype}")
    if table.ndim != 2:
        raise ValueError(f"x must be 2-D (num_rows, dim), got shape {table.shape}")
    if table.shape[1] == 0:
        raise ValueError(f"x must have at least one column, got shape {table.shape}")
    # Non-contiguous input (a column slice, a transposed view) is copied once, here.
    return np.ascontiguousarray(table)


def open_npy(path: Any, name: str = "path") -> np.ndarray:
    """The ``.npy`` file at ``path`` memory-mapped read-only and advised for random rows: the table
    of ``from_npy``. ``name`` is the argument's name in the messages.

    Raises
    ------
    FileNotFoundError
        when there is no such file.
    ValueError
        naming ``name`` for a file that is not one ``.npy`` array: a ``.npz`` archive (with the
        line that turns one member into a ``.npy``), pickled data, or bytes NumPy cannot read.
    """
    import os

    from .._storage import advise_random

    try:
        text = os.fspath(path)
    except TypeError:
        raise TypeError(f"{name} must be a path to a .npy file, got {type(path).__name__}") from None
    try:
        table = np.load(text, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ValueError(f"{name} = {text!r} is not a readable .npy feature table: {error}") from None
    if not isinstance(table, np.ndarray):  # np.load gives an NpzFile for a .npz archive
        members = list(getattr(table, "files", []))
        close = getattr(table, "close", None)
        if close is not None:
            close()
        first = members[0] if members else "x"
        raise ValueError(
            f"{name} must be a .npy file (one array, as np.save writes it), got {text!r}, a .npz archive of "
            f"{members}; a .npz cannot be memory-mapped: write the table once as a .npy, e.g. "
            f"np.save('table.npy', np.load({text!r})[{first!r}]), and pass that path"
        )
    advise_random(table)  # a gather reads scattered rows: no read-ahead
    return table


def _device_ids(ids, device):
    """ids as CuPy when they already live on ``device``'s GPU, else as NumPy (checked on the host,
    then uploaded by :func:`as_ids`)."""
    if device.xp is not np and on_gpu(ids):
        return as_device_array(ids, device)
    return to_numpy(ids)


def check_mode(check) -> bool | str:
    """``check`` of ``FeatureStore.gather``: ``True``, ``False`` or ``"deferred"``; raise
    ``ValueError`` naming it otherwise."""
    if isinstance(check, (bool, np.bool_)):
        return bool(check)
    if isinstance(check, str) and check == "deferred":
        return check
    raise ValueError(f"check must be True, False or 'deferred', got {check!r}")


def as_ids(ids: Any, num_rows: int, device, *, check: bool | str = True):
    """``ids`` as a 1-D int32/int64 array of ``device``'s array module, every id in range.

    ``check``: ``False`` or ``"deferred"`` leave ids already on the GPU unchecked (the caller
    trusts them, or the gather kernel checks them); under the simulator, whose device arrays are
    NumPy arrays, ``"deferred"`` leaves NumPy ids to the kernel likewise. Other ids are always
    checked here; so are 2**32 ids or more with ``"deferred"`` (the kernel's key holds a 32-bit
    position).

    Accepts Python sequences, ranges, slices (``store[10:20]``), NumPy and CuPy arrays, torch
    tensors and any DLPack tensor. An empty sequence is an empty int64 array.

    Raises
    ------
    TypeError
        for float, bool, complex or object ids.
    ValueError
        for ids that are not 1-D.
    IndexError
        naming the first id outside ``[0, num_rows)``; negative ids do not wrap around, and Python
        ints beyond int64 (``[2**70]``) are ids out of range too.
    """
    given = ids
    if isinstance(ids, slice):
        ids = np.arange(*ids.indices(num_rows), dtype=np.int64)
    elif isinstance(ids, (list, tuple, range)):
        ids = np.asarray(ids)
    elif isinstance(ids, (bool, np.bool_)) or np.isscalar(ids):
        raise ValueError(f"ids must be a 1-D array of row ids, got the scalar {ids!r}; use store[[{ids!r}]]")
    reject_meta("ids", ids)
    try:
        ids = _device_ids(ids, device)
    except (TypeError, ValueError, BufferError) as error:
        raise TypeError(f"ids must be an integer array or tensor, got {type(ids).__name__}: {error}") from None
    xp = device.xp if array_library(ids) == "cupy" else np
    dtype = ids.dtype
    if dtype.kind not in "iu":
        if ids.size == 0 and dtype.kind == "f":
            return xp.empty(0, dtype=np.int64)  # np.asarray([]) is float64
        exact = ints_beyond_int64(given)  # [2**70]: out of range, though NumPy reads no integer dtype
        if exact is None:
            raise TypeError(f"ids must hold integers, got dtype {dtype}")
        if exact.ndim == 1:
            _raise_out_of_range(exact, num_rows, np)
    if ids.ndim != 1:
        raise ValueError(f"ids must be 1-D, got shape {tuple(ids.shape)}")
    if dtype == np.uint64 and ids.size and int(to_host(ids.max())) >= num_rows:  # sync on a GPU
        _raise_out_of_range(ids, num_rows, xp)
    if dtype not in (np.int32, np.int64):
        ids = ids.astype(np.int64)
    if not ids.flags.c_contiguous:
        ids = xp.ascontiguousarray(ids)
    deferred = check == "deferred" and ids.size < 2**32
    if xp is np and deferred and device.simulated and isinstance(given, np.ndarray):
        return ids  # the simulator's device ids: checked by the gather kernel, as on a GPU
    if xp is np:
        if first_out_of_range(ids, num_rows) >= 0:
            _raise_out_of_range(ids, num_rows, xp)
        if device.xp is not np:  # host ids for a real GPU: checked here, then one upload
            with device:
                ids = device.xp.asarray(ids)
    elif check and not deferred and ids.size and bool(to_host(_any_out_of_range(ids, num_rows))):  # sync: one bool
        _raise_out_of_range(ids, num_rows, xp)
    return ids


def _any_out_of_range(ids, num_rows: int):
    """``((ids < 0) | (ids >= num_rows)).any()`` in two kernels instead of four: a negative id
    viewed as unsigned is at least ``2**31`` (int32) or ``2**63`` (int64), so one unsigned
    comparison finds both. An int32 id is below ``2**31`` when valid, whatever ``num_rows``."""
    limit = min(num_rows, 2**31) if ids.dtype == np.int32 else num_rows
    return (ids.view(np.uint32 if ids.dtype == np.int32 else np.uint64) >= limit).any()


def _raise_out_of_range(ids, num_rows, xp):
    bad = ids >= num_rows if ids.dtype.kind == "u" else (ids < 0) | (ids >= num_rows)
    position = int(xp.argmax(bad))  # sync
    raise IndexError(
        f"ids[{position}] = {int(ids[position])} is out of range for a table of {num_rows} rows "
        f"(ids must lie in [0, {num_rows}); negative ids do not wrap around)"
    )


def check_out(out, num_ids: int, dim: int, dtype: np.dtype, device) -> None:
    """Raise unless ``out`` is a writable C-contiguous (num_ids, dim) array of ``dtype`` on ``device``."""
    xp = device.xp
    if xp is np:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a NumPy array on device {device}, got {type(out).__name__}")
    elif array_library(out) != "cupy":
        raise TypeError(f"out must be a CuPy array on device {device}, got {type(out).__name__}")
    if tuple(out.shape) != (num_ids, dim):
        raise ValueError(f"out must have shape ({num_ids}, {dim}) (len(ids), dim), got {tuple(out.shape)}")
    if out.dtype != dtype:
        raise TypeError(f"out must have the store's dtype {dtype}, got {out.dtype}")
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    if xp is np and not out.flags.writeable:
        raise ValueError("out must be writeable")

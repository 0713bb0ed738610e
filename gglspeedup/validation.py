"""Argument checks shared by every public class: ints, bools, fanouts and node-id arrays.

Each check raises NumPy's error types with a message that names the argument and what was
expected (``TypeError`` for the wrong kind of value, ``ValueError`` for a wrong value,
``IndexError`` where an id is out of range and the caller asks for it), before any kernel runs.
Public classes validate with these and then call kernels; kernels never validate.

>>> check_int("batch_size", 512, minimum=1)
512
>>> parse_fanouts("25, 10, -1")
[25, 10, -1]
>>> check_fanouts([25, 0.5])
Traceback (most recent call last):
    ...
TypeError: fanouts[1] must be an int >= 0 or -1 (all neighbours), got 0.5
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

__all__ = [
    "check_int",
    "check_bool",
    "check_seconds",
    "check_fanouts",
    "parse_fanouts",
    "int_array",
    "list_array",
    "ragged_message",
    "ints_beyond_int64",
    "uint64_beyond_int64",
    "beyond_int64",
    "check_ids_in_range",
    "check_allocation",
    "check_draws",
    "physical_memory",
    "available_memory",
    "as_count",
    "index_dtype",
    "weight_array",
    "check_weights",
]

_INT32_MAX = int(np.iinfo(np.int32).max)
_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)

_FANOUT_LIMIT = 2**62  # fanouts travel as int64 through the kernels


def check_int(
    name: str,
    value: Any,
    *,
    minimum: int | None = None,
    below: int | None = None,
    error: type = ValueError,
    expected: str | None = None,
) -> int:
    """``value`` as a Python int, or raise.

    ``expected`` (e.g. ``"a non-negative int"``) replaces the description of what was wanted in
    both messages.

    Raises
    ------
    TypeError
        unless ``value`` is a Python or NumPy integer (``bool`` is refused: ``True`` is not a count).
    ValueError (or ``error``)
        when ``value < minimum`` or ``value >= below``.
    """
    is_int = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if expected is not None:
        in_range = is_int and (minimum is None or value >= minimum) and (below is None or value < below)
        if not in_range:
            raise (error if is_int else TypeError)(f"{name} must be {expected}, got {value!r}")
        return int(value)
    if not is_int:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and below is not None and not minimum <= value < below:
        raise error(f"{name} must be an int in [{minimum}, {_bound(below)}), got {value}")
    if minimum is not None and value < minimum:
        raise error(f"{name} must be >= {minimum}, got {value}")
    if below is not None and value >= below:
        raise error(f"{name} must be < {_bound(below)}, got {value}")
    return value


def _bound(value: int) -> str:
    return "2**64" if value == 2**64 else str(value)


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a Python bool; anything but ``True`` / ``False`` (NumPy bools included) raises
    ``TypeError``, so a string such as ``"no"`` is never read as true."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True or False), got {type(value).__name__} {value!r}")
    return bool(value)


_SECOND_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def check_seconds(name: str, value: Any) -> float:
    """A duration as float seconds, ``> 0`` and finite: a number of seconds or a string with a
    unit, ``"5s"``, ``"500ms"``, ``"2m"`` / ``"2min"``, ``"1h"`` (a bare number string is seconds).

    >>> check_seconds("deadline", "500ms"), check_seconds("deadline", 2)
    (0.5, 2.0)
    """
    if isinstance(value, str):
        text = value.strip().lower()
        number, unit = text, "s"
        for suffix in sorted(_SECOND_UNITS, key=len, reverse=True):
            if text.endswith(suffix):
                number, unit = text[: -len(suffix)].strip(), suffix
                break
        try:
            seconds = float(number) * _SECOND_UNITS[unit]
        except ValueError:
            raise ValueError(f"{name} must be seconds or a duration such as '5s' or '500ms', got {value!r}") from None
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be seconds (a number) or a string such as '5s', got {type(value).__name__}")
    else:
        seconds = float(value)
    if not np.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{name} must be a positive, finite duration, got {value!r}")
    return seconds


def check_fanouts(fanouts: Any, name: str = "fanouts") -> list[int]:
    """Neighbours per hop, **seed hop first**, as a list of ints: each ``k >= 0`` (``0``: no
    neighbours at that hop) or ``-1`` (every neighbour).

    Accepts a list, a tuple or a 1-D integer array. The one rule for every fanout in the package:
    samplers, loaders, cache policies, demos and benchmarks all use it (:func:`parse_fanouts` for
    command lines).
    """
    if isinstance(fanouts, np.ndarray):
        fanouts = fanouts.tolist() if fanouts.ndim == 1 else fanouts
    if not isinstance(fanouts, (list, tuple)):
        raise TypeError(f"{name} must be a list of ints (e.g. [25, 10]), got {type(fanouts).__name__}")
    if len(fanouts) == 0:
        raise ValueError(f"{name} must name at least one hop, got an empty list")
    checked = []
    for hop, k in enumerate(fanouts):
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"{name}[{hop}] must be an int >= 0 or -1 (all neighbours), got {k!r}")
        if k < -1:
            raise ValueError(f"{name}[{hop}] must be an int >= 0 or -1 (all neighbours), got {int(k)}")
        if k >= _FANOUT_LIMIT:  # ">= 0" alone read as if the value broke that rule
            raise ValueError(f"{name}[{hop}] must be below 2**62 (fanouts travel as int64), got {int(k)}")
        checked.append(int(k))
    return checked


def parse_fanouts(text: Any, name: str = "--fanouts") -> list[int]:
    """A command line's fanouts: ``"25,10"`` -> ``[25, 10]`` (spaces ignored), checked by
    :func:`check_fanouts`. A list or tuple is checked as it is.

    Raises
    ------
    ValueError
        for an empty string, a part that is not an integer, or a fanout below -1 (``name`` in
        the message; an ``argparse`` ``type=`` function may let it through as a usage error).
    """
    if not isinstance(text, str):
        try:
            return check_fanouts(list(text) if isinstance(text, (list, tuple, np.ndarray)) else text, name)
        except TypeError as error:
            raise ValueError(str(error)) from None
    parts = [part.strip() for part in text.split(",")]
    if parts == [""]:
        raise ValueError(f"{name} must list at least one hop, e.g. '25,10'")
    values = []
    for hop, part in enumerate(parts):
        try:
            values.append(int(part))
        except ValueError:
            raise ValueError(f"{name}[{hop}] must be an int >= 0 or -1 (all neighbours), got {part!r}") from None
    try:
        return check_fanouts(values, name)
    except (TypeError, ValueError) as error:
        raise ValueError(str(error)) from None


def int_array(
    name: str,
    values: Any,
    *,
    ndim: int = 1,
    dtype=np.int64,
    expected: str = "must hold integers (int32 or int64)",
    beyond: type = ValueError,
) -> np.ndarray:
    """``values`` (a NumPy array, a list, any host tensor) as a C-contiguous host array of ``dtype``
    (``dtype=None``: int32 and int64 kept as they are, other integer types widened to int64).

    An empty list (NumPy reads it as float64) is an empty array. Copies only when ``values`` is
    not already C-contiguous ``dtype``. ``expected`` says what it must hold, in errors.

    Raises
    ------
    TypeError
        for ``None``, floats, bools, strings or objects.
    ValueError
        when the array is not ``ndim``-D, or a list is ragged (:func:`list_array`).
    ValueError or ``beyond``
        when a value does not fit in int64 (an unsigned one, or a Python int beyond int64 in a
        list: ``[2**70]``); callers whose values are ids checked against a range pass
        ``beyond=IndexError``, since such an id is out of every range.
    """
    from .device import reject_meta, to_numpy

    if values is None:
        raise TypeError(f"{name} must be an integer array, got None")
    reject_meta(name, values)
    array = to_numpy(values) if not isinstance(values, (list, tuple, range)) else list_array(name, values)
    if array.dtype.kind not in "iu":
        if array.dtype.kind == "b":
            raise TypeError(f"{name} must hold integers, got dtype bool")
        if array.size == 0 and array.dtype.kind == "f":
            array = array.astype(np.int64)  # np.asarray([]) is float64: an empty list is fine
        else:
            exact = ints_beyond_int64(values)
            if exact is None:
                raise TypeError(f"{name} {expected}, got dtype {array.dtype}")
            if exact.ndim != ndim:
                raise ValueError(f"{name} must be {ndim}-D, got shape {exact.shape}")
            raise beyond(beyond_int64(name, exact))
    if array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {array.shape}")
    message = beyond_int64(name, array)
    if message is not None:
        raise beyond(message)
    if dtype is None:
        dtype = array.dtype if array.dtype in (np.int32, np.int64) else np.int64
    return np.ascontiguousarray(array, dtype=dtype)


def list_array(name: str, values: Any, expected: str = "a rectangular array") -> np.ndarray:
    """``np.asarray(values)`` of a (nested) list or tuple; a ragged one, whose rows differ in length
    (``[[0, 1, 2], [1, 2]]``), raises ``ValueError`` naming ``name`` (:func:`ragged_message`), where
    NumPy's own error ("inhomogeneous shape after 1 dimensions") named no argument."""
    try:
        return np.asarray(values)
    except ValueError:  # NumPy >= 1.24: a ragged nesting has no array shape
        raise ValueError(ragged_message(name, values, expected)) from None


def ragged_message(name: str, values: Any, expected: str) -> str:
    """The error for a ragged list or tuple ``values`` given as ``name``, which ``must be
    {expected}``: the lengths of its first six rows (``scalar`` for an entry that is not a row), and
    past them the first row whose length differs from the first's (none: rows ragged deeper down)."""
    lengths = [len(row) if hasattr(row, "__len__") else "scalar" for row in values]
    differs = next((i for i, n in enumerate(lengths) if n != lengths[0]), None)
    shown = ", ".join(map(str, lengths[:6])) + (", ..." if len(lengths) > 6 else "")
    if differs is None:
        shown += ", whose own rows differ"
    elif differs >= 6:
        shown += f" ({name}[{differs}]: {lengths[differs]})"
    kind = type(values).__name__
    return f"{name} must be {expected}, got a ragged {kind} of rows of lengths {shown} (no array shape)"


def uint64_beyond_int64(array) -> tuple | None:
    """The index (a tuple) of the first value of a uint64 array (host or GPU) that int64 cannot
    hold, or ``None`` (also for any other dtype). Compared as uint64: NumPy 1.x compares uint64
    with a Python int in float64, where ``2**63`` and int64's largest value are the same number,
    so ``array.max() > 2**63 - 1`` let ``2**63`` through (to wrap to a negative id).

    >>> uint64_beyond_int64(np.array([[0, 1], [2**63, 2]], np.uint64)), uint64_beyond_int64(np.arange(3))
    ((1, 0), None)
    """
    if array.dtype != np.uint64 or not array.size:
        return None
    over = array > np.uint64(_INT64_MAX)
    if not bool(over.any()):  # one sync for GPU arrays
        return None
    return tuple(int(i) for i in np.unravel_index(int(over.argmax()), array.shape))


def beyond_int64(name: str, array) -> str | None:
    """The error message naming the first entry of ``array`` that int64 cannot hold
    (``"name[i, j] = value does not fit in int64"``), or ``None`` when every entry fits: ``array``
    is a uint64 array (host or GPU: one sync, :func:`uint64_beyond_int64`) or the object array of
    exact integers :func:`ints_beyond_int64` returns; any other dtype has nothing beyond int64.
    The one wording of that error, for ids (:func:`int_array`) and integer times alike."""
    if array.dtype == object:
        outside = (array < _INT64_MIN) | (array > _INT64_MAX)
        position = np.unravel_index(int(np.argmax(outside)), array.shape) if outside.any() else None
    else:
        position = uint64_beyond_int64(array)
    if position is None:
        return None
    where = ", ".join(str(int(i)) for i in position)
    return f"{name}[{where}] = {int(array[position])} does not fit in int64"


def ints_beyond_int64(values: Any) -> np.ndarray | None:
    """``values`` as an object array of exact integers when it is a (nested) list or tuple, or an
    object array, of integers only, one at least beyond int64; else ``None``. NumPy reads such a
    list as no integer dtype (``[2**70]`` as object, ``[2**63, -1]`` as float64), yet it holds ids
    out of range, not ids of the wrong type: callers raise their range error for it. Meant for the
    error path, once NumPy's reading has no integer dtype (a Python loop over the entries).

    >>> ints_beyond_int64([[1, 2**70]]).shape, ints_beyond_int64([1, 2.0]), ints_beyond_int64([[1], [2]])
    ((1, 2), None, None)
    """
    if isinstance(values, np.ndarray):
        exact = values if values.dtype == object else None
    elif isinstance(values, (list, tuple)):
        try:
            exact = np.array(values, dtype=object)
        except ValueError:  # ragged in a way NumPy cannot hold even as objects
            exact = None
    else:
        exact = None
    if exact is None or exact.size == 0:
        return None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in exact.flat):
        return None
    return exact if any(not _INT64_MIN <= v <= _INT64_MAX for v in exact.flat) else None


def check_ids_in_range(
    name: str, ids: np.ndarray, upper: int, *, error: type = IndexError, what: str = ""
) -> np.ndarray:
    """Raise ``error`` naming the first entry of the 1-D host array ``ids`` outside ``[0, upper)``
    (negative ids included: nothing wraps around); return ``ids``.

    ``what`` says what the bound is (``"num_nodes"``) in the message.
    """
    if ids.size and (ids.min() < 0 or ids.max() >= upper):
        position = int(np.argmax((ids < 0) | (ids >= upper)))
        bound = f"{what} = {upper}" if what else str(upper)
        raise error(f"{name}[{position}] = {ids[position]} is out of range [0, {bound})")
    return ids


def check_allocation(name: str, count: int, bytes_each: int) -> None:
    """Raise ``ValueError`` naming ``name`` when ``count`` items of ``bytes_each`` bytes would not fit
    in this machine's physical memory: before an allocation NumPy would refuse with a bare
    ``MemoryError`` (or the kernel would grant and then kill the process for)."""
    total = physical_memory()
    if total and count * bytes_each > total:
        raise ValueError(
            f"{name} = {count} needs {count * bytes_each / 2**30:.1f} GiB ({bytes_each} bytes each) but this "
            f"machine has {total / 2**30:.1f} GiB of memory"
        )


# Bytes of a hop's output per drawn edge: edge_index (2 x int64), e_id (int64), the kernel's
# relabel column (int64) and at most one new n_id entry (int64).
BYTES_PER_DRAW = 40


def check_draws(name: str, fanout: int, draws: int, where: str, available: int | None = None, memory: str = "") -> None:
    """Raise ``ValueError`` naming the fanout ``name`` when a hop drawing up to ``draws`` edges
    (``where`` says over what) could not hold its output in the memory available now
    (``available`` bytes of ``memory``, e.g. ``"GPU "``; default :func:`available_memory`):
    before the kernel would fail allocating it, or the system would kill the process."""
    if available is None:
        available = available_memory()
    if available and draws * BYTES_PER_DRAW > available:
        raise ValueError(
            f"{name} = {fanout} draws up to {draws} edges {where}: {draws * BYTES_PER_DRAW / 2**30:.1f} GiB of "
            f"output ({BYTES_PER_DRAW} bytes each), more than the {available / 2**30:.1f} GiB of {memory}memory "
            "available; lower the fanout (or the batch)"
        )


@functools.cache
def physical_memory() -> int:
    """Bytes of physical memory (0 where the platform does not say); read once."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        return 0


def available_memory() -> int:
    """Bytes of memory available now, read at each call: Linux's ``MemAvailable`` (free memory
    plus the page cache the kernel can drop), else the free pages, else :func:`physical_memory`;
    0 where the platform says none of these."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        pass
    try:  # pragma: no cover - not Linux
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_AVPHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover
        return physical_memory()


def as_count(name: str, value) -> int:
    """``value`` as a non-negative Python int (a node or edge count), or raise."""
    return check_int(name, value, minimum=0)


def index_dtype(num_ids: int, dtype=None) -> np.dtype:
    """The dtype of an index array over ``num_ids`` ids: int32 when they fit, else int64; ``dtype``
    (int32 or int64) forces one (int32 for more ids than it holds raises ``ValueError``).

    >>> index_dtype(2**31).name, index_dtype(2**31 + 1).name
    ('int32', 'int64')
    """
    if dtype is None:
        return np.dtype(np.int32 if num_ids - 1 <= _INT32_MAX else np.int64)
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be np.int32, np.int64 or None, got {dtype!r}") from None
    if dtype not in (np.int32, np.int64):
        raise TypeError(f"dtype must be np.int32, np.int64 or None, got {dtype}")
    if dtype == np.int32 and num_ids - 1 > _INT32_MAX:
        raise ValueError(f"dtype=int32 cannot index {num_ids} nodes (ids above 2**31 - 1); use int64 or None")
    return dtype


def weight_array(weights) -> np.ndarray:
    """Edge ``weights`` as a C-contiguous 1-D float32 / float64 host array (other numbers widened to
    float64), or ``TypeError`` / ``ValueError`` naming ``weights``."""
    from .device import to_numpy

    weights = to_numpy(weights) if not isinstance(weights, (list, tuple)) else np.asarray(weights)
    if weights.dtype.kind not in "fiu" or weights.dtype == object:
        raise TypeError(f"weights must be a float array, got dtype {weights.dtype}")
    if weights.ndim != 1:
        raise ValueError(f"weights must be 1-D, got shape {weights.shape}")
    dtype = weights.dtype if weights.dtype in (np.float32, np.float64) else np.float64
    return np.ascontiguousarray(weights, dtype=dtype)


def check_weights(weights: np.ndarray) -> None:
    """Raise ``ValueError`` naming the first weight that is not finite and >= 0."""
    bad = ~np.isfinite(weights) | (weights < 0)
    if bad.any():
        position = int(np.argmax(bad))
        raise ValueError(f"weights must be finite and >= 0: weights[{position}] = {weights[position]}")

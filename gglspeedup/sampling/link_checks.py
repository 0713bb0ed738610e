"""Step 1 of ``sample_links`` (:mod:`.links`): the checks every link call makes before any kernel.

``pairs`` (2, B) on the sampler's device with every id in range, ``labels`` (one finite number per
pair), the options (``negatives``, ``num_negatives``, ``strict_negatives``, ``exclude``,
``total_negatives``) and the memory the negatives would take, in that order
(:func:`check_link_call`), for the untyped and the typed sampler alike; the link loaders check
their options and pairs once at construction with the same functions.
"""

from __future__ import annotations

import numpy as np

from ..device import as_device_array, on_gpu, reject_meta, to_numpy
from ..validation import available_memory, check_bool, check_int, ints_beyond_int64, list_array

__all__ = [
    "NEGATIVES",
    "EXCLUDES",
    "BYTES_PER_NEGATIVE",
    "check_pairs",
    "check_labels",
    "check_negative_count",
    "check_link_options",
    "check_link_call",
]

NEGATIVES = (None, "binary", "per_source", "triplet")
EXCLUDES = (None, "self", "reverse")


def _host_or_device(name: str, values, device):
    """``values`` as an array of the sampler's device: host data as NumPy, GPU data as ``device.xp``."""
    if values is None:
        raise TypeError(f"{name} must be an array, got None")
    reject_meta(name, values)
    if on_gpu(values):
        if not device.is_cuda:
            raise ValueError(
                f"{name} live on a GPU but this sampler runs on {device}; pass host arrays or build the sampler "
                "with device='cuda'"
            )
        return as_device_array(values, device)
    if isinstance(values, (list, tuple)) and len(values) == 0:
        return np.empty(0, np.int64)
    return list_array(name, values) if isinstance(values, (list, tuple)) else to_numpy(values)


def check_pairs(pairs, num_nodes, device, names=("num_nodes", "num_nodes"), check: bool = True):
    """``pairs`` as a C-contiguous int64 (2, B) array of ``device``'s module, every id in range
    (``num_nodes``: one count, or ``(num_sources, num_targets)`` for a typed graph's relation,
    whose errors name the bounds ``names``). ``check=False`` skips the range scan (pairs the
    caller checked once, as the link loaders do: on a GPU the scan is a sync per batch); the
    dtype and shape are checked either way."""
    array = _host_or_device("pairs", pairs, device)
    if array.dtype.kind == "f" and array.size == 0 and isinstance(pairs, (list, tuple)):
        array = np.empty(array.shape, np.int64)  # np.asarray([[], []]) is float64: an empty batch is fine
    if array.dtype.kind not in "iu":
        what = "bool" if array.dtype.kind == "b" else str(array.dtype)
        array = ints_beyond_int64(pairs)  # [[0], [2**70]]: out of range, though NumPy reads no integer dtype
        if array is None:
            raise TypeError(f"pairs must hold integer node ids (int32 or int64), got dtype {what}")
        check = True
    if array.ndim != 2 or array.shape[0] != 2:
        raise ValueError(f"pairs must have shape (2, B): sources then targets, got shape {tuple(array.shape)}")
    xp = np if isinstance(array, np.ndarray) else device.xp
    bounds = (num_nodes, num_nodes) if isinstance(num_nodes, int) else tuple(num_nodes)
    if array.size and check:
        bad = (array < 0) | (array >= xp.asarray(np.array(bounds, np.int64)[:, None]))
        if xp is np:
            out_of_range = bool(bad.any())
        else:
            from .._launch import to_host

            out_of_range = bool(to_host(bad.any()))  # sync: one read of a GPU batch's pairs
        if out_of_range:
            row, column = (int(v) for v in np.unravel_index(int(xp.argmax(bad.reshape(-1))), bad.shape))
            value = int(array[row, column])
            raise IndexError(f"pairs must lie in [0, {names[row]} = {bounds[row]}): pairs[{row}, {column}] = {value}")
    return xp.ascontiguousarray(array, dtype=np.int64)


def check_labels(labels, count: int, device):
    """``labels`` as a 1-D numeric array of ``count`` entries on the sampler's device."""
    array = _host_or_device("labels", labels, device)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"labels must hold numbers (bool, int or float), got dtype {array.dtype}")
    if array.ndim != 1 or array.shape[0] != count:
        raise ValueError(f"labels must have one entry per pair ({count},), got shape {tuple(array.shape)}")
    if array.dtype.kind == "f" and count:
        finite = np.isfinite(array) if isinstance(array, np.ndarray) else device.xp.isfinite(array)
        bad = ~finite
        if isinstance(array, np.ndarray):
            any_bad = bool(bad.any())
        else:
            from .._launch import to_host

            any_bad = bool(to_host(bad.any()))  # sync: one read per link batch with float labels
        if any_bad:
            position = int(bad.argmax())
            raise ValueError(f"labels must be finite numbers: labels[{position}] = {float(array[position])}")
    return array


# Peak bytes a link batch holds per negative: its draws (source, target, flag), the pairs, labels
# and seeds made of them and the relabelled neighbourhood's first entries. Measured 123 for an
# untyped binary batch (peak RSS, 10M and 40M negatives); 24, the draws alone, let a batch of a
# billion negatives through on a 24 GiB machine, which the kernel's allocations then killed.
BYTES_PER_NEGATIVE = 128


def check_negative_count(num_negatives: int, count: int, total: int | None = None) -> None:
    """Refuse ``num_negatives * count`` negatives (``total`` when given: binary's
    ``total_negatives``) that the memory available now cannot hold (:data:`BYTES_PER_NEGATIVE`
    each), before anything is allocated: past it the allocation would fail, or the system would
    kill the process."""
    limit = available_memory()
    asked = num_negatives * count if total is None else total
    if limit and asked * BYTES_PER_NEGATIVE > limit:
        what = f"num_negatives = {num_negatives} for {count} pairs" if total is None else f"total_negatives = {total}"
        raise ValueError(
            f"{what} asks for {asked} negatives "
            f"(about {asked * BYTES_PER_NEGATIVE / 2**30:.3g} GiB at {BYTES_PER_NEGATIVE} bytes "
            f"each), more than the memory available ({limit / 2**30:.3g} GiB)"
        )


def check_link_options(negatives, num_negatives, strict_negatives, exclude) -> tuple:
    if negatives not in NEGATIVES:
        raise ValueError(f"negatives must be one of {NEGATIVES}, got {negatives!r}")
    num_negatives = check_int("num_negatives", num_negatives, minimum=1)
    strict = check_bool("strict_negatives", strict_negatives)
    if exclude not in EXCLUDES:
        raise ValueError(f"exclude must be one of {EXCLUDES}, got {exclude!r}")
    return negatives, num_negatives, strict, exclude


def check_link_call(
    device,
    pairs,
    bounds,
    names,
    labels,
    negatives,
    num_negatives,
    strict_negatives,
    exclude,
    check=True,
    total_negatives=None,
):
    """Step 1, the checks every link call makes, in order: ``pairs`` (:func:`check_pairs` against
    ``bounds``, errors naming ``names``; the range scan only with ``check``), ``labels``, the
    options (``total_negatives``: ``None``, or an int >= 1 with ``negatives="binary"``), the
    negatives' memory.
    Returns ``(pairs, labels, negatives, num_negatives, strict, exclude, total_negatives)``."""
    # check=None or 0 must not skip the range scan unnoticed: unchecked ids read outside the graph
    pairs = check_pairs(pairs, bounds, device, names, check_bool("check", check))
    count = int(pairs.shape[1])
    if labels is not None:
        labels = check_labels(labels, count, device)
    negatives, num_negatives, strict, exclude = check_link_options(negatives, num_negatives, strict_negatives, exclude)
    if total_negatives is not None:
        total_negatives = check_int("total_negatives", total_negatives, minimum=1)
        if negatives != "binary":
            raise ValueError(
                f"total_negatives counts binary negatives: it needs negatives='binary', got negatives={negatives!r}"
            )
    if negatives is not None:
        check_negative_count(num_negatives, count, total_negatives)
    return pairs, labels, negatives, num_negatives, strict, exclude, total_negatives

"""Fused CSR aggregation: the sum or mean of each row's neighbours' feature rows, read in place.

``out[i] = agg_{e in row start + i} scale[indices[e]] * table[indices[e]]`` for the rows
``[start, stop)`` of a CSR graph (row ``v`` lists the nodes whose messages flow into ``v``), where
``agg`` is a sum or a mean over the row's edges (optionally leaving out self loops) and ``scale``
an optional per-node factor (GCN's ``deg ** -0.5``). Each neighbour's row is read once, straight
from the table (a host array, a memory-mapped ``.npy``, or a device array on a GPU), and
accumulated into the output row: no per-edge copy of the rows (what ``index_select`` followed by
``index_add_`` makes), so the working set of a batch is its output rows.

Bits: every output entry is a float32 sum over the row's edges in CSR order (each term the
table's element or, with ``scale``, the float32 product), divided by the count in float32 for a
mean, so the CPU kernel and the CUDA kernel (the same body,
:func:`gglspeedup._aggregate_row.aggregate_row`) give the same bits. On a real GPU the scaled
variant's multiply-add may be contracted to a fused multiply-add (``tools/compile_ptx.py`` allows
it there); the unscaled sum has no multiply. Numba's on-disk cache checks only the kernels' files,
so a change of the body comes with a line here (last: the first version).

The CPU kernel runs one row per ``prange`` iteration under :mod:`gglspeedup._parallel`'s policy
(one thread below :data:`~gglspeedup._parallel.PARALLEL_MIN` ``["products"]`` edge x feature
additions); the CUDA kernel (:mod:`gglspeedup._aggregate_cuda`) runs a warp per row, each lane a
strided share of the features, so the table's row reads are coalesced.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ._aggregate_row import aggregate_row
from ._parallel import kernel_threads, parallel_and_serial, read_only

__all__ = ["csr_aggregate", "TABLE_DTYPES"]

# float32 only: Numba cannot lower float16 arrays on the CPU (NotImplementedError: float16).
TABLE_DTYPES = (np.dtype(np.float32),)


def _aggregate_rows(start, indptr, indices, table, scale, use_scale, skip_loops, mean, out):
    for i in prange(out.shape[0]):
        aggregate_row(i, 0, 1, start, indptr, indices, table, scale, use_scale, skip_loops, mean, out)


_rows_parallel, _rows_serial = parallel_and_serial(_aggregate_rows)

_NO_SCALE = np.zeros(1, np.float32)


def _check(indptr, indices, table, start, stop, scale, out):
    from .validation import check_int

    for name, array in (("indptr", indptr), ("indices", indices)):
        if not hasattr(array, "dtype") or array.ndim != 1 or array.dtype not in (np.int32, np.int64):
            raise TypeError(f"{name} must be a 1-D int32 or int64 array, got {_describe(array)}")
    if not hasattr(table, "dtype") or table.ndim != 2 or np.dtype(table.dtype) not in TABLE_DTYPES:
        raise TypeError(f"table must be a 2-D float32 array, got {_describe(table)}")
    rows = len(indptr) - 1
    if rows < 0:
        raise ValueError("indptr must hold at least one entry (num_rows + 1), got an empty array")
    start = check_int("start", start, minimum=0)
    stop = check_int("stop", stop, minimum=start)
    if stop > rows:
        raise IndexError(f"stop must be at most the graph's rows ({rows}), got {stop}")
    if scale is not None and (
        not hasattr(scale, "dtype") or scale.ndim != 1 or scale.dtype != np.float32 or len(scale) < table.shape[0]
    ):
        raise TypeError(f"scale must be a 1-D float32 array of one entry per table row ({table.shape[0]}), "
                        f"got {_describe(scale)}")  # fmt: skip
    if out is not None and (
        not hasattr(out, "dtype") or out.dtype != np.float32 or tuple(out.shape) != (stop - start, table.shape[1])
    ):
        raise ValueError(f"out must be a float32 array of shape {(stop - start, table.shape[1])}, got {_describe(out)}")
    return start, stop


def _describe(array) -> str:
    if hasattr(array, "dtype") and hasattr(array, "shape"):
        return f"{array.dtype} array of shape {tuple(array.shape)}"
    return type(array).__name__


def _check_edges(indptr, indices, start, stop, table_rows, xp) -> None:
    """``IndexError`` unless the rows' pointers are ordered and their neighbour ids are table rows."""
    pointers = indptr[start : stop + 1]
    first, last = (int(v) for v in xp.asarray(pointers[xp.asarray([0, -1])]).tolist()) if stop > start else (0, 0)
    if stop > start and (bool((xp.diff(pointers) < 0).any()) or first < 0 or last > len(indices)):
        raise IndexError(f"indptr[{start}:{stop + 1}] must be non-decreasing pointers into indices ({len(indices)})")
    ids = indices[first:last]
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= table_rows):
        raise IndexError(f"indices of rows [{start}, {stop}) must be table rows in [0, {table_rows}), "
                         f"got ids in [{int(ids.min())}, {int(ids.max())}]")  # fmt: skip


def csr_aggregate(indptr, indices, table, start=0, stop=None, *, mean=False, scale=None, skip_loops=False,
                  out=None, device="cpu", check=True):  # fmt: skip
    """Sum or mean of the neighbours' table rows for the CSR rows ``[start, stop)``, fused.

    Parameters
    ----------
    indptr : int32 or int64 array, shape (num_rows + 1,)
        Row pointers (row ``v`` lists the nodes whose messages flow into ``v``).
    indices : int32 or int64 array, shape (num_edges,)
        Neighbour ids, rows of ``table``.
    table : float32 array, shape (num_nodes, F)
        The rows read (a ``np.memmap`` too; on a CUDA device, a device array).
    start, stop : int
        The CSR rows aggregated (``stop`` defaults to ``num_rows``).
    mean : bool
        Divide each sum by the number of edges taken (empty rows stay 0).
    scale : float32 array, shape (num_nodes,), optional
        A factor per neighbour id (e.g. GCN's ``deg ** -0.5``), multiplied into its row.
    skip_loops : bool
        Leave out edges from a row's own node (``indices[e] == row``).
    out : float32 array, shape (stop - start, F), optional
        Written in place (and returned); a new array otherwise.
    device : str or Device
        ``"cpu"`` or ``"cuda[:i]"`` (arrays of that device; the simulator's are host arrays).
    check : bool
        Check that the rows' neighbour ids are rows of ``table`` (one pass over their edges).

    Returns
    -------
    float32 array, shape (stop - start, F)

    Raises
    ------
    TypeError
        an index array not 1-D int32 / int64, ``table`` not a 2-D float32 array, ``scale``
        not float32 with one entry per table row.
    ValueError
        ``out`` of the wrong dtype or shape, ``stop < start``, an empty ``indptr``.
    IndexError
        ``stop`` past the rows, a neighbour id outside the table (with ``check``).

    Examples
    --------
    >>> import numpy as np
    >>> from gglspeedup._aggregate import csr_aggregate
    >>> indptr, indices = np.array([0, 2, 2, 3]), np.array([1, 2, 0])
    >>> table = np.array([[1.0], [2.0], [4.0]], dtype=np.float32)
    >>> csr_aggregate(indptr, indices, table, mean=True)[:, 0].tolist()
    [3.0, 0.0, 1.0]
    """
    from .device import as_device

    device = as_device(device)
    xp = device.xp
    stop = len(indptr) - 1 if stop is None else stop
    start, stop = _check(indptr, indices, table, start, stop, scale, out)
    if check:
        _check_edges(indptr, indices, start, stop, table.shape[0], xp)
    if out is None:
        out = xp.empty((stop - start, table.shape[1]), dtype=np.float32)
    use_scale = scale is not None
    scale = scale if use_scale else xp.asarray(_NO_SCALE)
    rows = stop - start
    if device.is_cuda:
        from ._aggregate_cuda import aggregate_cuda

        aggregate_cuda(device, start, indptr, indices, table, scale, use_scale, skip_loops, mean, out)
        return out
    work = (int(indptr[stop]) - int(indptr[start])) * table.shape[1] if rows else 0
    with kernel_threads(work, "products") as region:
        kernel = _rows_parallel if region.current > 1 else _rows_serial
        indptr, indices, table, scale = (read_only(a) for a in (indptr, indices, table, scale))  # one variant
        kernel(start, indptr, indices, table, scale, use_scale, bool(skip_loops), bool(mean), out)
    return out

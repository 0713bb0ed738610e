"""Row gather kernels for the CPU, and the row-copy body the CUDA driver shares.

Kernels see only NumPy/CuPy/device arrays and scalars and never validate: :mod:`..store` checks
ids, shapes and dtypes before calling them. Every table is viewed as rows of unsigned *words*
(uint64 / uint32 / uint16 / uint8, the widest that divides the row's byte width and the buffers'
alignment), so float32, float16, bfloat16, float64, int64 and uint8 rows all go through the same
compiled code, and a 512-byte float32 row moves as 64 uint64 words.

- :func:`copy_row` is the only row-copy body: inlined into the CPU drivers here and compiled as a
  CUDA device function by :mod:`.gather_cuda` (the two-tier CUDA driver, in its own module so
  that a CPU-only store never imports ``numba.cuda``).
- :func:`gather_cpu` is the CPU driver, ``out[i] = table[ids[i]]`` with ``prange`` over blocks of
  output rows; :func:`gather_serial` its serial twin for small batches.
- :func:`copy_contiguous` is the benchmark's ceiling: the same loop without the indirection.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..._threading import prefer_tbb

prefer_tbb()  # before any parallel launch: see gglspeedup._threading

__all__ = [
    "copy_row",
    "gather_cpu",
    "gather_serial",
    "first_out_of_range",
    "word_dtype",
    "SERIAL_BYTES",
    "copy_contiguous",
]

# Below this many output bytes the serial driver runs (~0.1 ms per MiB): a parallel launch saves
# at most that on an idle machine, but on an oversubscribed one GNU OpenMP's default waiting made
# each launch cost ~20 ms (5000 rows: 16 ms parallel against 0.06 ms serial at load average 6).
SERIAL_BYTES = 1 << 20

# Output rows per prange iteration (256 KiB of 128-wide float32 rows): the loop body is a whole
# block, so the per-iteration overhead of the parallel loop vanishes next to the copies.
_BLOCK_ROWS = 512


# inline="always" matters: called out of line, the stepped loop below is neither specialised for
# step == 1 nor vectorised, and the CPU gather ran at 0.4 GB/s instead of 3. The CUDA driver
# compiles this same body separately with cuda.jit(device=True) (see gather_cuda.py).
@register_jitable(inline="always")
def copy_row(table, row, out, out_row, start, step):
    """Copy words ``start, start + step, ...`` of ``table[row]`` into ``out[out_row]``.

    ``table`` and ``out`` are 2-D word arrays of the same width. ``start=0, step=1`` copies the whole
    row (CPU); on CUDA ``start`` is the thread's lane in its group and ``step`` the group size.
    """
    if step == 1:  # the CPU case: a unit-stride loop that LLVM vectorises
        for j in range(start, table.shape[1]):
            out[out_row, j] = table[row, j]
    else:
        for j in range(start, table.shape[1], step):
            out[out_row, j] = table[row, j]


@njit(parallel=True, cache=True, nogil=True)
def gather_cpu(table, ids, out):
    """``out[i] = table[ids[i]]`` for every ``i``, in parallel over blocks of output rows.

    table : (num_rows, words) unsigned words; ids : (m,) int32/int64, all in range;
    out : (m, words), same word dtype.
    """
    m = ids.shape[0]
    num_blocks = (m + _BLOCK_ROWS - 1) // _BLOCK_ROWS
    for block in prange(num_blocks):
        for i in range(block * _BLOCK_ROWS, min(m, (block + 1) * _BLOCK_ROWS)):
            copy_row(table, ids[i], out, i, 0, 1)


@njit(cache=True, nogil=True)
def gather_serial(table, ids, out):
    """Serial twin of :func:`gather_cpu` for small batches (a distinct function: its own cache slot)."""
    for i in range(ids.shape[0]):
        copy_row(table, ids[i], out, i, 0, 1)


@njit(cache=True, nogil=True)
def first_out_of_range(ids, num_rows):
    """Position of the first id outside ``[0, num_rows)``, or -1 when all are in range."""
    for i in range(ids.shape[0]):
        value = ids[i]
        if value < 0 or value >= num_rows:
            return i
    return -1


_WORDS = (np.uint64, np.uint32, np.uint16, np.uint8)


def word_dtype(row_bytes: int, *addresses: int) -> np.dtype:
    """The widest unsigned word that divides ``row_bytes`` and every address in ``addresses``."""
    for word in _WORDS:
        size = np.dtype(word).itemsize
        if row_bytes % size == 0 and all(address % size == 0 for address in addresses):
            return np.dtype(word)
    return np.dtype(np.uint8)


@njit(parallel=True, cache=True, nogil=True)
def copy_contiguous(source, out):
    """``out[:] = source[:]`` in parallel blocks of rows: the ceiling a gather of the same bytes is
    measured against (same blocking and threads as :func:`gather_cpu`, no indirection)."""
    m = source.shape[0]
    num_blocks = (m + _BLOCK_ROWS - 1) // _BLOCK_ROWS
    for block in prange(num_blocks):
        for i in range(block * _BLOCK_ROWS, min(m, (block + 1) * _BLOCK_ROWS)):
            copy_row(source, i, out, i, 0, 1)

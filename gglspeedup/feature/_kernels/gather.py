"""Row gather kernels: one row-copy body, a parallel CPU driver and a two-tier CUDA driver.

Kernels see only NumPy/CuPy/device arrays and scalars and never validate: :mod:`..store` checks
ids, shapes and dtypes before calling them. Every table is viewed as rows of unsigned *words*
(uint64 / uint32 / uint16 / uint8, the widest that divides the row's byte width and the buffers'
alignment), so float32, float16, bfloat16, float64, int64 and uint8 rows all go through the same
compiled code, and a 512-byte float32 row moves as 64 uint64 words.

- :func:`copy_row` is the only row-copy body, compiled for the CPU (inlined into
  :func:`gather_cpu`) and for CUDA (a device function of the CUDA driver).
- :func:`gather_cpu` is the CPU driver: ``out[i] = table[ids[i]]``, ``prange`` over blocks of
  output rows.
- :func:`.gather_cuda.gather_two_tier` is the CUDA driver (its own module, so that a CPU-only
  store never imports ``numba.cuda``). For each output row it reads
  ``loc = location[ids[i]]``: ``loc >= 0`` is a slot of the device table, ``loc < 0`` is row
  ``-1 - loc`` of the pinned host table, read in place over PCIe (UVA zero-copy). A group of
  ``group`` consecutive threads (a warp, or a power-of-two part of one for narrow rows) strides over
  the row's words, so loads are coalesced; one launch serves a mixed hit/miss batch.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

__all__ = [
    "copy_row",
    "gather_cpu",
    "gather_serial",
    "first_out_of_range",
    "word_dtype",
    "SERIAL_BYTES",
    "copy_contiguous",
    "prefetch",
]

# Below this many output bytes the serial driver wins: waking the thread pool costs ~10-50 us.
SERIAL_BYTES = 1 << 16

# Output rows per parallel task: large enough to amortise scheduling, small enough that the two
# cores finish together when other processes steal time from one of them.
_BLOCK_ROWS = 512
# The CPU driver asks for row ids[i + _PREFETCH_ROWS] while it copies row ids[i]: random rows miss
# every cache and the TLB, and out-of-order execution alone keeps too few of them in flight.
_PREFETCH_ROWS = 16
# At most this many bytes of a row are prefetched (longer rows stream well by themselves).
_PREFETCH_BYTES = 1024
_CACHE_LINE = 64


@intrinsic
def prefetch(typingctx, array, row, column):
    """Hint the CPU to load ``array[row, column]``'s cache line (LLVM ``llvm.prefetch``, read,
    keep in all cache levels). No effect on results; a no-op where the target has no prefetch."""
    signature = types.void(array, row, column)

    def codegen(context, builder, sig, args):
        array_type = sig.args[0]
        data = context.make_array(array_type)(context, builder, args[0])
        indices = [context.cast(builder, value, kind, types.intp) for value, kind in zip(args[1:], sig.args[1:])]
        pointer = cgutils.get_item_pointer(context, builder, array_type, data, indices, wraparound=False)
        byte_pointer = builder.bitcast(pointer, ir.IntType(8).as_pointer())
        suffix = "p0" if str(byte_pointer.type) == "ptr" else "p0i8"  # opaque (LLVM >= 15) or typed pointers
        int32 = ir.IntType(32)
        function_type = ir.FunctionType(ir.VoidType(), [byte_pointer.type, int32, int32, int32])
        function = cgutils.get_or_insert_function(builder.module, function_type, f"llvm.prefetch.{suffix}")
        builder.call(function, [byte_pointer, int32(0), int32(3), int32(1)])
        return context.get_dummy_value()

    return signature, codegen


@register_jitable
def prefetch_row(table, row):
    """Prefetch the first :data:`_PREFETCH_BYTES` of ``table[row]`` (CPU only)."""
    step = max(1, _CACHE_LINE // table.itemsize)
    stop = min(table.shape[1], _PREFETCH_BYTES // table.itemsize)
    for j in range(0, stop, step):
        prefetch(table, row, j)


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
        start = block * _BLOCK_ROWS
        stop = min(m, start + _BLOCK_ROWS)
        for i in range(start, min(stop, start + _PREFETCH_ROWS)):
            prefetch_row(table, ids[i])
        for i in range(start, stop):
            if i + _PREFETCH_ROWS < stop:
                prefetch_row(table, ids[i + _PREFETCH_ROWS])
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

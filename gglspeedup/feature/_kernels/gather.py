"""Row gather kernels for the CPU.

Kernels see only NumPy/CuPy/device arrays and scalars and never validate: :mod:`..store` checks
ids, shapes and dtypes before calling them. Every table is viewed as rows of unsigned *words*
(uint64 / uint32 / uint16 / uint8, the widest that divides the row's byte width and the buffers'
alignment), so float32, float16, bfloat16, float64, int64 and uint8 rows all go through the same
compiled code, and a 512-byte float32 row moves as 64 uint64 words.

- :func:`copy_row` is the CPU's plain (cached-store) row copy. The CUDA driver
  (:mod:`.gather_cuda`, in its own module so that a CPU-only store never imports ``numba.cuda``)
  copies a row with a group of lanes instead, loads batched before stores; both compute
  ``out[i] = table[ids[i]]`` and are tested against it bit for bit.
- :func:`gather_host` picks the CPU driver: :func:`gather_cpu` (``prange`` over blocks of output
  rows) or its serial twin :func:`gather_serial` for small batches, with streamed stores for
  large outputs. Both prefetch the row :data:`PREFETCH_BYTES` of output ahead
  (:mod:`gglspeedup._intrinsics`).
- :func:`copy_contiguous` is the benchmark's ceiling: the same loop without the indirection;
  :func:`read_rows` its random-row ceiling: the same rows read, nothing written.

Why the CPU gather prefetches and streams (2M x 128 float32 table, 200k random rows, 2 cores):
the plain row loop ran at 10-12 GB/s, about numpy.take's rate; announcing each row 4 KiB of
output ahead raised it to 14-16 GB/s, and non-temporal stores on top (no read-for-ownership of
the output lines) to 16-20 GB/s; see BENCHMARKS.md for the side-by-side runs.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..._intrinsics import prefetch, prefetch_row, store_fence, stream_line
from ..._parallel import lock_for, pays, read_only

__all__ = [
    "copy_row",
    "gather_host",
    "gather_cpu",
    "gather_serial",
    "first_out_of_range",
    "word_dtype",
    "STREAM_BYTES",
    "PREFETCH_BYTES",
    "copy_contiguous",
    "read_rows",
    "gather_cached",
]

# Below gglspeedup._parallel's PARALLEL_MIN["bytes"] of output the serial driver runs (~0.1 ms per
# MiB): a parallel launch saves at most that on an idle machine, but on an oversubscribed one GNU
# OpenMP's default waiting made each launch cost ~20 ms (5000 rows: 16 ms parallel against 0.06 ms
# serial at load average 6). Parallel drivers run under the kernel lock, as every family's.

# From this many output bytes on, rows are written with streamed (non-temporal) stores. An output
# this large would not stay in the caches for the model to read anyway; a smaller one is written
# through the cache, where the next layer finds it.
STREAM_BYTES = 16 << 20

# Each row is prefetched when the loop is this many output bytes before it (4 KiB measured best
# among 1, 2, 4, 8 and 16 KiB for 64-, 400-, 512- and 2408-byte rows), and at most this many
# bytes of it (a wider row's tail is a sequential stream the hardware prefetcher follows).
PREFETCH_BYTES = 4096

# Output rows per prange iteration (256 KiB of 128-wide float32 rows): the loop body is a whole
# block, so the per-iteration overhead of the parallel loop vanishes next to the copies.
_BLOCK_ROWS = 512


# inline="always" matters: called out of line, the loop below is not vectorised, and the CPU
# gather ran at 0.4 GB/s instead of 3.
@register_jitable(inline="always")
def copy_row(table, row, out, out_row):
    """``out[out_row] = table[row]``: a unit-stride loop that LLVM vectorises.

    ``table`` and ``out`` are 2-D word arrays of the same width.
    """
    for j in range(table.shape[1]):
        out[out_row, j] = table[row, j]


@register_jitable(inline="always")
def _stream_row(table, row, out, out_row, out_address):
    """``out[out_row] = table[row]``: the 64-byte-aligned lines of the output row with streamed
    stores, the unaligned head and tail (rows that straddle lines) with plain ones."""
    words, size = table.shape[1], table.itemsize
    per_line = 64 // size
    head = min(words, ((-(out_address + out_row * words * size)) & 63) // size)
    for j in range(head):
        out[out_row, j] = table[row, j]
    j = head
    while j + per_line <= words:
        stream_line(table, row, out, out_row, j)
        j += per_line
    for k in range(j, words):
        out[out_row, k] = table[row, k]


@register_jitable(inline="always")
def _copy_row_to(table, row, out, out_row, stream, out_address):
    """``out[out_row] = table[row]`` with streamed stores (:func:`_stream_row`) or through the cache."""
    if stream:
        _stream_row(table, row, out, out_row, out_address)
    else:
        copy_row(table, row, out, out_row)


@register_jitable(inline="always")
def _prefetch_plan(table):
    """``(ahead, lines)``: rows are prefetched ``ahead`` rows (PREFETCH_BYTES of output) before
    they are read, ``lines`` cache lines of each (+1: rows straddle lines; at most
    PREFETCH_BYTES of a wide row, whose tail the hardware prefetcher follows)."""
    row_bytes = table.shape[1] * table.itemsize
    return max(1, PREFETCH_BYTES // row_bytes), min((row_bytes + 63) // 64 + 1, PREFETCH_BYTES // 64)


@register_jitable(inline="always")
def _gather_rows(table, ids, out, start, stop, stream, out_address):
    """Rows ``start..stop`` of the gather, each prefetched PREFETCH_BYTES of output ahead."""
    ahead, lines = _prefetch_plan(table)
    count = ids.shape[0]
    for i in range(start, stop):
        if i + ahead < count:
            prefetch_row(table, ids[i + ahead], lines)
        _copy_row_to(table, ids[i], out, i, stream, out_address)
    if stream:
        store_fence()


@njit(parallel=True, cache=True, nogil=True)
def gather_cpu(table, ids, out, stream):
    """``out[i] = table[ids[i]]`` for every ``i``, in parallel over blocks of output rows.

    table : (num_rows, words) unsigned words; ids : (m,) int32/int64, all in range;
    out : (m, words), same word dtype; stream : write with non-temporal stores (whole 64-byte
    output lines only; see :mod:`gglspeedup._intrinsics`).
    """
    m = ids.shape[0]
    address = np.int64(out.ctypes.data)  # int64 arithmetic below, whatever Numba makes of uint64 mixes
    num_blocks = (m + _BLOCK_ROWS - 1) // _BLOCK_ROWS
    for block in prange(num_blocks):
        _gather_rows(table, ids, out, block * _BLOCK_ROWS, min(m, (block + 1) * _BLOCK_ROWS), stream, address)


@njit(cache=True, nogil=True)
def gather_serial(table, ids, out, stream):
    """Serial twin of :func:`gather_cpu` for small batches (a distinct function: its own cache slot)."""
    _gather_rows(table, ids, out, 0, ids.shape[0], stream, np.int64(out.ctypes.data))


def gather_host(table, ids, out) -> None:
    """``out[i] = table[ids[i]]`` on the CPU with the driver the output size calls for.

    ``table`` and ``out`` are word views as the kernels take them; ``ids`` are in range.
    """
    parallel = pays(out.nbytes, "bytes")
    kernel = gather_cpu if parallel else gather_serial
    with lock_for(parallel):  # read-only views: a mapped table's variant (_parallel.read_only)
        kernel(read_only(table), read_only(ids), out, out.nbytes >= STREAM_BYTES)


@register_jitable(inline="always")
def _gather_cached_rows(cache, table, location, ids, out, start, stop, stream, out_address):
    """Rows ``start..stop`` from the cache (``location[id] >= 0``: its slot) or the table; the
    number read from the cache. Each row's location is fetched two strides ahead and the row
    itself one stride ahead (both are random reads; the second needs the first)."""
    ahead, lines = _prefetch_plan(table)
    count = ids.shape[0]
    hits = 0
    for i in range(start, stop):
        if i + 2 * ahead < count:
            prefetch(location, ids[i + 2 * ahead])
        if i + ahead < count:
            slot = location[ids[i + ahead]]
            if slot >= 0:
                prefetch_row(cache, slot, lines)
            else:
                prefetch_row(table, ids[i + ahead], lines)
        slot = location[ids[i]]
        if slot >= 0:
            _copy_row_to(cache, slot, out, i, stream, out_address)
            hits += 1
        else:
            _copy_row_to(table, ids[i], out, i, stream, out_address)
    if stream:
        store_fence()
    return hits


@njit(parallel=True, cache=True, nogil=True)
def _gather_cached_parallel(cache, table, location, ids, out, stream):
    m = ids.shape[0]
    address = np.int64(out.ctypes.data)
    num_blocks = (m + _BLOCK_ROWS - 1) // _BLOCK_ROWS
    hits = np.zeros(num_blocks, np.int64)
    for block in prange(num_blocks):
        lo = block * _BLOCK_ROWS
        hits[block] = _gather_cached_rows(
            cache, table, location, ids, out, lo, min(m, lo + _BLOCK_ROWS), stream, address
        )
    return hits.sum()


@njit(cache=True, nogil=True)
def _gather_cached_serial(cache, table, location, ids, out, stream):
    return _gather_cached_rows(cache, table, location, ids, out, 0, ids.shape[0], stream, np.int64(out.ctypes.data))


def gather_cached(cache, table, location, ids, out) -> int:
    """``out[i]`` = row ``ids[i]``, read from ``cache[location[id]]`` where ``location[id] >= 0``
    and from ``table[id]`` elsewhere: the CPU's two-tier gather (a RAM cache in front of a
    memory-mapped table). Returns how many rows came from the cache. ``cache``, ``table`` and
    ``out`` are word views of one word type; ``ids`` are in range."""
    parallel = pays(out.nbytes, "bytes")
    with lock_for(parallel):
        driver = _gather_cached_parallel if parallel else _gather_cached_serial
        cache, table, ids = read_only(cache), read_only(table), read_only(ids)
        return int(driver(cache, table, location, ids, out, out.nbytes >= STREAM_BYTES))


@njit(cache=True, nogil=True)
def first_out_of_range(ids, num_rows):
    """Position of the first id outside ``[0, num_rows)``, or -1 when all are in range.

    One pass takes the largest id viewed as unsigned (a negative id is then at least ``2**63``):
    a loop without an exit, which the compiler vectorizes (13 against 106 us for 53k int64 ids,
    a PyG loader batch's ``n_id``, checked on every gather). Only when that finds a bad id does a
    second pass look for the first one.
    """
    count = ids.shape[0]
    top = np.uint64(0)
    for i in range(count):
        top = max(top, np.uint64(ids[i]))
    if num_rows > 0 and top < np.uint64(num_rows):
        return -1
    for i in range(count):
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
def read_rows(table, ids):
    """Every word of rows ``table[ids[i]]`` read and nothing written: the random-row ceiling a
    gather of the same rows is measured against (same blocks, threads and row prefetching as
    :func:`gather_cpu`). The words are XOR-folded into the result so the reads stay."""
    m = ids.shape[0]
    words = table.shape[1]
    ahead, lines = _prefetch_plan(table)
    num_blocks = (m + _BLOCK_ROWS - 1) // _BLOCK_ROWS
    folded = np.zeros(num_blocks, table.dtype)
    for block in prange(num_blocks):
        acc = folded[block]
        for i in range(block * _BLOCK_ROWS, min(m, (block + 1) * _BLOCK_ROWS)):
            if i + ahead < m:
                prefetch_row(table, ids[i + ahead], lines)
            row = ids[i]
            for j in range(words):
                acc ^= table[row, j]
        folded[block] = acc
    total = folded.dtype.type(0)
    for block in range(num_blocks):
        total ^= folded[block]
    return total


@njit(parallel=True, cache=True, nogil=True)
def copy_contiguous(source, out, stream):
    """``out[:] = source[:]`` in parallel blocks of rows: the ceiling a gather of the same bytes is
    measured against (same blocking, threads and store kind as :func:`gather_cpu`, no
    indirection, no prefetch: the hardware prefetcher follows a contiguous read by itself)."""
    m = source.shape[0]
    address = np.int64(out.ctypes.data)  # int64 arithmetic below, whatever Numba makes of uint64 mixes
    num_blocks = (m + _BLOCK_ROWS - 1) // _BLOCK_ROWS
    for block in prange(num_blocks):
        for i in range(block * _BLOCK_ROWS, min(m, (block + 1) * _BLOCK_ROWS)):
            _copy_row_to(source, i, out, i, stream, address)
        if stream:
            store_fence()

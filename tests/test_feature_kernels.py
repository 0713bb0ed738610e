"""The CPU gather kernels' prefetched and streamed-store paths write exactly ``table[ids]``.

The streamed path copies each output row's 64-byte-aligned lines with non-temporal stores and its
unaligned head and tail with plain ones, so it is checked at every head offset a row can have:
row widths that are and are not multiples of 64 bytes, output buffers offset from a 64-byte
boundary, and every word size. Bytes outside the output rows must stay untouched. The kernels get
their table and ids read-only, as the drivers hand them over (``gglspeedup._parallel.read_only``):
the variants the warm-up compiled.
"""

import numpy as np
import pytest

from gglspeedup._parallel import read_only
from gglspeedup.device import aligned_empty
from gglspeedup.feature import FeatureStore
from gglspeedup.feature._kernels.gather import (
    STREAM_BYTES,
    copy_contiguous,
    gather_cpu,
    gather_host,
    gather_serial,
    word_dtype,
)

WORDS = [np.uint64, np.uint32, np.uint16, np.uint8]


def _words(rows, width, word, seed=0):
    info = np.iinfo(word)
    return read_only(np.random.default_rng(seed).integers(0, info.max, (rows, width), dtype=word, endpoint=True))


def _offset_out(count, width, word, offset_bytes):
    """A (count, width) word array starting ``offset_bytes`` past a 64-byte boundary, inside a
    guard-filled buffer, and the whole buffer (to check nothing outside the rows was written)."""
    size = np.dtype(word).itemsize
    backing = aligned_empty((count * width * size + offset_bytes + 256,), np.uint8)
    backing[:] = 0xA5
    out = backing[offset_bytes : offset_bytes + count * width * size].view(word).reshape(count, width)
    return out, backing


@pytest.mark.parametrize("driver", [gather_cpu, gather_serial], ids=["parallel", "serial"])
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "cached"])
@pytest.mark.parametrize("word", WORDS, ids=lambda w: np.dtype(w).name)
@pytest.mark.parametrize("width_bytes", [8, 24, 64, 72, 400, 512, 520, 2408])
def test_gather_kernels_equal_numpy_at_every_alignment(driver, stream, word, width_bytes):
    size = np.dtype(word).itemsize
    width = width_bytes // size
    table = _words(97, width, word, seed=width_bytes)
    ids = read_only(np.random.default_rng(1).integers(0, 97, 1203))  # > 2 parallel blocks, repeats
    for offset in sorted({0, size, 8, 24, 40, 56}):  # every word size divides these
        out, backing = _offset_out(len(ids), width, word, offset)
        driver(table, ids, out, stream)
        np.testing.assert_array_equal(out, table[ids])
        assert (backing[:offset] == 0xA5).all() and (backing[offset + out.nbytes :] == 0xA5).all()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "cached"])
def test_int32_ids_and_last_rows_prefetched_past_the_table_end(stream):
    # The last row of the table prefetches lines past its end (a hint that never faults).
    table = _words(33, 100, np.uint64)
    ids = read_only(np.array([32, 0, 32, 31, 32] * 300, dtype=np.int32))
    out, _ = _offset_out(len(ids), 100, np.uint64, 8)
    gather_cpu(table, ids, out, stream)
    np.testing.assert_array_equal(out, table[ids])


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "cached"])
@pytest.mark.parametrize("offset", [0, 8, 48])
def test_contiguous_copy_ceiling_copies_exactly(stream, offset):
    source = _words(1500, 65, np.uint64)
    out, backing = _offset_out(1500, 65, np.uint64, offset)
    copy_contiguous(source, out, stream)
    np.testing.assert_array_equal(out, source)
    assert (backing[offset + out.nbytes :] == 0xA5).all()


def test_store_output_past_the_stream_threshold_is_exact_fresh_and_into_a_misaligned_buffer():
    # 400-byte float32 rows (ogbn-products' width): rows straddle cache lines, so every output row
    # mixes plain head/tail stores with streamed lines.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3000, 100)).astype(np.float32)
    ids = rng.integers(0, 3000, STREAM_BYTES // x[0].nbytes + 123)
    assert len(ids) * x[0].nbytes >= STREAM_BYTES
    store = FeatureStore(x)
    np.testing.assert_array_equal(store[ids], x[ids])
    out, _ = _offset_out(len(ids), 100, np.float32, 4)  # 4-byte aligned only: uint32 words
    assert word_dtype(x[0].nbytes, out.ctypes.data) == np.uint32
    assert store.gather(ids, out=out) is out
    np.testing.assert_array_equal(out, x[ids])


def test_gather_host_is_exact_for_serial_and_parallel_sizes():
    table = _words(50, 16, np.uint64)
    for count in (1, 10, 9000):  # 128 B, 1.25 KiB, 1.1 MiB (parallel)
        ids = np.arange(count) % 50
        out = np.empty((count, 16), np.uint64)
        gather_host(table, ids, out)
        np.testing.assert_array_equal(out, table[ids])

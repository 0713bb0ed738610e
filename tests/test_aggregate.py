"""The fused CSR aggregation kernel (gglspeedup._aggregate) against a NumPy reference, CPU and CUDA."""

from __future__ import annotations

import numpy as np
import pytest

from gglspeedup._aggregate import csr_aggregate
from gglspeedup.device import as_device

from conftest import assert_same_bits


def _reference(indptr, indices, table, start, stop, *, mean=False, scale=None, skip_loops=False):
    """The same float32 operations in the same order (edges in CSR order), one entry at a time."""
    out = np.zeros((stop - start, table.shape[1]), np.float32)
    for i, row in enumerate(range(start, stop)):
        count = 0
        for e in range(indptr[row], indptr[row + 1]):
            j = indices[e]
            if skip_loops and j == row:
                continue
            count += 1
            out[i] += table[j] if scale is None else scale[j] * table[j]  # float32 elementwise
        if mean and count:
            out[i] /= np.float32(count)
    return out


def _graph(num_nodes=40, seed=0, index_dtype=np.int64, isolated=(5, 17)):
    rng = np.random.default_rng(seed)
    degree = rng.integers(0, 9, num_nodes)
    degree[list(isolated)] = 0  # empty rows (nodes without in-edges)
    indptr = np.concatenate([[0], np.cumsum(degree)]).astype(index_dtype)
    indices = rng.integers(0, num_nodes, int(indptr[-1])).astype(index_dtype)
    indices[indices == 23] = 22  # node 23 has no out-edges either: isolated
    indices[indptr[3]] = 3  # a self loop, twice
    indices[indptr[3] + 1] = 3
    return indptr, indices


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("mean", [False, True])
@pytest.mark.parametrize("skip_loops", [False, True])
@pytest.mark.parametrize("scaled", [False, True])
def test_equals_numpy_reference_bit_for_bit(index_dtype, mean, skip_loops, scaled):
    indptr, indices = _graph(index_dtype=index_dtype)
    rng = np.random.default_rng(1)
    table = rng.standard_normal((40, 7)).astype(np.float32)
    scale = rng.random(40).astype(np.float32) if scaled else None
    for start, stop in ((0, 40), (3, 19), (17, 18), (40, 40)):
        out = csr_aggregate(indptr, indices, table, start, stop, mean=mean, scale=scale, skip_loops=skip_loops)
        expected = _reference(indptr, indices, table, start, stop, mean=mean, scale=scale, skip_loops=skip_loops)
        assert out.dtype == np.float32 and out.shape == (stop - start, 7)
        np.testing.assert_array_equal(out, expected)
    out = csr_aggregate(indptr, indices, table, mean=True)
    assert not out[5].any() and not out[17].any()  # empty rows stay 0, no division by zero


def test_parallel_region_gives_the_serial_bits():
    # enough edge x feature additions for the parallel kernel (PARALLEL_MIN["products"])
    rng = np.random.default_rng(2)
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 40, 3000))])
    indices = rng.integers(0, 3000, indptr[-1])
    table = rng.standard_normal((3000, 64)).astype(np.float32)
    assert indptr[-1] * 64 >= 1 << 20
    whole = csr_aggregate(indptr, indices, table, mean=True)
    np.testing.assert_array_equal(whole[:50], _reference(indptr, indices, table, 0, 50, mean=True))
    pieces = [csr_aggregate(indptr, indices, table, s, min(s + 7, 3000), mean=True) for s in range(0, 3000, 7)]
    np.testing.assert_array_equal(whole, np.concatenate(pieces))  # small calls run the serial kernel


def test_reads_a_memory_mapped_table_and_writes_out_in_place(tmp_path):
    indptr, indices = _graph(seed=3)
    table = np.random.default_rng(4).standard_normal((40, 5)).astype(np.float32)
    np.save(tmp_path / "t.npy", table)
    mapped = np.load(tmp_path / "t.npy", mmap_mode="r")
    out = np.full((10, 5), np.nan, np.float32)
    result = csr_aggregate(indptr, indices, mapped, 10, 20, out=out)
    assert result is out
    np.testing.assert_array_equal(out, _reference(indptr, indices, table, 10, 20))


def test_cuda_kernel_gives_the_cpu_bits(device):
    device = as_device(device)
    xp = device.xp
    indptr, indices = _graph(num_nodes=12, seed=5, isolated=(2,))
    table = np.random.default_rng(6).standard_normal((12, 3)).astype(np.float32)
    scale = np.random.default_rng(7).random(12).astype(np.float32)
    for kwargs in ({"mean": True}, {"scale": scale, "skip_loops": True}):
        cpu = csr_aggregate(indptr, indices, table, 1, 9, **kwargs)
        on_device = {k: xp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        out = csr_aggregate(xp.asarray(indptr), xp.asarray(indices), xp.asarray(table), 1, 9, device=device,
                            **on_device)  # fmt: skip
        assert_same_bits(device, out, cpu)


def test_bad_inputs_are_named_before_the_kernel():
    indptr, indices = _graph()
    table = np.zeros((40, 3), np.float32)
    with pytest.raises(TypeError, match="table must be a 2-D float32 array, got float16"):
        csr_aggregate(indptr, indices, table.astype(np.float16))
    with pytest.raises(TypeError, match="table must be a 2-D float32 array, got float32 array of shape \\(40,\\)"):
        csr_aggregate(indptr, indices, table[:, 0])
    with pytest.raises(TypeError, match="indices must be a 1-D int32 or int64 array, got float64"):
        csr_aggregate(indptr, indices.astype(np.float64), table)
    with pytest.raises(TypeError, match="indptr must be a 1-D int32 or int64 array, got list"):
        csr_aggregate([0, 1], indices, table)
    with pytest.raises(IndexError, match=r"stop must be at most the graph's rows \(40\), got 41"):
        csr_aggregate(indptr, indices, table, 0, 41)
    with pytest.raises(ValueError, match="stop"):
        csr_aggregate(indptr, indices, table, 5, 4)
    with pytest.raises(IndexError, match=r"indices of rows \[0, 40\) must be table rows in \[0, 30\)"):
        csr_aggregate(indptr, indices, table[:30])
    bad = indices.copy()
    bad[0] = -1
    with pytest.raises(IndexError, match=r"must be table rows in \[0, 40\), got ids in \[-1,"):
        csr_aggregate(indptr, bad, table)
    with pytest.raises(IndexError, match="must be non-decreasing pointers"):
        csr_aggregate(indptr[::-1].copy(), indices, table)
    with pytest.raises(TypeError, match="scale must be a 1-D float32 array of one entry per table row"):
        csr_aggregate(indptr, indices, table, scale=np.ones(40))
    with pytest.raises(ValueError, match=r"out must be a float32 array of shape \(40, 3\)"):
        csr_aggregate(indptr, indices, table, out=np.zeros((40, 2), np.float32))

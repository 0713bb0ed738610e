"""FeatureStore: gathered rows equal x[ids] exactly, on the CPU and on the (simulated) GPU."""

import numpy as np
import pytest

from gglspeedup import _launch
from gglspeedup.feature import FeatureStore

from conftest import to_host

ml_dtypes = pytest.importorskip("ml_dtypes")

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int64, np.uint8]


def _table(rows, dim, dtype, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((rows, dim)) * 100
    return values.astype(dtype)


def _same(got, expected):
    """Exact, bitwise equality (bfloat16 compared through its bits; NaN-free inputs)."""
    got = to_host(got)
    assert got.shape == expected.shape
    assert got.dtype.itemsize == expected.dtype.itemsize
    width = f"u{expected.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(width), expected.view(width))


def _budget(store_rows, row_bytes, ratio):
    return int(store_rows * ratio) * row_bytes


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dim", [1, 3, 8])
def test_rows_equal_x_for_every_dtype_and_width(device, dtype, dim):
    x = _table(20, dim, dtype)
    ids = np.array([3, 19, 0, 3, 7, 7, 12, 1])
    store = FeatureStore(x, device=device, cache_size=_budget(20, x[0].nbytes, 0.3), policy=np.arange(20)[::-1])
    _same(store[ids], x[ids])
    assert store.shape == (20, dim) and len(store) == 20 and store.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dim", [1000, 4100])
def test_wide_rows_beyond_1024_columns(device, dim):
    x = _table(6, dim, np.float32)
    store = FeatureStore(x, device=device, cache_size=2 * x[0].nbytes, policy=np.array([4, 1]))
    ids = np.array([5, 4, 1, 4])
    _same(store[ids], x[ids])


@pytest.mark.parametrize("ratio", [0.0, 0.25, 1.0, 3.0])
def test_cache_ratios_from_none_to_larger_than_table(device, ratio):
    x = _table(16, 4, np.float32, seed=1)
    order = np.random.default_rng(2).permutation(16)
    store = FeatureStore(x, device=device, cache_size=int(x.nbytes * ratio), policy=order)
    ids = np.random.default_rng(3).integers(0, 16, 24)
    _same(store[ids], x[ids])
    expected_cached = min(16, int(x.nbytes * ratio) // x[0].nbytes) if store.device.is_cuda else 0
    assert store.num_cached == expected_cached


def test_repeated_unordered_and_empty_ids(device):
    x = _table(10, 5, np.float64)
    store = FeatureStore(x, device=device, cache_size=4 * x[0].nbytes, policy=np.array([9, 8, 0, 1]))
    ids = np.array([9, 9, 9, 0, 5, 0, 2, 9])
    _same(store[ids], x[ids])
    for empty in ([], np.empty(0, np.int64), np.empty(0, np.int32)):
        out = store[empty]
        assert to_host(out).shape == (0, 5)


def test_id_kinds_list_int32_uint64_slice_torch(device):
    x = _table(12, 3, np.float32)
    store = FeatureStore(x, device=device)
    _same(store[[11, 0, 4]], x[[11, 0, 4]])
    _same(store[np.array([2, 5], dtype=np.int32)], x[[2, 5]])
    _same(store[np.array([7, 1], dtype=np.uint64)], x[[7, 1]])
    _same(store[np.array([6, 3], dtype=np.uint8)], x[[6, 3]])
    _same(store[2:9:3], x[2:9:3])
    torch = pytest.importorskip("torch")
    _same(store[torch.tensor([10, 2, 10])], x[[10, 2, 10]])


def test_gather_writes_into_a_reused_buffer(device):
    x = _table(15, 6, np.float32)
    store = FeatureStore(x, device=device, cache_size=5 * x[0].nbytes, policy=np.arange(5))
    buffer = store.device.xp.empty((4, 6), np.float32)
    for ids in ([0, 14, 3, 3], [13, 1, 2, 12]):
        returned = store.gather(ids, out=buffer)
        assert returned is buffer
        _same(buffer, x[ids])


def test_misaligned_out_buffer_still_exact(device):
    x = _table(9, 4, np.float32)  # 16-byte rows would move as uint64 words
    store = FeatureStore(x, device=device, cache_size=3 * x[0].nbytes, policy=np.array([8, 0, 4]))
    raw = store.device.xp.zeros(3 * 16 + 4, np.uint8)[4:]  # 4-byte offset from a 16-byte aligned start
    out = raw.view(np.float32).reshape(3, 4)
    ids = [8, 5, 0]
    store.gather(ids, out=out)
    _same(out, x[ids])


@pytest.mark.parametrize("pin", ["copy", "register"])
def test_read_only_ids_and_a_read_only_mapped_table_registered_in_place(device, pin, tmp_path):
    x = _table(12, 3, np.float32)
    np.save(tmp_path / "x.npy", x)
    store = FeatureStore.from_npy(tmp_path / "x.npy", device=device, cache_size=2 * x[0].nbytes, policy=[3, 4], pin=pin)
    ids = np.array([0, 3, 11, 4, 0])
    ids.flags.writeable = False  # e.g. ids from np.frombuffer or a mapped split file
    _same(store[ids], x[ids])
    _same(store[np.array([5, 3])], x[[5, 3]])  # writable ids too, whatever the table's tier
    assert store.stats()["rows_device"] == 3  # the cached rows 3, 4, 3: GPU cache, or RAM cache before the mapping


def test_stats_add_up_and_reset(device):
    x = _table(12, 4, np.float32)
    cached = np.array([2, 7, 11])
    store = FeatureStore(x, device=device, cache_size=3 * x[0].nbytes, policy=cached)
    batches = [np.array([2, 3, 2, 11, 0]), np.array([7, 7, 5])]
    for ids in batches:
        store[ids]
    stats = store.stats()
    ids = np.concatenate(batches)
    hits = int(np.isin(ids, cached).sum()) if store.device.is_cuda else 0
    assert stats["lookups"] == len(ids) and stats["calls"] == 2
    assert stats["rows_device"] == stats["hits"] == hits and stats["rows_host"] == len(ids) - hits
    assert stats["bytes_device"] == hits * 16 and stats["bytes_host"] == (len(ids) - hits) * 16
    assert stats["hit_rate"] == pytest.approx(hits / len(ids))
    store.reset_stats()
    assert store.stats()["lookups"] == 0 and store.stats()["rows_device"] == 0
    assert store.stats()["hit_rate"] == 0.0


def test_out_of_range_ids_raise_index_error_naming_the_first(device):
    store = FeatureStore(_table(8, 2, np.float32), device=device)
    with pytest.raises(IndexError, match=r"ids\[2\] = 8 is out of range"):
        store[[0, 7, 8, 9]]
    with pytest.raises(IndexError, match=r"ids\[1\] = -1"):
        store[np.array([3, -1, -2])]
    with pytest.raises(IndexError, match=r"ids\[0\] = 18446744073709551615"):
        store[np.array([2**64 - 1], dtype=np.uint64)]


def _on_device(store, ids):
    """``ids`` as the store's device array: CuPy on a GPU, NumPy on the CPU and the simulator
    (whose device arrays are NumPy)."""
    return store.device.xp.asarray(ids)


@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_deferred_check_gathers_exactly_x_ids(device, id_dtype):
    x = _table(40, 3, np.float32)
    store = FeatureStore(x, device=device, cache_size=_budget(40, 12, 0.5), policy=np.arange(39, -1, -1))
    ids = np.random.default_rng(4).integers(0, 40, 25).astype(id_dtype)
    ids[:2] = (0, 39)  # both ends of the range
    device_ids = _on_device(store, ids)
    _launch.reset_counters()
    got = store.gather(device_ids, check="deferred")
    if store.device.is_cuda:  # one launch (the check is in the kernel) and no sync
        assert _launch.counters() == {"launches": 1, "syncs": 0}
    _same(got, x[ids])
    out = store.gather(_on_device(store, ids[::-1].copy()), out=store.gather(ids[:25]), check="deferred")
    _same(out, x[ids[::-1]])
    store.synchronize()  # nothing recorded: nothing raised
    _same(store.gather(ids[:3]), x[ids[:3]])


@pytest.mark.parametrize(
    ("id_dtype", "bad"),
    [(np.int32, -1), (np.int32, 40), (np.int32, -(2**31)), (np.int64, -1), (np.int64, 40), (np.int64, 2**62)],
)
def test_deferred_check_zeroes_bad_rows_and_raises_once_at_the_next_gather(device, id_dtype, bad):
    x = _table(40, 3, np.float32) + 1000  # no row of zeros
    store = FeatureStore(x, device=device, cache_size=_budget(40, 12, 0.5), policy=np.arange(40))
    ids = np.array([5, 39, bad, 0, bad, 21], dtype=id_dtype)  # rows 5, 0 cached; 39, 21 in host memory
    if not store.device.is_cuda:  # the CPU checks host ids at once: "deferred" is True there
        with pytest.raises(IndexError, match=rf"ids\[2\] = {bad} is out of range"):
            store.gather(ids, check="deferred")
        return
    got = to_host(store.gather(_on_device(store, ids), check="deferred"))  # its stream has run: the copy too
    good = np.array([0, 1, 3, 5])
    _same(got[good], x[ids[good]])
    assert not got[[2, 4]].any()  # zeros, nothing read outside the table
    with pytest.raises(
        IndexError, match=rf"ids\[2\] = {bad} is out of range for a table of 40 rows.*deferred gather 1"
    ):
        store.gather([1, 2])  # any mode raises it, before gathering
    _same(store.gather([1, 2]), x[[1, 2]])  # once: the record was cleared
    store.synchronize()


def test_deferred_check_raises_at_synchronize_naming_the_earliest_call(device):
    x = _table(10, 2, np.float32)
    store = FeatureStore(x, device=device, cache_size=_budget(10, 8, 1.0), policy=np.arange(10))
    if not store.device.is_cuda:
        with pytest.raises(IndexError, match=r"ids\[1\] = 10 is out of range"):
            store.gather(np.array([3, 10]), check="deferred")
        store.synchronize()  # the CPU has nothing pending
        return
    _same(store.gather(_on_device(store, np.array([3, 4])), check="deferred"), x[[3, 4]])
    store.gather(_on_device(store, np.array([3, 10, -4])), check="deferred")
    with pytest.raises(IndexError, match=r"ids\[1\] = 10 is out of range.*deferred gather 2"):
        store.synchronize()
    store.synchronize()  # raised once
    _same(store.gather(_on_device(store, np.array([9])), check="deferred"), x[[9]])
    store.synchronize()


@pytest.mark.parametrize("check", ["maybe", "Deferred", 1, None])
def test_check_must_be_a_bool_or_deferred(device, check):
    store = FeatureStore(_table(4, 2, np.float32), device=device)
    with pytest.raises(ValueError, match=r"check must be True, False or 'deferred', got"):
        store.gather([0, 1], check=check)


def test_bad_id_kinds_raise_before_any_kernel(device):
    store = FeatureStore(_table(8, 2, np.float32), device=device)
    with pytest.raises(TypeError, match="integers"):
        store[np.array([1.0, 2.0])]
    with pytest.raises(TypeError, match="integers"):
        store[np.array([True, False])]
    with pytest.raises(ValueError, match="1-D"):
        store[np.array([[1, 2]])]
    with pytest.raises(ValueError, match="scalar"):
        store[3]


def test_bad_out_buffers_are_rejected(device):
    x = _table(8, 2, np.float32)
    store = FeatureStore(x, device=device)
    xp = store.device.xp
    with pytest.raises(ValueError, match="shape"):
        store.gather([1, 2], out=xp.empty((3, 2), np.float32))
    with pytest.raises(TypeError, match="dtype"):
        store.gather([1, 2], out=xp.empty((2, 2), np.float64))
    with pytest.raises(ValueError, match="C-contiguous"):
        store.gather([1, 2], out=xp.empty((2, 4), np.float32)[:, ::2])
    with pytest.raises(TypeError, match="array"):
        store.gather([1, 2], out=[[0, 0], [0, 0]])


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_large_cpu_batches_take_the_parallel_driver_and_stay_exact(dtype):
    from gglspeedup._parallel import PARALLEL_MIN

    SERIAL_BYTES = PARALLEL_MIN["bytes"]  # below it the serial driver runs
    x = _table(5000, 257, dtype)  # odd row width: 1028-byte / 257-byte rows (uint32 / uint8 words)
    ids = np.random.default_rng(4).integers(0, 5000, 2 * SERIAL_BYTES // x[0].nbytes + 7)
    store = FeatureStore(x)
    assert len(ids) * x[0].nbytes > SERIAL_BYTES
    _same(store[ids], x[ids])
    _same(store[ids.astype(np.int32)], x[ids])

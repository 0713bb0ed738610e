"""FeatureStore inputs: table kinds (memmap, DLPack tensors, bfloat16), bad tables and budgets."""

import numpy as np
import pytest

from gglspeedup.device import as_device
from gglspeedup.feature import FeatureStore

from conftest import to_host


def _x(rows=10, dim=4, dtype=np.float32):
    return (np.arange(rows * dim) % 251).reshape(rows, dim).astype(dtype)


def test_c_contiguous_numpy_table_is_used_without_a_copy_on_cpu():
    x = _x()
    store = FeatureStore(x)
    x[3] = -1.0  # the store reads the caller's memory
    np.testing.assert_array_equal(store[[3]], x[[3]])


def test_non_contiguous_table_is_copied_once(device):
    wide = _x(10, 8)
    x = wide[:, ::2]  # strided columns
    store = FeatureStore(x, device=device, cache_size=2 * 16, policy=np.array([0, 9]))
    ids = [9, 0, 4]
    np.testing.assert_array_equal(to_host(store[ids]), x[ids])
    wide[4] = 0  # the copy does not follow the original
    assert to_host(store[[4]]).any()


@pytest.mark.slow
def test_memory_mapped_npy_table(tmp_path, device):
    # float16 rows of 8 (16 bytes: 8-byte words), as the warm-up's mapped float16 table (its
    # kernel variants, read-only rows of uint64 words): 7 columns moved as uint16 words compiled two
    # gathers of their own, about 8 s; odd widths' words are test_feature_disk's parameters.
    x = _x(30, 8, np.float16)
    path = tmp_path / "x.npy"
    np.save(path, x)
    mapped = np.load(path, mmap_mode="r")
    store = FeatureStore(mapped, device=device, cache_size=3 * 16, policy=np.array([29, 0, 5]))
    ids = np.array([29, 1, 5, 5, 17])
    np.testing.assert_array_equal(to_host(store[ids]), x[ids])


def test_torch_tables_float_and_bfloat16(device):
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = torch.arange(40, dtype=torch.float32).reshape(10, 4)
    ids = [9, 2, 2]
    np.testing.assert_array_equal(to_host(FeatureStore(x, device=device)[ids]), x.numpy()[ids])
    xb = x.to(torch.bfloat16)
    store = FeatureStore(xb, device=device, cache_size=8, policy=np.array([2]))
    assert store.dtype == np.dtype(ml_dtypes.bfloat16)
    got = to_host(store[ids]).view(np.uint16)
    np.testing.assert_array_equal(got, xb.view(torch.int16).numpy()[ids].view(np.uint16))


def test_jax_table_through_dlpack():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.arange(24, dtype=jnp.float32).reshape(6, 4)
    np.testing.assert_array_equal(FeatureStore(x)[[5, 0]], np.asarray(x)[[5, 0]])


@pytest.mark.parametrize("shape", [(10,), (2, 3, 4), (4, 0)])
def test_tables_that_are_not_2d_with_columns_raise(shape):
    with pytest.raises(ValueError, match="x must"):
        FeatureStore(np.zeros(shape, np.float32))


@pytest.mark.parametrize("values", [np.array([["a", "b"]]), np.empty((2, 2), dtype=object)])
def test_object_and_string_tables_raise_type_error(values):
    with pytest.raises(TypeError, match="x must hold numbers"):
        FeatureStore(values)


def test_none_table_raises():
    with pytest.raises(TypeError, match="x must be a 2-D array"):
        FeatureStore(None)


@pytest.mark.parametrize(
    "budget, error",
    [("lots", ValueError), (-1, ValueError), ("1.5Q", ValueError), ([1], TypeError), (True, TypeError)],
)
def test_malformed_budgets_raise(budget, error):
    with pytest.raises(error, match="size"):
        FeatureStore(_x(), cache_size=budget)


def test_budget_strings_are_parsed_as_powers_of_1024(device):
    store = FeatureStore(_x(4096, 1), device=device, cache_size="0.5K", policy=np.arange(4096))
    assert store.cache_size == 512
    assert store.num_cached == (128 if store.device.is_cuda else 0)  # 4-byte rows


def test_cpu_store_has_one_tier_whatever_the_budget():
    store = FeatureStore(_x(), cache_size="1G", policy=np.arange(10))
    assert store.num_cached == 0 and store.cached_ids.size == 0
    np.testing.assert_array_equal(store.cache_map, -np.ones(10, np.int64))
    store[[1, 2]]
    assert store.stats()["rows_host"] == 2 and store.stats()["bytes_host"] == 32


def test_cache_larger_than_free_device_memory_names_both_numbers(device, monkeypatch):
    import gglspeedup.feature.store as store_module

    monkeypatch.setattr(store_module, "device_free_bytes", lambda device: 1000)
    x = _x(100, 4)  # 16-byte rows
    if as_device(device).is_cuda:
        with pytest.raises(ValueError, match=r"needs 1824 bytes .* only 1000 bytes are free"):
            # 64 cached rows of 16 B + 100 map entries of 8 B
            FeatureStore(x, device=device, cache_size="1K", policy=np.arange(100))
    else:  # one tier on the CPU: the budget is never checked against memory
        assert FeatureStore(x, device=device, cache_size="1T").num_cached == 0


def test_paddle_bfloat16_table_is_read_as_bfloat16_not_uint16():
    paddle = pytest.importorskip("paddle")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.arange(24, dtype=np.float32).reshape(6, 4)
    store = FeatureStore(paddle.to_tensor(values).astype("bfloat16"))
    assert store.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(store[[5, 0]].astype(np.float32), values[[5, 0]])  # exact in bf16


def test_tensorflow_string_tables_and_ids_raise_type_errors_instead_of_aborting():
    # Read through DLPack, a string tensor failed TensorFlow's fatal DataTypeCanUseMemcpy check
    # and killed the interpreter; read as values, it is refused as any non-numeric input is.
    tf = pytest.importorskip("tensorflow")
    with pytest.raises(TypeError, match="x must hold numbers"):
        FeatureStore(tf.constant([["a", "b"]]))
    with pytest.raises(TypeError, match="ids must hold integers"):
        FeatureStore(_x())[tf.constant(["1"])]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("num_rows", [5, 2**31, 2**40])
def test_the_device_range_check_finds_negative_and_too_large_ids_in_one_comparison(dtype, num_rows):
    from gglspeedup.feature._inputs import _any_out_of_range

    info = np.iinfo(dtype)
    for values in ([0, 4], [0, 5], [-1, 0], [info.max], [info.min], [3, -2, 1]):
        ids = np.array(values, dtype=dtype)
        assert bool(_any_out_of_range(ids, num_rows)) == bool(((ids < 0) | (ids >= num_rows)).any()), values

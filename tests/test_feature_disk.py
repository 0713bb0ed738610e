"""Feature tables on disk: FeatureStore / HeteroFeatureStore over memory-mapped .npy files, with a
RAM cache of the hottest rows on the CPU; every gather equals x[ids]."""

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.feature._tiers import HostCacheTier, HostTier


@pytest.fixture
def table_file(tmp_path):
    def make(dtype=np.float32, shape=(600, 7)):
        x = (np.random.default_rng(0).standard_normal(shape) * 50).astype(dtype)
        path = tmp_path / f"x_{np.dtype(dtype).name}_{shape[1]}.npy"
        np.save(path, x)
        return path, x

    return make


@pytest.mark.parametrize("dtype, dim", [(np.float32, 7), (np.float16, 128), (np.uint8, 5)])
@pytest.mark.parametrize("cached_rows", [0, 50, 600])
@pytest.mark.slow
def test_gathers_from_a_mapped_table_equal_x_of_ids(table_file, dtype, dim, cached_rows):
    path, x = table_file(dtype, (600, dim))
    order = np.random.default_rng(1).permutation(600)
    row_bytes = dim * np.dtype(dtype).itemsize
    store = gg.FeatureStore.from_npy(path, cache_size=cached_rows * row_bytes, policy=order)
    assert isinstance(store._tier, HostCacheTier if cached_rows else HostTier)
    assert store.num_cached == cached_rows and set(store.cached_ids.tolist()) == set(order[:cached_rows].tolist())
    rng = np.random.default_rng(2)
    for ids in (rng.integers(0, 600, 5000), np.array([5, 5, 0, 599]), np.array([], np.int64), rng.integers(0, 600, 7)):
        assert np.array_equal(store[ids], x[ids])
    ids = rng.integers(0, 600, 20_000)  # past the serial cut-off: the parallel kernel
    out = np.empty((len(ids), dim), dtype)
    store.reset_stats()
    assert store.gather(ids, out=out) is out and np.array_equal(out, x[ids])
    stats = store.stats()
    expected_hits = int(np.isin(ids, order[:cached_rows]).sum())
    assert stats["hits"] == expected_hits and stats["rows_host"] == len(ids) - expected_hits


def test_a_mapped_table_gathers_with_the_kernels_of_the_same_table_in_memory(table_file):
    # The gathers get read-only views (gglspeedup._parallel.read_only), so a mapped table (read-only
    # pages) runs the variants its in-memory twin compiled, the ones the warm-up takes.
    from gglspeedup.feature._kernels.gather import gather_cpu, gather_serial

    path, x = table_file(np.float32, (600, 8))
    ids = np.random.default_rng(3).integers(0, 600, 40_000)  # 1.3 MB: the parallel kernel; 7: the serial
    in_memory = gg.FeatureStore(x.copy())
    assert np.array_equal(in_memory[ids], x[ids]) and np.array_equal(in_memory[ids[:7]], x[ids[:7]])
    variants = set(gather_cpu.signatures), set(gather_serial.signatures)
    mapped = gg.FeatureStore.from_npy(path, cache_size=0)
    assert isinstance(mapped._tier, HostTier)
    assert np.array_equal(mapped[ids], x[ids]) and np.array_equal(mapped[ids[:7]], x[ids[:7]])
    assert all(variants) and (set(gather_cpu.signatures), set(gather_serial.signatures)) == variants


def test_a_misaligned_out_buffer_is_filled_exactly(table_file):
    path, x = table_file(np.float32, (600, 8))
    store = gg.FeatureStore.from_npy(path, cache_size=100 * 32, policy=np.arange(600))
    raw = np.empty(10 * 32 + 4, np.uint8)
    out = raw[4:].view(np.float32).reshape(10, 8)  # 4-byte aligned: not a multiple of the 8-byte word
    ids = np.array([1, 500, 2, 99, 100, 0, 3, 4, 599, 7])
    store.gather(ids, out=out)
    assert np.array_equal(out, x[ids]) and store.stats()["hits"] == 7  # ids below 100 are cached


def test_rows_wider_than_a_gather_chunk_are_gathered_one_per_chunk(table_file, monkeypatch):
    # A row wider than GATHER_CHUNK_BYTES made more chunks than ids, and an empty chunk reached the
    # RAM cache's misaligned-out staging, which failed reshaping zero rows ("cannot reshape ... (0,newaxis)").
    from gglspeedup.feature import store as store_module

    path, x = table_file(np.float32, (600, 8))
    monkeypatch.setattr(store_module, "GATHER_CHUNK_BYTES", 20)  # under one 32-byte row
    store = gg.FeatureStore.from_npy(path, cache_size=100 * 32, policy=np.arange(600))
    ids = np.array([1, 500, 2, 99, 100, 0, 3])
    out = np.empty(7 * 32 + 4, np.uint8)[4:].view(np.float32).reshape(7, 8)  # misaligned: staged
    assert store.gather(ids, out=out) is out and np.array_equal(out, x[ids])
    assert np.array_equal(store[ids], x[ids]) and store.stats()["hits"] == 2 * 5


def test_degree_policy_caches_the_best_connected_rows(table_file):
    path, _ = table_file(np.float32, (600, 4))
    graph = gg.datasets.synthetic_powerlaw(600, 6)
    store = gg.FeatureStore.from_npy(path, cache_size=60 * 16, graph=graph)
    degree = graph.degree()
    assert degree[store.cached_ids].min() >= np.sort(degree)[::-1][59]
    assert store.cache_map[store.cached_ids].tolist() == list(range(60))


def test_each_page_of_a_mapped_table_is_asked_for_once_and_cached_rows_never(table_file):
    path, x = table_file(np.float32, (5000, 8))  # 32-byte rows: 128 to a 4 KiB page
    store = gg.FeatureStore.from_npy(path, cache_size=100 * 32, policy=np.arange(600, 5000)[::-1].copy())
    cold = store._tier._cold
    cached = store.cached_ids
    assert cold.advise(cached) == 0  # rows served from RAM are not read from the file
    ids = np.array([0, 1, 127, 130, 4999])
    asked = cold.advise(ids)
    assert 2 <= asked <= 4 and cold.advise(ids) == 0  # rows 0..127 share a page or two; nothing twice
    assert np.array_equal(store[np.arange(5000)], x)
    plain = gg.FeatureStore.from_npy(path)  # no cache: the single tier asks too
    assert plain._tier._cold.advise(np.array([10, 11])) >= 1


def test_mapped_tables_are_advised_for_random_reads(table_file):
    from gglspeedup._storage import advise_random

    path, x = table_file()
    assert advise_random(np.load(path, mmap_mode="r")) and not advise_random(x)


def test_tables_in_memory_stay_one_tier_and_bad_files_are_named(tmp_path, table_file):
    _, x = table_file()
    assert isinstance(gg.FeatureStore(x, cache_size="1M", policy=np.arange(600))._tier, HostTier)
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(ValueError, match=r"bad.npy' is not a readable .npy feature table"):
        gg.FeatureStore.from_npy(tmp_path / "bad.npy")
    with pytest.raises(FileNotFoundError):
        gg.FeatureStore.from_npy(tmp_path / "absent.npy")


def test_typed_tables_on_disk_share_one_budget(tmp_path):
    rng = np.random.default_rng(3)
    relations = {
        ("a", "to", "b"): rng.integers(0, 40, size=(2, 200)),
        ("b", "to", "a"): rng.integers(0, 40, size=(2, 150)),
    }
    graph = gg.HeteroGraph(relations, {"a": 40, "b": 40})
    x = {"a": rng.standard_normal((40, 6)).astype(np.float32), "b": rng.standard_normal((40, 3)).astype(np.float64)}
    for t, table in x.items():
        np.save(tmp_path / f"{t}.npy", table)
    store = gg.HeteroFeatureStore.from_npy(
        {"a": tmp_path / "a.npy", "b": tmp_path / "b.npy"}, cache_size=10 * 24, graph=graph
    )
    assert store.cached_bytes <= 10 * 24 and sum(store.policy_info["num_cached"].values()) > 0
    ids = {"a": rng.integers(0, 40, 300), "b": rng.integers(0, 40, 200)}
    rows = store[ids]
    assert all(np.array_equal(rows[t], x[t][ids[t]]) for t in x)
    with pytest.raises(TypeError, match=r"paths must be a dict"):
        gg.HeteroFeatureStore.from_npy([tmp_path / "a.npy"])

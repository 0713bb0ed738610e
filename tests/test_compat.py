"""The original gglspeedup names behave as that project's README shows, on top of the modern API."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import gglspeedup as gg
from gglspeedup.compat import DEFAULT_SIZES, CGPUFeature, GPUSampler, Multi_CGPUFeature, MultiGPUSampler
from gglspeedup.testing import check_sample

from conftest import to_host


@pytest.fixture
def seed_csr():
    # The original README's construction: csr_matrix((ones, edge_index)), row u = targets of u.
    rng = np.random.default_rng(7)
    edge_index = rng.integers(0, 30, size=(2, 150))
    return sp.csr_matrix((np.ones(150), (edge_index[0], edge_index[1])), shape=(30, 30))


def test_gpu_sampler_matches_neighbor_sampler_and_keeps_keys_across_set_size(seed_csr, device):
    sampler = GPUSampler(device, seed_csr)
    graph = gg.CSRGraph.from_scipy(seed_csr)
    reference = gg.NeighborSampler(graph, list(DEFAULT_SIZES), device="cpu")
    seeds = np.array([3, 1, 4, 1])

    all_node, adjs = sampler.sample(seeds)  # works before set_size
    assert [a.size for a in adjs] == [a.size for a in reference.sample(seeds, key=0).adjs]
    np.testing.assert_array_equal(to_host(all_node), reference.sample(seeds, key=0).n_id)

    sampler.set_size([4, 2])
    assert sampler.sizes == [4, 2]
    all_node, adjs = sampler.sample(seeds)  # key 1: the counter survived set_size
    expected = gg.NeighborSampler(graph, [4, 2]).sample(seeds, key=1)
    np.testing.assert_array_equal(to_host(all_node), expected.n_id)
    for got, want in zip(adjs, expected.adjs):
        np.testing.assert_array_equal(to_host(got.edge_index), want.edge_index)
        assert got.size == want.size
    host = gg.SampleOutput(to_host(all_node), [gg.Adj(to_host(a.edge_index), to_host(a.e_id), a.size) for a in adjs])
    check_sample(graph, seeds, [4, 2], host)


def test_gpu_sampler_rejects_bad_sizes_before_sampling(seed_csr):
    sampler = GPUSampler("cpu", seed_csr)
    with pytest.raises((TypeError, ValueError), match=r"sizes\[1\]"):
        sampler.set_size([25, 0.5])
    assert sampler.sizes == list(DEFAULT_SIZES)


def test_cgpu_feature_returns_rows_and_caches_by_degree(seed_csr, device):
    x = np.random.default_rng(1).random((30, 6), dtype=np.float32)
    feature = CGPUFeature(seed_csr, device, "120B")  # 5 rows of 24 bytes
    with pytest.raises(RuntimeError, match="from_cpu_tensor"):
        feature[np.arange(3)]
    feature.from_cpu_tensor(x)
    ids = np.array([29, 0, 0, 17, 5])
    np.testing.assert_array_equal(to_host(feature[ids]), x[ids])
    assert feature.shape == (30, 6)
    if device.startswith("cuda"):
        degree = np.diff(seed_csr.indptr)
        cached = np.sort(feature.store.cached_ids)
        assert len(cached) == 5
        assert degree[cached].min() >= np.sort(degree)[-5]


def test_multi_gpu_sampler_pickles_and_replays_per_rank(seed_csr):
    sampler = MultiGPUSampler("cpu", seed_csr, num_ranks=2)
    sampler.set_size([3, 2])
    clone = pickle.loads(pickle.dumps(sampler))
    clone.set_size([3, 2])  # set_size is per process, as before
    seeds = np.array([0, 5, 9])
    for rank in (0, 1):
        first = sampler.sample(seeds, rank)
        again = clone.sample(seeds, rank)
        np.testing.assert_array_equal(first.n_id, again.n_id)
    with pytest.raises(IndexError, match="rank"):
        sampler.sample(seeds, 2)


def test_multi_gpu_sampler_keys_advance_per_rank(seed_csr):
    sampler = MultiGPUSampler("cpu", seed_csr, num_ranks=2)
    sampler.set_size([2, 2])  # below every degree: draws differ by key
    seeds = np.arange(30)
    first, second = sampler.sample(seeds, 0), sampler.sample(seeds, 0)
    expected = sampler._multi.sample(seeds, 0, key=1)
    np.testing.assert_array_equal(second.n_id, expected.n_id)
    assert not np.array_equal(first.adjs[-1].edge_index, second.adjs[-1].edge_index)


def test_multi_cgpu_feature_serves_a_rank(seed_csr):
    x = np.arange(30 * 4, dtype=np.float32).reshape(30, 4)
    feature = Multi_CGPUFeature(1, ["cpu", "cpu"], "0.1G", seed_csr)
    feature.from_cpu_tensor(x)
    ids = np.array([4, 4, 29, 0])
    np.testing.assert_array_equal(feature[ids], x[ids])  # no rank known here: falls back to rank 1
    clone = pickle.loads(pickle.dumps(feature))
    np.testing.assert_array_equal(clone[ids], x[ids])
    assert clone.shape == (30, 4)


def test_multi_cgpu_feature_refuses_a_rank_beyond_its_gpu_devices_when_made(seed_csr, device):
    # a GPU list took rank 5 and failed at the first lookup, after from_cpu_tensor had built the
    # caches; on CPU devices every rank reads the one shared host table, so any rank is served
    x = np.arange(30 * 4, dtype=np.float32).reshape(30, 4)
    if device == "cpu":
        feature = Multi_CGPUFeature(5, [device, device], "1K", seed_csr)
        feature.from_cpu_tensor(x)
        np.testing.assert_array_equal(feature[np.array([3, 29])], x[[3, 29]])
        return
    for devices in ([device], [device, "cpu"]):
        n = len(devices)
        with pytest.raises(IndexError, match=rf"rank must be in \[0, {n}\) .*{n} devices\), got 5"):
            Multi_CGPUFeature(5, devices, "1K", seed_csr)
        assert Multi_CGPUFeature(n - 1, devices, "1K", seed_csr).rank == n - 1


def test_bad_cache_sizes_fail_in_the_constructor(seed_csr):
    with pytest.raises(ValueError, match=r"size must be a number with an optional K/M/G/T unit .* 'lots'"):
        CGPUFeature(seed_csr, "cpu", "lots")
    with pytest.raises(ValueError, match=r"size must be >= 0 bytes"):
        Multi_CGPUFeature(0, ["cpu"], -1, seed_csr)
    with pytest.raises(ValueError, match=r"rank must be >= 0"):
        Multi_CGPUFeature(-1, ["cpu"], "1M", seed_csr)

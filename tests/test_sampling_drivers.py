"""The sampling drivers: one interface per device, built once per sampler, records for the kernels."""

import pickle

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.sampling._kernels import GraphArrays, SampleOptions
from gglspeedup.sampling._kernels.cpu import CPUDriver, MapPool
from gglspeedup.sampling.drivers import Driver, TypedDriver
from gglspeedup.sampling.types import hop_adjs
from gglspeedup.testing import assert_same_sample, check_sample, reference_sample

from conftest import run_in_threads, to_host


def _graph(weighted=False, edge_ids=False, seed=4):
    rng = np.random.default_rng(seed)
    edge_index = rng.integers(0, 12, size=(2, 40))
    weights = rng.random(40) if weighted else None
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=12, weights=weights)
    if not edge_ids:
        graph = gg.CSRGraph(graph.indptr, graph.indices, weights=graph.weights)
    return graph


def _driver_of(sampler):
    return sampler._driver


@pytest.mark.parametrize(
    "replace, weighted, edge_ids",
    [(False, False, False), (True, False, True), (False, True, True), (True, True, False)],
)
def test_the_driver_owns_records_built_once(device, replace, weighted, edge_ids):
    graph = _graph(weighted, edge_ids)
    sampler = gg.NeighborSampler(graph, [3, 2], replace=replace, weighted=weighted, device=device)
    driver = _driver_of(sampler)
    assert isinstance(driver.graph, GraphArrays)
    assert driver.options[:3] == SampleOptions(replace, weighted, edge_ids)[:3]
    assert driver.options.excluded.dtype == np.int8 and np.ndim(driver.options.excluded) == 0  # the marker
    assert (driver.weight_tables is not None) == weighted
    seeds = np.array([0, 5, 5, 11], np.int64)
    n_id, hops, batch = driver.sample(seeds, sampler.fanouts, 7)
    assert batch is None  # shared sampling: no trees
    assert len(hops) == 2 and all(len(hop) == 3 for hop in hops)  # seed hop first
    out = sampler.sample(seeds, key=7)
    assert _driver_of(sampler) is driver  # built at construction, never per call
    check_sample(graph, seeds, [3, 2], out, replace=replace, weighted=weighted)
    assert_same_sample(out, gg.SampleOutput(n_id, [gg.Adj(*hop) for hop in reversed(hops)]))
    assert_same_sample(out, reference_sample(graph, seeds, [3, 2], replace=replace, weighted=weighted, seed=0, key=7))


def test_with_fanouts_shares_the_driver_and_pickling_rebuilds_it():
    sampler = gg.NeighborSampler(_graph(weighted=True), [2], weighted=True, seed=3)
    other = sampler.with_fanouts([4, 1])
    assert _driver_of(other) is _driver_of(sampler)
    copy = pickle.loads(pickle.dumps(sampler))
    assert isinstance(_driver_of(copy), CPUDriver) and _driver_of(copy) is not _driver_of(sampler)
    np.testing.assert_array_equal(_driver_of(copy).weight_tables[1], _driver_of(sampler).weight_tables[1])
    assert_same_sample(copy.sample([1, 2], key=4), sampler.sample([1, 2], key=4))


def test_one_driver_serves_concurrent_calls():
    graph = gg.datasets.synthetic_powerlaw(3000, 8, seed=1)
    sampler = gg.NeighborSampler(graph, [5, 3], seed=2)
    seeds = [np.arange(i * 100, (i + 1) * 100) for i in range(8)]
    expected = [sampler.sample(s, key=i) for i, s in enumerate(seeds)]
    results = [None] * len(seeds)

    def work(i):
        results[i] = sampler.sample(seeds[i], key=i)

    run_in_threads(work, len(seeds))
    for got, want in zip(results, expected):
        assert_same_sample(got, want)
    assert len(_driver_of(sampler).maps.free) >= 1  # maps came back clean to the pool


def test_placeholders_stand_in_for_absent_arrays():
    driver = _driver_of(gg.NeighborSampler(gg.CSRGraph([0, 0, 0], []), [2]))
    assert all(array.shape == (1,) for array in driver.graph[1:])  # indices empty; no ids, weights, tables
    n_id, hops, _ = driver.sample(np.array([1, 0], np.int64), [2], 0)
    assert n_id.tolist() == [1, 0] and hops[0][0].shape == (2, 0)


def test_relabel_maps_carry_an_epoch_instead_of_being_cleared():
    # A batch stores local ids past the previous batch's (its epoch); nothing is cleared between
    # batches, and a map is refilled with -1 only when the next ids could pass its dtype.
    graph = gg.datasets.synthetic_powerlaw(300, 6, seed=3)
    sampler = gg.NeighborSampler(graph, [4, 3], seed=5)
    pool = _driver_of(sampler).maps
    rng = np.random.default_rng(0)
    batches = [np.concatenate((rng.choice(300, 30, replace=False), [7, 7])) for _ in range(5)]  # repeated seeds too
    epochs = []
    for key, seeds in enumerate(batches):
        out = sampler.sample(seeds, key=key)
        assert_same_sample(out, reference_sample(graph, seeds, [4, 3], seed=5, key=key))
        ((local_map, epoch),) = pool.free
        epochs.append(epoch)
        assert epoch - (epochs[-2] if key else 0) == len(out.n_id)  # one past this batch's last id
    assert (local_map >= 0).any() and local_map.max() < epochs[-1]  # old entries stay, all below the epoch
    limit = int(np.iinfo(local_map.dtype).max)
    for start, restarted in ((limit - pool.size - 32, False), (limit - pool.size - 31, True)):
        pool.free[0] = (local_map, start)  # the next batch has 32 seeds: its ids reach start + 331
        out = sampler.sample(batches[0], key=0)
        assert_same_sample(out, reference_sample(graph, batches[0], [4, 3], seed=5, key=0))
        ((local_map, epoch),) = pool.free
        assert epoch == (0 if restarted else start) + len(out.n_id)
        assert local_map.max() < epoch and (restarted or local_map.max() >= start)


def test_a_map_refuses_a_batch_whose_ids_cannot_fit_its_dtype():
    pool = MapPool(2**29)
    with pytest.raises(ValueError, match=r"seeds must hold at most 1610612735 ids per batch here, got 1610612736"):
        pool.acquire(2**31 - 1 - 2**29 + 1)
    assert pool.free == []


def _host_ids(ids):
    return [to_host(a).tolist() for a in ids] if isinstance(ids, list) else to_host(ids).tolist()


def test_drivers_keep_virtual_ids_inside_a_disjoint_call(device):
    # One signature for every driver: the call's stride (and hop rule) is a field of its options;
    # seeds go in and n_id come out as real ids, with each row's tree in batch.
    graph = _graph(seed=8)
    sampler = gg.NeighborSampler(graph, [3, 2], disjoint=True, expand="new", seed=2, device=device)
    driver = _driver_of(sampler)
    assert isinstance(driver, Driver)
    seeds = np.array([0, 5, 5, 11], np.int64)
    options = driver.options._replace(stride=graph.num_nodes, expand_new=True)
    n_id, hops, batch = driver.sample(seeds, [3, 2], 9, options)
    out = sampler.sample(seeds, key=9)
    assert_same_sample(gg.SampleOutput(n_id, hop_adjs(hops)), out)
    assert _host_ids(batch) == _host_ids(out.batch) and _host_ids(n_id)[:4] == [0, 5, 5, 11]
    assert max(_host_ids(n_id)) < graph.num_nodes and _host_ids(batch)[:4] == [0, 1, 2, 3]


def test_typed_drivers_keep_virtual_ids_inside_a_disjoint_call(device):
    rng = np.random.default_rng(3)
    relations = {("a", "to", "b"): rng.integers(0, 5, (2, 20)), ("b", "to", "a"): rng.integers(0, 5, (2, 20))}
    graph = gg.HeteroGraph(relations, {"a": 5, "b": 5})
    sampler = gg.HeteroNeighborSampler(graph, [2, 2], disjoint=True, seed=1, device=device)
    driver = _driver_of(sampler)
    assert isinstance(driver, TypedDriver)
    seeds = [np.array([1, 1], np.int64), np.array([4], np.int64)]
    n_id, hops, batch = driver.sample(seeds, sampler._plan, 3, driver.options._replace(stride=5))
    out = sampler.sample({"a": [1, 1], "b": [4]}, key=3)
    assert _host_ids(n_id) == [_host_ids(out.n_id[t]) for t in ("a", "b")]
    assert _host_ids(batch) == [_host_ids(out.batch[t]) for t in ("a", "b")]
    assert _host_ids(batch)[0][:2] == [0, 1] and _host_ids(batch)[1][0] == 2  # trees over the types in order
    assert len(hops) == 2

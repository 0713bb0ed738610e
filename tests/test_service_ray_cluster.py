"""serve() and the Cluster through Ray: the local sampler's batches bit for bit, rows exactly x[ids].

Ray runs in the session's private network namespace (``service_netns``); the servers are
PartServer actors over a small partitioned graph. Each comparison is against the unpartitioned
graph's :class:`~gglspeedup.NeighborSampler` with the same arguments and batch keys.
"""

import numpy as np
import pytest
from service_netns import partitioned, ray_session, small_graph  # noqa: F401

import gglspeedup as gg
from gglspeedup.service import Cluster, RemoteFeatureStore, RemoteLabels, RemoteSampler, serve
from gglspeedup.testing import assert_same_sample

FANOUTS = [4, 3]


def _epoch_seeds(num_nodes, batch=64):
    order = np.random.default_rng(5).permutation(num_nodes)
    return [order[i : i + batch] for i in range(0, num_nodes, batch)]


@pytest.fixture(scope="module")
def metis3(ray_session, tmp_path_factory):  # noqa: F811
    """A cluster of 3 servers over the METIS folder, shared by this module's tests."""
    folder, graph, x, y = partitioned(tmp_path_factory, "metis")
    with serve(folder, 3, deadline="10s") as cluster:
        yield cluster, graph, x, y


def _assert_epoch_equal(cluster, graph, seed=11):
    local = gg.NeighborSampler(graph, FANOUTS, seed=seed)
    sampler = cluster.sampler(FANOUTS, seed=seed)
    assert isinstance(sampler, RemoteSampler)
    calls = cluster.stats()["calls"]
    batches = _epoch_seeds(graph.num_nodes)
    for key, seeds in enumerate(batches):
        remote, expected = sampler.sample(seeds, key=key), local.sample(seeds, key=key)
        assert_same_sample(remote, expected)
        assert np.array_equal(remote.batch, expected.batch)
    assert cluster.stats()["calls"] - calls == 2 * len(batches)  # one call per hop, every group at once


@pytest.mark.parametrize(("method", "servers"), [("metis", 1), ("metis", 2), ("metis", 3), ("range", 2)])
def test_service_ray_epochs_equal_the_local_sampler_for_1_2_3_servers(metis3, tmp_path_factory, method, servers):
    if (method, servers) == ("metis", 3):
        cluster, graph, _, _ = metis3
        _assert_epoch_equal(cluster, graph)
        return
    folder, graph, _, _ = partitioned(tmp_path_factory, method)
    with serve(folder, servers, deadline="10s") as cluster:
        assert isinstance(cluster, Cluster) and cluster.num_servers == servers
        _assert_epoch_equal(cluster, graph)


def test_service_ray_link_batches_with_exclusion_and_negatives_equal_the_local_ones(metis3):
    cluster, graph, _, _ = metis3
    local = gg.NeighborSampler(graph, FANOUTS, seed=3)
    rng = np.random.default_rng(1)
    positions = rng.integers(0, graph.num_edges, 40)
    targets = np.searchsorted(graph.indptr, positions, side="right") - 1
    pairs = np.stack([graph.indices[positions], targets])
    sampler = cluster.sampler(FANOUTS, seed=3)
    for key, options in enumerate(
        [
            {"negatives": "binary", "exclude": "self"},
            {"negatives": "per_source", "num_negatives": 2, "exclude": "reverse", "strict_negatives": True},
            {"negatives": "triplet", "num_negatives": 3},
        ]
    ):
        remote = sampler.sample_links(pairs, key=key, **options)
        expected = local.sample_links(pairs, key=key, **options)
        assert_same_sample((remote.n_id, remote.adjs), (expected.n_id, expected.adjs))
        for name in ("pair_index", "labels", "negative_targets"):
            a, b = getattr(remote, name), getattr(expected, name)
            assert (a is None and b is None) or np.array_equal(a, b), name


def test_service_ray_temporal_and_disjoint_batches_equal_the_local_ones(metis3, tmp_path_factory):
    graph, _, _ = small_graph()
    edge_time = np.random.default_rng(2).integers(0, 50, graph.num_edges)
    folder, graph, _, _ = partitioned(tmp_path_factory, "range", 2, edge_time=edge_time)
    seeds = np.arange(0, 400, 9)
    seed_time = np.random.default_rng(3).integers(10, 60, len(seeds))
    local = gg.NeighborSampler(graph, FANOUTS, seed=5, edge_time=edge_time)
    with serve(folder, 2) as cluster:
        remote = cluster.sampler(FANOUTS, seed=5, edge_time=edge_time)
        for key in range(3):
            a = remote.sample(seeds, key=key, seed_time=seed_time)
            b = local.sample(seeds, key=key, seed_time=seed_time)
            assert_same_sample(a, b)
            assert np.array_equal(a.batch, b.batch)
    cluster, graph, _, _ = metis3
    remote = cluster.sampler(FANOUTS, seed=2, disjoint=True)
    b = gg.NeighborSampler(graph, FANOUTS, seed=2, disjoint=True).sample(seeds, key=4)
    a = remote.sample(seeds, key=4)
    assert_same_sample(a, b)
    assert np.array_equal(a.batch, b.batch)


def test_service_ray_typed_batches_features_and_labels_equal_the_local_ones(ray_session, tmp_path):  # noqa: F811
    rng = np.random.default_rng(0)
    relations = {
        ("author", "writes", "paper"): np.stack([rng.integers(0, 30, 200), rng.integers(0, 40, 200)]),
        ("paper", "cites", "paper"): rng.integers(0, 40, (2, 160)),
        ("paper", "rev_writes", "author"): np.stack([rng.integers(0, 40, 120), rng.integers(0, 30, 120)]),
    }
    graph = gg.HeteroGraph(relations, {"author": 30, "paper": 40})
    x = {"author": rng.standard_normal((30, 4)).astype(np.float32), "paper": rng.standard_normal((40, 6))}
    y = {"paper": rng.integers(0, 5, 40)}
    gg.service.partition(graph, tmp_path / "typed", 3, features=x, labels=y, method="range")
    seeds = {"paper": np.arange(0, 40, 3), "author": np.array([1, 7])}
    local = gg.HeteroNeighborSampler(graph, [3, 2], seed=4)
    with serve(tmp_path / "typed", 2) as cluster:
        sampler = cluster.sampler([3, 2], seed=4)
        a, b = sampler.sample(seeds, key=2), local.sample(seeds, key=2)
        for t in b.n_id:
            assert np.array_equal(a.n_id[t], b.n_id[t])
        for hop_a, hop_b in zip(a.adjs, b.adjs):
            assert hop_a.keys() == hop_b.keys()
            for et in hop_b:
                assert hop_a[et].size == hop_b[et].size
                assert np.array_equal(hop_a[et].edge_index, hop_b[et].edge_index)
                assert np.array_equal(hop_a[et].e_id, hop_b[et].e_id)
        features, labels = cluster.features(cache_size=64), cluster.labels
        assert set(features) == {"author", "paper"} and set(labels) == {"paper"}
        for t in ("author", "paper"):
            ids = b.n_id[t]
            assert np.array_equal(features[t][ids], x[t][ids]) and features[t][ids].dtype == x[t].dtype
        assert np.array_equal(labels["paper"][b.n_id["paper"]], y["paper"][b.n_id["paper"]])


@pytest.mark.parametrize("policy", [None, "none", "presample", "order"])
def test_service_ray_feature_rows_are_exact_and_cross_the_wire_once_per_gather(metis3, policy):
    cluster, graph, x, _ = metis3
    order = np.arange(graph.num_nodes)[::-1].copy() if policy == "order" else policy
    options = {"presample": {"num_batches": 2, "batch_size": 32}} if policy == "presample" else {}
    store = cluster.features(cache_size=40 * x.shape[1] * 4, policy=order, **options)
    assert isinstance(store, RemoteFeatureStore) and isinstance(store, gg.FeatureStore)
    assert store.shape == x.shape and store.dtype == x.dtype
    expected_cached = {None: 40, "none": 0, "presample": 40, "order": 40}[policy]
    assert store.num_cached == expected_cached
    if policy == "order":
        assert store.cached_ids.tolist() == order[:40].tolist()
    if policy is None:  # degree order: the highest in-degrees, ties by id
        assert store.cached_ids.tolist() == np.argsort(-graph.degree(), kind="stable")[:40].tolist()
    cluster.transport.reset_stats()
    ids = np.random.default_rng(4).integers(0, graph.num_nodes, 900)  # many repeats
    rows = store[ids]
    assert rows.dtype == x.dtype and np.array_equal(rows, x[ids])
    stats = store.stats()
    missed = np.setdiff1d(np.unique(ids), store.cached_ids)
    assert stats["rows_remote"] == len(missed)  # each distinct row not cached, once
    assert cluster.stats()["bytes_received"] == len(missed) * x.shape[1] * 4
    assert stats["rows_device"] == np.isin(ids, store.cached_ids).sum()
    assert stats["rows_device"] + stats["rows_host"] == stats["lookups"] == len(ids)
    out = np.empty((5, x.shape[1]), np.float32)
    assert store.gather([3, 3, 0, 399, 7], out=out) is out and np.array_equal(out, x[[3, 3, 0, 399, 7]])
    assert store[np.array([], np.int64)].shape == (0, x.shape[1])
    with pytest.raises(IndexError):
        store[[0, 400]]
    with pytest.raises(IndexError):
        store[[-1]]
    with pytest.raises(TypeError):
        store[np.array([0.5])]


def test_service_ray_labels_are_exact_by_id_and_as_a_whole(metis3):
    cluster, graph, _, y = metis3
    labels = cluster.labels
    assert isinstance(labels, RemoteLabels) and len(labels) == graph.num_nodes and labels.dtype == y.dtype
    ids = np.array([5, 399, 5, 0, 200])
    assert np.array_equal(labels[ids], y[ids])
    cluster.transport.reset_stats()
    assert np.array_equal(np.asarray(labels), y)
    assert cluster.stats()["bytes_received"] == y.nbytes  # every label once
    with pytest.raises(IndexError):
        labels[[400]]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_servers": 0}, ValueError, "num_servers"),
        ({"num_servers": 4}, ValueError, "at most the number of partitions"),
        ({"replicas": 0}, ValueError, "replicas"),
        ({"max_restarts": -2}, ValueError, "max_restarts"),
        ({"deadline": "soon"}, ValueError, "deadline"),
        ({"deadline": 0}, ValueError, "deadline"),
        ({"deadline": [5]}, TypeError, "deadline"),
        ({"address": 5}, TypeError, "address"),
        ({"verify": "yes"}, TypeError, "verify"),
    ],
)
def test_service_ray_serve_refuses_bad_arguments_by_name_before_starting(
    ray_session,  # noqa: F811
    tmp_path_factory,
    kwargs,
    error,
    message,
):
    folder, _, _, _ = partitioned(tmp_path_factory, "metis")
    with pytest.raises(error, match=message):
        serve(folder, **kwargs)


def test_service_ray_serve_refuses_a_folder_that_is_not_partitioned(ray_session, tmp_path):  # noqa: F811
    with pytest.raises(FileNotFoundError):
        serve(tmp_path / "missing")
    with pytest.raises(TypeError, match="path"):
        serve(3)

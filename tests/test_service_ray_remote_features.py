"""The remote feature tier and remote labels over in-process servers (no Ray): rows exactly
``x[ids]``, each distinct row asked for once per gather, the cache policies, ``out=`` and the
errors a FeatureStore raises. The same classes run over Ray in ``test_service_ray_cluster.py``;
here they run on every device the suite has (the CUDA case on numba's simulator)."""

import numpy as np
import pytest
from service_netns import small_graph

import gglspeedup as gg
from gglspeedup.service import LocalTransport, PartServer, RemoteFeatureStore, RemoteLabels, partition


class CountingTransport(LocalTransport):
    """LocalTransport that records every request (group, method, ids)."""

    def __init__(self, servers, group_parts):
        super().__init__(servers, group_parts)
        self.asked = []

    def call(self, requests, *, key=None):
        for group, (method, payload) in requests.items():
            self.asked.append((group, method, np.asarray(payload["ids"]).copy()))
        return super().call(requests, key=key)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    graph, x, y = small_graph(num_nodes=200, num_edges=1500, seed=3)
    folder = str(tmp_path_factory.mktemp("remote") / "p")
    partition(graph, folder, 3, features=x, labels=y, method="range")
    servers = [PartServer(folder, [0, 1], warm=False), PartServer(folder, [2], warm=False)]
    return folder, graph, x, y, servers


def _transport(served):
    return CountingTransport(served[4], [(0, 1), (2,)])


def test_service_remote_rows_equal_x_and_each_distinct_row_is_asked_once(served, device):
    folder, _graph, x, _, _ = served
    transport = _transport(served)
    store = RemoteFeatureStore(transport, folder, device=device, policy="none")
    ids = np.array([5, 199, 5, 0, 120, 120, 7, 199])
    rows = gg.backends.from_(store[ids])
    np.testing.assert_array_equal(np.asarray(rows.get() if hasattr(rows, "get") else rows), x[ids])
    asked = np.concatenate([a for _, _, a in transport.asked])
    assert sorted(asked.tolist()) == sorted(set(ids.tolist()))  # once each, repeats served here
    assert {method for _, method, _ in transport.asked} == {"rows"} and len(transport.asked) == 2
    assert store.stats()["rows_remote"] == len(set(ids.tolist()))


def test_service_remote_cache_serves_its_rows_without_asking(served):
    folder, _graph, x, _, _ = served
    transport = _transport(served)
    order = np.arange(200)[::-1].copy()
    store = RemoteFeatureStore(transport, folder, cache_size=50 * 16 * 4, policy=order)
    assert store.num_cached == 50 and store.cached_ids.tolist() == order[:50].tolist()
    transport.asked.clear()
    assert np.array_equal(store[order[:50]], x[order[:50]]) and transport.asked == []
    assert store.stats()["hits"] == 50 and store.stats()["hit_rate"] == 1.0
    assert (store.cache_map[order[:50]] == np.arange(50)).all() and (store.cache_map[order[50:]] == -1).all()


def test_service_remote_degree_policy_reads_the_in_degrees_from_the_folder(served):
    folder, graph, _x, _, _ = served
    store = RemoteFeatureStore(_transport(served), folder, cache_size=30 * 16 * 4)
    assert store.policy_info["policy"] == "degree"
    assert store.cached_ids.tolist() == np.argsort(-graph.degree(), kind="stable")[:30].tolist()


def test_service_remote_gather_writes_out_and_refuses_what_feature_store_refuses(served):
    folder, _, x, _, _ = served
    store = RemoteFeatureStore(_transport(served), folder)
    out = np.empty((3, 16), np.float32)
    assert store.gather(slice(10, 13), out=out) is out and np.array_equal(out, x[10:13])
    with pytest.raises(IndexError):
        store[[200]]
    with pytest.raises(IndexError):
        store[[-1]]
    with pytest.raises(TypeError):
        store[np.array([1.0])]
    with pytest.raises(ValueError, match="shape"):
        store.gather([1, 2], out=np.empty((3, 16), np.float32))
    with pytest.raises(TypeError, match="dtype"):
        store.gather([1, 2], out=np.empty((2, 16), np.float64))
    with pytest.raises(ValueError, match="policy must be one of"):
        RemoteFeatureStore(_transport(served), folder, policy="hottest")
    with pytest.raises(ValueError, match="must not repeat"):
        RemoteFeatureStore(_transport(served), folder, cache_size=1024, policy=[1, 1])
    with pytest.raises(ValueError, match="needs a sampler"):
        RemoteFeatureStore(_transport(served), folder, cache_size=1024, policy="presample")


def test_service_remote_labels_by_id_slice_tensor_and_whole(served):
    torch = pytest.importorskip("torch")
    folder, _, _, y, _ = served
    transport = _transport(served)
    labels = RemoteLabels(transport, gg.service.PartitionBook.load(folder))
    assert labels.shape == y.shape and labels.dtype == y.dtype and labels.ndim == 1 and len(labels) == 200
    assert np.array_equal(labels[[3, 3, 150]], y[[3, 3, 150]])
    assert np.array_equal(labels[5:9], y[5:9]) and np.array_equal(labels[torch.tensor([7, 1])], y[[7, 1]])
    out = np.empty(2, y.dtype)
    assert labels.gather([0, 199], out=out) is out and np.array_equal(out, y[[0, 199]])
    assert np.array_equal(np.asarray(labels), y) and labels.stats()["lookups"] == 11
    with pytest.raises(IndexError):
        labels[[200]]
    with pytest.raises(IndexError, match=r"ids\[1\] = 1180591620717411303424 does not fit in int64"):
        labels[[0, 2**70]]  # NumPy reads the list as dtype object: refused as "must hold integers"


def test_service_remote_labels_gather_refuses_an_out_feature_store_would_refuse(served):
    # out was filled by ``out[...] = values``: a float32 out took int64 labels cast, a list failed
    # inside NumPy, and a wrong shape was found only after the servers had been asked
    folder, _, _, y, _ = served
    transport = _transport(served)
    labels = RemoteLabels(transport, gg.service.PartitionBook.load(folder))
    read_only = np.empty(2, y.dtype)
    read_only.flags.writeable = False
    bad = [
        (np.empty(2, np.float32), TypeError, r"out must have the labels' dtype int64, got float32"),
        (np.empty(2, np.int32), TypeError, r"out must have the labels' dtype int64, got int32"),
        (np.empty(3, y.dtype), ValueError, r"out must have shape \(2,\) .*, got \(3,\)"),
        (np.empty((2, 1), y.dtype), ValueError, r"out must have shape \(2,\) .*, got \(2, 1\)"),
        ([0, 0], TypeError, "out must be a NumPy array, got list"),
        (read_only, ValueError, "out must be writeable"),
    ]
    for out, error, message in bad:
        with pytest.raises(error, match=message):
            labels.gather([0, 199], out=out)
    assert transport.asked == [] and labels.stats()["lookups"] == 0  # refused before asking
    strided = np.zeros(4, y.dtype)[::2]
    assert labels.gather([0, 199], out=strided) is strided and np.array_equal(strided, y[[0, 199]])


def test_service_remote_stores_refuse_a_folder_without_features(tmp_path, served):
    graph = served[1]
    partition(graph, tmp_path / "bare", 2, method="range")
    bare = LocalTransport([PartServer(tmp_path / "bare", [0, 1], warm=False)], [(0, 1)])
    with pytest.raises(ValueError, match="holds no features"):
        RemoteFeatureStore(bare, str(tmp_path / "bare"))
    with pytest.raises(ValueError, match="holds no labels"):
        RemoteLabels(bare, gg.service.PartitionBook.load(tmp_path / "bare"))


def test_service_remote_store_refuses_a_table_without_columns_when_made(tmp_path, served):
    # partition takes (N, 0) features; the store refused them only at its first gather, naming an
    # ``x`` the caller never passed (its FeatureStore over the fetched rows), cache or none
    graph = served[1]
    partition(graph, tmp_path / "flat", 2, features=np.zeros((200, 0), np.float32), method="range")
    flat = LocalTransport([PartServer(tmp_path / "flat", [0, 1], warm=False)], [(0, 1)])
    for cache_size in (0, 1024):
        with pytest.raises(ValueError, match=r"at least one column, the folder holds shape \(200, 0\)"):
            RemoteFeatureStore(flat, str(tmp_path / "flat"), cache_size=cache_size)


def test_service_remote_stores_name_a_bad_cache_size(tmp_path, served):
    # parse_size's errors said "size must be ...", naming no argument the caller passed
    folder = served[0]
    for cache_size, error, message in [
        ("lots", ValueError, "cache_size must be a number"),
        (-8, ValueError, "cache_size must be >= 0"),
    ]:
        with pytest.raises(error, match=message):
            RemoteFeatureStore(_transport(served), folder, cache_size=cache_size)
    rng = np.random.default_rng(0)
    graph = gg.HeteroGraph({("a", "to", "b"): rng.integers(0, 5, (2, 20))}, {"a": 5, "b": 5})
    book = partition(graph, tmp_path / "t", 2, features={"a": rng.random((5, 2))}, method="range")
    cluster = gg.service.Cluster(book, LocalTransport([PartServer(tmp_path / "t", [0, 1], warm=False)], [(0, 1)]))
    with pytest.raises(TypeError, match="cache_size must be a str like '512M'"):
        cluster.features(cache_size=None)


def test_service_remote_store_checks_presample_options_as_feature_store_does(served):
    # an unknown option reached presample_halves as a keyword ("got an unexpected keyword argument"),
    # and only when a cache was filled; a bad fanouts was named as the cluster sampler's own
    folder, graph, x, _, _ = served
    cluster = gg.service.Cluster(gg.service.PartitionBook.load(folder), _transport(served))
    bad = [
        ({"fanouts": [2], "bogus": 1}, ValueError, r"unknown presample option\(s\) \['bogus'\]"),
        ({"fanouts": "x"}, TypeError, r"presample\['fanouts'\] must be a list of ints"),
        ({"batch_size": 0}, ValueError, r"presample\['batch_size'\] must be >= 1"),
        ({"seeds": [200]}, ValueError, r"presample\['seeds'\]"),
        ([("fanouts", [2])], TypeError, "presample must be a dict of options"),
    ]
    for presample, error, message in bad:
        for cache_size in (0, 1024):
            with pytest.raises(error, match=message):
                gg.FeatureStore(x, cache_size=cache_size, policy="presample", graph=graph, presample=presample)
            with pytest.raises(error, match=message):
                cluster.features(cache_size=cache_size, policy="presample", presample=presample)
            with pytest.raises(error, match=message):
                RemoteFeatureStore(
                    _transport(served), folder, cache_size=cache_size, policy="presample", presample=presample
                )
    store = cluster.features(cache_size=1024, policy="presample", presample={"fanouts": [2], "batch_size": 50})
    assert store.num_cached == 1024 // store.row_bytes == 16 and np.array_equal(store[np.arange(200)], x)


def test_service_remote_typed_cluster_features_refuse_presample_by_name(tmp_path):
    # the typed stores were made without the cluster's sampler, so "presample" failed saying
    # "needs a sampler (cluster.features passes the cluster's)"
    rng = np.random.default_rng(0)
    graph = gg.HeteroGraph({("a", "to", "b"): rng.integers(0, 5, (2, 20))}, {"a": 5, "b": 5})
    book = partition(graph, tmp_path / "t", 2, features={"a": rng.random((5, 2))}, method="range")
    cluster = gg.service.Cluster(book, LocalTransport([PartServer(tmp_path / "t", [0, 1], warm=False)], [(0, 1)]))
    with pytest.raises(ValueError, match=r"policy='presample' is not available for a typed graph's cluster\.features"):
        cluster.features(cache_size=64, policy="presample")
    assert cluster.features(cache_size=64)["a"].policy_info == {"policy": "degree", "num_cached": 4}


def test_service_remote_typed_cluster_features_take_hetero_feature_store_policies_per_type(tmp_path):
    # one order went to every type's store: {type: order} failed ("must hold integers, got dtype
    # object") and a bare order array cached the same ids of each type
    rng = np.random.default_rng(1)
    relations = {("a", "to", "b"): rng.integers(0, 5, (2, 20)), ("b", "to", "a"): rng.integers(0, 5, (2, 20))}
    graph = gg.HeteroGraph(relations, {"a": 5, "b": 6, "c": 2})
    x = {"a": rng.random((5, 2)), "b": rng.random((6, 3)).astype(np.float32)}
    book = partition(graph, tmp_path / "t", 2, features=x, method="range")
    cluster = gg.service.Cluster(book, LocalTransport([PartServer(tmp_path / "t", [0, 1], warm=False)], [(0, 1)]))
    paths = {}
    for t, table in x.items():  # on the CPU a HeteroFeatureStore caches tables on disk only
        paths[t] = str(tmp_path / f"{t}.npy")
        np.save(paths[t], table)
    for policy in ({"a": [4, 0, 3], "b": np.array([5, 1])}, {"b": [2]}, [("b", 5), ("a", 1), ("a", 2)]):
        local = gg.HeteroFeatureStore.from_npy(paths, cache_size=48, policy=policy)
        stores = cluster.features(cache_size=48, policy=policy)
        assert stores.keys() == x.keys()
        for t, table in x.items():
            assert stores[t].cached_ids.tolist() == local[t].cached_ids.tolist()
            ids = np.array([5, 0, 4, 4, 1]) % len(table)
            assert np.array_equal(stores[t][ids], table[ids])
    assert cluster.features(cache_size=48, policy={"a": [4, 0, 3]})["a"].cached_ids.tolist() == [4, 0, 3]
    bad = [
        (np.array([4, 3]), TypeError, "a dict node type -> order array or a list of"),
        ({"c": [0]}, ValueError, r"policy names node type 'c', which has no features here"),
        ({"a": [5]}, ValueError, r"policy\['a'\]\[0\] = 5 is out of range \[0, 5\)"),
        ({"a": [1.0]}, TypeError, r"policy\['a'\]"),
        ({"b": [1, 1]}, ValueError, r"policy\['b'\] \(an order array\) must not repeat ids"),
    ]
    for policy, error, message in bad:
        with pytest.raises(error, match=message):
            gg.HeteroFeatureStore.from_npy(paths, cache_size=48, policy=policy)
        with pytest.raises(error, match=message):
            cluster.features(cache_size=48, policy=policy)

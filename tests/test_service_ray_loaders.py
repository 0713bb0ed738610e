"""The loaders run unchanged on a cluster's sampler, features and labels (issue 40, trainers).

NodeLoader / LinkLoader with prefetching, gglspeedup.pyg's stores and loaders and gglspeedup.gammagl's
NeighborSampler are handed ``cluster.sampler(...)``, ``cluster.features(...)`` and
``cluster.labels`` where they usually get a local sampler and arrays; every batch equals the one
the same loader yields over the unpartitioned graph. Ray runs in the session's private network
namespace (``service_netns``).
"""

import numpy as np
import pytest
from service_netns import partitioned, ray_session  # noqa: F401

import gglspeedup as gg
from gglspeedup.service import serve
from gglspeedup.testing import assert_same_sample

FANOUTS = [4, 3]


@pytest.fixture(scope="module")
def served(ray_session, tmp_path_factory):  # noqa: F811
    folder, graph, x, y = partitioned(tmp_path_factory, "metis")
    with serve(folder, 2, deadline="10s") as cluster:
        yield cluster, graph, x, y


def _arrays(batch):
    return [np.asarray(value) for value in (batch.x, batch.n_id)]


@pytest.mark.parametrize("prefetch", [0, 2])
def test_service_ray_node_loader_batches_equal_the_local_loaders(served, prefetch):
    cluster, graph, x, y = served
    seeds = np.arange(0, graph.num_nodes, 2)
    options = {"batch_size": 50, "shuffle": True, "seed": 3, "prefetch": prefetch, "backend": None}
    remote = gg.NodeLoader(
        cluster.sampler(FANOUTS, seed=9), cluster.features(cache_size=1024), seeds, labels=cluster.labels, **options
    )
    local = gg.NodeLoader(gg.NeighborSampler(graph, FANOUTS, seed=9), x, seeds, labels=y, **options)
    for _epoch in range(2):
        pairs = list(zip(remote, local))
        assert len(pairs) == len(local) == 4
        for a, b in pairs:
            assert_same_sample((a.n_id, a.adjs), (b.n_id, b.adjs))
            assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y) and a.batch_size == b.batch_size


def test_service_ray_link_loader_batches_equal_the_local_loaders(served):
    cluster, graph, x, _ = served
    pairs = np.stack([graph.indices[:120], np.searchsorted(graph.indptr, np.arange(120), side="right") - 1])
    options = {"negatives": "binary", "exclude": "reverse", "prefetch": 2, "backend": None, "seed": 1}
    remote = gg.LinkLoader(cluster.sampler(FANOUTS, seed=4), cluster.features(), pairs, 40, **options)
    local = gg.LinkLoader(gg.NeighborSampler(graph, FANOUTS, seed=4), x, pairs, 40, **options)
    batches = list(zip(remote, local))
    assert len(batches) == 3
    for a, b in batches:
        assert_same_sample((a.n_id, a.adjs), (b.n_id, b.adjs))
        assert np.array_equal(a.x, b.x) and np.array_equal(a.pair_index, b.pair_index)
        assert np.array_equal(a.labels, b.labels)


def test_service_ray_pyg_stores_and_loader_batches_equal_the_local_ones(served):
    pyg = pytest.importorskip("gglspeedup.pyg")
    torch = pytest.importorskip("torch")
    cluster, graph, x, y = served
    seeds = torch.arange(0, graph.num_nodes, 3)

    def batches(sampler, features, labels):
        store = pyg.FeatureStore({"x": features, "y": labels})
        loader = pyg.NeighborLoader(
            (store, pyg.GraphStore(graph)),
            FANOUTS,
            input_nodes=seeds,
            batch_size=40,
            neighbor_sampler=pyg.Sampler(sampler, FANOUTS),
        )
        return list(loader)

    remote = batches(cluster.sampler(FANOUTS, seed=6), cluster.features(cache_size=512), cluster.labels)
    local = batches(gg.NeighborSampler(graph, FANOUTS, seed=6), x, y)
    assert len(remote) == len(local) == 4
    for a, b in zip(remote, local):
        for name in ("n_id", "e_id", "edge_index", "x", "y"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name
        assert a.batch_size == b.batch_size


def test_service_ray_gammagl_neighbor_sampler_batches_equal_the_local_ones(served):
    from gglspeedup.gammagl import NeighborSampler

    cluster, graph, x, _ = served
    edge_index = np.stack([graph.indices, np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))])
    order = np.argsort(graph.edge_ids, kind="stable")  # the edge_index the graph was built from
    options = {"sample_lists": [4, 3], "batch_size": 64, "shuffle": True, "seed": 2, "backend": "numpy"}
    remote = NeighborSampler(cluster.sampler([1], seed=2), x=cluster.features(), prefetch=2, **options)
    local = NeighborSampler(edge_index[:, order], x=x, num_nodes=graph.num_nodes, **options)
    pairs = list(zip(remote, local))
    assert len(pairs) == len(local) == 7
    for (dst_a, n_id_a, adjs_a, x_a), (dst_b, n_id_b, adjs_b, x_b) in pairs:
        assert np.array_equal(dst_a, dst_b) and np.array_equal(n_id_a, n_id_b) and np.array_equal(x_a, x_b)
        for hop_a, hop_b in zip(adjs_a, adjs_b):
            assert hop_a.size == hop_b.size
            assert np.array_equal(hop_a.edge_index, hop_b.edge_index) and np.array_equal(hop_a.e_id, hop_b.e_id)

"""gglspeedup.gammagl's NodeNeighborLoader / LinkNeighborLoader on a cluster (issue 40, trainers).

Given ``neighbor_sampler=cluster.sampler(...)`` and ``node_attrs={"x": cluster.features(), "y":
cluster.labels}`` over a ``Graph`` that holds only its node count, every batch equals the same
loader's over the whole graph. GammaGL is not installed here: ``fake_gammagl`` stands in with the
least of TensorLayerX (torch backend) and GammaGL 0.5.0 the loaders call, sliced as GammaGL's
``filter_graph`` slices. ``tools/gammagl_service.py`` runs the same comparison with GammaGL
itself, and ``tools/gammagl_conformance.py --modes cluster`` GammaGL's own loader tests.
"""

import copy
import sys
import types

import numpy as np
import pytest
from service_netns import partitioned, ray_session  # noqa: F401

import gglspeedup as gg
from gglspeedup.service import serve

FANOUTS = [4, 3]


@pytest.fixture
def fake_gammagl(monkeypatch):
    """``tensorlayerx`` (torch backend) and ``gammagl``'s ``Graph``, ``filter_graph`` and
    ``get_input_nodes_index``, as GammaGL 0.5.0 behaves: a batch is a copy of the graph with
    node attributes gathered by ``node``, attributes named ``*edge*`` by ``edge``, and
    ``edge_index`` (when the graph has one) replaced by ``(row, col)``."""
    torch = pytest.importorskip("torch")
    tlx = types.ModuleType("tensorlayerx")
    tlx.BACKEND, tlx.stack = "torch", torch.stack

    class Graph:
        def __init__(self, num_nodes=None, **attributes):
            self.num_nodes = num_nodes
            self.__dict__.update(attributes)

    class HeteroGraph:
        pass

    def filter_graph(graph, node, row, col, edge, perm):
        out = copy.copy(graph)
        for key, value in vars(graph).items():
            if key == "edge_index":
                out.edge_index = torch.stack([row, col])
            elif torch.is_tensor(value) and "edge" in key:
                setattr(out, key, value[edge])
            elif torch.is_tensor(value) and len(value) == graph.num_nodes:
                setattr(out, key, value[node])
        out.num_nodes = len(node)
        return out

    def get_input_nodes_index(graph, input_nodes=None):
        return None, range(graph.num_nodes) if input_nodes is None else input_nodes

    gammagl, data, loader, utils = (types.ModuleType(n) for n in ("gammagl", "gammagl.data", "gammagl.loader", "u"))
    utils.__name__ = "gammagl.loader.utils"
    data.Graph, data.HeteroGraph = Graph, HeteroGraph
    utils.filter_graph, utils.get_input_nodes_index = filter_graph, get_input_nodes_index
    utils.filter_hetero_graph = None  # imported beside filter_graph; typed graphs are not faked
    gammagl.data, gammagl.loader, loader.utils = data, loader, utils
    modules = {"tensorlayerx": tlx, "gammagl": gammagl, "gammagl.data": data, "gammagl.loader": loader}
    for name, module in {**modules, "gammagl.loader.utils": utils}.items():
        monkeypatch.setitem(sys.modules, name, module)
    return torch, Graph


@pytest.fixture(scope="module")
def served(ray_session, tmp_path_factory):  # noqa: F811
    folder, graph, x, y = partitioned(tmp_path_factory, "range")
    with serve(folder, 2, deadline="10s") as cluster:
        yield cluster, graph, x, y


def whole_graph(torch, Graph, graph, x, y):
    """The fake ``Graph`` of the whole graph: edges in ``edge_index`` column order (the graph's
    edge ids), features, labels, and the node and edge ids as attributes GammaGL slices."""
    order = np.argsort(graph.edge_ids, kind="stable")
    targets = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    edge_index = np.stack([graph.indices, targets])[:, order].astype(np.int64)
    t = torch.from_numpy
    attributes = {"x": t(x), "y": t(np.asarray(y)), "n_id": torch.arange(graph.num_nodes)}
    return Graph(graph.num_nodes, edge_index=t(edge_index), edge_id=torch.arange(graph.num_edges), **attributes)


def assert_same_batch(remote, local, names):
    import torch

    for name in names:
        a, b = getattr(remote, name), getattr(local, "edge_id" if name == "e_id" else name)
        if torch.is_tensor(a):
            assert a.dtype == b.dtype and torch.equal(a, b), name
        else:
            assert a == b, name


@pytest.mark.parametrize("prefetch", [0, 2])
def test_service_ray_gammagl_node_loader_batches_equal_the_whole_graphs(served, fake_gammagl, prefetch):
    from gglspeedup.gammagl import NodeNeighborLoader

    torch, Graph = fake_gammagl
    cluster, graph, x, y = served
    seeds = torch.arange(0, graph.num_nodes, 3)
    options = {"batch_size": 40, "shuffle": True, "seed": 5, "prefetch": prefetch}
    remote = NodeNeighborLoader(
        Graph(graph.num_nodes),
        FANOUTS,
        seeds,
        neighbor_sampler=cluster.sampler(FANOUTS, seed=5),
        node_attrs={"x": cluster.features(cache_size=512), "y": cluster.labels},
        **options,
    )
    local = NodeNeighborLoader(whole_graph(torch, Graph, graph, x, y), FANOUTS, seeds, **options)
    for _epoch in range(2):
        batches = list(zip(remote, local))
        assert len(batches) == len(local) == 4
        for a, b in batches:
            assert_same_batch(a, b, ("n_id", "e_id", "edge_index", "x", "y", "num_nodes", "batch_size"))


def test_service_ray_gammagl_link_loader_batches_equal_the_whole_graphs(served, fake_gammagl):
    from gglspeedup.gammagl import LinkNeighborLoader

    torch, Graph = fake_gammagl
    cluster, graph, x, y = served
    pairs = torch.randint(0, graph.num_nodes, (2, 90), generator=torch.Generator().manual_seed(0))
    options = {"batch_size": 30, "neg_sampling_ratio": 1.0, "seed": 7, "prefetch": 2}
    remote = LinkNeighborLoader(
        Graph(graph.num_nodes),
        FANOUTS,
        pairs,
        neighbor_sampler=cluster.sampler(FANOUTS, seed=7),
        node_attrs={"x": cluster.features(), "y": cluster.labels},
        **options,
    )
    local = LinkNeighborLoader(whole_graph(torch, Graph, graph, x, y), FANOUTS, pairs, **options)
    batches = list(zip(remote, local))
    assert len(batches) == 3
    for a, b in batches:
        assert_same_batch(a, b, ("n_id", "e_id", "edge_index", "x", "y", "edge_label_index", "edge_label"))


def test_gammagl_graph_loaders_refuse_a_sampler_or_node_attrs_they_cannot_use(fake_gammagl):
    from gglspeedup.gammagl import LinkNeighborLoader, NodeNeighborLoader

    _torch, Graph = fake_gammagl
    local = gg.NeighborSampler(gg.CSRGraph.from_edge_index([[0, 1], [1, 2]], num_nodes=3), [2])
    with pytest.raises(NotImplementedError, match="neighbor_sampler must be None or a gglspeedup NeighborSampler"):
        NodeNeighborLoader(Graph(3), [2], neighbor_sampler=object())
    with pytest.raises(ValueError, match="graph has 4 nodes, neighbor_sampler's graph 3"):
        NodeNeighborLoader(Graph(4), [2], neighbor_sampler=local)
    with pytest.raises(NotImplementedError, match="directed=False with a given neighbor_sampler needs"):
        NodeNeighborLoader(Graph(3), [2], directed=False, neighbor_sampler=local)
    with pytest.raises(TypeError, match="node_attrs must be a dict"):
        NodeNeighborLoader(Graph(3), [2], neighbor_sampler=local, node_attrs=[np.zeros(3)])
    with pytest.raises(TypeError, match=r"node_attrs\['x'\] must give rows by node id"):
        LinkNeighborLoader(Graph(3), [2], np.zeros((2, 1), dtype=np.int64), node_attrs={"x": 5})


def test_gammagl_graph_loaders_take_seed_and_device_from_a_given_sampler_and_refuse_others(fake_gammagl):
    # a given sampler draws with its own seed on its own device: seed=9 / device="cuda:0" beside it
    # were ignored (the shuffle and the negatives were keyed by 9, the draws by the sampler's 4)
    from gglspeedup.gammagl import LinkNeighborLoader, NodeNeighborLoader

    _torch, Graph = fake_gammagl
    local = gg.NeighborSampler(gg.CSRGraph.from_edge_index([[0, 1], [1, 2]], num_nodes=3), [2], seed=4)
    pairs = np.array([[0, 1], [1, 2]])
    for make in (
        lambda **o: NodeNeighborLoader(Graph(3), [2], **o),
        lambda **o: LinkNeighborLoader(Graph(3), [2], pairs, **o),
    ):
        with pytest.raises(ValueError, match=r"seed=9 is not the given sampler's own seed \(4\); .* pass 4"):
            make(neighbor_sampler=local, seed=9)
        with pytest.raises(ValueError, match=r"device='cuda:0' is not the given sampler's device \(cpu\)"):
            make(neighbor_sampler=local, device="cuda:0")
        assert make(neighbor_sampler=local).seed == make(neighbor_sampler=local, seed=4, device=-1).seed == 4
        assert make().seed == 0 and make(seed=9).seed == 9  # no given sampler: seed as given, 0 by default
        with pytest.raises(ValueError, match=r"replace=True, but the given sampler samples without replacement"):
            make(neighbor_sampler=local, replace=True)  # was ignored: the sampler drew without replacement
        with pytest.raises(TypeError, match="replace must be a bool"):
            make(neighbor_sampler=local, replace="yes")
        make(neighbor_sampler=local.with_fanouts([2]), replace=False)  # the default: the sampler's own

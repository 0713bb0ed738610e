"""Layer-wise inference's fused layers: which run fused, and that they equal the layers' own forward."""

from __future__ import annotations

import warnings
from unittest import mock

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.inference import fused_kind

torch = pytest.importorskip("torch")
from gglspeedup.examples.torch_models import GATConv, SAGEConv  # noqa: E402

from conftest import assert_same_bits, gpu_hardware  # noqa: E402


def _graph(num_nodes=50, num_edges=300, seed=0):
    rng = np.random.default_rng(seed)
    edge_index = rng.integers(0, num_nodes - 2, size=(2, num_edges))  # the last two nodes isolated
    edge_index[:, :4] = 3  # duplicate self loops
    edge_index[:, 4] = (7, 7)  # one self loop
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes)


def _edge_index(graph):
    """The graph's edges as PyG's (source, target) rows: row ``v`` of the CSR lists ``v``'s sources."""
    target = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    return torch.from_numpy(np.stack([graph.indices.astype(np.int64), target]))


def _features(graph, dim, seed=1):
    return np.random.default_rng(seed).standard_normal((graph.num_nodes, dim)).astype(np.float32)


def _full_graph(convs, x, edge_index):
    h = torch.from_numpy(x)
    for index, conv in enumerate(convs):
        h = conv(h, edge_index)
        if index < len(convs) - 1:
            h = torch.relu(h)
    return h.numpy()


def _pyg():
    return pytest.importorskip("torch_geometric.nn")


def test_fused_kind_names_the_layers_run_fused():
    torch.manual_seed(0)
    assert fused_kind(SAGEConv(4, 3)) == "sage"
    assert fused_kind(GATConv(4, 3)) is None
    assert fused_kind(lambda block, edge_index: block[1]) is None
    hooked = SAGEConv(4, 3)
    hooked.register_forward_hook(lambda module, inputs, output: output * 2)
    assert fused_kind(hooked) is None  # a fused call would skip the hook

    class Custom(SAGEConv):
        def forward(self, x, edge_index):
            return super().forward(x, edge_index) * 2

    assert fused_kind(Custom(4, 3)) is None  # a subclass may change forward
    nn = _pyg()
    assert fused_kind(nn.SAGEConv(4, 3)) == fused_kind(nn.SAGEConv(4, 3, aggr="sum")) == "sage"
    assert fused_kind(nn.SAGEConv(4, 3, aggr="max")) is None
    assert fused_kind(nn.SAGEConv(4, 3, project=True)) is None
    assert fused_kind(nn.GINConv(torch.nn.Linear(4, 3))) == "gin"
    assert fused_kind(nn.GCNConv(4, 3)) == fused_kind(nn.GCNConv(4, 3, add_self_loops=False)) == "gcn"
    assert fused_kind(nn.GCNConv(4, 3, improved=True)) is None
    assert fused_kind(nn.GATConv(4, 3)) is None
    # flow="target_to_source" aggregates over out-edges: fused, it got the in-edge (CSR row) sums
    reversed_flow = dict(flow="target_to_source")
    assert fused_kind(nn.SAGEConv(4, 3, **reversed_flow)) is None
    assert fused_kind(nn.GINConv(torch.nn.Linear(4, 3), **reversed_flow)) is None
    assert fused_kind(nn.GCNConv(4, 3, **reversed_flow)) is None


def test_fused_layers_never_build_blocks_or_call_forward():
    graph = _graph()
    x = _features(graph, 6)
    torch.manual_seed(0)
    convs = [SAGEConv(6, 8).eval(), SAGEConv(8, 5).eval()]
    with torch.no_grad():
        on_blocks = gg.inference.layerwise(convs, graph, x, batch_size=16, activation=torch.relu, fused=False)
        with (
            mock.patch.object(SAGEConv, "forward", side_effect=AssertionError("forward called")),
            mock.patch.object(gg.NeighborSampler, "sample", side_effect=AssertionError("block built")),
            mock.patch.object(gg.FeatureStore, "gather", side_effect=AssertionError("rows gathered per edge")),
        ):
            fused = gg.inference.layerwise(convs, graph, x, batch_size=16, activation=torch.relu)
    np.testing.assert_allclose(fused, on_blocks, rtol=1e-5, atol=1e-6)


def test_fused_sage_is_the_layer_on_the_numpy_mean_bit_for_bit():
    graph = _graph(seed=2)
    x = _features(graph, 5, seed=3)
    torch.manual_seed(1)
    conv = SAGEConv(5, 4).eval()
    mean = np.zeros_like(x)
    for v in range(graph.num_nodes):  # float32 sums in CSR order, as the kernel adds them
        for j in graph.indices[graph.indptr[v] : graph.indptr[v + 1]]:
            mean[v] += x[j]
        if graph.indptr[v + 1] > graph.indptr[v]:
            mean[v] /= np.float32(graph.indptr[v + 1] - graph.indptr[v])
    with torch.no_grad():
        expected = (conv.lin_l(torch.from_numpy(mean)) + conv.lin_r(torch.from_numpy(x))).numpy()
        out = gg.inference.layerwise([conv], graph, x, batch_size=graph.num_nodes)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("variant", ["sage-mean", "sage-sum", "sage-normalize-no-root", "gin", "gcn", "gcn-no-loops",
                                     "gcn-unnormalized"])  # fmt: skip
def test_pyg_layers_equal_their_own_full_graph_forward(variant):
    nn = _pyg()
    graph = _graph(seed=4)
    x = _features(graph, 6, seed=5)
    torch.manual_seed(2)
    make = {
        "sage-mean": lambda i, o: nn.SAGEConv(i, o),
        "sage-sum": lambda i, o: nn.SAGEConv(i, o, aggr="sum"),
        "sage-normalize-no-root": lambda i, o: nn.SAGEConv(i, o, normalize=True, root_weight=False),
        "gin": lambda i, o: nn.GINConv(
            torch.nn.Sequential(torch.nn.Linear(i, 7), torch.nn.ReLU(), torch.nn.Linear(7, o)), eps=0.3
        ),
        "gcn": lambda i, o: nn.GCNConv(i, o),
        "gcn-no-loops": lambda i, o: nn.GCNConv(i, o, add_self_loops=False),
        "gcn-unnormalized": lambda i, o: nn.GCNConv(i, o, normalize=False),
    }[variant]
    convs = [make(6, 8).eval(), make(8, 8).eval(), make(8, 3).eval()]
    assert all(fused_kind(conv) is not None for conv in convs)
    with torch.no_grad():
        expected = _full_graph(convs, x, _edge_index(graph))
        out = gg.inference.layerwise(convs, graph, x, batch_size=7, activation=torch.relu)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_fused_layers_on_a_graph_without_nodes_give_their_width():
    # GCNConv takes no (h, h[:T]) block: it ran on one for a graph without nodes and raised PyG's
    # "does not support bipartite message passing", though every other graph ran it fused.
    nn = _pyg()
    graph = gg.CSRGraph([0], [])
    torch.manual_seed(3)
    for convs in ([nn.GCNConv(4, 5), nn.GCNConv(5, 2)], [nn.SAGEConv(4, 2, aggr="sum")], [SAGEConv(4, 2)]):
        with torch.no_grad():
            out = gg.inference.layerwise([c.eval() for c in convs], graph, np.zeros((0, 4), np.float32))
        assert out.shape == (0, 2) and out.dtype == np.float32


def test_unrecognised_layers_and_inputs_fall_back_to_blocks(tmp_path):
    graph = _graph(seed=6)
    x = _features(graph, 4, seed=7)
    torch.manual_seed(3)
    convs = [SAGEConv(4, 6).eval(), GATConv(6, 3, heads=2).eval(), SAGEConv(6, 2).eval()]
    np.save(tmp_path / "x.npy", x)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")  # read-only: the fused layer reads it in place
    with torch.no_grad():
        expected = gg.inference.layerwise(convs, graph, x, batch_size=9, activation=torch.relu, fused=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning about a read-only table handed to torch
            mixed = gg.inference.layerwise(convs, graph, mapped, batch_size=9, activation=torch.relu)
        stored = gg.inference.layerwise(convs, graph, gg.FeatureStore(x), batch_size=9, activation=torch.relu)
    for out in (mixed, stored):
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="fused must be a bool, got str"):
        gg.inference.layerwise(convs, graph, x, fused="no")


def test_fused_layers_on_the_gpu_match_the_cpu(device):
    nn = _pyg()
    graph = _graph(num_nodes=10, num_edges=24, seed=8)
    x = _features(graph, 3, seed=9)
    torch.manual_seed(4)
    convs = [nn.GCNConv(3, 4).eval(), nn.GINConv(torch.nn.Linear(4, 2)).eval(), SAGEConv(2, 2).eval()]
    with torch.no_grad():
        cpu = gg.inference.layerwise(convs, graph, x, batch_size=4, activation=torch.relu)
        if gpu_hardware(device):
            for conv in convs:
                conv.to(device)
        out = gg.inference.layerwise(convs, graph, x, batch_size=4, activation=torch.relu, device=device)
    assert_same_bits(device, out, cpu)


def test_bench_pairs_the_contenders_in_alternating_rounds(tmp_path):
    import json

    from gglspeedup.bench import main

    path = tmp_path / "inference.json"
    argv = ["inference", "--graph", "powerlaw:300:4", "--layers", "2", "--dim", "4", "--hidden", "4", "--out", "2"]
    main([*argv, "--batch-size", "64", "--threads", "1", "--rounds", "2", "--blocks", "--json", str(path)])
    rows = json.loads(path.read_text())["rows"]
    assert [(row["round"], row["contender"]) for row in rows] == [
        (1, "gglspeedup"), (1, "gglspeedup (blocks)"), (2, "gglspeedup"), (2, "gglspeedup (blocks)")
    ]  # fmt: skip
    for ours, blocks in (rows[:2], rows[2:]):
        assert ours["layer_calls_s"] is None  # fused: no convolution call to time
        assert blocks["layer_calls_s"] >= 0 and blocks["ours_speedup"] > 0  # the blocks' seconds over ours
    with pytest.raises(ValueError, match="--rounds must be at least 1, got 0"):
        main([*argv, "--rounds", "0"])

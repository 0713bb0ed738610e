"""HeteroGraph: relations in every accepted form, the stacked layout and its views, per-type
degrees, to_homogeneous, save / memory-mapped load, PyG conversion, and errors naming the
relation and the first bad position; CSRGraph's bipartite form underneath."""

import os

import numpy as np
import pytest

import gglspeedup as gg

WRITES, CITES = ("author", "writes", "paper"), ("paper", "cites", "paper")


@pytest.fixture
def graph():
    return gg.HeteroGraph(
        {WRITES: np.array([[0, 1, 1, 2], [0, 0, 2, 1]]), CITES: (np.array([2, 0]), np.array([0, 1]))},
        {"author": 3, "paper": 4, "venue": 2},
    )


def test_relations_are_views_of_one_stacked_csr(graph):
    assert graph.node_types == ("author", "paper", "venue") and graph.edge_types == (WRITES, CITES)
    assert graph.num_edges == {WRITES: 4, CITES: 2}
    writes = graph[WRITES]
    assert writes.num_nodes == 4 and writes.num_src_nodes == 3
    assert writes.indptr.tolist() == [0, 2, 3, 4, 4] and writes.indices.tolist() == [0, 1, 2, 1]
    assert writes.edge_ids.tolist() == [0, 1, 3, 2]  # columns of the given edge index
    assert np.shares_memory(writes.indices, graph.stacked.indices)
    assert graph.row_base.tolist() == [0, 4, 8] and graph.edge_base.tolist() == [0, 4, 6]
    assert graph[CITES].indices.tolist() == [2, 0] and graph[CITES].degree().tolist() == [1, 1, 0, 0]
    assert graph.in_degree("paper").tolist() == [3, 2, 1, 0]
    assert graph.out_degree("paper").tolist() == [1, 0, 1, 0] and graph.out_degree("venue").tolist() == [0, 0]


def test_csr_graph_relations_and_weights():
    csr = gg.CSRGraph.from_edge_index([[0, 2], [1, 1]], num_nodes=2, num_src_nodes=3, weights=[0.5, 2.0])
    graph = gg.HeteroGraph({("a", "r", "b"): csr}, {"a": 3, "b": 2})
    assert graph.weighted and graph[("a", "r", "b")].weights.tolist() == [0.5, 2.0]
    sampler = gg.HeteroNeighborSampler(graph, [1], weighted=True)
    assert sampler.sample({"b": [1]}, key=0).num_sampled_edges[("a", "r", "b")] == [1]
    with pytest.raises(ValueError, match="every relation has weights or none"):
        gg.HeteroGraph({("a", "r", "b"): csr, ("b", "s", "a"): [[0], [0]]}, {"a": 3, "b": 2})


def test_to_homogeneous_keeps_every_edge_with_type_offsets(graph):
    flat, offsets = graph.to_homogeneous()
    assert offsets == {"author": 0, "paper": 3, "venue": 7} and flat.num_nodes == 9 and flat.num_edges == 6
    dst = np.repeat(np.arange(9), flat.degree())
    edges = set(zip(flat.indices.tolist(), dst.tolist()))
    expected = {(0, 3), (1, 3), (1, 5), (2, 4), (5, 3), (3, 4)}
    assert edges == expected
    stacked_dst = np.repeat(np.arange(graph.stacked.num_nodes), graph.stacked.degree())
    for position, (s, d) in zip(flat.edge_ids, zip(flat.indices, dst)):  # edge ids: stacked positions
        r = int(np.searchsorted(graph.edge_base, position, side="right")) - 1
        src_type, _, dst_type = graph.edge_types[r]
        assert s == graph.stacked.indices[position] + offsets[src_type]
        assert d == stacked_dst[position] - graph.row_base[r] + offsets[dst_type]


@pytest.mark.parametrize("mmap", [True, False])
def test_save_and_load_round_trip(graph, tmp_path, mmap):
    path = tmp_path / "typed.npz"
    graph.save(path)
    loaded = gg.HeteroGraph.load(path, mmap=mmap)
    assert loaded.num_nodes == graph.num_nodes and loaded.edge_types == graph.edge_types
    for et in graph.edge_types:
        for name in ("indptr", "indices", "edge_ids"):
            np.testing.assert_array_equal(getattr(loaded[et], name), getattr(graph[et], name))
    assert loaded.stacked.indices.flags.writeable != mmap  # mapped read-only from the file, not read
    out = gg.HeteroNeighborSampler(loaded, [2]).sample({"paper": [0]}, key=0)
    ref = gg.HeteroNeighborSampler(graph, [2]).sample({"paper": [0]}, key=0)
    assert out.num_sampled_edges == ref.num_sampled_edges


def test_load_a_graph_whose_source_type_outnumbers_every_row(tmp_path):
    """The stacked CSR has fewer rows than the largest source type has nodes: still loadable."""
    graph = gg.HeteroGraph({WRITES: [[0, 99], [1, 1]]}, {"author": 100, "paper": 2})
    graph.save(tmp_path / "wide.npz")
    loaded = gg.HeteroGraph.load(tmp_path / "wide.npz")
    assert loaded[WRITES].indices.tolist() == [0, 99] and loaded.num_nodes == {"author": 100, "paper": 2}


def test_save_refuses_a_users_folder_and_keeps_its_files(tmp_path, graph):
    folder = tmp_path / "results"
    folder.mkdir()
    np.save(folder / "x.npy", np.arange(3))
    with pytest.raises(FileExistsError, match=r"'.*results' is not a graph folder written by gglspeedup"):
        graph.save(folder)
    assert os.listdir(folder) == ["x.npy"] and np.load(folder / "x.npy").tolist() == [0, 1, 2]
    graph.save(tmp_path / "typed")
    with pytest.raises(FileExistsError, match=r"'.*typed' already holds a saved graph and overwrite=False"):
        graph.save(tmp_path / "typed", overwrite=False)
    graph.save(tmp_path / "typed")
    assert gg.HeteroGraph.load(tmp_path / "typed", verify=True).num_edges == graph.num_edges


def test_load_refuses_other_files(tmp_path, graph):
    path = tmp_path / "plain.npz"
    gg.CSRGraph([0, 1], [0]).save(path)
    with pytest.raises(ValueError, match="not a saved HeteroGraph"):
        gg.HeteroGraph.load(path)
    with pytest.raises(FileNotFoundError):
        gg.HeteroGraph.load(tmp_path / "missing.npz")


def test_from_pyg_hetero_data():
    pyg = pytest.importorskip("torch_geometric.data")
    import torch

    data = pyg.HeteroData()
    data["author"].num_nodes = 3
    data["paper"].num_nodes = 2
    data["author", "writes", "paper"].edge_index = torch.tensor([[0, 2], [1, 1]])
    graph = gg.HeteroGraph.from_pyg(data)
    assert graph.num_nodes == {"author": 3, "paper": 2}
    assert graph[WRITES].indices.tolist() == [0, 2] and graph[WRITES].indptr.tolist() == [0, 0, 2]
    # these raised bare errors naming nothing: AttributeError, int(None)'s TypeError
    with pytest.raises(TypeError, match=r"data must be a torch_geometric\.data\.HeteroData, got dict"):
        gg.HeteroGraph.from_pyg({"author": 3})
    data["venue"].name = "unsized"
    with pytest.raises(ValueError, match=r"data\['venue'\] has no num_nodes"):
        gg.HeteroGraph.from_pyg(data)
    del data["venue"]
    data["paper", "cites", "paper"].adj_t = None
    with pytest.raises(ValueError, match=r"data\[\('paper', 'cites', 'paper'\)\] has no edge_index"):
        gg.HeteroGraph.from_pyg(data)


@pytest.mark.parametrize(
    ("relations", "num_nodes", "error", "match"),
    [
        (
            {WRITES: [[0, 3], [0, 0]]},
            {"author": 3, "paper": 4},
            ValueError,
            r"relation \('author', 'writes', 'paper'\).*edge_index\[:, 1\]",
        ),
        (
            {WRITES: [[0, 0], [0, 4]]},
            {"author": 3, "paper": 4},
            ValueError,
            r"edge_index\[:, 1\] = \[0, 4\] is out of range",
        ),
        ({WRITES: [[0, -1], [0, 0]]}, {"author": 3, "paper": 4}, ValueError, "negative node id"),
        ({WRITES: [0, 1, 2]}, {"author": 3, "paper": 4}, ValueError, "2-D|shape"),
        ({WRITES: [[0, 1, 2]]}, {"author": 3, "paper": 4}, ValueError, r"shape \[2, num_edges\]"),
        ({WRITES: ([0, 1], [0])}, {"author": 3, "paper": 4}, ValueError, "differ in length"),
        ({WRITES: [[0.5], [0]]}, {"author": 3, "paper": 4}, TypeError, "integer"),
        ({("author", "writes"): [[0], [0]]}, {"author": 3, "paper": 4}, TypeError, r"\(src_type, name, dst_type\)"),
        ({("author", "writes", "venue"): [[0], [0]]}, {"author": 3, "paper": 4}, ValueError, "target type 'venue'"),
        ({}, {"author": 3}, ValueError, "at least one edge type"),
        ([[0], [0]], {"author": 3}, TypeError, "relations must be a dict"),
        ({WRITES: [[0], [0]]}, {"author": -1, "paper": 4}, ValueError, r"num_nodes\['author'\]"),
        ({WRITES: [[0], [0]]}, [3, 4], TypeError, "num_nodes must be a dict"),
        ({WRITES: gg.CSRGraph([0, 1, 1], [0])}, {"author": 3, "paper": 4}, ValueError, "has 2 rows but num_nodes"),
        (
            {WRITES: gg.CSRGraph([0, 1, 1, 1, 1], [3], num_src_nodes=4)},
            {"author": 3, "paper": 4},
            ValueError,
            r"indices\[0\] = 3",
        ),
        (  # renumbered ids would be taken for the caller's, with the order dropped
            {("paper", "cites", "paper"): gg.CSRGraph.from_edge_index([[0, 1, 1], [1, 2, 0]], 4, reorder="degree")},
            {"author": 3, "paper": 4},
            ValueError,
            r"relation \('paper', 'cites', 'paper'\): its CSRGraph is renumbered \(node_order",
        ),
    ],
)
def test_bad_relations_name_the_relation_and_position(relations, num_nodes, error, match):
    with pytest.raises(error, match=match):
        gg.HeteroGraph(relations, num_nodes)


def test_bipartite_csr_graph_checks_its_source_range():
    with pytest.raises(ValueError, match=r"indices must lie in \[0, num_src_nodes = 2\): indices\[1\] = 2"):
        gg.CSRGraph([0, 2], [1, 2], num_src_nodes=2)
    graph = gg.CSRGraph([0, 2], [1, 4], num_src_nodes=5)
    assert graph.to_scipy().shape == (1, 5) and "num_src_nodes=5" in repr(graph)
    with pytest.raises(ValueError, match="square"):
        graph.permute([0])
    with pytest.raises(ValueError, match="direction='in'"):
        gg.CSRGraph.from_edge_index([[0], [0]], num_src_nodes=2, direction="out")

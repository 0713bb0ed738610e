"""gglspeedup.pyg's sampler against PyG's options (issue 26, part A): PyG's hop rule, empty graphs,
subgraph types, direction, weights, weighted negatives, PyG's NeighborSampler signature, input checks."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.data import Data, HeteroData  # noqa: E402
from torch_geometric.loader import NeighborLoader as PyGNeighborLoader  # noqa: E402
from torch_geometric.sampler import NegativeSampling, NodeSamplerInput  # noqa: E402

import gglspeedup as gg  # noqa: E402
from gglspeedup import pyg  # noqa: E402


def _data(num_nodes=40, num_edges=160, seed=0):
    rng = np.random.default_rng(seed)
    flat = rng.choice(num_nodes * num_nodes, num_edges, replace=False)  # no parallel edges
    edge_index = torch.from_numpy(np.stack([flat // num_nodes, flat % num_nodes]))
    return Data(x=torch.arange(num_nodes).view(-1, 1), edge_index=edge_index, num_nodes=num_nodes)


def _bfs_in_edges(edge_index, seeds, hops):
    """PyG's rule with full fanouts: hop h takes every in-edge of the nodes first reached at h - 1."""
    src, dst = edge_index.tolist()
    seen, frontier, nodes, edges = set(seeds), list(dict.fromkeys(seeds)), [len(seeds)], []
    for _ in range(hops):
        new, count = [], 0
        for v in frontier:
            for e in range(len(dst)):
                if dst[e] == v:
                    count += 1
                    if src[e] not in seen:
                        seen.add(src[e])
                        new.append(src[e])
        nodes.append(len(new))
        edges.append(count)
        frontier = new
    return nodes, edges


# ----------------------------------------------------------------------------- A5: hop rule
def test_full_fanouts_follow_pygs_hop_rule_without_duplicate_edges():
    data = _data()
    batch = next(iter(pyg.NeighborLoader(data, [-1, -1], input_nodes=torch.tensor([0, 1]), batch_size=2)))
    nodes, edges = _bfs_in_edges(data.edge_index, [0, 1], 2)
    assert batch.num_sampled_nodes == nodes and batch.num_sampled_edges == edges
    assert len(set(batch.e_id.tolist())) == batch.e_id.numel()  # no edge twice


def test_typed_full_fanouts_carry_each_edge_once():
    data = _data(num_nodes=10, num_edges=20, seed=3)
    hetero = HeteroData()
    hetero["user"].x = torch.arange(10)
    hetero["user", "to", "user"].edge_index = data.edge_index
    batch = next(iter(pyg.NeighborLoader(hetero, [-1, -1], input_nodes=("user", torch.arange(10)), batch_size=10)))
    assert batch["user", "to", "user"].num_edges == data.edge_index.size(1)


# ------------------------------------------------------------------------- A3: empty graphs
def test_graphs_without_edges_sample_their_seeds_alone():
    pairs = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    loader = pyg.LinkNeighborLoader(Data(num_nodes=10), num_neighbors=[], edge_label_index=pairs, batch_size=2)
    for batch in loader:
        assert batch.num_nodes == batch.edge_label_index.unique().numel() and batch.input_id.numel() == 2
    batch = next(iter(pyg.NeighborLoader(Data(num_nodes=10), [3, 3], batch_size=4)))
    assert batch.n_id.tolist() == [0, 1, 2, 3] and batch.num_sampled_edges == [0, 0]
    hetero = HeteroData(paper={"num_nodes": 10})
    loader = pyg.LinkNeighborLoader(hetero, [], edge_label_index=(("paper", "to", "paper"), pairs), batch_size=2)
    for batch in loader:
        assert batch["paper"].num_nodes == batch["paper", "to", "paper"].edge_label_index.unique().numel()


def test_a_link_loader_over_every_edge_of_a_graph_without_edges_has_no_batches():
    for neg_sampling in (None, "binary"):  # PyG's LinkLoader read None[0] for the missing edge_index
        loader = pyg.LinkNeighborLoader(Data(num_nodes=10), [2], batch_size=2, neg_sampling=neg_sampling)
        assert len(loader) == 0 and list(loader) == []
    store = pyg.GraphStore()
    store.put_edge_index(torch.empty(2, 0, dtype=torch.long), edge_type=None, layout="coo", size=(5, 5))
    out = pyg.Sampler((pyg.FeatureStore({"x": np.zeros((5, 1))}), store), [2]).sample_from_nodes(
        NodeSamplerInput(None, torch.tensor([4]))
    )
    assert out.node.tolist() == [4] and out.num_sampled_edges == [0]


# ------------------------------------------------------------------ A6: subgraphs, direction
def test_bidirectional_batches_hold_every_edge_with_its_reverse():
    data = _data()
    batch = next(iter(pyg.NeighborLoader(data, [3, 2], batch_size=5, subgraph_type="bidirectional")))
    pairs = set(map(tuple, batch.edge_index.t().tolist()))
    assert pairs and all((v, u) in pairs for u, v in pairs)


@pytest.mark.parametrize("how", [{"subgraph_type": "induced"}, {"directed": False}])
def test_induced_batches_hold_every_edge_among_the_sampled_nodes(how):
    data = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        batch = next(iter(pyg.NeighborLoader(data, [2, 2], batch_size=4, **how)))
    nodes = set(batch.n_id.tolist())
    expected = {(u, v) for u, v in data.edge_index.t().tolist() if u in nodes and v in nodes}
    got = {tuple(pair) for pair in batch.n_id[batch.edge_index].t().tolist()}
    assert got == expected and batch.edge_index.size(1) == len(expected)


def test_induced_subgraphs_refuse_disjoint_and_temporal_sampling_as_pyg():
    # each tree's copy of a node got the induced edges of the first tree's copy only (seeds [0, 0]:
    # the second tree had no edges), and edges joined the trees
    data = _data()
    data.time = torch.zeros(data.num_nodes, dtype=torch.long)
    for options in ({"disjoint": True}, {"time_attr": "time"}):
        with pytest.raises(ValueError, match="induced"):
            pyg.NeighborLoader(data, [2], subgraph_type="induced", **options)
        with pytest.raises(ValueError, match="induced"):
            pyg.NeighborSampler(data, [2], subgraph_type="induced", **options)
    sampler = pyg.NeighborSampler(data, [2], subgraph_type="induced")
    with pytest.raises(ValueError, match="induced"):
        sampler.disjoint = True  # as PyG's BidirectionalNeighborSampler sets it
    assert not sampler.disjoint


def test_backward_sampling_equals_forward_sampling_of_the_flipped_graph():
    data = _data(seed=5)
    flipped = Data(x=data.x, edge_index=data.edge_index.flip(0), num_nodes=data.num_nodes)
    seeds = NodeSamplerInput(None, torch.tensor([0, 7]))
    backward = pyg.NeighborSampler(data, [3, 2], sample_direction="backward").sample_from_nodes(seeds)
    forward = pyg.NeighborSampler(flipped, [3, 2]).sample_from_nodes(seeds)
    assert torch.equal(backward.node, forward.node) and torch.equal(backward.edge, forward.edge)
    assert torch.equal(backward.row, forward.col) and torch.equal(backward.col, forward.row)


def test_backward_link_batches_keep_the_pairs_edges_out_with_reverse_and_refuse_self():
    # over the transposed graph exclude='self' kept out each pair's target -> source edges and
    # sampled its own source -> target edge
    data = _data()
    pairs = data.edge_index[:, :12]
    with pytest.raises(NotImplementedError, match="exclude='reverse'"):
        pyg.NeighborSampler(data, [3, 2], sample_direction="backward", exclude="self")
    sampler = pyg.NeighborSampler(data, [-1, -1], sample_direction="backward", exclude="reverse")
    for batch in pyg.LinkNeighborLoader(data, [3, 2], edge_label_index=pairs, batch_size=4, neighbor_sampler=sampler):
        own = {tuple(pair) for pair in pairs[:, batch.input_id].t().tolist()}
        sampled = {tuple(edge) for edge in batch.n_id[batch.edge_index].t().tolist()}
        assert sampled and not sampled & (own | {(v, u) for u, v in own})


def test_backward_typed_sampling_takes_num_neighbors_per_edge_type():
    # the dict was re-keyed by the transposed graph's relation names, which PyG's NumNeighbors
    # cannot hold ("Cannot convert the edge type 'paper____gglspeedup_rev__cites__paper' to a tuple")
    hetero = HeteroData()
    hetero["author"].num_nodes, hetero["paper"].num_nodes = 3, 4
    writes, cites = ("author", "writes", "paper"), ("paper", "cites", "paper")
    hetero[writes].edge_index = torch.tensor([[0, 0, 1, 2], [0, 1, 1, 3]])
    hetero[cites].edge_index = torch.tensor([[0, 1, 3], [2, 2, 0]])
    seeds = NodeSamplerInput(None, torch.tensor([0]), input_type="author")
    for num_neighbors, papers in (
        ({writes: [-1, 0], cites: [0, -1]}, [0, 1, 2]),
        ({writes: [-1, 0], cites: [0, 0]}, [0, 1]),
    ):
        sampler = pyg.NeighborSampler(hetero, num_neighbors, sample_direction="backward")
        assert sampler.num_neighbors.get_values([writes, cites]) == num_neighbors
        out = sampler.sample_from_nodes(seeds)
        assert out.node["author"].tolist() == [0] and out.node["paper"].tolist() == papers
        edges = out.node["author"][out.row[writes]].tolist(), out.node["paper"][out.col[writes]].tolist()
        assert edges == ([0, 0], [0, 1])  # each edge source -> target as stored
        sampler.num_neighbors = {writes: [0, 0], cites: [0, 0]}
        assert sampler.sample_from_nodes(seeds).node["paper"].tolist() == []


def test_weighted_hetero_data_never_draws_zero_weight_edges():
    hetero = HeteroData()
    hetero["paper"].num_nodes = 5
    hetero["paper", "to", "paper"].edge_index = torch.tensor([[1, 3, 0, 4], [2, 2, 1, 3]])
    hetero["paper", "to", "paper"].edge_weight = torch.tensor([0.0, 1.0, 0.0, 1.0])
    loader = pyg.NeighborLoader(hetero, [1, 1], input_nodes=("paper", torch.tensor([2])), weight_attr="edge_weight")
    batch = next(iter(loader))
    assert batch["paper"].n_id.tolist() == [2, 3, 4]
    assert batch["paper"].n_id[batch["paper", "to", "paper"].edge_index].tolist() == [[3, 4], [2, 3]]


def test_weight_attr_on_some_edge_types_draws_the_others_uniformly_as_pyg():
    """PyG collects weight_attr where it exists (data.collect) and pyg-lib draws an edge type
    missing from its edge_weight_dict uniformly; no edge type with it is refused."""
    hetero = HeteroData()
    hetero["paper"].num_nodes = 5
    hetero["paper", "to", "paper"].edge_index = torch.tensor([[1, 3, 0, 4], [2, 2, 1, 3]])
    hetero["paper", "to", "paper"].w = torch.tensor([0.0, 1.0, 0.0, 1.0])
    hetero["paper", "cites", "paper"].edge_index = torch.tensor([[0, 1, 4], [2, 2, 2]])  # no "w"
    sampler = pyg.NeighborSampler(hetero, [1], weight_attr="w")
    drawn = {("paper", "to", "paper"): [], ("paper", "cites", "paper"): []}
    for _ in range(300):  # a new batch key each call
        out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([2]), input_type="paper"))
        for edge_type, sources in drawn.items():
            sources += out.node["paper"][out.row[edge_type]].tolist()
    assert set(drawn[("paper", "to", "paper")]) == {3}  # weighted: never the zero-weight edge from 1
    counts = np.bincount(drawn[("paper", "cites", "paper")], minlength=5)[[0, 1, 4]]
    assert counts.sum() == 300 and counts.min() >= 60 and counts.max() <= 140  # uniform: 100 each, sd 8
    with pytest.raises(ValueError, match="weight_attr='weight': no edge type of data has an edge attribute"):
        pyg.NeighborSampler(hetero, [1], weight_attr="weight")


@pytest.mark.parametrize("mode", ["binary", "triplet"])
def test_weighted_negatives_come_from_nodes_with_weight(mode):
    data = _data()
    weight = torch.zeros(data.num_nodes)
    weight[[5, 9, 11]] = 1.0
    neg = NegativeSampling(mode, amount=2, src_weight=weight, dst_weight=weight)
    pairs = data.edge_index[:, :30]
    loader = pyg.LinkNeighborLoader(data, [2], edge_label_index=pairs, batch_size=10, neg_sampling=neg)
    for batch in loader:
        if mode == "binary":
            negatives = batch.n_id[batch.edge_label_index[:, batch.edge_label == 0]]
        else:
            negatives = batch.n_id[batch.dst_neg_index]
            assert batch.dst_neg_index.shape == (batch.src_index.numel(), 2)
        assert negatives.numel() and set(negatives.view(-1).tolist()) <= {5, 9, 11}


# ---------------------------------------------------------- A8: PyG's NeighborSampler signature
def test_our_neighbor_sampler_drives_pygs_own_neighbor_loader():
    data = _data()
    sampler = pyg.NeighborSampler(data, [3, 2])
    batch = next(iter(PyGNeighborLoader(data, [3, 2], batch_size=4, neighbor_sampler=sampler)))
    assert batch.n_id[:4].tolist() == [0, 1, 2, 3]
    assert torch.equal(batch.x.view(-1), batch.n_id)  # features filtered by PyG for our nodes
    assert batch.num_sampled_nodes[0] == 4 and len(batch.num_sampled_edges) == 2


def test_temporal_backward_sampling_raises_not_implemented_as_pyg():
    data = _data()
    data.time = torch.arange(data.num_nodes)
    with pytest.raises(NotImplementedError, match="backward"):
        pyg.NeighborSampler(data, [2], time_attr="time", sample_direction="backward")


# --------------------------------------------------------------------------- A9: input checks
def test_typed_input_nodes_on_an_untyped_graph_name_input_nodes():
    with pytest.raises(ValueError, match="input_nodes"):
        pyg.NeighborLoader(_data(), [2], input_nodes=("n", None))


def test_numpy_and_list_input_nodes_seed_the_nodes_they_name_on_data_and_on_stores():
    # PyG's loader read a NumPy bool mask as the ids 0 and 1, and its remote path failed on a
    # NumPy array or a list ('cannot unpack non-iterable NoneType object', a bare AssertionError)
    data = _data(num_nodes=12, num_edges=40)
    mask = np.arange(12) % 3 == 0
    stores = (pyg.FeatureStore.from_data(data), pyg.GraphStore.from_data(data))
    for source in (data, stores):
        for input_nodes, seeds in (
            (mask, [0, 3, 6, 9]),
            (mask.tolist(), [0, 3, 6, 9]),
            (np.array([5, 1, 5], np.int32), [5, 1, 5]),
            ([5, 1, 5], [5, 1, 5]),
            (np.array([5, 1], ">i8"), [5, 1]),
        ):
            batches = list(pyg.NeighborLoader(source, [2], input_nodes=input_nodes, batch_size=2))
            assert torch.cat([batch.n_id[: batch.batch_size] for batch in batches]).tolist() == seeds
        with pytest.raises(ValueError, match="input_nodes must be 1-D"):
            pyg.NeighborLoader(source, [2], input_nodes=torch.tensor(3))
        with pytest.raises(ValueError, match=r"input_nodes as a bool mask must have one entry per node \(12\)"):
            pyg.NeighborLoader(source, [2], input_nodes=torch.tensor([True, False]))


def test_edge_label_index_and_edge_label_shapes_are_checked_by_name():
    data = _data()
    with pytest.raises(ValueError, match=r"edge_label_index must have shape \(2, num_pairs\)"):
        pyg.LinkNeighborLoader(data, [2], edge_label_index=torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="edge_label must have one entry per pair"):
        pyg.LinkNeighborLoader(data, [2], edge_label_index=data.edge_index[:, :4], edge_label=torch.ones(3))


def test_a_typed_store_over_a_weighted_graph_samples_by_weight():
    edge_index = torch.tensor([[1, 3, 0, 4], [2, 2, 1, 3]])
    weights = np.array([0.0, 1.0, 0.0, 1.0])
    relation = gg.CSRGraph.from_edge_index(edge_index, num_nodes=5, num_src_nodes=5, weights=weights)
    graph = gg.HeteroGraph({("paper", "to", "paper"): relation}, {"paper": 5})
    stores = (pyg.FeatureStore({("paper", "x"): np.zeros((5, 1), np.float32)}), pyg.GraphStore(graph))
    with pytest.raises(NotImplementedError, match="weight_attr"):  # PyG's remote contract has no weights
        pyg.NeighborSampler(stores, [1, 1], weight_attr="w")
    sampler = pyg.Sampler(stores, [1, 1], weighted=True)
    out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([2]), input_type="paper"))
    assert out.node["paper"].tolist() == [2, 3, 4]


@pytest.mark.filterwarnings("ignore:Unable to accurately infer 'num_nodes'")  # PyG's, for an empty store
def test_an_edge_type_naming_a_node_type_without_a_node_store_or_count_is_named():
    def hetero(touch_b: bool):
        data = HeteroData()
        data["a"].x = torch.zeros(3, 1)
        data["a", "to", "b"].edge_index = torch.tensor([[0, 1], [0, 2]])
        if touch_b:
            data["b"]
        return data

    missing = r"edge type \('a', 'to', 'b'\) names node type 'b', which data has no node store for: set data\['b'\]"
    with pytest.raises(ValueError, match=missing):  # was a bare KeyError: 'b'
        pyg.NeighborLoader(hetero(False), [1], input_nodes="a")
    with pytest.raises(ValueError, match=missing):
        pyg.NeighborSampler(hetero(False), [1], weight_attr=None)
    with pytest.raises(ValueError, match=r"data\['b'\] has no num_nodes \(set it"):  # was int(None)'s TypeError
        pyg.NeighborLoader(hetero(True), [1], input_nodes="a")
    fixed = hetero(True)
    fixed["b"].num_nodes = 4
    batch = next(iter(pyg.NeighborLoader(fixed, [-1], input_nodes="a", batch_size=3)))
    assert batch["b"].n_id.numel() == 0 and batch["a", "to", "b"].edge_index.shape == (2, 0)


def test_untyped_or_missing_input_nodes_on_a_typed_graph_name_input_nodes():
    hetero = HeteroData()
    hetero["paper"].x = torch.arange(4).view(-1, 1)
    hetero["paper", "cites", "paper"].edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    stores = (pyg.FeatureStore.from_data(hetero), pyg.GraphStore.from_data(hetero))
    for data in (hetero, stores):
        for input_nodes in (None, torch.tensor([0, 1])):  # PyG's own loader: a bare AssertionError
            with pytest.raises(ValueError, match=r"input_nodes=\(node_type, ids\)"):
                pyg.NeighborLoader(data, [2], input_nodes=input_nodes)
        batch = next(iter(pyg.NeighborLoader(data, [-1], input_nodes=("paper", None), batch_size=4)))
        assert batch["paper"].n_id.tolist() == [0, 1, 2, 3]


def test_untyped_or_missing_edge_label_index_on_a_typed_graph_is_named():
    hetero = HeteroData()
    hetero["a"].num_nodes, hetero["b"].num_nodes = 3, 4
    hetero["a", "to", "b"].edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    pairs = torch.tensor([[0], [3]])
    for edge_label_index in (None, pairs, (None, pairs), "to", ("to", pairs)):  # PyG: bare AssertionErrors
        with pytest.raises(ValueError, match=r"edge_label_index=\(edge_type, pairs\)"):
            pyg.LinkNeighborLoader(hetero, [1], edge_label_index=edge_label_index)
    for edge_label_index in (("a", "to", "b"), (("a", "to", "b"), None), (("a", "to", "b"), pairs)):
        batch = next(iter(pyg.LinkNeighborLoader(hetero, [1], edge_label_index=edge_label_index, batch_size=3)))
        assert batch["a", "to", "b"].edge_label_index.shape[0] == 2


def test_flag_options_take_bools_only_so_no_is_not_read_as_true():
    data = _data()
    ready = gg.NeighborSampler(gg.CSRGraph.from_edge_index(data.edge_index.numpy(), num_nodes=40), [2])
    for make in (
        lambda: pyg.LinkNeighborLoader(data, [2], strict_negatives="no"),  # was bool("no"): strict
        lambda: pyg.NeighborLoader(data, [2], weighted="no"),  # was read as weighted=True
        lambda: pyg.Sampler(ready, None, disjoint="no"),  # a ready sampler turned disjoint
    ):
        with pytest.raises(TypeError, match=r"must be a bool \(True or False\), got str 'no'"):
            make()
    sampler = pyg.NeighborSampler(data, [2])
    with pytest.raises(TypeError, match="disjoint must be a bool"):
        sampler.disjoint = "no"
    assert not sampler.disjoint
    sampler.disjoint = True
    assert sampler.disjoint and pyg.LinkNeighborLoader(data, [2], strict_negatives=True).link_sampler.strict_negatives

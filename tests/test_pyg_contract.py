"""gglspeedup.pyg against PyG's remote-backend contract (issue 26, part A): COO order, puts,
empty graphs, input checks. PyG's own tests run against these classes in tools/pyg_conformance.py."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.loader import LinkLoader  # noqa: E402
from torch_geometric.loader import LinkNeighborLoader as PyGLinkNeighborLoader  # noqa: E402

import gglspeedup as gg  # noqa: E402
from gglspeedup import pyg  # noqa: E402


def _distinct_edges(num_nodes, count, seed):
    """``count`` distinct (source, target) pairs, in random order."""
    rng = np.random.default_rng(seed)
    flat = rng.choice(num_nodes * num_nodes, count, replace=False)
    return np.stack([flat // num_nodes, flat % num_nodes]).astype(np.int64)


def _check_labels(batches, label_of):
    seen = 0
    for batch, node in batches:
        pairs = node[batch.edge_label_index]
        for (u, v), label in zip(pairs.T.tolist(), batch.edge_label.tolist()):
            assert label == label_of[(u, v)], (u, v)
            seen += 1
    return seen


# ------------------------------------------------------------------------------- A1: COO order
def test_typed_store_coo_comes_back_in_put_order_so_pygs_link_loader_labels_every_pair_right():
    edges = _distinct_edges(30, 120, seed=0)
    label = torch.arange(120, dtype=torch.float32) * 3 + 1  # one distinct label per pair
    label_of = {tuple(pair): float(value) for pair, value in zip(edges.T.tolist(), label.tolist())}
    edge_type = ("a", "to", "a")
    graph_store, feature_store = pyg.GraphStore(), pyg.FeatureStore({("a", "x"): np.zeros((30, 1), np.float32)})
    graph_store.put_edge_index(torch.from_numpy(edges), edge_type=edge_type, layout="coo", size=(30, 30))
    row, col, perm = graph_store.coo([edge_type])
    assert perm[edge_type] is None and torch.equal(
        torch.stack([row[edge_type], col[edge_type]]), torch.from_numpy(edges)
    )
    data = (feature_store, graph_store)
    sampler = pyg.Sampler(data, num_neighbors=[2])
    loader = LinkLoader(data, sampler, edge_label_index=edge_type, edge_label=label, batch_size=48, shuffle=True)
    batches = [(b[edge_type], b["a"].n_id) for b in loader]
    assert _check_labels(batches, label_of) == 120
    # PyG's own LinkNeighborLoader (its edge-label path reads our COO), with our NeighborSampler
    sampler = pyg.NeighborSampler(data, [2])
    loader = PyGLinkNeighborLoader(
        data, [2], edge_label_index=edge_type, edge_label=label, batch_size=48, shuffle=True, neighbor_sampler=sampler
    )
    assert _check_labels([(b[edge_type], b["a"].n_id) for b in loader], label_of) == 120


@pytest.mark.parametrize("from_put", [False, True])
def test_our_link_loader_over_every_edge_keeps_each_label_with_its_pair(from_put):
    edges = _distinct_edges(40, 150, seed=1)
    label = torch.arange(150, dtype=torch.float32) + 0.5
    label_of = {tuple(pair): float(value) for pair, value in zip(edges.T.tolist(), label.tolist())}
    if from_put:
        graph_store = pyg.GraphStore()
        graph_store.put_edge_index((torch.from_numpy(edges[0]), torch.from_numpy(edges[1])), None, "coo", size=(40, 40))
    else:
        graph_store = pyg.GraphStore(gg.CSRGraph.from_edge_index(edges, num_nodes=40))
    data = (pyg.FeatureStore({"x": np.zeros((40, 1), np.float32)}), graph_store)
    loader = pyg.LinkNeighborLoader(data, [2], edge_label=label, batch_size=64, shuffle=True)
    assert _check_labels([(b, b.n_id) for b in loader], label_of) == 150


def _pair_without_sizes(ours: bool, typed: bool):
    """A store pair over 10 featured nodes whose edges (put without ``size``) reach only 0 .. 7."""
    from torch_geometric.testing import MyFeatureStore, MyGraphStore

    group, edge_type = ("a", ("a", "to", "a")) if typed else (None, None)
    x = torch.arange(10, dtype=torch.float32).view(10, 1)
    if ours:
        feature_store, graph_store = pyg.FeatureStore({"x": {"a": x} if typed else x}), pyg.GraphStore()
    else:
        feature_store, graph_store = MyFeatureStore(), MyGraphStore()
        feature_store.put_tensor(x, group_name=group, attr_name="x", index=None)
    edges = torch.tensor([[1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 4, 5, 6]])
    graph_store.put_edge_index(edges, edge_type=edge_type, layout="coo", size=None)
    return feature_store, graph_store


@pytest.mark.parametrize("ours", [True, False], ids=["our-stores", "pygs-stores"])
@pytest.mark.filterwarnings("ignore:Using 'NeighborSampler' without")  # PyG's own, without pyg-lib
def test_a_store_pairs_node_count_reads_the_features_when_no_edge_gives_a_size_as_pyg(ours):
    from torch_geometric.loader import NeighborLoader as PyGNeighborLoader
    from torch_geometric.sampler import NeighborSampler as PyGNeighborSampler

    data = _pair_without_sizes(ours, typed=True)
    assert pyg.NeighborSampler(data, [2]).num_nodes == PyGNeighborSampler(data, [2]).num_nodes == {"a": 10}
    for input_nodes in ("a", ("a", None)):
        loader = pyg.NeighborLoader(data, [2], input_nodes=input_nodes, batch_size=20)
        theirs = PyGNeighborLoader(data, [2], input_nodes="a", batch_size=20)  # PyG's ("a", None) reads None's count
        assert torch.equal(loader.input_data.node, theirs.input_data.node)
        (batch,) = list(loader)
        assert batch["a"].batch_size == 10 and batch["a"].n_id.tolist() == list(range(10))
        assert batch["a"].x.view(-1).tolist() == [float(i) for i in range(10)]  # node 9: its own row
    # untyped: PyG's sampler reads max(size) (none here: TypeError); ours reads the features likewise
    loader = pyg.NeighborLoader(_pair_without_sizes(ours, typed=False), [2], batch_size=20)
    assert loader.input_data.node.tolist() == list(range(10))
    assert next(iter(loader)).x.view(-1).tolist() == [float(i) for i in range(10)]


@pytest.mark.filterwarnings("ignore:Using 'NeighborSampler' without")  # PyG's own, without pyg-lib
def test_an_edge_attributes_size_wins_over_the_feature_rows_and_featured_types_join_the_graph():
    """PyG's remote_backend_utils.num_nodes: a size an edge attribute gives a type first, then the features."""
    from torch_geometric.sampler import NeighborSampler as PyGNeighborSampler

    x = {"a": np.zeros((10, 1), np.float32), "b": np.ones((3, 1), np.float32)}
    graph_store = pyg.GraphStore(gg.HeteroGraph({("a", "to", "a"): [[1, 2], [0, 1]]}, {"a": 8}))
    data = (pyg.FeatureStore({"x": x}), graph_store)
    assert pyg.NeighborSampler(data, [2]).num_nodes == PyGNeighborSampler(data, [2]).num_nodes == {"a": 8, "b": 3}
    batch = next(iter(pyg.NeighborLoader(data, [2], input_nodes="b", batch_size=5)))
    assert batch["b"].n_id.tolist() == [0, 1, 2] and batch["a"].n_id.numel() == 0


# ------------------------------------------------------------------------------ A2, A4: puts
def test_put_edge_index_takes_a_stacked_coo_tensor():
    edges = torch.tensor([[0, 1, 2], [1, 2, 0]])
    stacked, pair = pyg.GraphStore(), pyg.GraphStore()
    stacked.put_edge_index(edges, edge_type=None, layout="coo", size=(3, 3))
    pair.put_edge_index((edges[0], edges[1]), edge_type=None, layout="coo", size=(3, 3))
    for layout in ("coo", "csc", "csr"):
        for a, b in zip(getattr(stacked, layout)(), getattr(pair, layout)()):
            assert (a is None and b is None) or torch.equal(a, b)
    with pytest.raises(ValueError, match="edge_index must have shape"):
        stacked.put_edge_index(torch.zeros(3, 4, dtype=torch.long), edge_type=None, layout="coo", size=(3, 3))


def test_uint64_ids_beyond_int64_are_named_not_wrapped_into_negative_ones():
    store = pyg.GraphStore()
    edge_index = np.array([[0, 2**63 + 5], [1, 0]], dtype=np.uint64)  # read as int64: -9223372036854775803
    with pytest.raises(ValueError, match=r"edge_index\[0\]\[1\] = 9223372036854775813 does not fit in int64"):
        store.put_edge_index(edge_index, edge_type=None, layout="coo", size=(2, 2))
    assert store.get_all_edge_attrs() == []
    store.put_edge_index(np.array([[0, 1], [1, 0]], dtype=np.uint64), edge_type=None, layout="coo", size=(2, 2))
    assert [t.tolist() for t in store.get_edge_index(edge_type=None, layout="coo")] == [[0, 1], [1, 0]]


@pytest.mark.parametrize(
    "edge_type, edge_index, size, error",
    [
        (("a", "b"), torch.tensor([[0], [1]]), (2, 2), ValueError),  # not a triple
        (None, torch.tensor([[0], [1]]), (2, 2), ValueError),  # untyped beside typed
        (("a", "to", "a"), (torch.tensor([0, 1]), torch.tensor([1])), (2, 2), ValueError),  # rows differ
        (("a", "to", "a"), torch.tensor([[0], [5]]), (2, 2), ValueError),  # out of range
        (("a", "to", "a"), torch.tensor([[0.0], [1.0]]), (2, 2), TypeError),  # not integers
    ],
)
def test_a_failed_put_leaves_the_store_as_it_was(edge_type, edge_index, size, error):
    store = pyg.GraphStore()
    store.put_edge_index(torch.tensor([[0, 1], [1, 0]]), edge_type=("a", "to", "a"), layout="coo", size=(2, 2))
    before = [(attr.edge_type, attr.layout) for attr in store.get_all_edge_attrs()]
    coo_before = store.coo()
    with pytest.raises(error):
        store.put_edge_index(edge_index, edge_type=edge_type, layout="coo", size=size)
    assert [(attr.edge_type, attr.layout) for attr in store.get_all_edge_attrs()] == before
    assert torch.equal(store.coo()[0][("a", "to", "a")], coo_before[0][("a", "to", "a")])
    assert store.graph.num_edges == {("a", "to", "a"): 2}


# ------------------------------------------------------------------ A7, A9: feature store rows
def test_put_tensor_with_an_index_writes_rows_without_touching_the_callers_array():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    store = pyg.FeatureStore({"x": x})
    assert store.get_tensor(None, "x", index=torch.tensor([1])).tolist() == [[2.0, 3.0]]  # read once first
    store.put_tensor(
        torch.tensor([[-1.0, -2.0], [-3.0, -4.0]]), group_name=None, attr_name="x", index=torch.tensor([4, 1])
    )
    expected = x.copy()
    expected[[4, 1]] = [[-1, -2], [-3, -4]]
    assert np.array_equal(store.get_tensor(None, "x", None).numpy(), expected)
    assert x[1].tolist() == [2.0, 3.0]  # the caller's table is untouched
    with pytest.raises(ValueError, match="rows must have shape"):
        store.put_tensor(torch.zeros(2, 3), group_name=None, attr_name="x", index=torch.tensor([0, 1]))
    with pytest.raises(IndexError, match="index"):
        store.put_tensor(torch.zeros(1, 2), group_name=None, attr_name="x", index=torch.tensor([6]))
    assert np.array_equal(store.get_tensor(None, "x", None).numpy(), expected)  # failed puts changed nothing


def test_put_tensor_with_an_index_on_a_typed_attribute_rebuilds_its_store():
    tables = {"a": np.zeros((3, 2), np.float32), "b": np.ones((4, 2), np.float32)}
    store = pyg.FeatureStore({"x": tables})
    store.put_tensor(torch.full((1, 2), 7.0), group_name="b", attr_name="x", index=torch.tensor([2]))
    rows = store.multi_get_tensor([("a", "x", torch.tensor([0])), ("b", "x", torch.tensor([2, 0]))])
    assert rows[0].tolist() == [[0.0, 0.0]] and rows[1].tolist() == [[7.0, 7.0], [1.0, 1.0]]


def test_a_new_attribute_put_with_an_index_places_each_row_at_its_id():
    store = pyg.FeatureStore()
    store.put_tensor(torch.tensor([10, 20, 30]), group_name="p", attr_name="y", index=torch.tensor([2, 0, 1]))
    assert store.get_tensor("p", "y", None).tolist() == [20, 30, 10]
    with pytest.raises(ValueError, match="every row id"):
        store.put_tensor(torch.tensor([1, 2]), group_name="p", attr_name="z", index=torch.tensor([0, 0]))
    assert store.get_tensor_size("p", "z") is None


def test_get_tensor_size_follows_the_index_and_remove_tensor_reports_absence():
    store = pyg.FeatureStore({"x": np.zeros((5, 3), np.float32)})
    assert tuple(store.get_tensor_size(None, "x")) == (5, 3)
    assert tuple(store.get_tensor_size(None, "x", index=torch.tensor([0, 4]))) == (2, 3)
    assert store.remove_tensor(None, "x", None) and not store.remove_tensor(None, "x", None)


def test_get_tensor_takes_a_numpy_bool_mask_like_a_torch_one():
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    store = pyg.FeatureStore({"x": x})
    mask = np.array([True, False, True, False])
    assert torch.equal(
        store.get_tensor(None, "x", index=mask), store.get_tensor(None, "x", index=torch.from_numpy(mask))
    )
    assert store.get_tensor(None, "x", index=mask).tolist() == x[mask].tolist()


def test_bfloat16_tensors_are_stored_and_written_like_any_other_dtype():
    pytest.importorskip("ml_dtypes")
    x = torch.arange(12.0).view(4, 3).to(torch.bfloat16)  # gglspeedup.FeatureStore takes it; so must PyG's
    labels = torch.arange(4.0).to(torch.bfloat16)
    store = pyg.FeatureStore({"x": x, "y": labels})
    rows = store.get_tensor(None, "x", index=torch.tensor([3, 1]))
    assert rows.dtype == torch.bfloat16 and torch.equal(rows, x[[3, 1]])
    assert torch.equal(store.get_tensor(None, "y", index=torch.tensor([2])), labels[[2]])
    store.put_tensor(
        torch.full((1, 3), 7.0).to(torch.bfloat16), group_name=None, attr_name="x", index=torch.tensor([0])
    )
    assert store.get_tensor(None, "x", index=torch.tensor([0]))[0].tolist() == [7.0, 7.0, 7.0]
    assert x[0].tolist() == [0.0, 1.0, 2.0]  # the caller's tensor is untouched


def test_put_tensor_names_a_uint64_row_id_beyond_int64_as_given():
    store = pyg.FeatureStore({"x": np.zeros((4, 2), np.float32)})
    with pytest.raises(IndexError, match=r"index\[1\] = 9223372036854775809"):  # not wrapped to a negative id
        store.put_tensor(torch.ones(2, 2), group_name=None, attr_name="x", index=np.array([0, 2**63 + 1], np.uint64))
    assert store.get_tensor(None, "x", None).sum().item() == 0.0


def test_a_big_endian_table_is_refused_when_put_not_at_every_lookup():
    table = np.arange(6, dtype=">f4").reshape(3, 2)  # torch.from_numpy refused it on every get_tensor
    for features in ({"x": table}, {"y": table[:, 0]}, {"x": {"a": table, "b": np.zeros((2, 2), np.float32)}}):
        with pytest.raises(TypeError, match=r"big-endian.*newbyteorder"):
            pyg.FeatureStore(features)
    store = pyg.FeatureStore()
    with pytest.raises(TypeError, match="big-endian"):
        store.put_tensor(table, group_name=None, attr_name="x", index=None)
    assert store.get_all_tensor_attrs() == []
    store.put_tensor(table.astype(table.dtype.newbyteorder("=")), group_name=None, attr_name="x", index=None)
    assert store.get_tensor(None, "x", index=torch.tensor([2])).tolist() == [[4.0, 5.0]]


def test_put_tensor_refuses_rows_whose_values_the_table_dtype_would_truncate():
    labels = np.arange(4)
    store = pyg.FeatureStore({"y": labels, "x": np.zeros((4, 2), np.float32)})
    with pytest.raises(TypeError, match="rows of dtype float32 cannot be written into its int64 rows"):
        store.put_tensor(torch.tensor([2.7]), group_name=None, attr_name="y", index=torch.tensor([0]))  # was 2
    assert store.get_tensor(None, "y", None).tolist() == [0, 1, 2, 3]
    store.put_tensor(torch.tensor([9], dtype=torch.int32), group_name=None, attr_name="y", index=torch.tensor([0]))
    mask = pyg.FeatureStore({"m": np.zeros(3, np.uint8)})
    with pytest.raises(ValueError, match=r"rows must fit in its uint8 rows \[0, 255\], got values in \[-1, -1\]"):
        mask.put_tensor(torch.tensor([-1]), group_name=None, attr_name="m", index=torch.tensor([1]))  # was 255
    mask.put_tensor(torch.tensor([7]), group_name=None, attr_name="m", index=torch.tensor([1]))  # int64 that fits
    assert mask.get_tensor(None, "m", None).tolist() == [0, 7, 0]
    store.put_tensor(torch.tensor([[1, 2]]), group_name=None, attr_name="x", index=torch.tensor([3]))  # int -> float
    assert store.get_tensor(None, "y", None).tolist() == [9, 1, 2, 3]
    assert store.get_tensor(None, "x", torch.tensor([3])).tolist() == [[1.0, 2.0]]

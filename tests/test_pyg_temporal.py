"""PyG's disjoint and temporal loaders over gglspeedup.pyg (issue 20): PyG's own NeighborLoader /
LinkNeighborLoader with ``time_attr`` on our stores and sampler, ``SamplerOutput.batch``."""

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.data import Data, HeteroData  # noqa: E402
from torch_geometric.loader import LinkNeighborLoader as PyGLinkNeighborLoader  # noqa: E402
from torch_geometric.loader import NeighborLoader as PyGNeighborLoader  # noqa: E402
from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling, NodeSamplerInput  # noqa: E402

import gglspeedup as gg  # noqa: E402
from gglspeedup import pyg  # noqa: E402


def _data(num_nodes=50, num_edges=300, seed=0):
    generator = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    data = Data(edge_index=edge_index, num_nodes=num_nodes)
    data.x = torch.arange(num_nodes)
    data.time = torch.randint(0, 20, (num_nodes,), generator=generator)
    data.edge_time = torch.randint(0, 20, (num_edges,), generator=generator)
    return data


def _stores(data):
    feature_store = pyg.FeatureStore({"x": data.x.numpy(), "time": data.time.numpy()})
    graph = gg.CSRGraph.from_edge_index(data.edge_index.numpy(), num_nodes=data.num_nodes)
    return feature_store, pyg.GraphStore(graph)


def test_pygs_own_neighbor_loader_with_time_attr_runs_on_our_stores():
    data = _data()
    stores = _stores(data)
    sampler = pyg.NeighborSampler(stores, [3, 3], time_attr="time")
    input_time = torch.full((data.num_nodes,), 10)
    loader = PyGNeighborLoader(
        stores, [3, 3], input_nodes=torch.arange(data.num_nodes), input_time=input_time, time_attr="time",
        batch_size=8, neighbor_sampler=sampler,
    )  # fmt: skip
    seen = 0
    for batch in loader:
        assert batch.batch is not None and batch.batch.numel() == batch.n_id.numel()
        assert (data.time[batch.n_id[batch.batch_size :]] <= 10).all()  # seeds are kept, neighbours eligible
        assert torch.equal(batch.batch[: batch.batch_size], torch.arange(batch.batch_size))
        assert torch.equal(batch.x, batch.n_id)  # features gathered by PyG for our rows
        seen += batch.batch_size
    assert seen == data.num_nodes


@pytest.mark.parametrize("level", ["node", "edge"])
def test_our_neighbor_loader_keeps_every_subgraph_before_its_seed_time(level):
    data = _data(seed=1)
    time_attr = "time" if level == "node" else "edge_time"
    seeds = torch.arange(20)
    input_time = torch.arange(20) % 15
    loader = pyg.NeighborLoader(
        data, [4, 4], input_nodes=seeds, input_time=input_time, time_attr=time_attr, batch_size=5, shuffle=False
    )
    for i, batch in enumerate(loader):
        limit = input_time[5 * i : 5 * i + 5][batch.batch]
        if level == "node":
            later = data.time[batch.n_id] > limit
            assert not later[batch.batch_size :].any()
        else:
            source = batch.batch[batch.edge_index[1]]
            assert (data.edge_time[batch.e_id] <= input_time[5 * i : 5 * i + 5][source]).all()


def test_last_strategy_takes_the_latest_neighbours_through_pyg():
    data = _data(seed=2)
    sampler = pyg.NeighborSampler(data, [2], time_attr="edge_time", temporal_strategy="last")
    out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([4]), time=torch.tensor([12])))
    times = data.edge_time[out.edge]
    row = (data.edge_index[1] == 4) & (data.edge_time <= 12)
    expected = torch.sort(data.edge_time[row]).values[-2:]
    assert torch.equal(torch.sort(times).values, expected)


def test_disjoint_sampler_output_fills_batch():
    data = _data(seed=3)
    sampler = pyg.NeighborSampler(data, [2, 2], disjoint=True)
    out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([1, 1, 2])))
    assert out.batch is not None and out.batch[:3].tolist() == [0, 1, 2]
    assert torch.equal(out.batch[out.row], out.batch[out.col])
    assert sampler.disjoint and not sampler.is_temporal


def _pygs_pair_labels(pairs, amount, typed):
    """The tree label (``batch``) of every pair endpoint by PyG's own ``edge_sample`` (the code its
    LinkNeighborLoader runs; pyg-lib's part, one tree per seed in order, stubbed): the seeds are
    every source, then every target, ``ceil(amount * B)`` negatives each, and ``batch % B``."""
    from torch_geometric.sampler import EdgeSamplerInput, HeteroSamplerOutput, NegativeSampling, SamplerOutput
    from torch_geometric.sampler.neighbor_sampler import edge_sample

    def one_tree_per_seed(seed, seed_time):
        if typed:
            trees = {t: torch.arange(s.numel()) for t, s in seed.items()}
            return HeteroSamplerOutput(node=seed, row={}, col={}, edge={}, batch=trees)
        return SamplerOutput(node=seed, row=None, col=None, edge=None, batch=torch.arange(seed.numel()))

    edge_type = ("a", "to", "a") if typed else None
    index = EdgeSamplerInput(torch.arange(pairs.size(1)), pairs[0], pairs[1], input_type=edge_type)
    num_nodes = {"a": 50} if typed else 50
    out = edge_sample(index, one_tree_per_seed, num_nodes, True, None, NegativeSampling("binary", amount))
    batch = out.batch["a"] if typed else out.batch
    return batch[out.metadata[1]]


@pytest.mark.parametrize("typed", [False, True], ids=["untyped", "typed"])
@pytest.mark.parametrize("weighted", [False, True], ids=["uniform-negatives", "weighted-negatives"])
@pytest.mark.parametrize("amount", [1.5, 0.5, 2])
def test_disjoint_binary_negatives_label_each_pairs_trees_as_pygs_edge_sample(typed, weighted, amount):
    weight = torch.ones(50) if weighted else None
    _, pairs, _, out = _six_pairs(typed, amount, src_weight=weight)
    batch = out.batch["a"] if typed else out.batch
    # target j: tree B + num_neg + j, so (num_neg + j) % B
    assert torch.equal(batch[out.metadata[1]], _pygs_pair_labels(pairs, amount, typed))


def _six_pairs(typed, amount, disjoint=True, src_weight=None):
    """A sampler over seed 5's graph (untyped, or one node type "a"), its first six edges as pairs,
    the edge type, and the sampler's link batch of them with binary negatives at ``amount`` (their
    sources drawn by ``src_weight`` when given): ``(sampler, pairs, edge_type, out)``."""
    data = _data(seed=5)
    if typed:
        data = HeteroData({"a": {"num_nodes": 50}, ("a", "to", "a"): {"edge_index": data.edge_index}})
    pairs = data.edge_index[:, :6] if not typed else data["a", "to", "a"].edge_index[:, :6]
    edge_type = ("a", "to", "a") if typed else None
    sampler = pyg.Sampler(data, [2, 2], disjoint=disjoint)
    out = sampler.sample_from_edges(
        EdgeSamplerInput(torch.arange(6), pairs[0], pairs[1], input_type=edge_type),
        neg_sampling=NegativeSampling("binary", amount, src_weight=src_weight),
    )
    return sampler, pairs, edge_type, out


def _pygs_binary_batch(sampler, pairs, amount, typed, negatives, monkeypatch):
    """PyG's own ``edge_sample`` of ``pairs`` with binary negatives at ``amount``: ``neg_sample``
    returns ``negatives`` (2, ceil(amount * B), the ones ours drew) and pyg-lib's part is our
    sampler's own neighbourhood of PyG's seeds (batch key 0, as the sampler's first batch)."""
    from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling
    from torch_geometric.sampler import neighbor_sampler as pygs

    from gglspeedup.pyg.outputs import hetero_sampler_output, sampler_output

    monkeypatch.setattr(pygs, "neg_sample", lambda *args, endpoint: negatives[0 if endpoint == "src" else 1])
    inner = sampler.sampler

    def our_neighbourhood(seed, seed_time):
        if typed:
            return hetero_sampler_output(inner.sample(seed, key=0))
        return sampler_output(inner.sample(seed, key=0))

    edge_type = ("a", "to", "a") if typed else None
    index = EdgeSamplerInput(torch.arange(pairs.size(1)), pairs[0], pairs[1], input_type=edge_type)
    num_nodes = {"a": 50} if typed else 50
    neg = NegativeSampling("binary", amount)
    return pygs.edge_sample(index, our_neighbourhood, num_nodes, inner.disjoint, None, neg)


def _same(ours, theirs) -> bool:
    """Tensors (dtype and values), lists and dicts of them (same keys) alike."""
    if isinstance(ours, dict):
        return (
            isinstance(theirs, dict) and ours.keys() == theirs.keys() and all(_same(ours[k], theirs[k]) for k in ours)
        )
    if isinstance(ours, torch.Tensor):
        return isinstance(theirs, torch.Tensor) and ours.dtype == theirs.dtype and torch.equal(ours, theirs)
    return ours == theirs


def _global_edges(out, typed):
    """Every sampled edge as (global source, global target, edge id), sorted."""
    node, row, col, edge = out.node, out.row, out.col, out.edge
    if typed:
        node, row, col, edge = node["a"], row[("a", "to", "a")], col[("a", "to", "a")], edge[("a", "to", "a")]
    return sorted(zip(node[row].tolist(), node[col].tolist(), edge.tolist()))


@pytest.mark.parametrize("typed", [False, True], ids=["untyped", "typed"])
@pytest.mark.parametrize("amount", [0.5, 1.5, 2])
def test_disjoint_binary_negatives_grow_exactly_pygs_trees(typed, amount, monkeypatch):
    # amount 1.5 with 6 pairs: PyG's 9 negatives, 2 * 15 trees; ours drew 2 per pair and cut the
    # pairs to 9, but the 3 unreturned negatives' 6 trees stayed in the batch
    sampler, pairs, edge_type, out = _six_pairs(typed, amount)
    node = out.node["a"] if typed else out.node
    num_pairs = 6 + math.ceil(6 * amount)
    label_index = out.metadata[1]
    negatives = node[label_index[:, 6:]]
    pygs = _pygs_binary_batch(sampler, pairs, amount, typed, negatives, monkeypatch)
    for field in ("node", "row", "col", "edge", "batch", "num_sampled_nodes", "num_sampled_edges"):
        assert _same(getattr(out, field), getattr(pygs, field)), field
    assert torch.equal(label_index, pygs.metadata[1]) and torch.equal(out.metadata[2], pygs.metadata[2])
    # one tree per returned endpoint, each rooted at it; no edge joins two trees
    batch = out.batch["a"] if typed else out.batch
    seeds = out.num_sampled_nodes["a"][0] if typed else out.num_sampled_nodes[0]
    assert seeds == 2 * num_pairs and torch.equal(label_index.reshape(-1), torch.arange(seeds))
    row, col = (out.row[edge_type], out.col[edge_type]) if typed else (out.row, out.col)
    assert torch.equal(batch[row], batch[col])


@pytest.mark.parametrize("typed", [False, True], ids=["untyped", "typed"])
@pytest.mark.parametrize("amount", [0.5, 1.5, 2])
def test_shared_binary_negatives_sample_exactly_pygs_seeds(typed, amount, monkeypatch):
    # not disjoint: PyG's seeds are the distinct endpoints of its ceil(amount * B) negative pairs;
    # ours held the unreturned negatives' endpoints too (and their neighbours). PyG sorts the
    # seeds where we keep them in order of first appearance: the sets are compared
    sampler, pairs, _, out = _six_pairs(typed, amount, disjoint=False)
    node = out.node["a"] if typed else out.node
    label_index = out.metadata[1]
    pygs = _pygs_binary_batch(sampler, pairs, amount, typed, node[label_index[:, 6:]], monkeypatch)
    their_node = pygs.node["a"] if typed else pygs.node
    assert sorted(node.tolist()) == sorted(their_node.tolist())
    seeds = out.num_sampled_nodes["a"][0] if typed else out.num_sampled_nodes[0]
    assert sorted(node[:seeds].tolist()) == their_node[:seeds].tolist()  # PyG's: sorted
    assert _global_edges(out, typed) == _global_edges(pygs, typed)
    assert torch.equal(node[label_index], their_node[pygs.metadata[1]])
    assert seeds == torch.unique(label_index).numel()  # every seed an endpoint of a returned pair


def test_temporal_link_neighbor_loader_with_triplet_negatives():
    data = _data(seed=4)
    label_index = data.edge_index[:, :40]
    label_time = torch.maximum(data.time[label_index[0]], data.time[label_index[1]]) + 2
    sampler = pyg.NeighborSampler(data, [-1, -1], time_attr="time")
    loader = PyGLinkNeighborLoader(
        data, [-1, -1], edge_label_index=label_index, edge_label_time=label_time, time_attr="time",
        neg_sampling=dict(mode="triplet", amount=2), batch_size=10, neighbor_sampler=sampler,
    )  # fmt: skip
    for batch in loader:
        assert batch.src_index.tolist() == list(range(10))
        assert batch.dst_pos_index.tolist() == list(range(10, 20))
        assert batch.batch[:40].tolist() == list(range(10)) * 4  # PyG's order: sources, targets, draws
        for i in range(10):
            assert (data.time[batch.n_id[batch.batch == i]] <= batch.seed_time[i]).all()


def test_typed_temporal_loader_leaves_types_without_time_unfiltered():
    data = HeteroData()
    for node_type in ("a", "b", "c"):
        data[node_type].x = torch.arange(10)
    data["b"].time = torch.arange(0, 10)
    data["c"].time = torch.arange(1, 11)
    for src, dst in (("a", "b"), ("b", "a"), ("a", "c"), ("c", "a")):
        data[src, "to", dst].edge_index = torch.arange(10).view(1, -1).repeat(2, 1)
    loader = pyg.NeighborLoader(
        data, [-1], input_nodes="a", time_attr="time", input_time=torch.arange(0, 10), batch_size=10
    )
    batch = next(iter(loader))
    assert (batch["a"].num_nodes, batch["b"].num_nodes, batch["c"].num_nodes) == (10, 10, 0)
    assert torch.equal(batch["b"].batch, torch.arange(10))


def test_input_time_without_time_attr_is_refused_as_pyg():
    with pytest.raises(ValueError, match="input_time"):
        pyg.NeighborLoader(_data(), [2], input_time=torch.zeros(50, dtype=torch.long))


def test_time_attr_missing_from_data_is_named():
    with pytest.raises(ValueError, match="'when' is neither a node-level or edge-level attribute"):
        pyg.NeighborSampler(_data(), [2], time_attr="when")


def test_input_times_not_one_per_seed_or_pair_are_refused_as_the_loader_is_built():
    data = _data()
    seeds = torch.tensor([0, 1, 2])  # PyG's loader indexed the times by batch: an IndexError mid-epoch, or
    for times in (torch.tensor([1, 2]), torch.tensor([1, 2, 3, 4]), torch.tensor(1)):  # silently the first ones
        with pytest.raises(ValueError, match=r"input_time must hold one time per seed \(3\)"):
            pyg.NeighborLoader(data, [2], input_nodes=seeds, input_time=times, time_attr="time")
        with pytest.raises(ValueError, match=r"edge_label_time must hold one time per pair \(3\)"):
            pyg.LinkNeighborLoader(
                data, [2], edge_label_index=data.edge_index[:, :3], edge_label_time=times, time_attr="time"
            )
    mask = torch.zeros(50, dtype=torch.bool)
    mask[[4, 9]] = True  # a mask's seeds are its true entries: one time each
    batch = next(
        iter(
            pyg.NeighborLoader(
                data, [2], input_nodes=mask, input_time=torch.tensor([30, 40]), time_attr="time", batch_size=2
            )
        )
    )
    assert batch.n_id[:2].tolist() == [4, 9] and batch.seed_time.tolist() == [30, 40]

"""gglspeedup.pyg link batches: PyG's LinkLoader on our stores and sampler, binary and triplet negatives."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.data import HeteroData  # noqa: E402
from torch_geometric.loader import LinkLoader  # noqa: E402
from torch_geometric.sampler import NegativeSampling  # noqa: E402

import gglspeedup as gg  # noqa: E402
from gglspeedup import pyg  # noqa: E402

from conftest import load_file  # noqa: E402


@pytest.fixture(scope="module")
def stores():
    graph, x, y, _ = gg.datasets.load("cora")
    return graph, x, (pyg.FeatureStore({"x": x, "y": y}), pyg.GraphStore(graph))


def _pairs(graph, count, seed=0):
    """``count`` graph edges (source, target) as a (2, count) tensor."""
    targets = np.repeat(np.arange(graph.num_nodes), graph.degree())
    pick = np.random.default_rng(seed).choice(graph.num_edges, count, replace=False)
    return torch.from_numpy(np.stack([graph.indices[pick], targets[pick]]))


def _loader(data, sampler, pairs, **kwargs):
    # PyG's remote-backend recipe; an untyped graph's pairs go as (None, pairs)
    return LinkLoader(data=data, link_sampler=sampler, edge_label_index=(None, pairs), **kwargs)


def test_binary_batches_have_pygs_shapes_labels_and_pairs(stores):
    graph, x, data = stores
    pairs = _pairs(graph, 50)
    sampler = pyg.Sampler(data, num_neighbors=[4, 2])
    loader = _loader(data, sampler, pairs, batch_size=20, neg_sampling=NegativeSampling("binary", amount=2))
    batches = list(loader)
    assert [b.input_id.numel() for b in batches] == [20, 20, 10]
    for batch in batches:
        count = batch.input_id.numel()
        assert batch.edge_label_index.shape == (2, 3 * count)
        assert batch.edge_label.dtype == torch.float32
        assert batch.edge_label.tolist() == [1.0] * count + [0.0] * (2 * count)
        global_pairs = batch.n_id[batch.edge_label_index]
        assert torch.equal(global_pairs[:, :count], pairs[:, batch.input_id])
        assert torch.equal(batch.x, torch.from_numpy(x)[batch.n_id])
        assert batch.num_sampled_nodes[0] == len(torch.unique(global_pairs))  # seeds: every endpoint
        assert torch.equal(batch.n_id[: batch.num_sampled_nodes[0]].sort().values, torch.unique(global_pairs))
        assert "src_index" not in batch


def test_binary_negatives_keep_given_labels_and_a_fractional_amount(stores):
    graph, _, data = stores
    pairs = _pairs(graph, 12, seed=1)
    labels = torch.arange(12) % 3  # classes 0..2: PyG shifts them to 1..3, 0 is "negative"
    sampler = pyg.Sampler(data, num_neighbors=[2])
    loader = _loader(
        data, sampler, pairs, edge_label=labels, batch_size=12, neg_sampling=NegativeSampling("binary", 0.5)
    )
    (batch,) = list(loader)
    assert batch.edge_label_index.shape == (2, 12 + 6)
    assert batch.edge_label.tolist() == (labels + 1).tolist() + [0] * 6 and batch.edge_label.dtype == torch.int64
    no_negatives = next(iter(_loader(data, sampler, pairs, batch_size=12)))
    assert "edge_label" not in no_negatives and no_negatives.edge_label_index.shape == (2, 12)


@pytest.mark.parametrize("amount", [1, 3])
def test_triplet_batches_have_pygs_indices(stores, amount):
    graph, _, data = stores
    pairs = _pairs(graph, 16, seed=2)
    sampler = pyg.Sampler(data, num_neighbors=[3, 3])
    loader = _loader(data, sampler, pairs, batch_size=16, neg_sampling=NegativeSampling("triplet", amount))
    (batch,) = list(loader)
    assert batch.src_index.shape == (16,) and batch.dst_pos_index.shape == (16,)
    assert batch.dst_neg_index.shape == ((16,) if amount == 1 else (16, amount))
    assert torch.equal(batch.n_id[batch.src_index], pairs[0]) and torch.equal(batch.n_id[batch.dst_pos_index], pairs[1])
    assert int(batch.dst_neg_index.max()) < batch.num_sampled_nodes[0]  # negatives are seeds too
    assert "edge_label_index" not in batch and "edge_label" not in batch


@pytest.mark.parametrize("exclude", ["self", "reverse"])
def test_exclusion_keeps_the_batchs_own_edges_out_of_its_neighbourhood(stores, exclude):
    graph, _, data = stores
    pairs = _pairs(graph, 64, seed=3)
    sampler = pyg.Sampler(data, num_neighbors=[-1, -1], exclude=exclude)
    (batch,) = list(_loader(data, sampler, pairs, batch_size=64))
    sampled = set(map(tuple, batch.n_id[batch.edge_index].t().tolist()))
    positives = set(map(tuple, pairs.t().tolist()))
    assert not sampled & positives
    reversed_positives = {(d, s) for s, d in positives}
    assert bool(sampled & reversed_positives) == (exclude == "self")  # Cora stores both directions
    kept = pyg.Sampler(data, num_neighbors=[-1, -1])  # PyG's behaviour: nothing excluded
    (batch,) = list(_loader(data, kept, pairs, batch_size=64))
    assert positives <= set(map(tuple, batch.n_id[batch.edge_index].t().tolist()))


def test_link_neighbor_loader_on_stores_takes_a_plain_tensor_or_every_edge(stores):
    graph, _, data = stores
    pairs = _pairs(graph, 30, seed=4)
    loader = pyg.LinkNeighborLoader(data, [2, 2], edge_label_index=pairs, batch_size=10, neg_sampling_ratio=1.0)
    batches = list(loader)
    assert len(batches) == 3 and all(b.edge_label.tolist() == [1.0] * 10 + [0.0] * 10 for b in batches)
    every = pyg.LinkNeighborLoader(data, [1], batch_size=4096)
    assert sum(b.input_id.numel() for b in every) == graph.num_edges
    with pytest.raises(ValueError, match="src_weight must have one entry per node"):  # weighted negatives: checked
        next(iter(pyg.LinkNeighborLoader(data, [1], pairs, neg_sampling=NegativeSampling("binary", 1, torch.ones(9)))))


def test_strict_negatives_are_not_graph_edges(stores):
    graph, _, data = stores
    pairs = _pairs(graph, 40, seed=5)
    sampler = pyg.Sampler(data, [1], strict_negatives=True)
    (batch,) = list(_loader(data, sampler, pairs, batch_size=40, neg_sampling="binary"))
    negatives = batch.n_id[batch.edge_label_index[:, 40:]]
    edges = set(
        map(
            tuple,
            torch.stack(
                [
                    torch.from_numpy(graph.indices),
                    torch.repeat_interleave(torch.arange(graph.num_nodes), torch.from_numpy(graph.degree())),
                ]
            )
            .t()
            .tolist(),
        )
    )
    assert not set(map(tuple, negatives.t().tolist())) & edges


@pytest.fixture(scope="module")
def hetero():
    gen = torch.Generator().manual_seed(1)
    data = HeteroData()
    data["paper"].x = torch.randn(50, 6, generator=gen)
    data["author"].x = torch.randn(30, 3, generator=gen)
    writes = torch.unique(
        torch.stack([torch.randint(0, 30, (140,), generator=gen), torch.randint(0, 50, (140,), generator=gen)]), dim=1
    )
    data["author", "writes", "paper"].edge_index = writes
    data["paper", "rev_writes", "author"].edge_index = writes.flip(0)
    return data


def _pair_set(src, dst):
    """The ``(src, dst)`` pairs of two id tensors, as a set of tuples."""
    return set(map(tuple, torch.stack([src, dst]).t().tolist()))


def test_typed_binary_and_triplet_link_batches(hetero):
    edge_type = ("author", "writes", "paper")
    writes = hetero[edge_type].edge_index
    loader = pyg.LinkNeighborLoader(
        hetero,
        [3, 2],
        edge_label_index=(edge_type, writes[:, :24]),
        batch_size=12,
        neg_sampling="binary",
        exclude="reverse",
    )
    for batch in loader:
        store = batch[edge_type]
        assert store.edge_label_index.shape == (2, 24) and store.edge_label.tolist() == [1.0] * 12 + [0.0] * 12
        src, dst = batch["author"].n_id[store.edge_label_index[0]], batch["paper"].n_id[store.edge_label_index[1]]
        assert torch.equal(torch.stack([src, dst])[:, :12], writes[:, store.input_id])
        sampled = _pair_set(batch["author"].n_id[store.edge_index[0]], batch["paper"].n_id[store.edge_index[1]])
        assert not sampled & _pair_set(*writes[:, store.input_id])  # excluded, and their reverses
        rev = batch["paper", "rev_writes", "author"]
        reverse = _pair_set(batch["author"].n_id[rev.edge_index[1]], batch["paper"].n_id[rev.edge_index[0]])
        assert not reverse & _pair_set(*writes[:, store.input_id])
    feature_store, graph_store = pyg.FeatureStore.from_data(hetero), pyg.GraphStore.from_data(hetero)
    sampler = pyg.Sampler((feature_store, graph_store), [2])
    loader = LinkLoader(
        (feature_store, graph_store),
        sampler,
        edge_label_index=(edge_type, writes[:, :10]),
        batch_size=10,
        neg_sampling=NegativeSampling("triplet", 2),
    )
    batch = next(iter(loader))
    assert batch["author"].src_index.shape == (10,) and batch["paper"].dst_neg_index.shape == (10, 2)
    assert torch.equal(batch["author"].n_id[batch["author"].src_index], writes[0, :10])
    assert torch.equal(batch["paper"].n_id[batch["paper"].dst_pos_index], writes[1, :10])
    assert torch.equal(batch["paper"].x, hetero["paper"].x[batch["paper"].n_id])


def test_the_demos_link_task_runs_and_reports_roc_auc(capsys):

    demo = load_file("demos/pyg_sage_cora.py", "pyg_demo_link")
    argv = "--task link --dataset powerlaw:300:6 --epochs 2 --fanouts 4,3 --hidden 8 --embedding 8 --device cpu"
    result = demo.main(argv.split() + ["--threads", "1"])
    assert result["task"] == "link" and 0.0 <= result["test"] <= 1.0
    assert "val AUC" in capsys.readouterr().out


@pytest.mark.parametrize("amount", [1, 3])
def test_a_triplet_batch_without_pairs_has_empty_indices_of_pygs_shapes(amount):
    from torch_geometric.sampler import EdgeSamplerInput

    graph = gg.CSRGraph.from_edge_index(np.array([[1, 2, 0], [0, 0, 1]]), num_nodes=3)
    none = torch.empty(0, dtype=torch.long)  # reshape(0, -1) raised torch's RuntimeError here
    out = pyg.Sampler(graph, [-1]).sample_from_edges(
        EdgeSamplerInput(None, none, none), neg_sampling=NegativeSampling("triplet", amount)
    )
    _, src_index, dst_pos_index, dst_neg_index, _ = out.metadata
    assert src_index.shape == dst_pos_index.shape == (0,) and out.node.numel() == 0
    assert dst_neg_index.shape == ((0,) if amount == 1 else (0, amount))
    with pytest.raises(ValueError, match=r"differ in shape: row \(2,\), col \(1,\)"):
        pyg.Sampler(graph, [-1]).sample_from_edges(EdgeSamplerInput(None, torch.tensor([0, 1]), torch.tensor([1])))

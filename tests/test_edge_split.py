"""datasets.split_edges (held-out pairs never in the message graph, negatives never edges) and roc_auc."""

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup import datasets
from gglspeedup.examples.loop import roc_auc


def _edges(graph):
    return set(zip(graph.indices.tolist(), np.repeat(np.arange(graph.num_nodes), graph.degree()).tolist()))


def _graph(undirected=True, seed=0):
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, 60, size=(2, 300))
    edges = np.concatenate([edges, [[5, 5], [5, 5]]], axis=1)  # a self loop, twice
    if undirected:
        edges = np.concatenate([edges, edges[::-1]], axis=1)
    return gg.CSRGraph.from_edge_index(edges, num_nodes=60, weights=rng.random(edges.shape[1]))


@pytest.mark.parametrize("undirected", [True, False])
def test_split_partitions_the_pairs_and_keeps_held_out_edges_out_of_the_message_graph(undirected):
    graph = _graph(undirected)
    split = datasets.split_edges(graph, val=0.1, test=0.2, seed=3, undirected=undirected)
    split.graph.validate()
    every, message = _edges(graph), _edges(split.graph)
    key = (lambda s, t: (min(s, t), max(s, t))) if undirected else (lambda s, t: (s, t))
    pairs = {key(s, t) for s, t in every if s != t}
    train = {tuple(p) for p in split.train.T.tolist()}
    held = {}
    for name in ("val", "test"):
        pairs_of, labels = getattr(split, name), getattr(split, f"{name}_labels")
        assert labels.dtype == np.float32 and len(labels) == pairs_of.shape[1]
        positives, negatives = pairs_of[:, labels == 1].T.tolist(), pairs_of[:, labels == 0].T.tolist()
        assert len(positives) == len(negatives)  # as many negatives as positives
        held[name] = {key(s, t) for s, t in positives}
        assert len(held[name]) == len(positives)
        for s, t in negatives:
            assert s != t and (s, t) not in every and (not undirected or (t, s) not in every)
        assert len({key(s, t) for s, t in negatives}) == len(negatives)
    # the distinct pairs split into train / val / test, in the requested shares
    assert train | held["val"] | held["test"] == pairs and len(train) + len(held["val"]) + len(held["test"]) == len(
        pairs
    )
    assert len(held["val"]) == round(0.1 * len(pairs)) and len(held["test"]) == round(0.2 * len(pairs))
    # the message graph: exactly the input edges whose pair is a training pair, and self loops
    expected = {(s, t) for s, t in every if s == t or key(s, t) in train}
    assert message == expected
    assert split.graph.num_edges == sum(
        1
        for s, t in zip(graph.indices.tolist(), np.repeat(np.arange(60), graph.degree()).tolist())
        if s == t or key(s, t) in train
    )


def test_split_keeps_weights_and_edge_ids_with_their_edges():
    graph = _graph()
    split = datasets.split_edges(graph, seed=1)
    position = {int(e): p for p, e in enumerate(graph.edge_ids)}
    for p, e in enumerate(split.graph.edge_ids.tolist()):
        assert split.graph.weights[p] == graph.weights[position[e]]
        assert split.graph.indices[p] == graph.indices[position[e]]


def test_the_message_graph_of_a_renumbered_graph_keeps_its_node_order():
    # It was dropped: original_ids and rows_in_order on the message graph were the identity, so
    # features gathered through it were the wrong nodes' rows.
    edges = np.random.default_rng(3).integers(0, 60, size=(2, 400))
    graph = gg.CSRGraph.from_edge_index(edges, num_nodes=60, reorder="degree")
    split = datasets.split_edges(graph, seed=1)
    np.testing.assert_array_equal(split.graph.node_order, graph.node_order)
    x = np.arange(60.0)[:, None] * 10
    np.testing.assert_array_equal(split.graph.rows_in_order(x), graph.rows_in_order(x))


def test_split_is_deterministic_by_seed():
    graph = _graph()
    a, b, c = (datasets.split_edges(graph, seed=s) for s in (4, 4, 5))
    assert all(np.array_equal(x, y) for x, y in zip(a[1:], b[1:]))
    assert not np.array_equal(a.test, c.test)


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        ({"val": 0.6, "test": 0.5}, ValueError, "val \\+ test"),
        ({"val": -0.1}, ValueError, "val must be in"),
        ({"test": "0.1"}, TypeError, "test must be a share"),
        ({"seed": -1}, ValueError, "seed"),
        ({"undirected": 1}, TypeError, "undirected"),
    ],
)
def test_bad_arguments_fail_clearly(arguments, error, message):
    with pytest.raises(error, match=message):
        datasets.split_edges(_graph(), **arguments)


def test_a_bipartite_graph_is_refused_by_name():
    # its source ids are not node ids: the message graph built from them named a bad index instead
    bipartite = gg.CSRGraph(np.array([0, 1, 2]), np.array([3, 4]), num_src_nodes=5)
    with pytest.raises(ValueError, match="graph is bipartite \\(num_src_nodes = 5, num_nodes = 2\\)"):
        datasets.split_edges(bipartite)


def test_a_complete_graph_has_no_negatives_to_draw():
    full = np.array([(s, t) for s in range(6) for t in range(6) if s != t]).T
    with pytest.raises(ValueError, match="too dense"):
        datasets.split_edges(gg.CSRGraph.from_edge_index(full, num_nodes=6), val=0.2, test=0.2)


def test_self_loops_do_not_count_against_the_free_pairs():
    # 4 nodes, 6 of the 12 ordered pairs u != v are edges, and every node has a self loop: 6 free
    # pairs, enough for 2 negatives; the loops were counted as taken pairs ("about 2 exist")
    source, target = [0, 1, 2, 3, 0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 2, 3, 0, 1, 2, 3]
    graph = gg.CSRGraph.from_edge_index([source, target], num_nodes=4)
    split = datasets.split_edges(graph, val=0.2, test=0.2, undirected=False)
    negatives = np.concatenate([split.val[:, 1:], split.test[:, 1:]], axis=1)
    assert negatives.shape == (2, 2) and np.all(negatives[0] != negatives[1])
    assert not set(map(tuple, negatives.T.tolist())) & set(zip(source, target))
    with pytest.raises(ValueError, match="about 0 exist"):  # the count itself is right
        loops = [[0, 1, 2], [0, 1, 2]]
        full = np.array([(s, t) for s in range(3) for t in range(3) if s != t]).T
        datasets.split_edges(
            gg.CSRGraph.from_edge_index(np.concatenate([full, loops], 1), num_nodes=3), val=0.2, test=0.2
        )


def test_roc_auc_matches_the_pairwise_definition():
    rng = np.random.default_rng(0)
    scores = np.round(rng.normal(size=200), 1)  # ties included
    labels = rng.random(200) < 0.4
    positive, negative = scores[labels], scores[~labels]
    pairwise = ((positive[:, None] > negative[None]).sum() + 0.5 * (positive[:, None] == negative[None]).sum()) / (
        len(positive) * len(negative)
    )
    assert roc_auc(scores, labels.astype(np.float32)) == pytest.approx(pairwise, abs=1e-12)
    assert roc_auc(np.arange(4.0), np.array([0, 0, 1, 1])) == 1.0
    assert np.isnan(roc_auc(np.arange(3.0), np.ones(3)))

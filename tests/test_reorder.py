"""Node orders chosen at build time (issue 42, the scale row): ``build_csr(..., reorder=)`` and
``CSRGraph.from_edge_index(..., reorder=)`` renumber the nodes, the graph keeps the order, and ids,
features and labels follow it both ways; the renumbered graph is exactly the original one."""

import os

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.datasets import build, build_csr

NUM_NODES = 2000


def _edges(num_edges=40_000, seed=0):
    # A skewed graph (the hot nodes are the low ids before renumbering, scattered after a shuffle),
    # so the degree order is far from the identity.
    rng = np.random.default_rng(seed)
    hot = (rng.pareto(1.5, size=(2, num_edges)) * 20).astype(np.int64) % NUM_NODES
    return rng.permutation(NUM_NODES)[hot]


def _chunks(edges, size=3_001):
    return [edges[:, i : i + size] for i in range(0, edges.shape[1], size)]


def _rank(order):
    rank = np.empty(order.shape[0], np.int64)
    rank[order] = np.arange(order.shape[0])
    return rank


def _assert_same_graph_renumbered(graph, original):
    """Row ``i`` of ``graph`` is row ``node_order[i]`` of ``original``, entry by entry, in order."""
    order = graph.node_order
    assert sorted(order.tolist()) == list(range(original.num_nodes))
    assert graph.num_edges == original.num_edges
    for i in range(graph.num_nodes):
        v = order[i]
        new_row = graph.indices[graph.indptr[i] : graph.indptr[i + 1]]
        old = slice(original.indptr[v], original.indptr[v + 1])
        assert np.array_equal(order[new_row], original.indices[old]), i
        for name in ("edge_ids", "weights"):
            if getattr(original, name) is not None:
                new_part = getattr(graph, name)[graph.indptr[i] : graph.indptr[i + 1]]
                assert np.array_equal(new_part, getattr(original, name)[old]), (name, i)


@pytest.mark.parametrize("direction", ["in", "out"])
def test_build_csr_degree_order_renumbers_the_same_edges_hottest_first(tmp_path, direction):
    edges = _edges()
    weights = np.random.default_rng(1).random(edges.shape[1]).astype(np.float32)
    graph = build_csr(
        _chunks(edges), tmp_path / "g", NUM_NODES, direction=direction, memory="1M", keep_edge_ids=True,
        weights=[weights[i : i + 3_001] for i in range(0, len(weights), 3_001)], reorder="degree",
    )  # fmt: skip
    reference = gg.CSRGraph.from_edge_index(edges, NUM_NODES, direction=direction, weights=weights)
    _assert_same_graph_renumbered(graph, reference)
    # Hottest first: appearance counts in indices never increase along the new ids; ties keep id order.
    reads = np.bincount(edges[0 if direction == "in" else 1], minlength=NUM_NODES)
    assert np.array_equal(graph.node_order, np.argsort(-reads, kind="stable"))
    assert np.all(np.diff(np.bincount(graph.indices, minlength=NUM_NODES)) <= 0)
    # The same arrays as the in-memory build of the same edges with the same order.
    in_memory = gg.CSRGraph.from_edge_index(edges, NUM_NODES, direction=direction, weights=weights, reorder="degree")
    for name in ("indptr", "indices", "edge_ids", "weights", "node_order"):
        a, b = getattr(graph, name), getattr(in_memory, name)
        assert np.array_equal(a, b) and a.dtype == b.dtype, name


def test_a_tiny_budget_builds_the_renumbered_graph_in_many_buckets(tmp_path, monkeypatch):
    edges = _edges(400_000, seed=2)
    spans = []
    original = build._scatter_bucket

    def spy(rows, cols, r0, r1, *rest):
        spans.append((int(r0), int(r1)))
        return original(rows, cols, r0, r1, *rest)

    monkeypatch.setattr(build, "_scatter_bucket", spy)
    graph = build_csr(_chunks(edges, 50_000), tmp_path / "g", NUM_NODES, memory="1M", reorder="degree")
    assert len({span for span in spans}) >= 2  # 1.6 MB of int32 indices through a 1 MiB buffer
    reference = gg.CSRGraph.from_edge_index(edges, NUM_NODES, keep_edge_ids=False)
    _assert_same_graph_renumbered(graph, reference)


@pytest.mark.parametrize("reorder", ["degree", "bfs"])
@pytest.mark.parametrize("keep_edge_ids", [True, False])
def test_from_edge_index_reorder_equals_building_the_renumbered_edge_list(reorder, keep_edge_ids):
    edges = _edges(seed=3)
    weights = np.random.default_rng(4).random(edges.shape[1])
    graph = gg.CSRGraph.from_edge_index(edges, NUM_NODES, weights=weights, keep_edge_ids=keep_edge_ids, reorder=reorder)
    expected = gg.CSRGraph.from_edge_index(
        _rank(graph.node_order)[edges], NUM_NODES, weights=weights, keep_edge_ids=keep_edge_ids
    )
    for name in ("indptr", "indices", "edge_ids", "weights"):
        a, b = getattr(graph, name), getattr(expected, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert np.array_equal(a, b) and a.dtype == b.dtype, name
    if reorder == "bfs":
        assert np.array_equal(graph.node_order, _bfs_reference(edges))


def _bfs_reference(edges):
    """Breadth-first from the most-read node not reached yet, neighbours in row order (Python)."""
    plain = gg.CSRGraph.from_edge_index(edges, NUM_NODES, keep_edge_ids=False)
    starts = np.argsort(-np.bincount(edges[0], minlength=NUM_NODES), kind="stable")
    order, seen = [], set()
    for root in starts.tolist():
        if root in seen:
            continue
        seen.add(root)
        queue = [root]
        while queue:
            v = queue.pop(0)
            order.append(v)
            for u in plain.indices[plain.indptr[v] : plain.indptr[v + 1]].tolist():
                if u not in seen:
                    seen.add(u)
                    queue.append(u)
    return np.array(order)


def test_ids_features_and_labels_follow_the_order_both_ways():
    edges = _edges(seed=5)
    graph = gg.CSRGraph.from_edge_index(edges, NUM_NODES, reorder="degree")
    rng = np.random.default_rng(6)
    features = rng.standard_normal((NUM_NODES, 3)).astype(np.float32)
    labels = rng.integers(0, 7, NUM_NODES)
    user_ids = rng.integers(0, NUM_NODES, (4, 50))
    new = graph.new_ids(user_ids)
    assert new.shape == (4, 50) and new.dtype == np.int64
    assert np.array_equal(graph.original_ids(new), user_ids)
    assert np.array_equal(graph.node_order[new], user_ids)
    x, y = graph.rows_in_order(features), graph.rows_in_order(labels)
    assert np.array_equal(x[new], features[user_ids]) and np.array_equal(y[new], labels[user_ids])
    store = gg.FeatureStore(x)
    assert np.array_equal(store.gather(new[0]), features[user_ids[0]])
    torch = pytest.importorskip("torch")
    assert torch.equal(graph.rows_in_order(torch.from_numpy(features))[torch.from_numpy(new[0])],
                       torch.from_numpy(features[user_ids[0]]))  # fmt: skip
    plain = gg.CSRGraph.from_edge_index(edges, NUM_NODES)  # no order: the ids are the user's
    assert plain.node_order is None and np.array_equal(plain.new_ids(user_ids), user_ids)
    assert np.array_equal(plain.original_ids(user_ids), user_ids) and plain.rows_in_order(labels) is labels


def test_ids_keep_their_shape_and_one_id_gives_one_int64():
    # graph.new_ids(3) was array([...]) of shape (1,): NumPy's ascontiguousarray makes 0-d arrays 1-D
    torch = pytest.importorskip("torch")
    ordered = gg.CSRGraph.from_edge_index(_edges(seed=10), NUM_NODES, reorder="degree")
    plain = gg.CSRGraph.from_edge_index(_edges(seed=10), NUM_NODES)
    rank = _rank(ordered.node_order)
    for graph, new, old in ((ordered, rank, ordered.node_order), (plain, np.arange(NUM_NODES), np.arange(NUM_NODES))):
        for one in (3, np.int32(3), np.array(3), torch.tensor(3)):
            for mapped, expected in ((graph.new_ids(one), new[3]), (graph.original_ids(one), old[3])):
                assert type(mapped) is np.int64 and mapped == expected  # as new[np.array(3)] gives
        for ids in ([3], [[3, 7], [0, 1]], np.zeros((2, 0), np.int32), np.arange(6).reshape(1, 2, 3).T):
            expected = np.asarray(ids, np.int64)
            for mapped, table in ((graph.new_ids(ids), new), (graph.original_ids(ids), old)):
                assert mapped.shape == expected.shape and mapped.dtype == np.int64
                assert np.array_equal(mapped, table[expected])
    with pytest.raises(IndexError, match=r"out of range \[0, num_nodes = 2000\)"):
        ordered.new_ids(NUM_NODES)


def test_sampling_the_renumbered_graph_draws_edges_of_the_original_graph():
    edges = _edges(seed=7)
    original = gg.CSRGraph.from_edge_index(edges, NUM_NODES)
    graph = gg.CSRGraph.from_edge_index(edges, NUM_NODES, reorder="degree")
    pairs = set(zip(edges[0].tolist(), edges[1].tolist()))
    user_seeds = np.random.default_rng(8).choice(NUM_NODES, 64, replace=False)
    out = gg.NeighborSampler(graph, [5, 3], seed=0).sample(graph.new_ids(user_seeds))
    n_id = np.asarray(out.n_id)
    assert np.array_equal(n_id[:64], graph.new_ids(user_seeds))
    drawn = 0
    for adj in out.adjs:
        src, dst = n_id[np.asarray(adj.edge_index[0])], n_id[np.asarray(adj.edge_index[1])]
        e_id = np.asarray(adj.e_id)
        assert np.array_equal(edges[0, e_id], graph.original_ids(src))  # e_id names the user's edge
        assert np.array_equal(edges[1, e_id], graph.original_ids(dst))
        assert all(p in pairs for p in zip(graph.original_ids(src).tolist(), graph.original_ids(dst).tolist()))
        drawn += len(e_id)
    assert drawn > 64
    assert original.num_edges == graph.num_edges


def test_the_order_is_saved_with_its_checksum_and_round_trips(tmp_path):
    graph = gg.CSRGraph.from_edge_index(_edges(seed=9), NUM_NODES, reorder="degree")
    graph.save(tmp_path / "g")
    for verify in (False, True):
        loaded = gg.CSRGraph.load(tmp_path / "g", verify=verify)
        assert np.array_equal(loaded.node_order, graph.node_order) and loaded.node_order.dtype == np.int64
        assert np.array_equal(loaded.new_ids([0, 5]), graph.new_ids([0, 5]))
    assert gg.CSRGraph.load(tmp_path / "g").to("cpu").node_order is not None
    # Two entries swapped keep a permutation: only the checksum tells.
    path = tmp_path / "g" / "node_order.npy"
    order = np.load(path)
    order[[0, 1]] = order[[1, 0]]
    np.save(path, order)
    with pytest.raises(ValueError, match=r"array 'node_order' fails its checksum"):
        gg.CSRGraph.load(tmp_path / "g", verify=True)
    order[0] = order[2]  # a repeated node: not a permutation any more
    with pytest.raises(ValueError, match=r"node_order must be a permutation of range\(2000\): node \d+ is missing"):
        gg.CSRGraph(graph.indptr, graph.indices, node_order=order)


def test_permute_composes_with_the_order_the_graph_carries():
    edges = _edges(seed=10)
    graph = gg.CSRGraph.from_edge_index(edges, NUM_NODES, reorder="degree")
    shuffle = np.random.default_rng(11).permutation(NUM_NODES)
    permuted, _ = graph.permute(shuffle)
    assert np.array_equal(permuted.node_order, graph.node_order[shuffle])
    _assert_same_graph_renumbered(permuted, gg.CSRGraph.from_edge_index(edges, NUM_NODES))


def test_bad_orders_and_ids_are_refused_by_name_before_anything_is_written(tmp_path):
    def untouched():
        raise AssertionError("the source was read")
        yield

    for bad in ("random", "bfs", "Degree", 1, True):  # bfs needs the whole graph: in memory only
        with pytest.raises(ValueError, match=r"reorder must be None or one of \('degree',\), got"):
            build_csr(untouched(), tmp_path / "g", num_nodes=3, reorder=bad)
    with pytest.raises(ValueError, match=r"reorder must be None or one of \('degree', 'bfs'\), got 'rcm'"):
        gg.CSRGraph.from_edge_index([[0, 1], [1, 0]], reorder="rcm")
    with pytest.raises(ValueError, match=r"reorder needs a square graph"):
        gg.CSRGraph.from_edge_index([[0, 1], [1, 0]], 2, num_src_nodes=3, reorder="degree")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match=r"is not a graph folder written by gglspeedup"):
        build_csr(untouched(), mine, num_nodes=3, reorder="degree")
    assert sorted(os.listdir(tmp_path)) == ["mine"] and os.listdir(mine) == ["notes.txt"]
    graph = gg.CSRGraph.from_edge_index([[0, 1, 2], [1, 2, 0]], reorder="degree")
    with pytest.raises(IndexError, match=r"ids\[1\] = 3 is out of range \[0, num_nodes = 3\)"):
        graph.new_ids([0, 3])
    with pytest.raises(IndexError, match=r"ids\[0\] = -1 is out of range"):
        graph.original_ids([-1])
    with pytest.raises(TypeError, match=r"ids must hold integers"):
        graph.new_ids([0.5])
    with pytest.raises(ValueError, match=r"array must have num_nodes = 3 rows \(one per node\), got 2"):
        graph.rows_in_order(np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"node_order must have num_nodes = 3 entries, got 2"):
        gg.CSRGraph([0, 1, 2, 3], [1, 2, 0], node_order=[0, 1])
    with pytest.raises(ValueError, match=r"node_order\[1\] = 7 is out of range \[0, 3\)"):
        gg.CSRGraph([0, 1, 2, 3], [1, 2, 0], node_order=[0, 7, 1])


def test_a_failed_renumbered_build_leaves_nothing(tmp_path):
    edges = _edges(seed=12)
    chunks = _chunks(edges)
    chunks[5] = chunks[5].copy()
    chunks[5][1, 7] = NUM_NODES  # out of range: found in the counting pass
    with pytest.raises(ValueError, match=r"source chunk 5, edge 7 .* is out of range for num_nodes = 2000"):
        build_csr(chunks, tmp_path / "g", NUM_NODES, memory="1M", reorder="degree")
    assert os.listdir(tmp_path) == []


def test_papers_like_degree_order_is_the_same_graph_hubs_first_in_its_own_folder(tmp_path):
    from gglspeedup.datasets.papers_like import load_papers_like

    plain, _ = load_papers_like(5000, 1, folder=tmp_path, memory="1M")
    graph, built = load_papers_like(5000, 1, folder=tmp_path, memory="1M", reorder="degree")
    assert built and sorted(os.listdir(tmp_path)) == ["papers-like-5000-1", "papers-like-5000-1-degree"]
    order = graph.node_order
    for i in range(graph.num_nodes):  # rows are sorted and deduplicated in each numbering
        row = np.sort(order[graph.indices[graph.indptr[i] : graph.indptr[i + 1]]])
        assert np.array_equal(row, plain.indices[plain.indptr[order[i]] : plain.indptr[order[i] + 1]])
    assert graph.degree()[0] == plain.degree().max()  # the hub first
    again, built = load_papers_like(5000, 1, folder=tmp_path, reorder="degree")
    assert not built and np.array_equal(again.node_order, order)
    with pytest.raises(ValueError, match=r"reorder must be None or one of \('degree',\), got 'bfs'"):
        load_papers_like(5000, 1, folder=tmp_path, reorder="bfs")
    with pytest.raises(ValueError, match=r"reorder='degree' needs out="):
        gg.datasets.synthetic_powerlaw(100, 4.0, reorder="degree")


def test_bench_scale_reorder_samples_the_ordered_graph_beside_the_unordered_one(tmp_path, capsys):
    import json

    from gglspeedup.bench import main as bench_main

    out = tmp_path / "scale.json"
    argv = ["scale", "--nodes", "6000", "--base-nodes", "3000", "--batches", "2", "--repeats", "1",
            "--feature-dim", "0", "--folder", str(tmp_path), "--reorder", "degree", "--json", str(out)]  # fmt: skip
    assert bench_main(argv) == 0
    results = json.loads(out.read_text())
    assert results["ordered_build"]["built"] and results["ordered_build"]["path"].endswith("papers-like-6000-0-degree")
    row = results["sampling"]["big, in memory, degree order"]
    assert row["edges_per_s"] > 0 and row["of_base"] > 0 and row["of_unordered"] > 0
    assert "big, in memory, degree order:" in capsys.readouterr().out


def test_an_unknown_node_count_grows_the_read_counts_with_the_degrees(tmp_path):
    edges = _edges(seed=13)
    graph = build_csr(_chunks(edges), tmp_path / "g", memory="1M", reorder="degree")  # num_nodes found on the way
    assert graph.num_nodes == edges.max() + 1
    _assert_same_graph_renumbered(graph, gg.CSRGraph.from_edge_index(edges, keep_edge_ids=False))


def test_a_saved_order_of_the_wrong_length_is_named_on_load(tmp_path):
    from gglspeedup import _storage

    graph = gg.CSRGraph.from_edge_index([[0, 1, 2], [1, 2, 0]], reorder="degree")
    with _storage.FolderWriter(tmp_path / "g", "CSRGraph", {"num_nodes": 3, "num_src_nodes": 3, "num_edges": 3}) as out:
        for name in ("indptr", "indices"):
            out.add(name, getattr(graph, name))
        out.add("node_order", graph.node_order[:2])
    with pytest.raises(ValueError, match=r"'.*g': node_order must have num_nodes = 3 entries, got 2"):
        gg.CSRGraph.load(tmp_path / "g")

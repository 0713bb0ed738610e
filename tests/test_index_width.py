"""Index width: int32 and int64 copies of a graph sample identically, on every path and device;
optional edge ids; the counting-sort builder equals a stable argsort; resident bytes."""

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.testing import assert_same_sample

from conftest import to_host

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


def _edges(num_nodes=30, num_edges=160, seed=0):
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes, size=(2, num_edges))
    return np.concatenate([edges, edges[::-1], edges[:, :10]], axis=1)  # both directions + parallel copies


def _both_widths(edges, num_nodes, weighted=False, **options):
    weights = np.random.default_rng(1).random(edges.shape[1]) + 0.1 if weighted else None
    narrow = gg.CSRGraph.from_edge_index(edges, num_nodes=num_nodes, weights=weights, **options)
    wide = gg.CSRGraph.from_edge_index(edges, num_nodes=num_nodes, weights=weights, dtype=np.int64, **options)
    assert narrow.indices.dtype == np.int32 and wide.indices.dtype == np.int64
    if narrow.edge_ids is not None:
        assert narrow.edge_ids.dtype == np.int32 and wide.edge_ids.dtype == np.int64
    return narrow, wide


@pytest.mark.parametrize(
    "options", [{}, {"replace": True}, {"weighted": True}, {"weighted": True, "replace": True}], ids=str
)
@pytest.mark.parametrize("keep_edge_ids", [True, False])
def test_int32_and_int64_graphs_sample_identically(device, options, keep_edge_ids):
    num_nodes = 30 if device == "cpu" else 12
    edges = _edges(num_nodes, 160 if device == "cpu" else 24)
    graphs = _both_widths(edges, num_nodes, options.get("weighted", False), keep_edge_ids=keep_edge_ids)
    seeds = np.array([3, 0, 3, 7, 11])
    outputs = [gg.NeighborSampler(g, [3, -1], seed=5, device=device, **options).sample(seeds, key=9) for g in graphs]
    assert_same_sample(outputs[0], outputs[1])
    for adj in outputs[0].adjs:  # outputs handed to frameworks stay int64
        assert to_host(adj.edge_index).dtype == to_host(adj.e_id).dtype == np.int64


@pytest.mark.parametrize("negatives", [None, "binary", "per_source", "triplet"])
@pytest.mark.parametrize("exclude", [None, "self", "reverse"])
def test_int32_and_int64_graphs_sample_links_identically(device, negatives, exclude):
    num_nodes = 30 if device == "cpu" else 12
    edges = _edges(num_nodes, 160 if device == "cpu" else 24, seed=3)
    ascending = edges[:, np.lexsort((edges[0], edges[1]))]  # rows sorted: exclusion binary-searches them
    for source in (edges, ascending):
        graphs = _both_widths(source, num_nodes)
        pairs = source[:, [0, 1, 1, 5]]
        outputs = [
            gg.NeighborSampler(g, [2, 2], seed=2, device=device).sample_links(
                pairs, negatives=negatives, num_negatives=2, strict_negatives=negatives is not None, exclude=exclude
            )
            for g in graphs
        ]
        assert_same_sample(outputs[0].sample_output, outputs[1].sample_output)
        for name in ("pair_index", "labels", "negative_targets"):
            a, b = getattr(outputs[0], name), getattr(outputs[1], name)
            assert (a is None) == (b is None) and (a is None or np.array_equal(to_host(a), to_host(b))), name


def _typed(dtype):
    rng = np.random.default_rng(4)
    relations = {
        ("a", "to", "b"): rng.integers(0, 6, size=(2, 30)) % [[9], [6]],
        ("b", "back", "a"): rng.integers(0, 6, size=(2, 25)),
        ("b", "self", "b"): rng.integers(0, 6, size=(2, 12)),
    }
    return gg.HeteroGraph(relations, {"a": 9, "b": 6}, dtype=dtype)


def test_int32_and_int64_typed_graphs_sample_identically(device):
    graphs = [_typed(None), _typed(np.int64)]
    assert graphs[0].stacked.indices.dtype == np.int32 and graphs[1].stacked.indices.dtype == np.int64
    outputs = [
        gg.HeteroNeighborSampler(g, [2, 2], seed=3, device=device).sample({"b": [0, 5, 0]}, key=4) for g in graphs
    ]
    for hop_a, hop_b in zip(outputs[0].adjs, outputs[1].adjs):
        for edge_type in hop_a:
            for name in ("edge_index", "e_id"):
                assert np.array_equal(
                    to_host(getattr(hop_a[edge_type], name)), to_host(getattr(hop_b[edge_type], name))
                )
    for node_type in outputs[0].n_id:
        assert np.array_equal(to_host(outputs[0].n_id[node_type]), to_host(outputs[1].n_id[node_type]))
    pairs = np.array([[0, 1, 2], [0, 3, 5]])
    links = [
        gg.HeteroNeighborSampler(g, [2], seed=3, device=device).sample_links(
            pairs,
            edge_type=("a", "to", "b"),
            negatives="binary",
            exclude="reverse",
            reverse_edge_type=("b", "back", "a"),
        )
        for g in graphs
    ]
    for name in ("pair_index", "labels"):
        assert np.array_equal(to_host(getattr(links[0], name)), to_host(getattr(links[1], name)))


def test_without_edge_ids_e_id_are_csr_positions_and_draws_are_unchanged():
    edges = _edges()
    kept = gg.CSRGraph.from_edge_index(edges, num_nodes=30)
    bare = gg.CSRGraph.from_edge_index(edges, num_nodes=30, keep_edge_ids=False)
    assert bare.edge_ids is None and np.array_equal(bare.indices, kept.indices)
    out_kept = gg.NeighborSampler(kept, [4, 3], seed=1).sample([1, 2, 3], key=0)
    out_bare = gg.NeighborSampler(bare, [4, 3], seed=1).sample([1, 2, 3], key=0)
    assert np.array_equal(out_kept.n_id, out_bare.n_id)
    for a, b in zip(out_kept.adjs, out_bare.adjs):
        assert np.array_equal(a.edge_index, b.edge_index)
        assert np.array_equal(a.e_id, kept.edge_ids[b.e_id])  # positions in indices, mapped by the ids


def test_resident_bytes_without_edge_ids_are_at_most_4E_plus_8N():
    edges = _edges(num_nodes=1000, num_edges=5000)
    graph = gg.CSRGraph.from_edge_index(edges, num_nodes=1000, keep_edge_ids=False)
    assert graph.nbytes <= 4 * graph.num_edges + 8 * (graph.num_nodes + 1)
    with_ids = gg.CSRGraph.from_edge_index(edges, num_nodes=1000)
    assert with_ids.nbytes == graph.nbytes + 4 * graph.num_edges


def _argsort_reference(edges, num_nodes, direction="in"):
    rows, cols = (edges[1], edges[0]) if direction == "in" else (edges[0], edges[1])
    order = np.argsort(rows, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=num_nodes))])
    return indptr, cols[order], order


@pytest.mark.parametrize("num_edges", [0, 7, 70_000])  # 70k: past the serial cut-off, every thread scatters
@pytest.mark.parametrize("direction", ["in", "out"])
def test_counting_sort_builder_equals_a_stable_argsort(num_edges, direction):
    rng = np.random.default_rng(num_edges)
    num_nodes = 500
    edges = rng.integers(0, num_nodes, size=(2, num_edges)).astype(np.int32)
    weights = rng.random(num_edges).astype(np.float32)
    graph = gg.CSRGraph.from_edge_index(edges, num_nodes=num_nodes, direction=direction, weights=weights)
    indptr, indices, order = _argsort_reference(edges, num_nodes, direction)
    assert np.array_equal(graph.indptr, indptr) and np.array_equal(graph.indices, indices)
    assert np.array_equal(graph.edge_ids, order) and np.array_equal(graph.weights, weights[order])
    assert graph.weights.dtype == np.float32


@pytest.mark.parametrize("bucket_edges", [64, 1 << 17])  # many buckets of a few rows; one bucket
@pytest.mark.parametrize("max_bucket", [1 << 22, 5_000])  # 5,000: the hub's bucket is too large (one pass)
@pytest.mark.parametrize("keep_edge_ids", [True, False])
def test_two_pass_builder_equals_a_stable_argsort(bucket_edges, max_bucket, keep_edge_ids, monkeypatch):
    from gglspeedup import _csr_build

    monkeypatch.setattr(_csr_build, "BUCKET_EDGES", bucket_edges)
    monkeypatch.setattr(_csr_build, "MAX_BUCKET_EDGES", max_bucket)
    rng = np.random.default_rng(7)
    num_nodes = 3_000
    edges = rng.integers(0, num_nodes, size=(2, 90_000))
    edges[1, rng.random(90_000) < 0.1] = 17  # a hub row of about 9,000 edges
    graph = gg.CSRGraph.from_edge_index(edges, num_nodes=num_nodes, keep_edge_ids=keep_edge_ids)
    indptr, indices, order = _argsort_reference(edges, num_nodes, "in")
    assert np.array_equal(graph.indptr, indptr) and np.array_equal(graph.indices, indices)
    if keep_edge_ids:
        assert np.array_equal(graph.edge_ids, order) and graph.edge_ids.dtype == np.int32
    else:
        assert graph.edge_ids is None


def test_counting_sort_names_the_first_bad_edge_in_any_block():
    edges = np.zeros((2, 100_000), np.int64)
    edges[0, 80_000] = 10  # in the second thread's block
    edges[1, 90_000] = -1
    with pytest.raises(ValueError, match=r"edge_index\[:, 80000\] = \[10, 0\] is out of range for num_nodes = 5"):
        gg.CSRGraph.from_edge_index(edges, num_nodes=5)
    edges[0, 80_000] = 0
    with pytest.raises(ValueError, match=r"edge_index\[:, 90000\] has a negative node id"):
        gg.CSRGraph.from_edge_index(edges, num_nodes=5)


@pytest.mark.parametrize("position", [3, 49_999, 99_999])  # first block, its last edge, the last edge
def test_counting_sort_names_a_bad_column_found_while_scattering(position):
    edges = np.zeros((2, 100_000), np.int64)  # past the serial cut-off: the count reads rows only
    edges[0, position] = 5
    with pytest.raises(ValueError, match=rf"edge_index\[:, {position}\] = \[5, 0\] is out of range for num_nodes = 5"):
        gg.CSRGraph.from_edge_index(edges, num_nodes=5)


def test_bipartite_builder_bounds_each_side():
    edges = np.array([[0, 7, 3], [1, 0, 1]])
    graph = gg.CSRGraph.from_edge_index(edges, num_nodes=2, num_src_nodes=8)
    assert graph.indptr.tolist() == [0, 1, 3] and graph.indices.tolist() == [7, 0, 3]
    with pytest.raises(ValueError, match=r"out of range for \(num_src_nodes, num_nodes\) = \(7, 2\)"):
        gg.CSRGraph.from_edge_index(edges, num_nodes=2, num_src_nodes=7)


def test_huge_node_counts_are_refused_before_allocating():
    with pytest.raises(ValueError, match=r"num_nodes = 10000000000000 needs .* GiB"):
        gg.CSRGraph.from_edge_index([[0], [1]], num_nodes=10**13)

"""A temporal CPU sampler whose graph carries edge ids reads each draw's neighbour and edge id as one
uint64 pair per position (``time_rows.with_pairs``: one random line a draw instead of two): the
samples stay the Python reference's, edge ids that do not fit in 32 bits keep the two arrays, and
a corrupt neighbour id still packs as an id outside the graph."""

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.sampling._kernels.records import graph_arrays
from gglspeedup.sampling._kernels.time_rows import with_pairs
from gglspeedup.testing import assert_same_sample
from gglspeedup.testing.reference_trees import reference_tree_sample


def _graph(edge_ids=None, seed=0):
    """60 nodes, 2,000 edges, rows unsorted in time (the sampler sorts a copy with edge ids)."""
    rng = np.random.default_rng(seed)
    edge_index = rng.integers(0, 60, size=(2, 2000))
    edge_index[1, :300] = 7  # a hub: a many-probe window search
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=60)
    if edge_ids is None:
        return graph
    return gg.CSRGraph(graph.indptr, graph.indices, edge_ids=edge_ids, num_src_nodes=60)


def _times(kind, graph, seed=1):
    rng = np.random.default_rng(seed)
    count = graph.num_nodes if kind == "node" else graph.num_edges
    return {f"{kind}_time": rng.integers(0, 1000, count)}


def _same(ours, reference):
    assert_same_sample(ours, reference)
    np.testing.assert_array_equal(ours.batch, reference.batch)


@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("kind", ["node", "edge"])
def test_packed_pairs_sample_like_the_reference(strategy, kind):
    graph = _graph()
    times = _times(kind, graph)
    sampler = gg.NeighborSampler(graph, [6, 4], temporal_strategy=strategy, **times)
    pairs = sampler._driver.graph.edge_ids
    assert pairs.dtype == np.uint64  # the sorted copy's neighbours and edge ids, one word each
    np.testing.assert_array_equal(pairs >> np.uint64(32), np.asarray(sampler.graph.edge_ids))
    np.testing.assert_array_equal(pairs & np.uint64(0xFFFFFFFF), np.asarray(sampler.graph.indices))
    seeds = np.array([7, 7, 0, 13, 59, 7, 21, 40])
    seed_time = np.array([500, 999, 0, 250, 1000, 1, 640, 300])
    for key in (0, 5):
        reference = reference_tree_sample(
            graph, seeds, [6, 4], seed_time=seed_time, strategy=strategy, key=key, **times
        )
        _same(sampler.sample(seeds, key=key, seed_time=seed_time), reference)


def test_edge_ids_past_32_bits_keep_the_two_arrays():
    edge_ids = np.arange(2000, dtype=np.int64)[::-1] * 7 + 2**32 - 3  # the first few fit, the rest do not
    graph = _graph(edge_ids)
    times = _times("node", graph)  # edge times would need an entry per id up to 2**32
    sampler = gg.NeighborSampler(graph, [6, 4], **times)
    assert sampler._driver.graph.edge_ids.dtype == np.int64
    seeds, seed_time = np.array([7, 3, 7]), np.array([400, 800, 1000])
    reference = reference_tree_sample(graph, seeds, [6, 4], seed_time=seed_time, key=2, **times)
    out = sampler.sample(seeds, key=2, seed_time=seed_time)
    _same(out, reference)
    assert out.adjs[0].e_id.max() >= 2**32  # the large ids came through whole


def test_a_corrupt_neighbour_packs_as_an_id_outside_the_graph():
    indptr = np.array([0, 2, 4])
    indices = np.array([1, 10**9, -3, 0])  # as a corrupt folder loaded unverified holds them
    arrays = graph_arrays(
        gg.CSRGraph(indptr, [1, 0, 1, 0], edge_ids=[4, 5, 6, 7]), None, lambda dtype: np.zeros(1, dtype)
    )._replace(indices=indices)
    pairs = with_pairs(arrays, 2, 4).edge_ids
    np.testing.assert_array_equal(pairs >> np.uint64(32), [4, 5, 6, 7])
    np.testing.assert_array_equal(pairs & np.uint64(0xFFFFFFFF), [1, 2**32 - 1, 2**32 - 1, 0])


def test_graphs_without_room_for_pairs_are_left_as_they_are():
    arrays = graph_arrays(gg.CSRGraph([0, 1, 2], [1, 0], edge_ids=[3, 9]), None, lambda dtype: np.zeros(1, dtype))
    assert with_pairs(arrays, 2**32 - 1, 2) is arrays  # neighbour ids could not fit beside the marker
    assert with_pairs(arrays, 2, 0) is arrays  # no edges
    assert with_pairs(arrays, 2, 2).edge_ids.dtype == np.uint64

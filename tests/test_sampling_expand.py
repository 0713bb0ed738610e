"""expand="new" (PyG's hop rule): hop h + 1 draws only for the nodes first reached at hop h.

Checked against the Python reference (gglspeedup.testing) exactly, for untyped and typed samplers
on every device (CPU == simulated GPU bit for bit), plus PyG's invariants: no edge drawn twice,
every node a target at most once, counts hop-ordered.
"""

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.testing import assert_same_sample
from gglspeedup.testing.reference import reference_hetero_sample, reference_sample

from conftest import to_host


def _graph(seed=0, nodes=14, edges=60):
    rng = np.random.default_rng(seed)
    return gg.CSRGraph.from_edge_index(rng.integers(0, nodes, size=(2, edges)), num_nodes=nodes)


@pytest.mark.parametrize("fanouts, replace", [([2, 2, 1], False), ([-1, -1], False), ([3, 2], True)])
def test_untyped_new_rule_matches_the_reference(device, fanouts, replace):
    graph = _graph()
    seeds = np.array([0, 5, 5, 9])
    out = gg.NeighborSampler(graph, fanouts, replace=replace, device=device, expand="new").sample(seeds, key=3)
    assert_same_sample(out, reference_sample(graph, seeds, fanouts, replace=replace, key=3, expand="new"))


def test_full_fanouts_draw_each_edge_once_and_count_hop_by_hop():
    graph = _graph(seed=1, nodes=30, edges=80)
    seeds = np.array([0, 1])
    out = gg.NeighborSampler(graph, [-1, -1, -1], expand="new").sample(seeds, key=0)
    e_id = np.concatenate([to_host(adj.e_id) for adj in out.adjs])
    assert len(e_id) == len(np.unique(e_id))  # no duplicate edges
    targets = np.concatenate([to_host(out.n_id)[to_host(adj.edge_index[1])] for adj in out.adjs[::-1]])
    by_hop = [set(to_host(out.n_id)[to_host(adj.edge_index[1])].tolist()) for adj in out.adjs[::-1]]
    for a in range(len(by_hop)):  # a node is a target in one hop only
        for b in range(a + 1, len(by_hop)):
            assert not by_hop[a] & by_hop[b]
    # every in-edge of every target is there once: a BFS over the in-edges, as PyG's full fanouts give
    indptr = graph.indptr
    expected = sum(int(indptr[v + 1] - indptr[v]) for v in set(targets.tolist()))
    assert len(e_id) == expected
    layered = gg.NeighborSampler(graph, [-1, -1, -1]).sample(seeds, key=0)
    assert sum(int(adj.e_id.shape[0]) for adj in layered.adjs) > len(e_id)  # "all" re-expands seeds


def _typed(seed=0):
    rng = np.random.default_rng(seed)
    sizes = {"a": 9, "b": 7}
    relations = {
        ("a", "to", "b"): rng.integers(0, 7, size=(2, 25)) % [[9], [7]],
        ("b", "back", "a"): rng.integers(0, 7, size=(2, 20)) % [[7], [9]],
        ("a", "self", "a"): rng.integers(0, 9, size=(2, 20)),
    }
    return gg.HeteroGraph(relations, sizes)


@pytest.mark.parametrize("fanouts", [[2, 2, 1], [-1, -1]])
def test_typed_new_rule_matches_the_reference(device, fanouts):
    graph = _typed()
    seeds = {"a": np.array([0, 3]), "b": np.array([1])}
    out = gg.HeteroNeighborSampler(graph, fanouts, device=device, expand="new").sample(seeds, key=2)
    ref = reference_hetero_sample(graph, seeds, fanouts, key=2, expand="new")
    for t in graph.node_types:
        assert np.array_equal(to_host(out.n_id[t]), ref.n_id[t]), t
    assert out.num_sampled_nodes == ref.num_sampled_nodes and out.num_sampled_edges == ref.num_sampled_edges
    for layer, ref_layer in zip(out.adjs, ref.adjs):
        for et, adj in layer.items():
            assert np.array_equal(to_host(adj.edge_index), ref_layer[et].edge_index), et
            assert np.array_equal(to_host(adj.e_id), ref_layer[et].e_id), et
            assert tuple(adj.size) == tuple(ref_layer[et].size), et


def test_new_rule_link_batches_use_the_rule_too():
    graph = _graph(seed=2)
    sampler = gg.NeighborSampler(graph, [-1, -1], expand="new")
    out = sampler.sample_links([[0, 1], [2, 3]], exclude=None, key=1)
    seeds = to_host(out.n_id)[: len(np.unique([0, 1, 2, 3]))]
    expected = reference_sample(graph, seeds, [-1, -1], key=1, expand="new")
    assert_same_sample(gg.SampleOutput(out.n_id, out.adjs), expected)


def test_expand_is_checked():
    with pytest.raises(ValueError, match="expand must be one of"):
        gg.NeighborSampler(_graph(), [2], expand="frontier")
    with pytest.raises(ValueError, match="expand must be one of"):
        gg.HeteroNeighborSampler(_typed(), [2], expand=None)


def test_expand_and_disjoint_set_between_calls_are_checked():
    # plain attributes took anything: expand="bad" sampled "all", disjoint="no" turned disjoint
    for sampler in (gg.NeighborSampler(_graph(), [2]), gg.HeteroNeighborSampler(_typed(), [2])):
        with pytest.raises(ValueError, match="expand must be one of"):
            sampler.expand = "frontier"
        with pytest.raises(TypeError, match=r"disjoint must be a bool \(True or False\), got str 'no'"):
            sampler.disjoint = "no"
        assert sampler.expand == "all" and sampler.disjoint is False
        sampler.expand, sampler.disjoint = "new", True
        assert sampler.expand == "new" and sampler.disjoint is True

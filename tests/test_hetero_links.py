"""HeteroNeighborSampler.sample_links: typed pairs, typed negatives, exclusion of a relation's edges
(and of a named reverse relation), the untouched rows drawing exactly what sample() draws."""

import numpy as np
import pytest
from test_hetero_sampling import assert_same, typed_graph

import gglspeedup as gg

from conftest import CITES, WRITES, WRITTEN_BY, to_host


def edge_set(graph, edge_type):
    rel = graph[edge_type]
    dst = np.repeat(np.arange(rel.num_nodes), np.diff(rel.indptr))
    return set(zip(rel.indices.tolist(), dst.tolist()))


def sampled_edges(out, edge_type):
    """Global (src, dst) of every sampled edge of ``edge_type``, all hops."""
    found = set()
    for layer in out.adjs:
        adj = layer[edge_type]
        src = to_host(out.n_id[edge_type[0]])[to_host(adj.edge_index[0])]
        dst = to_host(out.n_id[edge_type[2]])[to_host(adj.edge_index[1])]
        found |= set(zip(src.tolist(), dst.tolist()))
    return found


@pytest.mark.parametrize("edge_type", [WRITES, CITES], ids=["bipartite", "one-type"])
def test_pairs_map_back_and_no_exclusion_equals_sample(device, edge_type):
    rng = np.random.default_rng(4)
    graph = typed_graph(rng)
    sampler = gg.HeteroNeighborSampler(graph, [2, 2], seed=2, device=device)
    pairs = np.array([[1, 0, 1], [2, 2, 5]])
    out = sampler.sample_links(pairs, edge_type=edge_type, exclude=None, key=3)
    src_ids, dst_ids = to_host(out.n_id[edge_type[0]]), to_host(out.n_id[edge_type[2]])
    index = to_host(out.pair_index)
    np.testing.assert_array_equal(src_ids[index[0]], pairs[0])
    np.testing.assert_array_equal(dst_ids[index[1]], pairs[1])
    np.testing.assert_array_equal(to_host(out.labels), np.ones(3, np.float32))
    seeds = {t: to_host(out.n_id[t])[: out.num_sampled_nodes[t][0]] for t in graph.node_types}
    assert_same(out.sample_output, sampler.sample(seeds, key=3))


@pytest.mark.parametrize("exclude", ["self", "reverse"])
def test_excluded_edges_never_appear_and_other_rows_draw_as_sample(device, exclude):
    rng = np.random.default_rng(6)
    graph = typed_graph(rng, edges=(40, 40, 40, 10, 6))
    sampler = gg.HeteroNeighborSampler(graph, [-1, 3], seed=4, device=device)
    existing = sorted(edge_set(graph, WRITES))[:4]
    pairs = np.array(existing).T
    reverse = WRITTEN_BY if exclude == "reverse" else None
    out = sampler.sample_links(pairs, edge_type=WRITES, exclude=exclude, reverse_edge_type=reverse, key=1)
    positives = set(zip(pairs[0].tolist(), pairs[1].tolist()))
    assert not positives & sampled_edges(out, WRITES)
    backwards = {(d, s) for s, d in positives}
    found_backwards = backwards & sampled_edges(out, WRITTEN_BY)
    if exclude == "reverse":
        assert not found_backwards
    else:  # the reverse relation still holds them: a -1 fanout draws them all
        assert found_backwards == backwards & edge_set(graph, WRITTEN_BY)
    plain = sampler.sample({t: to_host(out.n_id[t])[: out.num_sampled_nodes[t][0]] for t in graph.node_types}, key=1)
    flagged = {WRITES: set(pairs[1].tolist()), WRITTEN_BY: set(pairs[0].tolist()) if reverse else set()}
    hop = len(out.adjs) - 1  # the seed hop: targets are the seeds, in the same order in both outputs
    for et in graph.edge_types:
        mine, theirs = out.adjs[hop][et], plain.adjs[hop][et]
        targets = to_host(out.n_id[et[2]])
        for i in range(mine.size[1]):
            if int(targets[i]) in flagged.get(et, set()):
                continue
            np.testing.assert_array_equal(
                to_host(mine.e_id)[to_host(mine.edge_index[1]) == i],
                to_host(theirs.e_id)[to_host(theirs.edge_index[1]) == i],
            )


@pytest.mark.parametrize("mode", ["binary", "per_source", "triplet"])
def test_typed_negatives_come_from_the_edge_types_node_types(device, mode):
    rng = np.random.default_rng(9)
    graph = typed_graph(rng, sizes=(30, 3, 4), edges=(20, 30, 30, 5, 5))
    sampler = gg.HeteroNeighborSampler(graph, [1], device=device)
    pairs = np.array([[0, 1, 2], [5, 6, 7]])
    out = sampler.sample_links(pairs, edge_type=WRITES, negatives=mode, num_negatives=4, strict_negatives=True, key=0)
    authors, papers = to_host(out.n_id["author"]), to_host(out.n_id["paper"])
    index = to_host(out.pair_index)
    if mode == "triplet":
        assert out.batch_size == 3 and to_host(out.negative_targets).shape == (3, 4)
        negatives = np.stack((np.repeat(pairs[0], 4), papers[to_host(out.negative_targets).reshape(-1)]))
    else:
        assert out.batch_size == 15
        np.testing.assert_array_equal(to_host(out.labels), [1, 1, 1] + [0] * 12)
        negatives = np.stack((authors[index[0, 3:]], papers[index[1, 3:]]))
        if mode == "per_source":
            np.testing.assert_array_equal(negatives[0], np.repeat(pairs[0], 4))
    assert negatives[0].max() < 3 and negatives[1].max() < 30
    edges = edge_set(graph, WRITES)
    stays = sum((int(s), int(t)) in edges for s, t in negatives.T)
    assert stays == out.num_false_negatives == 0  # 30 papers per author, few edges: redraws succeed


def test_cpu_equals_gpu_for_typed_links():
    from conftest import HAS_CUDA

    if not HAS_CUDA:
        pytest.skip("no CUDA GPU and the CUDA simulator is off")
    rng = np.random.default_rng(2)
    graph = typed_graph(rng)
    pairs = np.array([[0, 3], [1, 1]])
    outs = [
        gg.HeteroNeighborSampler(graph, [2, 1], device=d).sample_links(
            pairs,
            edge_type=WRITES,
            negatives="per_source",
            num_negatives=2,
            exclude="reverse",
            reverse_edge_type=WRITTEN_BY,
            key=5,
        )
        for d in ("cpu", "cuda")
    ]
    assert_same(outs[1].sample_output, outs[0].sample_output)
    np.testing.assert_array_equal(to_host(outs[1].pair_index), outs[0].pair_index)


test_cpu_equals_gpu_for_typed_links = pytest.mark.cuda(test_cpu_equals_gpu_for_typed_links)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"edge_type": ("author", "cites", "paper")}, ValueError, "not an edge type"),
        ({"edge_type": "writes"}, TypeError, r"\(src_type, name, dst_type\)"),
        ({"edge_type": WRITES, "exclude": "reverse"}, ValueError, "needs reverse_edge_type"),
        (
            {"edge_type": WRITES, "exclude": "reverse", "reverse_edge_type": CITES},
            ValueError,
            "from 'paper' to 'author'",
        ),
        ({"edge_type": WRITES, "negatives": "hard"}, ValueError, "negatives must be one of"),
    ],
)
def test_bad_link_arguments(rng, kwargs, error, match):
    sampler = gg.HeteroNeighborSampler(typed_graph(rng), [2])
    with pytest.raises(error, match=match):
        sampler.sample_links([[0], [0]], **kwargs)


def test_pairs_out_of_their_types_range(rng):
    sampler = gg.HeteroNeighborSampler(typed_graph(rng, sizes=(9, 7, 4)), [2])
    with pytest.raises(IndexError, match=r"num_nodes\['author'\] = 7\): pairs\[0, 1\] = 7"):
        sampler.sample_links([[0, 7], [0, 0]], edge_type=WRITES)
    with pytest.raises(IndexError, match=r"num_nodes\['paper'\] = 9\): pairs\[1, 0\] = 9"):
        sampler.sample_links([[0], [9]], edge_type=WRITES)

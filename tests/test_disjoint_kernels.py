"""The CPU disjoint hop's parts on inputs the other temporal tests do not reach: rows long enough
for a many-probe window search (every tree's eligible prefix exact for uniform, skewed, tied and
float times; the draws equal to the Python reference), and the virtual ids' split exact up to
int64's largest ids."""

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.sampling._kernels.disjoint import split_virtual
from gglspeedup.sampling._kernels.records import from_virtual
from gglspeedup.testing import assert_same_sample
from gglspeedup.testing.reference_trees import reference_tree_sample


def _same(ours, reference):
    assert_same_sample(ours, reference)
    np.testing.assert_array_equal(ours.batch, reference.batch)


def _long_rows(seed=0):
    """40 nodes, 6,000 edges: rows of about 150 positions, one hub of about 1,500."""
    rng = np.random.default_rng(seed)
    edge_index = rng.integers(0, 40, size=(2, 6000))
    edge_index[1, :1400] = 5
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=40)


def _edge_times(kind, count, rng):
    if kind == "uniform":
        return rng.integers(0, 10**6, count)
    if kind == "skewed":  # most times bunched at the start: an interpolated guess lands far off
        return (rng.random(count) ** 8 * 10**6).astype(np.int64)
    if kind == "ties":  # few distinct times: long runs equal to the seed times below
        return rng.integers(0, 4, count) * 250_000
    times = rng.random(count) * 1e6  # float, with both infinities
    times[:50] = -np.inf
    times[50:100] = np.inf
    return times


@pytest.mark.parametrize("kind", ["uniform", "skewed", "ties", "float"])
def test_every_tree_draws_exactly_its_rows_eligible_prefix(kind):
    graph = _long_rows()
    rng = np.random.default_rng(3)
    edge_time = _edge_times(kind, graph.num_edges, rng)
    seeds = np.repeat(np.arange(40), 6)
    # Below, inside and past every row's times, and exactly on some (ties decide the prefix's end)
    picks = [-1, 0, 10**6, 250_000, 500_000, 999]
    seed_time = np.array([picks[i % 6] if i % 12 < 6 else rng.integers(0, 10**6) for i in range(len(seeds))])
    if kind == "float":
        seed_time = seed_time.astype(np.float64)
        seed_time[::7] = np.inf
    sampler = gg.NeighborSampler(graph, [-1], edge_time=edge_time)
    out = sampler.sample(seeds, seed_time=seed_time)
    (adj,) = out.adjs
    targets = out.batch[adj.edge_index[1]]
    edge_ids = np.asarray(graph.edge_ids)
    for b, (seed, t) in enumerate(zip(seeds, seed_time)):
        row = np.arange(graph.indptr[seed], graph.indptr[seed + 1])
        expected = np.sort(edge_ids[row][edge_time[edge_ids[row]] <= t])
        np.testing.assert_array_equal(np.sort(adj.e_id[targets == b]), expected, err_msg=f"tree {b}")


@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("kind", ["node", "edge"])
def test_long_rows_sample_like_the_reference(strategy, kind):
    graph = _long_rows(1)
    rng = np.random.default_rng(4)
    times = {"node_time": rng.integers(0, 1000, 40)} if kind == "node" else {"edge_time": rng.integers(0, 1000, 6000)}
    seeds = np.array([5, 5, 0, 17, 39, 5, 22])
    seed_time = np.array([500, 999, 0, 250, 1000, 1, 640])
    sampler = gg.NeighborSampler(graph, [12, 5], temporal_strategy=strategy, **times)
    reference = reference_tree_sample(graph, seeds, [12, 5], seed_time=seed_time, strategy=strategy, key=3, **times)
    _same(sampler.sample(seeds, key=3, seed_time=seed_time), reference)


@pytest.mark.parametrize("stride", [1, 3, 2_000_000, 2**31 - 1, 2**40 + 7])
def test_split_virtual_equals_the_integer_division(stride):
    rng = np.random.default_rng(stride % 1000)
    trees = (np.iinfo(np.int64).max - stride) // stride
    n_id = rng.integers(0, trees + 1, 5000) * stride + rng.integers(0, stride, 5000)
    # Each tree's first and last node, at the smallest and the largest trees
    edges = np.array([0, stride - 1, trees * stride, trees * stride + stride - 1], np.int64)
    n_id = np.concatenate((n_id, edges))
    nodes, batch = split_virtual(n_id, stride)
    expected_nodes, expected_batch = from_virtual(n_id, stride)
    np.testing.assert_array_equal(batch, expected_batch)
    np.testing.assert_array_equal(nodes, expected_nodes)
    assert nodes.dtype == batch.dtype == np.int64

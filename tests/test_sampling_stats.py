"""Distribution of the draws (chi-square with honest thresholds) and property-based invariants."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import gglspeedup as gg
from gglspeedup.testing import assert_same_sample, check_sample, reference_sample

P_MIN = 1e-3  # fixed seeds and keys make every test deterministic; this is the false-alarm rate


def many_stars(num_centres, degree, weights=None):
    """``num_centres`` nodes, each with the same ``degree`` in-neighbours (one trial per centre)."""
    leaves = np.arange(num_centres, num_centres + degree)
    indptr = np.arange(0, (num_centres + 1) * degree, degree, dtype=np.int64)
    indptr = np.concatenate([indptr, np.full(degree, indptr[-1])])
    indices = np.tile(leaves, num_centres)
    w = None if weights is None else np.tile(np.asarray(weights, np.float64), num_centres)
    return gg.CSRGraph(indptr, indices, weights=w)


def offsets_drawn(graph, num_centres, k, **options):
    """Row offsets of the edges drawn for every centre: int64 (num_centres, k)."""
    adj = gg.NeighborSampler(graph, [k], seed=21, **options).sample(np.arange(num_centres), key=2).adjs[0]
    return (adj.e_id - graph.indptr[adj.edge_index[1]]).reshape(num_centres, k)


def test_uniform_without_replacement_inclusion():
    num_centres, degree, k = 4000, 20, 5
    drawn = offsets_drawn(many_stars(num_centres, degree), num_centres, k)
    assert all(len(set(row)) == k for row in drawn.tolist())
    counts = np.bincount(drawn.ravel(), minlength=degree)
    # Inclusion indicators of one draw have the covariance of a one-draw multinomial scaled by
    # p(1-p)/(q(1-q)) (p = k/degree, q = 1/degree), so this statistic is chi-square(degree - 1).
    p, q = k / degree, 1 / degree
    statistic = ((counts - num_centres * p) ** 2).sum() * (1 - q) / (num_centres * p * (1 - p))
    assert stats.chi2.sf(statistic, degree - 1) > P_MIN


def test_uniform_without_replacement_subsets_over_keys():
    graph = many_stars(1, 5)
    sampler = gg.NeighborSampler(graph, [2], seed=4)
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(5), 2))}
    counts = np.zeros(len(subsets))
    for key in range(3000):
        e_id = sampler.sample([0], key=key).adjs[0].e_id
        counts[subsets[tuple(sorted(e_id.tolist()))]] += 1
    assert stats.chisquare(counts).pvalue > P_MIN


def test_uniform_with_replacement():
    num_centres, degree, k = 3000, 12, 4
    drawn = offsets_drawn(many_stars(num_centres, degree), num_centres, k, replace=True)
    counts = np.bincount(drawn.ravel(), minlength=degree)
    assert stats.chisquare(counts).pvalue > P_MIN
    assert any(len(set(row)) < k for row in drawn.tolist())  # repeats do happen


@pytest.mark.parametrize("replace", [True, False])
def test_weighted_proportions(replace):
    weights = np.array([1.0, 2.0, 0.0, 4.0, 8.0, 0.5, 3.0])
    num_centres, k = 4000, 3
    graph = many_stars(num_centres, len(weights), weights)
    drawn = offsets_drawn(graph, num_centres, k, weighted=True, replace=replace)
    assert not (drawn == 2).any()  # zero weight: never drawn
    live = weights > 0
    # With replacement every draw is proportional to the weights; without, the first output of
    # each row (the first successive draw) is.
    sample = drawn.ravel() if replace else drawn[:, 0]
    counts = np.bincount(sample, minlength=len(weights))[live]
    expected = weights[live] / weights[live].sum() * len(sample)
    assert stats.chisquare(counts, expected).pvalue > P_MIN


@st.composite
def sampling_problems(draw):
    num_nodes = draw(st.integers(1, 25))
    num_edges = draw(st.integers(0, 80))
    node = st.integers(0, num_nodes - 1)
    src = draw(st.lists(node, min_size=num_edges, max_size=num_edges))
    dst = draw(st.lists(node, min_size=num_edges, max_size=num_edges))
    weights = draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 3.5]), min_size=num_edges, max_size=num_edges))
    graph = gg.CSRGraph.from_edge_index(
        np.array([src, dst], np.int64).reshape(2, -1), num_nodes=num_nodes, weights=np.array(weights, np.float64)
    )
    fanouts = draw(st.lists(st.integers(-1, 5), min_size=1, max_size=3))
    seeds = draw(st.lists(node, max_size=8))
    return (
        graph,
        np.array(seeds, np.int64),
        fanouts,
        draw(st.booleans()),
        draw(st.booleans()),
        draw(st.integers(0, 2**64 - 1)),
    )


@settings(max_examples=80, deadline=None)
@given(sampling_problems())
def test_property_invariants_and_reference(problem):
    graph, seeds, fanouts, replace, weighted, seed = problem
    sampler = gg.NeighborSampler(graph, fanouts, replace=replace, weighted=weighted, seed=seed)
    out = sampler.sample(seeds, key=seed % 1000)
    check_sample(graph, seeds, fanouts, out, replace=replace, weighted=weighted)
    expected = reference_sample(graph, seeds, fanouts, replace=replace, weighted=weighted, seed=seed, key=seed % 1000)
    assert_same_sample(out, expected)


def test_weighted_without_replacement_inclusion_matches_plain_keys():
    # The exponential-jump sampler must include each edge as often as keying every edge
    # (E_j / w_j, keep the k smallest) does: a two-sample homogeneity test per edge.
    rng = np.random.default_rng(5)
    weights = rng.choice([0.0, 0.5, 1.0, 2.0, 6.0], size=40)
    num_centres, k = 4000, 4
    drawn = offsets_drawn(many_stars(num_centres, len(weights), weights), num_centres, k, weighted=True)
    ours = np.bincount(drawn.ravel(), minlength=len(weights))
    live = weights > 0
    keys = rng.exponential(size=(num_centres, live.sum())) / weights[live]
    plain = np.zeros(len(weights), np.int64)
    plain[np.flatnonzero(live)] = np.bincount(np.argsort(keys, axis=1)[:, :k].ravel(), minlength=live.sum())
    assert ours[~live].sum() == 0
    table = np.array([ours[live], plain[live]])
    assert stats.chi2_contingency(table).pvalue > P_MIN

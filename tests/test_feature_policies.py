"""Cache policies: the cache holds the policy's rows, presampling ranks hot rows, bad policies raise."""

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.feature import FeatureStore, policies

from conftest import to_host


def _star_graph():
    # Node 2 has 4 in-neighbours, node 0 has 2, node 4 has 2, the rest 1 or 0.
    edges = np.array([[0, 1, 3, 4, 5, 1, 3, 0, 2], [2, 2, 2, 2, 0, 0, 4, 4, 1]])
    return gg.CSRGraph.from_edge_index(edges, num_nodes=6)


class _FixedSampler:
    """A stand-in sampler: n_id = seeds followed by a fixed neighbour list per seed."""

    def __init__(self, neighbours):
        self.neighbours = neighbours

    def sample(self, seeds):
        n_id = list(dict.fromkeys([*seeds, *[v for s in seeds for v in self.neighbours.get(int(s), [])]]))
        return np.array(n_id, dtype=np.int64), []


def test_degree_order_is_descending_in_degree_ties_by_id():
    graph = _star_graph()
    order = policies.degree_order(graph)
    assert order.tolist() == [2, 0, 4, 1, 3, 5]


def test_store_caches_the_degree_policy_rows_and_maps_them(device):
    graph = _star_graph()
    x = np.arange(6 * 3, dtype=np.float32).reshape(6, 3)
    store = FeatureStore(x, device=device, cache_size=3 * x[0].nbytes + 5, graph=graph)
    assert store.policy_info["policy"] == "degree"
    if not store.device.is_cuda:
        assert store.num_cached == 0
        return
    assert store.cached_ids.tolist() == [2, 0, 4]
    expected_map = np.full(6, -1)
    expected_map[[2, 0, 4]] = [0, 1, 2]
    np.testing.assert_array_equal(store.cache_map, expected_map)
    # the device table really holds those rows, slot by slot
    device_rows = to_host(store._tier.device_table).view(np.float32)
    np.testing.assert_array_equal(device_rows, x[[2, 0, 4]])
    ids = np.array([2, 5, 0, 1])
    np.testing.assert_array_equal(to_host(store[ids]), x[ids])
    assert store.stats()["rows_device"] == 2


def test_policy_defaults_follow_the_graph():
    x = np.zeros((6, 2), np.float32)
    assert FeatureStore(x).policy_info["policy"] == "none"
    assert FeatureStore(x, graph=_star_graph()).policy_info["policy"] == "degree"
    assert FeatureStore(x, graph=_star_graph().to_scipy()).policy_info["policy"] == "degree"


def test_presample_counts_the_sampled_rows_exactly():
    graph = _star_graph()
    sampler = _FixedSampler({0: [2, 4], 1: [2], 3: [2, 5]})
    counts = policies.presample_counts(graph, batch_size=2, num_batches=3, seeds=[0, 1, 3], sampler=sampler)
    # 3 batches of 2 seeds from permutations of [0, 1, 3]: 6 seed draws; replay them to check.
    rng = np.random.default_rng(0)
    first, second = rng.permutation([0, 1, 3]), rng.permutation([0, 1, 3])
    batches = [first[:2], first[2:], second[:2]]
    expected = np.zeros(6, np.int64)
    for batch in batches:
        np.add.at(expected, sampler.sample(batch)[0], 1)
    np.testing.assert_array_equal(counts, expected)
    assert policies.expected_hit_rate(counts, [2]) == pytest.approx(counts[2] / counts.sum())


@pytest.mark.parametrize(
    "n_id, error, message",
    [
        ([2, 6], ValueError, r"n_id\[1\] = 6 is out of range \[0, 6\)"),
        ([-1, 2], ValueError, r"n_id\[0\] = -1 is out of range"),
        ([2.5], TypeError, "n_id must hold integer node ids, got dtype float64"),
    ],
)
def test_presample_checks_a_user_sampler_s_n_id(n_id, error, message):
    # unchecked, 6 failed inside np.bincount ("operands could not be broadcast together") and 2.5
    # was silently counted as node 2
    class BadSampler:
        def sample(self, seeds, key=None):
            return np.array(n_id), []

    with pytest.raises(error, match=r"presample\['sampler'\]\.sample\(seeds\)'s " + message):
        policies.presample_counts(_star_graph(), batch_size=2, num_batches=1, sampler=BadSampler())


def test_presample_store_reports_its_expected_hit_rate(device):
    graph = _star_graph()
    x = np.arange(12, dtype=np.float64).reshape(6, 2)
    sampler = _FixedSampler({0: [2], 1: [2, 4], 3: [4]})
    store = FeatureStore(
        x,
        device=device,
        cache_size=2 * 16,
        graph=graph,
        policy="presample",
        presample=dict(sampler=sampler, batch_size=1, num_batches=6, seeds=[0, 1, 3]),
    )
    np.testing.assert_array_equal(to_host(store[[4, 2, 0]]), x[[4, 2, 0]])
    if store.device.is_cuda:
        # Each half is one epoch over seeds 0, 1, 3: n_id [0, 2], [1, 2, 4], [3, 4] -> 7 lookups.
        # Rows 2 and 4 are equally hot (2 each); the tiny degree buckets cannot show that beyond
        # noise, so the order keeps the degree prior (2 before 0 before 4) and caches {2, 0}.
        assert store.cached_ids.tolist() == [2, 0]
        assert store.policy_info["expected_hit_rate"] == pytest.approx(6 / 14)  # (4 + 2) / 14


def test_presample_beats_or_ties_degree_on_a_skewed_training_set():
    graph = gg.datasets.synthetic_powerlaw(3000, 6, seed=1)
    train = np.random.default_rng(0).choice(3000, 150, replace=False)
    options = dict(fanouts=[5, 3], batch_size=16, seeds=train)
    halves = policies.presample_halves(graph, num_batches=20, seed=0, **options)  # two epochs
    held_out = policies.presample_counts(graph, num_batches=64, seed=7, **options)
    degree = policies.degree_order(graph)
    for budget in (30, 150, 300, 600):
        presample, info = policies.presample_policy(graph, budget, halves)
        ours = policies.expected_hit_rate(held_out, presample[:budget])
        assert ours >= policies.expected_hit_rate(held_out, degree[:budget])
    assert info["order_from"] == "presample"  # training-set locality that degree cannot see


def test_presample_scores_keep_the_degree_prior_when_counts_are_noise():
    # every node of a ring has degree 2: counts that vary only binomially leave the prior
    ring = np.arange(40)
    graph = gg.CSRGraph.from_edge_index(np.stack([ring, (ring + 1) % 40]), num_nodes=40).to_scipy()
    graph = gg.CSRGraph.from_scipy(graph + graph.T)
    rng = np.random.default_rng(0)
    counts = rng.binomial(50, 0.3, size=40)
    scores = policies.presample_scores(graph, counts, 50)
    np.testing.assert_allclose(scores, np.full(40, counts.mean() / 50))
    strong = counts.copy()
    strong[:5] = 50  # five nodes touched by every batch: far beyond binomial noise
    scores = policies.presample_scores(graph, strong, 50)
    assert set(np.argsort(-scores)[:5].tolist()) == set(range(5))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(policy="hottest"), ValueError, "policy must be one of"),
        (dict(policy="degree"), ValueError, "needs graph"),
        (dict(policy="presample"), ValueError, "needs graph"),
        (dict(graph="edges"), TypeError, "graph must be"),
        (dict(policy=np.array([1, 1])), ValueError, "must not repeat"),
        (dict(policy=np.array([0, 6])), ValueError, r"policy \(an order array\)\[1\] = 6"),
        (dict(policy=np.array([-1])), ValueError, "out of range"),
        (dict(policy=np.array([0.5])), TypeError, "integer node ids"),
        (
            dict(policy="degree", graph=_star_graph(), presample=dict(batch_size=4)),
            ValueError,
            "only used with policy='presample'",
        ),
        (
            dict(policy="presample", graph=_star_graph(), presample=dict(batches=4)),
            ValueError,
            "unknown presample option",
        ),
        (
            dict(policy="presample", graph=_star_graph(), presample=[("batch_size", 4)]),
            TypeError,
            r"presample must be a dict of options .*got list",
        ),
    ],
)
def test_bad_policies_raise(kwargs, error, message):
    with pytest.raises(error, match=message):
        FeatureStore(np.zeros((6, 2), np.float32), **kwargs)


def test_graph_of_another_size_raises():
    with pytest.raises(ValueError, match="graph has 6 nodes but x has 7 rows"):
        FeatureStore(np.zeros((7, 2), np.float32), graph=_star_graph())


def test_presample_store_with_the_real_sampler_caches_the_counted_order(device):
    graph = gg.datasets.synthetic_powerlaw(60, 4, seed=3)
    x = np.arange(60 * 2, dtype=np.float32).reshape(60, 2)
    options = dict(fanouts=[3, 2], batch_size=8, num_batches=3, seed=5)
    store = FeatureStore(x, device=device, cache_size=10 * 8, graph=graph, policy="presample", presample=options)
    ids = np.arange(59, -1, -3)
    np.testing.assert_array_equal(to_host(store[ids]), x[ids])
    if store.device.is_cuda:
        order, info = policies.presample_policy(graph, 10, policies.presample_halves(graph, **options))
        np.testing.assert_array_equal(store.cached_ids, order[:10])
        assert store.policy_info["order_from"] == info["order_from"]
        expected = policies.expected_hit_rate(info["counts"], order[:10])
        assert store.policy_info["expected_hit_rate"] == pytest.approx(expected)
        assert 0.0 < expected <= 1.0

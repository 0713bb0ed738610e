"""Distribution of the random keys: uniform over the free keys, or power law in distance (chi-square)."""

import numpy as np
import pytest

from gglspeedup.attention import SequencePattern

scipy_stats = pytest.importorskip("scipy.stats")


def random_keys(pattern, seq_len, query, steps, batch=50):
    """The random keys query ``query`` drew in ``steps * batch`` fresh rows (all sequences of a step)."""
    window, globals_keys = [], []
    keys = []
    for step in range(steps):
        graph = pattern.csc(seq_len, batch=batch, step=step)
        for s in range(batch):
            r = s * seq_len + query
            row = graph.indices[graph.indptr[r] : graph.indptr[r + 1]] - s * seq_len
            globals_ = set(graph.globals_of(s).tolist())
            h = pattern.window // 2
            fixed = {x for x in range(seq_len) if abs(x // h - query // h) <= 1} | globals_
            drawn = [x for x in row.tolist() if x not in fixed]
            assert len(drawn) == pattern.num_random
            keys.extend(drawn)
            window.append(fixed)
            globals_keys.append(globals_)
    return np.array(keys), window


def test_uniform_keys_are_uniform_over_the_free_keys():
    seq_len, query = 48, 20
    pattern = SequencePattern(window=8, num_random=6, num_global=0, seed=9)
    keys, _ = random_keys(pattern, seq_len, query, steps=40)
    h = 4
    free = [x for x in range(seq_len) if abs(x // h - query // h) > 1]
    counts = np.array([np.sum(keys == x) for x in free])
    assert counts.sum() == keys.size  # nothing outside the free keys
    _, p = scipy_stats.chisquare(counts)
    assert p > 1e-3


@pytest.mark.parametrize("exponent", [1.0, 2.0])
def test_power_law_keys_follow_distance_to_the_minus_exponent(exponent):
    seq_len, query = 64, 30
    pattern = SequencePattern(window=4, num_random=1, num_global=0, random="power_law", exponent=exponent, seed=4)
    keys, _ = random_keys(pattern, seq_len, query, steps=60)
    h = 2
    free = [x for x in range(seq_len) if abs(x // h - query // h) > 1]
    weights = np.array([abs(x - query) ** -exponent for x in free])
    counts = np.array([np.sum(keys == x) for x in free])
    expected = weights / weights.sum() * keys.size
    # pool the sparse tail so every expected count is >= 5
    order = np.argsort(-expected)
    pooled_obs, pooled_exp, acc_o, acc_e = [], [], 0.0, 0.0
    for i in order:
        acc_o += counts[i]
        acc_e += expected[i]
        if acc_e >= 5:
            pooled_obs.append(acc_o)
            pooled_exp.append(acc_e)
            acc_o = acc_e = 0.0
    pooled_obs[-1] += acc_o
    pooled_exp[-1] += acc_e
    _, p = scipy_stats.chisquare(pooled_obs, pooled_exp)
    assert p > 1e-3

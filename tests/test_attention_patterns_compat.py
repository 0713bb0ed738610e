"""compat="diffuser" reproduces Diffuser's own seed-0 pattern (its graphtrainer._create_adj_mat).

The digests were taken from Diffuser's edges by ``tools/diffuser_pattern_check.py`` in the Diffuser
peer environment (every one of its 64 lengths matched there); here CI checks the same edges
without the peer. Digest: SHA-256 of the int64 ``[destination, source]`` pairs sorted by
(destination, source).
"""

import hashlib

import numpy as np
import pytest

from gglspeedup.attention import SequencePattern

DIFFUSER_SEED0 = {
    64: (4096, "3745eac673c0801c65f4aa945ef27d7ab002a7381c379a786a925bee2dbdaeea"),
    128: (10460, "40de68e2828e2ef885447c191b010779336f0512b5d8f879a7df637a88023c65"),
    256: (24120, "f4ae5f8c773c31f1d8d5354d31538a39be615683d93338de0627195d904b1429"),
    512: (54623, "33f8f97f5f0ccdf974cff6de065c2815878faf825a7aa96b07cbdef8e5f8d8ce"),
    1024: (148938, "44bec41be8a7cebf3442013fde81cd521fbdce5575fb4fc2872484fdff8f4e15"),
}
# Diffuser's 64 global tokens for seed 0 (its second np.random.choice)
DIFFUSER_GLOBALS_HEAD = [101, 144, 163, 354, 504, 527, 554, 564, 687, 693]


@pytest.fixture(scope="module")
def pattern():
    return SequencePattern(64, 64, 64, compat="diffuser", seed=0)


@pytest.mark.parametrize("length", sorted(DIFFUSER_SEED0))
def test_diffuser_seed0_edges_bit_for_bit(pattern, length):
    graph = pattern.csc(length)
    destination = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
    pairs = np.stack([destination, graph.indices.astype(np.int64)])  # already sorted: rows, then keys
    edges, digest = DIFFUSER_SEED0[length]
    assert graph.num_edges == edges
    assert hashlib.sha256(pairs.tobytes()).hexdigest() == digest


def test_prefix_rule_and_globals(pattern):
    full = pattern.csc(1024)
    assert pattern.csc(4096).globals_of(0)[:10].tolist() == DIFFUSER_GLOBALS_HEAD
    short = pattern.csc(256, batch=2, lengths=[256, 128])
    assert np.array_equal(short.indices[: pattern.csc(256).num_edges], pattern.csc(256).indices)
    second = short.indices[short.indptr[256] : short.indptr[512]] - 256
    assert np.array_equal(second, pattern.csc(128).indices)
    assert full.globals_of(0).tolist() == [g for g in pattern.csc(4096).globals_of(0).tolist() if g < 1024]

"""NeighborSampler: exact agreement with the NumPy reference, invariants, determinism, API."""

import pickle

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup import _rng as krng
from gglspeedup.testing import (
    assert_same_sample,
    check_sample,
    reference_draw,
    reference_hop_state,
    reference_sample,
)

from conftest import run_in_threads, to_host

MODES = [
    pytest.param(False, False, id="uniform"),
    pytest.param(True, False, id="uniform-replace"),
    pytest.param(False, True, id="weighted"),
    pytest.param(True, True, id="weighted-replace"),
]


def random_graph(rng, num_nodes, num_edges, zero_weight_share=0.2):
    """A multigraph with self loops, duplicate edges, isolated nodes and some zero weights."""
    edge_index = rng.integers(0, num_nodes, size=(2, num_edges))
    weights = rng.random(num_edges) + 0.01
    weights[rng.random(num_edges) < zero_weight_share] = 0.0
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes, weights=weights)


def test_rng_matches_reference_bits():
    for seed, key, hop in [(0, 0, 0), (1, 2**63 + 5, 3), (2**64 - 1, 7, 1)]:
        assert int(krng.hop_state(seed, key, hop)) == reference_hop_state(seed, key, hop)
        state = krng.row_state(krng.hop_state(seed, key, hop), np.int64(12345))
        for index in (0, 1, 99):
            assert int(krng.draw(state, np.int64(index))) == reference_draw(seed, key, hop, 12345, index)


def test_hop_states_are_hop_state_over_an_array():
    # the attention patterns' per-sequence states (hop = sequence index) are the samplers' hop states
    # (up to 16 hops on Python ints, more as one array expression: the same bits)
    few = np.array([0, 1, 7, 2**64 - 1], np.uint64)
    for hops in (few, np.concatenate([few, np.arange(30, dtype=np.uint64)])):
        for seed, key in [(0, 0), (3, 2**64 - 1), (2**64 - 1, 12)]:
            states = krng.hop_states(seed, key, hops)
            assert states.dtype == np.uint64 and states.shape == hops.shape
            assert [int(s) for s in states] == [reference_hop_state(seed, key, int(h)) for h in hops]


def test_uniform_below_stays_in_range():
    for n in (1, 2, 3, 1000, 2**32 - 1, 2**32, 2**40 + 3):
        for bits in (np.uint64(0), np.uint64(2**64 - 1), np.uint64(0x123456789ABCDEF)):
            value = krng.uniform_below(bits, np.int64(n))
            assert 0 <= value < n
    assert krng.uniform_01(np.uint64(2**64 - 1)) < 1.0
    assert krng.uniform_01(np.uint64(0)) == 0.0


@pytest.mark.parametrize("replace, weighted", MODES)
def test_matches_reference_on_random_graphs(replace, weighted):
    rng = np.random.default_rng(7)
    for trial in range(12):
        graph = random_graph(rng, int(rng.integers(1, 60)), int(rng.integers(0, 400)))
        fanouts = [int(k) for k in rng.integers(-1, 7, size=int(rng.integers(1, 4)))]
        seeds = rng.integers(0, graph.num_nodes, size=int(rng.integers(0, 10)))
        sampler = gg.NeighborSampler(graph, fanouts, replace=replace, weighted=weighted, seed=trial)
        out = sampler.sample(seeds, key=trial * 3)
        check_sample(graph, seeds, fanouts, out, replace=replace, weighted=weighted)
        expected = reference_sample(
            graph, seeds, fanouts, replace=replace, weighted=weighted, seed=trial, key=trial * 3
        )
        assert_same_sample(out, expected)


def test_invariants_on_cora():
    from importlib import resources

    with resources.files("gglspeedup").joinpath("data/cora.npz").open("rb") as handle:
        edge_index = np.load(handle)["edge_index"]
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=2708)
    seeds = np.random.default_rng(0).permutation(2708)[:256]
    for fanouts, replace in (([25, 10], False), ([10, 5, -1], False), ([5, 5], True)):
        sampler = gg.NeighborSampler(graph, fanouts, replace=replace, seed=3)
        for _ in range(2):
            check_sample(graph, seeds, fanouts, sampler.sample(seeds), replace=replace)
    assert_same_sample(
        sampler.sample(seeds[:64], key=9), reference_sample(graph, seeds[:64], [5, 5], replace=True, seed=3, key=9)
    )


def test_hop_semantics_on_a_path():
    # 0 <- 1 <- 2 <- 3: every fanout takes the single in-neighbour.
    graph = gg.CSRGraph.from_edge_index([[1, 2, 3], [0, 1, 2]], num_nodes=4)
    n_id, adjs = gg.NeighborSampler(graph, [1, 1, 1]).sample([0])
    assert n_id.tolist() == [0, 1, 2, 3]
    assert [adj.size for adj in adjs] == [(4, 3), (3, 2), (2, 1)]  # outermost hop first
    assert adjs[-1].edge_index.tolist() == [[1], [0]]
    assert adjs[0].edge_index.tolist() == [[1, 2, 3], [0, 1, 2]]
    assert adjs[0].e_id.tolist() == [0, 1, 2]
    assert all(isinstance(s, int) for adj in adjs for s in adj.size)


def test_duplicate_seeds_kept_and_sampled_alike():
    graph = random_graph(np.random.default_rng(1), 30, 300, zero_weight_share=0)
    seeds = np.array([4, 4, 9, 4, 0])
    out = gg.NeighborSampler(graph, [3, 2], seed=5).sample(seeds)
    assert out.n_id[:5].tolist() == seeds.tolist()
    assert out.batch_size == 5
    check_sample(graph, seeds, [3, 2], out)


def test_fanout_zero_and_all():
    graph = random_graph(np.random.default_rng(2), 20, 120, zero_weight_share=0)
    out = gg.NeighborSampler(graph, [0, -1]).sample([1, 2])
    assert out.adjs[-1].edge_index.shape == (2, 0) and out.adjs[-1].size == (2, 2)
    degree = graph.degree()
    assert out.adjs[0].edge_index.shape[1] == degree[[1, 2]].sum()
    check_sample(graph, [1, 2], [0, -1], out)


def test_empty_seeds_and_edgeless_graph():
    graph = gg.CSRGraph(np.zeros(6, np.int64), np.zeros(0, np.int64))
    for seeds in ([], np.zeros(0, np.int32), [0, 3]):
        n_id, adjs = gg.NeighborSampler(graph, [4, -1], replace=True).sample(seeds)
        assert n_id.dtype == np.int64 and n_id.tolist() == list(np.asarray(seeds, np.int64))
        for adj in adjs:
            assert adj.edge_index.shape == (2, 0) and adj.edge_index.dtype == np.int64
            assert adj.e_id.shape == (0,) and adj.size == (len(n_id), len(n_id))


def test_all_zero_weights_yield_nothing():
    graph = gg.CSRGraph([0, 2, 3], [1, 0, 0], weights=[0.0, 0.0, 1.0])
    for replace in (False, True):
        _n_id, adjs = gg.NeighborSampler(graph, [2], weighted=True, replace=replace).sample([0, 1])
        assert adjs[0].edge_index[1].tolist() == ([1] if not replace else [1, 1])


def test_weights_whose_row_sum_overflows_are_refused_naming_the_row():
    # Each weight is finite, row 1's sum is not: its running sums were inf and it always drew edge 3.
    graph = gg.CSRGraph([0, 1, 4], [0, 0, 1, 1], weights=[1e308, 1e308, 1e308, 1.0])
    with pytest.raises(ValueError, match=r"weights of row 1 sum past the float64 range \(inf\)"):
        gg.NeighborSampler(graph, [1], weighted=True)
    gg.NeighborSampler(graph, [1])  # unweighted sampling never reads the sums
    big = gg.CSRGraph([0, 2, 4], [0, 1, 0, 1], weights=[1e308, 1e307, 1e308, 1e307])  # each row fits
    sampler = gg.NeighborSampler(big, [1], weighted=True)  # the graph's total overflows, no row's does
    counts = np.bincount([sampler.sample([1], key=k).adjs[0].e_id[0] for k in range(400)], minlength=4)
    assert counts.tolist()[:2] == [0, 0] and counts[2] > counts[3] > 0


def test_keys_advance_and_replay():
    graph = random_graph(np.random.default_rng(3), 200, 3000)
    seeds = np.arange(0, 200, 7)
    a = gg.NeighborSampler(graph, [5, 3], seed=11)
    first, second = a.sample(seeds), a.sample(seeds)
    assert not np.array_equal(first.n_id, second.n_id)
    b = gg.NeighborSampler(graph, [5, 3], seed=11)
    assert_same_sample(b.sample(seeds, key=1), second)
    assert_same_sample(b.sample(seeds), first)  # key=... did not advance b's counter
    other_seed = gg.NeighborSampler(graph, [5, 3], seed=12).sample(seeds, key=0)
    assert not np.array_equal(other_seed.n_id, first.n_id)


def test_same_output_for_any_thread_count_and_input_type():
    import numba

    graph = random_graph(np.random.default_rng(4), 500, 8000)
    seeds = np.random.default_rng(5).integers(0, 500, 64)
    sampler = gg.NeighborSampler(graph, [10, 5], weighted=True, seed=2)
    expected = sampler.sample(seeds, key=4)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        assert_same_sample(sampler.sample(seeds.astype(np.int32), key=4), expected)
    finally:
        numba.set_num_threads(before)
    assert_same_sample(sampler.sample(seeds.tolist(), key=4), expected)
    torch = pytest.importorskip("torch")
    assert_same_sample(sampler.sample(torch.from_numpy(seeds), key=4), expected)


def test_concurrent_calls_and_pickle():
    graph = random_graph(np.random.default_rng(6), 300, 5000)
    sampler = gg.NeighborSampler(graph, [8, 4], seed=9)
    seeds = np.arange(0, 300, 3)
    expected = [sampler.sample(seeds, key=k) for k in range(8)]
    results = [None] * 8

    def work(k):
        results[k] = sampler.sample(seeds, key=k)

    run_in_threads(work, 8)
    for got, want in zip(results, expected):
        assert_same_sample(got, want)
    clone = pickle.loads(pickle.dumps(sampler))
    assert_same_sample(clone.sample(seeds, key=3), expected[3])


def test_scipy_graph_and_direction_out():
    import scipy.sparse as sp

    matrix = sp.random(40, 40, density=0.2, format="csr", random_state=0)
    sampler = gg.NeighborSampler(matrix, [3])
    graph = gg.CSRGraph.from_scipy(matrix)
    out = sampler.sample([0, 5, 7], key=2)
    assert_same_sample(out, reference_sample(graph, [0, 5, 7], [3], key=2))


@pytest.mark.parametrize(
    "seeds, error, match",
    [
        ([0, 10], IndexError, r"seeds\[1\] = 10"),
        ([-1, 2], IndexError, r"seeds\[0\] = -1"),
        ([0.0, 1.0], TypeError, "integers"),
        (np.array([True, False]), TypeError, "bool"),
        (np.zeros((2, 2), np.int64), ValueError, "1-D"),
        (["a", "b"], TypeError, "integers"),
        (None, TypeError, "None"),
    ],
)
def test_bad_seeds(seeds, error, match):
    sampler = gg.NeighborSampler(gg.CSRGraph([0] * 11, []), [2])
    with pytest.raises(error, match=match):
        sampler.sample(seeds)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(fanouts=[]), ValueError, "at least one"),
        (dict(fanouts=[2, 1.5]), TypeError, r"fanouts\[1\]"),
        (dict(fanouts=[True]), TypeError, r"fanouts\[0\]"),
        (dict(fanouts=[3, -2]), ValueError, r"fanouts\[1\]"),
        (dict(fanouts=5), TypeError, "list"),
        (dict(fanouts=[2], weighted=True), ValueError, "weights"),
        (dict(fanouts=[2], seed=-1), ValueError, "seed"),
        (dict(fanouts=[2], seed=1.5), TypeError, "seed"),
        (dict(fanouts=[2], replace=1), TypeError, "replace"),
        (dict(fanouts=[2], placement="pinned"), ValueError, "CUDA"),
        (dict(fanouts=[2], placement="nowhere"), ValueError, "placement"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        gg.NeighborSampler(gg.CSRGraph([0, 1, 1], [0]), **kwargs)


@pytest.mark.parametrize("key, error", [(1.0, TypeError), (True, TypeError), ("3", TypeError), (-1, ValueError)])
def test_bad_key(key, error):
    sampler = gg.NeighborSampler(gg.CSRGraph([0, 1, 1], [0]), [1])
    with pytest.raises(error, match="key"):
        sampler.sample([0], key=key)


def test_gpu_seeds_rejected_on_cpu_sampler():
    class FakeCudaTensor:
        def __dlpack_device__(self):
            return (2, 0)

    sampler = gg.NeighborSampler(gg.CSRGraph([0, 1, 1], [0]), [1])
    with pytest.raises(ValueError, match="GPU"):
        sampler.sample(FakeCudaTensor())


def test_outputs_on_device(device):
    graph = random_graph(np.random.default_rng(8), 12, 40, zero_weight_share=0)
    out = gg.NeighborSampler(graph, [2, 2], device=device, seed=1).sample([0, 3, 3], key=5)
    check_sample(graph, [0, 3, 3], [2, 2], out)
    assert_same_sample(out, reference_sample(graph, [0, 3, 3], [2, 2], seed=1, key=5))
    assert isinstance(to_host(out.n_id), np.ndarray)


def test_neighbours_do_not_depend_on_seed_order():
    graph = random_graph(np.random.default_rng(9), 100, 1500)
    seeds = np.arange(0, 100, 4)
    order = np.random.default_rng(10).permutation(len(seeds))
    sampler = gg.NeighborSampler(graph, [4, 3], weighted=True, seed=6)

    def drawn(out, hop):
        adj = out.adjs[-1 - hop]
        nodes = out.n_id[adj.edge_index[1]]
        return {int(v): adj.e_id[nodes == v].tolist() for v in np.unique(nodes)}

    a, b = sampler.sample(seeds, key=2), sampler.sample(seeds[order], key=2)
    assert drawn(a, 0) == drawn(b, 0)
    assert drawn(a, 1) == drawn(b, 1)  # same node set at hop 1, in another order
    assert set(a.n_id.tolist()) == set(b.n_id.tolist())


def test_memory_mapped_graph(tmp_path):
    # CSRGraph.load memory-maps read-only arrays by default; the kernels must accept them, and run
    # the variant the same graph in memory took: the CPU drivers hand the kernels read-only views
    # of every graph (records.read_only), so a loaded graph compiles nothing again.
    from gglspeedup.sampling._kernels.cpu import sample_hop

    graph = random_graph(np.random.default_rng(11), 50, 400, zero_weight_share=0)
    expected = reference_sample(graph, [1, 2, 3], [3, 2], seed=4, key=1)
    assert_same_sample(gg.NeighborSampler(graph, [3, 2], seed=4).sample([1, 2, 3], key=1), expected)
    variants = set(sample_hop.signatures)
    graph.save(tmp_path / "graph.npz")
    mapped = gg.CSRGraph.load(tmp_path / "graph.npz", mmap=True)
    assert not mapped.indptr.flags.writeable and not mapped.indices.flags.writeable
    out = gg.NeighborSampler(mapped, [3, 2], seed=4).sample([1, 2, 3], key=1)
    assert_same_sample(out, expected)
    assert set(sample_hop.signatures) == variants


def test_with_fanouts_shares_the_graph_and_continues_the_batch_counter():
    graph = random_graph(np.random.default_rng(5), 40, 300, zero_weight_share=0)
    sampler = gg.NeighborSampler(graph, [3, 2], seed=9)
    seeds = [0, 7, 7, 13]
    sampler.sample(seeds)  # key 0
    sampler.sample(seeds)  # key 1
    other = sampler.with_fanouts([4, 1, 2])
    assert other.fanouts == [4, 1, 2] and sampler.fanouts == [3, 2]
    assert other.graph is sampler.graph  # no copy of the placed graph
    assert_same_sample(other.sample(seeds), reference_sample(graph, seeds, [4, 1, 2], seed=9, key=2))
    assert_same_sample(sampler.sample(seeds), reference_sample(graph, seeds, [3, 2], seed=9, key=2))
    with pytest.raises(ValueError, match="fanouts"):
        sampler.with_fanouts([])

"""NeighborSampler.sample_links: exclusion without leakage, negatives, pair positions, bad input."""

import numpy as np
import pytest
from scipy.stats import chisquare

import gglspeedup as gg
from gglspeedup.testing import assert_same_sample, check_sample

from conftest import to_host

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


def _multigraph(num_nodes=40, num_edges=200, seed=0, weighted=False, ascending=False):
    """Random edges stored in both directions, with parallel edges and self loops; ``ascending``:
    every row lists its sources in ascending order (the excluded edges are then binary-searched)."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes, size=(2, num_edges))
    edges = np.concatenate([edges, edges[::-1], edges[:, :20]], axis=1)  # reverse copies + parallel ones
    if ascending:
        edges = edges[:, np.lexsort((edges[0], edges[1]))]
    weights = rng.random(edges.shape[1]) + 0.1 if weighted else None
    return gg.CSRGraph.from_edge_index(edges, num_nodes=num_nodes, weights=weights), edges


def _edges_of(graph, out):
    """Every sampled edge of every hop as (global source, global target) pairs, and its e_id."""
    n_id = to_host(out.n_id)
    found = []
    for adj in out.adjs:
        edge_index = to_host(adj.edge_index)
        found += list(zip(n_id[edge_index[0]].tolist(), n_id[edge_index[1]].tolist()))
    return found


def _seeds_of(out):
    return to_host(out.n_id)[: out.adjs[-1].size[1]]


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("exclude", ["self", "reverse"])
@pytest.mark.parametrize("ascending", [False, True])
def test_no_hop_contains_a_positive_pair_and_counts_are_min_k_available(device, replace, weighted, exclude, ascending):
    graph, edges = _multigraph(weighted=weighted, ascending=ascending)
    sampler = gg.NeighborSampler(graph, [3, 2], replace=replace, weighted=weighted, device=device, seed=4)
    pairs = edges[:, [0, 1, 1, 5, 9, 12]]  # graph edges, one repeated
    pairs = np.concatenate([pairs, [[7, 7], [7, 7]]], axis=1)  # and a self pair
    out = sampler.sample_links(pairs, exclude=exclude, key=3)
    forbidden = set(zip(pairs[0].tolist(), pairs[1].tolist()))
    if exclude == "reverse":
        forbidden |= {(t, s) for s, t in forbidden}
    assert not forbidden & set(_edges_of(graph, out))
    # the invariants of sample(), on the graph without the excluded edges
    keep = np.array(
        [(int(u), int(v)) not in forbidden for u, v in zip(graph.indices, np.repeat(np.arange(40), graph.degree()))]
    )
    indptr = np.concatenate([[0], np.cumsum(np.bincount(np.repeat(np.arange(40), graph.degree())[keep], minlength=40))])
    reduced = gg.CSRGraph(
        indptr,
        graph.indices[keep],
        edge_ids=graph.edge_ids[keep],
        weights=None if graph.weights is None else graph.weights[keep],
    )
    check_sample(
        reduced, _seeds_of(out), [3, 2], gg.SampleOutput(out.n_id, out.adjs), replace=replace, weighted=weighted
    )


@pytest.mark.parametrize("weighted", [False, True])
def test_rows_without_excluded_edges_draw_exactly_what_sample_draws(device, weighted):
    graph, edges = _multigraph(seed=1, weighted=weighted)
    sampler = gg.NeighborSampler(graph, [2, 2], weighted=weighted, device=device, seed=9)
    pairs = edges[:, :5]
    free = sampler.sample_links(pairs, exclude=None, key=6)
    assert_same_sample(free.sample_output, sampler.sample(_seeds_of(free), key=6))
    excluded = sampler.sample_links(pairs, exclude="reverse", key=6)
    touched = {int(t) for t in pairs.reshape(-1)}  # rows holding an excluded edge: the pairs' endpoints
    compared = 0
    for hop in range(2):
        rows = []
        for out in (free, excluded):
            n_id, adj = to_host(out.n_id), out.adjs[-1 - hop]
            targets, e_id = n_id[to_host(adj.edge_index)[1]], to_host(adj.e_id)
            rows.append({int(v): sorted(e_id[targets == v].tolist()) for v in np.unique(targets)})
        common = (set(rows[0]) & set(rows[1])) - touched
        assert all(rows[0][v] == rows[1][v] for v in common), hop
        compared += len(common)
    assert compared >= 3  # hop 1 reaches rows beyond the endpoints in both


def test_an_excluded_row_draws_uniformly_among_the_rest():
    num = 21  # node 0's in-neighbours 1..20; the pair (3, 0) removes one of them
    graph = gg.CSRGraph.from_edge_index([np.arange(1, num), np.zeros(num - 1, np.int64)], num_nodes=num)
    sampler = gg.NeighborSampler(graph, [1], seed=2)
    counts = np.zeros(num, np.int64)
    for key in range(3800):
        out = sampler.sample_links([[3], [0]], key=key)
        n_id, adj = out.n_id, out.adjs[0]
        counts[n_id[adj.edge_index[0][n_id[adj.edge_index[1]] == 0]]] += 1
    assert counts[3] == 0 and counts[0] == 0
    others = np.delete(counts[1:], 2)
    assert others.sum() == 3800 and chisquare(others).pvalue > 1e-4


def test_a_weighted_excluded_row_draws_by_weight_among_the_rest():
    num = 9
    weights = np.arange(1, num, dtype=np.float64)  # edge i -> 0 weighs i
    graph = gg.CSRGraph.from_edge_index(
        [np.arange(1, num), np.zeros(num - 1, np.int64)], num_nodes=num, weights=weights
    )
    sampler = gg.NeighborSampler(graph, [2], weighted=True, replace=True, seed=5)
    counts = np.zeros(num, np.int64)
    for key in range(2000):
        out = sampler.sample_links([[8], [0]], key=key)  # excludes the heaviest edge
        n_id, adj = out.n_id, out.adjs[0]
        counts[n_id[adj.edge_index[0][n_id[adj.edge_index[1]] == 0]]] += 1
    assert counts[8] == 0
    expected = weights[:7] / weights[:7].sum() * counts[1:8].sum()
    assert chisquare(counts[1:8], expected).pvalue > 1e-4


@pytest.mark.parametrize("mode", ["binary", "per_source", "triplet"])
def test_negatives_are_uniform_deterministic_and_positioned(device, mode):
    graph, _edges = _multigraph(num_nodes=30, seed=2)
    sampler = gg.NeighborSampler(graph, [2], device=device, seed=1)
    pairs = np.array([[0, 4, 4, 9], [5, 2, 2, 9]])
    out = sampler.sample_links(pairs, negatives=mode, num_negatives=3, key=11)
    again = sampler.sample_links(pairs, negatives=mode, num_negatives=3, key=11)
    n_id, pair_index = to_host(out.n_id), to_host(out.pair_index)
    np.testing.assert_array_equal(n_id[pair_index[:, :4]], pairs)  # positives map back, duplicates kept
    assert len(np.unique(n_id[: out.adjs[-1].size[1]])) == out.adjs[-1].size[1]  # distinct endpoints
    np.testing.assert_array_equal(to_host(again.pair_index), pair_index)
    labels = to_host(out.labels)
    if mode == "triplet":
        targets = n_id[to_host(out.negative_targets)]
        assert targets.shape == (4, 3) and pair_index.shape == (2, 4) and labels.tolist() == [1, 1, 1, 1]
    else:
        assert pair_index.shape == (2, 16) and labels.tolist() == [1] * 4 + [0] * 12
        negative = n_id[pair_index[:, 4:]]
        if mode == "per_source":
            np.testing.assert_array_equal(negative[0], np.repeat(pairs[0], 3))
    other = sampler.sample_links(pairs, negatives=mode, num_negatives=3, key=12)
    assert not np.array_equal(to_host(other.n_id), n_id)


@pytest.mark.parametrize("disjoint", [False, True], ids=["shared", "disjoint"])
@pytest.mark.parametrize("total", [1, 5, 9, 12])
def test_total_negatives_draws_exactly_that_many_binary_pairs_a_prefix_of_the_keyed_ones(device, disjoint, total):
    # PyG's binary count ceil(amount * B): the pairs, labels and seeds are those of that many
    # negatives only (no seed of an unreturned negative), the same ones num_negatives draws first
    graph, _ = _multigraph(num_nodes=30, seed=2)
    sampler = gg.NeighborSampler(graph, [2, 2], device=device, seed=1, disjoint=disjoint)
    pairs = np.array([[0, 4, 4, 9], [5, 2, 2, 9]])
    out = sampler.sample_links(pairs, negatives="binary", num_negatives=3, total_negatives=total, key=11)
    every = sampler.sample_links(pairs, negatives="binary", num_negatives=3, key=11)
    n_id, pair_index = to_host(out.n_id), to_host(out.pair_index)
    drawn = to_host(every.n_id)[to_host(every.pair_index)]
    np.testing.assert_array_equal(n_id[pair_index], drawn[:, : 4 + total])
    assert to_host(out.labels).tolist() == [1] * 4 + [0] * total
    seeds = _seeds_of(out)
    if disjoint:  # every endpoint its tree: sources, then targets
        np.testing.assert_array_equal(seeds, np.concatenate(n_id[pair_index]))
    else:
        assert sorted(seeds.tolist()) == sorted(set(n_id[pair_index].ravel().tolist()))
    if total == 12:  # num_negatives * B: the call without total_negatives, bit for bit
        assert_same_sample((out.n_id, out.adjs), (every.n_id, every.adjs))
        np.testing.assert_array_equal(pair_index, to_host(every.pair_index))


@pytest.mark.parametrize("mode", ["binary", "per_source"])
def test_negatives_are_uniform_over_the_nodes(mode):
    graph, _ = _multigraph(num_nodes=25, seed=3)
    sampler = gg.NeighborSampler(graph, [0], seed=8)
    out = sampler.sample_links(np.array([[1] * 50, [2] * 50]), negatives=mode, num_negatives=60, key=0)
    negative = out.n_id[out.pair_index[:, 50:]]
    assert chisquare(np.bincount(negative[1], minlength=25)).pvalue > 1e-4
    if mode == "binary":
        assert chisquare(np.bincount(negative[0], minlength=25)).pvalue > 1e-4


@pytest.mark.parametrize("mode", ["binary", "per_source", "triplet"])
def test_strict_negatives_are_never_edges_where_a_non_edge_exists(device, mode):
    graph, edges = _multigraph(num_nodes=12, num_edges=40, seed=4)  # dense: many draws hit edges
    sampler = gg.NeighborSampler(graph, [1], device=device, seed=3)
    pairs = edges[:, :20]
    strict = sampler.sample_links(pairs, negatives=mode, num_negatives=4, strict_negatives=True, key=1)
    loose = sampler.sample_links(pairs, negatives=mode, num_negatives=4, key=1)
    assert strict.num_false_negatives == 0 and loose.num_false_negatives is None
    existing = set(zip(*edges.tolist()))
    n_id = to_host(strict.n_id)
    if mode == "triplet":
        sources = np.repeat(pairs[0], 4)
        targets = n_id[to_host(strict.negative_targets)].reshape(-1)
    else:
        sources, targets = n_id[to_host(strict.pair_index)[:, 20:]]
    assert not {(int(s), int(t)) for s, t in zip(sources, targets)} & existing
    loose_n_id = to_host(loose.n_id)
    assert len(set(zip(*loose_n_id[to_host(loose.pair_index)].tolist())) & existing) > 0 or mode == "triplet"


def test_a_graph_of_only_edges_reports_its_false_negatives():
    graph = gg.CSRGraph.from_edge_index([[0, 0, 1, 1], [0, 1, 0, 1]], num_nodes=2)  # every pair is an edge
    out = gg.NeighborSampler(graph, [1]).sample_links(
        [[0], [1]], negatives="binary", num_negatives=5, strict_negatives=True, key=0
    )
    assert out.num_false_negatives == 5


@pytest.mark.cuda
@pytest.mark.parametrize("mode", [None, "binary", "per_source", "triplet"])
@pytest.mark.parametrize("exclude", [None, "self", "reverse"])
@pytest.mark.parametrize("options", [{}, {"replace": True}, {"weighted": True}])
def test_cpu_and_gpu_agree_bit_for_bit(mode, exclude, options):
    graph, edges = _multigraph(num_nodes=16, num_edges=40, seed=5, weighted=True, ascending=exclude == "reverse")
    pairs = edges[:, [0, 3, 3, 8]]
    outputs = [
        gg.NeighborSampler(graph, [2, -1], device=device, seed=7, **options).sample_links(
            pairs, negatives=mode, num_negatives=2, strict_negatives=mode is not None, exclude=exclude, key=2
        )
        for device in ("cpu", "cuda:0")
    ]
    cpu, gpu = outputs
    assert_same_sample(gpu.sample_output, cpu.sample_output)
    for name in ("pair_index", "labels", "negative_targets"):
        a, b = getattr(cpu, name), getattr(gpu, name)
        assert (a is None) == (b is None) and (a is None or np.array_equal(to_host(a), to_host(b))), name
    assert cpu.num_false_negatives == gpu.num_false_negatives


def test_labels_pass_through_and_negatives_get_zero(device):
    graph, edges = _multigraph(seed=6)
    sampler = gg.NeighborSampler(graph, [1], device=device)
    out = sampler.sample_links(edges[:, :3], labels=np.array([2, 0, 1], np.int32), negatives="per_source", key=0)
    labels = to_host(out.labels)
    assert labels.dtype == np.int32 and labels.tolist() == [2, 0, 1, 0, 0, 0]


def test_empty_pairs_give_an_empty_output(device):
    graph, _ = _multigraph(seed=7)
    out = gg.NeighborSampler(graph, [2, 2], device=device).sample_links(np.empty((2, 0), np.int64), negatives="binary")
    assert to_host(out.n_id).size == 0 and to_host(out.pair_index).shape == (2, 0)
    assert [adj.size for adj in out.adjs] == [(0, 0), (0, 0)]


def test_empty_pair_lists_are_an_empty_batch():
    # np.asarray([[], []]) is float64: the pairs' dtype check refused the list spelling of an
    # empty batch (as int_array, which LinkLoader and HeteroGraph use, does not)
    graph, _ = _multigraph(seed=7)
    sampler = gg.NeighborSampler(graph, [2])
    for pairs in ([[], []], ([], [])):
        out = sampler.sample_links(pairs, negatives="binary")
        assert out.pair_index.shape == (2, 0) and out.pair_index.dtype == np.int64 and out.n_id.size == 0
    typed = gg.HeteroGraph({("a", "x", "b"): [[0, 1], [0, 0]]}, {"a": 2, "b": 1})
    out = gg.HeteroNeighborSampler(typed, [2]).sample_links([[], []], edge_type=("a", "x", "b"), negatives="triplet")
    assert out.pair_index.shape == (2, 0) and out.negative_targets.shape == (0, 1)
    with pytest.raises(ValueError, match=r"pairs must have shape \(2, B\)"):
        sampler.sample_links([[], [], []])


@pytest.mark.parametrize(
    "call, error, message",
    [
        (dict(pairs=[0, 1]), ValueError, r"pairs must have shape \(2, B\)"),
        (dict(pairs=np.zeros((3, 2), np.int64)), ValueError, r"pairs must have shape \(2, B\)"),
        (dict(pairs=[[0.5], [1.0]]), TypeError, "pairs must hold integer node ids"),
        (dict(pairs=[[0, 40], [1, 2]]), IndexError, r"pairs\[0, 1\] = 40"),
        (dict(pairs=[[0], [-1]]), IndexError, r"pairs\[1, 0\] = -1"),
        (dict(pairs=None), TypeError, "pairs must be an array"),
        (dict(labels=[1, 0]), ValueError, r"labels must have one entry per pair \(1,\)"),
        (dict(labels=["a"]), TypeError, "labels must hold numbers"),
        (dict(negatives="uniform"), ValueError, "negatives must be one of"),
        (dict(exclude="both"), ValueError, "exclude must be one of"),
        (dict(num_negatives=0), ValueError, "num_negatives must be >= 1"),
        (dict(num_negatives=1.5), TypeError, "num_negatives must be an int"),
        (dict(negatives="binary", total_negatives=0), ValueError, "total_negatives must be >= 1"),
        (dict(negatives="binary", total_negatives=2.5), TypeError, "total_negatives must be an int"),
        (dict(negatives="triplet", total_negatives=2), ValueError, "total_negatives counts binary negatives"),
        (dict(total_negatives=2), ValueError, "it needs negatives='binary', got negatives=None"),
        (dict(strict_negatives="yes"), TypeError, "strict_negatives must be a bool"),
        (dict(pairs=[[0], [40]], check=None), TypeError, "check must be a bool"),  # not a skipped range scan
        (dict(pairs=[[0], [40]], check=0), TypeError, "check must be a bool"),
        (dict(key=-1), ValueError, "key must be an int"),
    ],
)
def test_bad_input_fails_clearly_before_any_kernel(call, error, message):
    graph, _ = _multigraph()
    sampler = gg.NeighborSampler(graph, [2])
    arguments = {"pairs": [[0], [1]], **call}
    pairs = arguments.pop("pairs")
    with pytest.raises(error, match=message):
        sampler.sample_links(pairs, **arguments)


def test_gpu_pairs_for_a_cpu_sampler_are_refused():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():

        class OnGPU:  # any DLPack tensor reporting a CUDA device
            def __dlpack_device__(self):
                return (2, 0)

        pairs = OnGPU()
    else:  # pragma: no cover - GPU machines
        pairs = torch.zeros((2, 1), dtype=torch.int64, device="cuda")
    graph, _ = _multigraph()
    with pytest.raises(ValueError, match="pairs live on a GPU but this sampler runs on cpu"):
        gg.NeighborSampler(graph, [1]).sample_links(pairs)


def test_link_output_converts_through_the_backends():
    torch = pytest.importorskip("torch")
    graph, edges = _multigraph()
    out = gg.NeighborSampler(graph, [2]).sample_links(edges[:, :4], negatives="triplet", num_negatives=2, key=0)
    converted = gg.backends.to("torch", out)
    assert isinstance(converted, gg.sampling.LinkSampleOutput)
    assert isinstance(converted.pair_index, torch.Tensor) and converted.negative_targets.shape == (4, 2)
    assert converted.num_false_negatives is None and converted.batch_size == 4


def test_rows_ascending_is_told_apart_and_both_find_every_parallel_edge():
    from gglspeedup.sampling._kernels.exclusion import rows_ascending

    for ascending in (False, True):
        graph, edges = _multigraph(ascending=ascending)
        assert rows_ascending(np, graph.indptr, graph.indices) == ascending
        driver = gg.NeighborSampler(graph, [2])._driver
        pairs = edges[:, [0, 1, 2, 200]]  # 200: a reverse copy; the first 20 edges are doubled
        positions = driver.excluded_positions(pairs[0].copy(), pairs[1].copy())
        rows = np.repeat(np.arange(graph.num_nodes), graph.degree())
        expected = [
            p for p in range(graph.num_edges) if (graph.indices[p], rows[p]) in set(map(tuple, pairs.T.tolist()))
        ]
        np.testing.assert_array_equal(positions, expected)
    assert rows_ascending(np, np.array([0, 2, 4]), np.array([3, 1, 0, 2])) is False
    assert rows_ascending(np, np.array([0, 2, 4]), np.array([1, 3, 0, 2])) is True
    assert rows_ascending(np, np.array([0, 0]), np.array([], np.int64)) is True

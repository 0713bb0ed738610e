"""Disjoint and temporal sampling (issue 20): exact against the Python reference, invariants,
statistics, CPU == simulated GPU, and every bad input named."""

import pickle

import numpy as np
import pytest
from scipy import stats

import gglspeedup as gg
from gglspeedup.testing import assert_same_sample
from gglspeedup.testing.reference_trees import reference_tree_sample

from conftest import to_host


def _graph(num_nodes=24, num_edges=120, seed=0, weighted=False):
    rng = np.random.default_rng(seed)
    edge_index = rng.integers(0, num_nodes, size=(2, num_edges))
    weights = rng.random(num_edges) + 0.05 if weighted else None
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes, weights=weights)


def _times(graph, kind, seed=1):
    rng = np.random.default_rng(seed)
    if kind == "node":
        return {"node_time": rng.integers(0, 10, graph.num_nodes)}
    return {"edge_time": rng.integers(0, 10, graph.num_edges)}


def _host(out):
    return gg.SampleOutput(
        to_host(out.n_id),
        [gg.Adj(to_host(a.edge_index), to_host(a.e_id), a.size) for a in out.adjs],
        None if out.batch is None else to_host(out.batch),
    )


def _same(ours, reference):
    ours = _host(ours)
    assert_same_sample(ours, reference)
    np.testing.assert_array_equal(ours.batch, reference.batch)


SEEDS = np.array([3, 7, 3, 0, 11])
SEED_TIME = np.array([4, 9, 2, 6, 0])


# ------------------------------------------------------------------------- exact: the reference
@pytest.mark.parametrize("expand", ["all", "new"])
@pytest.mark.parametrize("replace", [False, True])
def test_disjoint_trees_equal_the_reference(device, expand, replace):
    graph = _graph()
    sampler = gg.NeighborSampler(graph, [3, 2], disjoint=True, device=device, expand=expand, replace=replace, seed=5)
    reference = reference_tree_sample(graph, SEEDS, [3, 2], replace=replace, seed=5, key=2, expand=expand)
    _same(sampler.sample(SEEDS, key=2), reference)


@pytest.mark.parametrize("kind", ["node", "edge"])
@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("expand", ["all", "new"])
def test_temporal_samples_equal_the_reference(device, kind, strategy, expand):
    graph = _graph()
    times = _times(graph, kind)
    sampler = gg.NeighborSampler(graph, [3, -1], device=device, temporal_strategy=strategy, expand=expand, **times)
    reference = reference_tree_sample(
        graph, SEEDS, [3, -1], seed_time=SEED_TIME, strategy=strategy, key=7, expand=expand, **times
    )
    _same(sampler.sample(SEEDS, key=7, seed_time=SEED_TIME), reference)


@pytest.mark.parametrize("replace", [False, True])
def test_weighted_temporal_draws_equal_the_reference(device, replace):
    graph = _graph(weighted=True)
    times = _times(graph, "edge")
    sampler = gg.NeighborSampler(graph, [3, 2], weighted=True, replace=replace, device=device, **times)
    reference = reference_tree_sample(
        graph, SEEDS, [3, 2], seed_time=SEED_TIME, weighted=True, replace=replace, key=1, **times
    )
    _same(sampler.sample(SEEDS, key=1, seed_time=SEED_TIME), reference)


def test_node_times_default_to_the_seeds_own():
    graph = _graph()
    times = _times(graph, "node")
    sampler = gg.NeighborSampler(graph, [4, 4], **times)
    own = times["node_time"][SEEDS]
    assert_same_sample(sampler.sample(SEEDS, key=3), sampler.sample(SEEDS, key=3, seed_time=own))


# ------------------------------------------------------------------------- invariants
def _check_eligible(graph, out, times, seed_time, kind):
    """Every sampled edge is at or before its tree's time; returns the edges checked."""
    n_id, batch = to_host(out.n_id), to_host(out.batch)
    checked = 0
    for adj in out.adjs:
        src, dst = to_host(adj.edge_index)
        assert (batch[src] == batch[dst]).all()  # an edge never leaves its tree
        limit = np.asarray(seed_time)[batch[dst]]
        when = times["node_time"][n_id[src]] if kind == "node" else times["edge_time"][to_host(adj.e_id)]
        assert (when <= limit).all()
        checked += len(src)
    return checked


@pytest.mark.parametrize("kind", ["node", "edge"])
@pytest.mark.parametrize("strategy", ["uniform", "last"])
def test_every_sampled_edge_is_eligible_for_its_seeds_time(device, kind, strategy):
    graph = _graph(60, 400, seed=3)
    times = _times(graph, kind, seed=4)
    sampler = gg.NeighborSampler(graph, [4, 3], device=device, temporal_strategy=strategy, **times)
    seed_time = np.arange(len(SEEDS)) * 2
    out = sampler.sample(SEEDS, key=0, seed_time=seed_time)
    assert _check_eligible(graph, out, times, seed_time, kind) > 0


def test_last_takes_exactly_the_k_latest_eligible_edges():
    graph = _graph(40, 600, seed=6)
    edge_time = np.random.default_rng(7).integers(0, 50, graph.num_edges)
    sampler = gg.NeighborSampler(graph, [5], edge_time=edge_time, temporal_strategy="last")
    seeds = np.arange(graph.num_nodes)
    seed_time = np.random.default_rng(8).integers(0, 50, len(seeds))
    out = sampler.sample(seeds, key=0, seed_time=seed_time)
    (adj,) = out.adjs
    indptr, ids = graph.indptr, graph.edge_ids
    for target in range(len(seeds)):
        got = np.sort(edge_time[adj.e_id[adj.edge_index[1] == target]])
        row = edge_time[ids[indptr[target] : indptr[target + 1]]]
        eligible = np.sort(row[row <= seed_time[target]])
        np.testing.assert_array_equal(got, eligible[len(eligible) - min(5, len(eligible)) :])


def test_uniform_draws_are_chi_square_uniform_among_eligible_edges():
    degree, fanout, limit = 20, 3, 11  # edges with times 0..19: the 12 at or before 11 are eligible
    edge_index = np.stack([np.arange(1, degree + 1), np.zeros(degree, np.int64)])
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=degree + 1)
    sampler = gg.NeighborSampler(graph, [fanout], edge_time=np.arange(degree)[::-1].copy())  # unsorted rows
    counts = np.zeros(degree, np.int64)
    batches = 3000
    for key in range(batches):
        counts[sampler.sample([0], key=key, seed_time=[limit]).adjs[0].e_id] += 1
    edge_time = np.arange(degree)[::-1]
    assert counts[edge_time > limit].sum() == 0
    observed = counts[edge_time <= limit]
    assert stats.chisquare(observed).pvalue > 1e-3
    assert observed.sum() == batches * fanout


def test_union_of_disjoint_trees_draws_the_shared_sample(device):
    graph = _graph(50, 300, seed=9)
    shared = gg.NeighborSampler(graph, [3, 2, 2], device=device, seed=4).sample(SEEDS, key=5)
    trees = gg.NeighborSampler(graph, [3, 2, 2], device=device, seed=4, disjoint=True).sample(SEEDS, key=5)
    shared_n, trees_n = to_host(shared.n_id), to_host(trees.n_id)
    for a, b in zip(shared.adjs, trees.adjs):
        ea, eb = to_host(a.edge_index), to_host(b.edge_index)
        drawn_shared = set(zip(shared_n[ea[1]].tolist(), shared_n[ea[0]].tolist(), to_host(a.e_id).tolist()))
        drawn_trees = set(zip(trees_n[eb[1]].tolist(), trees_n[eb[0]].tolist(), to_host(b.e_id).tolist()))
        assert drawn_trees == drawn_shared
    assert set(trees_n.tolist()) == set(shared_n.tolist())


def test_batch_gives_every_row_its_seed():
    graph = _graph(50, 300, seed=10)
    out = gg.NeighborSampler(graph, [3, 3], disjoint=True).sample(SEEDS, key=0)
    np.testing.assert_array_equal(out.n_id[: len(SEEDS)], SEEDS)
    np.testing.assert_array_equal(out.batch[: len(SEEDS)], np.arange(len(SEEDS)))
    pairs = set(zip(out.batch.tolist(), out.n_id.tolist()))
    assert len(pairs) == len(out.n_id)  # a node appears once per tree
    for adj in out.adjs:
        assert (out.batch[adj.edge_index[0]] == out.batch[adj.edge_index[1]]).all()
    # a duplicated seed is a tree of its own, drawing what its twin draws
    twins = [np.sort(out.n_id[out.batch == b]) for b in (0, 2)]
    np.testing.assert_array_equal(*twins)


def test_unsorted_rows_sample_like_their_time_sorted_copy():
    graph = _graph(30, 200, seed=11)
    edge_time = np.random.default_rng(12).integers(0, 8, graph.num_edges)
    times = edge_time[graph.edge_ids]
    order = np.concatenate(
        [
            graph.indptr[v] + np.argsort(times[graph.indptr[v] : graph.indptr[v + 1]], kind="stable")
            for v in range(graph.num_nodes)
        ]
    )
    presorted = gg.CSRGraph(graph.indptr, graph.indices[order], edge_ids=graph.edge_ids[order])
    a = gg.NeighborSampler(graph, [3, 2], edge_time=edge_time)
    b = gg.NeighborSampler(presorted, [3, 2], edge_time=edge_time)
    assert b.graph is not None and a.graph is not graph  # sorted once, edge ids kept
    np.testing.assert_array_equal(a.graph.indices, presorted.indices)
    out_a = a.sample(SEEDS, key=4, seed_time=SEED_TIME)
    out_b = b.sample(SEEDS, key=4, seed_time=SEED_TIME)
    assert_same_sample(out_a, out_b)


@pytest.mark.parametrize("kind", ["node", "edge"])
def test_the_time_sorted_copy_keeps_the_graphs_node_order(kind):
    # the copy dropped node_order (from reorder=): sampler.graph.original_ids became the identity
    edge_index = np.random.default_rng(13).integers(0, 30, size=(2, 200))
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=30, reorder="degree", keep_edge_ids=True)
    assert not np.array_equal(graph.node_order, np.arange(30))
    sampler = gg.NeighborSampler(graph, [3, 2], **_times(graph, kind, seed=14))
    assert sampler.graph is not graph  # rows were re-sorted by time
    np.testing.assert_array_equal(sampler.graph.node_order, graph.node_order)
    out = sampler.sample(graph.new_ids([4, 9]), key=1, seed_time=np.array([9, 9]))
    n_id = to_host(out.n_id)
    np.testing.assert_array_equal(sampler.graph.original_ids(n_id), graph.original_ids(n_id))
    for adj in out.adjs:  # every sampled edge, mapped back, is an edge of the user's numbering
        src, dst = n_id[to_host(adj.edge_index[0])], n_id[to_host(adj.edge_index[1])]
        e_id = to_host(adj.e_id)
        np.testing.assert_array_equal(edge_index[0, e_id], sampler.graph.original_ids(src))
        np.testing.assert_array_equal(edge_index[1, e_id], sampler.graph.original_ids(dst))


def test_float_seed_times_floor_for_integer_times():
    graph = _graph()
    sampler = gg.NeighborSampler(graph, [3, 3], **_times(graph, "edge"))
    floored = sampler.sample(SEEDS, key=0, seed_time=SEED_TIME + 0.75)
    assert_same_sample(floored, sampler.sample(SEEDS, key=0, seed_time=SEED_TIME))
    everything = sampler.sample(SEEDS, key=0, seed_time=np.full(len(SEEDS), np.inf))
    untimed = gg.NeighborSampler(sampler.graph, [3, 3], disjoint=True)  # the same rows (sorted), no times
    assert_same_sample(everything, untimed.sample(SEEDS, key=0))


def test_a_temporal_sampler_and_its_batch_survive_pickling_and_conversion():
    graph = _graph()
    sampler = gg.NeighborSampler(graph, [3, 2], **_times(graph, "node"))
    out = sampler.sample(SEEDS, key=1, seed_time=SEED_TIME)
    again = pickle.loads(pickle.dumps(sampler)).sample(SEEDS, key=1, seed_time=SEED_TIME)
    assert_same_sample(out, again)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(out)).batch, out.batch)
    n_id, adjs = gg.backends.to("numpy", out)  # still unpacks in two
    np.testing.assert_array_equal(gg.backends.to("numpy", out).batch, out.batch)
    assert len(adjs) == 2 and len(n_id) == len(out.batch)


# ------------------------------------------------------------------------- typed graphs
def _typed(seed=0):
    rng = np.random.default_rng(seed)
    num = {"paper": 20, "author": 15}
    relations = {
        ("author", "writes", "paper"): rng.integers(0, [[15], [20]], size=(2, 60)),
        ("paper", "cites", "paper"): rng.integers(0, 20, size=(2, 50)),
        ("paper", "rev_writes", "author"): rng.integers(0, [[20], [15]], size=(2, 60)),
    }
    return gg.HeteroGraph(relations, num)


def _typed_check(graph, out, seed_time, node_time=None, edge_time=None):
    batch, n_id = out.batch, out.n_id
    total = 0
    for layer in out.adjs:
        for et, adj in layer.items():
            src, dst = to_host(adj.edge_index)
            b_src, b_dst = to_host(batch[et[0]])[src], to_host(batch[et[2]])[dst]
            assert (b_src == b_dst).all()
            if node_time is not None and et[0] in node_time:
                assert (node_time[et[0]][to_host(n_id[et[0]])[src]] <= seed_time[b_dst]).all()
            if edge_time is not None and et in edge_time:
                assert (edge_time[et][to_host(adj.e_id)] <= seed_time[b_dst]).all()
            total += len(src)
    return total


@pytest.mark.parametrize("kind", ["node", "edge"])
@pytest.mark.parametrize("strategy", ["uniform", "last"])
def test_typed_temporal_edges_are_eligible_and_cpu_equals_gpu(device, kind, strategy):
    graph = _typed()
    rng = np.random.default_rng(3)
    node_time = edge_time = None
    if kind == "node":  # authors have no time: never filtered, as in PyG
        node_time = {"paper": rng.integers(0, 10, 20)}
    else:
        edge_time = {et: rng.integers(0, 10, n) for et, n in graph.num_edges.items() if et[1] != "cites"}
    options = dict(node_time=node_time, edge_time=edge_time, temporal_strategy=strategy)
    seeds = {"paper": [1, 4, 1], "author": [2]}
    seed_time = {"paper": [3, 8, 5], "author": [6]}
    ours = gg.HeteroNeighborSampler(graph, [3, 2], device=device, **options).sample(seeds, key=2, seed_time=seed_time)
    cpu = gg.HeteroNeighborSampler(graph, [3, 2], **options).sample(seeds, key=2, seed_time=seed_time)
    trees = np.concatenate([np.asarray(seed_time[t]) for t in graph.node_types])  # trees in node-type order
    assert _typed_check(graph, cpu, trees, node_time, edge_time) > 0
    for t in graph.node_types:
        np.testing.assert_array_equal(to_host(ours.n_id[t]), cpu.n_id[t])
        np.testing.assert_array_equal(to_host(ours.batch[t]), cpu.batch[t])
    for mine, theirs in zip(ours.adjs, cpu.adjs):
        for et in graph.edge_types:
            np.testing.assert_array_equal(to_host(mine[et].edge_index), theirs[et].edge_index)
            np.testing.assert_array_equal(to_host(mine[et].e_id), theirs[et].e_id)


def test_typed_disjoint_trees_draw_the_shared_sample(device):
    graph = _typed(1)
    seeds = {"paper": [0, 5, 0], "author": [3]}
    shared = gg.HeteroNeighborSampler(graph, [2, 2], seed=3, device=device).sample(seeds, key=1)
    trees = gg.HeteroNeighborSampler(graph, [2, 2], seed=3, device=device, disjoint=True).sample(seeds, key=1)

    def drawn(out, adj, edge_type):
        ei = to_host(adj.edge_index)
        targets = to_host(out.n_id[edge_type[2]])[ei[1]]
        sources = to_host(out.n_id[edge_type[0]])[ei[0]]
        return set(zip(targets.tolist(), sources.tolist(), to_host(adj.e_id).tolist()))

    for a, b in zip(shared.adjs, trees.adjs):
        for et in graph.edge_types:
            assert drawn(trees, b[et], et) == drawn(shared, a[et], et)
    assert to_host(trees.batch["paper"])[:3].tolist() == [0, 1, 2]
    assert to_host(trees.batch["author"])[:1].tolist() == [3]


# ------------------------------------------------------------------------- link prediction
def test_temporal_link_batches_keep_every_tree_at_its_pairs_time(device):
    graph = _graph(40, 300, seed=13)
    node_time = np.random.default_rng(14).integers(0, 10, graph.num_nodes)
    sampler = gg.NeighborSampler(graph, [3, 2], node_time=node_time, device=device)
    pairs = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    pair_time = np.array([2, 9, 5, 0])
    out = sampler.sample_links(pairs, negatives="triplet", num_negatives=2, pair_time=pair_time, key=3)
    cpu = gg.NeighborSampler(graph, [3, 2], node_time=node_time).sample_links(
        pairs, negatives="triplet", num_negatives=2, pair_time=pair_time, key=3
    )
    np.testing.assert_array_equal(to_host(out.n_id), cpu.n_id)
    np.testing.assert_array_equal(to_host(out.batch), cpu.batch)
    np.testing.assert_array_equal(cpu.pair_index, [[0, 1, 2, 3], [4, 5, 6, 7]])
    assert cpu.negative_targets.tolist() == [[8, 12], [9, 13], [10, 14], [11, 15]]  # draw by draw, as PyG
    tree_time = np.concatenate([pair_time, pair_time, pair_time, pair_time])
    negatives = cpu.n_id[cpu.negative_targets]
    assert (node_time[negatives] <= pair_time[:, None]).all()  # negatives exist at their pair's time
    assert _check_eligible(graph, cpu, {"node_time": node_time}, tree_time, "node") > 0


def test_binary_negatives_exist_at_their_pairs_time():
    graph = _graph(60, 300, seed=15)
    node_time = np.arange(60) % 10
    sampler = gg.NeighborSampler(graph, [2], node_time=node_time)
    pairs = np.array([[0, 11, 22], [33, 44, 55]])
    pair_time = np.array([1, 4, 7])
    out = sampler.sample_links(pairs, negatives="binary", num_negatives=20, pair_time=pair_time, key=0)
    negative = out.n_id[out.pair_index[:, 3:]]
    limit = pair_time[np.arange(60) % 3]  # negative j belongs to pair j % B (PyG's times)
    assert (node_time[negative] <= limit).all()
    assert len(set(negative.reshape(-1).tolist())) > 10


def test_edge_time_link_batches_exclude_the_predicted_edges():
    graph = _graph(30, 200, seed=16)
    edge_time = np.random.default_rng(17).integers(0, 5, graph.num_edges)
    sampler = gg.NeighborSampler(graph, [-1, -1], edge_time=edge_time)
    pairs = np.stack([graph.indices[:6], np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))[:6]])
    out = sampler.sample_links(pairs, pair_time=np.full(6, 10), exclude="self", key=0)
    drawn = {(int(out.n_id[s]), int(out.n_id[d])) for a in out.adjs for s, d in a.edge_index.T}
    assert not drawn & {tuple(p) for p in pairs.T.tolist()}


def test_node_time_link_trees_default_to_their_own_seeds_time():
    # the docstring said a pair's source's time; every endpoint's tree takes its own node time
    # (docs/DESIGN.md, PyG), and negatives are uniform without pair_time
    graph = gg.CSRGraph.from_edge_index([[2, 3], [1, 0]], num_nodes=4)  # 2 -> 1, 3 -> 0
    sampler = gg.NeighborSampler(graph, [-1], node_time=np.array([0, 5, 3, 1]))
    out = sampler.sample_links([[0], [1]], exclude=None, key=0)
    # 3 (time 1 > 0) is not in 0's tree; 2 (time 3 <= 5) is in 1's, by edge 0
    assert out.n_id.tolist() == [0, 1, 2] and out.batch.tolist() == [0, 1, 1]
    assert out.adjs[0].edge_index.tolist() == [[2], [1]] and out.adjs[0].e_id.tolist() == [0]
    early = sampler.sample_links([[0], [1]], exclude=None, pair_time=[0], key=0)
    assert early.n_id.tolist() == [0, 1] and early.adjs[0].e_id.size == 0


def test_a_temporal_sampler_stays_disjoint_when_told_otherwise():
    # disjoint=False set between calls made shared sampling, which reads no times: seed 0 at
    # time 1 drew node 2 (time 5), and seed_time was ignored; as at construction, times imply it
    graph = gg.CSRGraph.from_edge_index([[1, 2, 3], [0, 0, 0]], num_nodes=4)
    sampler = gg.NeighborSampler(graph, [-1], node_time=np.array([0, 0, 5, 0]))
    sampler.disjoint = False
    out = sampler.sample([0, 0], seed_time=[1, 9], key=0)
    assert sampler.disjoint and out.batch is not None
    assert out.n_id[out.batch == 0].tolist() == [0, 1, 3] and 2 in out.n_id[out.batch == 1].tolist()
    typed = gg.HeteroGraph({("u", "f", "i"): [[0, 1], [0, 0]]}, {"u": 2, "i": 1})
    typed_sampler = gg.HeteroNeighborSampler(typed, [-1], node_time={"u": np.array([0, 5])})
    typed_sampler.disjoint = False
    assert typed_sampler.sample({"i": [0]}, seed_time={"i": [1]}).n_id["u"].tolist() == [0]


# ------------------------------------------------------------------------- bad inputs, named
def test_bad_temporal_inputs_are_named():
    graph = _graph()
    node_time = np.arange(graph.num_nodes)
    edge_sampler = gg.NeighborSampler(graph, [2], edge_time=np.arange(graph.num_edges))
    with pytest.raises(ValueError, match="seed_time is required"):
        edge_sampler.sample([0, 1])
    with pytest.raises(ValueError, match=r"seed_time must have one time per seed \(2,\)"):
        edge_sampler.sample([0, 1], seed_time=[1, 2, 3])
    with pytest.raises(ValueError, match=r"seed_time must not hold NaN: seed_time\[1\]"):
        edge_sampler.sample([0, 1], seed_time=[1.0, np.nan])
    with pytest.raises(TypeError, match="seed_time must hold numbers"):
        edge_sampler.sample([0, 1], seed_time=np.array(["a", "b"]))
    with pytest.raises(ValueError, match="pair_time is required"):
        edge_sampler.sample_links([[0], [1]])
    with pytest.raises(ValueError, match="seed_time needs a temporal sampler"):
        gg.NeighborSampler(graph, [2]).sample([0], seed_time=[1])
    with pytest.raises(ValueError, match="pair_time needs a temporal sampler"):
        gg.NeighborSampler(graph, [2], disjoint=True).sample_links([[0], [1]], pair_time=[1])
    with pytest.raises(ValueError, match=r"node_time must have one entry per node \(24\), got 3"):
        gg.NeighborSampler(graph, [2], node_time=[1, 2, 3])
    with pytest.raises(ValueError, match=r"node_time must not hold NaN: node_time\[2\]"):
        gg.NeighborSampler(graph, [2], node_time=np.where(node_time == 2, np.nan, node_time))
    with pytest.raises(ValueError, match="edge_time must have one entry per edge id"):
        gg.NeighborSampler(graph, [2], edge_time=np.arange(5))
    with pytest.raises(ValueError, match="edge_time must have one entry per edge \\(120\\)"):
        gg.NeighborSampler(gg.CSRGraph(graph.indptr, graph.indices), [2], edge_time=np.arange(5))
    with pytest.raises(TypeError, match="node_time must hold numbers"):
        gg.NeighborSampler(graph, [2], node_time=node_time > 3)
    with pytest.raises(ValueError, match="temporal_strategy must be one of"):
        gg.NeighborSampler(graph, [2], node_time=node_time, temporal_strategy="latest")
    with pytest.raises(ValueError, match="needs node_time or edge_time"):
        gg.NeighborSampler(graph, [2], temporal_strategy="last")
    with pytest.raises(ValueError, match="not both"):
        gg.NeighborSampler(graph, [2], node_time=node_time, edge_time=np.arange(graph.num_edges))
    weighted = _graph(weighted=True)
    with pytest.raises(ValueError, match="does not draw by weight"):
        gg.NeighborSampler(weighted, [2], weighted=True, node_time=node_time, temporal_strategy="last")
    with pytest.raises(TypeError, match="disjoint must be a bool"):
        gg.NeighborSampler(graph, [2], disjoint="yes")


def test_uint64_times_past_int64_are_refused_by_name_not_wrapped():
    graph = _graph()
    sampler = gg.NeighborSampler(graph, [2], edge_time=np.arange(graph.num_edges))
    too_late = np.array([3, 2**64 - 1], np.uint64)  # int64 would read it as -1: no edge eligible
    with pytest.raises(ValueError, match=r"seed_time\[1\] = 18446744073709551615 does not fit in int64"):
        sampler.sample([0, 1], seed_time=too_late)
    with pytest.raises(ValueError, match=r"pair_time\[1\] = 18446744073709551615 does not fit in int64"):
        sampler.sample_links([[0, 1], [2, 3]], pair_time=too_late)
    with pytest.raises(ValueError, match=r"node_time\[1\] = 18446744073709551615 does not fit in int64"):
        gg.NeighborSampler(graph, [2], node_time=np.r_[too_late, np.zeros(22, np.uint64)])
    fits = np.array([2**63 - 1, 5], np.uint64)  # the largest int64 still counts as a time
    expected = sampler.sample([0, 1], key=0, seed_time=np.array([2**63 - 1, 5]))
    assert_same_sample(sampler.sample([0, 1], key=0, seed_time=fits), expected)
    typed = gg.HeteroNeighborSampler(_typed(), [2], node_time={"paper": np.arange(20)})
    with pytest.raises(ValueError, match=r"seed_time\['paper'\]\[0\] = 18446744073709551615 does not fit"):
        typed.sample({"paper": [1]}, seed_time={"paper": np.array([2**64 - 1], np.uint64)})


_BEYOND_INT64 = {
    "2**63": [2**63, 0],  # NumPy reads this list as float64: node times became floats, rounded
    "2**64": [2**64, 0],  # read as objects: a TypeError about the dtype
    "-2**63-1": [-(2**63) - 1, 0],
    "uint64 2**63": np.array([2**63, 0], np.uint64),
}
_CITES = ("paper", "cites", "paper")


def _padded(times, length):
    """``times`` followed by zeros up to ``length`` entries, in the same container."""
    if isinstance(times, np.ndarray):
        return np.r_[times, np.zeros(length - len(times), times.dtype)]
    return list(times) + [0] * (length - len(times))


def _time_entry_points(tmp_path):
    """``{name the error gives: call(times)}`` for every argument that takes times."""
    from gglspeedup.service import partition

    graph, typed = _graph(), _typed()
    ints = gg.NeighborSampler(graph, [2], node_time=np.arange(graph.num_nodes))
    floats = gg.NeighborSampler(graph, [2], node_time=np.arange(graph.num_nodes) + 0.5)
    typed_sampler = gg.HeteroNeighborSampler(typed, [2], node_time={"paper": np.arange(20)})
    return {
        "node_time": lambda t: gg.NeighborSampler(graph, [2], node_time=_padded(t, graph.num_nodes)),
        "edge_time": lambda t: gg.NeighborSampler(graph, [2], edge_time=_padded(t, graph.num_edges)),
        "seed_time": lambda t: ints.sample([0, 1], seed_time=t),
        "seed_time of float times": lambda t: floats.sample([0, 1], seed_time=t),
        "pair_time": lambda t: ints.sample_links([[0, 1], [2, 3]], pair_time=t),
        "node_time['paper']": lambda t: gg.HeteroNeighborSampler(typed, [2], node_time={"paper": _padded(t, 20)}),
        f"edge_time[{_CITES!r}]": lambda t: gg.HeteroNeighborSampler(typed, [2], edge_time={_CITES: _padded(t, 50)}),
        "seed_time['paper']": lambda t: typed_sampler.sample({"paper": [1, 2]}, seed_time={"paper": t}),
        "typed pair_time": lambda t: typed_sampler.sample_links([[1, 2], [3, 4]], edge_type=_CITES, pair_time=t),
        "partition's node_time": lambda t: partition(
            graph, tmp_path / "p", 2, method="range", node_time=_padded(t, graph.num_nodes)
        ),
    }


@pytest.mark.parametrize("times", list(_BEYOND_INT64), ids=list(_BEYOND_INT64))
def test_integer_times_beyond_int64_are_refused_by_name_at_every_entry_point(times, tmp_path):
    # [2**63, 0] passed as floats (node times rounded to float64, seed times capped at int64's max),
    # [2**64, 0] raised a TypeError about an object dtype, a uint64 array a ValueError: one rule now
    import re

    value = int(_BEYOND_INT64[times][0])
    for name, call in _time_entry_points(tmp_path).items():
        argument = name.replace("typed ", "").replace("partition's ", "").replace(" of float times", "")
        expected = rf"^{re.escape(argument)}\[0\] = {value} does not fit in int64"
        with pytest.raises(ValueError, match=expected):
            call(_BEYOND_INT64[times])


def test_float_times_keep_their_reading_beyond_int64():
    # floats are float times, unbounded; a float seed time past int64 for integer times saturates
    graph = _graph()
    ints = gg.NeighborSampler(graph, [2], node_time=np.arange(graph.num_nodes))
    late = ints.sample([0, 1], key=0, seed_time=[2.0**63, 1e30])
    assert_same_sample(late, ints.sample([0, 1], key=0, seed_time=[2**63 - 1, 2**63 - 1]))
    floats = gg.NeighborSampler(graph, [2], node_time=_padded([2.0**64, 0.5], graph.num_nodes))
    assert floats.timeline.dtype == np.float64
    # the seeds at their own node times (2.0**64, 0.5): node 1 and the padding are eligible at 0.5 and 1.0 alike
    assert_same_sample(floats.sample([0, 1], key=0, seed_time=[2.0**64, 1.0]), floats.sample([0, 1], key=0))


def test_bad_typed_temporal_inputs_are_named():
    graph = _typed()
    with pytest.raises(TypeError, match="node_time of a typed graph must be a dict"):
        gg.HeteroNeighborSampler(graph, [2], node_time=np.arange(20))
    with pytest.raises(ValueError, match="node_time names node type 'venue'"):
        gg.HeteroNeighborSampler(graph, [2], node_time={"venue": [1]})
    with pytest.raises(ValueError, match=r"node_time\['paper'\] must have one entry per node \(20\)"):
        gg.HeteroNeighborSampler(graph, [2], node_time={"paper": [1]})
    sampler = gg.HeteroNeighborSampler(graph, [2], node_time={"paper": np.arange(20)})
    with pytest.raises(ValueError, match=r"seed_time\['author'\] is required"):
        sampler.sample({"author": [1]})
    with pytest.raises(TypeError, match="seed_time must be a dict"):
        sampler.sample({"paper": [1]}, seed_time=[3])
    with pytest.raises(ValueError, match="seed_time needs a temporal sampler"):
        gg.HeteroNeighborSampler(graph, [2]).sample({"paper": [1]}, seed_time={"paper": [1]})

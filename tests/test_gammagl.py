"""gglspeedup.gammagl without GammaGL: the drop-in NeighborSampler's contract and the batch plans.

GammaGL's own tests run on these classes in tools/gammagl_conformance.py (GammaGL's environment);
what is checked here needs neither GammaGL nor TensorLayerX.
"""

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.gammagl import EdgeIndex, NeighborSampler
from gglspeedup.gammagl._flat import check_node_attrs, flat_sample, induced_edges, link_queries
from gglspeedup.testing import check_sample

HAS_GAMMAGL = importlib.util.find_spec("gammagl") is not None
HAS_TLX = importlib.util.find_spec("tensorlayerx") is not None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def edge_index():
    rng = np.random.default_rng(5)
    return rng.integers(0, 60, size=(2, 400))


def loader(edge_index, **options):
    options.setdefault("backend", "numpy")
    return NeighborSampler(edge_index, **options)


def test_hop_records_are_dataclasses_in_a_list_even_for_one_hop(edge_index):
    dst_node, n_id, adjs = next(iter(loader(edge_index, sample_lists=[-1], batch_size=8)))
    assert type(adjs) is list and len(adjs) == 1
    hop = adjs[0]
    assert isinstance(hop, EdgeIndex) and dataclasses.is_dataclass(hop)
    assert not isinstance(hop, tuple)  # GammaGL's inference: isinstance(adjs, (List, Tuple))
    assert [f.name for f in dataclasses.fields(hop)] == ["edge_index", "e_id", "size"]
    assert hop.size == (len(n_id), len(dst_node)) and all(type(v) is int for v in hop.size)


def test_batches_are_the_sampler_output_with_gammagl_dtypes(edge_index):
    batches = loader(edge_index, sample_lists=[4, 3], batch_size=16)
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=60)
    reference = gg.NeighborSampler(graph, [4, 3], seed=0)
    for index, (dst_node, n_id, adjs) in enumerate(batches):
        seeds = np.arange(60)[index * 16 : (index + 1) * 16]
        expected = reference.sample(seeds, key=index)  # epoch 0: key = batch index
        np.testing.assert_array_equal(dst_node, seeds)
        np.testing.assert_array_equal(n_id, expected.n_id)
        assert dst_node.dtype == n_id.dtype == np.int64
        assert [a.size for a in adjs] == [a.size for a in expected.adjs]  # outermost hop first
        for got, want in zip(adjs, expected.adjs):
            assert got.edge_index.dtype == got.e_id.dtype == np.int64
            np.testing.assert_array_equal(got.edge_index, want.edge_index)
            # e_id: columns of the caller's edge_index, source -> target
            np.testing.assert_array_equal(edge_index[:, got.e_id], n_id[got.edge_index])
        check_sample(graph, seeds, [4, 3], gg.SampleOutput(n_id, [gg.Adj(a.edge_index, a.e_id, a.size) for a in adjs]))


def test_torch_backend_gives_int64_tensors(edge_index):
    torch = pytest.importorskip("torch")
    dst_node, n_id, adjs = next(iter(loader(edge_index, sample_lists=[3, 2], batch_size=5, backend="torch")))
    for tensor in (dst_node, n_id, *[a.edge_index for a in adjs], *[a.e_id for a in adjs]):
        assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.int64


def test_minus_one_takes_every_in_neighbour(edge_index):
    _dst_node, n_id, (hop,) = next(iter(loader(edge_index, sample_lists=[-1], batch_size=60)))
    got = sorted(map(tuple, np.stack([n_id[hop.edge_index[0]], n_id[hop.edge_index[1]]]).T.tolist()))
    assert got == sorted(map(tuple, edge_index.T.tolist()))  # every edge into the 60 seeds, parallel ones too


@pytest.mark.parametrize("drop_last", [False, True])
def test_len_counts_batches(edge_index, drop_last):
    batches = loader(edge_index, sample_lists=[2], batch_size=7, drop_last=drop_last, node_idx=np.arange(30))
    assert len(batches) == (4 if drop_last else 5)
    assert len(list(batches)) == len(batches)
    assert len(batches.dataset) == 30 and repr(batches) == "NeighborSampler(sizes=[2])"


def test_node_idx_as_none_bool_mask_or_ids(edge_index):
    mask = np.zeros(60, dtype=bool)
    mask[[3, 17, 59]] = True
    seeds = lambda node_idx: np.concatenate([d for d, _, _ in loader(edge_index, sample_lists=[2], node_idx=node_idx)])  # noqa: E731
    np.testing.assert_array_equal(seeds(None), np.arange(60))
    np.testing.assert_array_equal(seeds(mask), [3, 17, 59])
    np.testing.assert_array_equal(seeds(np.array([[9], [2], [9]], dtype=np.int32)), [9, 2, 9])  # flattened
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(seeds(torch.from_numpy(mask)), [3, 17, 59])
    np.testing.assert_array_equal(seeds(torch.tensor([4, 0])), [4, 0])


def test_num_nodes_follows_gammagl(edge_index):
    assert loader(edge_index, sample_lists=[1]).num_nodes == 60
    assert loader(edge_index, sample_lists=[1], node_idx=np.zeros(75, dtype=bool)).num_nodes == 75
    assert loader(edge_index, sample_lists=[1], node_idx=np.array([80])).num_nodes == 81
    assert loader(edge_index, sample_lists=[1], num_nodes=100).num_nodes == 100
    assert loader(edge_index, sample_lists=[1], num_nodes=np.int64(70)).num_nodes == 70


@pytest.mark.parametrize(
    "num_nodes, error",
    [(-1, ValueError), (np.int64(-3), ValueError), (60.0, TypeError), (True, TypeError), ("60", TypeError)],
)
def test_num_nodes_a_negative_count_is_a_value_error_and_a_non_int_a_type_error(edge_index, num_nodes, error):
    # a negative count raised TypeError, as if it were of the wrong type
    with pytest.raises(error, match=rf"num_nodes must be a non-negative int or None, got {re.escape(repr(num_nodes))}"):
        loader(edge_index, sample_lists=[1], num_nodes=num_nodes)


def test_bad_inputs_raise_before_sampling(edge_index):
    with pytest.raises(IndexError, match=r"node_idx\[1\] = 60 is out of range"):
        loader(edge_index, sample_lists=[1], node_idx=np.array([0, 60]), num_nodes=60)
    with pytest.raises(TypeError, match="node_idx"):
        loader(edge_index, sample_lists=[1], node_idx=np.array([0.5]))
    with pytest.raises(ValueError, match="bool mask must have shape"):
        loader(edge_index, sample_lists=[1], node_idx=np.ones(10, dtype=bool), num_nodes=60)
    with pytest.raises((TypeError, ValueError), match="sample_lists"):
        loader(edge_index, sample_lists=[2, 0.5])
    with pytest.raises(NotImplementedError, match="num_workers=2"):
        loader(edge_index, sample_lists=[1], num_workers=2)
    with pytest.raises(NotImplementedError, match="batch_sampler"):
        loader(edge_index, sample_lists=[1], batch_sampler=[[0, 1]])
    with pytest.raises(TypeError, match="unexpected keyword"):
        loader(edge_index, sample_lists=[1], batchsize=4)

    class SparseGraph:  # GammaGL's sparse adjacency, by name
        pass

    with pytest.raises(NotImplementedError, match="SparseGraph"):
        loader(SparseGraph(), sample_lists=[1])
    loader(edge_index, sample_lists=[1], num_workers=0, time_out=0, prefetch_factor=2)  # GammaGL's no-ops


def test_return_e_id_false_transform_and_minus_one_device(edge_index):
    seen = []

    def transform(dst_node, n_id, adjs):
        seen.append(len(dst_node))
        return n_id, adjs

    batches = loader(edge_index, sample_lists=[2, 2], batch_size=20, return_e_id=False, transform=transform, device=-1)
    for n_id, adjs in batches:
        assert all(adj.e_id is None for adj in adjs) and n_id.dtype == np.int64
    assert seen == [20, 20, 20]


def test_shuffle_is_a_keyed_permutation_per_epoch(edge_index):
    batches = loader(edge_index, sample_lists=[2], batch_size=25, shuffle=True, seed=3, node_idx=np.arange(50))
    first, second = ([d for d, _, _ in batches] for _ in range(2))
    assert sorted(np.concatenate(first).tolist()) == list(range(50))
    assert not np.array_equal(np.concatenate(first), np.concatenate(second))
    again = loader(edge_index, sample_lists=[2], batch_size=25, shuffle=True, seed=3, node_idx=np.arange(50))
    np.testing.assert_array_equal(np.concatenate([d for d, _, _ in again]), np.concatenate(first))


def test_x_rows_come_with_the_batch_and_prefetch_changes_nothing(edge_index):
    x = np.random.default_rng(1).random((60, 4), dtype=np.float32)
    plain = list(loader(edge_index, sample_lists=[3, 2], batch_size=11, x=x))
    ahead = list(loader(edge_index, sample_lists=[3, 2], batch_size=11, x=x, prefetch=2))
    assert len(plain) == len(ahead) == 6
    for (dst_a, n_id_a, adjs_a, rows_a), (dst_b, n_id_b, adjs_b, rows_b) in zip(plain, ahead):
        np.testing.assert_array_equal(rows_a, x[n_id_a])
        np.testing.assert_array_equal(n_id_a, n_id_b)
        np.testing.assert_array_equal(rows_a, rows_b)
        np.testing.assert_array_equal(dst_a, dst_b)
        for a, b in zip(adjs_a, adjs_b):
            np.testing.assert_array_equal(a.edge_index, b.edge_index)
    with pytest.raises(ValueError, match="x must have a row for each of the 60 nodes"):
        loader(edge_index, sample_lists=[1], x=x[:10])


def test_sample_replays_a_batch_by_key(edge_index):
    batches = loader(edge_index, sample_lists=[3], batch_size=10)
    _, n_id, adjs = batches.sample(np.arange(10, 20), key=1)
    _, n_id_2, adjs_2 = list(batches)[1]
    np.testing.assert_array_equal(n_id, n_id_2)
    np.testing.assert_array_equal(adjs[0].edge_index, adjs_2[0].edge_index)


@pytest.mark.parametrize("no_hops", [[], (), np.array([], np.int64)], ids=["list", "tuple", "array"])
def test_sample_lists_empty_yields_the_seeds_alone_as_gammagl(edge_index, no_hops):
    # GammaGL's NeighborSampler takes sample_lists=[] (no hops) and yields (batch, batch, []);
    # ours refused it ("must name at least one hop")
    x = np.arange(120, dtype=np.float32).reshape(60, 2)
    seeds = np.array([7, 3, 7, 59, 0])
    batches = loader(edge_index, sample_lists=no_hops, node_idx=seeds, batch_size=2, x=x)
    assert batches.sizes == [] and repr(batches) == "NeighborSampler(sizes=[])"
    got = list(batches)
    assert [d.tolist() for d, _, _, _ in got] == [[7, 3], [7, 59], [0]]
    for dst_node, n_id, adjs, rows in got:
        assert adjs == [] and n_id.dtype == np.int64
        np.testing.assert_array_equal(n_id, dst_node)  # duplicates kept, as GammaGL's n_id = batch
        np.testing.assert_array_equal(rows, x[n_id])
    dst_node, n_id, adjs = loader(edge_index, sample_lists=[]).sample([4, 4, 1])
    assert dst_node.tolist() == n_id.tolist() == [4, 4, 1] and adjs == []
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=60)
    ready = loader(gg.NeighborSampler(graph, [5], seed=2), sample_lists=[], node_idx=seeds, batch_size=5)
    ((dst_node, n_id, adjs),) = list(ready)
    assert n_id.tolist() == seeds.tolist() and adjs == []


def test_graph_loaders_num_neighbors_empty_is_one_hop_drawing_nothing():
    # NodeNeighborLoader / LinkNeighborLoader (GammaGL needed to run them: the conformance script)
    # hand these to our samplers: GammaGL reads [] (and {edge type: []}) as no hops
    from gglspeedup.gammagl._common import no_hops, sampler_fanouts

    cites, writes = ("paper", "cites", "paper"), ("author", "writes", "paper")
    assert sampler_fanouts([]) == sampler_fanouts(()) == sampler_fanouts(np.array([], np.int64)) == [0]
    assert sampler_fanouts({cites: [], writes: []}) == {cites: [0], writes: [0]}
    assert sampler_fanouts({}) == [0]
    for hops in ([2, 1], {cites: [2], writes: []}, {cites: [2]}, [[]], {cites: {}}):
        assert not no_hops(hops) and sampler_fanouts(hops) is hops  # the sampler's checks decide
    graph = gg.CSRGraph.from_edge_index(np.array([[1, 2, 3], [0, 0, 1]]), num_nodes=4)
    out = gg.NeighborSampler(graph, sampler_fanouts([])).sample([1, 0], key=0)
    node, row, col, edge = flat_sample(out)
    assert node.tolist() == [1, 0] and row.size == col.size == edge.size == 0


def test_a_ready_sampler_keeps_its_seed_and_device_and_refuses_others(edge_index):
    # seed=7 / device="cuda:0" beside a ready sampler were ignored: its own seed drew the batches
    # while 7 keyed the shuffle, and the batches stayed on its device
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=60)
    ready = gg.NeighborSampler(graph, [5], seed=3)
    with pytest.raises(ValueError, match=r"seed=7 is not the given sampler's own seed \(3\); .* pass 3"):
        loader(ready, sample_lists=[2], seed=7)
    with pytest.raises(ValueError, match=r"device='cuda:0' is not the given sampler's device \(cpu\)"):
        loader(ready, sample_lists=[2], device="cuda:0")
    with pytest.raises(TypeError, match="seed must be an int"):
        loader(ready, sample_lists=[2], seed="3")
    options = {"sample_lists": [2], "batch_size": 16, "shuffle": True}
    implied = loader(ready, **options)  # seed and device left out: the sampler's
    assert implied.seed == loader(ready, seed=3, device=-1, **options).seed == 3
    built = loader(edge_index, num_nodes=60, seed=3, **options)  # the same loader over the graph
    for (dst_a, n_id_a, adjs_a), (dst_b, n_id_b, adjs_b) in zip(implied, built, strict=True):
        np.testing.assert_array_equal(dst_a, dst_b)
        np.testing.assert_array_equal(n_id_a, n_id_b)
        np.testing.assert_array_equal(adjs_a[0].edge_index, adjs_b[0].edge_index)
    assert loader(edge_index, sample_lists=[2]).seed == 0


# ---------------------------------------------------------------------------------- batch plans
def test_flat_sample_is_the_hops_seed_hop_first():
    graph = gg.CSRGraph.from_edge_index(np.random.default_rng(2).integers(0, 30, (2, 150)), num_nodes=30)
    out = gg.NeighborSampler(graph, [3, 2]).sample(np.array([1, 2, 3]), key=0)
    node, row, col, edge = flat_sample(out)
    hops = out.adjs[::-1]
    np.testing.assert_array_equal(row, np.concatenate([h.edge_index[0] for h in hops]))
    np.testing.assert_array_equal(col, np.concatenate([h.edge_index[1] for h in hops]))
    np.testing.assert_array_equal(edge, np.concatenate([h.e_id for h in hops]))
    np.testing.assert_array_equal(node, out.n_id)


def test_induced_edges_are_every_edge_between_the_nodes():
    edge_index = np.random.default_rng(4).integers(0, 25, (2, 120))
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=25)
    node = np.array([7, 3, 20, 11, 0])
    row, col, edge = induced_edges(graph, node)
    position = {v: i for i, v in enumerate(node.tolist())}
    expected = sorted(
        (position[s], position[t], e)
        for e, (s, t) in enumerate(edge_index.T.tolist())
        if s in position and t in position
    )
    assert sorted(zip(row.tolist(), col.tolist(), edge.tolist())) == expected
    assert row.dtype == col.dtype == edge.dtype == np.int64


def test_link_queries_follow_gammagls_labels_and_draw_real_negatives():
    pairs = np.array([[4, 9, 4], [1, 1, 7]])
    labels = np.array([0.0, 0.0, 0.0], dtype=np.float32)
    seeds, local, out = link_queries(pairs, labels, 0.0, 50, np.random.default_rng(0))
    np.testing.assert_array_equal(seeds, [1, 4, 7, 9])  # ascending distinct endpoints
    np.testing.assert_array_equal(seeds[local], pairs)
    np.testing.assert_array_equal(out, labels)  # no negatives: labels as given
    seeds, local, out = link_queries(pairs, labels, 2.0, 50, np.random.default_rng(0))
    assert local.shape == (2, 9) and out.dtype == np.float32
    np.testing.assert_array_equal(out, [1, 1, 1, 0, 0, 0, 0, 0, 0])
    negatives = seeds[local][:, 3:]
    assert negatives.min() >= 0 and negatives.max() < 50
    assert len({tuple(p) for p in negatives.T.tolist()}) > 1  # independent draws (GammaGL repeats one pair)


def test_negative_draws_are_uniform():
    from scipy.stats import chisquare

    _, local, _ = link_queries(np.zeros((2, 4000), dtype=np.int64), np.zeros(4000), 1.0, 20, np.random.default_rng(7))
    seeds, _, _ = link_queries(np.zeros((2, 4000), dtype=np.int64), np.zeros(4000), 1.0, 20, np.random.default_rng(7))
    counts = np.bincount(seeds[local][:, 4000:].reshape(-1), minlength=20)
    assert chisquare(counts).pvalue > 1e-3


# ---------------------------------------------------------------------------------- optional imports
def test_import_gglspeedup_never_imports_gammagl_or_tensorlayerx():
    code = (
        "import sys, numpy as np, gglspeedup, gglspeedup.gammagl\n"
        "from gglspeedup.gammagl import NeighborSampler\n"
        "next(iter(NeighborSampler(np.array([[0, 1], [1, 0]]), [1], backend='numpy')))\n"
        "print(sorted(m for m in ('gammagl', 'tensorlayerx', 'torch', 'numba') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split("\n")[-2] == "['numba']"


def test_link_loader_neg_sampling_ratio_is_a_finite_number_at_least_zero():
    # the check LinkNeighborLoader makes (this test needs no GammaGL): inf passed ">= 0" and raised
    # OverflowError in int(B * ratio) on the first batch; "x" and None raised float()'s bare errors
    from gglspeedup.gammagl.loaders import _check_ratio

    assert _check_ratio(0) == 0.0 and _check_ratio(np.float32(0.5)) == 0.5 and _check_ratio(3) == 3.0
    for value in (float("inf"), float("nan"), -0.5, -1):
        with pytest.raises(ValueError, match=r"neg_sampling_ratio must be a finite number >= 0, got"):
            _check_ratio(value)
    for value in ("0.5", None, True, [1.0]):
        with pytest.raises(TypeError, match=r"neg_sampling_ratio must be a number, got"):
            _check_ratio(value)


def test_link_loader_edge_label_index_of_floats_is_a_type_error_naming_it():
    # the check LinkNeighborLoader makes (this test needs no GammaGL): float pairs raised
    # ValueError where every other id argument of the library raises TypeError
    from gglspeedup.gammagl.loaders import _label_pairs

    pairs = _label_pairs(np.array([[0, 3], [1, 2]], np.int32))
    assert pairs.dtype == np.int64 and pairs.tolist() == [[0, 3], [1, 2]]
    assert _label_pairs([[0, 1], [2, 3]]).tolist() == [[0, 1], [2, 3]]
    for floats in (np.array([[0.0, 1.0], [1.0, 2.0]]), np.array([[0, 1], [1, 2]], np.float32), [[0.5], [1.0]]):
        with pytest.raises(TypeError, match=r"edge_label_index must hold integer node ids, got dtype float"):
            _label_pairs(floats)
    with pytest.raises(TypeError, match=r"edge_label_index must hold integers, got dtype bool"):
        _label_pairs(np.ones((2, 2), bool))
    with pytest.raises(ValueError, match=r"edge_label_index must be an integer \(2, E\) tensor, got shape \(3, 2\)"):
        _label_pairs(np.zeros((3, 2), np.int64))
    with pytest.raises(ValueError, match=r"edge_label_index must be 2-D, got shape \(4,\)"):
        _label_pairs(np.arange(4))
    assert _label_pairs([[0, 4], [4, 0]], 5).tolist() == [[0, 4], [4, 0]]
    with pytest.raises(IndexError, match=r"edge_label_index\[1\]\[0\] = 5 is out of range \[0, num_nodes = 5\)"):
        _label_pairs([[0, 1], [5, 2]], 5)  # the sampler named "seeds", on the first batch
    with pytest.raises(IndexError, match=r"edge_label_index\[0\]\[1\] = -1 is out of range"):
        _label_pairs([[0, -1], [1, 2]], 5)


@pytest.mark.skipif(HAS_GAMMAGL, reason="GammaGL is installed here: tools/gammagl_conformance.py covers the loaders")
def test_graph_loaders_name_the_missing_install():
    from gglspeedup.gammagl import LinkNeighborLoader, NodeNeighborLoader

    for kind in (NodeNeighborLoader, LinkNeighborLoader):
        with pytest.raises(ImportError, match=r"scripts/peer_env_gammagl\.sh"):
            kind(object(), [2, 2])


@pytest.mark.skipif(HAS_TLX, reason="TensorLayerX is installed here: the conformance script probes it")
def test_tensorlayerx_problem_says_it_is_missing():
    from gglspeedup.gammagl import tensorlayerx_problem

    assert tensorlayerx_problem().startswith("TensorLayerX does not import")


# ---------------------------------------------------------------------------------- bench gammagl
@pytest.mark.skipif(HAS_GAMMAGL, reason="GammaGL is installed: the bench runs")
def test_bench_gammagl_names_the_environment_it_needs():
    from gglspeedup.bench import main

    with pytest.raises(SystemExit, match=r"needs GammaGL and TensorLayerX .*peer_env_gammagl\.sh"):
        main(["gammagl", "--graph", "powerlaw:1000:4"])


def test_bench_gammagl_rounds_are_interleaved_and_paired():
    from gglspeedup.bench.gammagl import _interleaved

    calls = []
    contenders = {name: (lambda name=name: calls.append(name) or 100) for name in ("gammagl", "ours", "model only")}
    out = _interleaved(contenders, repeats=3)
    assert calls == ["gammagl", "ours", "model only"] * 4  # one untimed warm-up round, then 3 timed
    assert out["gammagl"]["speedup_vs_gammagl"] == 1.0 and out["model only"]["x_model_only"] == 1.0
    assert all(len(row["round_s"]) == 3 and row["edges_per_s"] > 0 for row in out.values())


@pytest.mark.parametrize("threads", [1, None])
def test_prefetch_thread_runs_numba_with_prefetch_threads(edge_index, threads):
    import numba

    seen = []

    def transform(*batch):  # runs where the batch is made: on the producer thread when prefetching
        seen.append(numba.get_num_threads())
        return batch

    batches = loader(
        edge_index, sample_lists=[2], batch_size=30, prefetch=2, prefetch_threads=threads, transform=transform
    )
    assert len(list(batches)) == 2
    assert seen == [threads or numba.config.NUMBA_NUM_THREADS] * 2
    with pytest.raises(ValueError, match="prefetch_threads must be >= 1"):
        loader(edge_index, sample_lists=[2], prefetch_threads=0)


def test_bench_gammagl_loop_shares_pair_each_epoch_with_its_rounds_model_epoch():
    from gglspeedup.bench.gammagl import _loop_shares

    loops = {  # (outside_s, step_s) per batch; the first epoch of each is the untimed warm-up
        "model only": [[(9.0, 9.0)], [(0.0, 2.0), (0.0, 2.0)], [(0.0, 4.0), (0.0, 4.0)]],
        "prefetch": [[(9.0, 1.0)], [(0.5, 2.0), (0.0, 2.0)], [(0.1, 5.0), (0.1, 5.0)]],
    }
    out = _loop_shares(loops, repeats=2)["prefetch"]
    assert out["outside_over_step_rounds"] == [0.125, 0.02]  # 0.5 / 4 and 0.2 / 10, each in its own epoch
    assert out["outside_over_step"] == pytest.approx(0.0725)
    assert out["first_batch_outside_s"] == pytest.approx(0.3)
    assert out["step_over_model_step"] == pytest.approx((1.0 + 1.25) / 2)  # 4 / 4 and 10 / 8, per round
    assert out["step_over_model_step_batch_median"] == pytest.approx(1.125)  # of 1, 1, 1.25, 1.25
    assert out["loop_over_model_step"] == pytest.approx((1.125 * 1.0 + 1.02 * 1.25) / 2)
    assert _loop_shares(loops, repeats=2)["model only"]["outside_over_step"] == 0.0
    cpu = _loop_shares(loops, repeats=2, cpu_s={"model only": [9.0, 8.0, 10.0], "prefetch": [9.0, 8.4, 10.3]})
    assert cpu["prefetch"]["cpu_over_model_cpu_rounds"] == [1.05, 1.03]  # paired with the model's epoch, per round
    assert cpu["prefetch"]["cpu_over_model_cpu"] == pytest.approx(1.04)


def test_prefetch_nice_lowers_only_the_producer_threads_priority(edge_index):
    seen = []

    def transform(*batch):  # runs on the producer thread when prefetching
        seen.append(os.getpriority(os.PRIO_PROCESS, 0))
        return batch

    base = os.getpriority(os.PRIO_PROCESS, 0)
    batches = loader(edge_index, sample_lists=[2], batch_size=30, prefetch=2, prefetch_nice=5, transform=transform)
    assert len(list(batches)) == 2
    assert seen == [min(base + 5, 19)] * 2 and os.getpriority(os.PRIO_PROCESS, 0) == base
    with pytest.raises(ValueError, match="prefetch_nice"):
        loader(edge_index, sample_lists=[2], prefetch_nice=20)


def test_graph_loader_input_nodes_are_checked_as_node_idx_is():
    # the check NodeNeighborLoader makes (this test needs no GammaGL): GammaGL's get_input_nodes_index
    # read a NumPy bool mask as the ids 0 and 1, truncated float ids and took a too-short mask
    from gglspeedup.gammagl.loaders import _input_nodes

    mask = np.array([False, True, False, True, False, False])
    kind, ids = _input_nodes(mask, 6)  # a NumPy mask, like a tensor one: the nodes it marks
    assert kind is None and ids.tolist() == [1, 3]
    kind, ids = _input_nodes(None, 4)
    assert kind is None and ids.dtype == np.int64 and ids.tolist() == [0, 1, 2, 3]
    assert _input_nodes([5, 2], 6)[1].tolist() == [5, 2] and _input_nodes(np.array([[5], [2]]), 6)[1].tolist() == [5, 2]
    with pytest.raises(TypeError, match=r"input_nodes_type must be a bool mask or integer node ids, got dtype float"):
        _input_nodes(np.array([1.7]), 6)
    with pytest.raises(ValueError, match=r"input_nodes_type as a bool mask must have shape \(6,\)"):
        _input_nodes(mask[:2], 6)
    with pytest.raises(IndexError, match=r"input_nodes_type\[1\] = 6 is out of range \[0, num_nodes = 6\)"):
        _input_nodes(np.array([0, 6]), 6)
    counts = {"paper": 10, "author": 6}
    kind, ids = _input_nodes("author", 0, counts)
    assert kind == "author" and ids.tolist() == list(range(6))
    kind, ids = _input_nodes(("author", mask), 0, counts)
    assert kind == "author" and ids.tolist() == [1, 3]
    assert _input_nodes(["paper", None], 0, counts)[1].tolist() == list(range(10))
    with pytest.raises(ValueError, match=r"names node type 'venue'; the graph's are \['author', 'paper'\]"):
        _input_nodes(("venue", None), 0, counts)
    with pytest.raises(TypeError, match=r"must be a node type or \(node type, mask or ids\), got NoneType"):
        _input_nodes(None, 0, counts)
    with pytest.raises(TypeError, match=r"input_nodes_type\['author'\] must be a bool mask or integer node ids"):
        _input_nodes(("author", np.array([1.5])), 0, counts)
    with pytest.raises(IndexError, match=r"input_nodes_type\['author'\]\[0\] = 6 is out of range"):
        _input_nodes(("author", [6]), 0, counts)


def test_graph_loader_edge_index_of_floats_is_a_type_error_not_truncated():
    # a Graph's float edge_index was cast with astype: [[0.7], [1.9]] became the edge 0 -> 1
    from types import SimpleNamespace

    from gglspeedup.gammagl.loaders import _edge_index

    assert _edge_index(SimpleNamespace(edge_index=np.array([[0, 3], [1, 2]], np.int32))).dtype == np.int64
    assert _edge_index(SimpleNamespace(edge_index=None)).shape == (2, 0)
    with pytest.raises(TypeError, match=r"edge_index must hold integers \(int32 or int64\), got dtype float"):
        _edge_index(SimpleNamespace(edge_index=np.array([[0.7], [1.9]])))
    with pytest.raises(TypeError, match=r"graph\['a'\]\.edge_index must hold integers"):
        _edge_index(SimpleNamespace(edge_index=np.ones((2, 2), bool)), "graph['a'].edge_index")


def test_ragged_edge_index_lists_are_refused_by_name():
    # a ragged list gave NumPy's unnamed "inhomogeneous shape" ValueError
    from types import SimpleNamespace

    from gglspeedup.gammagl.loaders import _edge_index, _label_pairs

    ragged = [[0, 1, 2], [1, 2]]
    named = r"^{} must be a rectangular array, got a ragged list of rows of lengths {} \(no array shape\)$"
    with pytest.raises(ValueError, match=named.format("edge_index", "3, 2")):
        NeighborSampler(ragged, sample_lists=[2], num_nodes=3, backend="numpy")
    with pytest.raises(ValueError, match=named.format("edge_index", "3, 2")):
        _edge_index(SimpleNamespace(edge_index=ragged))
    with pytest.raises(ValueError, match=named.format("edge_label_index", "3, 2")):
        _label_pairs(ragged, 3)
    with pytest.raises(ValueError, match=named.format("node_idx", "1, 2")):
        NeighborSampler([[0, 1], [1, 2]], sample_lists=[2], node_idx=[[0], [1, 2]], backend="numpy")


@pytest.mark.parametrize("directed", ["no", None, 0])
def test_graph_loaders_directed_takes_bools_only(directed):
    # bool("no") was True (directed sampling) and None was False; checked before GammaGL is imported
    from gglspeedup.gammagl import LinkNeighborLoader, NodeNeighborLoader

    for kind in (NodeNeighborLoader, LinkNeighborLoader):
        with pytest.raises(TypeError, match=r"directed must be a bool \(True or False\), got"):
            kind(object(), [2], directed=directed)


def test_node_attrs_with_fewer_rows_than_nodes_are_refused_when_the_loader_is_made():
    # a 3-row x over a 12-node graph was taken, and the first batch reaching node 6 failed inside
    # NumPy ("index 6 is out of bounds for axis 0 with size 3")
    with pytest.raises(ValueError, match=r"node_attrs\['x'\] has 3 rows but the graph has 12 nodes"):
        check_node_attrs("NodeNeighborLoader", {"x": np.zeros((3, 1))}, None, 12)
    typed = {"x": {"paper": np.zeros((4, 2)), "author": np.zeros((1, 2))}}
    with pytest.raises(ValueError, match=r"node_attrs\['x'\]\['author'\] has 1 rows but the graph has 2 nodes of type"):
        check_node_attrs("NodeNeighborLoader", typed, ["paper", "author"], {"paper": 4, "author": 2})
    assert check_node_attrs("NodeNeighborLoader", {"x": np.zeros((12, 1)), "y": [0] * 3}, None, 12).keys() == {"x", "y"}

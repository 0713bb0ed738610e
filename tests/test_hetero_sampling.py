"""HeteroNeighborSampler: exact agreement with the NumPy reference, per-relation invariants, the
determinism contract and errors before any kernel; CPU and (simulated) GPU bit for bit."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gglspeedup as gg
from gglspeedup.testing.reference import reference_hetero_sample

from conftest import academic_graph, gpu_hardware, to_host

TYPES = ("paper", "author", "field")


def typed_graph(rng, sizes=(9, 7, 4), edges=(30, 24, 12, 10, 6), weights=False, multi=True):
    """A small typed graph: citations (with a self-typed relation), authorship both ways, topics."""
    return academic_graph(rng, dict(zip(TYPES, sizes)), edges, weights=weights, multi=multi)


def assert_same(out, ref):
    assert set(out.n_id) == set(ref.n_id)
    for t in ref.n_id:
        np.testing.assert_array_equal(to_host(out.n_id[t]), to_host(ref.n_id[t]), err_msg=f"n_id[{t}]")
    assert len(out.adjs) == len(ref.adjs)
    for hop, (layer, ref_layer) in enumerate(zip(out.adjs, ref.adjs)):
        assert list(layer) == list(ref_layer)
        for et, adj in layer.items():
            expected = ref_layer[et]
            np.testing.assert_array_equal(
                to_host(adj.edge_index), to_host(expected.edge_index), err_msg=f"hop {hop} {et}"
            )
            np.testing.assert_array_equal(to_host(adj.e_id), to_host(expected.e_id), err_msg=f"hop {hop} {et} e_id")
            assert adj.size == expected.size, (hop, et)
    assert out.num_sampled_nodes == ref.num_sampled_nodes
    assert out.num_sampled_edges == ref.num_sampled_edges


OPTIONS = [
    pytest.param({}, id="plain"),
    pytest.param({"replace": True}, id="replace"),
    pytest.param({"weighted": True}, id="weighted"),
    pytest.param({"weighted": True, "replace": True}, id="weighted-replace"),
]


@pytest.mark.parametrize("options", OPTIONS)
def test_matches_the_reference_exactly(device, options):
    rng = np.random.default_rng(3)
    graph = typed_graph(rng, weights=options.get("weighted", False))
    fanouts = {et: [2, -1] if et[1] == "cites" else [3, 1] for et in graph.edge_types}
    sampler = gg.HeteroNeighborSampler(graph, fanouts, seed=11, device=device, **options)
    seeds = {"paper": [0, 3, 3, 8], "author": [6]}
    for key in (0, 5):
        out = sampler.sample(seeds, key=key)
        assert_same(out, reference_hetero_sample(graph, seeds, fanouts, seed=11, key=key, **options))


def test_cpu_equals_gpu_bit_for_bit_for_every_option():
    pytest.importorskip("numba.cuda")
    from conftest import HAS_CUDA

    if not HAS_CUDA:
        pytest.skip("no CUDA GPU and the CUDA simulator is off")
    rng = np.random.default_rng(8)
    for options in ({}, {"replace": True}, {"weighted": True}, {"weighted": True, "replace": True}):
        graph = typed_graph(rng, weights=options.get("weighted", False))
        seeds = {"author": [1, 2], "field": [0]}
        outs = [
            gg.HeteroNeighborSampler(graph, [2, 2], device=d, **options).sample(seeds, key=4) for d in ("cpu", "cuda")
        ]
        ref = reference_hetero_sample(graph, seeds, [2, 2], key=4, **options)
        for out in outs:
            assert_same(out, ref)


test_cpu_equals_gpu_bit_for_bit_for_every_option = pytest.mark.cuda(test_cpu_equals_gpu_bit_for_bit_for_every_option)


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.tuples(st.integers(1, 12), st.integers(1, 9), st.integers(1, 5)),
    edges=st.tuples(*(st.integers(0, 40) for _ in range(5))),
    fanouts=st.lists(st.sampled_from([-1, 0, 1, 2, 5]), min_size=1, max_size=3),
    replace=st.booleans(),
    graph_seed=st.integers(0, 2**16),
)
@pytest.mark.slow
def test_invariants_per_relation_on_random_typed_graphs(sizes, edges, fanouts, replace, graph_seed):
    rng = np.random.default_rng(graph_seed)
    graph = typed_graph(rng, sizes, edges)
    seeds = {"paper": rng.integers(0, sizes[0], 3), "field": rng.integers(0, sizes[2], 2)}
    out = gg.HeteroNeighborSampler(graph, fanouts, replace=replace, seed=graph_seed).sample(seeds, key=1)
    for t, ids in out.n_id.items():
        assert len(ids) == sum(out.num_sampled_nodes[t])
        assert ids.dtype == np.int64 and (len(ids) == 0 or (0 <= ids.min() and ids.max() < graph.num_nodes[t]))
        given_seeds = np.asarray(seeds.get(t, []), np.int64)
        np.testing.assert_array_equal(ids[: len(given_seeds)], given_seeds)
        assert len(np.unique(ids[len(given_seeds) :])) == len(ids) - len(given_seeds)  # new nodes are new
    sizes_so_far = {t: out.num_sampled_nodes[t][0] for t in graph.node_types}
    for hop, layer in enumerate(reversed(out.adjs)):
        before = dict(sizes_so_far)
        for t in graph.node_types:
            sizes_so_far[t] += out.num_sampled_nodes[t][hop + 1]
        for et, adj in layer.items():
            src_type, _, dst_type = et
            k = fanouts[hop]
            assert adj.size == (sizes_so_far[src_type], before[dst_type])
            assert adj.edge_index.shape == (2, out.num_sampled_edges[et][hop])
            rel = graph[et]
            src = out.n_id[src_type][adj.edge_index[0]]  # types never mixed: rows index their own type
            dst = out.n_id[dst_type][adj.edge_index[1]]
            assert adj.edge_index[0].max(initial=-1) < adj.size[0] and adj.edge_index[1].max(initial=-1) < adj.size[1]
            ids = np.arange(rel.num_edges) if rel.edge_ids is None else rel.edge_ids
            positions = np.argsort(ids)[adj.e_id]  # e_id -> CSR position (edge ids are a permutation)
            assert np.array_equal(rel.indices[positions], src)  # e_id is the relation's edge...
            assert ((rel.indptr[dst] <= positions) & (positions < rel.indptr[dst + 1])).all()  # ...in dst's row
            degree = np.diff(rel.indptr)
            counts = np.bincount(adj.edge_index[1], minlength=adj.size[1])
            expected = degree[out.n_id[dst_type][: adj.size[1]]]
            if k == 0:
                expected = expected * 0
            elif k > 0:
                expected = np.where(expected > 0, k, 0) if replace else np.minimum(expected, k)
            np.testing.assert_array_equal(counts, expected)
            if not replace:  # no repeated edge position within a target's draws
                pairs = np.stack((adj.edge_index[1], positions))
                assert np.unique(pairs, axis=1).shape[1] == pairs.shape[1]


def test_draws_depend_only_on_seed_key_hop_edge_type_and_node(rng):
    graph = typed_graph(rng)
    sampler = gg.HeteroNeighborSampler(graph, [3], seed=5)
    alone = sampler.sample({"paper": [4]}, key=2)
    crowd = sampler.sample({"author": [0, 1], "paper": [7, 4, 2]}, key=2)
    for et in graph.edge_types:
        if et[2] != "paper":
            continue
        mine = alone.adjs[0][et]
        theirs = crowd.adjs[0][et]
        e_alone = mine.e_id[mine.edge_index[1] == 0]
        e_crowd = theirs.e_id[theirs.edge_index[1] == 1]  # paper 4 is the second paper seed there
        np.testing.assert_array_equal(e_alone, e_crowd)
    # another relation added to the graph leaves the others' draws alone
    relations = {et: graph[et] for et in graph.edge_types}
    relations[("author", "cites", "author")] = np.array([[0, 1], [1, 0]])
    bigger = gg.HeteroGraph(relations, graph.num_nodes)
    again = gg.HeteroNeighborSampler(bigger, [3], seed=5).sample({"paper": [4]}, key=2)
    for et in graph.edge_types:
        np.testing.assert_array_equal(again.adjs[0][et].e_id, alone.adjs[0][et].e_id)


def test_counter_keys_and_explicit_keys_agree(rng):
    graph = typed_graph(rng)
    sampler = gg.HeteroNeighborSampler(graph, [2, 2], seed=1)
    first, second = sampler.sample({"paper": [1, 2]}), sampler.sample({"paper": [1, 2]})
    assert_same(first, reference_hetero_sample(graph, {"paper": [1, 2]}, [2, 2], seed=1, key=0))
    assert_same(second, reference_hetero_sample(graph, {"paper": [1, 2]}, [2, 2], seed=1, key=1))
    assert_same(sampler.sample(("paper", [1, 2]), key=0), first)


def test_with_fanouts_shares_the_graph_and_continues_the_counter(rng):
    graph = typed_graph(rng)
    sampler = gg.HeteroNeighborSampler(graph, [2])
    sampler.sample({"paper": [0]})
    other = sampler.with_fanouts({("paper", "cites", "paper"): [1, 1]})
    assert other.graph is sampler.graph and other.num_hops == 2
    out = other.sample({"paper": [0]})
    assert out.num_sampled_edges[("author", "writes", "paper")] == [0, 0]
    assert_same(out, reference_hetero_sample(graph, {"paper": [0]}, {("paper", "cites", "paper"): [1, 1]}, key=1))


def test_pickled_sampler_draws_the_same(rng):
    import pickle

    graph = typed_graph(rng)
    sampler = gg.HeteroNeighborSampler(graph, [2, 1], seed=3)
    clone = pickle.loads(pickle.dumps(sampler))
    assert_same(clone.sample({"author": [2]}, key=9), sampler.sample({"author": [2]}, key=9))


def test_empty_relations_and_types_without_seeds(rng):
    graph = gg.HeteroGraph(
        {("a", "r", "b"): np.empty((2, 0), np.int64), ("b", "s", "a"): [[0, 1], [0, 0]]}, {"a": 2, "b": 3, "c": 4}
    )
    out = gg.HeteroNeighborSampler(graph, [2, 2]).sample({"a": [0], "b": []}, key=0)
    assert out.num_sampled_nodes == {"a": [1, 0, 0], "b": [0, 2, 0], "c": [0, 0, 0]}
    assert out.adjs[-1][("a", "r", "b")].edge_index.shape == (2, 0)
    assert out.n_id["c"].shape == (0,)
    assert_same(out, reference_hetero_sample(graph, {"a": [0]}, [2, 2], key=0))


@pytest.mark.parametrize(
    ("seeds", "fanouts", "error", "match"),
    [
        ({"venue": [0]}, [2], ValueError, "node type 'venue'"),
        ({}, [2], ValueError, "at least one node type"),
        ([0, 1], [2], TypeError, "dict node type"),
        ({"paper": [0.5]}, [2], TypeError, r"seeds\['paper'\] must hold integers"),
        ({"paper": [[0]]}, [2], ValueError, r"seeds\['paper'\] must be 1-D"),
        ({"field": [4]}, [2], IndexError, r"seeds\['field'\] must lie in \[0, num_nodes = 4\)"),
        ({"paper": [0]}, {("paper", "cited", "paper"): [2]}, ValueError, "not an edge type"),
        (
            {"paper": [0]},
            {("paper", "cites", "paper"): [2], ("author", "writes", "paper"): [1, 1]},
            ValueError,
            "same length",
        ),
        ({"paper": [0]}, {"cites": [2]}, TypeError, r"\(src_type, name, dst_type\)"),
        ({"paper": [0]}, [2, 0.5], TypeError, r"fanouts\[1\]"),
    ],
)
def test_bad_input_raises_before_any_kernel(rng, seeds, fanouts, error, match):
    graph = typed_graph(rng)
    with pytest.raises(error, match=match):
        gg.HeteroNeighborSampler(graph, fanouts).sample(seeds, key=0)


def test_weighted_needs_weights(rng):
    with pytest.raises(ValueError, match="weights"):
        gg.HeteroNeighborSampler(typed_graph(rng), [2], weighted=True)
    with pytest.raises(TypeError, match="HeteroGraph"):
        gg.HeteroNeighborSampler(gg.CSRGraph([0, 0], []), [2])
    relation = gg.CSRGraph.from_edge_index([[0, 1], [0, 0]], num_nodes=1, num_src_nodes=2, weights=[1e308, 1e308])
    with pytest.raises(ValueError, match=r"weights of row 0 sum past the float64 range"):  # drew wrongly
        gg.HeteroNeighborSampler(gg.HeteroGraph({("a", "r", "b"): relation}, {"a": 2, "b": 1}), [1], weighted=True)


class _DeviceArray(np.ndarray):
    """A NumPy array that refuses what would synchronise a GPU unseen: boolean masks (their result
    size lives on the device), ``nonzero``, and reading a value into Python; :func:`_launch.to_host`
    (``np.asarray``) is the one way out, counted as a sync."""

    def _refuse(self, what):
        raise AssertionError(f"a hidden device synchronisation: {what}")

    def __getitem__(self, key):
        if isinstance(key, np.ndarray) and key.dtype == bool:
            self._refuse("boolean-mask indexing")
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        if isinstance(key, np.ndarray) and key.dtype == bool:
            self._refuse("boolean-mask assignment")
        super().__setitem__(key, value)

    def nonzero(self):
        self._refuse("nonzero")

    def __bool__(self):
        self._refuse("truth value")

    def __int__(self):
        self._refuse("int()")

    def __index__(self):
        self._refuse("index()")

    def item(self, *args):
        self._refuse("item()")

    def tolist(self):
        self._refuse("tolist()")


class _StrictNumPy:
    """``numpy`` whose functions return :class:`_DeviceArray` (the simulator's stand-in for CuPy)."""

    def __getattr__(self, name):
        value = getattr(np, name)
        if not callable(value) or isinstance(value, type):
            return value

        def call(*args, **kwargs):
            result = value(*args, **kwargs)
            return result.view(_DeviceArray) if isinstance(result, np.ndarray) else result

        return call


@pytest.mark.cuda
@pytest.mark.parametrize("expand", ["all", "new"])
def test_a_typed_gpu_call_equals_the_cpu_and_synchronises_once_a_hop(monkeypatch, expand):
    # The typed CUDA hop's relabel (hash table over typed ids, new nodes ranked per relation and
    # type, each type's new nodes appended to the device's known ids) against the CPU's serial one:
    # seeds of two types, repeated, and a type without seeds, under a NumPy as strict about host
    # reads as CuPy (every read is a counted sync).
    from gglspeedup import _launch
    from gglspeedup.device import Device

    if not gpu_hardware("cuda:0"):  # CuPy is strict by itself
        xp = _StrictNumPy()
        monkeypatch.setattr(Device, "xp", property(lambda self: xp))
    graph = typed_graph(np.random.default_rng(8))
    seeds = {"paper": np.array([4, 0, 4, 7]), "author": np.array([6, 1])}
    gpu = gg.HeteroNeighborSampler(graph, [3, 2], seed=4, device="cuda:0", expand=expand)
    gpu.sample(seeds, key=0)
    _launch.reset_counters()
    out = gpu.sample(seeds, key=1)
    # per hop: fill + insert, flag, sizes, compact; one sync for every relation's edges and new nodes
    assert _launch.counters() == {"launches": 8, "syncs": 2}
    assert_same(out, gg.HeteroNeighborSampler(graph, [3, 2], seed=4, expand=expand).sample(seeds, key=1))


@pytest.mark.cuda
def test_a_typed_gpu_hop_with_every_neighbour_counts_first_and_synchronises_twice():
    from gglspeedup import _launch

    graph = typed_graph(np.random.default_rng(5))
    fanouts = {et: [-1, 2] if i % 2 else [3, 2] for i, et in enumerate(graph.edge_types)}  # hop 0 mixed
    sampler = gg.HeteroNeighborSampler(graph, fanouts, seed=4, device="cuda:0")
    seeds = {graph.node_types[0]: np.array([0, 1, 2])}
    sampler.sample(seeds, key=0)
    _launch.reset_counters()
    out = sampler.sample(seeds, key=1)
    # hop 0: count, fill + insert, flag, sizes, compact, two syncs (edges, then sizes); hop 1: 4 and 1
    assert _launch.counters() == {"launches": 9, "syncs": 3}
    assert_same(out, gg.HeteroNeighborSampler(graph, fanouts, seed=4).sample(seeds, key=1))


@pytest.mark.cuda
@pytest.mark.parametrize("expand", ["all", "new"])
def test_typed_gpu_hops_without_draws_equal_the_cpu(expand):
    # A hop with no slots returns early and uploads the next hop's table alone; the others upload
    # their compact table and the next hop's draw table in one array (views of its two halves).
    graph = typed_graph(np.random.default_rng(5))
    seeds = {graph.node_types[0]: np.array([0, 1, 2])}
    mixed = {et: [0 if i % 2 else -1, 2] for i, et in enumerate(graph.edge_types)}
    for fanouts in ([0, 2], [0, 0], [2, 0], [0, -1], mixed):
        outs = [
            gg.HeteroNeighborSampler(graph, fanouts, seed=4, device=device, expand=expand).sample(seeds, key=1)
            for device in ("cpu", "cuda:0")
        ]
        assert_same(outs[1], outs[0])


@pytest.mark.cuda
@pytest.mark.parametrize("expand", ["all", "new"])
@pytest.mark.parametrize("timed", [False, True], ids=["disjoint", "temporal"])
def test_a_disjoint_typed_gpu_call_equals_the_cpu(expand, timed):
    # Disjoint calls run the typed CUDA hop over virtual ids (each type's trees kept apart by a
    # typed base of type * span); temporal ones also window each row by its tree's time.
    rng = np.random.default_rng(9)
    graph = typed_graph(rng)
    options = {"disjoint": True, "expand": expand}
    call = {}
    if timed:
        options["node_time"] = {t: rng.integers(0, 6, graph.num_nodes[t]) for t in ("paper", "author")}
        call["seed_time"] = {"paper": np.array([5, 4, 2]), "field": np.array([3])}
    seeds = {"paper": np.array([4, 0, 4]), "field": np.array([1])}
    outs = [
        gg.HeteroNeighborSampler(graph, [3, 2], seed=6, device=device, **options).sample(seeds, key=2, **call)
        for device in ("cpu", "cuda:0")
    ]
    assert_same(outs[1], outs[0])
    for t in outs[0].batch:
        np.testing.assert_array_equal(to_host(outs[1].batch[t]), to_host(outs[0].batch[t]), err_msg=t)


def test_the_typed_relabel_map_carries_an_epoch_across_batches():
    # One epoch for every type: the next batch's ids start past the longest type's n_id; the map
    # is refilled with -1 only when they could pass its dtype (see MapPool).
    rng = np.random.default_rng(12)
    graph = typed_graph(rng)
    sampler = gg.HeteroNeighborSampler(graph, [3, 2], seed=2)
    pool = sampler._driver.maps
    batches = [{"paper": rng.choice(9, 3, replace=False), "author": [1, 1, 5]} for _ in range(4)]
    previous = 0
    for key, seeds in enumerate(batches):
        out = sampler.sample(seeds, key=key)
        assert_same(out, reference_hetero_sample(graph, seeds, [3, 2], seed=2, key=key))
        ((local_map, epoch),) = pool.free
        assert epoch == previous + max(len(ids) for ids in out.n_id.values()) and local_map.max() < epoch
        previous = epoch
    limit = int(np.iinfo(local_map.dtype).max)
    for start, restarted in ((limit - pool.size - 6, False), (limit - pool.size - 5, True)):
        pool.free[0] = (local_map, start)  # 6 seeds: ids stay below start + 6 + size
        out = sampler.sample(batches[0], key=0)
        assert_same(out, reference_hetero_sample(graph, batches[0], [3, 2], seed=2, key=0))
        ((local_map, epoch),) = pool.free
        assert epoch == (0 if restarted else start) + max(len(ids) for ids in out.n_id.values())


@pytest.mark.parametrize("weighted", [False, True])
def test_the_degree_table_holds_every_rows_drawable_edges_node_major(weighted):
    from gglspeedup.sampling._kernels.records import DEGREE_CAP, degree_table

    graph = typed_graph(np.random.default_rng(13), weights=weighted)
    stacked = graph.stacked
    live = None
    if weighted:  # the weighted driver's table: edges of weight > 0 per row
        bounds = zip(stacked.indptr, stacked.indptr[1:])
        live = np.array([np.count_nonzero(stacked.weights[a:b] > 0) for a, b in bounds])
    types = {t: i for i, t in enumerate(graph.node_types)}
    dst_type = np.array([types[et[2]] for et in graph.edge_types])
    counts = np.array([graph.num_nodes[t] for t in graph.node_types])
    table = degree_table(stacked.indptr, live, weighted, dst_type, graph.row_base[:-1], counts)
    assert table.degrees.dtype == np.uint16 and len(table.degrees) == stacked.num_nodes
    seen = np.zeros(len(table.degrees), bool)
    for r, t in enumerate(dst_type):
        for v in range(counts[t]):
            row = graph.row_base[r] + v
            want = live[row] if weighted else stacked.indptr[row + 1] - stacked.indptr[row]
            position = table.base[r] + v * table.stride[r]
            assert table.degrees[position] == min(want, DEGREE_CAP) and not seen[position]
            seen[position] = True
    assert seen.all()  # one entry per stacked row
    for t in range(len(counts)):  # a node's relations are adjacent: its type's relations in order
        relations = np.flatnonzero(dst_type == t)
        assert (table.stride[relations] == len(relations)).all()
        assert (np.diff(table.base[relations]) == 1).all()


def test_a_row_past_the_degree_tables_cap_is_counted_from_indptr():
    # 70,000 citations of paper 0: its row's degree does not fit the table's uint16 (DEGREE_CAP).
    rng = np.random.default_rng(14)
    cites = np.stack((rng.integers(0, 9, 70_000), np.zeros(70_000, np.int64)))
    graph = gg.HeteroGraph(
        {("paper", "cites", "paper"): cites, ("author", "writes", "paper"): np.array([[0, 1], [0, 3]])},
        {"paper": 9, "author": 2},
    )
    for fanouts in ([-1], [65_536], [3, 2]):
        out = gg.HeteroNeighborSampler(graph, fanouts, seed=3).sample({"paper": [0, 3]}, key=1)
        assert_same(out, reference_hetero_sample(graph, {"paper": [0, 3]}, fanouts, seed=3, key=1))
    assert out.adjs[-1][("paper", "cites", "paper")].edge_index.shape[1] == 3  # min(3, 70,000) for paper 0
    everything = gg.HeteroNeighborSampler(graph, [-1], seed=3).sample({"paper": [0]}, key=1)
    assert everything.adjs[0][("paper", "cites", "paper")].edge_index.shape[1] == 70_000

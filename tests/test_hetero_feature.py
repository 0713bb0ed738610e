"""HeteroFeatureStore: one cache budget across node types, dict in -> dict out, exact rows.

The cached rows are checked against an independent greedy written here (every row of every type
by descending score, each taken while its bytes still fit), on the simulated GPU; on the CPU
nothing is cached and the planning functions are checked directly.
"""

import pickle
from types import SimpleNamespace

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.feature import FeatureStore, HeteroFeatureSource, HeteroFeatureStore
from gglspeedup.feature.hetero_policies import (
    degree_ranking,
    merge_orders,
    plan_cache,
    presample_visits,
    split_budget,
)
from gglspeedup.multigpu import MultiDeviceFeature

from conftest import free_port, init_gloo, to_host

NUM_NODES = {"author": 5, "paper": 6, "term": 4, "venue": 2, "field": 3}
# author: 16-byte rows, paper: 6-byte rows, term: 5-byte rows; venue has no table, field is graph-only.
DTYPES = {"author": (np.float32, 4), "paper": (np.float16, 3), "term": (np.uint8, 5)}
FEATURED = tuple(DTYPES)


def _graph():
    rng = np.random.default_rng(3)
    relations = {}
    for src, name, dst, edges in [
        ("author", "writes", "paper", 12),
        ("paper", "cites", "paper", 9),
        ("paper", "has", "term", 8),
        ("term", "in", "paper", 7),
        ("venue", "hosts", "paper", 4),
        ("field", "covers", "term", 3),
    ]:
        relations[(src, name, dst)] = np.stack(
            (rng.integers(0, NUM_NODES[src], edges), rng.integers(0, NUM_NODES[dst], edges))
        )
    return gg.HeteroGraph(relations, NUM_NODES)


def _tables(seed=0):
    rng = np.random.default_rng(seed)
    x = {t: (rng.standard_normal((NUM_NODES[t], dim)) * 50).astype(dtype) for t, (dtype, dim) in DTYPES.items()}
    return {**x, "venue": None}


def _row_bytes(x):
    return {t: x[t][0].nbytes for t in FEATURED}


def _same(got, expected):
    got = to_host(got)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    width = f"u{expected.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(width), expected.view(width))


def _greedy(scores: dict, row_bytes: dict, budget: int) -> dict:
    """The reference: rows by descending score (ties: type order, id), each taken if it fits."""
    types = list(scores)
    items = sorted((-scores[t][i], types.index(t), i) for t in types for i in range(len(scores[t])))
    cached, left = {t: [] for t in types}, budget
    for _, k, i in items:
        if row_bytes[types[k]] <= left:
            cached[types[k]].append(i)
            left -= row_bytes[types[k]]
    return cached


def _degree_scores(graph, row_bytes):
    return {t: graph.out_degree(t) / row_bytes[t] for t in row_bytes}


def _check_every_row(store, x, seed=0):
    rng = np.random.default_rng(seed)
    ids = {t: np.concatenate((rng.integers(0, NUM_NODES[t], 7), np.arange(NUM_NODES[t]))) for t in FEATURED}
    rows = store[ids]
    assert list(rows) == list(ids)
    for t in FEATURED:
        _same(rows[t], x[t][ids[t]])
        _same(store[(t, [])], x[t][:0])


# ---------------------------------------------------------------------- rows and the shared budget
TOTAL = sum(NUM_NODES[t] * DTYPES[t][1] * np.dtype(DTYPES[t][0]).itemsize for t in FEATURED)


@pytest.mark.parametrize(
    "budget, policy",
    [
        (0, None),
        (5, None),  # one 5-byte term row
        (60, None),  # every paper row, most term rows, no author row
        (TOTAL // 2, None),  # rows of all three types
        (TOTAL, None),
        (10**6, {"paper": [5, 0, 2]}),
        (TOTAL // 2, "none"),
    ],
    ids=["zero", "tiny", "part", "half", "everything", "one-type", "none"],
)
def test_rows_are_exact_for_every_type_under_every_budget(device, budget, policy):
    graph, x = _graph(), _tables()
    store = HeteroFeatureStore(x, device=device, cache_size=budget, policy=policy, graph=graph)
    _check_every_row(store, x)
    assert store.node_types == ("author", "paper", "term", "venue", "field")
    assert store.feature_types == FEATURED
    assert store.shape == {t: x[t].shape for t in FEATURED}
    cached = {t: store.cached_ids[t].tolist() for t in FEATURED}
    if not store.device.is_cuda:
        assert cached == {t: [] for t in FEATURED} and store.cached_bytes == 0
        return
    if policy is None:
        expected = _greedy(_degree_scores(graph, _row_bytes(x)), _row_bytes(x), budget)
    elif policy == "none":
        expected = {t: [] for t in FEATURED}
    else:
        expected = {"author": [], "paper": [5, 0, 2], "term": []}
    assert cached == expected
    assert store.cached_bytes == sum(len(v) * _row_bytes(x)[t] for t, v in expected.items()) <= budget
    if budget == TOTAL:
        assert store.cached_bytes == TOTAL  # everything cached


@pytest.mark.cuda
def test_the_global_ranking_crosses_types_by_degree_per_byte():
    # a: 16-byte rows, out-degrees [3, 1, 0] -> per byte [0.1875, 0.0625, 0.0];
    # b: 5-byte rows, out-degrees [2, 2, 1] -> per byte [0.4, 0.4, 0.2]. By raw degree a0 would come first.
    relations = {("a", "r", "b"): [[0, 0, 0, 1], [0, 1, 2, 0]], ("b", "s", "a"): [[0, 0, 1, 1, 2], [0, 1, 2, 0, 1]]}
    graph = gg.HeteroGraph(relations, {"a": 3, "b": 3})
    x = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.arange(15, dtype=np.uint8).reshape(3, 5)}
    for budget, expected in [
        (16, {"a": [], "b": [0, 1, 2]}),  # a0 alone would fit, but three b rows buy more hits
        (31, {"a": [0], "b": [0, 1, 2]}),
        (46, {"a": [0], "b": [0, 1, 2]}),  # a1 (16 more) does not fit in the 15 left
        (47, {"a": [0, 1], "b": [0, 1, 2]}),
    ]:
        store = HeteroFeatureStore(x, device="cuda:0", cache_size=budget, graph=graph)
        assert {t: ids.tolist() for t, ids in store.cached_ids.items()} == expected, budget
        assert store.policy_info == {"policy": "degree", "num_cached": {t: len(v) for t, v in expected.items()}}
    rows = store[{"b": [2, 0], "a": [0, 0, 2]}]
    _same(rows["a"], x["a"][[0, 0, 2]])
    _same(rows["b"], x["b"][[2, 0]])
    stats = store.stats()
    assert stats["per_type"]["a"]["hits"] == 2 and stats["per_type"]["b"]["hits"] == 2 and stats["hits"] == 4


def test_split_budget_matches_the_reference_greedy_and_never_overspends():
    rng = np.random.default_rng(0)
    for trial in range(40):
        types = ("a", "b", "c")[: 1 + trial % 3]
        row_bytes = {t: int(rng.integers(1, 40)) for t in types}
        degrees = {t: rng.integers(0, 6, int(rng.integers(0, 9))) for t in types}
        scores = {t: degrees[t] / row_bytes[t] for t in types}
        budget = int(rng.integers(0, 200))
        ranking = degree_ranking(SimpleNamespace(out_degree=degrees.get), row_bytes)
        cached = split_budget(ranking, row_bytes, budget)
        assert {t: v.tolist() for t, v in cached.items()} == _greedy(scores, row_bytes, budget), trial
        assert sum(len(v) * row_bytes[t] for t, v in cached.items()) <= budget


def test_plan_cache_on_the_test_graph_and_with_rows_skipped():
    graph, x = _graph(), _tables()
    row_bytes = _row_bytes(x)
    num_rows = {t: NUM_NODES[t] for t in FEATURED}
    for budget in (0, 5, 17, 60, 120, TOTAL):
        cached = plan_cache(None, graph, num_rows, row_bytes, budget)
        expected = _greedy(_degree_scores(graph, row_bytes), row_bytes, budget)
        assert {t: v.tolist() for t, v in cached.items()} == expected
    with pytest.raises(ValueError, match=r"'paper' has 5 rows but graph.num_nodes\['paper'\] is 6"):
        plan_cache(None, graph, {**num_rows, "paper": 5}, row_bytes, 10)
    with pytest.raises(ValueError, match=r"'book' has 2 rows but graph.num_nodes\['book'\] is absent"):
        plan_cache(None, graph, {"book": 2}, {"book": 4}, 10)
    skip = {"paper": np.arange(6) % 2 == 0}
    cached = plan_cache(None, graph, num_rows, row_bytes, TOTAL, skip=skip)
    assert cached["paper"].tolist() == [
        i for i in _greedy(_degree_scores(graph, row_bytes), row_bytes, TOTAL)["paper"] if i % 2
    ]


def test_given_orders_share_the_budget_by_equal_bytes():
    row_bytes = {"a": 10, "b": 4, "c": 1}
    ranking = merge_orders({"a": [3, 1, 2], "b": [0, 5, 6, 7, 8]}, row_bytes)
    # Each type's running bytes: a 10, 20, 30; b 4, 8, 12, 16, 20; ties (a 20, b 20) in type order.
    pairs = list(zip(np.array(ranking.types)[ranking.type_index].tolist(), ranking.ids.tolist()))
    assert pairs == [("b", 0), ("b", 5), ("a", 3), ("b", 6), ("b", 7), ("a", 1), ("b", 8), ("a", 2)]
    cached = split_budget(ranking, row_bytes, 30)  # b0 b5 a3 b6 b7 = 26 bytes; a1 (36) no, b8 (30) yes
    assert {t: v.tolist() for t, v in cached.items()} == {"a": [3], "b": [0, 5, 6, 7, 8], "c": []}


@pytest.mark.cuda
def test_a_global_ranking_of_pairs_is_taken_as_given():
    graph, x = _graph(), _tables()
    ranking = [("term", 3), ("author", 4), ("paper", 0), ("term", 0), ("author", 1)]
    store = HeteroFeatureStore(x, device="cuda:0", cache_size=5 + 16 + 6 + 5 + 15, policy=ranking, graph=graph)
    assert {t: v.tolist() for t, v in store.cached_ids.items()} == {"author": [4], "paper": [0], "term": [3, 0]}
    _check_every_row(store, x, seed=1)


def test_on_the_cpu_only_tables_on_disk_share_the_budget(tmp_path):
    graph, x = _graph(), _tables()
    np.save(tmp_path / "author.npy", x["author"])
    mapped = {**x, "author": np.load(tmp_path / "author.npy", mmap_mode="r")}  # paper, term stay in memory
    ranking = [("paper", 0), ("term", 3), ("author", 4), ("paper", 1), ("author", 1), ("author", 0)]
    store = HeteroFeatureStore(mapped, cache_size=32, policy=ranking, graph=graph)
    # paper's and term's rows have no RAM cache to go to: they spend nothing, so author's two hottest fit
    assert {t: v.tolist() for t, v in store.cached_ids.items()} == {"author": [4, 1], "paper": [], "term": []}
    assert store.policy_info["num_cached"] == {"author": 2, "paper": 0, "term": 0}
    assert store.cached_bytes == 32
    _check_every_row(store, x)
    store.reset_stats()
    _same(store[("author", [4, 1, 0, 4])], x["author"][[4, 1, 0, 4]])
    assert store.stats()["hits"] == 3  # rows 4, 1, 4 from RAM, row 0 from the mapping


def test_stats_per_type_add_up_to_the_total_and_reset(device):
    graph, x = _graph(), _tables()
    store = HeteroFeatureStore(x, device=device, cache_size=60, graph=graph)
    batches = [{"author": [0, 4, 4], "paper": [5]}, {"term": [1, 2, 3, 0]}, {"paper": [0, 1, 2], "author": []}]
    for ids in batches:
        store.gather(ids)
    stats = store.stats()
    per_type = stats.pop("per_type")
    assert set(per_type) == set(FEATURED)
    for key in ("lookups", "calls", "rows_device", "rows_host", "hits", "bytes_device", "bytes_host", "num_cached"):
        assert stats[key] == sum(s[key] for s in per_type.values()), key
    assert stats["lookups"] == 11 and per_type["author"]["lookups"] == 3 and per_type["term"]["calls"] == 1
    cached = {t: set(v.tolist()) for t, v in store.cached_ids.items()}
    hits = sum(i in cached[t] for ids in batches for t, v in ids.items() for i in v)
    assert stats["hits"] == hits and stats["hit_rate"] == pytest.approx(hits / 11)
    assert stats["bytes_device"] + stats["bytes_host"] == 3 * 16 + 4 * 6 + 4 * 5
    store.reset_stats()
    assert store.stats()["lookups"] == 0 and store.stats()["per_type"]["paper"]["lookups"] == 0


def test_store_of_a_type_and_pairs_and_out_buffers(device):
    graph, x = _graph(), _tables()
    store = HeteroFeatureStore(x, device=device, cache_size=40, graph=graph)
    assert isinstance(store["paper"], FeatureStore) and store.store("paper") is store["paper"]
    _same(store[("author", np.array([3, 3, 0], np.int32))], x["author"][[3, 3, 0]])
    xp = store.device.xp
    out = {"paper": xp.empty((2, 3), np.float16), "term": xp.empty((1, 5), np.uint8)}
    rows = store.gather({"paper": [1, 5], "term": [2], "author": [1]}, out=out)
    assert rows["paper"] is out["paper"] and rows["term"] is out["term"]
    for t, ids in (("paper", [1, 5]), ("term", [2]), ("author", [1])):
        _same(rows[t], x[t][ids])
    buffer = xp.empty((1, 4), np.float32)
    assert store.gather(("author", [2]), out=buffer) is buffer
    _same(buffer, x["author"][[2]])


def test_types_without_features_raise_or_are_skipped_when_asked():
    graph, x = _graph(), _tables()
    store = HeteroFeatureStore(x, graph=graph)
    for request in (lambda: store["venue"], lambda: store[{"venue": [0]}], lambda: store[("field", [])]):
        with pytest.raises(ValueError, match=r"has no features .*embeddings"):
            request()
    rows = store.gather({"venue": [1], "paper": [2], "field": [0]}, featureless="skip")
    assert list(rows) == ["paper"]
    _same(rows["paper"], x["paper"][[2]])
    assert "venue" not in store and "paper" in store and "venue" in store.node_types


def test_unknown_types_and_wrong_kinds_of_input_are_named():
    graph, x = _graph(), _tables()
    store = HeteroFeatureStore(x, graph=graph)
    with pytest.raises(ValueError, match=r"unknown node type 'book'; known node types: \['author'"):
        store[{"book": [0]}]
    with pytest.raises(ValueError, match="unknown node type 'book'"):
        store["book"]
    with pytest.raises(TypeError, match=r"dict node type -> ids or a \(node_type, ids\) pair"):
        store[[0, 1]]
    with pytest.raises(TypeError, match="out must be a dict"):
        store.gather({"paper": [0]}, out=np.empty((1, 3), np.float16))
    with pytest.raises(ValueError, match="out names node type 'term'"):
        store.gather({"paper": [0]}, out={"term": np.empty((1, 5), np.uint8)})
    with pytest.raises(IndexError, match=r"ids\[1\] = 6 is out of range"):
        store[{"paper": [0, 6]}]
    with pytest.raises(ValueError, match="featureless must be"):
        store.gather({"paper": [0]}, featureless="drop")


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda x, g: HeteroFeatureStore(x["author"], graph=g), TypeError, "x must be a dict node type"),
        (lambda x, g: HeteroFeatureStore({1: x["author"]}), TypeError, "keys must be node type names"),
        (
            lambda x, g: HeteroFeatureStore(x, cache_size=40, graph=gg.CSRGraph([0] * 7, [])),
            TypeError,
            r"graph must be a HeteroGraph .*got CSRGraph",
        ),
        (lambda x, g: HeteroFeatureStore(x, graph=g.num_nodes), TypeError, r"graph must be a HeteroGraph .*got dict"),
        (lambda x, g: HeteroFeatureStore({"venue": None}), ValueError, "at least one node type"),
        (
            lambda x, g: HeteroFeatureStore({**x, "paper": x["paper"][:5]}, graph=g),
            ValueError,
            r"x\['paper'\] has 5 rows but graph.num_nodes\['paper'\] = 6",
        ),
        (lambda x, g: HeteroFeatureStore({**x, "book": x["author"]}, graph=g), ValueError, "'book', which the graph"),
        (lambda x, g: HeteroFeatureStore({"a": np.zeros(3)}), ValueError, r"x\['a'\]: x must be 2-D"),
        (lambda x, g: HeteroFeatureStore(x, policy="degree"), ValueError, "needs graph="),
        (lambda x, g: HeteroFeatureStore(x, policy="hottest", graph=g), ValueError, "policy must be one of"),
        (lambda x, g: HeteroFeatureStore(x, policy=np.arange(3), graph=g), TypeError, "policy must be"),
        (lambda x, g: HeteroFeatureStore(x, policy={"venue": [0]}, graph=g), ValueError, "'venue', which has no"),
        (lambda x, g: HeteroFeatureStore(x, policy={"paper": [1, 1]}, graph=g), ValueError, "must not repeat"),
        (lambda x, g: HeteroFeatureStore(x, policy={"paper": [6]}, graph=g), ValueError, "out of range"),
        (lambda x, g: HeteroFeatureStore(x, policy=[("paper", 0), ("paper", 0)]), ValueError, "must not repeat"),
        (lambda x, g: HeteroFeatureStore(x, policy=[("paper", 9)]), ValueError, "policy"),
        (lambda x, g: HeteroFeatureStore(x, policy=[(0, "paper")]), TypeError, r"\(node_type, id\) pairs"),
        (
            lambda x, g: HeteroFeatureStore(x, policy="presample", graph=g, presample={"fanout": [2]}),
            ValueError,
            "unknown presample option",
        ),
        (lambda x, g: HeteroFeatureStore(x, graph=g, presample={"seed": 1}), ValueError, "only used with"),
        (
            lambda x, g: HeteroFeatureStore(x, policy="presample", graph=g, presample=[("seed", 1)]),
            TypeError,
            r"presample must be a dict of options .*got list",
        ),
    ],
)
def test_bad_arguments_raise_before_any_kernel(make, error, message):
    with pytest.raises(error, match=message):
        make(_tables(), _graph())


def test_cpu_store_pickles_and_gg_exports_it_lazily():
    graph, x = _graph(), _tables()
    store = HeteroFeatureStore(x, cache_size="1K", graph=graph)
    clone = pickle.loads(pickle.dumps(store))
    _check_every_row(clone, x, seed=2)
    assert gg.HeteroFeatureStore is HeteroFeatureStore and "HeteroFeatureStore" in gg.__all__
    assert "venue" in repr(store) and "policy='degree'" in repr(store)


def test_a_typed_sampler_s_n_id_gathers_with_featureless_types_skipped(device):
    graph, x = _graph(), _tables()
    sampler = gg.HeteroNeighborSampler(graph, [2, 2], seed=5)
    store = HeteroFeatureStore(x, device=device, cache_size=50, graph=graph)
    output = sampler.sample({"paper": [0, 3]}, key=1)
    rows = store.gather(output.n_id, featureless="skip")
    assert set(rows) == set(FEATURED)
    for t in FEATURED:
        _same(rows[t], x[t][to_host(output.n_id[t])])


# ---------------------------------------------------------------------- presample
class _FixedSampler:
    """A typed sampler stand-in whose n_id is fixed per key (to count visits exactly)."""

    def __init__(self):
        self.keys = []

    def sample(self, seeds, key=None):
        self.keys.append(key)
        return gg.HeteroSampleOutput({"paper": np.array([1, 1, 4]), "term": np.array([key % 4])}, [], {}, {})


def test_presample_visits_counts_every_typed_batch_with_replayable_keys():
    graph = _graph()
    sampler = _FixedSampler()
    counts = presample_visits(graph, batch_size=4, num_batches=3, seeds={"paper": [0, 1, 2]}, sampler=sampler)
    assert sampler.keys == [0, 1, 2]
    assert counts["paper"].tolist() == [0, 6, 0, 0, 3, 0] and counts["term"].tolist() == [1, 1, 1, 0]
    assert counts["author"].tolist() == [0] * 5 and set(counts) == set(NUM_NODES)
    real = gg.HeteroNeighborSampler(graph, [2], seed=0)
    counts = presample_visits(
        graph, [2], batch_size=3, num_batches=2, seeds={"paper": [0, 1], "term": [2]}, sampler=real
    )
    assert counts["paper"][[0, 1]].min() >= 1 and counts["term"][2] >= 1  # every seed appears in its n_id
    with pytest.raises(ValueError, match="node type 'book'"):
        presample_visits(graph, seeds={"book": [0]})
    with pytest.raises(TypeError, match="sample"):
        presample_visits(graph, sampler=object())


class _BadSampler:
    def __init__(self, n_id):
        self.n_id = n_id

    def sample(self, seeds, key=None):
        return gg.HeteroSampleOutput(self.n_id, [], {}, {})


@pytest.mark.parametrize(
    "n_id, error, message",
    [
        ({"paper": np.array([1, 6])}, ValueError, r"n_id\['paper'\]\[1\] = 6 is out of range \[0, 6\)"),
        ({"paper": np.array([-1])}, ValueError, r"n_id\['paper'\]\[0\] = -1 is out of range"),
        ({"paper": np.array([1.5])}, TypeError, r"n_id\['paper'\] must hold integer node ids, got dtype float64"),
        ({"book": np.array([0])}, ValueError, r"n_id\['book'\] names a node type the graph lacks"),
    ],
)
def test_presample_visits_check_a_user_sampler_s_n_id(n_id, error, message):
    # unchecked, 6 or -1 failed inside np.bincount, 1.5 was counted as node 1 and 'book' was a KeyError
    with pytest.raises(error, match=message):
        presample_visits(_graph(), batch_size=2, num_batches=1, seeds={"paper": [0]}, sampler=_BadSampler(n_id))


@pytest.mark.parametrize(
    "counts, error, message",
    [
        ({"papr": [0, 0, 0, 9, 0, 0]}, ValueError, r"names node type 'papr'; the graph's node types"),
        ({"paper": [0, 0, 0, 0.9, 0, 0.5]}, TypeError, r"\['paper'\] must hold visit counts \(integers\), got dtype f"),
        ({"paper": ["0", "1", "2", "3", "4", "5"]}, TypeError, "must hold visit counts"),
        ({"paper": [0, 0, -5, 0, 0, 0]}, ValueError, r"\['paper'\] must not be negative, got -5"),
        ({"paper": [1, 2]}, ValueError, r"\['paper'\] must have shape \(6,\), got \(2,\)"),
    ],
)
def test_given_presample_counts_are_checked(tmp_path, counts, error, message):
    # A misspelt type was ignored, float counts truncated (0.9 -> 0), strings parsed and negative
    # counts ranked, all silently: the cache then held other rows than the counts asked for.
    paths = {}
    for t, table in _tables().items():
        if table is not None:
            paths[t] = tmp_path / f"{t}.npy"
            np.save(paths[t], table)
    options = dict(graph=_graph(), cache_size=40, policy="presample", presample={"counts": counts})
    with pytest.raises(error, match=message) as caught:
        HeteroFeatureStore.from_npy(paths, **options)
    assert str(caught.value).startswith("presample['counts']")


@pytest.mark.cuda
def test_presample_policy_caches_within_budget_and_reports_where_its_order_came_from():
    graph, x = _graph(), _tables()
    options = {"fanouts": [2, 1], "batch_size": 3, "num_batches": 4, "seed": 2}
    store = HeteroFeatureStore(x, device="cuda:0", cache_size=45, policy="presample", graph=graph, presample=options)
    assert store.policy_info["policy"] == "presample"
    assert store.policy_info["order_from"] in ("presample", "degree")
    assert 0.0 <= store.policy_info["expected_hit_rate"] <= 1.0
    assert 0 < store.cached_bytes <= 45
    _check_every_row(store, x, seed=3)
    counts = {"paper": np.array([0, 0, 0, 9, 0, 0]), "term": np.array([0, 5, 0, 0])}  # given counts: per byte
    store = HeteroFeatureStore(
        x, device="cuda:0", cache_size=11, policy="presample", graph=graph, presample={"counts": counts}
    )
    assert {t: v.tolist() for t, v in store.cached_ids.items()} == {"author": [], "paper": [3], "term": [1]}


# ---------------------------------------------------------------------- multi-device and distributed
def test_multi_device_feature_over_typed_tables_pickles_small_and_serves_every_rank(device):
    graph, x = _graph(), _tables()
    feature = MultiDeviceFeature(x, [device, device], cache_size=60, graph=graph)
    assert feature.typed and len(pickle.dumps(feature)) < 3000
    clone = pickle.loads(pickle.dumps(feature))
    for source in (feature, clone):
        for rank in range(2):
            store = source.store(rank)
            assert isinstance(store, HeteroFeatureStore)
            _check_every_row(source.rank(rank), x, seed=rank)
    expected = HeteroFeatureStore(x, device=device, cache_size=60, graph=graph).cached_ids
    assert {t: v.tolist() for t, v in feature.store(1).cached_ids.items()} == {
        t: v.tolist() for t, v in expected.items()
    }
    assert feature.shape == {t: x[t].shape for t in FEATURED}
    rows = feature.set_rank(0)[{"term": [3, 3]}]
    _same(rows["term"], x["term"][[3, 3]])
    assert feature.stats()["per_type"]["term"]["lookups"] >= 2
    with pytest.raises(ValueError, match="typed x"):
        MultiDeviceFeature(x, ["cpu", "cpu"], mode="shard")


def _partitions(world_size):
    from gglspeedup.distributed import hash_partition, range_partition

    return {"author": range_partition(5, world_size), "paper": hash_partition(6, world_size, seed=1), "term": None}


def _typed_dist_checks(rank, world_size, port):
    import torch.distributed as dist

    from gglspeedup.distributed import DistFeature

    init_gloo(rank, world_size, port, 30)
    try:
        graph, x = _graph(), _tables()
        x = {"author": x["author"], "paper": x["paper"], "term": None}  # term: no features here
        parts = _partitions(world_size)
        local = {t: None if x[t] is None else x[t][parts[t] == rank] for t in x}
        feat = DistFeature(local, parts)
        assert isinstance(feat, HeteroFeatureSource) and feat.feature_types == ("author", "paper")
        # Ranks ask for different types (and none at all): every lookup still runs every exchange.
        asks = [{"author": [4, 0, 4]}, {"paper": [5, 1], "author": []}, {}, {"paper": [0], "author": [2]}]
        for step, ids in enumerate(asks[rank:] + asks[:rank]):
            rows = feat[ids]
            assert list(rows) == list(ids), step
            for t, v in ids.items():
                np.testing.assert_array_equal(rows[t].numpy(), x[t][v])
        with pytest.raises(ValueError, match="'term' has no features"):
            feat[{"term": [0]}]
        # One budget for the remote rows of both types, degree per byte over the graph.
        budget = 16 + 2 * 6
        feat = DistFeature(local, parts, cache_size=budget, graph=graph)
        cached = {t: feat[t].stats()["cached_rows"] for t in feat.feature_types}
        assert cached["author"] * 16 + cached["paper"] * 6 <= budget
        remote = {t: np.flatnonzero(parts[t] != rank) for t in feat.feature_types}
        before = feat.stats()
        rows = feat[remote]
        for t in remote:
            np.testing.assert_array_equal(rows[t].numpy(), x[t][remote[t]])
        stats = feat.stats()
        assert stats["cache_hits"] - before["cache_hits"] == sum(cached.values())  # each cached row asked once
        assert stats["lookups"] - before["lookups"] == sum(len(v) for v in remote.values())
        assert stats["lookups"] == sum(s["lookups"] for s in stats["per_type"].values())
        if world_size > 1:
            assert sum(cached.values()) > 0
        with pytest.raises(TypeError, match="partition as a dict"):
            DistFeature(local, parts["author"])
        with pytest.raises(ValueError, match="entry for every node type"):
            DistFeature(local, {"author": parts["author"]})
    finally:
        dist.destroy_process_group()


def test_dist_feature_over_typed_rows_in_one_process():
    pytest.importorskip("torch")
    import torch.distributed as dist

    from gglspeedup.distributed import DistFeature

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    x = _tables()
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistFeature({"paper": x["paper"]}, {"paper": np.zeros(6, np.int64)})
    _typed_dist_checks(0, 1, free_port())


def test_dist_feature_over_typed_rows_keeps_ranks_in_step_when_they_ask_for_different_types():
    mp = pytest.importorskip("torch.multiprocessing")
    mp.spawn(_typed_dist_checks, args=(2, free_port()), nprocs=2, join=True)


def test_check_reaches_every_type_s_store_and_synchronize_raises_a_deferred_error(device):
    x = {"paper": np.arange(12, dtype=np.float32).reshape(6, 2), "author": np.ones((3, 4), np.float32)}
    store = HeteroFeatureStore(x, device=device, cache_size=48, policy="none")
    with pytest.raises(ValueError, match="check must be True, False or 'deferred'"):
        store.gather({"paper": [0]}, check="maybe")
    xp = store.store("paper").device.xp
    rows = store.gather({"paper": xp.asarray([5, 0]), "author": xp.asarray([2])}, check="deferred")
    np.testing.assert_array_equal(to_host(rows["paper"]), x["paper"][[5, 0]])
    np.testing.assert_array_equal(to_host(rows["author"]), x["author"][[2]])
    store.synchronize()
    if not store.device.is_cuda:  # host ids are checked at once on the CPU
        with pytest.raises(IndexError, match=r"ids\[0\] = 3"):
            store.gather({"author": np.array([3])}, check="deferred")
        return
    store.gather({"author": xp.asarray([3])}, check="deferred")  # one past the table
    with pytest.raises(IndexError, match=r"ids\[0\] = 3 is out of range for a table of 3 rows"):
        store.synchronize()
    store.synchronize()  # raised once

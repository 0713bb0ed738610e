"""Remote sampling through partition servers equals the local samplers bit for bit (issue 40).

Differential tests: random graphs, partitions (METIS and ranges), 1-3 groups of servers over
``LocalTransport``, random seeds and keys; every batch is compared with ``NeighborSampler`` /
``HeteroNeighborSampler`` over the unpartitioned graph with the same arguments (``n_id``, every
``Adj``'s ``edge_index`` / ``e_id`` / ``size``, ``batch``, link fields).
"""

from __future__ import annotations

import os
import pickle
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gglspeedup as gg
from gglspeedup.service import (
    LocalTransport,
    PartServer,
    RemoteHeteroSampler,
    RemoteSampler,
    ServerUnavailable,
    partition,
)

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


def _same(remote, local):
    """Every field of two sample outputs (untyped or typed, node or link batches) is equal."""
    if isinstance(local.n_id, dict):
        assert remote.n_id.keys() == local.n_id.keys()
        for t in local.n_id:
            assert remote.n_id[t].dtype == local.n_id[t].dtype and np.array_equal(remote.n_id[t], local.n_id[t])
        hops = [(layer[et], local_layer[et]) for layer, local_layer in zip(remote.adjs, local.adjs) for et in layer]
        assert remote.num_sampled_nodes == local.num_sampled_nodes
        assert remote.num_sampled_edges == local.num_sampled_edges
        if local.batch is not None:
            assert all(np.array_equal(remote.batch[t], local.batch[t]) for t in local.batch)
    else:
        assert remote.n_id.dtype == local.n_id.dtype and np.array_equal(remote.n_id, local.n_id)
        hops = list(zip(remote.adjs, local.adjs))
        if local.batch is not None:
            assert np.array_equal(remote.batch, local.batch)
    assert len(remote.adjs) == len(local.adjs)
    assert (remote.batch is None) == (local.batch is None)
    for a, b in hops:
        assert a.size == b.size
        assert a.edge_index.dtype == b.edge_index.dtype and np.array_equal(a.edge_index, b.edge_index)
        assert a.e_id.dtype == b.e_id.dtype and np.array_equal(a.e_id, b.e_id)
    if hasattr(local, "pair_index"):
        assert np.array_equal(remote.pair_index, local.pair_index)
        assert np.array_equal(remote.labels, local.labels) and remote.labels.dtype == local.labels.dtype
        assert remote.num_false_negatives == local.num_false_negatives
        assert (remote.negative_targets is None) == (local.negative_targets is None)
        if local.negative_targets is not None:
            assert np.array_equal(remote.negative_targets, local.negative_targets)


def _groups(num_parts, num_groups, rng):
    """``num_groups`` groups covering every part once, in a shuffled order."""
    parts = rng.permutation(num_parts)
    cuts = np.sort(rng.choice(np.arange(1, num_parts), size=num_groups - 1, replace=False)) if num_groups > 1 else []
    return [tuple(int(p) for p in chunk) for chunk in np.split(parts, cuts)]


def _serve(folder, groups):
    # warm=False: in-process servers answer without a deadline, so their kernels compile as the
    # draws use them. Warming (every kind of draw a server may get: with and without a link
    # batch's exclusions, both count types) compiled about a third more draw variants than these
    # tests draw, for partition kinds of their own (float edge times, no edge ids, ...), most of
    # the file's time on a fresh clone; what warming covers is proven by
    # test_service_sampling_server_answers_read_only_requests_without_compiling_again here and by
    # the Ray tests, whose servers warm.
    return LocalTransport([PartServer(folder, list(group), warm=False) for group in groups], groups)


def _graph(rng, num_nodes, num_edges, weighted=False, keep_edge_ids=True):
    weights = None
    if weighted:
        weights = rng.random(num_edges)
        weights[rng.random(num_edges) < 0.2] = 0.0
    edge_index = rng.integers(0, num_nodes, (2, num_edges))
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes, weights=weights, keep_edge_ids=keep_edge_ids)


@given(
    seed=st.integers(0, 2**32 - 1),
    num_parts=st.integers(1, 4),
    num_groups=st.integers(1, 3),
    method=st.sampled_from(["range", "metis"]),
    options=st.sampled_from(
        [{}, {"expand": "new"}, {"replace": True}, {"weighted": True}, {"weighted": True, "replace": True}]
    ),
)
@SETTINGS
@pytest.mark.slow
def test_service_sampling_untyped_batches_equal_the_local_sampler(seed, num_parts, num_groups, method, options):
    rng = np.random.default_rng(seed)
    num_nodes = int(rng.integers(num_parts, 120))
    graph = _graph(rng, num_nodes, int(rng.integers(0, 900)), weighted=True, keep_edge_ids=bool(seed % 2))
    num_groups = min(num_groups, num_parts)
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "p")
        book = partition(graph, folder, num_parts, method=method)
        transport = _serve(folder, _groups(num_parts, num_groups, rng))
        fanouts = [int(k) for k in rng.choice([-1, 0, 1, 3, 7], size=int(rng.integers(1, 4)))]
        if options.get("replace"):
            fanouts = [max(k, 0) for k in fanouts]
        remote = RemoteSampler(transport, book, fanouts, seed=seed % 1000, **options)
        local = gg.NeighborSampler(graph, fanouts, seed=seed % 1000, **options)
        for _ in range(3):
            seeds = rng.integers(0, num_nodes, int(rng.integers(0, 30)))
            key = int(rng.integers(0, 2**40))
            _same(remote.sample(seeds, key=key), local.sample(seeds, key=key))
        _same(remote.sample(seeds), local.sample(seeds))  # the counters agree too


@given(
    seed=st.integers(0, 2**32 - 1),
    num_groups=st.integers(1, 3),
    times=st.sampled_from([None, "node", "edge"]),
    options=st.sampled_from([{}, {"expand": "new"}, {"temporal_strategy": "last"}, {"weighted": True}]),
)
@SETTINGS
@pytest.mark.slow
def test_service_sampling_disjoint_and_temporal_batches_equal_the_local_sampler(seed, num_groups, times, options):
    rng = np.random.default_rng(seed)
    num_nodes = int(rng.integers(3, 100))
    graph = _graph(rng, num_nodes, int(rng.integers(1, 700)), weighted=True)
    given_times = {}
    if times == "node":
        given_times["node_time"] = rng.integers(0, 20, num_nodes)
    elif times == "edge":
        given_times["edge_time"] = rng.random(graph.num_edges) * 20
    if times is None and "temporal_strategy" in options:
        options = {}
    if options.get("weighted") and "temporal_strategy" in options:
        options = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "p")
        book = partition(graph, folder, 3, method="range", **given_times)
        transport = _serve(folder, _groups(3, num_groups, rng))
        remote = RemoteSampler(transport, book, [3, 2], seed=11, disjoint=True, **options)
        local = gg.NeighborSampler(graph, [3, 2], seed=11, disjoint=True, **options, **given_times)
        for _ in range(3):
            seeds = rng.integers(0, num_nodes, int(rng.integers(0, 20)))
            call = {"seed_time": rng.random(len(seeds)) * 25} if times == "edge" or rng.random() < 0.5 else {}
            if times is None:
                call = {}
            key = int(rng.integers(0, 1000))
            _same(remote.sample(seeds, key=key, **call), local.sample(seeds, key=key, **call))


@given(
    seed=st.integers(0, 2**32 - 1),
    num_groups=st.integers(1, 3),
    negatives=st.sampled_from([None, "binary", "per_source", "triplet"]),
    exclude=st.sampled_from([None, "self", "reverse"]),
    strict=st.booleans(),
    options=st.sampled_from([{}, {"weighted": True}, {"disjoint": True}, {"node_time": True}]),
)
@SETTINGS
@pytest.mark.slow
def test_service_sampling_link_batches_equal_the_local_sampler(seed, num_groups, negatives, exclude, strict, options):
    rng = np.random.default_rng(seed)
    num_nodes = int(rng.integers(3, 60))
    graph = _graph(rng, num_nodes, int(rng.integers(1, 500)), weighted=True)
    given_times = {}
    if options.get("node_time"):
        options = {}
        given_times["node_time"] = rng.integers(0, 10, num_nodes)
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "p")
        book = partition(graph, folder, 3, method="metis", **given_times)
        transport = _serve(folder, _groups(3, num_groups, rng))
        remote = RemoteSampler(transport, book, [4, 2], seed=5, **options)
        local = gg.NeighborSampler(graph, [4, 2], seed=5, **options, **given_times)
        for _ in range(2):
            # pairs are graph edges (so exclusion has work) or random
            edges = np.stack((graph.indices[: graph.num_edges], np.repeat(np.arange(num_nodes), graph.degree())))
            pairs = (
                edges[:, rng.integers(0, graph.num_edges, 8)]
                if rng.random() < 0.7
                else rng.integers(0, num_nodes, (2, 8))
            )
            call = {"negatives": negatives, "exclude": exclude, "strict_negatives": strict, "num_negatives": 2}
            key = int(rng.integers(0, 1000))
            _same(remote.sample_links(pairs, key=key, **call), local.sample_links(pairs, key=key, **call))


def _typed_graph(rng, counts):
    relations = {}
    for src, name, dst in [("a", "to", "b"), ("b", "cites", "b"), ("b", "rev", "a"), ("c", "in", "b")]:
        size = int(rng.integers(0, 80))
        relations[(src, name, dst)] = np.stack(
            (rng.integers(0, max(counts[src], 1), size), rng.integers(0, max(counts[dst], 1), size))
        )
    return gg.HeteroGraph(relations, counts)


@given(
    seed=st.integers(0, 2**32 - 1),
    num_groups=st.integers(1, 3),
    method=st.sampled_from(["range", "metis"]),
    options=st.sampled_from([{}, {"expand": "new"}, {"disjoint": True}, {"disjoint": True, "expand": "new"}]),
    times=st.sampled_from([None, "node", "edge"]),
)
@SETTINGS
@pytest.mark.slow
def test_service_sampling_typed_batches_equal_the_local_sampler(seed, num_groups, method, options, times):
    rng = np.random.default_rng(seed)
    counts = {"a": int(rng.integers(1, 20)), "b": int(rng.integers(1, 25)), "c": int(rng.integers(1, 6))}
    graph = _typed_graph(rng, counts)
    given_times = {}
    if times == "node":
        given_times["node_time"] = {"a": rng.integers(0, 9, counts["a"]), "b": rng.integers(0, 9, counts["b"])}
    elif times == "edge":
        et = ("b", "cites", "b")
        given_times["edge_time"] = {et: rng.integers(0, 9, graph.num_edges[et])}
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "p")
        book = partition(graph, folder, 3, method=method, **given_times)
        transport = _serve(folder, _groups(3, num_groups, rng))
        fanouts = {("a", "to", "b"): [3, 2], ("b", "cites", "b"): [2, -1], ("b", "rev", "a"): [1, 1]}
        remote = RemoteHeteroSampler(transport, book, fanouts, seed=9, **options)
        local = gg.HeteroNeighborSampler(graph, fanouts, seed=9, **options, **given_times)
        for _ in range(2):
            seeds = {"b": rng.integers(0, counts["b"], int(rng.integers(0, 6))), "a": rng.integers(0, counts["a"], 3)}
            call = {"seed_time": {t: rng.integers(0, 12, len(ids)) for t, ids in seeds.items()}} if times else {}
            key = int(rng.integers(0, 1000))
            _same(remote.sample(seeds, key=key, **call), local.sample(seeds, key=key, **call))
            pairs = np.stack((rng.integers(0, counts["a"], 5), rng.integers(0, counts["b"], 5)))
            link = {"edge_type": ("a", "to", "b"), "negatives": "binary", "strict_negatives": True}
            link.update(exclude="reverse", reverse_edge_type=("b", "rev", "a"))
            if times:
                link["pair_time"] = rng.integers(0, 12, 5)
            _same(remote.sample_links(pairs, key=key, **link), local.sample_links(pairs, key=key, **link))


def test_service_sampling_one_request_per_group_per_hop_with_distinct_int32_ids(tmp_path):
    rng = np.random.default_rng(3)
    graph = _graph(rng, 200, 3000)
    book = partition(graph, tmp_path / "p", 4, method="metis")
    transport = _serve(tmp_path / "p", [(0, 3), (1,), (2,)])
    calls = []
    real = transport.call

    def counting(requests, *, key=None):
        calls.append((key, {g: payload for g, (_, payload) in requests.items()}))
        return real(requests, key=key)

    transport.call = counting
    seeds = np.concatenate([rng.integers(0, 200, 40), [5, 5, 5]])
    RemoteSampler(transport, book, [5, 4]).sample(seeds, key=42)
    assert len(calls) == 2 and all(key == 42 for key, _ in calls)
    for _, requests in calls:
        for g, payload in requests.items():
            ids = payload["ids"]
            assert ids.dtype == np.int32 and len(np.unique(ids)) == len(ids)
            assert set(book.part_of(ids).tolist()) <= set(transport.group_parts[g])
    assert sum(len(p["ids"]) for p in calls[0][1].values()) == len(np.unique(seeds))


def test_service_sampling_metis_with_a_part_per_node_gives_every_server_a_node_and_the_local_batches(tmp_path):
    # METIS alone left 10 of these 20 parts empty: half the servers owned nothing
    rng = np.random.default_rng(4)
    graph = _graph(rng, 20, 40)
    for num_parts in (19, 20):
        book = partition(graph, tmp_path / f"p{num_parts}", num_parts, method="metis")
        assert all(size["nodes"] >= 1 for size in book.part_sizes)
        transport = _serve(tmp_path / f"p{num_parts}", _groups(num_parts, 3, rng))
        remote = RemoteSampler(transport, book, [3, 2], seed=5)
        local = gg.NeighborSampler(graph, [3, 2], seed=5)
        for key in range(3):
            seeds = rng.integers(0, 20, 8)
            _same(remote.sample(seeds, key=key), local.sample(seeds, key=key))


def test_service_sampling_refuses_bad_arguments(tmp_path):
    rng = np.random.default_rng(0)
    graph = _graph(rng, 30, 100)
    book = partition(graph, tmp_path / "p", 2, method="range")
    transport = _serve(tmp_path / "p", [(0,), (1,)])
    with pytest.raises(ValueError, match="exactly once"):
        RemoteSampler(_serve(tmp_path / "p", [(0,)]), book, [2])
    with pytest.raises(TypeError, match="transport must be a Transport"):
        RemoteSampler(object(), book, [2])
    with pytest.raises(ValueError, match="weighted=True needs a partition"):
        RemoteSampler(transport, book, [2], weighted=True)
    with pytest.raises(ValueError, match="node_time needs a partition sorted by time"):
        RemoteSampler(transport, book, [2], node_time=np.zeros(30))
    with pytest.raises(TypeError, match="unexpected options"):
        RemoteSampler(transport, book, [2], fanout=3)
    with pytest.raises(ValueError, match="sample it with RemoteHeteroSampler"):
        RemoteSampler(transport, partition(_typed_graph(rng, {"a": 3, "b": 4, "c": 2}), tmp_path / "t", 1), [1])
    sampler = RemoteSampler(transport, book, [2])
    with pytest.raises(IndexError, match="seeds must lie in"):
        sampler.sample([30])
    timed = partition(graph, tmp_path / "timed", 2, method="range", node_time=np.arange(30))
    timed_transport = _serve(tmp_path / "timed", [(0, 1)])
    with pytest.raises(ValueError, match="differs from the times"):
        RemoteSampler(timed_transport, timed, [2], node_time=np.arange(30)[::-1])
    RemoteSampler(timed_transport, timed, [2], node_time=np.arange(30))  # the partition's own: accepted
    # times that only equal the partition's once cast to its int64 were taken (1.6 read as 1), and
    # the batches were not NeighborSampler(graph, node_time=those times)'s
    with pytest.raises(ValueError, match="differs from the times"):
        RemoteSampler(timed_transport, timed, [2], node_time=np.arange(30) + 0.6)
    RemoteSampler(timed_transport, timed, [2], node_time=np.arange(30, dtype=np.uint8))  # the same values
    typed = _typed_graph(rng, {"a": 3, "b": 4, "c": 2})
    cites = ("b", "cites", "b")
    times = np.arange(typed.num_edges[cites])
    typed_book = partition(typed, tmp_path / "typed_timed", 1, method="range", edge_time={cites: times})
    typed_transport = _serve(tmp_path / "typed_timed", [(0,)])
    with pytest.raises(TypeError, match="edge_time's key must be a \\(src_type, name, dst_type\\) tuple of str, got 5"):
        RemoteHeteroSampler(typed_transport, typed_book, [1], edge_time={5: times})  # was "'int' ... not iterable"
    RemoteHeteroSampler(typed_transport, typed_book, [1], edge_time={cites: times})  # the partition's own: accepted


def test_service_sampling_server_refuses_draws_it_cannot_answer(tmp_path):
    rng = np.random.default_rng(1)
    graph = _graph(rng, 40, 300)
    book = partition(graph, tmp_path / "p", 2, method="metis")
    server = PartServer(tmp_path / "p", [0])
    mine, theirs = book.nodes(0), book.nodes(1)

    def draw(ids, dtype=np.int32, **extra):
        ids = np.asarray(ids, dtype)
        payload = {"parts": np.array([0]), "rel_counts": np.array([len(ids)]), "ids": ids, "ks": np.array([3])}
        payload.update(states=np.array([7], np.uint64), replace=False, weighted=False, last=False, **extra)
        return server.handle("draw", payload)

    answer = draw(mine[:4])
    assert answer["counts"].dtype == np.uint8 and answer["counts"].sum() == answer["nbrs"].shape[0]
    with pytest.raises(ValueError, match=f"ids\\[1\\] = {theirs[0]} is not a node partition 0 owns"):
        draw([mine[0], theirs[0]])
    with pytest.raises(ValueError, match="ids\\[2\\] = 40 is not a node partition 0 owns"):
        draw([mine[0], mine[1], 40])
    with pytest.raises(ValueError, match="ids\\[0\\] = -1 is not a node partition 0 owns"):
        draw([-1])
    with pytest.raises(ValueError, match="rel_counts cover 1 targets, ids holds 2"):
        draw(mine[:2], rel_counts=np.array([1]))
    with pytest.raises(ValueError, match="1-D array of integers"):
        draw(mine[:2], dtype=np.float64)


def test_service_sampling_server_refuses_edge_checks_it_cannot_answer(tmp_path):
    # "edges" (strict negatives' checks) looked up another partition's local row in its own CSR:
    # a wrong answer, or a read past its rows, where "draw" refuses such ids by name
    rng = np.random.default_rng(1)
    graph = _graph(rng, 40, 300)
    book = partition(graph, tmp_path / "p", 4, method="range")
    server = PartServer(tmp_path / "p", [3], warm=False)
    mine, theirs = book.nodes(3), book.nodes(2)

    def edges(src, dst, part_counts, rel=0):
        payload = {"src": np.asarray(src), "dst": np.asarray(dst), "rel": rel, "parts": np.array([3])}
        return server.handle("edges", {**payload, "part_counts": np.asarray(part_counts)})

    rows = [graph.indices[graph.indptr[v] : graph.indptr[v + 1]] for v in mine[:2]]
    assert edges([rows[0][0], 39], mine[:2], [2])["found"].tolist() == [1, int(39 in rows[1])]
    with pytest.raises(ValueError, match=f"dst\\[1\\] = {theirs[-1]} is not a node partition 3 owns"):
        edges([0, 1], [mine[0], theirs[-1]], [2])
    with pytest.raises(ValueError, match="dst\\[0\\] = 40 is not a node partition 3 owns"):
        edges([0], [40], [1])
    with pytest.raises(ValueError, match="dst\\[0\\] = -1 is not a node partition 3 owns"):
        edges([0], [-1], [1])
    with pytest.raises(ValueError, match="src, dst and part_counts disagree"):
        edges([0, 1, 2], mine[:3], [1])
    with pytest.raises(ValueError, match="rel must lie in \\[0, 1\\), got 5"):
        edges([0], mine[:1], [1], rel=5)


def test_service_sampling_server_draws_into_the_answer_memory_it_is_given(tmp_path):
    # The channel hands a server the memory its answer is sent from: the draws are written there
    # (the parts of a group one after another, as one run), equal to the draws made without it.
    rng = np.random.default_rng(2)
    graph = _graph(rng, 300, 4000)
    book = partition(graph, tmp_path / "p", 4, method="range")
    server = PartServer(tmp_path / "p", [0, 2])
    first, second = book.nodes(0), book.nodes(2)
    payload = {"parts": np.array([0, 2, 0]), "part_batch": np.array([0, 0, 1], np.int32)}
    payload.update(rel_counts=np.array([len(first), len(second), 5]), ks=np.array([6, 3]))
    payload.update(ids=np.concatenate([first, second, first[:5]]).astype(np.int32))
    payload.update(states=np.array([7, 11], np.uint64), replace=False, weighted=False, last=False)
    plain = server.handle("draw", payload)
    arena = np.zeros(1 << 20, np.uint8)
    placed = server.handle("draw", payload, arena=arena)
    for name in ("counts", "nbrs", "e_id"):
        assert np.array_equal(placed[name], plain[name]) and placed[name].dtype == plain[name].dtype
    total = plain["nbrs"].shape[0]
    assert total == int(plain["counts"].sum()) > 0
    assert placed["nbrs"].ctypes.data == arena.ctypes.data  # the arena's start, not a copy
    assert np.shares_memory(placed["e_id"], arena) and not np.shares_memory(placed["nbrs"], placed["e_id"])
    small = server.handle("draw", payload, arena=np.zeros(64, np.uint8))  # too small for the bound: fresh arrays
    assert not np.shares_memory(small["nbrs"], arena) and np.array_equal(small["e_id"], plain["e_id"])


def test_service_sampling_samplers_pickle_in_constant_size_and_draw_the_same(tmp_path):
    rng = np.random.default_rng(5)
    graph = _graph(rng, 30_000, 120_000)
    node_time = rng.integers(0, 50, graph.num_nodes)
    book = partition(graph, tmp_path / "p", 3, method="range", node_time=node_time)
    remote = RemoteSampler(_serve(tmp_path / "p", [(0, 2), (1,)]), book, [4, 3], seed=9, node_time=node_time)
    local = gg.NeighborSampler(graph, [4, 3], seed=9, node_time=node_time)
    seeds = rng.integers(0, graph.num_nodes, 64)
    _same(remote.sample(seeds), local.sample(seeds))
    # the book's node times alone are 240 kB, the partitions' rows several MB: none of it travels
    assert len(pickle.dumps(remote)) < 4000
    clone = pickle.loads(pickle.dumps(remote))
    for key in (None, 77):  # the clone's counter continues from the original's
        _same(clone.sample(seeds, key=key), local.sample(seeds, key=key))

    counts = {"a": 40, "b": 60, "c": 9}
    typed = _typed_graph(rng, counts)
    times = {t: rng.integers(0, 9, n) for t, n in counts.items()}
    typed_book = partition(typed, tmp_path / "t", 2, method="metis", node_time=times)
    remote = RemoteHeteroSampler(_serve(tmp_path / "t", [(1,), (0,)]), typed_book, [3, 2], node_time=times)
    local = gg.HeteroNeighborSampler(typed, [3, 2], node_time=times)
    seeds = {"b": rng.integers(0, 60, 10)}
    clone = pickle.loads(pickle.dumps(remote))
    _same(clone.sample(seeds, key=5), local.sample(seeds, key=5))


def test_service_sampling_a_ray_clusters_sampler_refuses_pickling_by_name(tmp_path):
    # pickle met a lock deep inside the Ray transport: "cannot pickle '_thread.lock' object"
    from types import SimpleNamespace

    from gglspeedup.service import RayTransport

    graph = _graph(np.random.default_rng(2), 20, 60)
    book = partition(graph, tmp_path / "p", 2, method="range")
    replicas = [[SimpleNamespace(restarts_left=0)], [SimpleNamespace(restarts_left=1)]]
    transport = RayTransport(replicas, [(0,), (1,)], deadline=1.0, startup=1.0)
    sampler = RemoteSampler(transport, book, [2])
    for what in (transport, sampler):
        with pytest.raises(TypeError, match=r"a cluster's RayTransport .* cannot be pickled: .* named=True"):
            pickle.dumps(what)


def test_service_sampling_a_ray_transport_refuses_calls_from_a_forked_child():
    # a DataLoader's forked workers shared the parent's connections: interleaved frames, a KeyError,
    # a segfault, a 60 s hang or a server killed as hung, depending on the run
    from types import SimpleNamespace

    from gglspeedup.service import RayTransport

    transport = RayTransport([[SimpleNamespace(restarts_left=0)]], [(0,)], deadline=1.0, startup=1.0)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            transport.call({0: ("draw", {})}, key=3)
            message = "answered"
        except BaseException as error:
            message = f"{type(error).__name__}: {error}"
        os.write(write, message.encode()[:4000])
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        message = pipe.read()
    os.waitpid(child, 0)
    assert message.startswith(f"RuntimeError: a cluster's transport is used in process {child}, forked from process ")
    assert "num_workers=0" in message


class _Gate:
    """A transport whose calls wait until ``ready()`` first holds (so that batches queue up behind
    them), recording each call's requests; ``fail`` makes every merged call raise."""

    def __init__(self, transport, ready, fail=None):
        self.transport, self.ready, self.fail = transport, ready, fail
        self.group_parts = transport.group_parts
        self.calls = []
        self.open = False

    def call(self, requests, *, key=None):
        deadline = time.monotonic() + 60
        while not self.open and time.monotonic() < deadline:
            self.open = self.ready()
            time.sleep(0.005)
        self.calls.append({g: payload for g, (_, payload) in requests.items()})
        if self.fail is not None and any("part_batch" in payload for _, payload in requests.values()):
            raise self.fail
        return self.transport.call(requests, key=key)

    def close(self):
        pass


def test_service_sampling_concurrent_batches_share_requests_and_equal_the_local_sampler(tmp_path):
    rng = np.random.default_rng(8)
    graph = _graph(rng, 300, 3000)
    book = partition(graph, tmp_path / "p", 3, method="metis")
    gate = _Gate(_serve(tmp_path / "p", [(0, 2), (1,)]), lambda: len(remote._merged._queue) >= 4)
    remote = RemoteSampler(gate, book, [4, 3], seed=2)
    local = gg.NeighborSampler(graph, [4, 3], seed=2)
    batches = [rng.integers(0, 300, 25) for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        outputs = list(pool.map(lambda key: remote.sample(batches[key], key=key), range(8)))
    for key, output in enumerate(outputs):
        _same(output, local.sample(batches[key], key=key))
    merged = [payload for call in gate.calls for payload in call.values() if "part_batch" in payload]
    assert merged and len(gate.calls) < 16  # fewer calls than hops: some carried several batches
    for payload in merged:  # one run of partitions per batch, each with its own fanouts and states
        assert payload["part_batch"].shape == payload["parts"].shape
        assert payload["ks"].shape == payload["states"].shape == (payload["part_batch"].max() + 1,)

    counts = {"a": 40, "b": 60, "c": 9}  # typed and temporal: one row of relations per batch
    typed = _typed_graph(rng, counts)
    times = {t: rng.integers(0, 9, n) for t, n in counts.items()}
    typed_book = partition(typed, tmp_path / "t", 3, method="metis", node_time=times)
    gate = _Gate(_serve(tmp_path / "t", [(1,), (0, 2)]), lambda: len(remote._merged._queue) >= 4)
    remote = RemoteHeteroSampler(gate, typed_book, [3, 2], node_time=times)
    local = gg.HeteroNeighborSampler(typed, [3, 2], node_time=times)
    seeds = [{"b": rng.integers(0, 60, 6), "a": rng.integers(0, 40, 3)} for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        outputs = list(pool.map(lambda key: remote.sample(seeds[key], key=key), range(8)))
    for key, output in enumerate(outputs):
        _same(output, local.sample(seeds[key], key=key))
    assert any("part_batch" in payload for call in gate.calls for payload in call.values())


def test_service_sampling_a_shared_request_failure_names_each_batch_key(tmp_path):
    rng = np.random.default_rng(9)
    graph = _graph(rng, 200, 2000)
    book = partition(graph, tmp_path / "p", 2, method="range")
    failure = ServerUnavailable(1, (1,), 0, "deadline", "no answer in 5 s")
    gate = _Gate(_serve(tmp_path / "p", [(0,), (1,)]), lambda: len(remote._merged._queue) >= 3, fail=failure)
    remote = RemoteSampler(gate, book, [3])
    keys = [11, 12, 13, 14, 15, 16]

    def sample(key):
        try:
            remote.sample(rng.integers(0, 200, 10), key=key)
        except ServerUnavailable as error:
            return error
        return None

    with ThreadPoolExecutor(len(keys)) as pool:
        errors = dict(zip(keys, pool.map(sample, keys)))
    named = {key: error for key, error in errors.items() if error is not None}
    assert named  # the merged call failed: each of its batches names itself
    for key, error in named.items():
        assert error.key == key and error.server == 1 and error.parts == (1,) and error.reason == "deadline"


@pytest.mark.parametrize("timed", [False, True])
def test_service_sampling_server_answers_read_only_requests_without_compiling_again(tmp_path, timed):
    from gglspeedup.sampling._kernels.remote_rows import draw_owned_rows

    rng = np.random.default_rng(10)
    graph = _graph(rng, 50, 400)
    times = {"node_time": rng.integers(0, 9, 50)} if timed else {}
    book = partition(graph, tmp_path / "p", 2, method="range", **times)
    server = PartServer(tmp_path / "p", [1])  # warms its kernels for the requests it can get
    compiled = len(draw_owned_rows.signatures)
    ids = book.nodes(1)[:6].astype(np.int32)
    payload = {"parts": np.array([1]), "rel_counts": np.array([6]), "ids": ids, "ks": np.array([3])}
    payload.update(states=np.array([5], np.uint64), replace=False, weighted=False, last=False)
    if timed:
        payload["times"] = rng.integers(0, 9, 6).astype(book.time_dtype)
    expected = server.handle("draw", payload)
    frozen = {}
    for name, value in payload.items():  # what Ray hands a server: read-only arrays
        frozen[name] = value.copy() if isinstance(value, np.ndarray) else value
        if isinstance(value, np.ndarray):
            frozen[name].setflags(write=False)
    answer = server.handle("draw", frozen)
    assert all(np.array_equal(answer[name], expected[name]) for name in ("counts", "nbrs", "e_id"))
    assert len(draw_owned_rows.signatures) == compiled  # nothing compiled against the request's deadline


def test_service_sampling_a_loader_with_two_workers_gives_the_local_loaders_batches(tmp_path):
    rng = np.random.default_rng(11)
    graph = _graph(rng, 300, 3000)
    x = rng.random((300, 3)).astype(np.float32)
    book = partition(graph, tmp_path / "p", 3, method="range")
    remote = RemoteSampler(_serve(tmp_path / "p", [(0, 2), (1,)]), book, [4, 3], seed=2)
    local = gg.NeighborSampler(graph, [4, 3], seed=2)
    seeds = rng.permutation(300)[:70]

    def epochs(sampler, workers):
        loader = gg.NodeLoader(sampler, x, seeds, 8, workers=workers, backend=None, seed=3)
        return [list(loader) for _ in range(2)]

    want = epochs(local, 1)
    for got in (epochs(remote, 2), epochs(local, 2)):
        for epoch_got, epoch_want in zip(got, want):
            assert len(epoch_got) == len(epoch_want) == 9
            for batch, reference in zip(epoch_got, epoch_want):
                assert np.array_equal(batch.n_id, reference.n_id) and batch.n_id.dtype == reference.n_id.dtype
                assert np.array_equal(batch.x, reference.x) and batch.batch_size == reference.batch_size
                for a, b in zip(batch.adjs, reference.adjs, strict=True):
                    assert a.size == b.size and np.array_equal(a.edge_index, b.edge_index)
                    assert np.array_equal(a.e_id, b.e_id) and a.e_id.dtype == b.e_id.dtype


def test_service_sampling_server_warmed_by_its_first_part_compiles_nothing_for_an_edgeless_one(tmp_path):
    from gglspeedup.sampling._kernels.remote_rows import draw_owned_rows

    # float32 weights; range parts [0], [1] hold every edge, part 2 (nodes 2 .. 19) none. A server
    # warms on its first part alone ("every part has the same array types"), but an edgeless part's
    # placeholder weights were float64: a request there compiled a kernel against its deadline
    rng = np.random.default_rng(0)
    edge_index = np.stack((rng.integers(0, 20, 40), np.repeat([0, 1], 20)))
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=20, weights=rng.random(40).astype(np.float32))
    book = partition(graph, tmp_path / "p", 3, method="range")
    assert [size["edges"] for size in book.part_sizes] == [20, 20, 0]
    server = PartServer(tmp_path / "p", [0, 1, 2])
    compiled = len(draw_owned_rows.signatures)
    transport = LocalTransport([server], [(0, 1, 2)])
    remote = RemoteSampler(transport, book, [2], seed=1).sample(np.arange(20), key=3)
    RemoteSampler(transport, book, [2], seed=1, weighted=True).sample(np.arange(20), key=3)
    assert len(draw_owned_rows.signatures) == compiled
    # unweighted draws read no weights: the graph without them is the reference (its float32-weighted
    # twin would compile the local kernels once more, for this test alone)
    unweighted = gg.CSRGraph.from_edge_index(edge_index, num_nodes=20)
    _same(remote, gg.NeighborSampler(unweighted, [2], seed=1).sample(np.arange(20), key=3))

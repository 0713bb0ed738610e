"""Typed NodeLoader / LinkLoader: batches are the typed sampler's output replayed by key, with the
exact feature rows and labels per node type; coverage, shuffling, prefetch, shutdown, conversion
and errors as for the untyped loaders; CPU and (simulated) GPU bit for bit."""

import threading

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.loader import HeteroBatch, HeteroLinkBatch, LinkLoader, NodeLoader

from conftest import CITES, WRITES, WRITTEN_BY, academic_graph, assert_close_stops_the_producer, to_host, wait_for_exit


def typed_graph(seed=3, sizes=(12, 9, 4), edges=(40, 30, 30, 10)):
    """Citations, authorship both ways and topics; "field" has no features in the tests."""
    return academic_graph(np.random.default_rng(seed), dict(zip(("paper", "author", "field"), sizes)), edges)


def make_data(**sizes):
    graph = typed_graph(**sizes)
    n = graph.num_nodes
    tables = {
        "paper": np.arange(n["paper"] * 3, dtype=np.float32).reshape(-1, 3),
        "author": -np.arange(n["author"] * 2, dtype=np.float32).reshape(-1, 2),
    }
    labels = {"paper": (np.arange(n["paper"]) * 7) % 5, "author": np.arange(n["author"]) + 100}
    return graph, tables, labels


@pytest.fixture(scope="module")
def data():
    return make_data()


SEEDS = {"author": np.array([0, 3, 3, 8]), "paper": np.arange(2, 11)}  # 13 seeds, author given first


def make_loader(data, seeds=SEEDS, batch_size=4, device="cpu", features=None, **options):
    graph, tables, labels = data
    sampler = gg.HeteroNeighborSampler(graph, [2, 1], seed=1, device=device)
    if features is None:
        features = {t: gg.FeatureStore(table, device=device) for t, table in tables.items()}
    options.setdefault("backend", None)
    options.setdefault("labels", labels)
    return NodeLoader(sampler, features, seeds, batch_size, **options)


def typed_seeds(batch):
    """The batch's seeds as (type, id) pairs."""
    return [(t, int(i)) for t, size in batch.batch_size.items() for i in to_host(batch.n_id[t])[:size]]


def as_pairs(order, types):
    return [(types[int(p)], int(i)) for p, i in order.T]


@pytest.mark.parametrize("drop_last", [False, True])
def test_every_seed_once_per_epoch(data, drop_last):
    loader = make_loader(data, drop_last=drop_last)
    assert len(loader) == (3 if drop_last else 4) and loader.seed_types == ("paper", "author")
    expected = sorted([("author", int(i)) for i in SEEDS["author"]] + [("paper", int(i)) for i in SEEDS["paper"]])
    for epoch in range(2):
        batches = list(loader)
        assert len(batches) == len(loader) and all(isinstance(b, HeteroBatch) for b in batches)
        assert [sum(b.batch_size.values()) for b in batches] == ([4, 4, 4] if drop_last else [4, 4, 4, 1])
        got = [pair for b in batches for pair in typed_seeds(b)]
        if drop_last:
            assert len(got) == 12 and all(pair in expected for pair in got)
        else:
            assert sorted(got) == expected  # duplicates kept: author 3 twice
        # within a batch the loader keeps each type's seeds in epoch order
        order = as_pairs(loader.order(epoch), loader.seed_types)
        for index, batch in enumerate(batches):
            chunk = order[index * 4 : index * 4 + 4]
            assert typed_seeds(batch) == [p for t in batch.batch_size for p in chunk if p[0] == t]


def test_order_is_keyed_by_seed_and_epoch_and_mixes_types(data):
    first, second = make_loader(data, seed=7), make_loader(data, seed=7)
    epoch0 = [typed_seeds(b) for b in first]
    epoch1 = [typed_seeds(b) for b in first]
    assert epoch0 == [typed_seeds(b) for b in second]
    assert epoch0 != epoch1
    assert epoch0 != [typed_seeds(b) for b in make_loader(data, seed=8)]
    assert any(min(b.batch_size.values()) > 0 for b in make_loader(data, seed=7))  # types shuffled together
    second.set_epoch(1)
    assert [typed_seeds(b) for b in second] == epoch1


def test_without_shuffle_seeds_come_type_by_type_in_the_samplers_order(data):
    loader = make_loader(data, shuffle=False, batch_size=5)
    got = [pair for b in loader for pair in typed_seeds(b)]
    want = [("paper", int(i)) for i in SEEDS["paper"]] + [("author", int(i)) for i in SEEDS["author"]]
    assert got == want
    assert as_pairs(loader.order(0), loader.seed_types) == want


@pytest.mark.parametrize("prefetch", [0, 2])
def test_batches_are_the_sampler_replayed_by_key_with_exact_rows_and_labels(data, prefetch):
    graph, tables, labels = data
    loader = make_loader(data, seed=2, prefetch=prefetch)
    reference = gg.HeteroNeighborSampler(graph, [2, 1], seed=1)
    loader.set_epoch(3)
    order = loader.order(3)
    for index, batch in enumerate(loader):
        chunk = order[:, index * 4 : index * 4 + 4]
        seeds = {t: chunk[1][chunk[0] == p] for p, t in enumerate(loader.seed_types)}
        want = reference.sample(seeds, key=3 * len(loader) + index)
        assert list(batch.n_id) == list(want.n_id)
        for t in want.n_id:
            np.testing.assert_array_equal(batch.n_id[t], want.n_id[t])
        assert len(batch.adjs) == len(want.adjs)
        for layer, want_layer in zip(batch.adjs, want.adjs):
            assert list(layer) == list(want_layer)
            for et, adj in layer.items():
                np.testing.assert_array_equal(adj.edge_index, want_layer[et].edge_index)
                np.testing.assert_array_equal(adj.e_id, want_layer[et].e_id)
                assert adj.size == want_layer[et].size
        assert batch.num_sampled_nodes == want.num_sampled_nodes
        assert batch.num_sampled_edges == want.num_sampled_edges
        assert batch.batch_size == {t: len(ids) for t, ids in seeds.items()}
        assert sorted(batch.x) == ["author", "paper"]  # "field" has no features
        for t, rows in batch.x.items():
            np.testing.assert_array_equal(rows, tables[t][batch.n_id[t]])
        assert sorted(batch.y) == ["author", "paper"]
        for t, y in batch.y.items():
            np.testing.assert_array_equal(y, labels[t][seeds[t]])


def test_a_disjoint_typed_samplers_trees_reach_the_batch(data):
    # HeteroBatch dropped the sampler output's batch (each row's tree, per node type)
    graph, tables, _ = data
    sampler = gg.HeteroNeighborSampler(graph, [2, 1], seed=1, disjoint=True)
    loader = NodeLoader(sampler, dict(tables), SEEDS, 4, backend=None, shuffle=False)
    order = loader.order(0)
    for index, batch in enumerate(loader):
        chunk = order[:, index * 4 : index * 4 + 4]
        seeds = {t: chunk[1][chunk[0] == p] for p, t in enumerate(loader.seed_types)}
        want = sampler.sample(seeds, key=index)
        assert sorted(batch.batch) == sorted(want.batch) and len(batch) == 7
        for t, trees in want.batch.items():
            np.testing.assert_array_equal(batch.batch[t], trees)
    assert next(iter(make_loader(data))).batch is None


def test_the_same_epoch_twice_gives_identical_batches(data):
    loader = make_loader(data, prefetch=2)
    loader.set_epoch(5)
    first = list(loader)
    loader.set_epoch(5)
    second = list(loader)
    for a, b in zip(first, second, strict=True):
        assert a.batch_size == b.batch_size and a.num_sampled_edges == b.num_sampled_edges
        for t in a.n_id:
            np.testing.assert_array_equal(a.n_id[t], b.n_id[t])
        for t in a.x:
            np.testing.assert_array_equal(a.x[t], b.x[t])
        for layer_a, layer_b in zip(a.adjs, b.adjs):
            for et in layer_a:
                np.testing.assert_array_equal(layer_a[et].edge_index, layer_b[et].edge_index)


def test_plain_arrays_a_pair_of_seeds_and_one_labels_array(data):
    graph, tables, labels = data
    sampler = gg.HeteroNeighborSampler(graph, [2], seed=4)
    features = {"paper": tables["paper"], "author": tables["author"], "field": None}
    loader = NodeLoader(sampler, features, ("paper", [1, 5, 7]), 2, labels=labels["paper"], backend=None)
    batches = list(loader)
    assert [b.batch_size for b in batches] == [{"paper": 2}, {"paper": 1}]
    for batch in batches:
        assert set(batch.x) == {"paper", "author"}
        for t, rows in batch.x.items():
            np.testing.assert_array_equal(rows, tables[t][batch.n_id[t]])
        np.testing.assert_array_equal(
            batch.y["paper"], labels["paper"][batch.n_id["paper"][: batch.batch_size["paper"]]]
        )
    assert make_loader(data, labels=None).__iter__().__next__().y is None


class RowsByType:
    """A typed store of the simplest kind: ``gather(dict) -> dict`` and its feature types."""

    def __init__(self, tables):
        self.tables, self.feature_types, self.asked = tables, tuple(tables), []

    def gather(self, ids):
        self.asked.append(sorted(ids))
        return {t: self.tables[t][np.asarray(i)] for t, i in ids.items()}


def test_a_typed_store_is_asked_for_its_feature_types_only(data):
    _graph, tables, _labels = data
    store = RowsByType({"paper": tables["paper"]})
    batches = list(make_loader(data, features=store))
    assert store.asked == [["paper"]] * len(batches)
    for batch in batches:
        assert list(batch.x) == ["paper"]
        np.testing.assert_array_equal(batch.x["paper"], tables["paper"][batch.n_id["paper"]])


def test_a_hetero_feature_store_gathers_into_recycled_buffers(data):
    store_class = getattr(gg.feature, "HeteroFeatureStore", None)
    if store_class is None:
        pytest.skip("gglspeedup.feature has no HeteroFeatureStore yet")
    graph, tables, _labels = data
    loader = make_loader(data, features=store_class(dict(tables), graph=graph), prefetch=0)
    kept, gathered = None, 0
    for _ in range(3):
        for batch in loader:
            for t, rows in batch.x.items():
                np.testing.assert_array_equal(rows, tables[t][batch.n_id[t]])
                gathered += len(rows) > 0  # an empty type takes no buffer
            kept = batch if kept is None else kept  # held to the end: its buffers must not come back
    for t, rows in kept.x.items():
        np.testing.assert_array_equal(rows, tables[t][kept.n_id[t]])
    stats = loader.stats()
    assert stats["buffers_reused"] > 0
    assert stats["buffers_reused"] + stats["buffers_allocated"] + stats["buffers_unpooled"] == gathered


def test_stats_sum_over_types(data):
    loader = make_loader(data, prefetch=0)
    batches = list(loader)
    stats = loader.stats(reset=True)
    assert stats["batches"] == 4 and stats["seeds"] == 13
    assert stats["nodes"] == sum(len(ids) for b in batches for ids in b.n_id.values())
    assert stats["edges"] == sum(a.edge_index.shape[1] for b in batches for layer in b.adjs for a in layer.values())
    gathered = sum(len(rows) > 0 for b in batches for rows in b.x.values())
    assert stats["buffers_allocated"] + stats["buffers_reused"] + stats["buffers_unpooled"] == gathered
    assert loader.stats()["batches"] == 0 and loader.stats()["buffers_allocated"] == 0


def test_torch_backend_converts_every_dict(data):
    torch = pytest.importorskip("torch")
    batch = next(iter(make_loader(data, backend="torch")))
    assert all(isinstance(rows, torch.Tensor) and rows.dtype == torch.float32 for rows in batch.x.values())
    assert all(ids.dtype == torch.int64 for ids in batch.n_id.values())
    assert all(isinstance(y, torch.Tensor) for y in batch.y.values())
    adj = batch.adjs[-1][WRITES]
    assert adj.edge_index.dtype == torch.int64 and all(type(s) is int for s in adj.size)
    assert all(type(v) is int for v in batch.batch_size.values())
    assert all(type(c) is int for counts in batch.num_sampled_nodes.values() for c in counts)


def test_leaving_early_and_abandoning_the_iterator_stop_the_producer(data):
    loader = make_loader(data, batch_size=1, prefetch=2)
    assert_close_stops_the_producer(loader)
    iterator = iter(loader)
    next(iterator)
    threads = iterator._threads
    del iterator  # the producer holds no reference to it: __del__ stops it
    assert not wait_for_exit(threads)


def test_a_failing_typed_sampler_raises_in_the_loop(data):
    class Failing(gg.HeteroNeighborSampler):
        def sample(self, seeds, key=None):
            if key:
                raise ZeroDivisionError("typed sampler broke on purpose")
            return super().sample(seeds, key=key)

    graph, tables, _labels = data
    loader = NodeLoader(Failing(graph, [2]), tables, SEEDS, 4, backend=None, prefetch=2)
    before = set(threading.enumerate())
    with pytest.raises(ZeroDivisionError, match="on purpose"):
        list(loader)
    assert not wait_for_exit(set(threading.enumerate()) - before)


@pytest.mark.parametrize(
    "change, error, message",
    [
        ({"seeds": np.arange(3)}, TypeError, "a typed sampler needs seeds as a dict"),
        ({"seeds": {}}, ValueError, "at least one node type"),
        ({"seeds": {"venue": [0]}}, ValueError, "node type 'venue', which the sampler does not know"),
        ({"seeds": {"author": [0, 9]}}, IndexError, r"seeds\['author'\]\[1\] = 9 is out of range \[0, num_nodes = 9\)"),
        ({"seeds": {"paper": [0.5]}}, TypeError, "must hold integers"),
        ({"seeds": {"paper": [[0]]}}, ValueError, "must be 1-D"),
        (
            {"labels": {"paper": np.zeros(11)}},
            ValueError,
            r"labels\['paper'\] must have one entry per 'paper' node \(12\)",
        ),
        ({"labels": {"venue": np.zeros(3)}}, ValueError, "labels names node type 'venue'"),
        ({"labels": np.zeros(12)}, TypeError, "dict node type -> array when the seeds have several types"),
        ({"features": {"paper": np.zeros((11, 3))}}, ValueError, r"features\['paper'\] has 11 rows .* = 12"),
        ({"features": {"venue": np.zeros((2, 3))}}, ValueError, "features names node type 'venue'"),
        ({"features": {"paper": object()}}, TypeError, "FeatureStore or an array"),
        ({"features": np.zeros((12, 3))}, TypeError, "typed features"),
        ({"batch_size": 0}, ValueError, "batch_size"),
    ],
)
def test_bad_typed_arguments_raise_at_construction(data, change, error, message):
    graph, tables, labels = data
    arguments = {"seeds": SEEDS, "features": tables, "labels": labels, "batch_size": 4}
    arguments.update(change)
    sampler = gg.HeteroNeighborSampler(graph, [2])
    with pytest.raises(error, match=message):
        NodeLoader(sampler, arguments.pop("features"), arguments.pop("seeds"), arguments.pop("batch_size"), **arguments)


def test_typed_seeds_need_a_typed_sampler(data):
    csr = gg.CSRGraph.from_edge_index([[0, 1], [1, 0]], num_nodes=2)
    with pytest.raises(TypeError, match="seeds per node type need a typed sampler"):
        NodeLoader(gg.NeighborSampler(csr, [1]), np.eye(2), {"paper": [0]}, 1)


# ---------------------------------------------------------------------- links
PAIRS = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2], [0, 2, 4, 6, 8, 10, 11, 1, 3, 5, 7]])  # author -> paper


def make_link_loader(data, device="cpu", batch_size=4, pairs=PAIRS, **options):
    graph, tables, _labels = data
    sampler = gg.HeteroNeighborSampler(graph, [2, 1], seed=2, device=device)
    features = {t: gg.FeatureStore(table, device=device) for t, table in tables.items()}
    options.setdefault("backend", None)
    options.setdefault("edge_type", WRITES)
    return LinkLoader(sampler, features, pairs, batch_size, **options)


def link_positives(batch):
    src, _, dst = batch.edge_type
    pair_index = to_host(batch.pair_index)[:, : batch.batch_size]
    return np.stack((to_host(batch.n_id[src])[pair_index[0]], to_host(batch.n_id[dst])[pair_index[1]]))


@pytest.mark.parametrize("negatives", [None, "binary", "per_source", "triplet"])
def test_link_batches_are_sample_links_replayed_by_key(data, negatives):
    graph, tables, _labels = data
    labels = np.arange(PAIRS.shape[1], dtype=np.float32) + 1
    options = {"negatives": negatives, "num_negatives": 2, "exclude": "reverse", "reverse_edge_type": WRITTEN_BY}
    loader = make_link_loader(data, labels=labels, seed=1, **options)
    sampler = gg.HeteroNeighborSampler(graph, [2, 1], seed=2)
    loader.set_epoch(2)
    order = loader.order(2)
    columns = loader._items_in_order(loader._permutation(2))[2]
    batches = list(loader)
    assert [b.batch_size for b in batches] == [4, 4, 3]
    for index, batch in enumerate(batches):
        assert isinstance(batch, HeteroLinkBatch) and batch.edge_type == WRITES
        pairs, chunk = order[:, index * 4 : index * 4 + 4], columns[index * 4 : index * 4 + 4]
        want = sampler.sample_links(pairs, labels[chunk], edge_type=WRITES, key=2 * len(loader) + index, **options)
        np.testing.assert_array_equal(link_positives(batch), pairs)
        np.testing.assert_array_equal(batch.pair_index, want.pair_index)
        np.testing.assert_array_equal(batch.labels, want.labels)
        assert batch.labels[: batch.batch_size].tolist() == labels[chunk].tolist()
        assert (batch.labels[batch.batch_size :] == 0).all()
        expected_pairs = {None: 4, "binary": 12, "per_source": 12, "triplet": 4}[negatives] * len(chunk) // 4
        assert batch.pair_index.shape == (2, expected_pairs)
        if negatives == "triplet":
            assert batch.negative_targets.shape == (len(chunk), 2)
            np.testing.assert_array_equal(batch.negative_targets, want.negative_targets)
        else:
            assert batch.negative_targets is None
        for t in want.n_id:
            np.testing.assert_array_equal(batch.n_id[t], want.n_id[t])
        for layer, want_layer in zip(batch.adjs, want.adjs, strict=True):
            for et, adj in layer.items():
                np.testing.assert_array_equal(adj.edge_index, want_layer[et].edge_index)
        assert batch.num_sampled_nodes == want.num_sampled_nodes
        for t, rows in batch.x.items():
            np.testing.assert_array_equal(rows, tables[t][batch.n_id[t]])


def test_link_loader_covers_every_pair_once_and_counts(data):
    loader = make_link_loader(data, negatives="binary", prefetch=2)
    for _ in range(2):
        got = np.concatenate([link_positives(b) for b in loader], axis=1)
        assert sorted(zip(*got.tolist())) == sorted(zip(*PAIRS.tolist()))
    stats = loader.stats()
    assert stats["batches"] == 6 and stats["pairs"] == 22 and stats["negatives"] == 22


def test_link_loader_torch_batches(data):
    torch = pytest.importorskip("torch")
    batch = next(iter(make_link_loader(data, backend="torch", negatives="triplet")))
    assert batch.pair_index.dtype == torch.int64 and batch.labels.dtype == torch.float32
    assert isinstance(batch.negative_targets, torch.Tensor) and batch.edge_type == WRITES
    assert all(isinstance(rows, torch.Tensor) for rows in batch.x.values())


@pytest.mark.parametrize(
    "change, error, message",
    [
        ({"edge_type": None}, TypeError, "a typed sampler needs edge_type"),
        ({"edge_type": ("author", "cites", "paper")}, ValueError, "not an edge type of the graph"),
        ({"edge_type": "writes"}, TypeError, "tuple of str"),
        ({"pairs": np.array([[0, 9], [0, 0]])}, IndexError, r"pairs\[0\]\[1\] = 9 .*num_nodes\['author'\] = 9"),
        ({"pairs": np.array([[0, 0], [0, 12]])}, IndexError, r"pairs\[1\]\[1\] = 12 .*num_nodes\['paper'\] = 12"),
        ({"exclude": "reverse"}, ValueError, "needs reverse_edge_type"),
        ({"exclude": "reverse", "reverse_edge_type": CITES}, ValueError, "must go from 'paper' to 'author'"),
        ({"features": {"author": np.zeros((8, 2))}}, ValueError, r"features\['author'\] has 8 rows"),
    ],
)
def test_bad_typed_link_arguments_raise_at_construction(data, change, error, message):
    graph, tables, _labels = data
    arguments = {"features": tables, "pairs": PAIRS, "edge_type": WRITES}
    arguments.update(change)
    sampler = gg.HeteroNeighborSampler(graph, [2])
    with pytest.raises(error, match=message):
        LinkLoader(sampler, arguments.pop("features"), arguments.pop("pairs"), 4, **arguments)


def test_edge_type_needs_a_typed_sampler():
    csr = gg.CSRGraph.from_edge_index([[0, 1], [1, 0]], num_nodes=2)
    with pytest.raises(TypeError, match="edge_type and reverse_edge_type need a typed sampler"):
        LinkLoader(gg.NeighborSampler(csr, [1]), np.eye(2), [[0], [1]], 1, edge_type=WRITES)


# ---------------------------------------------------------------------- GPU (simulated on CPU machines)
@pytest.mark.parametrize("device", [pytest.param("cuda:0", id="cuda", marks=pytest.mark.cuda)])
def test_cuda_typed_loaders_match_the_cpu(device):
    tiny = make_data(sizes=(6, 5, 3), edges=(10, 8, 8, 4))
    seeds = {"paper": [0, 4], "author": [1, 3]}
    options = {"seeds": seeds, "batch_size": 2, "prefetch": 0}
    cpu = list(make_loader(tiny, device="cpu", **options))
    gpu = list(make_loader(tiny, device=device, **options))  # collected before the next kernels run
    store_class = getattr(gg.feature, "HeteroFeatureStore", None)
    if store_class is not None:  # one type's rows cached on the device, the other's read from the host
        store = store_class(dict(tiny[1]), device=device, cache_size=6 * 12, graph=tiny[0])
        cpu, gpu = cpu + cpu, gpu + list(make_loader(tiny, device=device, features=store, **options))
    links = {"pairs": [[0, 1, 4], [0, 2, 5]], "negatives": "binary", "batch_size": 3}
    cpu_links = list(make_link_loader(tiny, device="cpu", **links))
    gpu_links = list(make_link_loader(tiny, device=device, **links))
    _graph, tables, _labels = tiny
    for a, b in zip(cpu + cpu_links, gpu + gpu_links, strict=True):
        for t in a.n_id:
            np.testing.assert_array_equal(to_host(a.n_id[t]), to_host(b.n_id[t]))
        assert set(a.x) == set(b.x) == {"paper", "author"}
        for t in a.x:
            np.testing.assert_array_equal(to_host(b.x[t]), tables[t][to_host(b.n_id[t])])
        for layer_a, layer_b in zip(a.adjs, b.adjs, strict=True):
            for et in layer_a:
                np.testing.assert_array_equal(to_host(layer_a[et].edge_index), to_host(layer_b[et].edge_index))
        if isinstance(a, HeteroBatch):
            for t in a.y:
                np.testing.assert_array_equal(to_host(a.y[t]), to_host(b.y[t]))
        else:
            np.testing.assert_array_equal(to_host(a.pair_index), to_host(b.pair_index))

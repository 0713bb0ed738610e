"""LinkLoader: every pair once per epoch, batches equal sample_links with the loader's keys, features, labels."""

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.loader import LinkBatch, LinkLoader
from gglspeedup.testing import assert_same_sample

from conftest import to_host


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(8)
    edges = rng.integers(0, 30, size=(2, 90))
    edges = np.concatenate([edges, edges[::-1]], axis=1)
    graph = gg.CSRGraph.from_edge_index(edges, num_nodes=30)
    x = np.arange(30 * 4, dtype=np.float32).reshape(30, 4)
    return graph, x, edges[:, :23]


def make_loader(data, device="cpu", batch_size=5, **options):
    graph, x, pairs = data
    sampler = gg.NeighborSampler(graph, [3, 2], seed=2, device=device)
    options.setdefault("backend", None)
    return LinkLoader(sampler, gg.FeatureStore(x, device=device), pairs, batch_size, **options)


def positives(batch):
    """The batch's own pairs, as global ids (columns of the loader's pair array)."""
    n_id, pair_index = to_host(batch.n_id), to_host(batch.pair_index)
    return n_id[pair_index[:, : batch.batch_size]]


@pytest.mark.parametrize("drop_last", [False, True])
def test_every_pair_once_per_epoch_and_orders_keyed_by_seed_and_epoch(data, drop_last):
    loader = make_loader(data, drop_last=drop_last, seed=4)
    pairs = data[2]
    assert len(loader) == (4 if drop_last else 5)
    epochs = []
    for epoch in range(2):
        batches = list(loader)
        got = np.concatenate([positives(b) for b in batches], axis=1)
        np.testing.assert_array_equal(got, loader.order(epoch)[:, : got.shape[1]])
        assert [b.batch_size for b in batches] == ([5] * 4 if drop_last else [5, 5, 5, 5, 3])
        if not drop_last:  # the same multiset of columns as the pair array
            key = lambda a: sorted(zip(a[0].tolist(), a[1].tolist()))  # noqa: E731
            assert key(got) == key(pairs)
        epochs.append(got)
    assert not np.array_equal(epochs[0], epochs[1])
    again = make_loader(data, drop_last=drop_last, seed=4)
    np.testing.assert_array_equal(np.concatenate([positives(b) for b in again], axis=1), epochs[0])
    assert isinstance(batches[0], LinkBatch)


@pytest.mark.parametrize("negatives", [None, "binary", "per_source", "triplet"])
def test_batches_are_sample_links_with_the_loader_keys_and_the_feature_rows(data, device, negatives):
    graph, x, _ = data
    loader = make_loader(data, device, negatives=negatives, num_negatives=2, exclude="reverse", seed=1)
    sampler = gg.NeighborSampler(graph, [3, 2], seed=2, device=device)
    loader.set_epoch(3)
    order = loader.order(3)
    batches = list(loader)  # the whole epoch first: numba's simulator runs one kernel at a time
    for index, batch in enumerate(batches):
        pairs = order[:, index * 5 : index * 5 + 5]
        expected = sampler.sample_links(
            pairs, negatives=negatives, num_negatives=2, exclude="reverse", key=3 * len(loader) + index
        )
        assert_same_sample(gg.SampleOutput(batch.n_id, batch.adjs), expected.sample_output)
        np.testing.assert_array_equal(to_host(batch.pair_index), to_host(expected.pair_index))
        np.testing.assert_array_equal(to_host(batch.labels), to_host(expected.labels))
        if negatives == "triplet":
            np.testing.assert_array_equal(to_host(batch.negative_targets), to_host(expected.negative_targets))
        else:
            assert batch.negative_targets is None
        np.testing.assert_array_equal(to_host(batch.x), x[to_host(batch.n_id)])
        np.testing.assert_array_equal(positives(batch), pairs)


def test_labels_follow_their_pairs_through_the_shuffle(data):
    pairs = data[2]
    labels = np.arange(pairs.shape[1], dtype=np.float32) + 10
    loader = make_loader(data, labels=labels, negatives="binary", seed=5)
    lookup = {}
    for column in range(pairs.shape[1]):
        lookup.setdefault((int(pairs[0, column]), int(pairs[1, column])), set()).add(float(labels[column]))
    seen = []
    for batch in loader:
        got = to_host(batch.labels)
        assert got.shape == (2 * batch.batch_size,) and (got[batch.batch_size :] == 0).all()
        for (s, t), label in zip(positives(batch).T.tolist(), got[: batch.batch_size].tolist()):
            assert label in lookup[(s, t)]
            seen.append(label)
    assert sorted(seen) == sorted(labels.tolist())


def test_prefetch_thread_and_serial_loops_give_the_same_batches_and_stats(data):
    threaded = list(make_loader(data, prefetch=2, negatives="per_source", strict_negatives=True))
    serial_loader = make_loader(data, prefetch=0, negatives="per_source", strict_negatives=True)
    serial = list(serial_loader)
    for a, b in zip(threaded, serial):
        assert_same_sample(gg.SampleOutput(a.n_id, a.adjs), gg.SampleOutput(b.n_id, b.adjs))
        np.testing.assert_array_equal(a.pair_index, b.pair_index)
        assert a.num_false_negatives == b.num_false_negatives and a.num_false_negatives >= 0
    stats = serial_loader.stats()
    assert stats["batches"] == 5 and stats["pairs"] == 23 and stats["negatives"] == 23
    assert stats["false_negatives"] == sum(b.num_false_negatives for b in serial)
    assert stats["nodes"] == sum(len(b.n_id) for b in serial)
    assert stats["edges"] == sum(adj.edge_index.shape[1] for b in serial for adj in b.adjs)
    triplets = make_loader(data, prefetch=0, negatives="triplet", num_negatives=3)
    list(triplets)
    assert triplets.stats()["negatives"] == 69


def test_torch_batches_share_the_sampler_output(data):
    torch = pytest.importorskip("torch")
    batch = next(iter(make_loader(data, backend="torch", negatives="triplet")))
    assert isinstance(batch.x, torch.Tensor) and isinstance(batch.pair_index, torch.Tensor)
    assert batch.pair_index.dtype == torch.int64 and batch.labels.dtype == torch.float32
    assert isinstance(batch.negative_targets, torch.Tensor) and batch.negative_targets.shape == (5, 1)
    assert isinstance(batch.adjs[0].edge_index, torch.Tensor)


def test_an_error_while_preparing_a_batch_reaches_the_loop(data):
    class Broken:
        num_nodes = 30

        def sample_links(self, pairs, labels=None, **options):
            raise RuntimeError("broken sampler")

    loader = LinkLoader(Broken(), data[1], data[2], 5, backend=None)
    with pytest.raises(RuntimeError, match="broken sampler"):
        list(loader)


@pytest.mark.parametrize(
    "change, error, message",
    [
        ({"sampler": object()}, TypeError, "sample_links"),
        ({"pairs": np.zeros(6, np.int64)}, ValueError, "2-D|shape"),
        ({"pairs": np.zeros((3, 2), np.int64)}, ValueError, r"\(2, E\)"),
        ({"pairs": np.zeros((2, 2))}, TypeError, "integers"),
        ({"pairs": np.array([[0, 1], [2, 30]])}, IndexError, r"pairs\[3\] = 30"),
        ({"labels": np.zeros(5)}, ValueError, "one entry per pair"),
        ({"labels": np.array(["a"] * 23)}, TypeError, "numbers"),
        ({"negatives": "uniform"}, ValueError, "negatives"),
        ({"exclude": "both"}, ValueError, "exclude"),
        ({"num_negatives": 0}, ValueError, "num_negatives"),
        ({"strict_negatives": 1}, TypeError, "strict_negatives"),
        ({"batch_size": 0}, ValueError, "batch_size"),
    ],
)
def test_bad_arguments_fail_at_construction(data, change, error, message):
    graph, x, pairs = data
    arguments = {"sampler": gg.NeighborSampler(graph, [2]), "pairs": pairs, "batch_size": 5}
    arguments.update(change)
    with pytest.raises(error, match=message):
        LinkLoader(arguments.pop("sampler"), x, arguments.pop("pairs"), arguments.pop("batch_size"), **arguments)


def test_a_sampler_that_cannot_time_the_pairs_is_refused_at_construction(data):
    # the loader passes no pair_time: an edge-time sampler (or a typed endpoint type without node
    # times) built the loader, then failed every batch asking for an argument it does not take
    graph, x, pairs = data
    edge_times = gg.NeighborSampler(graph, [2], edge_time=np.arange(graph.num_edges))
    with pytest.raises(ValueError, match="an edge-time sampler needs each batch's pair_time"):
        LinkLoader(edge_times, x, pairs, 5)
    assert len(list(LinkLoader(edge_times, x, np.empty((2, 0), np.int64), 5, backend=None))) == 0  # nothing to time
    node_times = gg.NeighborSampler(graph, [2], node_time=np.arange(graph.num_nodes))
    assert len(list(LinkLoader(node_times, x, pairs, 5, backend=None, prefetch=0))) == len(
        LinkLoader(node_times, x, pairs, 5)
    )
    typed = gg.HeteroGraph({("u", "f", "i"): [[0, 1], [0, 0]], ("i", "r", "u"): [[0, 0], [0, 1]]}, {"u": 2, "i": 1})
    sampler = gg.HeteroNeighborSampler(typed, [1], node_time={"u": np.array([0, 1])})
    with pytest.raises(ValueError, match=r"a sampler without node times for \['i'\] needs each batch's pair_time"):
        LinkLoader(sampler, {"u": np.eye(2)}, [[0], [0]], 2, edge_type=("u", "f", "i"))


def test_a_multi_device_rank_drives_a_link_loader_with_its_own_seed(data):
    graph, x, pairs = data
    multi = gg.MultiDeviceSampler(graph, ["cpu", "cpu"], [3, 2], seed=2)
    batches = [list(LinkLoader(multi.rank(r), x, pairs, 5, backend=None, shuffle=False)) for r in (0, 1)]
    plain = list(make_loader(data, shuffle=False))  # rank 0 samples like NeighborSampler(seed=2)
    for a, b in zip(batches[0], plain):
        assert_same_sample(gg.SampleOutput(a.n_id, a.adjs), gg.SampleOutput(b.n_id, b.adjs))
    assert any(not np.array_equal(np.asarray(a.adjs[0].e_id), np.asarray(b.adjs[0].e_id)) for a, b in zip(*batches))


def test_the_loader_scans_its_pairs_once_and_sample_links_every_call_unless_told(data, monkeypatch):
    from gglspeedup.sampling import link_checks

    graph = data[0]
    scans = []
    original = link_checks.check_pairs

    def spy(pairs, num_nodes, device, names=("num_nodes", "num_nodes"), check=True):
        scans.append(check)
        return original(pairs, num_nodes, device, names, check)

    monkeypatch.setattr(link_checks, "check_pairs", spy)
    sampler = gg.NeighborSampler(graph, [3, 2], seed=2)
    loader = make_loader(data)
    batches = list(loader)
    assert scans == [False] * len(batches)  # checked at construction, not again per batch
    scans.clear()
    first = loader.order(0)[:, :5]
    again = sampler.sample_links(first, key=3, exclude="self")
    trusted = sampler.sample_links(first, key=3, exclude="self", check=False)
    assert scans == [True, False]
    assert_same_sample((trusted.n_id, trusted.adjs), (again.n_id, again.adjs))
    for name in ("pair_index", "labels"):
        np.testing.assert_array_equal(getattr(trusted, name), getattr(again, name))
    with pytest.raises(IndexError, match=r"pairs must lie in \[0, num_nodes = 30\)"):
        sampler.sample_links([[0, 30], [1, 2]])


def test_a_foreign_sampler_gets_no_check_argument(data):
    graph, x, pairs = data

    class Wrapped:  # anything with sample_links(pairs, labels=None, *, ..., key=None)
        num_nodes = graph.num_nodes

        def __init__(self):
            self.inner = gg.NeighborSampler(graph, [2], seed=1)

        def sample_links(self, pairs, labels=None, *, key=None, **options):
            assert "check" not in options
            return self.inner.sample_links(pairs, labels, key=key, **options)

    batches = list(LinkLoader(Wrapped(), gg.FeatureStore(x), pairs, 7, backend=None))
    assert len(batches) == -(-pairs.shape[1] // 7)

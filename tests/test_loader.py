"""NodeLoader: keyed shuffling, exact coverage, batch contents, prefetch thread behaviour."""

import threading

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.loader import Batch, NodeLoader

from conftest import assert_close_stops_the_producer, to_host, wait_for_exit


def small_graph(num_nodes=40, num_edges=160, seed=3):
    rng = np.random.default_rng(seed)
    edge_index = rng.integers(0, num_nodes, size=(2, num_edges))
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes)


@pytest.fixture(scope="module")
def data():
    graph = small_graph()
    x = np.arange(graph.num_nodes * 3, dtype=np.float32).reshape(graph.num_nodes, 3)
    y = (np.arange(graph.num_nodes) * 7) % 5
    return graph, x, y


def make_loader(data, seeds=None, batch_size=6, device="cpu", **options):
    graph, x, y = data
    sampler = gg.NeighborSampler(graph, [3, 2], seed=1, device=device)
    features = gg.FeatureStore(x, device=device)
    seeds = np.arange(5, 28) if seeds is None else seeds
    options.setdefault("backend", None)
    return NodeLoader(sampler, features, seeds, batch_size, labels=y, **options)


def seeds_of(batch):
    return np.asarray(batch.n_id[: batch.batch_size])


@pytest.mark.parametrize("drop_last", [False, True])
def test_every_seed_once_per_epoch(data, drop_last):
    seeds = np.arange(5, 28)
    loader = make_loader(data, seeds, batch_size=6, drop_last=drop_last)
    assert len(loader) == (3 if drop_last else 4)
    for _ in range(2):
        batches = list(loader)
        assert len(batches) == len(loader)
        got = np.concatenate([seeds_of(b) for b in batches])
        sizes = [b.batch_size for b in batches]
        if drop_last:
            assert sizes == [6, 6, 6] and len(np.unique(got)) == 18 and np.isin(got, seeds).all()
        else:
            assert sizes == [6, 6, 6, 5]
            np.testing.assert_array_equal(np.sort(got), seeds)


def test_order_reproduces_for_the_same_seed_and_differs_across_epochs(data):
    first, second = make_loader(data, seed=7), make_loader(data, seed=7)
    epoch0 = [seeds_of(b) for b in first]
    epoch1 = [seeds_of(b) for b in first]
    again0 = [seeds_of(b) for b in second]
    assert all(np.array_equal(a, b) for a, b in zip(epoch0, again0))
    assert not np.array_equal(np.concatenate(epoch0), np.concatenate(epoch1))
    other = [seeds_of(b) for b in make_loader(data, seed=8)]
    assert not np.array_equal(np.concatenate(epoch0), np.concatenate(other))
    second.set_epoch(1)
    assert np.array_equal(np.concatenate([seeds_of(b) for b in second]), np.concatenate(epoch1))
    np.testing.assert_array_equal(first.order(1), np.concatenate(epoch1))


def test_set_epoch_refuses_an_epoch_whose_keys_pass_2_to_the_64(data):
    # set_epoch(2**63) was taken and the first batch raised "key must be an int in [0, 2**64)"
    loader = make_loader(data, seed=7)
    last = 2**64 // len(loader) - 1
    loader.set_epoch(last)  # its last batch's key is 2**64 - 1 at most
    assert loader._key(last, len(loader) - 1) < 2**64
    with pytest.raises(ValueError, match=r"epoch must be an int in \[0, \d+\) \(keys < 2\*\*64\), got"):
        loader.set_epoch(last + 1)
    with pytest.raises(TypeError, match="epoch must be"):
        loader.set_epoch(1.0)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_an_epochs_iterator_tells_its_batch_count(data, prefetch):
    # with prefetch=0 the epoch was a generator: len(iter(loader)) raised TypeError
    loader = make_loader(data, prefetch=prefetch)
    epoch = iter(loader)
    assert len(epoch) == len(loader) and iter(epoch) is epoch
    assert len(list(epoch)) == len(loader)
    early = iter(loader)
    next(early)
    early.close()
    with pytest.raises(StopIteration):
        next(early)


def test_features_and_labels_the_backend_cannot_take_are_named_when_the_loader_is_made(data):
    # a big-endian table (or string labels) passed construction and failed the first batch
    pytest.importorskip("torch")
    graph, x, y = data
    sampler = gg.NeighborSampler(graph, [3, 2], seed=1)
    swapped = x.astype(x.dtype.newbyteorder(">"))
    for features in (swapped, gg.FeatureStore(swapped)):
        with pytest.raises(TypeError, match=r"cannot convert features of dtype >f\d to torch: its bytes are swapped"):
            NodeLoader(sampler, features, np.arange(4), 2, backend="torch")
    with pytest.raises(TypeError, match="cannot convert labels of dtype <U1 to torch"):
        NodeLoader(sampler, x, np.arange(4), 2, labels=np.full(len(y), "a"), backend="torch")
    batch = next(iter(NodeLoader(sampler, swapped, np.arange(4), 2, backend="numpy")))  # NumPy keeps them
    np.testing.assert_array_equal(batch.x, x[batch.n_id])


def test_a_disjoint_samplers_trees_reach_the_batch_as_an_attribute(data):
    # the loaders dropped SampleOutput.batch: a disjoint or temporal batch's tree ids were unreachable
    graph, x, _ = data
    sampler = gg.NeighborSampler(graph, [3, 2], seed=1, disjoint=True)
    loader = NodeLoader(sampler, x, np.arange(5, 28), 6, backend=None)
    for index, batch in enumerate(loader):
        reference = sampler.sample(loader.order(0)[index * 6 : (index + 1) * 6], key=index)
        np.testing.assert_array_equal(batch.batch, reference.batch)
        assert len(batch) == 5  # still unpacks as (x, y, adjs, n_id, batch_size)
    links = gg.LinkLoader(sampler, x, np.array([[5, 6, 7], [8, 9, 10]]), 2, backend=None, shuffle=False)
    first = next(iter(links))
    np.testing.assert_array_equal(first.batch, sampler.sample_links([[5, 6], [8, 9]], key=0).batch)
    assert next(iter(make_loader(data))).batch is None  # shared sampling: no trees


def test_without_shuffle_seeds_keep_their_order(data):
    seeds = np.array([9, 3, 3, 30, 1], dtype=np.int32)
    loader = make_loader(data, seeds, batch_size=2, shuffle=False)
    np.testing.assert_array_equal(np.concatenate([seeds_of(b) for b in loader]), seeds)


def test_batches_equal_the_sampler_and_features_replayed_by_key(data):
    graph, x, y = data
    loader = make_loader(data, seed=2)
    loader.set_epoch(3)
    reference = gg.NeighborSampler(graph, [3, 2], seed=1)
    order = loader.order(3)
    for index, batch in enumerate(loader):
        assert isinstance(batch, Batch)
        batch_seeds = order[index * 6 : (index + 1) * 6]
        n_id, adjs = reference.sample(batch_seeds, key=3 * len(loader) + index)
        np.testing.assert_array_equal(batch.n_id, n_id)
        np.testing.assert_array_equal(batch.x, x[n_id])
        np.testing.assert_array_equal(batch.y, y[batch_seeds])
        assert [a.size for a in batch.adjs] == [a.size for a in adjs]
        for got, want in zip(batch.adjs, adjs):
            np.testing.assert_array_equal(got.edge_index, want.edge_index)
            np.testing.assert_array_equal(got.e_id, want.e_id)


def test_serial_and_prefetching_loaders_agree(data):
    serial = [b.n_id for b in make_loader(data, prefetch=0)]
    prefetched = [b.n_id for b in make_loader(data, prefetch=3)]
    assert len(serial) == len(prefetched)
    assert all(np.array_equal(a, b) for a, b in zip(serial, prefetched))


def test_torch_backend_batches(data):
    torch = pytest.importorskip("torch")
    loader = make_loader(data, backend="torch")
    batch = next(iter(loader))
    assert isinstance(batch.x, torch.Tensor) and batch.x.dtype == torch.float32
    assert batch.y.dtype == torch.int64 and batch.y.shape == (6,)
    assert batch.n_id.dtype == torch.int64 and batch.batch_size == 6
    edge_index, _e_id, size = batch.adjs[-1]
    assert edge_index.dtype == torch.int64 and edge_index.shape[0] == 2 and size[1] == 6
    assert all(type(s) is int for s in size)


@pytest.mark.parametrize(
    "backend, module",
    [("numpy", "numpy"), ("torch", "torch"), ("tensorflow", "tensorflow"), ("paddle", "paddle"), ("jax", "jax")],
)
def test_every_backend_gets_int64_ids_without_copy_warnings(data, backend, module, recwarn):
    pytest.importorskip(module)
    if module == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
    _graph, x, y = data
    loader = make_loader(data, backend=backend)
    for batch in loader:
        assert type(batch.x).__module__.split(".")[0] in (module, "jaxlib")
        for tensor in (batch.n_id, batch.y, *[t for adj in batch.adjs for t in adj[:2]]):
            name = getattr(tensor.dtype, "name", None)
            assert (name if isinstance(name, str) else str(tensor.dtype)).rsplit(".", 1)[-1].lower() == "int64"
        n_id = np.asarray(batch.n_id)
        np.testing.assert_array_equal(np.asarray(batch.x), x[n_id])
        np.testing.assert_array_equal(np.asarray(batch.y), y[n_id[: batch.batch_size]])
    # the loader re-aligns the sampler's arrays itself, so the TF/JAX adapters never have to copy
    assert not [w for w in recwarn if "aligned" in str(w.message)]


class FailingSampler:
    def __init__(self, sampler, fail_at):
        self.sampler, self.fail_at, self.calls = sampler, fail_at, 0

    def sample(self, seeds, key=None):
        self.calls += 1
        if self.calls > self.fail_at:
            raise ZeroDivisionError("sampler broke on purpose")
        return self.sampler.sample(seeds, key=key)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_failing_sampler_raises_in_the_caller(data, prefetch):
    graph, x, y = data
    sampler = FailingSampler(gg.NeighborSampler(graph, [2]), fail_at=2)
    loader = NodeLoader(sampler, x, np.arange(30), 5, labels=y, prefetch=prefetch, backend=None)
    before = set(threading.enumerate())
    got = []
    with pytest.raises(ZeroDivisionError, match="on purpose"):
        for batch in loader:
            got.append(batch)
    assert len(got) == 2
    assert not wait_for_exit(set(threading.enumerate()) - before)


def test_leaving_the_loop_early_stops_the_producer(data):
    assert_close_stops_the_producer(make_loader(data, batch_size=1, prefetch=2))


def test_an_abandoned_iterator_is_collected_and_its_producer_stops(data):
    loader = make_loader(data, batch_size=1, prefetch=1)
    iterator = iter(loader)
    next(iterator)
    threads = iterator._threads
    del iterator  # the producer holds no reference to it, so this runs its __del__
    assert not wait_for_exit(threads)


def test_stats_count_seeds_and_edges(data):
    loader = make_loader(data)
    batches = list(loader)
    stats = loader.stats(reset=True)
    assert stats["batches"] == 4 and stats["seeds"] == 23
    assert stats["edges"] == sum(int(a.edge_index.shape[1]) for b in batches for a in b.adjs)
    assert loader.stats()["batches"] == 0


def test_bad_arguments_raise_before_any_batch(data):
    graph, x, _y = data
    sampler = gg.NeighborSampler(graph, [2])
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        NodeLoader(sampler, x, np.arange(4), 0)
    with pytest.raises(TypeError, match="batch_size must be an int"):
        NodeLoader(sampler, x, np.arange(4), 2.0)
    with pytest.raises(ValueError, match="seeds must be 1-D"):
        NodeLoader(sampler, x, np.zeros((2, 2), np.int64), 2)
    with pytest.raises(TypeError, match="seeds must hold integers"):
        NodeLoader(sampler, x, np.zeros(3), 2)
    with pytest.raises(ValueError, match="unknown backend"):
        NodeLoader(sampler, x, np.arange(4), 2, backend="mxnet")
    with pytest.raises(TypeError, match="sampler must have a sample"):
        NodeLoader(object(), x, np.arange(4), 2)
    with pytest.raises(ValueError, match="prefetch must be >= 0"):
        NodeLoader(sampler, x, np.arange(4), 2, prefetch=-1)


def test_a_sampler_the_loader_cannot_call_with_a_key_is_refused_at_construction(data):
    graph, x, _y = data
    multi = gg.MultiDeviceSampler(graph, ["cpu", "cpu"], [2], seed=4)
    # was accepted: every batch raised "sample() missing 1 required positional argument: 'rank'"
    with pytest.raises(TypeError, match=r"sampler\.sample cannot be called as sample\(seeds, key=None\).*'rank'"):
        NodeLoader(multi, x, np.arange(4), 2, backend=None)

    class WithoutKey:
        def sample(self, seeds):
            return multi.sample(seeds, 0)

    with pytest.raises(TypeError, match="unexpected keyword argument 'key'"):
        NodeLoader(WithoutKey(), x, np.arange(4), 2, backend=None)
    loader = NodeLoader(multi.rank(1), x, np.arange(4), 2, shuffle=False, backend=None)
    for index, batch in enumerate(loader):  # the rank's own sampler: what the message points to
        expected = multi.sample(np.arange(4)[2 * index : 2 * index + 2], 1, key=index)
        np.testing.assert_array_equal(batch.n_id, expected.n_id)
        np.testing.assert_array_equal(batch.x, x[expected.n_id])


@pytest.mark.parametrize("device", [pytest.param("cuda:0", id="cuda", marks=pytest.mark.cuda)])
def test_cuda_loader_matches_the_cpu_loader(device):
    graph = small_graph(num_nodes=10, num_edges=24)
    data = (graph, np.arange(30, dtype=np.float32).reshape(10, 3), np.arange(10) % 3)
    seeds = np.arange(6)
    cpu = list(make_loader(data, seeds, batch_size=3, device="cpu"))
    other = list(make_loader(data, seeds, batch_size=3, device=device))
    assert len(cpu) == len(other) == 2
    for a, b in zip(cpu, other):
        np.testing.assert_array_equal(to_host(a.n_id), to_host(b.n_id))
        np.testing.assert_array_equal(to_host(a.x), to_host(b.x))
        for adj_a, adj_b in zip(a.adjs, b.adjs):
            np.testing.assert_array_equal(to_host(adj_a.edge_index), to_host(adj_b.edge_index))


def test_labels_seeds_and_flags_are_checked_at_construction(data):
    graph, x, y = data
    sampler = gg.NeighborSampler(graph, [2])
    n = graph.num_nodes
    for bad in (y[:-1], np.concatenate([y, y[:3]])):
        with pytest.raises(ValueError, match=rf"labels must have one entry per node \({n}\)"):
            NodeLoader(sampler, x, np.arange(4), 2, labels=bad)
    with pytest.raises(IndexError, match=rf"seeds\[1\] = {n} is out of range \[0, num_nodes = {n}\)"):
        NodeLoader(sampler, x, [0, n], 2)
    with pytest.raises(IndexError, match=r"seeds\[0\] = -1"):
        NodeLoader(sampler, x, [-1], 2)
    for bad in (np.array([None] * n), [None] + [1] * (n - 1)):  # no batch can copy Python objects
        with pytest.raises(TypeError, match=r"labels must hold numbers .*got dtype object"):
            NodeLoader(sampler, x, np.arange(4), 2, labels=bad)
    for name in ("shuffle", "drop_last", "reuse_buffers"):
        for value in ("no", "yes", 1, None):
            with pytest.raises(TypeError, match=f"{name} must be a bool"):
                NodeLoader(sampler, x, np.arange(4), 2, **{name: value})


def test_typed_features_for_an_untyped_sampler_raise_at_construction(data):
    graph, x, _ = data
    sampler = gg.NeighborSampler(graph, [2])
    for typed in ({"paper": x}, gg.HeteroFeatureStore({"paper": x})):  # gave KeyError 0 on the first batch
        with pytest.raises(TypeError, match=rf"untyped sampler needs untyped features.*got {type(typed).__name__}"):
            NodeLoader(sampler, typed, np.arange(4), 2)
        with pytest.raises(TypeError, match="untyped sampler needs untyped features"):
            gg.LinkLoader(sampler, typed, [[0, 1], [1, 2]], 2)


def test_features_an_id_array_cannot_index_are_refused_at_construction(data):
    # a tf.Tensor, a list or a memoryview was taken and failed on the first batch, inside TF's or
    # NumPy's indexing; arrays and tensors that an id array indexes are still taken as they are
    graph, x, _ = data
    sampler = gg.NeighborSampler(graph, [2])
    hetero = gg.HeteroNeighborSampler(gg.HeteroGraph({("a", "to", "a"): np.array([[0, 1], [1, 2]])}, {"a": 40}), [2])
    bad = [x.tolist(), memoryview(x), "x" * 40]
    tf = _import_or_none("tensorflow")
    if tf is not None:
        bad.append(tf.constant(x))
    for table in bad:
        name = type(table).__name__
        with pytest.raises(TypeError, match=rf"features must be .* got {name}, which an id array cannot index"):
            NodeLoader(sampler, table, np.arange(4), 2)
        with pytest.raises(TypeError, match=rf"features must be .* got {name}, which an id array cannot index"):
            gg.LinkLoader(sampler, table, [[0, 1], [1, 2]], 2)
        with pytest.raises(TypeError, match=rf"features\['a'\] must be .* got {name}, which an id array cannot"):
            NodeLoader(hetero, {"a": table}, {"a": np.arange(4)}, 2)
    if tf is not None:  # the FeatureStore the message points to reads it
        batch = next(iter(NodeLoader(sampler, gg.FeatureStore(tf.constant(x)), np.arange(4), 2, backend=None)))
        np.testing.assert_array_equal(batch.x, x[batch.n_id])
    torch = _import_or_none("torch")
    if torch is not None:
        batch = next(iter(NodeLoader(sampler, torch.from_numpy(x), np.arange(4), 2, backend=None)))
        np.testing.assert_array_equal(to_host(batch.x), x[batch.n_id])


def _import_or_none(name):
    try:
        return __import__(name)
    except ImportError:
        return None


class _SamplerWithoutSize:
    def __init__(self, sampler):
        self.sampler = sampler

    def sample(self, seeds, key=None):
        return self.sampler.sample(seeds, key=key)


def test_labels_must_cover_the_seeds_when_the_node_count_is_unknown(data):
    graph, x, y = data
    sampler = _SamplerWithoutSize(gg.NeighborSampler(graph, [2]))
    features = type("Rows", (), {"__getitem__": lambda self, ids: x[ids]})()  # no shape: num_nodes unknown
    with pytest.raises(ValueError, match=r"labels has 5 entries but seeds reach node 9"):
        NodeLoader(sampler, features, np.arange(10), 2, labels=y[:5])
    assert len(NodeLoader(sampler, features, np.arange(10), 2, labels=y[:10])) == 5


def _pool_loader(data, **options):
    graph, x, y = data
    return NodeLoader(
        gg.NeighborSampler(graph, [3, 2], seed=5),
        gg.FeatureStore(x),
        np.arange(graph.num_nodes),
        4,
        labels=y,
        **options,
    )


@pytest.mark.parametrize("prefetch, workers", [(0, 1), (2, 1), (2, 2), (3, 3)])
def test_recycled_buffers_never_overwrite_a_batch_the_caller_keeps(data, prefetch, workers):
    _graph, x, _y = data
    options = {"workers": workers} if workers > 1 else {}  # workers=1: the option left at its default
    loader = _pool_loader(data, prefetch=prefetch, backend=None, **options)
    kept = []
    for index, batch in enumerate(loader):
        np.testing.assert_array_equal(batch.x, x[batch.n_id])
        if index % 3 == 0:
            kept.append(batch)  # held until the end: its buffer must not come back
    for batch in kept:
        np.testing.assert_array_equal(batch.x, x[batch.n_id])
    stats = loader.stats()
    assert stats["buffers_reused"] > 0  # dropped batches' buffers did come back
    assert stats["buffers_reused"] + stats["buffers_allocated"] + stats["buffers_unpooled"] == len(loader)
    assert stats["buffers_allocated"] <= prefetch + 3 + 2 * (workers - 1)  # queued, in progress, held
    assert loader._pool.free + len(kept) >= 1


def test_recycled_buffers_wait_for_framework_tensors_sharing_them(data):
    torch = pytest.importorskip("torch")
    _graph, x, _y = data
    loader = _pool_loader(data, prefetch=0, backend="torch")
    held, expected = [], []
    for batch in loader:
        held.append(batch.x[:1])  # a torch view of the batch's rows keeps its buffer busy
        expected.append(torch.from_numpy(x[batch.n_id.numpy()[:1]]))
    assert loader.stats(reset=True)["buffers_reused"] == 0  # every buffer is shared with a live tensor
    second = list(loader)
    assert all(torch.equal(got, want) for got, want in zip(held, expected))  # nothing overwrote them
    held.clear()
    third = list(loader)
    assert loader.stats()["buffers_reused"] > 0  # once the tensors are gone, the buffers come back
    assert all(torch.equal(b.x, torch.from_numpy(x[b.n_id.numpy()])) for b in second + third)


def test_recycled_buffers_wait_for_numpy_views_of_a_dropped_batch(data):
    # NumPy collapses a view's base onto the buffer it shares, so a slice kept after its batch is
    # dropped once let the buffer go back to the pool while the slice still read it.
    _graph, x, _y = data
    loader = _pool_loader(data, prefetch=0, backend=None)
    held, expected = [], []
    for batch in loader:
        held.append(batch.x[:2, ::2])  # a strided NumPy view; the batch itself is dropped
        expected.append(x[batch.n_id[:2]][:, ::2])
    assert loader.stats(reset=True)["buffers_reused"] == 0
    list(loader)  # gathers that would have overwritten the views' memory
    for got, want in zip(held, expected):
        np.testing.assert_array_equal(got, want)


def test_a_pool_buffer_comes_back_only_after_its_last_view():
    import gc

    from gglspeedup._pool import BufferPool

    pool = BufferPool(4, np.float32, 2)
    batch = pool.take(10)
    column = batch[:5, 0].reshape(5, 1)
    del batch
    gc.collect()
    assert pool.free == 0  # the column still reads the buffer
    del column
    gc.collect()
    assert pool.free == 1


@pytest.mark.parametrize("backend", [None, "torch"])
def test_recycled_buffers_keep_a_bfloat16_store_s_dtype(data, backend):
    # The pool's buffers came back through the array interface, which spells bfloat16 "<V2": the
    # store refused them (out of dtype |V2) on every batch.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if backend is not None:
        pytest.importorskip(backend)
    graph, x, _y = data
    table = (x / 7).astype(ml_dtypes.bfloat16)
    sampler = gg.NeighborSampler(graph, [3, 2], seed=5)
    loader = NodeLoader(sampler, gg.FeatureStore(table), np.arange(graph.num_nodes), 4, prefetch=0, backend=backend)
    for batch in loader:
        rows = gg.backends.from_(batch.x)
        assert rows.dtype == table.dtype
        assert rows.tobytes() == table[np.asarray(gg.backends.from_(batch.n_id))].tobytes()
    assert loader.stats()["buffers_reused"] > 0


def test_reuse_buffers_off_gathers_into_fresh_memory(data):
    loader = _pool_loader(data, prefetch=0, backend=None, reuse_buffers=False)
    batches = list(loader)
    assert loader._pool is None and "buffers_reused" not in loader.stats()
    addresses = {b.x.ctypes.data for b in batches}
    assert len(addresses) == len(batches)


# ---------------------------------------------------------------- several producer threads (workers)
def assert_same_batch(got, want):
    """Two batches equal field by field: arrays exactly (values and dtype), the rest by ==."""
    if isinstance(got, dict):
        assert isinstance(want, dict) and list(got) == list(want)
        for name in got:
            assert_same_batch(got[name], want[name])
    elif isinstance(got, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for a, b in zip(got, want):
            assert_same_batch(a, b)
    elif isinstance(got, np.ndarray):
        assert isinstance(want, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want


def epochs_of(loader, count=2):
    return [list(loader) for _ in range(count)]


@pytest.mark.parametrize("workers, prefetch", [(2, 2), (2, 1), (3, 2), (4, 5)])
def test_several_workers_yield_the_one_worker_batches_in_order(data, workers, prefetch):
    one = epochs_of(make_loader(data, batch_size=4, seed=5))
    several = make_loader(data, batch_size=4, seed=5, workers=workers, prefetch=prefetch)
    assert several.workers == workers and len(several) == 6
    got = epochs_of(several)
    assert [len(e) for e in got] == [len(e) for e in one] == [6, 6]
    for epoch_got, epoch_want in zip(got, one):
        for batch_got, batch_want in zip(epoch_got, epoch_want):
            assert_same_batch(batch_got, batch_want)


def test_more_workers_than_batches_end_the_epoch_in_order(data):
    one = list(make_loader(data, batch_size=10, shuffle=False))
    got = list(make_loader(data, batch_size=10, shuffle=False, workers=5))
    assert len(got) == len(one) == 3
    for batch_got, batch_want in zip(got, one):
        assert_same_batch(batch_got, batch_want)


def test_several_workers_on_the_store_s_device_yield_the_one_worker_batches(device):
    graph = small_graph(num_nodes=10, num_edges=24)  # on the simulator: kernels from three threads at once
    data = (graph, np.arange(30, dtype=np.float32).reshape(10, 3), np.arange(10) % 3)
    one = list(make_loader(data, np.arange(9), batch_size=2, device=device, shuffle=False))
    several = list(make_loader(data, np.arange(9), batch_size=2, device=device, shuffle=False, workers=3, prefetch=3))
    assert len(one) == len(several) == 5
    for a, b in zip(one, several):
        for field in ("x", "n_id"):
            np.testing.assert_array_equal(to_host(getattr(a, field)), to_host(getattr(b, field)))


class PairedSampler:
    """Draws only once two calls are in flight at once (a barrier of two, cycled): a loader with
    one producer thread never has two, and breaks the barrier."""

    def __init__(self, sampler):
        self.sampler, self.num_nodes = sampler, sampler.num_nodes
        self.barrier = threading.Barrier(2, timeout=10)

    def sample(self, seeds, key=None):
        self.barrier.wait()
        return self.sampler.sample(seeds, key=key)


def test_two_workers_keep_two_batches_in_flight(data):
    graph, x, _y = data
    sampler = PairedSampler(gg.NeighborSampler(graph, [2]))
    loader = NodeLoader(sampler, x, np.arange(24), 4, workers=2, shuffle=False, backend=None)
    reference = gg.NeighborSampler(graph, [2])
    batches = list(loader)
    assert len(batches) == 6 and not sampler.barrier.broken
    for index, batch in enumerate(batches):
        np.testing.assert_array_equal(batch.n_id, reference.sample(np.arange(4 * index, 4 * index + 4), key=index).n_id)


class KeyFailingSampler:
    """Raises on one key, whichever thread draws it."""

    def __init__(self, sampler, fail_key):
        self.sampler, self.fail_key, self.num_nodes = sampler, fail_key, sampler.num_nodes

    def sample(self, seeds, key=None):
        if key == self.fail_key:
            raise ZeroDivisionError(f"sampler broke on purpose at key {key}")
        return self.sampler.sample(seeds, key=key)


@pytest.mark.parametrize("fail_key", [0, 1, 4])
def test_an_error_in_any_worker_is_raised_in_its_batchs_place_and_every_worker_ends(data, fail_key):
    graph, x, y = data
    sampler = KeyFailingSampler(gg.NeighborSampler(graph, [2]), fail_key)
    loader = NodeLoader(sampler, x, np.arange(30), 5, labels=y, workers=2, backend=None)
    before = set(threading.enumerate())
    got = []
    with pytest.raises(ZeroDivisionError, match=f"on purpose at key {fail_key}$"):
        for batch in loader:
            got.append(batch)
    assert len(got) == fail_key
    assert not wait_for_exit(set(threading.enumerate()) - before)


@pytest.mark.parametrize("workers", [2, 3])
def test_closing_or_abandoning_the_iterator_stops_every_worker(data, workers):
    iterator = iter(make_loader(data, batch_size=1, prefetch=2, workers=workers))
    next(iterator)
    threads = list(iterator._threads)
    assert len(threads) == workers and all(t.ident is not None for t in threads)
    iterator.close()
    assert not wait_for_exit(threads)
    with pytest.raises(StopIteration):
        next(iterator)
    iterator = iter(make_loader(data, batch_size=1, prefetch=1, workers=workers))
    next(iterator)
    threads = list(iterator._threads)
    del iterator  # no producer holds a reference to it, so this runs its __del__
    assert not wait_for_exit(threads)


def test_bad_workers_are_refused_by_name_before_any_thread_starts(data):
    graph, x, _y = data
    sampler = gg.NeighborSampler(graph, [2])
    before = set(threading.enumerate())
    with pytest.raises(ValueError, match="workers must be >= 1"):
        NodeLoader(sampler, x, np.arange(4), 2, workers=0)
    with pytest.raises(TypeError, match="workers must be an int"):
        NodeLoader(sampler, x, np.arange(4), 2, workers=2.0)
    with pytest.raises(TypeError, match="workers must be an int"):
        NodeLoader(sampler, x, np.arange(4), 2, workers=True)
    with pytest.raises(ValueError, match="workers=2 needs prefetch >= 1"):
        NodeLoader(sampler, x, np.arange(4), 2, workers=2, prefetch=0)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        gg.LinkLoader(sampler, x, [[0, 1], [1, 2]], 2, workers=-1)
    assert set(threading.enumerate()) == before


def test_several_workers_refuse_a_collective_feature_source(data):
    """DistFeature's lookups are collectives every rank issues in the same order: two producer
    threads would pair one rank's lookup with another rank's lookup for a different batch."""
    from gglspeedup.distributed import DistFeature
    from gglspeedup.feature import HeteroFeatureSource

    graph, x, _y = data
    sampler = gg.NeighborSampler(graph, [2])
    assert DistFeature.collective is True

    class Collective(gg.FeatureStore):
        collective = True

    for features in (Collective(x), HeteroFeatureSource({"n": gg.FeatureStore(x)}, collective=True)):
        with pytest.raises(ValueError, match="workers=2 cannot gather from a collective feature source"):
            NodeLoader(sampler, features, np.arange(4), 2, workers=2)
    assert NodeLoader(sampler, Collective(x), np.arange(4), 2, workers=1).workers == 1


def test_store_counters_stay_exact_when_workers_gather_at_once(data, tmp_path):
    """Four threads gather at once from one store (as a loader's workers do): its lookups, calls
    and RAM-cache hits are four times one thread's (a thread switch every microsecond makes a
    lost ``+=`` likely)."""
    import sys

    graph, x, _y = data
    np.save(tmp_path / "x.npy", x)
    store = gg.FeatureStore.from_npy(tmp_path / "x.npy", cache_size=(len(x) // 2) * x[0].nbytes, graph=graph)
    ids = np.arange(len(x), dtype=np.int64)

    def gathers():
        for i in range(1000):
            store.gather(ids[i % 7 :])

    gathers()
    one = store.stats()
    assert one["hits"] > 0 and one["calls"] == 1000
    store.reset_stats()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=gathers) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(old)
    four = store.stats()
    assert (four["lookups"], four["calls"], four["hits"]) == (4 * one["lookups"], 4 * one["calls"], 4 * one["hits"])


def test_two_workers_give_the_one_worker_link_batches(data):
    graph, x, _y = data
    pairs = np.stack([np.arange(0, 22), np.arange(1, 23)])

    def epochs(**options):
        sampler = gg.NeighborSampler(graph, [3, 2], seed=2)
        loader = gg.LinkLoader(
            sampler, gg.FeatureStore(x), pairs, 4, negatives="binary", exclude="reverse", backend=None, **options
        )
        return epochs_of(loader)

    for epoch_got, epoch_want in zip(epochs(workers=2), epochs()):
        assert len(epoch_got) == len(epoch_want) == 6
        for batch_got, batch_want in zip(epoch_got, epoch_want):
            assert_same_batch(batch_got, batch_want)


def test_two_workers_give_the_one_worker_typed_batches():
    from conftest import WRITES, academic_graph

    graph = academic_graph(np.random.default_rng(3), {"paper": 12, "author": 9, "field": 4}, (40, 30, 30, 10))
    features = {"paper": np.arange(36, dtype=np.float32).reshape(12, 3), "author": np.ones((9, 2), np.float32)}
    seeds = {"author": np.array([0, 3, 3, 8]), "paper": np.arange(2, 11)}
    sampler = gg.HeteroNeighborSampler(graph, [2, 1], seed=1)

    def node_epochs(**options):
        return epochs_of(NodeLoader(sampler, features, seeds, 3, backend=None, **options))

    def link_epochs(**options):
        pairs = np.array([[0, 1, 2, 3, 4, 5, 6, 7], [0, 2, 4, 6, 8, 10, 11, 1]])
        return epochs_of(gg.LinkLoader(sampler, features, pairs, 3, edge_type=WRITES, backend=None, **options))

    for epochs in (node_epochs, link_epochs):
        for epoch_got, epoch_want in zip(epochs(workers=2), epochs()):
            assert len(epoch_got) == len(epoch_want) >= 3
            for batch_got, batch_want in zip(epoch_got, epoch_want):
                assert_same_batch(batch_got, batch_want)


def test_a_sampler_that_cannot_time_the_seeds_is_refused_at_construction():
    # the loader passes no seed_time: an edge-time sampler (or a seed type without node times)
    # built the loader, then failed every batch asking for an argument it does not take
    graph = gg.CSRGraph.from_edge_index([[1, 2, 3, 0], [0, 0, 1, 2]], num_nodes=5)
    x = np.eye(5, dtype=np.float32)
    with pytest.raises(ValueError, match="an edge-time sampler needs each batch's seed_time"):
        NodeLoader(gg.NeighborSampler(graph, [1], edge_time=np.arange(4)), x, [0, 1], 2)
    node_times = gg.NeighborSampler(graph, [1], node_time=np.arange(5))
    assert len(list(NodeLoader(node_times, x, [0, 1], 2, backend=None, prefetch=0))) == 1  # own times
    typed = gg.HeteroGraph({("u", "f", "i"): [[0, 1], [0, 0]], ("i", "r", "u"): [[0, 0], [0, 1]]}, {"u": 2, "i": 1})
    sampler = gg.HeteroNeighborSampler(typed, [1], node_time={"u": np.array([0, 1])})
    features = {"u": np.eye(2), "i": np.eye(1)}
    with pytest.raises(ValueError, match=r"a sampler without node times for \['i'\] needs each batch's seed_time"):
        NodeLoader(sampler, features, {"i": [0], "u": [1]}, 2)
    loader = NodeLoader(sampler, features, {"i": [], "u": [0, 1]}, 2, shuffle=False, backend=None, prefetch=0)
    assert [batch.n_id["u"][:2].tolist() for batch in loader] == [[0, 1]]  # types without seeds need no times

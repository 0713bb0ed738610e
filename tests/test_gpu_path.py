"""The GPU path's contracts, proved without a GPU: one stream for every launch, counted launches and
syncs per call, double-buffered staging, page-locked memory made once, ordered hand-offs.

The simulator runs one stream with no real concurrency, so it cannot show a race; these tests
check the contracts that prevent them (which stream each launch receives, in what order a staging
buffer is waited on and refilled), with stubs where CuPy or a driver would be.
"""

import sys
import types
import warnings

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup import _launch, _pinned
from gglspeedup.device import Device
from gglspeedup.feature import _tiers

from conftest import gpu_hardware, to_host

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


def _graph(num_nodes=30, num_edges=120, seed=2):
    edge_index = np.random.default_rng(seed).integers(0, num_nodes, size=(2, num_edges))
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes)


# ---------------------------------------------------------------------- one stream for every launch
@pytest.mark.cuda
def test_every_launch_receives_cupys_current_stream(monkeypatch):
    # A marker object the simulator passes along untouched; a real GPU's launches need a real
    # stream, so there the marker is a numba handle on CuPy's current stream (what launches get).
    stub = _launch.current_stream(Device("cuda", 0)) if gpu_hardware("cuda:0") else object()
    seen = []
    configure = _launch._configure

    def record(kernel, grid, block, stream):
        seen.append((getattr(kernel, "__name__", repr(kernel)), stream))
        return configure(kernel, grid, block, stream)

    monkeypatch.setattr(_launch, "current_stream", lambda device: stub)
    monkeypatch.setattr(_launch, "_configure", record)
    monkeypatch.setattr(_launch._direct, "enabled", False)  # every launch through numba's path (tests/test_launch.py)
    graph = _graph()
    x = np.arange(30 * 4, dtype=np.float32).reshape(30, 4)
    for fanouts in ([3, 2], [-1, 2]):
        out = gg.NeighborSampler(graph, fanouts, device="cuda:0", seed=1).sample([0, 5, 9])
    store = gg.FeatureStore(x, device="cuda:0", cache_size=10 * 16, graph=graph)
    np.testing.assert_array_equal(to_host(store[out.n_id]), x[to_host(out.n_id)])
    names = {name for name, _ in seen}
    assert {"_count_kernel", "_fill_insert_kernel", "flag_kernel", "compact_kernel", "gather_two_tier"} <= names
    assert all(stream is stub for _, stream in seen)


def test_the_stream_is_cupys_current_one_or_the_default(monkeypatch):
    streams = {"ptr": 0}
    cupy = types.SimpleNamespace(
        cuda=types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=streams["ptr"]))
    )
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    from numba import cuda

    monkeypatch.setattr(cuda, "external_stream", lambda ptr: ("external", ptr), raising=False)
    monkeypatch.setattr(cuda, "default_stream", lambda: ("default",), raising=False)
    device = Device("cuda", 0)
    monkeypatch.setattr(Device, "simulated", property(lambda self: False))
    assert _launch.current_stream(device) == ("default",)  # CuPy's null stream: the legacy default
    streams["ptr"] = 0x7F00
    assert _launch.current_stream(device) == ("external", 0x7F00)


def test_cupy_arguments_become_views_without_a_sync(monkeypatch):
    from numba import cuda

    calls = []
    monkeypatch.setattr(cuda, "as_cuda_array", lambda array, sync=True: calls.append(sync) or ("view", array))

    class FakeCuPy:
        __cuda_array_interface__ = {"shape": (1,), "typestr": "<i8", "data": (8, False), "version": 3}  # noqa: RUF012

    from gglspeedup.sampling._kernels import SampleOptions

    record = SampleOptions(True, False, True)
    array = FakeCuPy()
    assert _launch.device_view(array) == ("view", array) and calls == [False]
    assert _launch.device_view(record) == record and _launch.device_view(3) == 3
    monkeypatch.setattr(_pinned, "uses_gpu", lambda: True)
    with pytest.raises(TypeError, match="host memory that is not page-locked"):
        _launch.device_view(np.zeros(4))


def test_occupancy_warnings_are_silenced_for_our_launches_only(monkeypatch):
    from numba.cuda.core import config

    seen = []

    class Kernel:
        def __getitem__(self, key):
            seen.append(config.CUDA_LOW_OCCUPANCY_WARNINGS)
            return lambda *args: None

    before = config.CUDA_LOW_OCCUPANCY_WARNINGS
    _launch._configure(Kernel(), 1, 32, object())
    assert seen == [0] and config.CUDA_LOW_OCCUPANCY_WARNINGS == before  # restored for users' kernels


# ---------------------------------------------------------------------- counted launches and syncs
@pytest.mark.cuda
@pytest.mark.parametrize(
    "fanouts, launches, syncs",
    [
        ([4, 3, 2], 9, 3),  # bounded hops: fill+insert, flag, compact; one sync each
        ([4, -1], 7, 3),  # an all-neighbour hop counts first: one more launch and sync
        ([0, 2], 3, 1),  # a zero fanout samples nothing: no launch, no sync
    ],
)
def test_sample_costs_counted_launches_and_syncs(fanouts, launches, syncs):
    sampler = gg.NeighborSampler(_graph(), fanouts, device="cuda:0", seed=3)
    sampler.sample([1, 2, 3], key=0)  # compile outside the count
    _launch.reset_counters()
    out = sampler.sample([1, 2, 3], key=1)
    assert _launch.counters() == {"launches": launches, "syncs": syncs}
    assert sum(int(adj.e_id.shape[0]) for adj in out.adjs) > 0


@pytest.mark.cuda
def test_a_gather_is_one_launch_and_no_sync_and_stats_one_sync():
    x = np.arange(30 * 3, dtype=np.float32).reshape(30, 3)
    store = gg.FeatureStore(x, device="cuda:0", cache_size=12 * 5, graph=_graph())
    ids = np.array([4, 0, 29, 4])
    store[ids]
    _launch.reset_counters()
    np.testing.assert_array_equal(to_host(store.gather(ids)), x[ids])
    assert _launch.counters() == {"launches": 1, "syncs": 0}
    assert store.stats()["lookups"] == 8 and _launch.counters()["syncs"] == 1


# ---------------------------------------------------------------------- staging: double-buffered
@pytest.mark.cuda
def test_staging_in_many_small_chunks_uploads_every_row_exactly(monkeypatch):
    rows, dim = 23, 5
    x = np.random.default_rng(4).standard_normal((rows, dim)).astype(np.float32)
    events = []
    original_copy, original_fill = _tiers.CUDATiers._copy_async, _tiers.CUDATiers._fill_staging
    original_wait = _tiers.CUDATiers._wait

    def copy(self, target, staging):
        event = original_copy(self, target, staging)
        events.append(("copy", staging.ctypes.data))
        return len(events) - 1, event  # this copy's place in the record, and its real event

    def wait(self, event):
        index, real = event
        if real is not None:  # the real wait: on a GPU the copy is still running here
            original_wait(self, real)
        events.append(("wait", events[index][1]))

    def fill(self, source, ids, staging):
        events.append(("fill", staging.ctypes.data))
        original_fill(self, source, ids, staging)

    monkeypatch.setattr(_tiers.CUDATiers, "_copy_async", copy)
    monkeypatch.setattr(_tiers.CUDATiers, "_wait", wait)
    monkeypatch.setattr(_tiers.CUDATiers, "_fill_staging", fill)
    order = np.random.default_rng(5).permutation(rows)
    store = gg.FeatureStore(
        x, device="cuda:0", cache_size=rows * dim * 4, policy=order, staging=3 * dim * 4
    )  # 8 chunks
    device_rows = to_host(store._tier.device_table).view(np.float32)
    np.testing.assert_array_equal(device_rows, x[order])  # slot s holds row order[s]
    buffers = sorted({address for kind, address in events if kind == "fill"})
    assert len(buffers) == 2  # double-buffered
    copies_in_flight = {}
    for kind, address in events:
        if kind == "fill":  # a buffer is refilled only once the copy out of it was waited on
            assert not copies_in_flight.get(address), f"buffer {address:#x} refilled during its copy"
        elif kind == "copy":
            copies_in_flight[address] = True
        else:
            copies_in_flight[address] = False
    assert not any(copies_in_flight.values())  # everything waited on before the store is usable
    np.testing.assert_array_equal(to_host(store[order[:7]]), x[order[:7]])


# ---------------------------------------------------------------------- page-locked memory, once
class _FakeRuntime:
    """CUDA runtime calls of gglspeedup._pinned, on ordinary memory, recorded."""

    cudaDevAttrCanUseHostPointerForRegisteredMem = 91

    def __init__(self, refuse=False):
        self.calls, self.refuse, self._keep = [], refuse, {}

    def getDevice(self):
        return 0

    def deviceGetAttribute(self, attribute, device):
        return 1

    def hostAlloc(self, nbytes, flags):
        raw = np.empty(nbytes + 4096, np.uint8)
        start = raw.ctypes.data + (-raw.ctypes.data) % 4096
        self._keep[start] = raw
        self.calls.append(("hostAlloc", nbytes, flags))
        return start

    def freeHost(self, start):
        self.calls.append(("freeHost", start))
        self._keep.pop(start)

    def hostRegister(self, start, size, flags):
        if self.refuse:
            raise RuntimeError("cudaErrorNotSupported")
        self.calls.append(("hostRegister", start, size, flags))

    def hostUnregister(self, start):
        self.calls.append(("hostUnregister", start))


@pytest.fixture
def fake_runtime(monkeypatch):
    runtime = _FakeRuntime()
    monkeypatch.setattr(_pinned, "uses_gpu", lambda: True)
    monkeypatch.setattr(_pinned, "_runtime", lambda: runtime)
    return runtime


def _page_aligned(nbytes):
    raw = np.zeros(nbytes + 8192, np.uint8)
    offset = (-raw.ctypes.data) % 4096
    return raw[offset : offset + nbytes]


def test_a_shared_table_is_registered_once_per_process_and_released_with_its_last_user(fake_runtime):
    import gc

    table = _page_aligned(4096 * 3 + 100).view(np.uint8)[: 4096 * 3].view(np.float32).reshape(-1, 16)
    first = _pinned.pin(table, what="table")
    second = _pinned.pin(table[10:20], what="table rows")  # inside the registered pages: no new call
    assert np.shares_memory(first, table) and np.shares_memory(second, table)
    registrations = [c for c in fake_runtime.calls if c[0] == "hostRegister"]
    assert len(registrations) == 1 and registrations[0][3] == 1 | 2  # portable | mapped
    assert _pinned.is_pinned(table[5:]) and _pinned.registered_ranges()[0][3] == 2
    del first
    gc.collect()
    assert not [c for c in fake_runtime.calls if c[0] == "hostUnregister"]  # the second view still uses it
    del second
    gc.collect()
    assert [c[0] for c in fake_runtime.calls] == ["hostRegister", "hostUnregister"]
    assert _pinned.registered_ranges() == []


def test_unaligned_or_refused_arrays_get_a_page_locked_copy(fake_runtime, monkeypatch):
    import gc

    unaligned = _page_aligned(4096)[8:1032].view(np.int64)
    unaligned[...] = np.arange(len(unaligned))
    copy = _pinned.pin(unaligned)
    assert not np.shares_memory(copy, unaligned) and np.array_equal(copy, unaligned)
    assert fake_runtime.calls[0][0] == "hostAlloc" and copy.ctypes.data % 4096 == 0
    empty = _pinned.pin(np.empty(0, np.int64))  # CUDA refuses 0 bytes: one locked byte stands in
    assert empty.shape == (0,) and fake_runtime.calls[-1][:2] == ("hostAlloc", 1)
    fake_runtime.refuse = True
    aligned = _page_aligned(4096).view(np.float64)
    with pytest.warns(RuntimeWarning, match="could not page-lock the graph's indices in place"):
        fallback = _pinned.pin(aligned, what="graph's indices")
    assert not np.shares_memory(fallback, aligned)
    del copy, empty, fallback
    gc.collect()
    assert sum(c[0] == "freeHost" for c in fake_runtime.calls) == 3 and _pinned.registered_ranges() == []


def test_device_views_of_page_locked_arrays_point_at_the_same_bytes(fake_runtime, monkeypatch):
    from numba import cuda

    monkeypatch.setattr(cuda, "from_cuda_array_interface", lambda interface, owner, sync: (interface, sync))
    locked = _pinned.pinned_empty((6, 4), np.float32)
    interface, sync = _pinned.device_array(locked[2:])
    assert interface["data"][0] == locked.ctypes.data + 2 * 16 and interface["shape"] == (4, 4) and not sync
    assert _pinned.device_array(np.zeros(3)) is None


# ---------------------------------------------------------------------- ordered hand-offs
def test_capsule_frameworks_wait_for_the_stream_that_wrote_the_array(monkeypatch):
    from gglspeedup.backends._common import settle_gpu_work

    waited = []
    stream = types.SimpleNamespace(synchronize=lambda: waited.append("synchronize"))
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(get_current_stream=lambda: stream))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    gpu_array = type("ndarray", (), {"__module__": "cupy._core.core"})()
    _launch.reset_counters()
    settle_gpu_work(gpu_array)
    settle_gpu_work(np.zeros(2))  # host memory: nothing to wait for
    assert waited == ["synchronize"] and _launch.counters()["syncs"] == 1


def test_the_loader_stream_is_created_on_the_samplers_device(monkeypatch):
    from gglspeedup.loader import _prefetch

    state = {"device": None}

    class FakeDevice:
        is_cuda, simulated = True, False

        def __enter__(self):
            state["device"] = "cuda:1"

        def __exit__(self, *exc):
            state["device"] = None

    class FakeStream:
        def __init__(self, non_blocking):
            self.created_on, self.non_blocking = state["device"], non_blocking

    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=FakeStream))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    device, stream = _prefetch._device_and_stream(types.SimpleNamespace(device=FakeDevice()))
    assert stream.created_on == "cuda:1" and stream.non_blocking and isinstance(device, FakeDevice)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        device, stream = _prefetch._device_and_stream(types.SimpleNamespace(device=gg.device.as_device("cpu")))
    with device, stream as current:
        assert current is None


def test_pin_and_staging_options_are_checked_on_every_device():
    x = np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match=r"pin must be one of \('copy', 'register'\), got 'lock'"):
        gg.FeatureStore(x, pin="lock")
    with pytest.raises(ValueError, match="staging must be at least 1 byte"):
        gg.FeatureStore(x, staging=0)
    with pytest.raises(ValueError, match="staging must be a number"):
        gg.FeatureStore(x, staging="lots")
    assert gg.FeatureStore(x, pin="register", staging="1M")[[1]].shape == (1, 2)


def test_a_view_of_a_view_keeps_its_pages_locked(monkeypatch):
    # NumPy points a view's base at the memory's owner, skipping plain views: the registration
    # must outlive every view of the array pin() returned, of any dtype or shape (on an H200,
    # pin(table).view(word) lost its registration at once and the launch refused the table).
    import gc

    released = []
    runtime = types.SimpleNamespace(hostUnregister=released.append, freeHost=released.append)
    monkeypatch.setattr(_pinned, "_runtime", lambda: runtime)
    table = _pinned.aligned_empty((8, 6), np.float32)
    start = table.ctypes.data
    pinned = _pinned._track(table, start, table.nbytes, allocated=False)
    words = pinned.view(np.uint64).reshape(-1)  # what the feature tiers keep
    assert words.ctypes.data == start and not words.flags.owndata
    del pinned
    gc.collect()
    assert [r[0] for r in _pinned.registered_ranges()].count(start) == 1 and released == []
    assert _pinned._lookup(words.ctypes.data) is not None
    again = _pinned._use(_pinned._lookup(start), table.view())  # a second user of the same range
    del words
    gc.collect()
    assert released == [] and _pinned._lookup(start).users == 1
    readonly = again[:2]
    readonly.flags.writeable = False
    del again
    gc.collect()
    assert released == []  # the slice still holds the second use
    del readonly
    gc.collect()
    assert released == [start] and _pinned._lookup(start) is None

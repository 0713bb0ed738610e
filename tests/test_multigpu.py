"""MultiDeviceSampler / MultiDeviceFeature and the shared-memory arrays under them.

Spawned runs use ``torch.multiprocessing.spawn`` (the way users launch them) and check, in each
child, the samples against the parent's, the gathered rows against ``x[ids]``, and that the
child reads the parent's shared memory in place.
"""

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup import _config
from gglspeedup._shared import FileArray, SharedArray, is_shared, share
from gglspeedup.multigpu import MultiDeviceFeature, MultiDeviceSampler, rank_seed

NUM_NODES = 40


def _graph(num_nodes=NUM_NODES, num_edges=300, seed=0):
    edge_index = np.random.default_rng(seed).integers(0, num_nodes, (2, num_edges))
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes)


def _table(num_rows=NUM_NODES, dim=5, dtype=np.float32):
    return (np.random.default_rng(1).standard_normal((num_rows, dim)) * 50).astype(dtype)


def _same(a, b):
    a_id, a_adjs = a
    b_id, b_adjs = b
    if not np.array_equal(np.asarray(a_id), np.asarray(b_id)) or len(a_adjs) != len(b_adjs):
        return False
    return all(
        np.array_equal(np.asarray(x.edge_index), np.asarray(y.edge_index))
        and np.array_equal(np.asarray(x.e_id), np.asarray(y.e_id))
        and tuple(x.size) == tuple(y.size)
        for x, y in zip(a_adjs, b_adjs)
    )


def to_host(array):
    """A NumPy copy of a NumPy or CuPy array (conftest's helper, without importing conftest in children)."""
    return array.get() if hasattr(array, "get") else np.asarray(array)


def _host(output):
    """A SampleOutput with NumPy arrays (CuPy arrays copied back) for comparisons and pickling."""
    return gg.SampleOutput(
        to_host(output.n_id), [gg.Adj(to_host(a.edge_index), to_host(a.e_id), tuple(a.size)) for a in output.adjs]
    )


# ---------------------------------------------------------------------- shared arrays
@pytest.mark.parametrize("dtype", [np.int64, np.float16, np.uint8])
@pytest.mark.parametrize("shape", [(7,), (3, 4), (0, 5)])
def test_shared_array_round_trips_by_name(shape, dtype):
    data = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    handle = share(data)
    assert handle.owner and handle.array.dtype == dtype and handle.array.shape == shape
    np.testing.assert_array_equal(handle.array, data)
    payload = pickle.dumps(handle)
    assert len(payload) < 300  # the name, not the data
    copy = pickle.loads(payload)
    assert not copy.owner and copy.name == handle.name
    np.testing.assert_array_equal(copy.array, data)
    if data.size:
        copy.array.flat[0] = 9  # the same pages: a write through one view shows in the other
        assert handle.array.flat[0] == 9
        assert is_shared(copy.array, copy)


def test_shared_array_unlink_is_owner_only_and_late_attach_is_explained():
    handle = share(np.arange(4))
    attached = pickle.loads(pickle.dumps(handle))
    view = attached.array
    with pytest.raises(RuntimeError, match="only the process that created"):
        attached.unlink()
    handle.unlink()
    assert not os.path.exists(f"/dev/shm/{handle.name}")
    assert view.tolist() == [0, 1, 2, 3]  # existing mappings outlive the name
    late = pickle.loads(pickle.dumps(handle))
    with pytest.raises(FileNotFoundError, match="no longer exists"):
        _ = late.array
    with pytest.raises(TypeError, match="objects"):
        share(np.array([object()]))


def test_memory_mapped_arrays_are_shared_by_path_not_copied(tmp_path):
    data = np.arange(60, dtype=np.float32).reshape(12, 5)
    np.save(tmp_path / "x.npy", data)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    handle = share(mapped[2:7])  # a contiguous slice of the file
    assert isinstance(handle, FileArray) and handle.name == str(tmp_path / "x.npy")
    clone = pickle.loads(pickle.dumps(handle))
    np.testing.assert_array_equal(clone.array, data[2:7])
    assert not clone.array.flags.writeable
    assert isinstance(share(mapped[:, 1:3]), SharedArray)  # not contiguous in the file: copied
    assert isinstance(share(np.asarray(mapped) + 1), SharedArray)  # a computed array: copied


def test_sharing_more_than_dev_shm_holds_raises_before_writing(monkeypatch):
    import gglspeedup._shared as shared

    class Tiny:
        f_bavail, f_frsize = 10, 4096

    monkeypatch.setattr(shared.os, "statvfs", lambda folder: Tiny)
    with pytest.raises(MemoryError, match="40960 bytes free"):
        share(np.zeros(20_000, np.int64))
    assert share(np.zeros(100, np.int64)).array.sum() == 0


def test_a_forked_child_unlinks_the_segments_it_created_when_it_exits():
    # Forked from a fresh interpreter: forking this test process, where JAX / torch threads may
    # already run, can deadlock the child.
    script = textwrap.dedent(
        """
        import multiprocessing, os
        import numpy as np
        from gglspeedup._shared import share

        def child(queue):
            child.keep = share(np.ones(8))  # alive until the child exits (through os._exit)
            queue.put(child.keep.name)

        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        process = ctx.Process(target=child, args=(queue,))
        process.start()
        name = queue.get(timeout=60)
        process.join(timeout=60)
        assert process.exitcode == 0, process.exitcode
        assert not os.path.exists(f"/dev/shm/{name}"), name
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_shared_segments_are_released_when_the_parent_exits_without_tracker_noise(tmp_path):
    script = textwrap.dedent(
        """
        import multiprocessing as mp, sys
        import numpy as np
        import gglspeedup as gg
        from gglspeedup.multigpu import MultiDeviceSampler, MultiDeviceFeature

        def child(sampler, feature, queue):
            from gglspeedup._shared import share
            own = child.keep = share(np.ones(8))  # owned by this child, alive until it exits
            queue.put((int(sampler.graph.indices.sum()), float(feature.rank(1)[[2, 2]].sum()), own.name))

        if __name__ == "__main__":
            g = gg.CSRGraph.from_edge_index(np.random.default_rng(0).integers(0, 30, (2, 90)), num_nodes=30)
            s = MultiDeviceSampler(g, ["cpu", "cpu"], [2])
            f = MultiDeviceFeature(np.ones((30, 3), np.float32), ["cpu", "cpu"])
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            p = ctx.Process(target=child, args=(s, f, queue))
            p.start()
            got = queue.get(timeout=120)
            p.join()
            assert got[:2] == (int(g.indices.sum()), 6.0), got
            import os
            assert not os.path.exists("/dev/shm/" + got[2]), "the child's own segment outlived it"
            names = [h.name for h in s._arrays.values()] + [f._table.name, f._order.name]
            print(" ".join(names))
        """
    )
    path = tmp_path / "parent.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    names = done.stdout.split()
    assert len(names) == 5
    assert not [n for n in names if os.path.exists(f"/dev/shm/{n}")]
    assert "resource_tracker" not in done.stderr and "leaked" not in done.stderr, done.stderr


# ---------------------------------------------------------------------- sampler (one process)
def test_sampler_pickles_small_and_rank_zero_matches_a_plain_sampler():
    graph = _graph(num_nodes=3000, num_edges=30000)
    sampler = MultiDeviceSampler(graph, ["cpu", "cpu", "cpu"], [4, 3], seed=9)
    assert len(pickle.dumps(sampler)) < 1500  # names and options only, whatever the graph size
    seeds = np.array([5, 17, 5, 2999])
    plain = gg.NeighborSampler(graph, [4, 3], seed=9).sample(seeds, key=2)
    assert _same(sampler.sample(seeds, 0, key=2), plain)
    rank1 = gg.NeighborSampler(graph, [4, 3], seed=rank_seed(9, 1)).sample(seeds, key=2)
    assert _same(sampler.sample(seeds, 1, key=2), rank1)
    assert not _same(rank1, plain)  # ranks draw independent streams
    assert rank_seed(9, 1) == (9 + 0x9E3779B97F4A7C15) % 2**64
    clone = pickle.loads(pickle.dumps(sampler))
    assert _same(clone.sample(seeds, 2, key=7), sampler.sample(seeds, 2, key=7))
    assert is_shared(clone.graph.indices, clone._arrays["indices"])


def test_a_reordered_graph_keeps_its_node_order_in_every_rank_and_process():
    # the shared copy dropped node_order: original_ids on a rank's graph was the identity
    edges = np.array([[0, 1, 2, 3, 4, 4, 4], [1, 2, 3, 4, 0, 1, 2]])
    graph = gg.CSRGraph.from_edge_index(edges, num_nodes=5, reorder="degree")
    assert graph.node_order is not None
    sampler = MultiDeviceSampler(graph, ["cpu", "cpu"], [2])
    for copy in (sampler, pickle.loads(pickle.dumps(sampler))):
        np.testing.assert_array_equal(copy.graph.node_order, graph.node_order)
        np.testing.assert_array_equal(copy.sampler(1).graph.node_order, graph.node_order)


def test_sample_scattered_returns_one_output_per_device_in_rank_order(device):
    graph = _graph()
    devices = [device, "cpu", device]
    sampler = MultiDeviceSampler(graph, devices, [2, 2], seed=3)
    seeds = np.array([1, 4, 9, 9, 30, 31, 0]) if device == "cpu" else np.array([1, 4, 9, 30])
    outputs = sampler.sample_scattered(seeds, key=11)
    assert len(outputs) == 3
    chunks = np.array_split(seeds, 3)
    reference = MultiDeviceSampler(graph, ["cpu"] * 3, [2, 2], seed=3)
    for rank, (output, chunk) in enumerate(zip(outputs, chunks)):
        assert type(output.n_id).__module__.split(".")[0] == sampler.devices[rank].xp.__name__
        host = _host(output)
        np.testing.assert_array_equal(host.n_id[: len(chunk)], chunk)
        assert _same(host, reference.sample(chunk, rank, key=11))  # bit-identical across devices


def test_sample_scattered_takes_an_empty_list_as_sample_does():
    sampler = MultiDeviceSampler(_graph(), ["cpu", "cpu"], [2, 2], seed=3)
    for seeds in ([], ()):  # NumPy reads [] as float64: sample_scattered raised "got dtype float64"
        outputs = sampler.sample_scattered(seeds, key=5)
        assert len(outputs) == 2
        for rank, output in enumerate(outputs):
            assert output.n_id.dtype == np.int64 and output.n_id.shape == (0,)
            assert _same(output, sampler.sample([], rank, key=5))
    with pytest.raises(TypeError, match="seeds must hold integers"):
        sampler.sample_scattered(np.array([1.0, 2.0]))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda g: MultiDeviceSampler(g, [], [2]), ValueError, "at least one device"),
        (lambda g: MultiDeviceSampler(g, "cpu", [2]), TypeError, "list of devices"),
        (lambda g: MultiDeviceSampler(g, b"cpu", [2]), TypeError, "list of devices"),  # was cuda:99, cuda:112, ...
        (lambda g: MultiDeviceFeature(_table(), {"cpu": 0}), TypeError, "list of devices"),
        (lambda g: MultiDeviceSampler(g, ["cpu"], [2], shuffle=True), TypeError, "shuffle"),
        (lambda g: MultiDeviceSampler(g, ["cpu"], [0.5]), TypeError, "fanouts"),
        (lambda g: MultiDeviceSampler(g, ["cpu", "tpu"], [2]), ValueError, "device"),
        (lambda g: MultiDeviceSampler(g, ["cpu"], [2], placement="pinned"), ValueError, "needs CUDA devices"),
        # placements no rank can take fail here, not at each rank's first sample in its own process
        (lambda g: MultiDeviceSampler(g, ["cuda:0"], [2], placement="gpu"), ValueError, "placement must be one of"),
        (lambda g: MultiDeviceSampler(g, ["cpu", "cuda:0"], [2], placement="host"), ValueError, "CUDA ranks take"),
        (lambda g: MultiDeviceSampler(g, ["cpu"], [2]).sample([0], 1), IndexError, r"rank must be in \[0, 1\)"),
        (lambda g: MultiDeviceSampler(g, ["cpu"], [2]).sample([0], True), TypeError, "rank must be an int"),
        (lambda g: MultiDeviceSampler(g, ["cpu"], [2]).sample_scattered([[0]]), ValueError, "1-D"),
        (lambda g: MultiDeviceFeature(_table(), ["cpu"], mode="mirror"), ValueError, "mode"),
        (lambda g: MultiDeviceFeature(_table()[0], ["cpu"]), ValueError, "2-D"),
        (lambda g: MultiDeviceFeature(_table(), ["cpu"], policy="degree"), ValueError, "graph="),
        (lambda g: MultiDeviceFeature(_table(), ["cpu", "cuda:0"])[[0]], RuntimeError, "set_rank"),
        (lambda g: MultiDeviceFeature(_table(), ["cpu"]).rank(0)[[NUM_NODES]], IndexError, str(NUM_NODES)),
    ],
)
def test_bad_arguments_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(_graph())


@pytest.mark.skipif(_config.HAS_CUDA and not _config.HAS_NUMBA_CUDA, reason="the simulator accepts any index")
def test_a_rank_whose_device_is_missing_says_which_rank_and_device():
    device = "cuda:99" if _config.HAS_NUMBA_CUDA else "cuda:0"
    sampler = MultiDeviceSampler(_graph(), ["cpu", device], [2])  # building in the parent is lazy
    assert _same(sampler.sample([1], 0, key=0), sampler.sample([1], 0, key=0))
    with pytest.raises(RuntimeError, match=rf"rank 1 .*{device}"):
        sampler.sample([1], 1)
    feature = MultiDeviceFeature(_table(), ["cpu", device])
    with pytest.raises(RuntimeError, match=rf"rank 1 .*{device}"):
        feature.rank(1)[[0]]


# ---------------------------------------------------------------------- feature (one process)
def test_feature_serves_each_rank_and_resolves_the_current_rank(device, monkeypatch):
    x = _table(dtype=np.float64)
    graph = _graph()
    feature = MultiDeviceFeature(x, [device, device], cache_size=8 * 5 * 8, graph=graph)
    assert len(pickle.dumps(feature)) < 1500
    for ids in ([3, 3, 0, 39], [], list(range(NUM_NODES))[::-3]):
        for rank in range(2):
            np.testing.assert_array_equal(to_host(feature.rank(rank)[ids]).reshape(-1, 5), x[ids])
    if device != "cpu":  # the device cache holds the 8 highest-degree rows, chosen in the parent
        order = np.argsort(-graph.degree(), kind="stable")[:8]
        assert sorted(feature.store(1).cached_ids.tolist()) == sorted(order.tolist())
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert feature.current_rank() == 1
    np.testing.assert_array_equal(to_host(feature[[7]]), x[[7]])
    assert feature.set_rank(0).current_rank() == 0
    monkeypatch.delenv("LOCAL_RANK")
    single = MultiDeviceFeature(x, [device])
    assert single.current_rank() == 0 and np.array_equal(to_host(single[[1, 2]]), x[[1, 2]])


def test_set_fanouts_keeps_the_shared_graph_and_rebuilds_samplers():
    graph = _graph()
    sampler = MultiDeviceSampler(graph, ["cpu", "cpu"], [2], seed=4)
    indices = sampler.graph.indices
    assert len(sampler.sample([3], 1, key=0).adjs) == 1
    assert sampler.set_fanouts([3, 2]) is sampler and sampler.fanouts == [3, 2]
    assert sampler.graph.indices is indices  # no new copy of the graph
    expected = gg.NeighborSampler(graph, [3, 2], seed=rank_seed(4, 1)).sample([3], key=0)
    assert _same(sampler.sample([3], 1, key=0), expected)
    with pytest.raises(TypeError, match="fanouts"):
        sampler.set_fanouts(["a"])


def test_set_fanouts_every_epoch_does_not_replay_batches():
    # The original README calls set_size() at the top of every epoch: each rank's batch counter
    # must carry on across it, or every epoch would redraw epoch 0's neighbourhoods.
    graph = _graph()
    sampler = MultiDeviceSampler(graph, ["cpu", "cpu"], [2], seed=4)
    outputs = []
    for _epoch in range(3):
        sampler.set_fanouts([2, 2])
        outputs.append(sampler.sample([3, 5], 1))
    for key, out in enumerate(outputs):
        expected = gg.NeighborSampler(graph, [2, 2], seed=rank_seed(4, 1)).sample([3, 5], key=key)
        assert _same(out, expected)


def test_current_rank_follows_paddle_launch_variables(monkeypatch):
    feature = MultiDeviceFeature(_table(), ["cpu", "cpu", "cpu"])
    for variable in ("LOCAL_RANK", "PADDLE_RANK_IN_NODE", "PADDLE_TRAINER_ID"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PADDLE_TRAINER_ID", "2")
    assert feature.current_rank() == 2
    monkeypatch.setenv("PADDLE_TRAINER_ID", "5")
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        feature.current_rank()


def test_shard_mode_warns_and_replicates_on_cpu_devices():
    with pytest.warns(RuntimeWarning, match="falls back to 'replicate'"):
        feature = MultiDeviceFeature(_table(), ["cpu", "cpu"], mode="shard")
    assert feature.mode == "replicate"
    np.testing.assert_array_equal(feature.rank(1)[[4]], _table()[[4]])


@pytest.mark.cuda
def test_shard_mode_deals_hot_rows_round_robin_and_reads_peers():
    x, graph = _table(), _graph()
    row_bytes = x.shape[1] * x.itemsize
    feature = MultiDeviceFeature(x, ["cuda:0", "cuda:0"], cache_size=6 * row_bytes, mode="shard", graph=graph)
    assert feature.mode == "shard"
    hot = np.argsort(-graph.degree(), kind="stable")[:12]  # 2 devices x 6 rows
    assert feature.store(0).cached_ids.tolist() == hot[0::2].tolist()
    assert feature.store(1).cached_ids.tolist() == hot[1::2].tolist()
    cold = np.setdiff1d(np.arange(NUM_NODES), hot)[:3]
    ids = np.concatenate([hot[1::2][:3], cold, hot[0::2][:2], hot[1::2][:1]])  # peer, cold, own, peer
    before = feature.store(1).stats()["rows_device"]
    np.testing.assert_array_equal(to_host(feature.rank(0)[ids]), x[ids])
    assert feature.store(1).stats()["rows_device"] - before == 4  # rank 1's rows came from rank 1
    out = feature.devices[1].xp.empty((len(ids), x.shape[1]), x.dtype)
    assert feature.rank(1).gather(ids[::-1], out=out) is out
    np.testing.assert_array_equal(to_host(out), x[ids[::-1]])
    np.testing.assert_array_equal(to_host(feature.rank(1)[hot[1::2]]), x[hot[1::2]])  # all own: one gather
    feature.set_rank(0)
    with pytest.warns(RuntimeWarning, match="one process driving every device"):
        np.testing.assert_array_equal(to_host(feature[ids]), x[ids])  # own store + host tier: still exact


# ---------------------------------------------------------------------- spawned processes
def _maps_segment(array, name) -> bool:
    """Whether ``array``'s address lies in a mapping of /dev/shm/<name> in this process."""
    address = array.__array_interface__["data"][0]
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and (fields[5] == name or fields[5].endswith("/" + name)):
                lo, hi = (int(v, 16) for v in fields[0].split("-"))
                if lo <= address < hi:
                    return True
    return False


def _child(rank, sampler, feature, expected, scratch):
    seeds = np.arange(rank, NUM_NODES, 7)
    assert _same(sampler.sample(seeds, rank, key=5), expected[rank]), f"rank {rank}: sample differs"
    ids = np.array([rank, 0, rank, NUM_NODES - 1])
    np.testing.assert_array_equal(feature.rank(rank)[ids], feature.table[ids])
    # Every rank reads the same host rows here, so feature[ids] needs no rank (LOCAL_RANK unset).
    assert "LOCAL_RANK" not in os.environ
    np.testing.assert_array_equal(feature[ids], feature.table[ids])
    assert feature.stats()["lookups"] == len(ids) * (2 if rank == 0 else 1)  # rank 0's store served it
    feature.set_rank(rank)
    np.testing.assert_array_equal(feature[ids[::-1]], feature.table[ids[::-1]])
    graph = sampler.graph
    for array, handle in ((graph.indices, sampler._arrays["indices"]), (feature.table, feature._table)):
        assert is_shared(array, handle) and _maps_segment(array, handle.name), f"rank {rank}: a private copy"
    scratch.array[rank] = os.getpid()  # visible to the parent only through shared pages


@pytest.mark.parametrize("launcher, nprocs, source", [("torch", 2, "memory"), ("multiprocessing", 3, "files")])
def test_spawned_children_sample_like_the_parent_and_read_shared_memory(launcher, nprocs, source, tmp_path):
    graph, table = _graph(), _table()
    if source == "files":  # memory-mapped inputs: children map the same file pages
        graph.save(tmp_path / "graph.npz")
        graph = gg.CSRGraph.load(tmp_path / "graph.npz", mmap=True)
        np.save(tmp_path / "x.npy", table)
        table = np.load(tmp_path / "x.npy", mmap_mode="r")
    sampler = MultiDeviceSampler(graph, ["cpu"] * nprocs, [3, 2], seed=21)
    feature = MultiDeviceFeature(table, ["cpu"] * nprocs)
    kind = FileArray if source == "files" else SharedArray
    assert isinstance(sampler._arrays["indices"], kind) and isinstance(feature._table, kind)
    expected = [sampler.sample(np.arange(r, NUM_NODES, 7), r, key=5) for r in range(nprocs)]
    scratch = share(np.zeros(nprocs, dtype=np.int64))
    args = (sampler, feature, expected, scratch)
    if launcher == "torch":  # what users call; re-raises a child's assertion with its traceback
        mp = pytest.importorskip("torch.multiprocessing")
        context = mp.spawn(_child, args=args, nprocs=nprocs, join=False)
        processes = context.processes
        while not context.join():
            pass
    else:  # the standard library's spawn start method (no torch import in the children)
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        processes = [ctx.Process(target=_child, args=(rank, *args)) for rank in range(nprocs)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=120)
        assert [p.exitcode for p in processes] == [0] * nprocs, "a child failed (traceback above)"
    assert sorted(scratch.array.tolist()) == sorted(p.pid for p in processes)


def _gpu_child(rank, sampler, feature, expected):
    output = sampler.sample(np.arange(rank, NUM_NODES, 5), rank, key=1)  # builds on cuda:0 lazily
    assert _same(_host(output), expected[rank]), f"rank {rank}: GPU sample differs from the CPU one"
    ids = np.array([rank, 3, rank, 0])
    np.testing.assert_array_equal(to_host(feature.rank(rank)[ids]), feature.table[ids])
    assert feature.store(rank).num_cached == 10


@pytest.mark.cuda  # a real GPU, or the simulator in the children too (they inherit the environment)
def test_two_ranks_sharing_one_gpu_rebuild_device_state_in_each_child():
    mp = pytest.importorskip("torch.multiprocessing")
    graph = _graph()
    sampler = MultiDeviceSampler(graph, ["cuda:0", "cuda:0"], [3, 2], seed=2)
    feature = MultiDeviceFeature(_table(), ["cuda:0", "cuda:0"], cache_size=10 * 5 * 4, graph=graph)
    cpu = MultiDeviceSampler(graph, ["cpu", "cpu"], [3, 2], seed=2)
    expected = [cpu.sample(np.arange(r, NUM_NODES, 5), r, key=1) for r in range(2)]
    mp.spawn(_gpu_child, args=(sampler, feature, expected), nprocs=2, join=True)


def test_bench_multi_reports_per_rank_throughput_and_defined_scaling(capsys):
    import argparse

    from gglspeedup.bench import multi

    parser = argparse.ArgumentParser()
    multi.add_arguments(parser)
    args = parser.parse_args(
        [
            "--procs",
            "2",
            "--graph",
            "powerlaw:3000:8",
            "--fanouts",
            "5,3",
            "--batch",
            "64",
            "--duration",
            "0.2",
            "--repeats",
            "1",
        ]
    )
    result = multi.run(args)
    names = [row["config"] for row in result["configs"]]
    assert names[0] == "1 proc x 1 thread" and names[1].startswith("2 procs x ") and len(names) == 5
    assert names[3:] == ["control: 1 proc", "control: 2 procs"]
    assert [len(row["per_rank_medges_s"]) for row in result["configs"]] == [1, 2, 1, 1, 2]
    for row in result["configs"]:
        assert row["total_medges_s"] > 0 and all(v > 0 for v in row["per_rank_medges_s"])
    baseline, both = result["configs"][0]["total_medges_s"], result["configs"][1]["total_medges_s"]
    assert result["speedup"] == pytest.approx(both / baseline)
    assert result["efficiency"] == pytest.approx(result["speedup"] / 2)
    spin_one, spin_two = (row["total_medges_s"] for row in result["configs"][3:])
    assert result["control_speedup"] == pytest.approx(spin_two / spin_one)
    assert "speedup = total sampled edges/s" in capsys.readouterr().out
    with pytest.raises(ValueError, match="--procs"):
        multi.run(parser.parse_args(["--procs", "0"]))


@pytest.mark.parametrize("threads", ["0", "-1"])
def test_bench_multi_refuses_threads_per_proc_below_one_before_loading(threads):
    # 0 ran silently as the default (cores // procs), -1 failed in a worker after the graph was built
    import argparse

    from gglspeedup.bench import multi

    parser = argparse.ArgumentParser()
    multi.add_arguments(parser)
    args = parser.parse_args(["--graph", "file:/never/read.npz", "--threads-per-proc", threads])
    with pytest.raises(ValueError, match=f"--threads-per-proc must be >= 1, got {threads}"):
        multi.run(args)


@pytest.mark.gpu_hardware
def test_ids_on_a_gpu_select_the_rank_on_that_gpu():
    cupy = pytest.importorskip("cupy")
    x = _table()
    feature = MultiDeviceFeature(x, ["cpu", "cuda:0"])
    with cupy.cuda.Device(0):
        ids = cupy.asarray([3, 1, 3])
    assert feature.current_rank(ids) == 1
    rows = feature[ids]
    assert type(rows).__module__.startswith("cupy")
    np.testing.assert_array_equal(to_host(rows), x[[3, 1, 3]])


def test_rank_views_are_a_sampler_and_a_feature_source_a_loader_takes():
    from gglspeedup.protocols import FeatureSource, Sampler

    graph, table = _graph(), _table()
    sampler = MultiDeviceSampler(graph, ["cpu", "cpu"], [3, 2], seed=4)
    feature = MultiDeviceFeature(table, ["cpu", "cpu"])
    assert isinstance(sampler.rank(1), Sampler) and sampler.rank(1) is sampler.sampler(1)
    assert isinstance(feature.rank(1), FeatureSource) and isinstance(feature, FeatureSource)
    loader = gg.NodeLoader(sampler.rank(1), feature.rank(1), np.arange(10), 4, shuffle=False, backend=None)
    for index, batch in enumerate(loader):
        np.testing.assert_array_equal(batch.x, table[batch.n_id])
        assert _same(
            gg.SampleOutput(batch.n_id, batch.adjs), sampler.sample(batch.n_id[: batch.batch_size], 1, key=index)
        )


def test_rank_views_tell_their_shape_so_loaders_check_rows_and_typed_loaders_ask_featured_types():
    graph = _graph()
    sampler = MultiDeviceSampler(graph, ["cpu", "cpu"], [3, 2], seed=4)
    short = MultiDeviceFeature(_table(NUM_NODES - 1), ["cpu", "cpu"])
    assert short.rank(1).shape == short.shape == (NUM_NODES - 1, 5)
    with pytest.raises(ValueError, match=f"features has {NUM_NODES - 1} rows"):  # was a mid-epoch IndexError
        gg.NodeLoader(sampler.rank(1), short.rank(1), np.arange(10), 4, backend=None)
    # typed: the view's shape names the types with features; without it a typed loader asked
    # every node type of the sampler, and every batch raised "node type 'b' has no features"
    edges = np.random.default_rng(5).integers(0, 5, (2, 20))
    typed_graph = gg.HeteroGraph({("a", "to", "b"): edges, ("b", "to", "a"): edges[::-1]}, {"a": 5, "b": 5})
    typed_sampler = gg.HeteroNeighborSampler(typed_graph, [2, 2], seed=1)
    table = _table(5)
    feature = MultiDeviceFeature({"a": table, "b": None}, ["cpu", "cpu"])
    assert feature.rank(1).shape == {"a": (5, 5)}
    loader = gg.NodeLoader(typed_sampler, feature.rank(1), {"b": np.arange(5)}, 2, shuffle=False, backend=None)
    batches = list(loader)
    assert len(batches) == 3
    for index, batch in enumerate(batches):
        assert list(batch.x) == ["a"]
        np.testing.assert_array_equal(batch.x["a"], table[batch.n_id["a"]])
        expected = typed_sampler.sample({"b": np.arange(5)[2 * index : 2 * index + 2]}, key=index)
        np.testing.assert_array_equal(batch.n_id["a"], expected.n_id["a"])
    with pytest.raises(ValueError, match=r"features\['a'\] has 4 rows"):
        gg.NodeLoader(typed_sampler, MultiDeviceFeature({"a": table[:4]}, ["cpu"]).rank(0), {"b": [0]}, 2, backend=None)

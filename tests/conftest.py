"""Shared fixtures: device parametrisation and process-level import order.

``device`` parametrises a test over ``"cpu"`` and ``"cuda:0"``. The CUDA case carries the ``cuda``
marker and is skipped unless GPU kernels can run here: on a real GPU, or on numba's simulator when
``NUMBA_ENABLE_CUDASIM=1`` (``scripts/test.sh`` runs ``pytest -m cuda`` that way).
"""

import collections
import datetime
import importlib.util
import os
import threading
import time
import warnings

import numpy as np
import pytest

# Importing TensorFlow and then Paddle in one process segfaults (paddle's C extension); Paddle
# first is safe, so any test session that may touch both imports Paddle up front.
if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and importlib.util.find_spec("paddle"):
    from gglspeedup._threading import prefer_tbb

    prefer_tbb()  # Paddle 3.3's libpaddle.so needs libtbb.so.12, which pip puts outside the loader's path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import paddle  # noqa: F401

from gglspeedup import _config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    # numba-cuda 0.30's NumbaPerformanceWarning is not a subclass of numba's, and the module that
    # holds it moves between numba-cuda releases (a GPU machine's image may carry another one), so
    # the filter is added here where a missing module can be skipped, not in pyproject.toml where
    # it would stop pytest before any test ran.
    try:
        from numba.cuda.core.errors import NumbaPerformanceWarning  # noqa: F401
    except ImportError:
        return
    config.addinivalue_line("filterwarnings", "ignore::numba.cuda.core.errors.NumbaPerformanceWarning")


HAS_CUDA = _config.HAS_CUDA
HAS_GPU_HARDWARE = _config.HAS_NUMBA_CUDA and _config.HAS_CUPY_GPU

cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU and the CUDA simulator is off")
DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda:0", id="cuda", marks=[pytest.mark.cuda, cuda_only]),
]


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames and not any(
        mark.name == "parametrize" and "device" in mark.args[0] for mark in metafunc.definition.iter_markers()
    ):
        metafunc.parametrize("device", DEVICES)


# scripts/test.sh runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup
# --no-loadscope-reorder``), handing out whole files (``pytest_xdist_make_scheduler`` below), in
# the order sorted below. A file's tests mostly take the same kernel variants: split across the workers,
# both compiled each variant at the same moment on a cold cache (a third of the first minutes'
# compile time, measured); on one worker the first test compiles and the rest find it. These
# files share one thing per worker, so all of them go to one worker as one group: the service's
# Ray tests share one Ray instance per process (service_netns.py) and a second one would double
# Ray's processes on two cores.
# The two attention-pooling files run the same float64 pooling kernels (the NumPy maps and the
# fused layer): in one process the second file reuses the helpers the first compiled (a fresh
# process compiles them again beside the variant it cannot find in the cache); the two files
# took 97 s of CPU in two processes and 74 s in one (warm-up cache, load 4-5).
XDIST_GROUPS = {
    "ray": ("test_service_ray_",),
    "pooling": ("test_attention_pooling.py", "test_attention_pooling_layer.py"),
}
# The two longest files start first, one on each worker, so that neither is still running when
# the other worker has run out of work (ordering by the count of `slow` tests alone had started
# test_cuda_typing's one 112 s test after 17 other files). Their seconds on one worker of the
# idle 2-core CI machine (fde65e0's log): service sampling ~210, test_cuda_typing ~115. The Ray
# group (~150 s) is not among them: started beside test_service_sampling on a clean clone at
# load 5 it took 695 s (its bench test 190 s, under 10 s in the idle CI), most likely its actors
# compiling the partition servers' kernels while test_service_sampling compiled the same ones
# (not logged); after the files with slow tests it finds them in the cache.
FIRST_UNITS = ("test_service_sampling.py", "test_cuda_typing.py")
# These assert that Ctrl-C reaches the caller within a second: they run after the parallel pass,
# as ``-m serial`` on these files only (scripts/test.sh's SERIAL_FILES), with only the simulator
# suite beside them, at niceness 19.
SERIAL_FILES = ("test_interrupts.py",)


def _unit(nodeid: str) -> str:
    """The worker unit of the test ``nodeid``: its named group (XDIST_GROUPS), else its file."""
    path = nodeid.split("::")[0]
    name = os.path.basename(path)
    return next((group for group, prefixes in XDIST_GROUPS.items() if name.startswith(prefixes)), path)


def _xdist_group(item) -> str:
    return _unit(item.nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``, units are ``_unit``'s, in collection order. (xdist 3.8 reads
    ``xdist_group`` marks by renaming each item's ``_nodeid``, which pytest 9 no longer reads: its
    own loadgroup split every file and the "ray" group across both workers.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return _unit(nodeid)

    return UnitScheduling(config, log)


# Per xdist worker (on the controller): seconds spent in tests, when its first test started and
# its last one ended, and its units (files or groups) with their seconds; printed at the end of
# the run so that a log shows whether the two workers ended together.
_WORKERS: dict = {}


def pytest_runtest_logreport(report):
    node = getattr(report, "node", None)  # set by xdist on the controller's copy of a worker's report
    if node is None:
        return
    first = {"seconds": 0.0, "start": report.start, "stop": report.stop, "units": {}}
    busy = _WORKERS.setdefault(node.gateway.id, first)
    busy["seconds"] += report.duration
    busy["start"], busy["stop"] = min(busy["start"], report.start), max(busy["stop"], report.stop)
    unit = _unit(report.nodeid)
    busy["units"][unit] = busy["units"].get(unit, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _WORKERS:
        return
    begin = min(busy["start"] for busy in _WORKERS.values())
    terminalreporter.section("xdist workers: busy seconds, and when each ended (s after the first test)")
    for worker, busy in sorted(_WORKERS.items()):
        units = sorted(busy["units"].items(), key=lambda unit: -unit[1])
        longest = ", ".join(f"{os.path.basename(unit)} {seconds:.0f}" for unit, seconds in units[:8])
        terminalreporter.write_line(
            f"{worker}: {busy['seconds']:.0f} s in {len(units)} units, ended at {busy['stop'] - begin:.0f} s; "
            f"longest: {longest}"
        )


def pytest_collection_modifyitems(config, items):
    skip_hw = pytest.mark.skip(reason="needs a real CUDA GPU")
    groups = {}
    for item in items:
        groups[item] = _xdist_group(item)
        item.add_marker(pytest.mark.xdist_group(groups[item]))
        if item.path.name in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)
        if "gpu_hardware" in item.keywords and not HAS_GPU_HARDWARE:
            item.add_marker(skip_hw)
        if "cuda" in item.keywords and not HAS_CUDA:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU and the CUDA simulator is off"))
    # Longest first: xdist hands each worker the next unit as it finishes one, in this order, so
    # the wall ends with whichever unit started last. FIRST_UNITS run first, in their order; then
    # other units holding `slow` tests (most slow tests first), then the named groups,
    # then the other files by their number of tests, most first, so the two workers end on small
    # files, together.
    slow = collections.Counter(groups[item] for item in items if item.get_closest_marker("slow"))
    counts = collections.Counter(groups.values())

    def rank(item):
        group = groups[item]
        if os.path.basename(group) in FIRST_UNITS:
            return (0, FIRST_UNITS.index(os.path.basename(group)))
        if group in slow:
            return (1, -slow[group])
        return (2 if group in XDIST_GROUPS else 3, -counts[group])

    items.sort(key=rank)


def to_host(array):
    """A NumPy copy of a NumPy or CuPy array, or of a torch tensor on any device (test helper)."""
    if hasattr(array, "detach"):
        return array.detach().cpu().numpy()
    return array.get() if hasattr(array, "get") else np.asarray(array)


def gpu_hardware(device) -> bool:
    """Whether ``device`` names a real GPU here (not the CPU, not numba's simulator)."""
    return str(device).startswith("cuda") and not _config.cuda_sim_enabled()


def assert_same_bits(device, actual, expected, err_msg=""):
    """``actual`` (computed on ``device``) equals ``expected`` (the CPU's) bit for bit on the CPU
    and the simulator. On a real GPU, floats agree to 1024 ulps of the values' scale instead: NVVM
    fuses multiply-adds and libdevice rounds ``exp`` its own way (docs/DESIGN.md, attention);
    integers and booleans still exactly."""
    a, b = to_host(actual), to_host(expected)
    assert a.shape == b.shape, (a.shape, b.shape, err_msg)
    if not gpu_hardware(device) or a.dtype.kind not in "fc":
        np.testing.assert_array_equal(a, b, err_msg=err_msg)
        return
    assert a.dtype == b.dtype, (a.dtype, b.dtype, err_msg)
    tol = 1024 * np.finfo(a.dtype).eps
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale, err_msg=err_msg)


def load_file(relative_path, name=None):
    """Import a script of this repository (a demo or a tool) from its path under the root, as a
    module named ``name`` (default: the file's stem); it is not added to ``sys.modules``."""
    path = os.path.join(ROOT, relative_path)
    name = name or os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wait_for_exit(threads, seconds=5.0):
    """The threads still alive after waiting up to ``seconds`` for them."""
    deadline = time.monotonic() + seconds
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        time.sleep(0.01)
    return [t for t in threads if t.is_alive()]


def assert_close_stops_the_producer(loader):
    """Closing a prefetching loader's iterator after one batch stops its producer threads, and the
    closed iterator ends."""
    iterator = iter(loader)
    next(iterator)
    threads = iterator._threads
    iterator.close()
    assert not wait_for_exit(threads)
    with pytest.raises(StopIteration):
        next(iterator)


def run_in_threads(work, count):
    """Run ``work(0) .. work(count - 1)`` each on its own thread, all at once, and join them."""
    threads = [threading.Thread(target=work, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def free_port() -> int:
    """A TCP port on localhost that is free now (for a process group's rendezvous)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def init_gloo(rank, world_size, port, seconds):
    """Join a CPU (gloo) process group of ``world_size`` ranks on localhost ``port``."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=seconds),
    )


def assert_rejects(main, argv, cases):
    """Each ``(extra arguments, message)`` case makes ``main(argv + extra)`` raise a ValueError
    that matches ``message`` (bench commands refuse bad options before loading anything)."""
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            main([*argv, *extra])


def require_dgl():
    """DGL through the bench's peer loader, or skip the test when the peer is not installed."""
    from gglspeedup.bench import peers

    try:
        return peers.import_dgl()
    except peers.PeerUnavailable as error:
        pytest.skip(f"DGL peer not installed (scripts/install_peers.sh): {error}")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# ---------------------------------------------------------------------------- a small typed graph
# The typed tests' academic schema: citations (a self-typed relation), authorship both ways and
# topics both ways, over node types paper, author and field.
CITES = ("paper", "cites", "paper")
WRITES = ("author", "writes", "paper")
WRITTEN_BY = ("paper", "written_by", "author")
TOPIC_OF = ("field", "topic_of", "paper")
HAS_TOPIC = ("paper", "has_topic", "field")


def academic_graph(rng, num_nodes, edges, weights=False, multi=True):
    """A random :class:`~gglspeedup.HeteroGraph` on the academic schema.

    ``edges[i]`` uniform random edges (repeats and self loops included) of the i-th relation of
    CITES, WRITES, WRITTEN_BY, TOPIC_OF, HAS_TOPIC (as many relations as ``edges`` has counts),
    between ``num_nodes`` (node type -> count) nodes; ``multi=False`` drops the repeats;
    ``weights`` makes each relation a weighted CSR (about 15% zero weights, never drawn).
    """
    import gglspeedup as gg

    relations = {}
    for et, count in zip((CITES, WRITES, WRITTEN_BY, TOPIC_OF, HAS_TOPIC), edges):
        src = rng.integers(0, num_nodes[et[0]], count)
        dst = rng.integers(0, num_nodes[et[2]], count)
        if not multi:
            src, dst = np.unique(np.stack((src, dst)), axis=1)
        if weights:
            w = rng.random(len(src))
            w[rng.random(len(src)) < 0.15] = 0.0
            relations[et] = gg.CSRGraph.from_edge_index(
                np.stack((src, dst)), num_nodes=num_nodes[et[2]], num_src_nodes=num_nodes[et[0]], weights=w
            )
        else:
            relations[et] = np.stack((src, dst))
    return gg.HeteroGraph(relations, num_nodes)

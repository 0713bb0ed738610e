"""One Ray instance per test session, inside a private network namespace (the service's tests).

Import the fixtures into a test module (``from service_netns import ray_session``). The first test
that asks for ``ray_session`` moves pytest's main thread into a new network namespace (its only
interface, ``lo``, up: :mod:`gglspeedup.service.netns`) and starts Ray there, so every socket
Ray opens is on that namespace's 127.0.0.1 and nothing listens on the machine's interfaces. The
instance serves every later test; after the module of the last test that needs it, Ray is shut
down, its processes are waited for, its temporary folder removed, and the thread returns to the
machine's namespace (so the rest of the session runs where it always did).

Where namespaces cannot be made (not root, and no user namespaces), the tests that need Ray skip,
saying so; run them as root or under ``unshare -rn``.

The same thread also gets a mount namespace of its own whose ``/dev/shm`` is a fresh tmpfs
(:class:`PrivateSharedMemory`), so the tests that check Ray and the servers left no shared-memory
segment behind read only what this session's processes made: the machine's ``/dev/shm`` is shared
with the other test worker (and any other process), whose segments once failed such a check.
Where the mount namespace cannot be made, the machine's ``/dev/shm`` is used as before. Linux lets
the thread back into the machine's mount namespace only once no thread started inside shares its
filesystem state, and Ray's driver leaves such threads running after its shutdown: the thread then
keeps the private ``/dev/shm`` for the rest of the session (the processes it starts share it).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import time

import pytest

from gglspeedup.service.netns import _libc_call

RAY_CPUS = 2
OBJECT_STORE_BYTES = 256 << 20
RAY_ENV = {"RAY_DEDUP_LOGS": "0"}


class RaySession:
    """The session's Ray: ``ray``, the private ``network`` it runs in, its ``temp_dir`` and the
    address a second driver joins it at (``address``)."""

    def __init__(self):
        from gglspeedup.service.netns import private_network

        try:
            import ray
        except ImportError:
            pytest.skip("Ray is not installed (pip install 'gglspeedup[service]')")
        try:
            self.network = private_network()
        except PermissionError as error:
            pytest.skip(f"no private network namespace for Ray: {error}")
        self.shared_memory = private_shared_memory()  # after the network: it may need its user namespace
        from gglspeedup.service._actors import RAY_SYSTEM_CONFIG

        os.environ.update(RAY_ENV)
        self.ray = ray
        self.temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
        try:
            ray.init(
                num_cpus=RAY_CPUS,
                include_dashboard=False,
                object_store_memory=OBJECT_STORE_BYTES,
                log_to_driver=False,
                _temp_dir=self.temp_dir,
                _system_config=RAY_SYSTEM_CONFIG,  # as serve() starts Ray
            )
        except BaseException:
            self._leave()
            raise
        self.address = ray.get_runtime_context().gcs_address
        self.stopped = False

    def processes(self) -> list[int]:
        """Every process in the session's namespace but this one: Ray's (GCS, raylet, workers)."""
        return [pid for pid in processes_in_namespace(self.network.id) if pid != os.getpid()]

    def stop(self) -> None:
        """Shut Ray down, wait for its processes, remove its folder, leave the namespace."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self.ray.shutdown()
            _wait_gone(self.processes(), seconds=10.0)
        finally:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self._leave()

    def _leave(self) -> None:
        try:
            if self.shared_memory is not None:
                self.shared_memory.close()
        finally:
            self.network.close()


class PrivateSharedMemory:
    """The calling thread moved into a new mount namespace whose ``/dev/shm`` is an empty tmpfs of
    its own; processes the thread starts afterwards (Ray's) inherit it. :meth:`close` returns the
    thread to the mount namespace it came from; the tmpfs goes with the last process inside.

    As root, or inside a user namespace (``private_network``'s unprivileged way); otherwise
    ``OSError``. Linux refuses the return while another thread started inside still runs (it
    shares the thread's filesystem state; Ray's driver leaves such threads after its shutdown):
    the thread then stays, with this ``/dev/shm``."""

    def __init__(self):
        self._outer = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        self.outer_id = os.fstat(self._outer).st_ino
        try:
            _libc_call("unshare", CLONE_NEWNS)  # implies unsharing the thread's filesystem state
            _libc_call("mount", b"none", b"/", None, MS_REC | MS_PRIVATE, None)  # mounts made here stay here
            _libc_call("mount", b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._outer < 0:
            return
        try:
            if os.stat("/proc/thread-self/ns/mnt").st_ino != self.outer_id:
                _libc_call("setns", self._outer, CLONE_NEWNS)
        except OSError:
            pass  # see the class's notes: the thread keeps the private /dev/shm
        finally:
            os.close(self._outer)
            self._outer = -1


CLONE_NEWNS, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x00020000, 0x2, 0x4, 0x4000, 1 << 18


def private_shared_memory() -> PrivateSharedMemory | None:
    """A :class:`PrivateSharedMemory` for the calling thread, or ``None`` where no mount namespace
    can be made (then ``/dev/shm`` is the machine's)."""
    try:
        return PrivateSharedMemory()
    except OSError:
        return None


_SESSION: list = []


def _wait_gone(pids, seconds: float) -> list[int]:
    """Wait up to ``seconds`` for ``pids`` to exit; the ones still alive."""
    limit = time.monotonic() + seconds
    alive = [pid for pid in pids if process_alive(pid)]
    while alive and time.monotonic() < limit:
        time.sleep(0.05)
        alive = [pid for pid in alive if process_alive(pid)]
    return alive


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def processes_in_namespace(namespace: int) -> list[int]:
    """Every process whose network namespace is ``namespace`` (an inode)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}/ns/net").st_ino == namespace:
                    pids.append(int(name))
            except OSError:
                continue
    return pids


def shared_memory_entries() -> set:
    """The names in ``/dev/shm`` (POSIX shared memory objects) now."""
    return set(os.listdir("/dev/shm"))


def channel_entries() -> set:
    """What the service's channels hold now: their listening sockets in this network namespace
    (abstract Unix names, ``/proc/net/unix``) and this process's shared-memory files and
    mappings of channel connections (``memfd``: nothing in ``/dev/shm``)."""
    import gc

    gc.collect()  # connections dropped in reference cycles let go of their mappings now
    found = set()
    with open("/proc/self/net/unix") as table:
        for line in table.read().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 7 and fields[7].startswith("@gglspeedup-"):
                found.add(fields[7])
    with open("/proc/self/maps") as maps:
        found.update(f"map {line.split()[0]}" for line in maps if "gglspeedup-channel" in line)
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "gglspeedup-channel" in os.readlink(f"/proc/self/fd/{fd}"):
                found.add(f"fd {fd}")
        except OSError:
            continue
    return found


def session() -> RaySession:
    if not _SESSION or _SESSION[0].stopped:
        _SESSION[:] = [RaySession()]
        atexit.register(_SESSION[0].stop)
    return _SESSION[0]


def _needs_ray_later(request) -> bool:
    """Whether a test after the current module's still asks for ``ray_session``."""
    items = request.session.items
    module = request.node.nodeid if request.scope == "module" else request.module.__name__
    last = max((i for i, item in enumerate(items) if item.nodeid.startswith(module.split("::")[0])), default=-1)
    return any("ray_session" in item.fixturenames for item in items[last + 1 :])


@pytest.fixture(scope="module")
def ray_session(request):
    """The session's :class:`RaySession` (started on first use; stopped after the last module
    that uses it)."""
    yield session()
    if not _needs_ray_later(request):
        _SESSION[0].stop()


def kill(pid: int, sig=signal.SIGKILL) -> None:
    """Send ``sig`` to ``pid`` (a server process of the session's Ray); a ``SIGSTOP`` returns once
    every thread of it has stopped (:func:`gglspeedup.testing.service.stop_process`: until then a
    server under load may still answer the next request)."""
    if sig == signal.SIGSTOP:
        from gglspeedup.testing.service import stop_process

        stop_process(pid)
        return
    os.kill(pid, sig)


def wait_gone(pids, seconds: float = 10.0) -> list[int]:
    """Wait up to ``seconds`` for ``pids`` to exit; the ones still alive."""
    return _wait_gone(pids, seconds)


# ---------------------------------------------------------------------------- data the tests serve
_DATA: dict = {}


def small_graph(num_nodes: int = 400, num_edges: int = 3000, seed: int = 0):
    """``(graph, x, y)``: a random graph with edge ids, float32 features (16 wide) and labels."""
    import numpy as np

    import gglspeedup as gg

    rng = np.random.default_rng(seed)
    edge_index = rng.integers(0, num_nodes, (2, num_edges))
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes)
    x = rng.standard_normal((num_nodes, 16)).astype(np.float32)
    y = rng.integers(0, 7, num_nodes)
    return graph, x, y


def partitioned(tmp_path_factory, method: str = "metis", num_parts: int = 3, **options):
    """``(folder, graph, x, y)``: :func:`small_graph` partitioned once per session per arguments
    (``options`` go to ``partition``, e.g. ``edge_time``), every kind of request the tests make
    sent once first: in this process, then (with the session's Ray up) through a server actor with
    a deadline long enough to compile. Kernels then come from Numba's disk cache, so no test's
    first request compiles against a short deadline (a cold cache in CI, or kernels just changed:
    requests arriving through Ray may take kernel types of their own)."""
    import numpy as np

    from gglspeedup.service import LocalTransport, PartServer, RemoteSampler, partition

    key = (method, num_parts, tuple(sorted((k, id(v)) for k, v in options.items())))
    if key not in _DATA:
        graph, x, y = small_graph()
        folder = str(tmp_path_factory.mktemp("parts") / f"{method}{num_parts}")
        partition(graph, folder, num_parts, features=x, labels=y, method=method, **options)
        servers = [PartServer(folder, [p]) for p in range(num_parts)]
        transport = LocalTransport(servers, [(p,) for p in range(num_parts)])
        edges = np.stack([graph.indices[:8], np.searchsorted(graph.indptr, np.arange(8), side="right") - 1])
        _warm(lambda fanouts, **more: RemoteSampler(transport, folder, fanouts, **more), options, edges)
        if _SESSION and not _SESSION[0].stopped:
            from gglspeedup.service import serve

            with serve(folder, 1, deadline="600s", max_restarts=0) as cluster:
                _warm(cluster.sampler, options, edges)
                cluster.features()[list(range(8))]
        _DATA[key] = (folder, graph, x, y)
    return _DATA[key]


def _warm(make_sampler, options: dict, edges) -> None:
    """One batch of every kind the tests draw: node batches, link batches (negatives, exclusion,
    strict checks; int32 and int64 pairs; ``edges``, graph edges, so that rows with excluded edges
    are drawn too: their kernel is one of its own), disjoint trees; temporal ones for a temporal
    folder."""
    import numpy as np

    times = _times(options)
    sampler = make_sampler([3, 2], **times)
    sampler.sample(np.arange(8), key=0, seed_time=np.full(8, 2**40) if times else None)
    if times:
        return
    for dtype in (np.int64, np.int32):  # kernels compile per id type
        pairs = np.concatenate([np.stack([np.arange(8), np.arange(8, 16)]), edges], axis=1).astype(dtype)
        for negatives in ("binary", "per_source", "triplet"):
            sampler.sample_links(pairs, negatives=negatives, strict_negatives=True, exclude="reverse", key=1)
        sampler.sample_links(pairs, exclude="self", key=1)
    make_sampler([3, 2], disjoint=True).sample(np.arange(8), key=0)


def _times(options: dict) -> dict:
    return {k: v for k, v in options.items() if k in ("node_time", "edge_time")}

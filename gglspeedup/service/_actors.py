"""Starting the server processes: a Ray connection, one actor per (group, replica), a transport.

:func:`connect` joins Ray (an existing connection of this process, a cluster at ``address``, or a
new local instance in a temporary folder of its own) and :func:`disconnect` leaves it (stopping
that local instance and removing its folder); :func:`start_servers` starts every replica of every
group at once, waits until each has built its server (mapped its parts, warmed its kernels) and
returns the :class:`~._ray_transport.RayTransport` over them; :func:`attach_servers` finds
servers another process started under names (``python -m gglspeedup.service serve``).
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import tempfile
import time
import warnings

from ._ray import ServerHost, import_ray, ray_errors
from ._ray_transport import RayTransport, Replica

__all__ = [
    "NAMESPACE",
    "RAY_SYSTEM_CONFIG",
    "connect",
    "disconnect",
    "start_servers",
    "attach_servers",
    "refresh_replicas",
    "server_name",
    "server_threads",
    "split_address",
]

NAMESPACE = "gglspeedup"  # the Ray namespace of named servers
# Settings of the Ray instances this package starts. A hop's answer (about 1 MB for [15, 10] and
# 1024 seeds) moves faster inline in the reply than through the object store below about 2 MB
# (measured here: 0.8 MB in 2.4 ms inline vs 4.1 ms stored; equal near 2.4 MB; a batch of the
# service bench 15 ms instead of 20). Ray starts its worker processes (the servers) 15 nice
# levels above the raylet unless told otherwise: a server would then get a core only when no
# process or thread of the trainer's niceness wants one, and a batch waits on both servers'
# draws (beside one busy process of the same session: 17-53 batches/s at niceness 15 against
# 85-99 at 0, BENCHMARKS svc40i). The servers run at the niceness of the process that started
# Ray. Joined clusters keep their own settings.
RAY_SYSTEM_CONFIG = {"max_direct_call_object_size": 2 << 20, "worker_niceness": 0}
_HOST_CLASS = []  # ray.remote(ServerHost), made once per process
# The folder of the local Ray instance connect() started (its session's logs, sockets and spilled
# objects), removed by disconnect(): Ray's default, /tmp/ray, keeps every session's logs forever.
_LOCAL_TEMP_DIRS: list = []
# Ray's Unix sockets lie at <folder>/session_<date>_<time>_<microseconds>_<pid>/sockets/plasma_store
# (and .../raylet), and an AF_UNIX path holds at most 107 bytes: this much is Ray's below the folder.
_RAY_SOCKET_TAIL = len("/session_2026-01-01_00-00-00_000000_4194304/sockets/plasma_store.99")
_AF_UNIX_PATH_MAX = 107


def connect(address: str | None):
    """``(ray, started)``: Ray connected for this process. An existing connection is used as is
    (``started`` False); otherwise ``address`` (``"auto"``, ``"host:port"``, ``"ray://host:port"``)
    is joined, or with ``None`` a local instance is started on the loopback address (the embedded
    default) in a temporary folder of its own (:func:`local_temp_dir`), which :func:`disconnect`
    removes. ``started`` tells whether this call connected (and the caller should
    :func:`disconnect`)."""
    ray = import_ray()
    if ray.is_initialized():
        return ray, False
    if address is None:
        temp_dir = local_temp_dir()
        try:
            ray.init(
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                log_to_driver=False,
                _system_config=RAY_SYSTEM_CONFIG,
                _temp_dir=temp_dir,
            )
        except BaseException:
            _remove_folder(temp_dir)
            raise
        _LOCAL_TEMP_DIRS.append(temp_dir)
    else:
        check_reachable(address)
        ray.init(address=address, log_to_driver=False)
    return ray, True


def split_address(address: str, name: str = "address") -> tuple[str, int] | None:
    """``(host, port)`` of a ``"host:port"`` or ``"ray://host:port"`` address (``[::1]:6379`` for
    IPv6), ``None`` for ``"auto"``; ``ValueError`` naming ``name`` for any other form. The form
    alone: nothing is resolved or connected to (:func:`check_reachable` does that)."""
    if address == "auto":
        return None
    target = address[len("ray://") :] if address.startswith("ray://") else address
    host, _, port = target.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host  # [::1]:6379
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{name} must be 'auto', 'host:port' or 'ray://host:port', got {address!r}")
    return host, int(port)


def check_reachable(address: str, timeout: float = 10.0) -> None:
    """Raise unless the ``host:port`` (or ``ray://host:port``) of ``address`` takes a TCP
    connection within ``timeout`` seconds: ``ray.init`` retries an unreachable or unresolvable
    address for minutes before it fails. ``"auto"`` (Ray finds its own cluster, or fails at once)
    is not checked. ``ValueError`` for an address without a port, ``ConnectionError`` naming the
    address for one that cannot be reached."""
    target = split_address(address)
    if target is None:
        return
    host, port = target
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        raise ConnectionError(
            f"address {address!r}: no Ray cluster answers at {host}:{port} ({error or type(error).__name__}); "
            "start one there (ray start --head) or leave address unset for a local instance"
        ) from None


def disconnect() -> None:
    """Leave Ray (``ray.shutdown()``): a local instance :func:`connect` started stops, and its
    temporary folder (logs, sockets, spilled objects) is removed; a joined cluster is left as is."""
    try:
        import_ray().shutdown()
    finally:
        while _LOCAL_TEMP_DIRS:
            _remove_folder(_LOCAL_TEMP_DIRS.pop())


def local_temp_dir() -> str:
    """A new folder for a local Ray instance, where Ray would put its own (``RAY_TMPDIR``, else
    ``TMPDIR``, else ``/tmp``), or in ``/tmp`` when Ray's socket paths below that would pass
    the 107 bytes of an ``AF_UNIX`` path."""
    base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    if len(os.path.join(os.path.abspath(base), "rayXXXXXXXX").encode()) + _RAY_SOCKET_TAIL > _AF_UNIX_PATH_MAX:
        base = "/tmp"
    return tempfile.mkdtemp(prefix="ray", dir=base)  # absolute, as Ray requires


def _remove_folder(path: str) -> None:
    """Remove ``path`` and everything below it; a warning names it if it cannot be removed (a
    process of the stopped instance may still be writing there: tried again for a moment)."""
    for attempt in range(20):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if attempt == 19:
                warnings.warn(f"could not remove Ray's temporary folder {path}: {error}", stacklevel=3)
                return
            time.sleep(0.05)


def server_threads(processes: int):
    """Numba threads for each of ``processes`` server processes when all of them run on this
    machine (the Ray cluster is this one node): its cores shared among them, at least one each;
    ``None`` (each process takes the node's cores, Numba's default) on a cluster of several
    nodes, where the spread is Ray's to choose."""
    import os

    ray = import_ray()
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    if len(nodes) != 1 or nodes[0]["NodeID"] != ray.get_runtime_context().get_node_id():
        return None
    return max(1, len(os.sched_getaffinity(0)) // max(processes, 1))


def server_name(tag: str, group: int, replica: int) -> str:
    """The Ray name of a named server: ``gglspeedup.service/<tag>/<group>/<replica>``."""
    return f"gglspeedup.service/{tag}/{group}/{replica}"


def _host_class(ray):
    if not _HOST_CLASS:
        _HOST_CLASS.append(ray.remote(ServerHost))
    return _HOST_CLASS[0]


def start_servers(
    factory: str,
    group_options: list,
    group_parts,
    *,
    replicas: int = 1,
    max_restarts: int = 1,
    deadline: float = 5.0,
    startup: float = 120.0,
    tag: str | None = None,
    threads: int | None = None,
) -> RayTransport:
    """Start ``replicas`` actors per group (``group_options[g]``: the server's keyword arguments),
    spread over the cluster's nodes, and return the transport over them once all answer. Every
    server's channel takes the same new secret (a restarted process gets it again from Ray).

    Actors reserve no CPU (they answer requests; their kernels use ``threads`` Numba threads,
    default the node's cores), so any number fit on one machine. With ``tag`` they get names
    (:func:`server_name`) in the :data:`NAMESPACE` namespace, for :func:`attach_servers`. A
    server that fails to start, or does not answer within ``startup`` seconds, stops them all and
    raises ``RuntimeError`` with its error.
    """
    from ._channel import new_secret

    ray = import_ray()
    host = _host_class(ray)
    secret = new_secret()  # the cluster's: it reaches the servers and trainers only through Ray
    handles = []
    for group, options in enumerate(group_options):
        for replica in range(replicas):
            placement = {
                "max_restarts": max_restarts,
                "max_task_retries": 0,  # the transport retries, knowing which requests may be
                "num_cpus": 0,
                "scheduling_strategy": "SPREAD",
            }
            if tag is not None:
                placement.update(name=server_name(tag, group, replica), namespace=NAMESPACE, get_if_exists=False)
            actor = host.options(**placement).remote(factory, options, group, replica, max_restarts, secret, threads)
            handles.append((group, replica, actor))
    try:
        infos = _describe_all([h for _, _, h in handles], startup)
    except BaseException:
        for _, _, handle in handles:
            ray.kill(handle, no_restart=True)
        raise
    return _transport(handles, infos, group_parts, len(group_options), max_restarts, deadline, startup)


def attach_servers(tag: str, *, deadline: float, startup: float = 120.0):
    """The transport over named servers another process started with ``tag`` (groups and replicas
    as that process made them; each server reports its partitions and restarts), or ``None`` when
    there are none. Closing it does not stop them (their starter does)."""
    ray = import_ray()
    handles = []
    for group in itertools.count():
        found = 0
        for replica in itertools.count():
            try:
                handle = ray.get_actor(server_name(tag, group, replica), namespace=NAMESPACE)
            except ValueError:
                break
            handles.append((group, replica, handle))
            found += 1
        if not found:
            break
    if not handles:
        return None
    infos = _describe_all([h for _, _, h in handles], startup)
    groups = 1 + max(group for group, _, _ in handles)
    group_parts = [()] * groups
    for (group, _, _), info in zip(handles, infos):
        group_parts[group] = tuple(int(p) for p in info["info"]["parts"])
    transport = _transport(handles, infos, group_parts, groups, None, deadline, startup)
    transport.owner = False
    return transport


def refresh_replicas(transport: RayTransport, seconds: float = 1.0) -> None:
    """Ask every replica that answers requests who it is (pid, node) now, waiting at most
    ``seconds`` (or the deadline if shorter); replicas that do not answer keep what was known."""
    ray = import_ray()
    if not ray.is_initialized():  # Ray shut down here: asking would start a new local instance
        return
    asked = {}
    for replica in transport.all_replicas():
        if replica.state in ("ok", "suspect"):
            asked[replica.handle.describe.remote()] = replica
    if not asked:
        return
    ready, _ = ray.wait(list(asked), num_returns=len(asked), timeout=min(seconds, transport.deadline))
    for ref in ready:
        replica = asked[ref]
        try:
            info = ray.get(ref, timeout=0)
        except Exception:  # died or unreachable: the next request finds out and handles it
            continue
        with replica.lock:
            if info["incarnation"] != replica.info["incarnation"]:
                replica.pids.append(info["pid"])
            replica.info = info


def _describe_all(handles, startup: float) -> list:
    ray = import_ray()
    died, _, task_error, ray_error, timeout = ray_errors()
    start = time.monotonic()
    try:
        return ray.get([handle.describe.remote() for handle in handles], timeout=startup)
    except timeout:
        raise RuntimeError(f"the servers did not start within {startup:g} s") from None
    except (died, task_error, ray_error) as error:
        raise RuntimeError(f"a server failed to start after {time.monotonic() - start:.1f} s: {error}") from None


def _transport(handles, infos, group_parts, groups: int, max_restarts, deadline, startup) -> RayTransport:
    """The transport over started or found actors (``max_restarts`` None: as each reports)."""
    ray = import_ray()
    replicas = [[] for _ in range(groups)]
    for (group, replica, handle), info in zip(handles, infos):
        restarts = info["max_restarts"] if max_restarts is None else max_restarts
        replicas[group].append(Replica(handle, group, replica, info, restarts))
    node_id = ray.get_runtime_context().get_node_id()
    return RayTransport(replicas, group_parts, deadline=deadline, startup=startup, node_id=node_id)

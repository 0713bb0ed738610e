"""Starting the server processes: a Ray connection, one actor per (group, replica), a transport.

:func:`connect` joins Ray (an existing connection of this process, a cluster at ``address``, or a
new local instance); :func:`start_servers` starts every replica of every group at once, waits
until each has built its server (mapped its parts, warmed its kernels) and returns the
:class:`~._ray_transport.RayTransport` over them; :func:`attach_servers` finds servers another
process started under names (``python -m gglspeedup.service serve``).
"""

from __future__ import annotations

import time

from ._ray import ServerHost, import_ray, ray_errors
from ._ray_transport import RayTransport, Replica

__all__ = ["NAMESPACE", "connect", "start_servers", "attach_servers", "server_name"]

NAMESPACE = "gglspeedup"  # the Ray namespace of named servers
_HOST_CLASS = []  # ray.remote(ServerHost), made once per process


def connect(address: str | None):
    """``(ray, started)``: Ray connected for this process. An existing connection is used as is
    (``started`` False); otherwise ``address`` (``"auto"``, ``"host:port"``, ``"ray://host:port"``)
    is joined, or with ``None`` a local instance is started on the loopback address (the embedded
    default). ``started`` tells whether this call connected (and the caller should disconnect)."""
    ray = import_ray()
    if ray.is_initialized():
        return ray, False
    if address is None:
        ray.init(include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    return ray, True


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
) -> RayTransport:
    """Start ``replicas`` actors per group (``group_options[g]``: the server's keyword arguments),
    spread over the cluster's nodes, and return the transport over them once all answer.

    Actors reserve no CPU (they answer requests; their kernels use the node's threads), so any
    number fit on one machine. With ``tag`` they get names (:func:`server_name`) in the
    :data:`NAMESPACE` namespace, for :func:`attach_servers`. A server that fails to start, or does
    not answer within ``startup`` seconds, stops them all and raises ``RuntimeError`` with its
    error.
    """
    ray = import_ray()
    host = _host_class(ray)
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
            handles.append((group, replica, host.options(**placement).remote(factory, options, group, replica)))
    try:
        infos = _describe_all([h for _, _, h in handles], startup)
    except BaseException:
        for _, _, handle in handles:
            ray.kill(handle, no_restart=True)
        raise
    return _transport(handles, infos, group_parts, len(group_options), max_restarts, deadline, startup)


def attach_servers(tag: str, group_parts, *, replicas: int, max_restarts: int, deadline: float, startup: float = 120.0):
    """The transport over named servers another process started with ``tag``, or ``None`` when
    there are none. Closing it does not stop them (their starter does)."""
    ray = import_ray()
    handles = []
    for group in range(len(group_parts)):
        for replica in range(replicas):
            try:
                handle = ray.get_actor(server_name(tag, group, replica), namespace=NAMESPACE)
            except ValueError:
                if handles:
                    raise RuntimeError(
                        f"named servers {tag!r} are incomplete: {server_name(tag, group, replica)} is missing"
                    ) from None
                return None
            handles.append((group, replica, handle))
    infos = _describe_all([h for _, _, h in handles], startup)
    transport = _transport(handles, infos, group_parts, len(group_parts), max_restarts, deadline, startup)
    transport.owner = False
    return transport


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
    ray = import_ray()
    replicas = [[] for _ in range(groups)]
    for (group, replica, handle), info in zip(handles, infos):
        replicas[group].append(Replica(handle, group, replica, info, max_restarts))
    node_id = ray.get_runtime_context().get_node_id()
    return RayTransport(replicas, group_parts, deadline=deadline, startup=startup, node_id=node_id)

"""Ray in the tests touches no network: every socket of its processes is on a private loopback.

The session's Ray (``service_netns``) runs in a network namespace pytest's main thread made; these
tests prove it: Ray's processes share that namespace, its one interface is ``lo``, every socket
they hold is bound to (and connected to) a loopback address, and Ray registered 127.0.0.1 as the
node's address. Token authentication stays on. Its ``/dev/shm`` is a tmpfs of its own, which Ray's
processes share and no process outside sees.
"""

import ipaddress
import os
import threading

import psutil
import pytest
from service_netns import ray_session  # noqa: F401

from gglspeedup.service.netns import interfaces, namespace_id, private_network


def _loopback_or_unspecified(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def test_service_ray_every_socket_is_on_the_private_loopback(ray_session):  # noqa: F811
    network = ray_session.network
    processes = ray_session.processes()
    names = {psutil.Process(pid).name() for pid in processes}
    assert {"gcs_server", "raylet"} <= names, names
    assert network.id != network.outer_id and namespace_id() == network.id
    assert interfaces() == ["lo"]
    sockets = 0
    for pid in processes:
        assert namespace_id(pid) == network.id
        assert interfaces(pid) == ["lo"]
        for connection in psutil.Process(pid).net_connections(kind="inet"):
            sockets += 1
            assert _loopback_or_unspecified(connection.laddr.ip), (pid, connection)
            if connection.raddr:
                assert _loopback_or_unspecified(connection.raddr.ip), (pid, connection)
    assert sockets > 0  # the check saw Ray's sockets, not an empty list
    ray = ray_session.ray
    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}


def test_service_ray_keeps_token_authentication_on(ray_session):  # noqa: F811
    from ray._raylet import AuthenticationMode, get_authentication_mode

    assert "RAY_AUTH_MODE" not in os.environ or os.environ["RAY_AUTH_MODE"].lower() == "token"
    assert get_authentication_mode() == AuthenticationMode.TOKEN


def test_service_ray_shares_a_private_dev_shm_no_outside_process_sees(ray_session):  # noqa: F811
    shared_memory = ray_session.shared_memory
    if shared_memory is None:
        pytest.skip("no mount namespace here (neither root nor a user namespace): the machine's /dev/shm is used")
    inside = os.stat("/proc/thread-self/ns/mnt").st_ino
    assert inside != shared_memory.outer_id
    assert all(os.stat(f"/proc/{pid}/ns/mnt").st_ino == inside for pid in ray_session.processes())
    name = f"gglspeedup-test-{os.getpid()}"
    with open(f"/dev/shm/{name}", "w"):
        try:
            assert name in os.listdir(f"/proc/{ray_session.processes()[0]}/root/dev/shm")  # Ray's view
            assert name not in os.listdir(f"/proc/{os.getppid()}/root/dev/shm")  # the parent's: outside
        finally:
            os.unlink(f"/dev/shm/{name}")


def test_service_private_network_is_per_thread_and_returns_where_it_came_from():
    outer = namespace_id()
    seen = {}

    def other_thread(network):
        seen["namespace"] = namespace_id()
        try:
            network.close()
        except RuntimeError as error:
            seen["error"] = str(error)

    try:
        network = private_network()
    except PermissionError as error:
        pytest.skip(f"no private network namespace here: {error}")
    with network:
        assert namespace_id() == network.id != outer and interfaces() == ["lo"]
        thread = threading.Thread(target=other_thread, args=(network,))
        thread.start()
        thread.join()
        assert seen["namespace"] == network.id  # threads started inside inherit the namespace
        assert "from the thread that entered it" in seen["error"]
        assert namespace_id() == network.id
    assert namespace_id() == outer

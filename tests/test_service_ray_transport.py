"""The Ray transport under failures: named errors in bounded time, retries that change nothing.

Servers here are :class:`gglspeedup.testing.service.EchoServer` actors (no partitions needed); Ray
runs inside the session's private network namespace (``service_netns``). The time bounds asserted
are the contract's (issue 40: a kill named within 2 s, a stop within deadline + 1 s), not speed.
"""

import signal
import time

import numpy as np
import pytest
from service_netns import kill, process_alive, ray_session, wait_gone  # noqa: F401

from gglspeedup.service import ServerUnavailable
from gglspeedup.service._actors import start_servers
from gglspeedup.testing.service import ECHO_SERVER

PARTS = [(0,), (1, 2)]
VALUES = np.arange(6, dtype=np.int64)


def start(factors=(2, 3), *, replicas=1, max_restarts=0, deadline=1.0):
    options = [{"factor": f, "parts": list(p)} for f, p in zip(factors, PARTS)]
    return start_servers(
        ECHO_SERVER, options, PARTS[: len(factors)], replicas=replicas, max_restarts=max_restarts, deadline=deadline
    )


def scale_all(transport, key=None):
    requests = {g: ("scale", {"values": VALUES}) for g in range(len(transport.group_parts))}
    return {g: answer["values"].tolist() for g, answer in transport.call(requests, key=key).items()}


EXPECTED = {0: (VALUES * 2).tolist(), 1: (VALUES * 3).tolist()}


def pid_of(transport, group, replica=0):
    return transport.replicas[group][replica].info["pid"]


def timed_failure(transport, key):
    start_time = time.monotonic()
    with pytest.raises(ServerUnavailable) as caught:
        scale_all(transport, key=key)
    return caught.value, time.monotonic() - start_time


@pytest.fixture
def transports(ray_session):  # noqa: F811
    """Transports made by a test, closed after it whatever happened (stopped processes resumed)."""
    made = []
    yield made
    for transport in made:
        for replica in transport.all_replicas():
            for pid in replica.pids:
                if process_alive(pid):
                    kill(pid, signal.SIGCONT)
        transport.close()


def test_service_ray_transport_answers_every_group_at_once_with_plain_messages(transports):
    transport = start()
    transports.append(transport)
    assert scale_all(transport, key=1) == EXPECTED
    answer = transport.call({1: ("echo", {"ids": np.array([4, 5], dtype=np.int32), "flag": True})})[1]
    assert answer["ids"].dtype == np.int32 and answer["ids"].tolist() == [4, 5] and answer["flag"] is True
    stats = transport.stats()
    assert stats["calls"] == 2 and stats["requests"] == 3 and stats["failures"] == 0
    assert stats["bytes_sent"] == 2 * VALUES.nbytes + 8 + 8 and stats["bytes_received"] >= 2 * VALUES.nbytes
    with pytest.raises(TypeError, match="must hold numbers"):
        transport.call({0: ("echo", {"names": np.array(["a"])})})
    with pytest.raises(IndexError, match=r"group must lie in \[0, 2\)"):
        transport.call({2: ("echo", {})})
    with pytest.raises(ValueError, match="no method 'nonsense'"):  # a refusal is an answer, not a failure
        transport.call({0: ("nonsense", {})}, key=3)
    assert transport.stats()["failures"] == 0 and scale_all(transport) == EXPECTED


def test_service_ray_transport_answers_under_a_deadline_longer_than_poll_can_wait(transports):
    # serve(deadline="30d") was taken, then every request failed in poll(): "OverflowError:
    # timeout is too large" (its timeout is a C int of milliseconds, at most 24.8 days)
    transport = start(deadline=30 * 86400.0)
    transports.append(transport)
    assert scale_all(transport, key=1) == EXPECTED and transport.stats()["failures"] == 0


def test_service_ray_sigkill_names_the_server_its_parts_and_the_key_within_two_seconds(transports):
    transport = start(max_restarts=0, deadline=5.0)
    transports.append(transport)
    kill(pid_of(transport, 1))
    error, seconds = timed_failure(transport, key=17)
    assert (error.server, error.parts, error.key, error.reason) == (1, (1, 2), 17, "died")
    assert seconds <= 2.0
    assert "server 1 (parts [1, 2])" in str(error) and "batch key 17" in str(error)
    assert transport.call({0: ("scale", {"values": VALUES})})[0]["values"].tolist() == EXPECTED[0]


def test_service_ray_sigstop_is_named_within_the_deadline_plus_one_second(transports):
    transport = start(max_restarts=0, deadline=0.5)
    transports.append(transport)
    pid = pid_of(transport, 0)
    kill(pid, signal.SIGSTOP)
    error, seconds = timed_failure(transport, key=5)
    assert (error.server, error.parts, error.key, error.reason) == (0, (0,), 5, "deadline")
    assert 0.5 <= seconds <= 1.5
    kill(pid, signal.SIGCONT)  # the process resumes: it answers again
    assert scale_all(transport, key=5) == EXPECTED


@pytest.mark.parametrize("signal_", [signal.SIGKILL, signal.SIGSTOP], ids=["sigkill", "sigstop"])
def test_service_ray_restart_answers_the_request_unchanged_in_a_new_process(transports, signal_):
    transport = start(max_restarts=1, deadline=0.5)
    transports.append(transport)
    old = pid_of(transport, 1)
    kill(old, signal_)
    assert scale_all(transport, key=9) == EXPECTED
    assert pid_of(transport, 1) != old and transport.replicas[1][0].pids == [old, pid_of(transport, 1)]
    assert transport.stats()["restarts"] == 1
    assert not wait_gone([old], 5.0)  # a stopped process is killed, not left behind
    kill(pid_of(transport, 1))  # no restart left: named
    error, _ = timed_failure(transport, key=10)
    assert (error.server, error.reason) == (1, "died")


def test_service_ray_waiting_for_a_restart_does_not_fail_the_other_servers(transports):
    transport = start(max_restarts=1, deadline=0.5)
    transports.append(transport)
    first, gone = pid_of(transport, 0), pid_of(transport, 1)
    kill(gone)
    assert not wait_gone([gone], 5.0)  # refused at connect: the call waits for Ray's restart at once,
    # while group 0's new connection is still proving the secret (a round trip left after the wait)
    assert scale_all(transport, key=4) == EXPECTED
    assert pid_of(transport, 0) == first and transport.stats()["restarts"] == 1  # group 0 was not failed


def test_service_ray_replica_answers_when_the_other_is_killed_or_stopped(transports):
    transport = start(replicas=2, max_restarts=0, deadline=0.5)
    transports.append(transport)
    kill(pid_of(transport, 0, 0))
    kill(pid_of(transport, 1, 1), signal.SIGSTOP)
    for key in range(4):  # round robin meets both bad replicas
        assert scale_all(transport, key=key) == EXPECTED
    assert [r.state for r in transport.all_replicas()] == ["dead", "ok", "ok", "suspect"]
    assert transport.stats()["restarts"] == 0


def test_service_ray_slow_server_is_named_past_the_deadline_or_restarted(transports):
    import ray

    transport = start(max_restarts=0, deadline=0.5)
    transports.append(transport)
    ray.get(transport.replicas[0][0].handle.inject.remote("delay", 1, 0.1))
    assert scale_all(transport, key=1) == EXPECTED  # slow, within the deadline: answered
    ray.get(transport.replicas[0][0].handle.inject.remote("delay", 1, 0.8))
    error, seconds = timed_failure(transport, key=2)
    assert (error.server, error.reason) == (0, "deadline") and seconds <= 1.5
    time.sleep(0.4)  # the slow answer arrives and is dropped; the server answers again
    assert scale_all(transport, key=3) == EXPECTED
    restarting = start(max_restarts=1, deadline=0.5)
    transports.append(restarting)
    old = pid_of(restarting, 1)
    ray.get(restarting.replicas[1][0].handle.inject.remote("delay", 1, 30.0))
    assert scale_all(restarting, key=4) == EXPECTED  # the hung process killed, its restart answers
    assert pid_of(restarting, 1) != old


def test_service_ray_dropped_connection_is_retried_on_the_same_process(transports):
    transport = start(max_restarts=0, deadline=3.0)
    transports.append(transport)
    import ray

    pid = pid_of(transport, 1)
    ray.get(transport.replicas[1][0].handle.inject.remote("drop", 1))
    assert scale_all(transport, key=6) == EXPECTED
    stats = transport.stats()
    assert stats["failures"] == 1 and stats["retries"] == 1 and pid_of(transport, 1) == pid
    ray.get(transport.replicas[1][0].handle.inject.remote("drop", 5))  # every reply lost: named
    error, seconds = timed_failure(transport, key=7)
    assert (error.server, error.key) == (1, 7) and error.reason in ("connection", "deadline")
    assert seconds <= 3.0 + 1.0


def test_service_ray_channel_listens_only_on_rays_address_and_answers_only_the_cluster_secret(transports):
    import hashlib
    import hmac
    import os
    import socket

    import psutil
    import ray

    from gglspeedup.service._channel import Connection, new_secret
    from gglspeedup.service._wire import encode

    transport = start()
    transports.append(transport)
    for replica in transport.all_replicas():
        info, channel = replica.info, replica.info["channel"]
        assert channel["host"] == info["node"] == "127.0.0.1"  # the address Ray registered for the node
        listening = [
            c.laddr.ip
            for c in psutil.Process(info["pid"]).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == channel["port"]
        ]
        assert listening == [info["node"]]
    info = transport.replicas[1][0].info
    channel, handle = info["channel"], transport.replicas[1][0].handle
    over_tcp = Connection(channel, info["secret"], unix=False)  # a trainer on another node's way in
    over_tcp.request("scale", {"values": VALUES})
    frame = None
    while frame is None:
        frame = over_tcp.advance()
    assert frame.message["values"].tolist() == EXPECTED[1]
    over_tcp.close()
    before = ray.get(handle.describe.remote())
    with socket.create_connection((channel["host"], channel["port"]), timeout=5) as sock:
        nonce = os.urandom(32)
        sock.sendall(b"GGLH" + nonce)
        challenge = sock.recv(64)
        wrong = hmac.new(bytes.fromhex(new_secret()), b"c" + nonce + challenge[:32], hashlib.sha256).digest()
        sock.sendall(wrong + b"".join(bytes(part) for part in encode({"values": VALUES}, method="scale")))
        try:
            assert sock.recv(1 << 16) == b""  # closed unanswered
        except ConnectionResetError:  # closed with the request unread: reset
            pass
    for _ in range(50):
        after = ray.get(handle.describe.remote())
        if after["refused"] > before["refused"]:
            break
        time.sleep(0.05)
    assert after["refused"] == before["refused"] + 1 and after["requests"] == before["requests"]
    assert scale_all(transport) == EXPECTED

"""The service's direct channel without Ray: frames of raw array bytes, authentication, shared memory.

The servers here are :class:`gglspeedup.service._channel.ChannelServer` objects in this process,
listening on an abstract Unix socket only (no TCP, no file); trainers' ends are
:class:`~gglspeedup.service._channel.Connection` objects driven as the Ray transport drives them.
"""

import array
import gc
import hashlib
import hmac
import json
import math
import os
import select
import socket
import struct
import time

import numpy as np
import pytest

from gglspeedup.service._channel import SHARED_BYTES, ChannelServer, Connection, new_secret
from gglspeedup.service._ray_transport import remote_error
from gglspeedup.service._wire import MAGIC, PREFIX, SHARED_MIN, FrameError, FrameReader, encode
from gglspeedup.testing.service import EchoServer


def _round_trip(message, **options):
    a, b = socket.socketpair()
    with a, b:
        shared = options.pop("shared", None)
        a.sendmsg(encode(message, shared=shared, **options))
        return FrameReader(shared).read(b)


def _call(conn, method, payload, into=None, seconds=10.0):
    """Drive ``conn`` as the transport does (poll, advance) until the answer's frame arrives."""
    conn.request(method, payload, into)
    limit = time.monotonic() + seconds
    while True:
        poller = select.poll()
        poller.register(conn.sock, conn.events())
        frame = conn.advance()
        if frame is not None:
            return frame
        assert time.monotonic() < limit, "no answer"
        poller.poll(100)


def _closed_unanswered(sock, seconds=5.0) -> bool:
    """Whether the server closes ``sock`` without sending a byte."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1 << 16) == b""
    except ConnectionResetError:
        return True


@pytest.fixture
def server():
    made = ChannelServer(EchoServer(factor=3).handle, new_secret(), None)
    yield made
    made.close()


def test_service_channel_frames_carry_every_plain_entry_exactly():
    values = {
        "bools": np.array([True, False, True]),
        "bytes": np.arange(5, dtype=np.uint8),
        "big": np.arange(-3, 3, dtype=">i8"),  # byte order travels with the dtype
        "halves": np.linspace(0, 1, 7, dtype=np.float16),
        "table": np.arange(12, dtype=np.float32).reshape(3, 4),
        "strided": np.arange(20, dtype=np.int32)[::3],  # not contiguous: sent as its values
        "empty": np.zeros((0, 4), np.float64),
        "zero_d": np.array(7, np.int16),
        "np_int": np.int64(-2),
        "np_float": np.float32(0.25),
        "np_bool": np.bool_(True),
        "n": 5,
        "x": 2.5,
        "nan": math.nan,
        "flag": False,
        "name": "papers",
        "nothing": None,
    }
    frame = _round_trip(values, method="draw")
    got = frame.message
    assert frame.method == "draw" and frame.error is None and set(got) == set(values)
    for name, value in values.items():
        if isinstance(value, np.ndarray):
            assert isinstance(got[name], np.ndarray) and got[name].dtype == value.dtype, name
            assert got[name].shape == value.shape and np.array_equal(got[name], value), name
            assert got[name].flags.writeable and got[name].flags.c_contiguous, name
        elif isinstance(value, np.generic):
            assert type(got[name]) is type(value) and got[name] == value, name
        elif isinstance(value, float) and math.isnan(value):
            assert math.isnan(got[name])
        else:
            assert type(got[name]) is type(value) and got[name] == value, name
    refused = _round_trip({}, error=("ValueError", "no such partition"))
    assert refused.error == ("ValueError", "no such partition") and refused.message == {}


def test_service_channel_frames_refuse_what_is_not_plain_and_broken_headers():
    for bad in ({"o": np.array(["a"])}, {"o": np.array([1], dtype=object)}, {"l": [1, 2]}, {"d": {"a": 1}}):
        with pytest.raises(TypeError, match="message"):
            encode(bad)

    def read(head: bytes, prefix=None):
        a, b = socket.socketpair()
        with a, b:
            a.sendall((prefix or PREFIX.pack(MAGIC, len(head))) + head)
            return FrameReader().read(b)

    good = json.loads(encode({"a": np.arange(3)})[0][PREFIX.size :])
    with pytest.raises(FrameError, match="not a frame"):
        read(b"{}", prefix=struct.pack("<4sI", b"HTTP", 2))
    with pytest.raises(FrameError, match="header of"):
        read(b"", prefix=PREFIX.pack(MAGIC, 1 << 30))
    for broken in (
        b"not json",
        json.dumps({"a": [["a", "|O", [3], 0, -1]], "s": {}}).encode(),  # objects
        json.dumps({"a": [["a", "<i8", [-3], 0, -1]], "s": {}}).encode(),  # a negative length
        json.dumps({"a": [["a", "<i8", [1 << 40], 0, -1]], "s": {}}).encode(),  # past ARRAY_LIMIT
        json.dumps({"a": good["a"], "s": {"x": [1, 2]}}).encode(),  # a list as a scalar
        json.dumps({"s": {}}).encode(),
    ):
        with pytest.raises(FrameError, match="malformed"):
            read(broken)
    a, b = socket.socketpair()
    with a, b, pytest.raises(ConnectionResetError):  # the other end went away mid-frame
        a.sendall(encode({"a": np.arange(100)})[0])  # the header, not the array's bytes
        a.close()
        FrameReader().read(b)


def test_service_channel_large_arrays_go_through_shared_memory_and_into_given_buffers():
    shared = np.zeros(1 << 20, np.uint8)
    large, small = np.arange(SHARED_MIN // 4, dtype=np.int32), np.arange(3)
    buffers = encode({"large": large, "small": small, "huge": np.zeros(2 << 20, np.uint8)}, shared=shared)
    header = json.loads(buffers[0][PREFIX.size :])
    offsets = {name: offset for name, _, _, _, offset in header["a"]}
    assert offsets == {"large": 0, "small": -1, "huge": -1}  # the small and the one that does not fit: inline
    assert len(buffers) == 3 and np.array_equal(shared[: large.nbytes].view(np.int32), large)
    frame = _round_trip({"large": large, "small": small}, shared=shared)
    assert np.array_equal(frame.message["large"], large) and np.array_equal(frame.message["small"], small)
    with pytest.raises(FrameError, match="shared memory"):  # an offset the reader has no memory for
        a, b = socket.socketpair()
        with a, b:
            a.sendmsg(encode({"large": large}, shared=shared))
            FrameReader().read(b)
    into = np.full(large.shape, -1, np.int32)
    a, b = socket.socketpair()
    with a, b:
        reader = FrameReader(shared)
        for use_shared in (shared, None):
            reader.into = {"large": into, "small": np.zeros(5)}  # the second does not fit: a fresh array
            a.sendmsg(encode({"large": large * 2, "small": small}, shared=use_shared))
            message = reader.read(b).message
            assert message["large"] is into and np.array_equal(into, large * 2)
            assert message["small"].shape == (3,) and reader.into is None
            into[...] = -1


def test_service_channel_arrays_already_in_shared_memory_go_by_offset_uncopied():
    shared = np.zeros(1 << 20, np.uint8)
    inside = shared[128 : 128 + 4 * 5000].view(np.int32)  # written there by the server
    inside[...] = np.arange(5000, dtype=np.int32)
    other = np.arange(SHARED_MIN // 8, dtype=np.int64)  # large, elsewhere: copied in after it
    buffers = encode({"inside": inside, "other": other, "small": np.arange(3)}, shared=shared)
    header = json.loads(buffers[0][PREFIX.size :])
    offsets = {name: offset for name, _, _, _, offset in header["a"]}
    assert offsets["inside"] == 128 and offsets["small"] == -1 and len(buffers) == 2
    assert offsets["other"] >= 128 + inside.nbytes and offsets["other"] % 64 == 0
    frame = _round_trip({"inside": inside, "other": other}, shared=shared)
    assert np.array_equal(frame.message["inside"], np.arange(5000)) and np.array_equal(frame.message["other"], other)
    assert not np.shares_memory(frame.message["inside"], shared)  # the reader's copy is its own


def test_service_channel_answers_each_request_with_the_handlers_answer_and_refusals_as_errors(server):
    for shared in (True, False):
        conn = Connection(server.address, server.secret.hex(), unix=True, shared=shared)
        values = np.arange(200_000, dtype=np.int64)  # 1.6 MB: through shared memory when it is on
        for _ in range(3):  # one connection, many requests
            assert np.array_equal(_call(conn, "scale", {"values": values}).message["values"], values * 3)
        into = np.empty_like(values)
        assert _call(conn, "scale", {"values": values}, into={"values": into}).message["values"] is into
        assert np.array_equal(into, values * 3) and conn.usable()
        frame = _call(conn, "nonsense", {})
        assert frame.error == ("ValueError", "EchoServer has no method 'nonsense'") and conn.usable()
        error = remote_error(*frame.error, 1, 123)
        assert type(error) is ValueError and "nonsense" in str(error) and "server 1, process 123" in str(error)
        assert type(remote_error("SomethingOdd", "x", 0, 1)) is RuntimeError
        conn.close()
    assert server.requests == 10 and server.refused == 0


def test_service_channel_refuses_connections_without_the_cluster_secret(server):
    def raw():
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect("\0" + server.address["unix"])
        return sock

    with raw() as sock:  # a request with no handshake
        sock.sendall(b"".join(bytes(b) for b in encode({"values": np.arange(3)}, method="scale")))
        assert _closed_unanswered(sock)
    with raw() as sock:  # a handshake with a proof made from another secret
        sock.sendall(b"GGLH" + os.urandom(32))
        challenge = sock.recv(64)
        wrong = hmac.new(bytes.fromhex(new_secret()), b"c" + challenge[:32], hashlib.sha256).digest()
        sock.sendall(wrong + b"".join(bytes(b) for b in encode({"values": np.arange(3)}, method="scale")))
        assert _closed_unanswered(sock)
    impostor = Connection(server.address, new_secret(), unix=True)
    with pytest.raises(ConnectionRefusedError, match="did not prove"):  # the trainer's side of a wrong secret
        _call(impostor, "scale", {"values": np.arange(3)})
    impostor.close()
    for _ in range(50):  # the server counts a refusal once the connection is closed
        if server.refused >= 2:
            break
        time.sleep(0.05)
    assert server.requests == 0 and server.refused >= 2


def test_service_channel_refuses_shared_memory_that_could_shrink(server):
    fd = os.memfd_create("unsealed", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, SHARED_BYTES)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect("\0" + server.address["unix"])
            nonce = os.urandom(32)
            sock.sendall(b"GGLH" + nonce)
            challenge = sock.recv(64)
            secret = server.secret
            proof = hmac.new(secret, b"c" + nonce + challenge[:32], hashlib.sha256).digest()
            request = b"".join(bytes(b) for b in encode({"values": np.arange(3)}, method="scale"))
            # proof, file and request in one message: the server may close as soon as it sees the file
            sock.sendmsg([proof, request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
            assert _closed_unanswered(sock)  # writing into a file the trainer may shrink could kill the server
    finally:
        os.close(fd)
    assert server.requests == 0
    sealed = Connection(server.address, server.secret.hex(), unix=True)  # what Connection passes is sealed
    assert _call(sealed, "scale", {"values": np.arange(3)}).message["values"].tolist() == [0, 3, 6]
    sealed.close()


def test_service_channel_dropped_connections_fail_at_once_and_leave_nothing_mapped(server):
    conn = Connection(server.address, server.secret.hex(), unix=True)
    assert _call(conn, "scale", {"values": np.arange(4)}).message["values"].tolist() == [0, 3, 6, 9]
    assert server.drop() == 1
    poller = select.poll()
    poller.register(conn.sock, select.POLLIN)
    assert poller.poll(5000) and not conn.usable()  # an idle connection broken by the server shows at once
    with pytest.raises(OSError):
        _call(conn, "scale", {"values": np.arange(4)}, seconds=5.0)
    conn.close()
    del conn
    limit = time.monotonic() + 5.0  # the server's connection thread lets go of its mapping as it ends
    while _channel_memory() and time.monotonic() < limit:
        gc.collect()
        time.sleep(0.05)
    assert _channel_memory() == []  # no file, no mapping: the memory is gone with the connection


def _channel_memory() -> list:
    """This process's open files and mappings of channel shared memory."""
    found = [line for line in open("/proc/self/maps") if "gglspeedup-channel" in line]
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "gglspeedup-channel" in os.readlink(f"/proc/self/fd/{fd}"):
                found.append(fd)
        except OSError:
            continue
    return found

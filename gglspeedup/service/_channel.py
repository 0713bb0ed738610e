"""The direct channel between a trainer and a server process: where the hot requests travel.

Ray places the servers, restarts them and tells the trainer where they listen; the requests
themselves (hop draws, feature rows, labels) go over a socket per (trainer connection, server
process) as frames of raw array bytes (:mod:`._wire`: a small header, then each array's bytes,
received straight into NumPy buffers; no pickle). A call through Ray costs about a millisecond of
CPU on each side whatever its size; a frame costs tens of microseconds.

Where a server listens (:class:`ChannelServer`): an abstract Unix socket (Linux's namespace of
names, no file, gone with the process) for trainers on its node, and TCP on the address Ray
registered for its node, on a port the kernel picks, for trainers elsewhere; nothing else (in the
tests' private network namespace both are on that namespace's loopback).

Who may ask: every connection proves it holds the cluster's secret before any request is read.
The secret is made by whoever starts the servers and travels only through Ray (the actors'
arguments and ``describe()``, behind Ray's token authentication). At connect the trainer sends a
nonce; the server answers with its own nonce and ``HMAC-SHA256(secret, "s" + both nonces)``; the
trainer checks it (so it talks to a server of its cluster) and sends ``HMAC(secret, "c" + both
nonces)``, which the server checks (so nobody else asks it anything) before it reads a frame. A
connection that fails this, or stays silent for :data:`HANDSHAKE_SECONDS`, is closed unanswered.

Shared memory on one node: with its proof, a trainer connecting through the Unix socket passes
the server a memory file of its own (``memfd_create``: no name anywhere, sealed against
shrinking, :data:`SHARED_BYTES` long and backed by memory only where written), which the server
maps and writes large answer arrays into (:mod:`._wire`); the trainer copies them out. It goes
away with the connection's two ends, so nothing is left behind even when a process is killed.

A server answers one request at a time (as a Ray actor does), each connection from a thread of its
own; a request is answered from its payload alone, so a retried one returns the same answer. The
trainer's end (:class:`Connection`) never blocks: the transport polls every connection of a call
at once under the request's deadline (:mod:`._ray_transport`).
"""

from __future__ import annotations

import array
import fcntl
import hashlib
import hmac
import mmap
import os
import secrets
import select
import socket
import threading

import numpy as np

from ._wire import Frame, FrameReader, encode

__all__ = ["ChannelServer", "Connection", "HANDSHAKE_SECONDS", "SHARED_BYTES", "new_secret", "send_all"]

HANDSHAKE_SECONDS = 10.0  # a connection that does not prove the secret within this is closed
_HELLO = b"GGLH"  # a connection's first bytes, before the trainer's nonce
_NONCE = 32
_BACKLOG = 128
_IOV_MAX = 512
# A connection's shared memory: room for the largest answer the service sends in one piece (a
# feature-row fetch is cut at 64 MB, service._rows) plus its other arrays; memory is used only
# where answers were written.
SHARED_BYTES = 80 << 20
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


def new_secret() -> str:
    """A fresh cluster secret (hex, 256 bits)."""
    return secrets.token_hex(32)


def _mac(secret: bytes, side: bytes, client: bytes, server: bytes) -> bytes:
    return hmac.new(secret, side + client + server, hashlib.sha256).digest()


def _pending_views(buffers) -> list:
    return [view for view in (memoryview(b).cast("B") for b in buffers) if len(view)]


def _consume(views: list, sent: int) -> None:
    """Drop ``sent`` bytes from the front of ``views`` (a list of byte views), in place."""
    while sent:
        if sent >= len(views[0]):
            sent -= len(views.pop(0))
        else:
            views[0] = views[0][sent:]
            sent = 0


def send_all(sock, buffers) -> None:
    """Send ``buffers`` in order on a blocking socket (scatter-gather, no joined copy)."""
    views = _pending_views(buffers)
    while views:
        _consume(views, sock.sendmsg(views[:_IOV_MAX], [], socket.MSG_NOSIGNAL))


def _recv_exact(sock, size: int) -> bytes:
    data = bytearray(size)
    view, pos = memoryview(data), 0
    while pos < size:
        received = sock.recv_into(view[pos:])
        if not received:
            raise ConnectionResetError("the other end closed the connection")
        pos += received
    return bytes(data)


def _family(host: str):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class ChannelServer:
    """A server process's end: listens, authenticates, and answers frames with ``handler``.

    Parameters
    ----------
    handler : callable
        ``handler(method, payload) -> payload`` (plain messages); an exception it raises goes back
        to the trainer as the request's refusal (its type's name and message).
    secret : str
        The cluster's secret (hex, :func:`new_secret`).
    host : str or None
        The address to accept TCP connections on (the node's address as Ray registered it);
        ``None``: the Unix socket only.
    """

    def __init__(self, handler, secret: str, host: str | None):
        self.handler, self.secret = handler, bytes.fromhex(secret)
        self.requests = self.refused = 0
        self._lock = threading.Lock()  # one request at a time
        self._guard = threading.Lock()
        self._connections: set = set()
        self._current = threading.local()  # the shared memory of the connection this thread serves
        self.unix = f"gglspeedup-{os.getpid()}-{secrets.token_hex(8)}"
        listeners = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)]
        listeners[0].bind("\0" + self.unix)
        self.host, self.port = host, None
        if host is not None:
            tcp = socket.socket(_family(host), socket.SOCK_STREAM)
            tcp.bind((host, 0))
            self.port = tcp.getsockname()[1]
            listeners.append(tcp)
        self._listeners = listeners
        for listener in listeners:
            listener.listen(_BACKLOG)
            threading.Thread(target=self._accept, args=(listener,), name="gglspeedup-channel", daemon=True).start()

    @property
    def address(self) -> dict:
        """Where trainers connect: ``{"unix": name, "host": address or None, "port": int or None}``."""
        return {"unix": self.unix, "host": self.host, "port": self.port}

    def _accept(self, listener) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._serve, args=(conn,), name="gglspeedup-channel", daemon=True).start()

    def _serve(self, conn) -> None:
        with self._guard:
            self._connections.add(conn)
        try:
            if conn.family != socket.AF_UNIX:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            accepted, shared = self._handshake(conn)
            if not accepted:
                with self._guard:
                    self.refused += 1
                return
            self._current.shared = shared
            reader = FrameReader()
            while True:
                send_all(conn, self._answer(reader.read(conn), shared))
        except OSError:  # the trainer went away, the connection was dropped, or a frame was broken
            pass
        finally:
            with self._guard:
                self._connections.discard(conn)
            conn.close()

    def _handshake(self, conn) -> tuple:
        """``(accepted, shared)``: whether the trainer at ``conn`` proved the secret (within
        :data:`HANDSHAKE_SECONDS`), and the shared memory it passed with its proof (or ``None``)."""
        conn.settimeout(HANDSHAKE_SECONDS)
        hello = _recv_exact(conn, len(_HELLO) + _NONCE)
        if hello[: len(_HELLO)] != _HELLO:
            return False, None
        client, server = hello[len(_HELLO) :], os.urandom(_NONCE)
        send_all(conn, [server + _mac(self.secret, b"s", client, server)])
        size = hashlib.sha256().digest_size
        proof, fds, _, _ = socket.recv_fds(conn, size, 1)  # a file passed with the proof: shared memory
        try:
            if not proof:
                return False, None
            if len(proof) < size:
                proof += _recv_exact(conn, size - len(proof))
            if not hmac.compare_digest(proof, _mac(self.secret, b"c", client, server)):
                return False, None
            shared = _map_shared(fds[0]) if fds else None
        finally:
            for fd in fds:
                os.close(fd)
        conn.settimeout(None)
        return True, shared

    def arena(self):
        """For the handler, while it answers a request: the writable ``uint8`` shared memory of
        the requesting connection (or ``None``: TCP, or none was passed). An answer array the
        handler writes inside it goes out by offset, uncopied (:func:`._wire.encode`); it must
        not reach past ``arena()[:len]`` and is overwritten by the connection's next answer."""
        return getattr(self._current, "shared", None)

    def _answer(self, frame: Frame, shared) -> list:
        if frame.method is None:
            return encode({}, error=("ValueError", "a request must name its method"))
        with self._lock:
            self.requests += 1
            try:
                return encode(self.handler(frame.method, frame.message), shared=shared)
            except Exception as error:  # the refusal goes back; the connection stays usable
                return encode({}, error=(type(error).__name__, str(error)))

    def drop(self) -> int:
        """Break every connection now (both directions), as a failing link would; how many."""
        with self._guard:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(connections)

    def close(self) -> None:
        """Stop listening and break every connection."""
        for listener in self._listeners:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        self.drop()


def _map_shared(fd: int):
    """A trainer's shared memory as a writable ``uint8`` array, or ``ConnectionRefusedError`` when
    the file is not sealed against shrinking (writing past a shrunk file's end would kill this
    process) or is shorter than :data:`SHARED_BYTES`."""
    if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK == 0 or os.fstat(fd).st_size < SHARED_BYTES:
        raise ConnectionRefusedError("the shared memory passed is not a sealed file of the expected size")
    return np.frombuffer(mmap.mmap(fd, SHARED_BYTES), np.uint8)


def _new_shared() -> tuple:
    """``(fd, read-only uint8 array)``: a fresh sealed memory file of :data:`SHARED_BYTES` mapped here."""
    fd = os.memfd_create("gglspeedup-channel", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, SHARED_BYTES)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
        view = np.frombuffer(mmap.mmap(fd, SHARED_BYTES, prot=mmap.PROT_READ), np.uint8)
    except BaseException:
        os.close(fd)
        raise
    return fd, view


class Connection:
    """The trainer's end of one connection to a server process; one request at a time, never
    blocking: poll :meth:`fileno` for :meth:`events` and call :meth:`advance` when ready, until
    it returns the answer's :class:`~._wire.Frame`. Failures raise ``OSError`` (a refused or
    broken connection, a frame out of format: :class:`~._wire.FrameError`, a server that cannot
    prove the secret: ``ConnectionRefusedError``).

    Parameters
    ----------
    address : dict
        The server's :attr:`ChannelServer.address`.
    secret : str
        The cluster's secret (hex).
    unix : bool
        Connect through the Unix socket (the server is on this node) rather than TCP.
    shared : bool
        With ``unix``: pass the server shared memory for large answers (:data:`SHARED_BYTES`).
    """

    def __init__(self, address: dict, secret: str, *, unix: bool, shared: bool = True):
        self.secret = bytes.fromhex(secret)
        unix = unix or address.get("port") is None
        if unix:
            family, target = socket.AF_UNIX, "\0" + address["unix"]
        else:
            family, target = _family(address["host"]), (address["host"], int(address["port"]))
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self._nonce = os.urandom(_NONCE)
        self._out = _pending_views([_HELLO + self._nonce])
        self._challenge, self._got = bytearray(_NONCE + hashlib.sha256().digest_size), 0
        self._request = None  # the frame to send once the server proved the secret
        self._fd, view = _new_shared() if unix and shared else (None, None)
        self._reader = FrameReader(view)
        self.stage = "challenge"
        self.incarnation = None  # the server process's (the transport's bookkeeping)
        try:
            if family != socket.AF_UNIX:
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock.connect(target)
        except BlockingIOError:  # TCP: connecting; writable once connected
            self.stage = "connect"
        except OSError:
            self.close()
            raise

    def fileno(self) -> int:
        return self.sock.fileno()

    def request(self, method: str, payload: dict, into: dict | None = None) -> int:
        """Start sending ``(method, payload)`` (only on a new or idle connection); the bytes of
        its frame's prefix and header. ``into``: buffers for the answer's arrays
        (:attr:`~._wire.FrameReader.into`)."""
        frame = encode(payload, method=method)
        self._reader.into = into
        if self.stage == "idle":
            self._out, self.stage = _pending_views(frame), "answer"
        else:
            self._request = frame
        self._flush()
        return len(frame[0])

    def events(self) -> int:
        """The poll events this connection waits for now."""
        return select.POLLOUT if self.stage == "connect" or self._out else select.POLLIN

    def advance(self) -> Frame | None:
        """Progress on what the socket allows now; the answer once it is complete."""
        if self.stage == "connect":
            code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise ConnectionRefusedError(code, os.strerror(code))
            self.stage = "challenge"
        if not self._flush():
            return None
        if self.stage == "challenge":
            if not self._read_challenge():
                return None
            if not self._flush():
                return None
        if self.stage != "answer":
            return None
        frame = self._reader.read(self.sock)
        if frame is not None:
            self.stage = "idle"
        return frame

    def _flush(self) -> bool:
        """Send what is queued as far as the socket takes it; whether all of it went."""
        if self.stage == "connect":
            return False
        while self._out:
            try:
                _consume(self._out, self.sock.sendmsg(self._out[:_IOV_MAX], [], socket.MSG_NOSIGNAL))
            except BlockingIOError:
                return False
        return True

    def _read_challenge(self) -> bool:
        view = memoryview(self._challenge)
        while self._got < len(view):
            try:
                received = self.sock.recv_into(view[self._got :])
            except BlockingIOError:
                return False
            if not received:
                raise ConnectionResetError("the server closed the connection during the handshake")
            self._got += received
        server, proof = bytes(view[:_NONCE]), bytes(view[_NONCE:])
        if not hmac.compare_digest(proof, _mac(self.secret, b"s", self._nonce, server)):
            raise ConnectionRefusedError("the server did not prove the cluster's secret")
        mine = _mac(self.secret, b"c", self._nonce, server)
        if self._fd is not None:  # the proof carries the shared memory (a fresh socket takes 32 bytes whole)
            sent = self.sock.sendmsg([mine], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [self._fd]))])
            os.close(self._fd)
            self._fd, mine = None, mine[sent:]
        self._out = _pending_views([mine, *self._request])
        self._request, self.stage = None, "answer"
        return True

    def usable(self) -> bool:
        """Whether an idle connection is still open (nothing arrived on it: no end, no stray bytes)."""
        if self.stage != "idle":
            return False
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        return not poller.poll(0)

    def close(self) -> None:
        self.stage = "closed"
        self.sock.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._reader.shared = None  # the mapping goes when the last array over it does

    def __del__(self):  # a connection dropped unclosed (a failed handshake) leaves no file open
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None

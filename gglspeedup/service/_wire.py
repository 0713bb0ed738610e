"""The channel's frames: a plain message as a small header and its arrays' raw bytes, no pickle.

A frame is ``PREFIX`` (the magic ``b"GGL1"`` and the header's length, little-endian ``uint32``),
the header (UTF-8 JSON) and then each array's bytes in the header's order, C order, nothing
between them. The header is ``{"a": [[name, dtype, shape, scalar, offset], ...], "s": {name:
value}}`` plus ``"m"`` (a request's method) or ``"e"`` (``[exception type, message]``: the server
refused the request). ``dtype`` is NumPy's ``dtype.str`` (byte order included) and must be a
number or a boolean; ``scalar`` 1 marks a NumPy scalar sent as a 0-d array (it arrives as that
scalar); ``offset`` is -1 for an array whose bytes follow in the frame, else where they lie in
the connection's shared memory (see below); ``"s"`` holds the ``int``, ``float``, ``bool``,
``str`` and ``None`` entries. Received arrays are fresh, writable and aligned: the receiver reads
each array's bytes straight into its buffer.

Shared memory: on one node, a connection may carry a region both ends map (the trainer's, see
:mod:`._channel`); an answer's arrays of at least :data:`SHARED_MIN` bytes that fit are written
there by the server and copied out by the trainer (a memory copy each instead of a socket's two
kernel copies and their system calls), the frame announcing their offsets. An array the server
already wrote inside the region (a hop's draws, drawn there: :meth:`._channel.ChannelServer.arena`)
is announced where it lies, not copied.

>>> import socket
>>> a, b = socket.socketpair()
>>> sent = a.sendmsg(encode({"ids": np.arange(3, dtype=np.int32), "k": 2, "t": np.float32(0.5)}, method="draw"))
>>> frame = FrameReader().read(b)
>>> frame.method, frame.message["ids"].tolist(), frame.message["k"], type(frame.message["t"]).__name__
('draw', [0, 1, 2], 2, 'float32')
>>> a.close(); b.close()
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

__all__ = [
    "PREFIX",
    "MAGIC",
    "HEADER_LIMIT",
    "ARRAY_LIMIT",
    "SHARED_MIN",
    "FrameError",
    "Frame",
    "FrameReader",
    "encode",
]

MAGIC = b"GGL1"
PREFIX = struct.Struct("<4sI")
HEADER_LIMIT = 1 << 20  # a header lists a message's names and shapes: a few hundred bytes in practice
ARRAY_LIMIT = 1 << 36  # bytes of arrays one frame may announce (a sanity bound, far above any message)
SHARED_MIN = 32 << 10  # smaller arrays travel in the frame (a socket moves them as fast)
_ALIGN = 64
_KINDS = "biuf"
# One encoder and decoder for every frame: json.dumps with options builds an encoder per call, and
# json.loads of bytes detects their encoding first (a header is UTF-8, ASCII in practice).
_JSON_OUT = json.JSONEncoder(separators=(",", ":"))
_JSON_IN = json.JSONDecoder()


class FrameError(ConnectionError):
    """A frame that breaks the format (the connection is not usable after it)."""


class Frame:
    """A received frame: ``message`` (the plain dict), ``method`` (a request's) or ``error``
    (``(type name, message)`` when the server refused the request), ``header_bytes`` (prefix and
    header, the framing's share of the bytes)."""

    __slots__ = ("error", "header_bytes", "message", "method")

    def __init__(self, message, method, error, header_bytes):
        self.message, self.method, self.error, self.header_bytes = message, method, error, header_bytes


def encode(message: dict, *, method: str | None = None, error: tuple | None = None, shared=None) -> list:
    """The buffers of ``message``'s frame (send them in order, e.g. with ``socket.sendmsg``):
    the prefix and header as one ``bytes``, then a ``uint8`` view of each non-empty array sent
    in the frame. ``shared`` (a writable ``uint8`` array: the connection's shared memory) takes
    the arrays of at least :data:`SHARED_MIN` bytes that fit, copied there now. ``TypeError``
    for an entry that is not plain (``_transport.check_plain``'s rule)."""
    specs, scalars, buffers = [], {}, []
    free = 0 if shared is None else shared.shape[0]
    placed = {} if shared is None else _placed(message, shared)
    used = max((-(-(offset + size) // _ALIGN) * _ALIGN for offset, size in placed.values()), default=0)
    for name, value in message.items():
        scalar = not isinstance(value, np.ndarray)
        if not scalar or (isinstance(value, np.generic) and value.dtype.kind in _KINDS):
            array = np.asarray(value) if scalar else value  # a 0-d array stays 0-d
            if not array.flags.c_contiguous:
                array = array.copy(order="C")
            if array.dtype.kind not in _KINDS:
                raise TypeError(f"message[{name!r}] must hold numbers or booleans, got dtype {array.dtype}")
            offset, size = -1, array.nbytes
            if name in placed:
                offset = placed[name][0]
            elif size:
                flat = array.reshape(-1).view(np.uint8)
                if SHARED_MIN <= size <= free - used:
                    offset = used
                    shared[offset : offset + size] = flat
                    used += -(-size // _ALIGN) * _ALIGN
                else:
                    buffers.append(flat)
            specs.append((name, array.dtype.str, array.shape, int(scalar), offset))
        elif isinstance(value, str):
            scalars[name] = str(value)
        elif value is None or isinstance(value, (bool, int, float)):
            scalars[name] = value
        else:
            raise TypeError(f"message[{name!r}] must be an array or a scalar, got {type(value).__name__}")
    header = {"a": specs, "s": scalars}
    if method is not None:
        header["m"] = method
    if error is not None:
        header["e"] = [str(error[0]), str(error[1])]
    head = _JSON_OUT.encode(header).encode()
    if len(head) > HEADER_LIMIT:
        raise ValueError(f"a message's header must fit {HEADER_LIMIT} bytes, got {len(head)} (too many entries)")
    return [PREFIX.pack(MAGIC, len(head)) + head, *buffers]


def _placed(message: dict, shared: np.ndarray) -> dict:
    """``{name: (offset, bytes)}`` of ``message``'s non-empty C-contiguous arrays that lie inside
    ``shared`` (written there by the server: sent by offset, not copied)."""
    base = shared.__array_interface__["data"][0]
    end = base + shared.shape[0]
    placed = {}
    for name, value in message.items():
        if isinstance(value, np.ndarray) and value.nbytes and value.flags.c_contiguous and value.dtype.kind in _KINDS:
            start = value.__array_interface__["data"][0]
            if base <= start and start + value.nbytes <= end:
                placed[name] = (start - base, value.nbytes)
    return placed


_DTYPES: dict = {}  # dtype.str -> dtype (a frame names a few types, over and over)
_SCALARS = (str, bool, int, float, type(None))


def _dtype(text) -> np.dtype:
    dtype = _DTYPES.get(text)
    if dtype is None:
        dtype = np.dtype(text)
        if dtype.kind not in _KINDS:
            raise ValueError(f"dtype {text!r}")
        if len(_DTYPES) < 64:
            _DTYPES[text] = dtype
    return dtype


def _parse(head: bytes):
    """``(specs, scalars, method, error)`` of a header, or :class:`FrameError`."""
    try:
        header = _JSON_IN.decode(head.decode())
        specs, scalars = header["a"], header["s"]
        method, error = header.get("m"), header.get("e")
        arrays, total = [], 0
        for name, dtype, shape, scalar, offset in specs:
            dtype = _dtype(dtype)
            shape = tuple(shape)
            if not isinstance(name, str) or not all(type(n) is int and n >= 0 for n in shape):
                raise ValueError(name)
            if (scalar and shape) or type(offset) is not int:
                raise ValueError(name)
            total += math.prod(shape) * dtype.itemsize
            arrays.append((name, dtype, shape, scalar, offset))
        if total > ARRAY_LIMIT or not all(type(v) in _SCALARS for v in scalars.values()):
            raise ValueError("sizes or scalars")
        if method is not None and not isinstance(method, str):
            raise ValueError("method")
    except (ValueError, TypeError, KeyError, AttributeError) as cause:
        raise FrameError(f"a malformed frame header ({type(cause).__name__}: {cause})") from None
    return arrays, scalars, method, None if error is None else (str(error[0]), str(error[1]))


def _fits(array, dtype, shape) -> bool:
    """Whether a caller's buffer can take an array of ``dtype`` and ``shape`` as it stands."""
    return (
        isinstance(array, np.ndarray)
        and array.dtype == dtype
        and array.shape == shape
        and array.flags.c_contiguous
        and array.flags.writeable
    )


class FrameReader:
    """Reads frames from a socket, one at a time, each array into a fresh buffer.

    :meth:`read` works on blocking sockets (returns the frame) and on non-blocking ones (returns
    ``None`` when the socket has no more bytes yet, keeping what it read; call it again when the
    socket is readable). A closed connection raises ``ConnectionResetError``, a broken frame
    :class:`FrameError`. ``shared``: the connection's shared memory (a ``uint8`` array), where
    arrays the frame places there are copied from.

    Reads go through a small buffer, so that a frame's prefix, header and small arrays take one
    system call; an array's bytes beyond the buffer's size are received straight into it. Bytes
    of the next frame read ahead stay in the buffer for the next :meth:`read`. :attr:`into`
    (``{name: array}``, for the next frame) names buffers the caller wants arrays received
    into: an array of that name whose dtype and shape match is received there (the frame's
    message then holds that very buffer), any other into a fresh one.
    """

    __slots__ = (
        "_arrays",
        "_buf",
        "_done",
        "_end",
        "_head",
        "_pending",
        "_pos",
        "_stage",
        "_start_at",
        "_target",
        "into",
        "shared",
    )

    BUFFER = 64 << 10

    def __init__(self, shared=None):
        self.shared, self.into = shared, None
        self._buf = memoryview(bytearray(self.BUFFER))
        self._start_at = self._end = 0  # buffered bytes not yet used: _buf[_start_at:_end]
        self._start()

    def _start(self) -> None:
        self._stage, self._target, self._pos = 0, memoryview(bytearray(PREFIX.size)), 0
        self._arrays = self._head = None

    def read(self, sock) -> Frame | None:
        while True:
            target, size = self._target, len(self._target)
            while self._pos < size:
                if self._start_at < self._end:  # buffered bytes first
                    count = min(size - self._pos, self._end - self._start_at)
                    target[self._pos : self._pos + count] = self._buf[self._start_at : self._start_at + count]
                    self._pos += count
                    self._start_at += count
                    continue
                try:
                    if size - self._pos >= self.BUFFER:  # large: straight into the array
                        received = sock.recv_into(target[self._pos :])
                        self._pos += received
                    else:
                        received = sock.recv_into(self._buf)
                        self._start_at, self._end = 0, received
                except BlockingIOError:
                    return None
                if received == 0:
                    raise ConnectionResetError("the other end closed the connection")
            frame = self._next()
            if frame is not None:
                return frame

    def _next(self) -> Frame | None:
        """Move to the next part of the frame once one is complete; the frame when all are."""
        if self._stage == 0:
            magic, length = PREFIX.unpack(self._target)
            if magic != MAGIC:
                raise FrameError(f"not a frame of this channel (it starts {bytes(magic)!r})")
            if length > HEADER_LIMIT:
                raise FrameError(f"a frame header of {length} bytes (at most {HEADER_LIMIT})")
            self._stage, self._target, self._pos = 1, memoryview(bytearray(length)), 0
            return None
        if self._stage == 1:
            self._head = self._target.tobytes()
            specs, scalars, method, error = _parse(self._head)
            self._arrays, self._pending = [], []
            into = self.into or {}
            for name, dtype, shape, scalar, offset in specs:
                array = into.get(name)
                if not _fits(array, dtype, shape):
                    array = np.empty(shape, dtype)
                if array.nbytes:
                    flat = array.reshape(-1).view(np.uint8)
                    if offset >= 0:
                        self._copy_shared(flat, offset)
                    else:
                        self._pending.append(flat)
                self._arrays.append((name, array, scalar))
            self._pending.reverse()  # popped from the end, in order
            self._done = (scalars, method, error)
            self._stage = 2
        if self._pending:
            self._target, self._pos = memoryview(self._pending.pop()), 0
            return None
        scalars, method, error = self._done
        message = {name: array[()] if scalar else array for name, array, scalar in self._arrays}
        message.update(scalars)
        frame = Frame(message, method, error, PREFIX.size + len(self._head))
        self._start()
        self.into = None
        return frame

    def _copy_shared(self, flat: np.ndarray, offset: int) -> None:
        shared = self.shared
        if shared is None or offset < 0 or offset + flat.shape[0] > shared.shape[0]:
            where = f"at {offset} (+{flat.shape[0]} bytes)"
            raise FrameError(f"an array placed in shared memory {where} that the connection lacks")
        flat[...] = shared[offset : offset + flat.shape[0]]

"""A private network namespace for the calling thread: Ray started there listens on loopback only.

Ray's default start listens on every interface and registers the machine's own address. Inside a
new network namespace the only interface is a loopback of its own, so every socket Ray opens
(GCS, raylet, object manager, workers) lives on that namespace's ``127.0.0.1`` and nothing is
reachable from outside. The service's tests, the bench's self-check and the demo's test start Ray
inside one (see DESIGN.md, "Service").

Linux keeps namespaces per thread: :func:`private_network` moves the *calling* thread into a new
namespace, and everything that thread starts afterwards (processes such as Ray's, and threads)
inherits it. Threads started before stay where they were. On leaving, the thread returns to the
namespace it came from (as root), so the rest of a test session is unaffected.

Creating the namespace needs ``CAP_SYS_ADMIN`` (root) or, for a process with one thread, an
unprivileged user namespace (``unshare -rn``'s way). Without either it raises ``PermissionError``.

>>> with private_network() as network:  # doctest: +SKIP
...     import ray
...     ray.init(include_dashboard=False)  # every socket on this namespace's loopback
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import socket
import struct
import threading

__all__ = ["PrivateNetwork", "private_network", "namespace_id", "interfaces"]

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sh22x"  # struct ifreq: the name, then the flags in the union (40 bytes in all)


def _libc_call(name: str, *args) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{name}: {os.strerror(code)}")


def _unshare(flags: int) -> None:
    if hasattr(os, "unshare"):  # Python >= 3.12
        os.unshare(flags)
    else:
        _libc_call("unshare", ctypes.c_int(flags))


def _setns(fd: int) -> None:
    if hasattr(os, "setns"):
        os.setns(fd, CLONE_NEWNET)
    else:
        _libc_call("setns", ctypes.c_int(fd), ctypes.c_int(CLONE_NEWNET))


def namespace_id(pid: int | str = "thread-self") -> int:
    """The inode of the network namespace of process ``pid`` (default: the calling thread), which
    identifies the namespace: two processes share one exactly when the numbers agree."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def interfaces(pid: int | str = "thread-self") -> list[str]:
    """The network interfaces in the namespace of process ``pid`` (default: the calling thread),
    read from ``/proc/<pid>/net/dev``."""
    with open(f"/proc/{pid}/net/dev") as table:
        lines = table.read().splitlines()[2:]
    return sorted(line.split(":", 1)[0].strip() for line in lines)


def _loopback_up() -> None:
    """Bring this namespace's ``lo`` up (``ip link set lo up``, without needing ``ip``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


class PrivateNetwork:
    """The calling thread moved into a new network namespace whose one interface, ``lo``, is up.

    Attributes
    ----------
    id : int
        The new namespace's inode (:func:`namespace_id`).
    outer_id : int
        The inode of the namespace the thread came from.
    user_namespace : bool
        Whether an unprivileged user namespace had to be made as well (then the thread cannot
        return to the outer namespace: :meth:`close` leaves it inside).
    """

    def __init__(self):
        self.thread = threading.get_ident()
        self.outer_id = namespace_id()
        self._outer = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        self.user_namespace = False
        try:
            try:
                _unshare(CLONE_NEWNET)
            except PermissionError:
                _unshare_as_user()
                self.user_namespace = True
            _loopback_up()
        except BaseException:
            self._return()
            raise
        self.id = namespace_id()
        self.closed = False

    def _return(self) -> None:
        try:
            if namespace_id() != self.outer_id and not self.user_namespace:
                _setns(self._outer)
        finally:
            os.close(self._outer)

    def close(self) -> None:
        """Return the calling thread to the namespace it came from (once; from the same thread)."""
        if self.closed:
            return
        if threading.get_ident() != self.thread:
            raise RuntimeError("a PrivateNetwork is left from the thread that entered it")
        self.closed = True
        self._return()

    def __enter__(self) -> PrivateNetwork:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _unshare_as_user() -> None:
    """``unshare -rn``: a user namespace (root inside, mapped to this user) and a network one."""
    uid, gid = os.getuid(), os.getgid()
    try:
        _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    except OSError as error:
        reason = "the process has several threads" if error.errno == errno.EINVAL else error.strerror
        raise PermissionError(
            f"cannot create a private network namespace: not root, and no user namespace ({reason}); "
            "run as root or under `unshare -rn`"
        ) from None
    with contextlib.suppress(OSError):
        with open("/proc/self/setgroups", "w") as setgroups:
            setgroups.write("deny")
    with open("/proc/self/uid_map", "w") as uid_map:
        uid_map.write(f"0 {uid} 1")
    with open("/proc/self/gid_map", "w") as gid_map:
        gid_map.write(f"0 {gid} 1")


def private_network() -> PrivateNetwork:
    """Move the calling thread into a new network namespace with ``lo`` up; use as a context
    manager (or call :meth:`PrivateNetwork.close`) to return. Raises ``PermissionError`` where
    namespaces cannot be created (see the module's notes)."""
    return PrivateNetwork()

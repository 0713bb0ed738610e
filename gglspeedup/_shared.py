"""Host arrays in POSIX shared memory, with a handle that pickles as a name.

Objects that are built once in a parent process and handed to ``torch.multiprocessing.spawn`` /
``paddle.distributed.spawn`` children (graphs, feature tables) keep their big arrays here: pickling
a :class:`SharedArray` sends only ``(name, shape, dtype)``; the child maps the same physical pages
by name, so nothing is copied per child.

Lifetime
--------
The process that *creates* a segment owns it: the segment is unlinked when the creating handle is
garbage-collected or the creating process exits (a parent, or a child that created one, spawned
or forked), and, should the creator be killed, by multiprocessing's resource tracker. Processes that *attach*
never unlink and never register the segment with a resource tracker: on Python < 3.13 attaching
through ``SharedMemory(name)`` registers the name, and a spawned child shares its parent's tracker,
so the child's exit (or an ``unregister``) would either unlink the parent's segment or make the
tracker print ``KeyError`` / "leaked shared_memory" warnings. Attaching maps the segment directly
(``shm_open`` + ``mmap``) instead; the mapping lives exactly as long as the NumPy views of it.

Unlinking only removes the name: processes that already attached keep valid mappings. A child
that unpickles a handle after the creator unlinked it gets a ``FileNotFoundError`` that says so.
"""

from __future__ import annotations

import mmap
import os
import threading
from multiprocessing.util import Finalize
from typing import Any

import numpy as np

__all__ = ["SharedArray", "FileArray", "share", "is_shared", "file_backed"]

_PAGE = mmap.PAGESIZE
_lock = threading.Lock()


def _unlink(shm, owner_pid: int) -> None:
    # Forked children inherit the finalizer; only the creating process may unlink.
    if os.getpid() != owner_pid:
        return
    try:
        shm.unlink()
    except FileNotFoundError:  # already gone (unlinked by hand, or by the resource tracker)
        pass


def _map(name: str, nbytes: int) -> mmap.mmap:
    """Map an existing segment without touching any resource tracker."""
    try:
        import _posixshmem
    except ImportError as error:  # pragma: no cover - Windows
        raise OSError("gglspeedup shared arrays need POSIX shared memory (Linux / macOS)") from error
    try:
        fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"shared-memory segment {name!r} no longer exists: the object that created it (in the "
            "parent process) was garbage-collected or its process exited; keep it alive until the "
            "child processes have started"
        ) from None
    try:
        size = os.fstat(fd).st_size
        if size < nbytes:
            raise ValueError(f"shared-memory segment {name!r} holds {size} bytes, expected >= {nbytes}")
        return mmap.mmap(fd, max(nbytes, 1))
    finally:
        os.close(fd)


def _check_room(nbytes: int, folder: str = "/dev/shm") -> None:
    """Fail clearly, before any write, when the shared-memory filesystem is too small.

    Writing past a tmpfs that is full kills the process with SIGBUS instead of raising; Docker's
    default ``/dev/shm`` is only 64 MB.
    """
    try:
        stats = os.statvfs(folder)
    except (AttributeError, OSError):  # not Linux, or no such folder: nothing to check
        return
    free = stats.f_bavail * stats.f_frsize
    if nbytes > free:
        raise MemoryError(
            f"sharing an array of {nbytes} bytes needs that much free space in {folder}, which has "
            f"{free} bytes free; enlarge it (docker run --shm-size=..., or mount -o remount,size=... {folder})"
        )


class SharedArray:
    """A NumPy array in a named shared-memory segment; pickles as its name.

    Build one with :func:`share` (or :meth:`SharedArray.create`); read the data through
    :attr:`array` (a writable NumPy view, C-contiguous, 64-byte aligned). Unpickling in another
    process attaches to the same memory on first access of :attr:`array`.

    Attributes
    ----------
    name : str
        The segment name (``/dev/shm/<name>`` on Linux).
    shape : tuple of int
    dtype : numpy.dtype
    owner : bool
        True in the process that created the segment (and will unlink it).
    """

    def __init__(self, name: str, shape, dtype, *, _shm=None):
        self.name = str(name)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.owner = _shm is not None
        self._array = None
        self._finalizer = None
        if _shm is not None:
            # multiprocessing's Finalize runs when the handle is collected, at interpreter exit, and
            # also when a forked multiprocessing child (which leaves through os._exit) finishes;
            # only ever in the creating process.
            self._finalizer = Finalize(self, _unlink, args=(_shm, os.getpid()), exitpriority=0)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @classmethod
    def create(cls, array) -> SharedArray:
        """Copy ``array`` (any NumPy-convertible host array) into a new segment."""
        from multiprocessing import shared_memory

        array = np.asarray(array)
        if array.dtype.hasobject:
            raise TypeError(f"array must hold numbers, not Python objects (dtype {array.dtype})")
        nbytes = int(array.nbytes)
        _check_room(nbytes)
        # The creator registers with the resource tracker (cleanup if it is killed), then maps the
        # segment the same way children do, so views never pin the SharedMemory object.
        shm = shared_memory.SharedMemory(create=True, size=max(nbytes, 1))
        name = shm.name
        shm.close()
        handle = cls(name, array.shape, array.dtype, _shm=shm)
        handle._attach()
        if nbytes:
            handle._array[...] = array
        return handle

    def _attach(self) -> np.ndarray:
        with _lock:
            if self._array is None:
                buffer = _map(self.name, self.nbytes)
                count = int(np.prod(self.shape, dtype=np.int64))
                self._array = np.frombuffer(buffer, dtype=self.dtype, count=count).reshape(self.shape)
            return self._array

    @property
    def array(self) -> np.ndarray:
        """The NumPy view of the shared memory (attaches on first use in a new process)."""
        return self._array if self._array is not None else self._attach()

    def unlink(self) -> None:
        """Remove the segment's name now (creator only; existing mappings stay valid)."""
        if not self.owner:
            raise RuntimeError(f"only the process that created shared array {self.name!r} may unlink it")
        self._finalizer()

    def __reduce__(self):
        return (SharedArray, (self.name, self.shape, self.dtype))

    def __repr__(self) -> str:
        role = "owner" if self.owner else "attached"
        return f"SharedArray(name={self.name!r}, shape={self.shape}, dtype={self.dtype}, {role})"


class FileArray:
    """A read-only view of a memory-mapped file; pickles as ``(path, offset, shape, dtype)``.

    Arrays read with ``numpy.memmap`` (e.g. ``CSRGraph.load(path, mmap=True)``) are already shared
    by the operating system's page cache: each process maps the same file pages, so nothing is
    copied into ``/dev/shm`` and nothing needs unlinking.
    """

    owner = False

    def __init__(self, path: str, offset: int, shape, dtype):
        self.name = os.fspath(path)
        self.offset = int(offset)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self._array = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def array(self) -> np.ndarray:
        """The mapped array (read-only), opened on first use in each process."""
        if self._array is None:
            if self.nbytes == 0:
                self._array = np.empty(self.shape, self.dtype)
            else:
                mapped = np.memmap(self.name, dtype=self.dtype, mode="r", offset=self.offset, shape=self.shape)
                self._array = np.asarray(mapped)
        return self._array

    def __reduce__(self):
        return (FileArray, (self.name, self.offset, self.shape, self.dtype))

    def __repr__(self) -> str:
        return f"FileArray(path={self.name!r}, offset={self.offset}, shape={self.shape}, dtype={self.dtype})"


def file_backed(array: np.ndarray) -> FileArray | None:
    """A :class:`FileArray` for a C-contiguous view into a ``numpy.memmap`` of a file, else ``None``
    (what objects holding memory-mapped arrays pickle instead of the arrays' bytes)."""
    # The root memmap (the one over the mmap object): slices of a memmap are memmaps too, but
    # their ``offset`` still names the root's start.
    base, node = None, array
    while isinstance(node, np.ndarray):
        if isinstance(node, np.memmap):
            base = node
        node = node.base
    if base is None or not getattr(base, "filename", None) or not array.flags.c_contiguous:
        return None
    start = array.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if start < 0 or array.dtype.hasobject:
        return None
    return FileArray(base.filename, base.offset + start, array.shape, array.dtype)


def share(array: Any):
    """``array`` visible to other processes without a copy per process; pickles by name.

    Returns ``array`` itself if it is a handle already; a :class:`FileArray` for a contiguous view
    of a memory-mapped file (the page cache is shared); otherwise a new :class:`SharedArray`.
    """
    if isinstance(array, (SharedArray, FileArray)):
        return array
    if isinstance(array, np.ndarray):
        mapped = file_backed(array)
        if mapped is not None:
            return mapped
    return SharedArray.create(array)


def is_shared(array: np.ndarray, handle) -> bool:
    """Whether ``array``'s data lies inside ``handle``'s mapping in this process (test helper)."""
    view = handle.array
    start = view.__array_interface__["data"][0]
    address = np.asarray(array).__array_interface__["data"][0]
    return start <= address < start + max(handle.nbytes, 1)

"""The on-disk graph format: a folder of raw ``.npy`` arrays and a JSON header with checksums.

A saved graph is a folder::

    graph/
      header.json      {"format": "gglspeedup", "version": 1, "kind": "CSRGraph", "meta": {...},
                        "arrays": {"indices": {"file": "indices.npy", "dtype": "<i4",
                                               "shape": [E], "xxh3_64": "9f..."}, ...}}
      indptr.npy  indices.npy  [edge_ids.npy]  [weights.npy]  [node_order.npy]

Each array is a plain ``.npy`` file, so :func:`numpy.load` with ``mmap_mode="r"`` maps it in O(1)
(no zip member table to walk, no copy), and other tools can read it. The header holds each array's
dtype, shape and xxHash3-64 digest (about 5 GB/s here, against 0.8 GB/s for zlib's CRC-32).

Writes never touch a graph in place: :class:`FolderWriter` builds the folder under a temporary
name beside ``path`` and renames it into place only when every array and the header are written
and synced, so ``load(p).save(p)`` works while ``p``'s arrays are memory-mapped (the old files
stay alive, unlinked, for as long as the maps hold them) and a failed or interrupted write leaves
nothing at ``path`` that loads. Only a graph this library wrote (or nothing, or an empty folder)
is ever replaced: anything else at ``path`` raises ``FileExistsError`` (:mod:`gglspeedup._replace`).
:func:`read_folder` checks the header, the dtypes, shapes and file sizes in O(1); ``verify=True``
also recomputes every digest. Older ``.npz`` saved graphs are read by :mod:`gglspeedup._npz`.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import numpy as np

from ._integrity import check_indptr
from ._npz import read_npz
from ._replace import ABSENT, check_parent, check_replaceable, remove_replaced, temporary_path
from .validation import check_bool

__all__ = [
    "FolderWriter",
    "ArrayWriter",
    "read_folder",
    "advise_random",
    "read_npz",
    "load_graph_arrays",
    "save_graph_arrays",
    "is_folder",
    "FORMAT",
    "VERSION",
    "HEADER",
]

FORMAT = "gglspeedup"
VERSION = 1
HEADER = "header.json"
_CHUNK_BYTES = 64 << 20  # hashing and copying move this much at a time (bounded memory)


def _hasher():
    import xxhash

    return xxhash.xxh3_64()


def is_folder(path) -> bool:
    """Whether ``path`` is a graph folder (it holds a ``header.json``)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, HEADER))


class ArrayWriter:
    """One array of a folder, written front to back in pieces, hashed as it goes.

    ``write(piece)`` appends a 1-D (or C-ordered) piece of the declared dtype; :meth:`close`
    checks that exactly ``shape`` was written and returns the header entry.
    """

    def __init__(self, folder: str, name: str, dtype, shape):
        self.name, self.dtype = name, np.dtype(dtype)
        self.shape = None if shape is None else tuple(int(s) for s in shape)
        self.file = f"{name}.npy"
        self.written = 0
        self._hash = _hasher()
        self._handle = open(os.path.join(folder, self.file), "wb")  # closed by close() or abort()
        self._handle.write(_npy_header(self.dtype, self.shape or (0,)))  # rewritten by close() when unknown

    def write(self, piece) -> None:
        piece = np.ascontiguousarray(piece, dtype=self.dtype)
        data = memoryview(piece.reshape(-1)).cast("B")
        for start in range(0, len(data), _CHUNK_BYTES):
            block = data[start : start + _CHUNK_BYTES]
            self._handle.write(block)
            self._hash.update(block)
        self.written += len(data)

    def close(self) -> dict:
        if self.shape is None:  # a 1-D array whose length was known only at the end
            if self.written % self.dtype.itemsize:
                raise ValueError(f"array {self.name!r}: {self.written} bytes is not a whole number of {self.dtype}")
            self.shape = (self.written // self.dtype.itemsize,)
            self._handle.seek(0)
            self._handle.write(_npy_header(self.dtype, self.shape))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        expected = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        if self.written != expected:
            raise ValueError(
                f"array {self.name!r}: {self.written} bytes written, but shape {self.shape} of {self.dtype} "
                f"needs {expected}"
            )
        return {
            "file": self.file,
            "dtype": self.dtype.str,
            "shape": list(self.shape),
            "xxh3_64": self._hash.hexdigest(),
        }

    def abort(self) -> None:
        if not self._handle.closed:
            self._handle.close()


class FolderWriter:
    """Write a graph folder at ``path`` atomically: a context manager.

    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = os.path.join(tmp.name, "g")
    >>> with FolderWriter(folder, "Example", {"answer": 42}) as out:
    ...     out.add("values", np.arange(3))
    >>> meta, arrays = read_folder(folder, kind="Example")
    >>> meta["answer"], arrays["values"].tolist()
    (42, [0, 1, 2])
    >>> tmp.cleanup()

    Arrays go into a temporary folder beside ``path`` (whole, with :meth:`add`, or piece by piece
    through :meth:`open`); on a clean exit the header is written, everything is synced, the graph
    that stood at ``path`` (a folder, or an old ``.npz`` file) is renamed aside, the new folder
    renamed into place and the old one removed. On an exception (a bad chunk, a full disk, Ctrl-C)
    the temporary folder is removed and ``path`` is left as it was.

    The parent folder of ``path`` must exist and be writable, and what stands at ``path`` is
    checked, at construction (before any work) and again just before
    the swap (:func:`gglspeedup._replace.check_replaceable`): only nothing, an empty folder or,
    with ``overwrite=True``, a graph this library wrote may be replaced; anything else raises
    ``FileExistsError`` naming ``path`` (``given``: the path as the caller wrote it).
    """

    def __init__(self, path, kind: str, meta: dict, *, overwrite: bool = True, given=None):
        self.path = os.path.abspath(os.fspath(path))
        self.kind, self.meta = kind, meta
        self.overwrite, self.given = overwrite, path if given is None else given
        check_parent(self.path, given=self.given)
        check_replaceable(self.path, overwrite=overwrite, given=self.given)
        self.tmp = temporary_path(self.path, "tmp")
        self.entries: dict[str, dict] = {}
        self._open: dict[str, ArrayWriter] = {}

    def __enter__(self) -> FolderWriter:
        os.mkdir(self.tmp)
        return self

    def open(self, name: str, dtype, shape) -> ArrayWriter:
        """A writer for array ``name``: ``write`` its pieces in order; closed on exit."""
        writer = ArrayWriter(self.tmp, name, dtype, shape)
        self._open[name] = writer
        return writer

    def add(self, name: str, array) -> None:
        """Write the whole ``array`` (any array-like; memory-mapped ones stream in 64 MiB pieces)."""
        array = np.asarray(array)
        writer = self.open(name, array.dtype, array.shape)
        flat = array.reshape(-1) if array.flags.c_contiguous else np.ascontiguousarray(array).reshape(-1)
        step = max(1, _CHUNK_BYTES // max(1, array.dtype.itemsize))
        for start in range(0, flat.shape[0], step):
            writer.write(flat[start : start + step])
        self.entries[name] = writer.close()
        del self._open[name]

    def __exit__(self, kind, error, traceback) -> None:
        if kind is not None:
            for writer in self._open.values():
                writer.abort()
            shutil.rmtree(self.tmp, ignore_errors=True)  # the temporary folder: ours alone
            return
        try:
            for name, writer in list(self._open.items()):
                self.entries[name] = writer.close()
            header = {"format": FORMAT, "version": VERSION, "kind": self.kind, "meta": self.meta}
            header["arrays"] = self.entries
            with open(os.path.join(self.tmp, HEADER), "w") as handle:
                json.dump(header, handle, indent=1)
                handle.flush()
                os.fsync(handle.fileno())
            self._swap_into_place()
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise

    def _swap_into_place(self) -> None:
        # Checked again: a long build may have given something else time to appear at path.
        replacing = check_replaceable(self.path, overwrite=self.overwrite, given=self.given)
        old = None
        if replacing != ABSENT:
            old = f"{self.tmp}.old"
            os.rename(self.path, old)
        try:
            os.rename(self.tmp, self.path)
        except BaseException:
            if old is not None:
                os.rename(old, self.path)
            raise
        _sync_folder(os.path.dirname(self.path))
        if old is not None:
            remove_replaced(old, replacing)


_HEADER_BYTES = 128  # every .npy header we write: fixed, so it can be rewritten once the length is known


def _npy_header(dtype: np.dtype, shape: tuple) -> bytes:
    """A version 1.0 ``.npy`` header of exactly :data:`_HEADER_BYTES` bytes (padded with spaces)."""
    text = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)})
    body = text.encode("latin1")
    padding = _HEADER_BYTES - 10 - len(body) - 1
    if padding < 0:  # pragma: no cover - graphs store plain numeric arrays
        raise ValueError(f"cannot write a .npy header for dtype {dtype}")
    return b"\x93NUMPY\x01\x00" + (len(body) + padding + 1).to_bytes(2, "little") + body + b" " * padding + b"\n"


def _sync_folder(folder: str) -> None:
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(handle)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(handle)


def advise_random(array: np.ndarray) -> bool:
    """Tell the kernel that ``array``'s file mapping is read at random rows (``MADV_RANDOM``): a
    page fault then reads that page, not the read-around window of a mapped file (the device's
    ``read_ahead_kb``: 8 MiB on these VMs, so a cold gather of scattered 256-byte rows read about
    30,000 times the bytes it used). For feature tables only: it also turns off fault-around, which
    a mapped graph needs (sampling a warm mapped 1.6B-edge graph with it fell from 0.35 to 0.04 of
    the in-memory rate). True when the array views a mapping and the advice was taken."""
    import mmap

    base = array
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    if base is None or not hasattr(base, "madvise") or not hasattr(mmap, "MADV_RANDOM"):
        return False
    try:
        base.madvise(mmap.MADV_RANDOM)
    except (OSError, ValueError):  # pragma: no cover - a closed or odd mapping
        return False
    return True


# How to read each kind a folder may hold (a partition's part is read by its servers, not by a user).
_LOADERS = {
    "CSRGraph": "use CSRGraph.load",
    "HeteroGraph": "use HeteroGraph.load",
    "PartitionBook": "use gglspeedup.service.PartitionBook.load",
    "Partition": "it is one part of a partitioned folder: load that folder's PartitionBook (its parent)",
}


def read_folder(path, *, kind: str, mmap: bool = True, verify: bool = False) -> tuple[dict, dict[str, np.ndarray]]:
    """``(meta, arrays)`` of the graph folder at ``path`` written for ``kind``.

    O(1) with ``mmap=True, verify=False``: the header is parsed and each array's file is checked
    against it (dtype, shape and size, from the ``.npy`` header and ``os.stat``), then mapped.
    ``verify=True`` also hashes every array and compares the digest with the header's.

    Raises
    ------
    ValueError
        naming ``path`` and what disagrees: no readable header, another format, version or kind
        (a ``HeteroGraph`` folder read as a ``CSRGraph``), an array file missing, truncated or
        not matching its header entry, or (``verify``) a digest that differs.
    """
    path = os.fspath(path)
    header = _read_header(path)
    if header.get("kind") != kind:
        found = header.get("kind")
        raise ValueError(f"{path!r} is not a saved {kind}: it holds a saved {found}; {_LOADERS.get(found, '')}")
    entries = header.get("arrays")
    if not isinstance(entries, dict):
        raise ValueError(f"{path!r}: the header lists no arrays")
    arrays = {}
    for name, entry in entries.items():
        arrays[name] = _open_array(path, name, entry, mmap)
        if verify:
            _verify(path, name, arrays[name], entry)
    meta = header.get("meta")
    return (meta if isinstance(meta, dict) else {}), arrays


def _read_header(path: str) -> dict:
    file = os.path.join(path, HEADER)
    try:
        with open(file, encoding="utf-8") as handle:
            header = json.load(handle)
    except FileNotFoundError:
        raise ValueError(f"{path!r} is not a saved graph folder: {HEADER} is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path!r}: {HEADER} is unreadable or corrupt ({error})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{path!r}: {HEADER} is not a gglspeedup graph header")
    if header.get("version") != VERSION:
        raise ValueError(
            f"{path!r} was written in format version {header.get('version')!r}; this gglspeedup reads {VERSION}"
        )
    return header


def _open_array(path: str, name: str, entry: Any, mmap: bool) -> np.ndarray:
    try:
        file = os.path.join(path, entry["file"])
        dtype, shape = np.dtype(entry["dtype"]), tuple(int(s) for s in entry["shape"])
    except (TypeError, KeyError, ValueError) as error:
        raise ValueError(f"{path!r}: the header entry of array {name!r} is malformed ({error!r})") from None
    if os.path.dirname(entry["file"]) or dtype.hasobject:
        raise ValueError(f"{path!r}: the header entry of array {name!r} is malformed")
    try:
        array = np.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
    except FileNotFoundError:
        raise ValueError(f"{path!r}: array {name!r} is missing ({entry['file']} not found)") from None
    except (OSError, ValueError, EOFError) as error:
        raise ValueError(f"{path!r}: array {name!r} ({entry['file']}) is unreadable: {error}") from None
    if array.dtype != dtype or array.shape != shape:
        raise ValueError(
            f"{path!r}: array {name!r} holds {array.dtype} {array.shape} but the header says {dtype} {shape}"
        )
    return array


def _verify(path: str, name: str, array: np.ndarray, entry: dict) -> None:
    digest = _hasher()
    flat = array.reshape(-1)
    step = max(1, _CHUNK_BYTES // max(1, array.dtype.itemsize))
    for start in range(0, flat.shape[0], step):
        digest.update(memoryview(np.ascontiguousarray(flat[start : start + step])).cast("B"))
    if digest.hexdigest() != entry.get("xxh3_64"):
        raise ValueError(
            f"{path!r}: array {name!r} fails its checksum (xxh3_64 {digest.hexdigest()} != {entry.get('xxh3_64')}): "
            "the file is corrupt; copy or save it again"
        )


def save_graph_arrays(path, kind: str, meta: dict, graph, *, overwrite: bool = True) -> None:
    """Write ``graph``'s CSR arrays (``indptr``, ``indices`` and, where present, ``edge_ids``,
    ``weights`` and ``node_order``), streamed to the host, to the folder ``path`` as a saved ``kind`` with header
    ``meta`` (atomically, replacing only a graph this library wrote: see :class:`FolderWriter`)."""
    from .device import to_numpy

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike naming a folder, got {type(path).__name__}")
    with FolderWriter(path, kind, meta, overwrite=check_bool("overwrite", overwrite)) as out:
        for name in ("indptr", "indices", "edge_ids", "weights", "node_order"):
            if getattr(graph, name, None) is not None:
                out.add(name, to_numpy(getattr(graph, name)))


def load_graph_arrays(path, kind: str, *, mmap: bool, verify: bool) -> tuple[dict, dict, bool]:
    """``(arrays, meta, trusted)`` of a saved ``kind`` (``"CSRGraph"`` / ``"HeteroGraph"``) at
    ``path``: a graph folder, or an ``.npz`` file of older versions (its ``meta`` member decoded).

    ``trusted`` is true for a folder read without ``verify``: its contents were checked when it
    was saved and its arrays are taken as they are, but for an O(num_nodes) check of ``indptr``
    (:func:`gglspeedup._integrity.check_indptr`; the samplers bound the ids themselves). An
    ``.npz`` file is never trusted. Raises ``FileNotFoundError`` or ``ValueError`` naming ``path``
    (see :func:`read_folder`).
    """
    if not isinstance(path, (str, os.PathLike)):  # an int is a file descriptor to os.path.exists
        raise TypeError(f"path must be a str or os.PathLike naming a saved graph, got {type(path).__name__}")
    mmap, verify = check_bool("mmap", mmap), check_bool("verify", verify)  # "no" is not read as true
    if not os.path.exists(path):
        raise FileNotFoundError(f"no saved graph at {os.fspath(path)!r}")
    if os.path.isdir(path):
        meta, arrays = read_folder(path, kind=kind, mmap=mmap, verify=verify)
        trusted = not verify
    else:
        arrays = read_npz(path, mmap, verify=verify, what=kind)
        is_typed = "meta" in arrays
        if is_typed != (kind == "HeteroGraph"):
            other = "HeteroGraph" if is_typed else "CSRGraph"
            raise ValueError(f"{os.fspath(path)!r} is not a saved {kind}: it holds a saved {other}; use {other}.load")
        meta, trusted = {}, False
        if is_typed:
            try:
                meta = json.loads(bytes(np.asarray(arrays.pop("meta"))).decode())
            except (UnicodeDecodeError, ValueError) as error:
                raise ValueError(f"{os.fspath(path)!r}: its meta member is not readable JSON ({error})") from None
        elif "num_src_nodes" in arrays:
            count = np.asarray(arrays.pop("num_src_nodes"))
            if count.shape != () or count.dtype.kind not in "iu":  # int() would fail, or truncate 1.5
                raise ValueError(
                    f"{os.fspath(path)!r}: its num_src_nodes member must be one integer, got {count.dtype} "
                    f"shape {count.shape}"
                )
            meta["num_src_nodes"] = int(count)
    missing = {"indptr", "indices"} - set(arrays)
    if missing:
        raise ValueError(f"{os.fspath(path)!r} is not a saved {kind}: missing {sorted(missing)}")
    if trusted and "num_edges" in meta and meta["num_edges"] != arrays["indices"].shape[0]:
        raise ValueError(
            f"{os.fspath(path)!r}: the header says {meta['num_edges']} edges, "
            f"the arrays hold {arrays['indices'].shape[0]}"
        )
    if trusted:  # O(num_nodes): every row's positions inside the arrays, whatever the bytes
        check_indptr(os.fspath(path), arrays["indptr"], arrays["indices"].shape[0])
    return arrays, meta, trusted

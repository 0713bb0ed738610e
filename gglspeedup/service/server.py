"""The partition server: one group's partitions, mapped in O(1), answering plain requests.

A :class:`PartServer` serves some partitions of a folder written by :func:`.partition` (a *group*,
see :mod:`._transport`); ``handle(method, payload) -> payload`` answers, with plain messages only
(``dict`` of NumPy arrays and scalars, :func:`._transport.check_plain`):

``("rows", {"ids": int (n,), "node_type": str or None})`` -> ``{"values": (n, ...) array}``
    Feature rows by global id (a typed graph's ids of ``node_type``), every id owned by this
    group, in the order asked (repeats allowed): ``x[ids]`` exactly, in the table's dtype.
``("labels", same)`` -> ``{"values": (n,) array}``
    Labels likewise.
``("info", {})`` -> ``{"parts": int64 (P,), "pid": int, "node": str, "nodes": int64 (P,),
"edges": int64 (P,), "num_parts": int, "typed": bool}``
    The partitions served, this process's id, the host's name (``node``: the address the Ray
    layer reports when it knows one), and each partition's node and edge counts.
``("draw", ...)`` and ``("edges", ...)``
    One hop's draws for rows of this group, and edge checks for strict negatives: the messages
    of :mod:`gglspeedup.sampling.remote` (its module notes), answered by its :class:`OwnedRows`
    with the same row bodies as a local hop.

Requests are answered from their payload alone (the server keeps no per-client state), so a
retried request, on this process or a replica, returns the same answer.
"""

from __future__ import annotations

import os
import socket

import numpy as np

from .._storage import read_folder
from .book import PART_KIND, PartitionBook, part_folder

__all__ = ["PartServer", "METHODS"]

METHODS = ("rows", "labels", "info", "draw", "edges")


class PartServer:
    """Serve partitions ``parts`` of the partitioned folder ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        A folder written by :func:`gglspeedup.service.partition`.
    parts : sequence of int
        The partitions this server answers for (a group), each in ``[0, num_parts)``, no repeats.
    verify : bool
        Check every array's checksum once, here (a copied folder); ``False`` maps in O(1).
    warm : bool
        Compile (or load from Numba's cache) the sampling kernels now, every kind of draw this
        server can be asked for, so no request pays for it against its deadline (from an empty
        cache this takes a minute or more on a busy 2-core machine; from the cache, a second).

    A server pickles as its folder and partitions and maps them again where it is unpickled
    (unverified, unwarmed), in O(1).

    Examples
    --------
    >>> import os, tempfile, numpy as np, gglspeedup as gg
    >>> from gglspeedup.service import partition
    >>> graph = gg.CSRGraph.from_edge_index([[1, 2, 3, 0], [0, 0, 1, 2]], num_nodes=4)
    >>> x = np.arange(8.0).reshape(4, 2)
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = os.path.join(tmp.name, "p")
    >>> book = partition(graph, folder, 2, features=x, method="range")
    >>> server = PartServer(folder, [1], warm=False)
    >>> server.handle("rows", {"ids": np.array([3, 2, 3]), "node_type": None})["values"].tolist()
    [[6.0, 7.0], [4.0, 5.0], [6.0, 7.0]]
    >>> tmp.cleanup()
    """

    def __init__(self, path, parts, *, verify: bool = True, warm: bool = True):
        from ..validation import check_bool, check_int

        verify, warm = check_bool("verify", verify), check_bool("warm", warm)
        self.book = PartitionBook.load(path, verify=verify)
        if isinstance(parts, (int, np.integer)):
            parts = [parts]
        parts = [check_int(f"parts[{i}]", p, minimum=0, below=self.book.num_parts) for i, p in enumerate(parts)]
        if not parts or len(set(parts)) != len(parts):
            raise ValueError(f"parts must name at least one partition, each once, got {parts}")
        self.parts = tuple(parts)
        self.arrays = []
        for p in parts:
            meta, arrays = read_folder(part_folder(self.book.path, p), kind=PART_KIND, verify=verify)
            _check_part(self.book, p, meta, arrays)
            self.arrays.append(arrays)
        self._rows = None  # the sampling side (gglspeedup.sampling.remote.OwnedRows), made on first use
        if warm:
            self.warm()

    TAKES_ARENA = True  # handle() takes the channel's arena (see below)

    # ------------------------------------------------------------------ requests
    def handle(self, method: str, payload: dict, *, arena=None) -> dict:
        """Answer one request (see the module notes); ``ValueError`` for an unknown method or ids
        this server does not own. ``arena`` (a writable ``uint8`` array, optional: the channel's
        shared memory the answer is sent from) takes a ``"draw"`` answer's draws, written there
        by the kernel instead of copied there after it."""
        if method == "rows":
            return {"values": self._gather(payload, "x")}
        if method == "labels":
            return {"values": self._gather(payload, "y")}
        if method == "info":
            return self.info()
        if method == "draw":
            return self.owned_rows().draw(payload, arena)
        if method == "edges":
            return self.owned_rows().edges(payload)
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")

    def info(self) -> dict:
        sizes = self.book.part_sizes
        return {
            "parts": np.asarray(self.parts, np.int64),
            "pid": os.getpid(),
            "node": socket.gethostname(),
            "nodes": np.asarray([sizes[p]["nodes"] for p in self.parts], np.int64),
            "edges": np.asarray([sizes[p]["edges"] for p in self.parts], np.int64),
            "num_parts": self.book.num_parts,
            "typed": self.book.typed,
        }

    def owned_rows(self):
        """The sampling side of this server (built once)."""
        if self._rows is None:
            from ..sampling.remote import OwnedRows

            self._rows = OwnedRows(self.book, self.parts, self.arrays)
        return self._rows

    def warm(self) -> None:
        """Run every common kind of draw once on an empty request (compiles or loads the kernels)."""
        self.owned_rows().warm()

    # ------------------------------------------------------------------ features
    def _gather(self, payload: dict, prefix: str) -> np.ndarray:
        from ..validation import int_array

        book = self.book
        node_type = payload.get("node_type")
        t = book.type_index(node_type)
        name = f"{prefix}_{t}"
        what = "features" if prefix == "x" else "labels"
        tables = [arrays.get(name) for arrays in self.arrays]
        if any(table is None for table in tables):
            where = "" if node_type is None else f" of node type {node_type!r}"
            raise ValueError(f"the partition holds no {what}{where}")
        ids = int_array("ids", payload.get("ids"))
        flat = book.flat_ids(ids, node_type)
        owners = np.asarray(book.part[flat])
        rows = np.asarray(book.local[flat], np.int64)
        if len(self.parts) == 1:
            if not (owners == self.parts[0]).all():
                self._not_owned(ids, owners)
            return np.asarray(tables[0][rows])
        out = np.empty((ids.shape[0], *tables[0].shape[1:]), tables[0].dtype)
        served = np.zeros(ids.shape[0], bool)
        for p, table in zip(self.parts, tables):
            mine = owners == p
            out[mine] = table[rows[mine]]
            served |= mine
        if not served.all():
            self._not_owned(ids, owners)
        return out

    def _not_owned(self, ids, owners) -> None:
        bad = int(np.argmax(~np.isin(owners, self.parts)))
        raise ValueError(
            f"ids[{bad}] = {int(ids[bad])} is owned by partition {int(owners[bad])}, not by this server's "
            f"{list(self.parts)}"
        )

    def __reduce__(self):
        # A server travels as its folder and partitions and maps them again on arrival, in O(1)
        # (unverified: they were checked where it was made, when asked).
        return (_reopened, (self.book.path, self.parts))

    def __repr__(self) -> str:
        return f"PartServer({self.book.path!r}, parts={list(self.parts)})"


def _check_part(book: PartitionBook, part: int, meta: dict, arrays: dict) -> None:
    """Refuse a part folder the book does not describe (O(1): headers, shapes and dtypes): a folder
    copied from another partitioning, or a header edited, would be read past its arrays' ends or
    its rows cast silently to the book's dtype (each file's own checksums still pass)."""
    where = part_folder(book.path, part)
    said = (meta.get("part"), meta.get("num_parts"), meta.get("typed"))
    if said != (part, book.num_parts, book.typed):
        kind = "typed" if book.typed else "untyped"
        raise ValueError(
            f"{where!r} is not partition {part} of the book's {book.num_parts} ({kind}): "
            f"its header says part {said[0]!r} of {said[1]!r}, typed {said[2]!r}"
        )
    counts = book.part_sizes[part]["per_type"]
    for t, count in enumerate(counts):
        nodes = arrays.get(f"nodes_{t}")
        if nodes is None or nodes.shape != (count,):
            got = "none" if nodes is None else f"shape {nodes.shape}"
            raise ValueError(f"{where!r}: the book gives it {count} nodes of type {t}, its nodes_{t} array has {got}")
    for name, table in book.meta["tables"].items():
        t = int(name.split("_")[1])
        expected = (np.dtype(table["dtype"]), (counts[t], *table["shape"]))
        array = arrays.get(name)
        if array is None or (array.dtype, array.shape) != expected:
            got = "none" if array is None else f"dtype {array.dtype} shape {array.shape}"
            raise ValueError(f"{where!r}: the book says {name} is dtype {expected[0]} shape {expected[1]}, got {got}")
    row_base, indptr, indices = arrays.get("row_base"), arrays.get("indptr"), arrays.get("indices")
    if row_base is None or indptr is None or indptr.shape != (int(row_base[-1]) + 1,):
        raise ValueError(f"{where!r}: its row_base and indptr arrays are missing or disagree")
    if indices is None or indices.dtype != np.dtype(book.meta["index_dtype"]):  # ids travel in the book's width
        got = "none" if indices is None else indices.dtype
        raise ValueError(f"{where!r}: the book says neighbour ids are {np.dtype(book.meta['index_dtype'])}, got {got}")
    for name, present in (("weights", book.weighted), ("times", book.temporal is not None)):
        if (name in arrays) != present:
            raise ValueError(f"{where!r}: the book says the parts {'hold' if present else 'have no'} {name}")


def _reopened(path: str, parts: tuple) -> PartServer:
    """A pickled :class:`PartServer` on arrival (kernels compile or load on first use)."""
    return PartServer(path, parts, verify=False, warm=False)

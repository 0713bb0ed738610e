"""The partition book: which partition owns each node, and its row there (see :func:`.partition`).

A partitioned folder (written by :func:`gglspeedup.service.partition`) is a graph folder
(:mod:`gglspeedup._storage`: raw ``.npy`` arrays and a JSON header with checksums) holding the book
itself and one sub-folder per partition::

    path/
      header.json     kind "PartitionBook": counts, types, what each part holds (meta)
      part.npy        int16/int32 (N,): the partition owning each node
      local.npy       int32/int64 (N,): the node's row among its partition's nodes of its type
      [node_time.npy | node_time_<t>.npy]   a temporal partition's node times (per node type t)
      part0/ part1/ ...   kind "Partition": one per partition (see :mod:`._layout`)

``N`` counts every node; a typed graph's node types are laid out one after another in the graph's
node-type order (type ``t``'s node ``i`` is entry ``type_offsets[t] + i``), so one pair of arrays
serves every type. A partition's nodes of one type are its rows in ascending id order: the
``local`` row of a node is its rank there.
"""

from __future__ import annotations

import os

import numpy as np

from .._storage import read_folder

__all__ = ["PartitionBook", "BOOK_KIND", "PART_KIND", "part_folder"]

BOOK_KIND = "PartitionBook"
PART_KIND = "Partition"


def part_folder(path, part: int) -> str:
    """The folder of partition ``part`` inside the partitioned folder ``path``."""
    return os.path.join(os.fspath(path), f"part{int(part)}")


class PartitionBook:
    """Node -> (partition, local row), for an untyped or a typed partitioned graph.

    Load one with :meth:`load` (O(1): the arrays are memory-mapped); :func:`.partition` returns one.

    Attributes
    ----------
    path : str
        The partitioned folder.
    num_parts : int
    method : str
        ``"metis"`` or ``"range"``.
    num_nodes : int, or dict node type -> int (typed)
    num_edges : int, or dict edge type -> int (typed)
    node_types, edge_types : tuple, or None for an untyped graph
    part, local : arrays over every node (see the module notes)

    A book pickles in O(1) of its size: its memory-mapped arrays travel as their file, offset,
    shape and dtype, and are mapped again where it is unpickled (the folder must be readable
    there, as for the servers).
    weighted : bool
        The parts hold edge weights.
    temporal : {None, "node", "edge"}
        The rows are sorted by node or edge time (given to :func:`.partition`).
    meta : dict
        The folder's header: sizes per part, feature and label shapes, index widths.

    Examples
    --------
    >>> import tempfile, os, gglspeedup as gg
    >>> from gglspeedup.service import partition
    >>> graph = gg.CSRGraph.from_edge_index([[1, 2, 3, 0], [0, 0, 1, 2]], num_nodes=4)
    >>> tmp = tempfile.TemporaryDirectory()
    >>> book = partition(graph, os.path.join(tmp.name, "p"), 2, method="range")
    >>> book.part_of([0, 3]).tolist(), book.local_of([0, 3]).tolist()
    ([0, 1], [0, 2])
    >>> tmp.cleanup()
    """

    def __init__(self, path, meta: dict, arrays: dict):
        self.path = os.path.abspath(os.fspath(path))
        self.meta = meta
        self._arrays = arrays
        self.num_parts = int(meta["num_parts"])
        self.method = meta["method"]
        self.typed = bool(meta["typed"])
        self.part = arrays["part"]
        self.local = arrays["local"]
        self.weighted = bool(meta["weighted"])
        self.temporal = meta.get("temporal")
        self.time_dtype = None if self.temporal is None else np.dtype(meta["time_dtype"])
        if self.typed:
            self.node_types = tuple(meta["node_types"])
            self.edge_types = tuple(tuple(et) for et in meta["edge_types"])
            self.num_nodes = dict(zip(self.node_types, (int(n) for n in meta["num_nodes"])))
            self.num_edges = dict(zip(self.edge_types, (int(n) for n in meta["num_edges"])))
            counts = [self.num_nodes[t] for t in self.node_types]
        else:
            self.node_types = self.edge_types = None
            self.num_nodes, self.num_edges = int(meta["num_nodes"]), int(meta["num_edges"])
            counts = [self.num_nodes]
        self.type_offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self._node_time = {name[len("node_time") :].lstrip("_"): a for name, a in arrays.items() if "time" in name}

    @classmethod
    def load(cls, path, *, verify: bool = False) -> PartitionBook:
        """The book of the partitioned folder ``path`` (memory-mapped; ``verify`` checks the book's
        checksums, not the parts': servers verify theirs)."""
        from ..validation import check_bool

        verify = check_bool("verify", verify)  # as CSRGraph.load: "no" or 1 is not read as a flag
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike naming a partitioned folder, got {type(path).__name__}")
        if not os.path.isdir(path):
            raise FileNotFoundError(f"no partitioned folder at {os.fspath(path)!r}")
        meta, arrays = read_folder(path, kind=BOOK_KIND, verify=verify)
        return cls(path, meta, arrays)

    # ------------------------------------------------------------------ lookups
    def type_index(self, node_type) -> int:
        """The index of ``node_type`` (``None`` for an untyped graph) in :attr:`node_types`."""
        if not self.typed:
            if node_type is not None:
                raise ValueError(f"node_type must be None for an untyped partition, got {node_type!r}")
            return 0
        if node_type not in self.num_nodes:
            raise ValueError(f"node_type {node_type!r} is not a node type of the partition; known: {self.node_types}")
        return self.node_types.index(node_type)

    def count(self, node_type=None) -> int:
        """Nodes of ``node_type`` (every node for an untyped graph)."""
        t = self.type_index(node_type)
        return int(self.type_offsets[t + 1] - self.type_offsets[t])

    def flat_ids(self, ids, node_type=None) -> np.ndarray:
        """``ids`` of ``node_type`` as int64 positions in :attr:`part` / :attr:`local` (checked)."""
        from ..validation import check_ids_in_range, int_array

        t = self.type_index(node_type)
        ids = int_array("ids", ids, beyond=IndexError)
        check_ids_in_range("ids", ids, self.count(node_type), what="the node count")
        return ids + self.type_offsets[t] if t else ids

    def part_of(self, ids, node_type=None) -> np.ndarray:
        """int64: the partition owning each of ``ids`` (of ``node_type``)."""
        return self.part[self.flat_ids(ids, node_type)].astype(np.int64)

    def local_of(self, ids, node_type=None) -> np.ndarray:
        """int64: each of ``ids``'s row among its partition's nodes of its type."""
        return self.local[self.flat_ids(ids, node_type)].astype(np.int64)

    def nodes(self, part: int, node_type=None) -> np.ndarray:
        """The ids of ``node_type`` that partition ``part`` owns, ascending (its rows, in order)."""
        from ..validation import check_int

        part = check_int("part", part, minimum=0, below=self.num_parts)
        t = self.type_index(node_type)
        _, arrays = read_folder(part_folder(self.path, part), kind=PART_KIND)
        return np.asarray(arrays[f"nodes_{t}"], dtype=np.int64)

    def node_time(self, node_type=None):
        """A node-time partition's times of ``node_type``'s nodes (memory-mapped), else ``None``."""
        if self.temporal != "node":
            return None
        key = str(self.type_index(node_type)) if self.typed else ""
        return self._node_time.get(key)

    @property
    def part_sizes(self) -> list:
        """Per partition: ``{"nodes": ..., "edges": ...}`` (every type together)."""
        return [dict(size) for size in self.meta["part_sizes"]]

    def __reduce__(self):
        # Memory-mapped arrays travel as (file, offset, shape, dtype) and are mapped again on
        # arrival, in O(1): a book shipped to a Ray actor or a loader process copies no node array.
        from .._shared import file_backed

        arrays = {name: file_backed(array) or array for name, array in self._arrays.items()}
        return (_mapped_book, (self.path, self.meta, arrays))

    def __repr__(self) -> str:
        kind = f"typed, {len(self.node_types)} node types" if self.typed else f"num_nodes={self.num_nodes}"
        return f"PartitionBook({self.path!r}, num_parts={self.num_parts}, method={self.method!r}, {kind})"


def _mapped_book(path, meta: dict, arrays: dict) -> PartitionBook:
    """A pickled :class:`PartitionBook` on arrival: its file-backed arrays mapped again."""
    from .._shared import FileArray

    return PartitionBook(path, meta, {k: a.array if isinstance(a, FileArray) else a for k, a in arrays.items()})

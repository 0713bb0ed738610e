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
        try:  # a header edited or from elsewhere: named, not a KeyError (or a read past part.npy's end)
            self._read_meta(meta)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{self.path!r}: its header does not describe a partitioned folder ({error!r})") from None
        self._arrays = arrays
        self.part, self.local = arrays.get("part"), arrays.get("local")
        self._node_time = {name[len("node_time") :].lstrip("_"): a for name, a in arrays.items() if "time" in name}
        self._check_arrays()

    def _read_meta(self, meta: dict) -> None:
        from ..validation import check_bool, check_int

        self.meta = meta
        self.num_parts = check_int("num_parts", meta["num_parts"], minimum=1)
        self.method = meta["method"]
        self.typed = check_bool("typed", meta["typed"])
        self.weighted = check_bool("weighted", meta["weighted"])
        self.temporal = meta.get("temporal")
        if self.temporal not in (None, "node", "edge"):
            raise ValueError(f"temporal must be None, 'node' or 'edge', got {self.temporal!r}")
        self.time_dtype = None if self.temporal is None else np.dtype(meta["time_dtype"])
        if self.typed:
            self.node_types = tuple(meta["node_types"])
            self.edge_types = tuple(tuple(et) for et in meta["edge_types"])
            counts = [
                check_int(f"num_nodes[{t!r}]", n, minimum=0)
                for t, n in zip(self.node_types, meta["num_nodes"], strict=True)
            ]
            self.num_nodes = dict(zip(self.node_types, counts))
            edges = [
                check_int(f"num_edges[{et!r}]", n, minimum=0)
                for et, n in zip(self.edge_types, meta["num_edges"], strict=True)
            ]
            self.num_edges = dict(zip(self.edge_types, edges))
            if any(et[0] not in self.num_nodes or et[2] not in self.num_nodes for et in self.edge_types):
                raise ValueError(f"edge_types {list(self.edge_types)} name node types outside {list(self.node_types)}")
        else:
            self.node_types = self.edge_types = None
            self.num_nodes = check_int("num_nodes", meta["num_nodes"], minimum=0)
            self.num_edges = check_int("num_edges", meta["num_edges"], minimum=0)
            counts = [self.num_nodes]
        self.type_offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        if not isinstance(meta["tables"], dict):
            raise TypeError(f"tables must be a dict, got {type(meta['tables']).__name__}")
        if len(meta["part_sizes"]) != self.num_parts:
            raise ValueError(f"part_sizes lists {len(meta['part_sizes'])} partitions, num_parts is {self.num_parts}")
        if any(len(size["per_type"]) != len(counts) for size in meta["part_sizes"]):
            raise ValueError(f"part_sizes must count the nodes of each of the {len(counts)} node types per partition")

    def _check_arrays(self) -> None:
        """The book's arrays cover every node the header counts (O(1): shapes and dtypes)."""
        total = int(self.type_offsets[-1])
        for name in ("part", "local"):
            array = getattr(self, name)
            if array is None:
                raise ValueError(f"{self.path!r}: the partitioned folder has no {name} array")
            if array.ndim != 1 or array.dtype.kind not in "iu" or array.shape[0] != total:
                raise ValueError(
                    f"{self.path!r}: {name} must be an integer array with one entry per node ({total}), "
                    f"got dtype {array.dtype} shape {array.shape}"
                )
        if self.temporal == "node":
            for t, node_type in enumerate(self.node_types or [None]):
                times = self.node_time(node_type)
                count = int(self.type_offsets[t + 1] - self.type_offsets[t])
                if times is not None and (times.ndim != 1 or times.shape[0] != count):
                    raise ValueError(
                        f"{self.path!r}: the node times of {'every node' if node_type is None else repr(node_type)} "
                        f"must have one entry per node ({count}), got shape {times.shape}"
                    )

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

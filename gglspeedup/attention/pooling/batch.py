"""A batch of graphs as the pooling maps see it: node ranges, edges, and the structure cache.

A batch is ``B`` graphs whose nodes are consecutive rows: graph ``g`` holds rows
``ptr[g] .. ptr[g + 1]`` (PyG's ``ptr``; give ``sizes`` instead and ``ptr`` is their prefix sum).
Edges come in one of two forms:

- a global edge index of shape ``(2, E)`` (PyG's ``edge_index``: row ids of the whole batch);
- a list of ``B`` per-graph arrays of shape ``(E_g, 2)`` with ids local to each graph
  (attpool2's ``edge_list``).

Edges are undirected for the fused lasso: ``(i, j)``, ``(j, i)`` and repeats are one edge and
self loops are ignored, as attpool2's solver (a networkx ``Graph``) reads them. Every edge must
stay inside one graph.

:func:`graph_batch` checks the batch once and builds its structure (undirected CSR, connected
components: :mod:`._kernels.structure`); the result is cached by the *content* of ``ptr``
and the edges (a BLAKE2b digest), so a training loop that revisits a batch structure, or passes
the same one every step, pays for it once. Per-call cost on a cache hit: the digest and the
lookup.

>>> batch = graph_batch(sizes=[3, 2], edge_index=[[[0, 1], [1, 2]], [[0, 1]]])
>>> batch.ptr.tolist(), batch.num_edges
([0, 3, 5], 3)
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from ...validation import int_array
from .._pickling import RemadeOnLoad

__all__ = ["GraphBatch", "graph_batch", "CACHE_SIZE", "clear_cache"]

CACHE_SIZE = 64  # batch structures kept (least recently used goes first)
_cache: OrderedDict = OrderedDict()
_cache_lock = threading.Lock()


class GraphBatch(RemadeOnLoad, remake={"_lock": threading.Lock, "_placed": dict}):
    """A checked batch of graphs (build it with :func:`graph_batch`).

    Pickle / ``copy.deepcopy`` take the checked structure, without the lock and the per-device
    copies (:meth:`placed`: made again on first use where it is loaded).

    Attributes
    ----------
    ptr : numpy.ndarray
        int64 ``(B + 1,)``, graph ``g`` holds nodes ``ptr[g] .. ptr[g + 1]``.
    num_graphs, num_nodes : int
    num_edges : int
        Undirected edges after merging directions and repeats and dropping self loops (0 when the
        batch was built without edges).
    has_edges : bool
        Whether an edge index was given (``gfusedmax`` needs one; an edgeless graph is fine).
    """

    def __init__(self, ptr: np.ndarray, src: np.ndarray | None, dst: np.ndarray | None):
        self.ptr = ptr
        self.num_graphs = int(ptr.shape[0] - 1)
        self.num_nodes = int(ptr[-1])
        self.has_edges = src is not None
        self._src, self._dst = src, dst
        self._arrays = None
        self._placed: dict = {}
        self._lock = threading.Lock()

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.ptr)

    @property
    def arrays(self):
        """The :class:`~._kernels.structure.BatchArrays` record (built on first use)."""
        if self._arrays is None:
            from ._kernels.structure import build_batch_arrays

            empty = np.zeros(0, np.int64)
            arrays = build_batch_arrays(
                self.ptr, self._src if self.has_edges else empty, self._dst if self.has_edges else empty
            )
            with self._lock:
                if self._arrays is None:
                    self._arrays, self._src, self._dst = arrays, None, None
        return self._arrays

    @property
    def num_edges(self) -> int:
        return int(self.arrays.edge_u.shape[0]) if self.has_edges else 0

    @property
    def edge_index(self) -> np.ndarray:
        """int64 ``(2, num_edges)``: each undirected edge once, smaller endpoint first."""
        return np.stack([self.arrays.edge_u, self.arrays.edge_v])

    def placed(self, key, make):
        """``make()`` once per ``key`` (e.g. a device's copy of :attr:`arrays`), then cached here."""
        with self._lock:
            value = self._placed.get(key)
        if value is None:
            value = make()
            with self._lock:
                value = self._placed.setdefault(key, value)
        return value

    def __repr__(self) -> str:
        edges = f", num_edges={self.num_edges}" if self.has_edges else ""
        return f"GraphBatch(num_graphs={self.num_graphs}, num_nodes={self.num_nodes}{edges})"


def clear_cache() -> None:
    """Forget every cached batch structure."""
    with _cache_lock:
        _cache.clear()


def graph_batch(
    ptr: Any = None, edge_index: Any = None, *, sizes: Any = None, num_nodes: int | None = None
) -> GraphBatch:
    """The checked, cached :class:`GraphBatch` of ``ptr`` (or ``sizes``) and ``edge_index``.

    Parameters
    ----------
    ptr : array-like of int, shape (B + 1,), optional
        Node offsets: ``ptr[0] == 0``, non-decreasing. A :class:`GraphBatch` is returned as is.
    edge_index : array-like (2, E) of global ids, or a list of B arrays (E_g, 2) of local ids, optional
    sizes : array-like of int, shape (B,), optional
        Nodes per graph, instead of ``ptr`` (attpool2's ``graph_size_list``).
    num_nodes : int, optional
        Rows of the scores the batch must cover (``ptr[-1]`` must equal it).

    Raises
    ------
    TypeError
        for non-integer ``ptr`` / ``sizes`` / edges.
    ValueError
        when neither or both of ``ptr`` and ``sizes`` are given, ``ptr`` does not start at 0 or
        decreases, a size is negative or the sizes sum past int64, ``ptr`` does not cover
        ``num_nodes`` rows, the edge index has the wrong shape or the list the wrong length, or an
        edge joins two graphs.
    IndexError
        for an edge id outside ``[0, num_nodes)`` (global) or ``[0, size of its graph)`` (local).
    """
    if isinstance(ptr, GraphBatch):
        if sizes is not None:
            raise ValueError("give ptr or sizes, not both")
        batch = ptr
        if edge_index is not None:
            batch = graph_batch(ptr.ptr, edge_index)
    else:
        ptr = _check_ptr(ptr, sizes)
        form, src, dst, key_parts = _edges(edge_index, ptr)
        digest = hashlib.blake2b(digest_size=16)
        digest.update(ptr.tobytes())
        digest.update(form.encode())
        for part in key_parts:
            digest.update(np.int64(part.size).tobytes())
            digest.update(part.tobytes())
        key = digest.digest()
        with _cache_lock:
            batch = _cache.get(key)
            if batch is not None:
                _cache.move_to_end(key)
        if batch is None:
            if src is None and form != "none":
                src, dst = _checked_edges(form, key_parts, ptr)
            batch = GraphBatch(ptr, src, dst)
            with _cache_lock:
                batch = _cache.setdefault(key, batch)
                while len(_cache) > CACHE_SIZE:
                    _cache.popitem(last=False)
    if num_nodes is not None and batch.num_nodes != num_nodes:
        raise ValueError(
            f"ptr must cover the scores: ptr[-1] = {batch.num_nodes} nodes, but the scores have {num_nodes} rows"
        )
    return batch


def _check_ptr(ptr, sizes) -> np.ndarray:
    if (ptr is None) == (sizes is None):
        raise ValueError("give the graphs' node offsets as ptr or their node counts as sizes (exactly one)")
    if sizes is not None:
        sizes = int_array("sizes", sizes)
        if sizes.size and sizes.min() < 0:
            position = int(np.argmax(sizes < 0))
            raise ValueError(f"sizes must be >= 0, got sizes[{position}] = {sizes[position]}")
        ptr = np.concatenate([np.zeros(1, np.int64), np.cumsum(sizes)])
        # sizes below 2**63 each: the first partial sum past int64 wraps to a negative one
        if ptr.size and ptr.min() < 0:
            position = int(np.argmax(ptr < 0)) - 1
            raise ValueError(
                f"sizes must sum to less than 2**63 nodes (int64 offsets): sizes[0] .. sizes[{position}] "
                f"sum past it (sizes[{position}] = {sizes[position]})"
            )
        return ptr
    # a copy: the batch is cached and kept, and int_array shares an int64 array (or a torch tensor)
    # with the caller, whose buffer reused for the next batch rewrote the cached structure
    ptr = int_array("ptr", ptr).copy()
    if ptr.size == 0 or ptr[0] != 0:
        raise ValueError(f"ptr must start at 0 (ptr[0] = 0, one entry per graph plus one), got {ptr[:3].tolist()}")
    steps = np.diff(ptr)
    if steps.size and steps.min() < 0:
        position = int(np.argmax(steps < 0)) + 1
        raise ValueError(
            f"ptr must not decrease: ptr[{position}] = {ptr[position]} < ptr[{position - 1}] = {ptr[position - 1]}"
        )
    return ptr


def _edges(edge_index, ptr):
    """``(form, src, dst, key_parts)``: the arrays the cache key hashes, before any range check."""
    if edge_index is None:
        return "none", None, None, ()
    num_graphs = ptr.shape[0] - 1
    expected = f"have shape (2, E) (global ids) or be a list of {num_graphs} arrays (E_g, 2) (local ids)"
    if isinstance(edge_index, (list, tuple)) and _per_graph(edge_index):
        if len(edge_index) != num_graphs:
            raise ValueError(
                f"edge_index (attpool2's edge_list) must be a list of {num_graphs} arrays (E_g, 2) (local ids), "
                f"one per graph of ptr / sizes: got {len(edge_index)} arrays for {num_graphs} graphs"
            )
        parts = []
        for g, edges in enumerate(edge_index):
            array = _int_array(f"edge_index[{g}]", edges, f"have shape (E_{g}, 2) (local ids per edge)")
            if array.size == 0:
                array = np.zeros((0, 2), np.int64)
            elif array.shape[1] != 2:
                raise ValueError(f"edge_index[{g}] must have shape (E_{g}, 2) (local ids per edge), got {array.shape}")
            parts.append(array)
        return "local", None, None, tuple(parts)
    array = _int_array("edge_index", edge_index, expected)
    if array.size == 0:
        array = np.zeros((2, 0), np.int64)
    if array.shape[0] != 2:
        raise ValueError(f"edge_index must {expected}, got shape {array.shape}")
    return "global", None, None, (array,)


def _shape(item):
    """``np.shape(item)``, or None for nested lists of unequal lengths (no array can hold them)."""
    try:
        return np.shape(item)
    except ValueError:
        return None


def _int_array(name, values, expected):
    """``values`` as a 2-D integer array (an empty one as ``(0, 0)``), or raise naming ``name``
    (``ValueError`` for nested lists of unequal lengths: NumPy's "inhomogeneous shape")."""
    shape = _shape(values)
    if shape is None:
        raise ValueError(f"{name} must {expected}, got nested lists of unequal lengths")
    if int(np.prod(shape)) == 0:
        return np.zeros((0, 0), np.int64)
    return int_array(name, values, ndim=2)


def _per_graph(items) -> bool:
    """Whether ``items`` reads as attpool2's per-graph list: each item an ``(E_g, 2)`` array (or
    empty, or a ragged list of pairs, refused later with its name), at least one of them 2-D (the
    two rows of a ``(2, E)`` index are 1-D; a list of empty lists is no edges either way)."""
    found = False
    for item in items:
        shape = _shape(item)
        if shape is None:  # ragged: a list of pairs one of which is short, or not a per-graph item
            if not isinstance(item, (list, tuple)) or not all(len(_shape(pair) or ()) == 1 for pair in item):
                return False
            found = True
        elif len(shape) == 2 and shape[1] == 2:
            found = True
        elif int(np.prod(shape)) != 0:
            return False
    return found


def _checked_edges(form, parts, ptr):
    num_nodes = int(ptr[-1])
    if form == "local":
        sizes = np.diff(ptr)
        for g, edges in enumerate(parts):
            if edges.size and (edges.min() < 0 or edges.max() >= sizes[g]):
                k, side = np.argwhere((edges < 0) | (edges >= sizes[g]))[0]
                raise IndexError(
                    f"edge_index[{g}][{k}, {side}] = {edges[k, side]} is out of range "
                    f"[0, size of graph {g} = {sizes[g]})"
                )
        offsets = np.repeat(ptr[:-1], [edges.shape[0] for edges in parts])
        stacked = np.concatenate(parts) if parts else np.zeros((0, 2), np.int64)
        return stacked[:, 0] + offsets, stacked[:, 1] + offsets
    (array,) = parts
    src, dst = np.array(array[0]), np.array(array[1])  # copies, kept until the structure is built (as ptr)
    for row, ids in enumerate((src, dst)):
        if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
            k = int(np.argmax((ids < 0) | (ids >= num_nodes)))
            raise IndexError(f"edge_index[{row}, {k}] = {ids[k]} is out of range [0, num_nodes = {num_nodes})")
    graph_src = np.searchsorted(ptr, src, side="right") - 1
    graph_dst = np.searchsorted(ptr, dst, side="right") - 1
    if src.size and not np.array_equal(graph_src, graph_dst):
        k = int(np.argmax(graph_src != graph_dst))
        raise ValueError(
            f"edge_index[:, {k}] = ({src[k]}, {dst[k]}) joins graph {graph_src[k]} and graph {graph_dst[k]}: "
            "every edge must stay inside one graph"
        )
    return src, dst

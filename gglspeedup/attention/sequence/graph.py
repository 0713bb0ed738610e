"""The attention graph of a batch of sequences: an in-CSR over tokens, and its hand-offs.

:class:`AttentionGraph` is what :meth:`SequencePattern.csc` returns. Row ``v`` lists the tokens
query ``v`` attends to (DGL's CSC: ``indptr`` over destinations, ``indices`` = sources), each row
sorted. Hand-offs share memory where the target allows it: :meth:`to_dgl` (a CSC-only DGL graph,
nothing to sort), :meth:`to_torch_csr`, and the raw arrays speak DLPack; :meth:`to_pyg` (an
``EdgeIndex`` sorted by column) is one int64 ``(2, num_edges)`` copy: PyG's layout puts both rows in
one tensor, so neither the sources nor the expanded destinations can be shared.

A graph built by hand is checked at construction (``O(num_nodes + num_edges)`` once, before any
kernel can read it): the kernels index memory with ``indptr`` and ``indices`` unchecked, so a key
id past the graph or a decreasing ``indptr`` would read outside the arrays; a row's keys must also
be strictly increasing, as the docstring of :class:`AttentionGraph` says (a duplicate key would
weigh twice in the attention's sums). The library's own builders (:meth:`SequencePattern.csc`,
:class:`~gglspeedup.attention.sequence.sharded.ShardPlan`) skip the scan: their arrays are correct
by construction, and a GPU pattern built every step would otherwise pay a host synchronisation for
it.

>>> import numpy as np
>>> AttentionGraph(np.array([0, 1, 3]), np.array([0, 0, 1]), seq_len=2, batch=1, shared=False).num_edges
3
>>> AttentionGraph(np.array([0, 1, 3]), np.array([0, 0, 7]), seq_len=2, batch=1, shared=False)
Traceback (most recent call last):
    ...
IndexError: indices[2] = 7 is out of range [0, num_nodes = 2)
"""

from __future__ import annotations

import threading
from dataclasses import InitVar, dataclass, field
from typing import Any

import numpy as np

from ...device import Device, as_device, reject_meta, to_numpy
from ...validation import check_bool, check_ids_in_range, check_int, int_array
from .._pickling import RemadeOnLoad

__all__ = ["AttentionGraph"]


@dataclass(eq=False)
class AttentionGraph(RemadeOnLoad, remake={"_lock": threading.Lock}):
    """An attention pattern's in-CSR.

    Usually made by :meth:`SequencePattern.csc`; built by hand, every argument is checked here
    (``TypeError`` / ``ValueError`` / ``IndexError`` naming it) before any kernel can read it.
    Do not modify the arrays afterwards: they are read unchecked from then on. Pickle /
    ``copy.deepcopy`` take every field but the lock (made anew on loading).

    Attributes
    ----------
    indptr : int32 or int64 array (num_nodes + 1,)
        NumPy on the CPU (and under the CUDA simulator), CuPy on a GPU. ``indptr[0] == 0``,
        non-decreasing, ``indptr[-1] == num_edges``.
    indices : int32 or int64 array (num_edges,)
        Source (key) node of every edge, in ``[0, num_nodes)``, strictly increasing within each
        row (sorted, no duplicates: so :meth:`SequencePattern.csc` builds them, and a hand-built
        graph is checked for it). The kernels do not need the order: the local graph of a
        :class:`~gglspeedup.attention.sequence.sharded.ShardPlan` (keys renumbered, local rows
        first) is unsorted. A hand-built batched graph may join sequences (a query's key in another
        sequence): :func:`~gglspeedup.attention.diffusion_attention` takes it,
        :func:`~gglspeedup.attention.fractional_attention` (per-sequence operator) refuses it.
    seq_len, batch : int
        Positions per sequence and sequences. Node ``b * seq_len + i`` is token ``i`` of sequence
        ``b``; a ``shared`` graph has ``seq_len`` nodes and serves every sequence of the batch,
        else ``num_nodes == seq_len * batch``.
    shared : bool
    lengths : int64 NumPy array (batch,) or None
        Each sequence's length when they differ (in ``[0, seq_len]``); positions past it have no
        edges.
    global_ptr, global_ids : int64 NumPy arrays
        The global tokens of sequence ``s`` (positions within it, in ``[0, seq_len)``):
        ``global_ids[global_ptr[s]:global_ptr[s + 1]]`` (one sequence when they all share one).
        Default: no global tokens.
    device : Device or str
        ``"cpu"`` (default) or ``"cuda:<i>"``, where the arrays live (a CUDA device this machine
        cannot use raises :class:`~gglspeedup.device.DeviceUnavailableError`, as
        :class:`SequencePattern` does).
    """

    indptr: Any
    indices: Any
    seq_len: int
    batch: int
    shared: bool
    lengths: Any = None
    global_ptr: np.ndarray = None
    global_ids: np.ndarray = None
    device: Device | str = "cpu"
    _transposed: Any = field(default=None, repr=False)
    _lock: Any = field(default_factory=threading.Lock, repr=False)
    _check: InitVar[bool] = True  # False: the library's builders (arrays correct by construction)
    # (query, key) of the first edge joining two sequences of a batched graph, found by the
    # construction check (only a hand-built graph can have one; not a field: no constructor argument)
    _joining_edge = None

    def __post_init__(self, _check: bool) -> None:
        if self.global_ptr is None:
            self.global_ptr = np.zeros(2, np.int64)
        if self.global_ids is None:
            self.global_ids = np.zeros(0, np.int64)
        if _check:
            _check_graph(self)

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    @property
    def repeats(self) -> int:
        """How many sequences use each row: ``batch`` for a shared graph, else 1."""
        return self.batch if self.shared else 1

    def degrees(self):
        """In-degree (keys per query) of every node, int64, on the graph's device."""
        return (self.indptr[1:] - self.indptr[:-1]).astype(np.int64)

    def globals_of(self, sequence: int = 0) -> np.ndarray:
        """Global-token positions of ``sequence`` (int64, sorted); ``sequence`` in ``[0, batch)``
        (``IndexError`` past it: -1 is no last sequence here)."""
        s = check_int("sequence", sequence, minimum=0, below=self.batch, error=IndexError)
        s = 0 if self.global_ptr.shape[0] == 2 else s
        return self.global_ids[self.global_ptr[s] : self.global_ptr[s + 1]]

    def transpose(self):
        """``(indptr, queries, edges)`` of the out-CSR: for key ``x``, the queries attending to it
        and the positions of those edges in :attr:`indices`, by query. Computed once and kept
        (the backward passes of the fused kernels walk it)."""
        with self._lock:
            if self._transposed is None and self.device.xp is np:
                from ..._csr_build import transpose_csr

                self._transposed = transpose_csr(self.indptr, self.indices, self.num_nodes)  # counting sort, O(E)
            if self._transposed is None:
                xp = self.device.xp
                keys = self.indices
                order = xp.argsort(keys, kind="stable") if xp is np else xp.argsort(keys)
                # CuPy's argsort is stable too (radix sort); rows stay sorted by query either way
                counts = xp.bincount(keys, minlength=self.num_nodes)
                indptr = xp.zeros(self.num_nodes + 1, self.indptr.dtype)
                indptr[1:] = xp.cumsum(counts)
                rows = xp.repeat(xp.arange(self.num_nodes, dtype=keys.dtype), xp.diff(self.indptr).astype(np.int64))
                edges = order.astype(self.indptr.dtype)
                self._transposed = (indptr, rows[order], edges)
            return self._transposed

    def edge_index(self):
        """``(2, num_edges)`` int64 ``[source, destination]`` (edges in row order), on the device."""
        xp = self.device.xp
        dst = xp.repeat(xp.arange(self.num_nodes, dtype=np.int64), xp.diff(self.indptr).astype(np.int64))
        return xp.stack([self.indices.astype(np.int64), dst])

    # -- hand-offs -------------------------------------------------------------------------
    def _torch(self, array):
        import torch

        return (
            torch.from_dlpack(array)
            if self.device.is_cuda and not self.device.simulated
            else torch.from_numpy(to_numpy(array))
        )

    def to_dgl(self):
        """A DGL graph in CSC format only (``indptr`` over destinations): no sort on first use.
        Edge ``e`` is position ``e`` of :attr:`indices`. For a shared graph, give node features
        the shape ``(seq_len, batch * heads, dim)``. Without DGL: ``ImportError`` naming the install."""
        try:
            import dgl
        except ImportError as error:  # not a gglspeedup extra: DGL's wheels follow torch's version and CUDA
            raise ImportError(
                f"AttentionGraph.to_dgl needs DGL, which does not import ({error}): pip install dgl (the build "
                "matching your torch, see https://www.dgl.ai/pages/start.html)"
            ) from error

        indptr, indices = self._torch(self.indptr), self._torch(self.indices)
        if indptr.dtype != indices.dtype:
            indptr = indptr.to(indices.dtype)
        empty = indices.new_empty(0)
        return dgl.graph(("csc", (indptr, indices, empty)), num_nodes=self.num_nodes)

    def to_torch_csr(self, values=None):
        """``torch.sparse_csr_tensor`` with rows = queries, columns = keys (``values``: ones, or a
        tensor ``(num_edges,)``, one value per edge in :attr:`indices` order)."""
        import torch

        indptr, indices = self._torch(self.indptr), self._torch(self.indices)
        if indptr.dtype != indices.dtype:
            indptr = indptr.to(indices.dtype)
        if values is None:
            values = torch.ones(indices.shape[0], dtype=torch.float32, device=indices.device)
        else:  # the tensor is made without torch's invariant check: values of another length would be read past
            if not isinstance(values, torch.Tensor):
                raise TypeError(f"values must be a torch.Tensor (num_edges,), got {type(values).__name__}")
            reject_meta("values", values)
            if tuple(values.shape) != (indices.shape[0],):
                raise ValueError(
                    f"values must have one value per edge, shape (num_edges,) = ({indices.shape[0]},), "
                    f"got {tuple(values.shape)}"
                )
        return torch.sparse_csr_tensor(
            indptr, indices, values, size=(self.num_nodes, self.num_nodes), check_invariants=False
        )

    def to_pyg(self):
        """A PyG ``EdgeIndex`` ``[source, destination]`` sorted by destination (column), int64: a new
        ``(2, num_edges)`` tensor, not a view of this graph (PyG keeps both rows in one tensor, so
        neither :attr:`indices` nor the expanded destinations can be shared). Without PyG:
        ``ImportError`` naming the ``pyg`` extra."""
        try:
            from torch_geometric import EdgeIndex
        except ImportError as error:
            raise ImportError(
                f"AttentionGraph.to_pyg needs torch_geometric (PyG), which does not import ({error}): "
                "pip install gglspeedup[pyg]"
            ) from error

        edge_index = self._torch(self.edge_index())
        return EdgeIndex(edge_index, sparse_size=(self.num_nodes, self.num_nodes), sort_order="col")


def _check_graph(graph: AttentionGraph) -> None:
    """Check (and normalise) a hand-built graph's fields in place, or raise naming the field."""
    # a CUDA device this machine lacks is named here, as SequencePattern(device=...) names it (its
    # array library otherwise failed first: "No module named 'cupy'")
    graph.device = as_device(graph.device).check_available()
    graph.seq_len = check_int("seq_len", graph.seq_len, minimum=0)
    graph.batch = check_int("batch", graph.batch, minimum=1)
    graph.shared = check_bool("shared", graph.shared)
    graph.indptr = _index_array("indptr", graph.indptr, graph.device)
    graph.indices = _index_array("indices", graph.indices, graph.device)
    nodes = graph.seq_len if graph.shared else graph.seq_len * graph.batch
    what = "seq_len" if graph.shared else "seq_len * batch"
    if graph.indptr.shape[0] != nodes + 1:
        raise ValueError(
            f"indptr must have num_nodes + 1 = {nodes + 1} entries ({what} = {nodes} nodes), "
            f"got {graph.indptr.shape[0]}"
        )
    xp = graph.device.xp
    indptr, indices = graph.indptr, graph.indices
    # one host transfer of a few scalars (a sync on a GPU): the checks below read them
    first, last = (int(v) for v in to_numpy(indptr[xp.asarray([0, nodes])]))
    if first != 0 or last != indices.shape[0]:
        raise ValueError(
            f"indptr must run from 0 to num_edges = len(indices) = {indices.shape[0]}, got indptr[0] = {first} "
            f"and indptr[-1] = {last}"
        )
    if nodes and bool((indptr[1:] < indptr[:-1]).any()):  # sync on a GPU
        row = int(to_numpy(xp.argmax(indptr[1:] < indptr[:-1])))
        raise ValueError(
            f"indptr must not decrease: indptr[{row + 1}] = {int(indptr[row + 1])} < indptr[{row}] = {int(indptr[row])}"
        )
    if indices.shape[0] and (int(indices.min()) < 0 or int(indices.max()) >= nodes):  # sync on a GPU
        check_ids_in_range("indices", to_numpy(indices), nodes, what="num_nodes")
    _check_rows_increase(indptr, indices, xp)
    graph._joining_edge = _joining_edge(graph, indptr, indices, xp)
    _check_metadata(graph)


def _joining_edge(graph: AttentionGraph, indptr, indices, xp):
    """``(query, key)`` of the first edge whose key is in another sequence than its query (rows
    ``b * seq_len .. (b + 1) * seq_len`` are sequence ``b``), or None: O(num_edges), on the device."""
    if graph.shared or graph.batch == 1 or indices.shape[0] == 0:
        return None
    # each edge's row by a search (CuPy's repeat takes no array of counts)
    rows = xp.searchsorted(indptr[1:].astype(np.int64), xp.arange(indices.shape[0], dtype=np.int64), side="right")
    joins = indices.astype(np.int64) // graph.seq_len != rows // graph.seq_len
    if not bool(joins.any()):  # sync on a GPU
        return None
    position = int(to_numpy(xp.argmax(joins)))
    return int(rows[position]), int(indices[position])


def _check_rows_increase(indptr, indices, xp) -> None:
    """Raise ``ValueError`` naming the row and position of the first key that does not exceed the
    one before it in its row (a duplicate key, or a row out of order): vectorised, O(num_nodes +
    num_edges), on the arrays' device."""
    num_edges = indices.shape[0]
    if num_edges < 2:
        return
    stalls = indices[1:] <= indices[:-1]
    starts = indptr[1:-1]
    starts = starts[(starts > 0) & (starts < num_edges)]
    stalls[starts - 1] = False  # a row's first key follows the previous row's last: no order between them
    if not bool(stalls.any()):  # sync on a GPU
        return
    position = int(to_numpy(xp.argmax(stalls))) + 1
    row = int(np.searchsorted(to_numpy(indptr), position, side="right")) - 1  # the error path: on the host
    before, key = int(indices[position - 1]), int(indices[position])
    what = "a duplicate key" if before == key else "keys out of order"
    raise ValueError(
        f"indices must be strictly increasing within each row (sorted keys, no duplicates): row {row} has "
        f"{what}, indices[{position - 1}] = {before} then indices[{position}] = {key}"
    )


def _index_array(name: str, values, device: Device):
    """``values`` as a 1-D int32 / int64 array of ``device.xp`` (C-contiguous), or raise."""
    reject_meta(name, values)
    if device.xp is np:
        return int_array(name, values, dtype=None)
    xp = device.xp
    array = xp.asarray(values)
    if array.dtype not in (np.int32, np.int64):
        raise TypeError(f"{name} must hold int32 or int64 ids, got dtype {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    return xp.ascontiguousarray(array)


def _check_metadata(graph: AttentionGraph) -> None:
    """``lengths``, ``global_ptr`` and ``global_ids``: host int64 arrays consistent with the graph."""
    count = 1 if graph.shared else graph.batch
    if graph.lengths is not None:
        lengths = int_array("lengths", graph.lengths)
        if lengths.shape[0] not in (graph.batch, count):
            raise ValueError(f"lengths must have batch = {graph.batch} entries, got {lengths.shape[0]}")
        if lengths.size and (lengths.min() < 0 or lengths.max() > graph.seq_len):
            bad = int(np.argmax((lengths < 0) | (lengths > graph.seq_len)))
            raise ValueError(f"lengths must lie in [0, seq_len = {graph.seq_len}]: lengths[{bad}] = {lengths[bad]}")
        graph.lengths = lengths
    gptr = int_array("global_ptr", graph.global_ptr)
    gids = int_array("global_ids", graph.global_ids)
    if gptr.shape[0] not in (2, count + 1):
        raise ValueError(
            f"global_ptr must have 2 entries (one list for every sequence) or {count + 1}, got {gptr.shape[0]}"
        )
    steps = np.diff(gptr)
    if gptr[0] != 0 or (steps.size and steps.min() < 0) or gptr[-1] > gids.shape[0]:
        raise ValueError(
            f"global_ptr must start at 0, not decrease and end at most at len(global_ids) = {gids.shape[0]}, "
            f"got {gptr.tolist() if gptr.size <= 8 else gptr}"
        )
    check_ids_in_range("global_ids", gids[: int(gptr[-1])], max(graph.seq_len, 0), error=ValueError, what="seq_len")
    graph.global_ptr, graph.global_ids = gptr, gids

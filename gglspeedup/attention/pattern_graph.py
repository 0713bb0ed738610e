"""The attention graph of a batch of sequences: an in-CSR over tokens, and its hand-offs.

:class:`AttentionGraph` is what :meth:`SequencePattern.csc` returns. Row ``v`` lists the tokens
query ``v`` attends to (DGL's CSC: ``indptr`` over destinations, ``indices`` = sources), each row
sorted. Hand-offs share memory where the target allows it: :meth:`to_dgl` (a CSC-only DGL graph,
nothing to sort), :meth:`to_torch_csr`, :meth:`to_pyg` (an ``EdgeIndex`` sorted by column: the
destination row is expanded, the sources are shared), and the raw arrays speak DLPack.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..device import Device, to_numpy

__all__ = ["AttentionGraph"]


@dataclass(eq=False)
class AttentionGraph:
    """An attention pattern's in-CSR.

    Attributes
    ----------
    indptr : int32 or int64 array (num_nodes + 1,)
        NumPy on the CPU, CuPy on a GPU.
    indices : int32 or int64 array (num_edges,)
        Source (key) node of every edge, sorted within each row.
    seq_len, batch : int
        Positions per sequence and sequences. Node ``b * seq_len + i`` is token ``i`` of sequence
        ``b``; a ``shared`` graph has ``seq_len`` nodes and serves every sequence of the batch.
    shared : bool
    lengths : int64 NumPy array (batch,) or None
        Each sequence's length when they differ; positions past it have no edges.
    global_ptr, global_ids : int64 NumPy arrays
        The global tokens of sequence ``s`` (positions within it):
        ``global_ids[global_ptr[s]:global_ptr[s + 1]]`` (one sequence when they all share one).
    device : Device
    """

    indptr: Any
    indices: Any
    seq_len: int
    batch: int
    shared: bool
    lengths: Any
    global_ptr: np.ndarray
    global_ids: np.ndarray
    device: Device
    _transposed: Any = field(default=None, repr=False)
    _lock: Any = field(default_factory=threading.Lock, repr=False)

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
        """Global-token positions of ``sequence`` (int64, sorted)."""
        s = 0 if self.global_ptr.shape[0] == 2 else int(sequence)
        return self.global_ids[self.global_ptr[s] : self.global_ptr[s + 1]]

    def transpose(self):
        """``(indptr, queries, edges)`` of the out-CSR: for key ``x``, the queries attending to it
        and the positions of those edges in :attr:`indices`, by query. Computed once and kept
        (the backward passes of the fused kernels walk it)."""
        with self._lock:
            if self._transposed is None and self.device.xp is np:
                from ._kernels.pattern_cpu import transpose

                self._transposed = transpose(self.indptr, self.indices)  # counting sort, O(E)
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
        the shape ``(seq_len, batch * heads, dim)``."""
        import dgl

        indptr, indices = self._torch(self.indptr), self._torch(self.indices)
        if indptr.dtype != indices.dtype:
            indptr = indptr.to(indices.dtype)
        empty = indices.new_empty(0)
        return dgl.graph(("csc", (indptr, indices, empty)), num_nodes=self.num_nodes)

    def to_torch_csr(self, values=None):
        """``torch.sparse_csr_tensor`` with rows = queries, columns = keys (``values``: ones)."""
        import torch

        indptr, indices = self._torch(self.indptr), self._torch(self.indices)
        if indptr.dtype != indices.dtype:
            indptr = indptr.to(indices.dtype)
        if values is None:
            values = torch.ones(indices.shape[0], dtype=torch.float32, device=indices.device)
        return torch.sparse_csr_tensor(
            indptr, indices, values, size=(self.num_nodes, self.num_nodes), check_invariants=False
        )

    def to_pyg(self):
        """A PyG ``EdgeIndex`` ``[source, destination]`` sorted by destination (column), int64."""
        from torch_geometric import EdgeIndex

        edge_index = self._torch(self.edge_index())
        return EdgeIndex(edge_index, sparse_size=(self.num_nodes, self.num_nodes), sort_order="col")

"""CSRGraph: the graph every sampler and feature policy reads.

Row ``v`` of the CSR structure lists the nodes whose messages flow *into* ``v`` (its in-neighbours,
PyG / GammaGL semantics). Index width follows the data: ``indices`` (and ``edge_ids``) are int32
while the ids fit, int64 beyond (or when asked), ``indptr`` is int64; every kernel runs on both
widths from one body and samples are identical. Content checks (monotone ``indptr``, ``indices``
in range, weights finite) run once at construction; nothing re-checks per batch. Saved graphs
are folders of raw arrays (:mod:`gglspeedup._storage`), memory-mapped in O(1).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .device import Device, as_device, to_numpy

__all__ = ["CSRGraph", "as_csr_graph"]

_PLACEMENTS = ("host", "pinned", "device")


def as_index_array(name: str, array: Any, *, ndim: int = 1, dtype=np.int64) -> np.ndarray:
    """``array`` as a C-contiguous integer array (:func:`gglspeedup.validation.int_array`)."""
    from .validation import int_array  # on first use: ``import gglspeedup`` stays config, device, graph

    return int_array(name, array, ndim=ndim, dtype=dtype)


def as_count(name: str, value) -> int:
    from .validation import as_count

    return as_count(name, value)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


class CSRGraph:
    """A directed graph in compressed sparse row form.

    Parameters
    ----------
    indptr : int array, shape (num_nodes + 1,)
        Row offsets: the in-neighbours of ``v`` are ``indices[indptr[v]:indptr[v + 1]]``.
    indices : int array, shape (num_edges,)
        Neighbour ids in ``[0, num_nodes)``.
    num_nodes : int, optional
        Must equal ``len(indptr) - 1`` when given (a check that catches truncated inputs).
    num_src_nodes : int, optional
        The range of ``indices`` when it differs from the row count: a *bipartite* CSR (one
        relation of a :class:`~gglspeedup.HeteroGraph`, rows the target type's nodes, entries the
        source type's). Default: ``num_nodes``.
    edge_ids : int array, shape (num_edges,), optional
        The id reported as ``e_id`` for each CSR position (default: the position itself).
    weights : float array, shape (num_edges,), optional
        Non-negative, finite edge weights for weighted sampling.
    node_order : int array, shape (num_nodes,), optional
        Node ``i`` is the user's node ``node_order[i]`` (``reorder=``, :meth:`permute`); samples
        are in graph ids: :meth:`new_ids`, :meth:`original_ids`, :meth:`rows_in_order` convert.

    Examples
    --------
    >>> g = CSRGraph([0, 2, 3, 3], [1, 2, 0])
    >>> g.num_nodes, g.num_edges, g.degree().tolist()
    (3, 3, [2, 1, 0])
    """

    node_order = None  # class defaults: views made with __new__ (HeteroGraph relations) have none
    _node_rank = None

    def __init__(
        self,
        indptr,
        indices,
        num_nodes=None,
        edge_ids=None,
        weights=None,
        *,
        num_src_nodes=None,
        dtype=None,
        node_order=None,
        _checked=False,
    ):
        self.indptr = as_index_array("indptr", indptr)
        self.indices = as_index_array("indices", indices, dtype=None)
        self.edge_ids = None if edge_ids is None else as_index_array("edge_ids", edge_ids, dtype=None)
        self.weights = None if weights is None else self._as_weights(weights)
        self.device = Device("cpu")
        self.placement = "host"
        if len(self.indptr) == 0:
            raise ValueError("indptr must have at least one entry (num_nodes + 1), got an empty array")
        if num_nodes is not None:
            num_nodes = as_count("num_nodes", num_nodes)
            if num_nodes != len(self.indptr) - 1:
                raise ValueError(f"num_nodes = {num_nodes} does not match len(indptr) - 1 = {len(self.indptr) - 1}")
        self.num_src_nodes = len(self.indptr) - 1 if num_src_nodes is None else as_count("num_src_nodes", num_src_nodes)
        from .validation import index_dtype

        width = index_dtype(self.num_src_nodes, dtype)
        self._check_shapes()
        if not _checked:
            self.validate()
        # After the checks, so a narrowing cast never wraps an id that was out of range.
        self.indices = self.indices.astype(width, copy=False)
        if self.edge_ids is not None:
            self.edge_ids = _edge_id_array(self.edge_ids, width)
        if node_order is not None:
            from ._reorder import check_node_order

            self.node_order = check_node_order(node_order, self.num_nodes, self.num_src_nodes, full=not _checked)

    @staticmethod
    def _as_weights(weights) -> np.ndarray:
        from .validation import weight_array

        return weight_array(weights)

    def _check_shapes(self) -> None:
        num_edges = len(self.indices)
        for name in ("edge_ids", "weights"):
            array = getattr(self, name)
            if array is not None and len(array) != num_edges:
                raise ValueError(f"{name} must have one entry per edge ({num_edges}), got {len(array)}")

    def validate(self) -> CSRGraph:
        """Scan the arrays once (vectorised) and raise naming the first bad position."""
        indptr, indices = to_numpy(self.indptr), to_numpy(self.indices)
        if indptr[0] != 0:
            raise ValueError(f"indptr[0] must be 0, got {indptr[0]}")
        if indptr[-1] != len(indices):
            raise ValueError(f"indptr[-1] must equal len(indices) = {len(indices)}, got {indptr[-1]}")
        steps = np.diff(indptr)
        if steps.size and steps.min() < 0:
            position = _first_bad(steps < 0) + 1
            raise ValueError(
                f"indptr must be non-decreasing: indptr[{position}] = {indptr[position]} < "
                f"indptr[{position - 1}] = {indptr[position - 1]}"
            )
        num_src = self.num_src_nodes
        if indices.size and (indices.min() < 0 or indices.max() >= num_src):
            position = _first_bad((indices < 0) | (indices >= num_src))
            what = "num_nodes" if num_src == self.num_nodes else "num_src_nodes"
            raise ValueError(f"indices must lie in [0, {what} = {num_src}): indices[{position}] = {indices[position]}")
        if self.weights is not None:
            from .validation import check_weights

            check_weights(to_numpy(self.weights))
        return self

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_edge_index(
        cls,
        edge_index,
        num_nodes=None,
        direction: str = "in",
        weights=None,
        *,
        num_src_nodes=None,
        keep_edge_ids: bool = True,
        dtype=None,
        reorder=None,
    ) -> CSRGraph:
        """Build from a ``[2, E]`` edge list (``edge_index[0]`` sources, ``edge_index[1]`` targets).

        ``direction="in"`` (PyG / GammaGL): row ``v`` lists the sources of edges into ``v``.
        ``direction="out"`` (the original gglspeedup's scipy semantics): row ``u`` lists the
        targets of edges out of ``u``. Duplicate edges and self loops are kept; rows keep the
        order of the input edges. ``num_src_nodes`` (bipartite graphs, ``direction="in"`` only)
        bounds ``edge_index[0]`` while ``num_nodes`` counts the rows (the targets).

        ``keep_edge_ids=True`` records each edge's column in ``edge_index`` as its edge id, so
        sampled ``e_id`` index the caller's edge features directly; with ``False`` no edge ids are
        stored (4 or 8 bytes less per edge) and ``e_id`` are positions in :attr:`indices`.
        ``dtype`` (``np.int32`` / ``np.int64``) forces the index width; by default int32 while the
        node ids fit. An int32 ``edge_index`` is read without a copy.

        The rows are sorted by a parallel, stable counting sort (O(E), every id checked on the
        way; memory: the output, the input and O(threads * N)).

        ``reorder`` (``"degree"``, ``"bfs"``; default ``None``) renumbers the nodes so that rows
        read together sit together, as ``datasets.build_csr(..., reorder=)`` (``"bfs"``:
        breadth-first from the hubs, in memory only); the graph keeps the order
        (:attr:`node_order`) and its ids are the new ones (O(E) more memory while building).

        >>> g = CSRGraph.from_edge_index([[1, 2, 0, 2], [0, 0, 1, 1]], keep_edge_ids=False)
        >>> g.indptr.tolist(), g.indices.tolist(), g.indices.dtype.name, g.edge_ids is None
        ([0, 2, 4, 4], [1, 2, 0, 2], 'int32', True)
        """
        from ._csr_build import edge_index_arrays
        from ._reorder import check_order_name, reorder_arrays

        order, reorder = None, check_order_name("reorder", reorder)
        arrays = edge_index_arrays(edge_index, num_nodes, direction, weights, num_src_nodes, keep_edge_ids, dtype)
        if reorder is not None:
            arrays, order = reorder_arrays(arrays, reorder, num_src_nodes)
        return cls(**arrays, num_src_nodes=num_src_nodes, node_order=order, _checked=True)

    @classmethod
    def from_scipy(cls, matrix, weighted: bool = False) -> CSRGraph:
        """Build from a square scipy sparse matrix; row ``i`` of the matrix is row ``i`` here, each
        stored entry one edge (a COO matrix's duplicates too, which ``tocsr()`` would sum: in the
        order ``from_edge_index`` gives them), its value the edge's weight with ``weighted=True``."""
        import scipy.sparse as sp

        from .validation import check_bool

        weighted = check_bool("weighted", weighted)  # a string such as "no" is not read as true
        if not sp.issparse(matrix):
            raise TypeError(f"matrix must be a scipy sparse matrix, got {type(matrix).__name__}")
        if matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"matrix must be square (num_nodes x num_nodes), got shape {matrix.shape}")
        if matrix.format == "coo":  # tocsr() would sum duplicates: a multigraph lost edges, weights added
            edge_index, weights = np.stack([matrix.row, matrix.col]), (matrix.data if weighted else None)
            return cls.from_edge_index(edge_index, matrix.shape[0], "out", weights, keep_edge_ids=False)
        matrix = matrix.tocsr()
        return cls(matrix.indptr, matrix.indices, weights=matrix.data if weighted else None)

    # ------------------------------------------------------------------ properties
    @property
    def num_nodes(self) -> int:
        return len(self.indptr) - 1

    @property
    def num_edges(self) -> int:
        return len(self.indices)

    @property
    def index_dtype(self) -> np.dtype:
        """The dtype of :attr:`indices` (and of :attr:`edge_ids` unless the ids need int64)."""
        return self.indices.dtype

    @property
    def nbytes(self) -> int:
        """Bytes the graph's arrays hold where they live: ``8 (N + 1) + 4 E`` for ``N`` nodes and
        ``E`` edges with int32 indices and no edge ids (4 or 8 bytes more per edge with edge ids,
        4 or 8 with weights)."""
        arrays = (self.indptr, self.indices, self.edge_ids, self.weights)
        return sum(int(a.nbytes) for a in arrays if a is not None)

    def degree(self) -> np.ndarray:
        """Row lengths (in-degrees for graphs built with ``direction="in"``), int64 on the host."""
        return np.diff(to_numpy(self.indptr))

    def __repr__(self) -> str:
        extras = "".join(f", {name}" for name in ("edge_ids", "weights") if getattr(self, name) is not None)
        if self.num_src_nodes != self.num_nodes:
            extras = f", num_src_nodes={self.num_src_nodes}{extras}"
        return (
            f"CSRGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges}{extras}, "
            f"device={self.device}, placement={self.placement!r})"
        )

    def to_scipy(self):
        """The graph as a ``scipy.sparse.csr_matrix`` of shape ``(num_nodes, num_src_nodes)``
        (values: weights, or ones)."""
        import scipy.sparse as sp

        data = to_numpy(self.weights) if self.weights is not None else np.ones(self.num_edges, np.float32)
        return sp.csr_matrix(
            (data, to_numpy(self.indices), to_numpy(self.indptr)), shape=(self.num_nodes, self.num_src_nodes)
        )

    # ------------------------------------------------------------------ transforms
    def permute(self, order) -> tuple[CSRGraph, np.ndarray]:
        """Relabel nodes so that new node ``i`` is old node ``order[i]`` (e.g. hottest first).

        Returns ``(graph, perm)`` with ``perm[old_id] == new_id`` (the inverse of ``order``):
        features follow as ``x[order]`` and ids as ``perm[ids]``. Edge ids are carried over, so
        ``e_id`` still names the original edges, and so is the numbering: the result's
        :attr:`node_order` is ``order`` (composed with this graph's own order, if it has one).

        >>> g = CSRGraph([0, 1, 2], [1, 0])
        >>> h, perm = g.permute([1, 0])
        >>> perm.tolist(), h.indices.tolist()
        ([1, 0], [1, 0])
        """
        from ._csr_build import permuted_rows
        from ._reorder import check_node_order, inverse_order

        if self.num_src_nodes != self.num_nodes:
            raise ValueError("permute needs a square graph; this one is bipartite (num_src_nodes != num_nodes)")
        order = check_node_order(order, self.num_nodes, self.num_src_nodes, full=True, name="order")
        perm = inverse_order(order)

        host = self.to("cpu")
        indptr, positions = permuted_rows(np.asarray(host.indptr), order)
        edge_ids = positions if host.edge_ids is None else host.edge_ids[positions]
        weights = None if host.weights is None else host.weights[positions]
        # The new graph remembers the user's numbering: composed with an order this one carries.
        known = order if self.node_order is None else self.node_order[order]
        graph = CSRGraph(
            indptr, perm[host.indices[positions]], edge_ids=edge_ids, weights=weights, node_order=known, _checked=True
        )
        return graph, perm

    def to(self, device="cpu", placement: str | None = None) -> CSRGraph:
        """This graph with its arrays where ``device`` reads them.

        placement : ``"device"`` (GPU memory), ``"pinned"`` (page-locked host memory that GPU
            kernels read directly over PCIe: for graphs larger than the GPU; the arrays are
            page-locked where they are, once per process however many samplers use them, and
            copied only where the driver refuses to lock them), or ``"host"``
            (ordinary memory; the only placement for a CPU device). Default: ``"device"`` for a
            CUDA device, ``"host"`` for the CPU. Returns ``self`` when nothing moves.
        """
        device = as_device(device)
        if placement is None:
            placement = "device" if device.is_cuda else "host"
        if placement not in _PLACEMENTS:
            raise ValueError(f"placement must be one of {_PLACEMENTS}, got {placement!r}")
        if not device.is_cuda and placement != "host":
            raise ValueError(f"placement {placement!r} needs a CUDA device, got device {device}")
        if device == self.device and placement == self.placement:
            return self
        if device.is_cuda:
            device.check_available()
        names = ("indptr", "indices", "edge_ids", "weights")
        moved = {}
        for name in names:
            array = getattr(self, name)
            if array is None:
                moved[name] = None
                continue
            host = to_numpy(array)
            if placement == "host":
                moved[name] = host
            elif placement == "pinned":
                from ._pinned import pin

                with device:  # registration and any fallback copy happen under the right device
                    moved[name] = pin(host, what=f"graph's {name}")
            else:
                with device:
                    moved[name] = device.xp.array(host)  # simulator: a private NumPy copy
        graph = CSRGraph.__new__(CSRGraph)
        graph.__dict__.update(moved)
        graph.num_src_nodes, graph.node_order = self.num_src_nodes, self.node_order  # the order stays on the host
        graph.device, graph.placement = device, placement
        return graph

    # ------------------------------------------------------------------ node order
    def new_ids(self, ids) -> np.ndarray:
        """int64 graph ids of the user's node ids ``ids``, an array of their shape (any shape; one
        id, a Python int or a 0-d array, gives a NumPy int64 as NumPy's indexing does; a copy of
        ``ids`` without a :attr:`node_order`): seeds go in through this. ``IndexError`` names an
        id out of range."""
        from . import _reorder

        return _reorder.map_ids(self, ids, to_original=False)

    def original_ids(self, ids) -> np.ndarray:
        """int64 user's node ids of graph ids ``ids``, of their shape as :meth:`new_ids`, e.g. a
        sample's ``n_id`` to index the user's own feature table. ``IndexError`` as :meth:`new_ids`."""
        from . import _reorder

        return _reorder.map_ids(self, ids, to_original=True)

    def rows_in_order(self, array):
        """``array[node_order]``: ``num_nodes`` rows indexed by the user's ids (features, labels)
        renumbered as this graph (a copy); ``array`` itself without a :attr:`node_order`."""
        from . import _reorder

        return _reorder.rows_in_order(self, array)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike, *, overwrite: bool = True) -> None:
        """Write the graph to the folder ``path`` (raw ``.npy`` arrays and a JSON header with
        their checksums; see :mod:`gglspeedup._storage`).

        The folder is written under a temporary name beside ``path`` and renamed into place, so
        saving over the graph this one was loaded from works, and a failed or interrupted save
        leaves ``path`` as it was. Arrays are streamed from where they live (host, pinned or GPU
        memory, or a memory map), 64 MiB at a time.

        A save never deletes what this library did not write: ``path`` may be new, an empty
        folder, or (with ``overwrite=True``, the default) a graph saved earlier, a folder holding
        nothing but the files its header lists, or an old ``.npz`` graph; ``overwrite=False``
        refuses those too. Anything else (a folder of the user's, a feature file, the working
        directory ``"."``) raises ``FileExistsError`` naming ``path``, before anything is written.
        """
        from ._storage import save_graph_arrays

        meta = {"num_nodes": self.num_nodes, "num_src_nodes": self.num_src_nodes, "num_edges": self.num_edges}
        save_graph_arrays(path, "CSRGraph", meta, self, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike, mmap: bool = True, verify: bool = False) -> CSRGraph:
        """Read a graph written by :meth:`save` (or an ``.npz`` file of older versions).

        With ``mmap=True`` the arrays are memory-mapped (no parse, no copy: pages load on first
        touch), which is what graphs too big to read twice need; loading a folder then takes O(1):
        its header, each array's dtype, shape and file size are checked, its contents are trusted.
        ``verify=True`` recomputes every array's checksum and runs the construction checks
        (monotone ``indptr``, ids in range): run it once after copying a graph between machines.
        An ``.npz`` file is always content-checked (it has no checksums of ours; ``verify`` also
        checks its zip CRCs).

        Raises
        ------
        FileNotFoundError
            when ``path`` does not exist.
        ValueError
            naming ``path`` and what is wrong: not a saved graph, a saved ``HeteroGraph``, an array
            missing, truncated or not matching the header, a checksum that differs (``verify``),
            or arrays failing the construction checks.
        """
        from ._storage import load_graph_arrays

        arrays, meta, trusted = load_graph_arrays(path, "CSRGraph", mmap=mmap, verify=verify)
        try:
            return cls(
                arrays["indptr"],
                arrays["indices"],
                edge_ids=arrays.get("edge_ids"),
                weights=arrays.get("weights"),
                num_src_nodes=meta.get("num_src_nodes"),
                dtype=arrays["indices"].dtype,
                node_order=arrays.get("node_order"),
                _checked=trusted,
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f"{os.fspath(path)!r}: {error}") from None


def _edge_id_array(edge_ids: np.ndarray, width: np.dtype) -> np.ndarray:
    """Edge ids at the graph's width: int64 ids narrowed to int32 only when every one fits."""
    if width == np.int64 or edge_ids.dtype == np.int32:
        return edge_ids.astype(width, copy=False)
    info = np.iinfo(np.int32)
    if edge_ids.size == 0 or (edge_ids.min() >= info.min and edge_ids.max() <= info.max):
        return edge_ids.astype(np.int32)
    return edge_ids


def as_csr_graph(graph) -> CSRGraph:
    """A :class:`CSRGraph` from a CSRGraph or a scipy sparse matrix (the seed API took either)."""
    if isinstance(graph, CSRGraph):
        return graph
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a core dependency
        sp = None
    if sp is not None and sp.issparse(graph):
        return CSRGraph.from_scipy(graph)
    raise TypeError(f"graph must be a CSRGraph or a scipy sparse matrix, got {type(graph).__name__}")

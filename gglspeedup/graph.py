"""CSRGraph: the graph every sampler and feature policy reads.

Row ``v`` of the CSR structure lists the nodes whose messages flow *into* ``v`` (its in-neighbours,
PyG / GammaGL semantics). Arrays are int64 whatever the input width, so ids above 2**31 survive.
Content checks (monotone ``indptr``, ``indices`` in range, weights finite) run once, vectorised, at
construction; nothing re-checks per batch.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .device import Device, as_device, to_numpy

__all__ = ["CSRGraph", "as_csr_graph"]

_PLACEMENTS = ("host", "pinned", "device")


def _as_index_array(name: str, array: Any, *, ndim: int = 1) -> np.ndarray:
    """``array`` as int64 (copied only when it is not int64 already), or a clear error."""
    from .validation import int_array  # on first use: ``import gglspeedup`` stays config, device, graph

    return int_array(name, array, ndim=ndim)


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

    Examples
    --------
    >>> g = CSRGraph([0, 2, 3, 3], [1, 2, 0])
    >>> g.num_nodes, g.num_edges, g.degree().tolist()
    (3, 3, [2, 1, 0])
    """

    def __init__(
        self, indptr, indices, num_nodes=None, edge_ids=None, weights=None, *, num_src_nodes=None, _checked=False
    ):
        self.indptr = _as_index_array("indptr", indptr)
        self.indices = _as_index_array("indices", indices)
        self.edge_ids = None if edge_ids is None else _as_index_array("edge_ids", edge_ids)
        self.weights = None if weights is None else self._as_weights(weights)
        self.device = Device("cpu")
        self.placement = "host"
        if len(self.indptr) == 0:
            raise ValueError("indptr must have at least one entry (num_nodes + 1), got an empty array")
        if num_nodes is not None:
            num_nodes = _as_count("num_nodes", num_nodes)
            if num_nodes != len(self.indptr) - 1:
                raise ValueError(f"num_nodes = {num_nodes} does not match len(indptr) - 1 = {len(self.indptr) - 1}")
        self.num_src_nodes = (
            len(self.indptr) - 1 if num_src_nodes is None else _as_count("num_src_nodes", num_src_nodes)
        )
        self._check_shapes()
        if not _checked:
            self.validate()

    @staticmethod
    def _as_weights(weights) -> np.ndarray:
        weights = to_numpy(weights)
        if weights.dtype.kind not in "fiu" or weights.dtype == object:
            raise TypeError(f"weights must be a float array, got dtype {weights.dtype}")
        if weights.ndim != 1:
            raise ValueError(f"weights must be 1-D, got shape {weights.shape}")
        dtype = weights.dtype if weights.dtype in (np.float32, np.float64) else np.float64
        return np.ascontiguousarray(weights, dtype=dtype)

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
            weights = to_numpy(self.weights)
            bad = ~np.isfinite(weights) | (weights < 0)
            if bad.any():
                position = _first_bad(bad)
                raise ValueError(f"weights must be finite and >= 0: weights[{position}] = {weights[position]}")
        return self

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_edge_index(
        cls, edge_index, num_nodes=None, direction: str = "in", weights=None, *, num_src_nodes=None
    ) -> CSRGraph:
        """Build from a ``[2, E]`` edge list (``edge_index[0]`` sources, ``edge_index[1]`` targets).

        ``direction="in"`` (PyG / GammaGL): row ``v`` lists the sources of edges into ``v``.
        ``direction="out"`` (the original gglspeedup's scipy semantics): row ``u`` lists the
        targets of edges out of ``u``. Duplicate edges and self loops are kept; rows keep the
        order of the input edges; ``edge_ids`` records each edge's column in ``edge_index``, so
        sampled ``e_id`` index the caller's edge features directly. ``num_src_nodes`` (bipartite
        graphs, ``direction="in"`` only) bounds ``edge_index[0]`` while ``num_nodes`` counts the
        rows (the targets).
        """
        edge_index = _as_index_array("edge_index", edge_index, ndim=2)
        if edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape [2, num_edges], got {edge_index.shape}")
        if direction not in ("in", "out"):
            raise ValueError(f"direction must be 'in' or 'out', got {direction!r}")
        if edge_index.size and edge_index.min() < 0:
            position = _first_bad((edge_index < 0).any(axis=0))
            raise ValueError(f"edge_index[:, {position}] has a negative node id: {edge_index[:, position]}")
        if num_src_nodes is not None and direction != "in":
            raise ValueError("num_src_nodes (a bipartite graph) needs direction='in'")
        inferred = int(edge_index.max()) + 1 if edge_index.size else 0
        if num_nodes is None:
            num_nodes = inferred if num_src_nodes is None else int(edge_index[1].max(initial=-1)) + 1
        num_nodes = _as_count("num_nodes", num_nodes)
        bounds = (
            (num_nodes, num_nodes) if num_src_nodes is None else (_as_count("num_src_nodes", num_src_nodes), num_nodes)
        )
        bad = (edge_index >= np.array(bounds, dtype=np.int64)[:, None]).any(axis=0)
        if bad.any():
            position = _first_bad(bad)
            what = f"num_nodes = {num_nodes}" if num_src_nodes is None else f"(num_src_nodes, num_nodes) = {bounds}"
            raise ValueError(
                f"edge_index[:, {position}] = {edge_index[:, position].tolist()} is out of range for {what}"
            )
        rows, cols = (edge_index[1], edge_index[0]) if direction == "in" else (edge_index[0], edge_index[1])
        order = np.argsort(rows, kind="stable")
        indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=num_nodes), out=indptr[1:])
        if weights is not None:
            weights = cls._as_weights(weights)
            if len(weights) != len(order):
                raise ValueError(f"weights must have one entry per edge ({len(order)}), got {len(weights)}")
            weights = weights[order]
        graph = cls(indptr, cols[order], edge_ids=order, weights=weights, num_src_nodes=num_src_nodes, _checked=True)
        return graph.validate() if weights is not None else graph

    @classmethod
    def from_scipy(cls, matrix, weighted: bool = False) -> CSRGraph:
        """Build from a square scipy sparse matrix; row ``i`` of the matrix is row ``i`` here.

        With ``weighted=True`` the matrix values become edge weights.
        """
        import scipy.sparse as sp

        if not sp.issparse(matrix):
            raise TypeError(f"matrix must be a scipy sparse matrix, got {type(matrix).__name__}")
        if matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"matrix must be square (num_nodes x num_nodes), got shape {matrix.shape}")
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
    def nbytes(self) -> int:
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
        ``e_id`` still names the original edges.

        >>> g = CSRGraph([0, 1, 2], [1, 0])
        >>> h, perm = g.permute([1, 0])
        >>> perm.tolist(), h.indices.tolist()
        ([1, 0], [1, 0])
        """
        order = _as_index_array("order", order)
        n = self.num_nodes
        if self.num_src_nodes != n:
            raise ValueError("permute needs a square graph; this one is bipartite (num_src_nodes != num_nodes)")
        if len(order) != n:
            raise ValueError(f"order must have num_nodes = {n} entries, got {len(order)}")
        if n and (order.min() < 0 or order.max() >= n):
            position = _first_bad((order < 0) | (order >= n))
            raise ValueError(f"order[{position}] = {order[position]} is out of range [0, {n})")
        perm = np.full(n, -1, dtype=np.int64)
        perm[order] = np.arange(n, dtype=np.int64)
        if n and (perm < 0).any():
            raise ValueError(f"order must be a permutation of range({n}): node {_first_bad(perm < 0)} is missing")
        host = self.to("cpu")
        degree = host.degree()[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(degree, out=indptr[1:])
        # Gather old edge positions row by row in the new order (vectorised: one repeat + arange).
        starts = host.indptr[order]
        positions = np.repeat(starts - indptr[:-1], degree) + np.arange(host.num_edges, dtype=np.int64)
        edge_ids = positions if host.edge_ids is None else host.edge_ids[positions]
        weights = None if host.weights is None else host.weights[positions]
        graph = CSRGraph(indptr, perm[host.indices[positions]], edge_ids=edge_ids, weights=weights, _checked=True)
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
        graph.num_src_nodes = self.num_src_nodes
        graph.device, graph.placement = device, placement
        return graph

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the graph to ``path`` (an uncompressed ``.npz``; no pickles)."""
        arrays = {"indptr": to_numpy(self.indptr), "indices": to_numpy(self.indices)}
        if self.num_src_nodes != self.num_nodes:
            arrays["num_src_nodes"] = np.int64(self.num_src_nodes)
        for name in ("edge_ids", "weights"):
            if getattr(self, name) is not None:
                arrays[name] = to_numpy(getattr(self, name))
        with open(path, "wb") as handle:
            np.savez(handle, **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike, mmap: bool = True) -> CSRGraph:
        """Read a graph written by :meth:`save`.

        With ``mmap=True`` the arrays are memory-mapped from the file (no parse, no copy: pages
        load on first touch), which is what graphs too big to read twice need. The content checks
        run once here, as for any construction.

        Raises
        ------
        FileNotFoundError
            when ``path`` does not exist.
        ValueError
            naming ``path`` when it is not a file :meth:`save` wrote: not an ``.npz`` archive,
            truncated (an array's header claims more bytes than the file holds), arrays missing,
            holding objects, or failing the construction checks.
        """
        import zipfile

        try:
            arrays = load_npz(path, mmap)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            raise
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
            raise ValueError(
                f"{os.fspath(path)!r} is not a readable CSRGraph file (one written by CSRGraph.save): {error}"
            ) from None
        missing = {"indptr", "indices"} - set(arrays)
        if missing:
            raise ValueError(f"{os.fspath(path)!r} is not a saved CSRGraph: missing {sorted(missing)}")
        num_src = arrays.get("num_src_nodes")
        return cls(
            arrays["indptr"],
            arrays["indices"],
            edge_ids=arrays.get("edge_ids"),
            weights=arrays.get("weights"),
            num_src_nodes=None if num_src is None else int(num_src),
        )


def load_npz(path, mmap: bool) -> dict[str, np.ndarray]:
    """Arrays of an uncompressed ``.npz``, memory-mapped member by member when ``mmap``."""
    import zipfile

    if not mmap:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    arrays = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                return load_npz(path, mmap=False)
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                read_header = (
                    np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                )
                shape, fortran, dtype = read_header(member)
                header_end = member.tell()
            if dtype.hasobject:
                raise ValueError(f"{os.fspath(path)!r}: array {name!r} holds objects; refusing to unpickle")
            claimed = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if claimed > info.file_size - header_end:
                raise ValueError(
                    f"array {name!r} claims shape {shape} ({claimed} bytes) but the file holds "
                    f"{info.file_size - header_end} bytes of it: the file is truncated or corrupt"
                )
            # Local file header: 30 bytes + name + extra field, then the .npy payload.
            with open(path, "rb") as raw:
                raw.seek(info.header_offset + 26)
                name_len, extra_len = np.frombuffer(raw.read(4), dtype="<u2")
            offset = info.header_offset + 30 + int(name_len) + int(extra_len) + header_end
            arrays[name] = np.memmap(
                path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C"
            )
    return arrays


def _as_count(name: str, value) -> int:
    from .validation import check_int

    return check_int(name, value, minimum=0)


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

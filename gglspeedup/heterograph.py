"""HeteroGraph: a typed graph, one bipartite CSR per relation, stored as one stacked CSR.

A relation (edge type) ``(src_type, name, dst_type)`` is a :class:`~gglspeedup.CSRGraph` whose rows
are the ``dst_type`` nodes and whose entries are ``src_type`` local ids (row ``v`` lists the
sources of the edges into ``v``, as in :class:`~gglspeedup.CSRGraph`). Node ids are local per node
type. Every relation's arrays live in one *stacked* CSR (:attr:`HeteroGraph.stacked`): relation
``r``'s rows are rows ``row_base[r] .. row_base[r + 1]`` of it and its edges positions
``edge_base[r] ..``, so a sampling kernel reads every relation of a hop from one set of arrays
and :meth:`HeteroGraph.__getitem__` hands out per-relation views (no copy of ``indices``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .device import as_device, to_numpy
from .graph import CSRGraph

__all__ = ["HeteroGraph", "EdgeType", "check_edge_type"]

EdgeType = tuple  # (src_type, name, dst_type), each a str


def check_edge_type(value: Any, edge_types, name: str = "edge_type") -> tuple:
    """``value`` as one of ``edge_types`` (a 3-tuple of str), or a clear error naming ``name``."""
    if not (isinstance(value, (tuple, list)) and len(value) == 3 and all(isinstance(v, str) for v in value)):
        raise TypeError(f"{name} must be a (src_type, name, dst_type) tuple of str, got {value!r}")
    value = tuple(value)
    if value not in edge_types:
        raise ValueError(f"{name} {value!r} is not an edge type of the graph; known: {list(edge_types)}")
    return value


class HeteroGraph:
    """A typed graph: relations ``(src_type, name, dst_type)`` over per-type local node ids.

    Parameters
    ----------
    relations : dict
        Edge type ``(src_type, name, dst_type)`` -> a :class:`~gglspeedup.CSRGraph` with
        ``num_nodes[dst_type]`` rows and entries in ``[0, num_nodes[src_type])`` (build one with
        ``CSRGraph.from_edge_index(ei, num_nodes=n_dst, num_src_nodes=n_src, weights=w)`` for
        weights), or a (2, E) edge index ``[src; dst]`` of local ids (NumPy, list, DLPack
        tensor), or a ``(src, dst)`` pair of 1-D arrays (DGL's edge dicts). Edge ids of an edge
        index are its columns, as in ``CSRGraph.from_edge_index``.
    num_nodes : dict
        Node type -> count. Every type a relation names must be here; types without relations
        are allowed.
    dtype : np.int32, np.int64 or None
        Width of the stacked ``indices`` / ``edge_ids`` (as in :class:`~gglspeedup.CSRGraph`):
        by default int32 while every type's ids fit.

    Relations are checked like ``CSRGraph`` (the first bad position named, with its relation).
    Either every relation has weights or none does.

    Examples
    --------
    >>> g = HeteroGraph(
    ...     {("author", "writes", "paper"): [[0, 1, 1], [0, 0, 2]], ("paper", "cites", "paper"): [[2], [0]]},
    ...     {"author": 2, "paper": 3},
    ... )
    >>> g.num_edges[("author", "writes", "paper")], g[("author", "writes", "paper")].degree().tolist()
    (3, [2, 0, 1])
    >>> g.in_degree("paper").tolist(), g.out_degree("author").tolist()
    ([3, 0, 1], [1, 2])
    """

    def __init__(self, relations, num_nodes, *, dtype=None):
        self.num_nodes = _check_num_nodes(num_nodes)
        if not isinstance(relations, dict):
            raise TypeError(
                f"relations must be a dict edge type -> CSRGraph or edge index, got {type(relations).__name__}"
            )
        if not relations:
            raise ValueError("relations must name at least one edge type, got an empty dict")
        graphs = {}
        for edge_type, value in relations.items():
            edge_type = self._check_type_names(edge_type)
            if edge_type in graphs:
                raise ValueError(f"relations names edge type {edge_type!r} twice")
            graphs[edge_type] = self._as_relation(edge_type, value)
        weighted = [et for et, g in graphs.items() if g.weights is not None]
        if weighted and len(weighted) != len(graphs):
            missing = next(et for et, g in graphs.items() if g.weights is None)
            raise ValueError(f"either every relation has weights or none does: {missing!r} has none")
        stacked = _stack(list(graphs.values()), dtype)
        self._set_stack(stacked, tuple(graphs), [g.edge_ids is not None for g in graphs.values()])

    # ------------------------------------------------------------------ construction
    def _set_stack(self, stacked: CSRGraph, edge_types: tuple, has_ids) -> None:
        self.edge_types = edge_types
        self.node_types = tuple(self.num_nodes)
        self.stacked = stacked
        dst_counts = [self.num_nodes[et[2]] for et in edge_types]
        self.row_base = np.zeros(len(edge_types) + 1, np.int64)
        np.cumsum(dst_counts, out=self.row_base[1:])
        indptr = to_numpy(stacked.indptr)
        self.edge_base = indptr[self.row_base].astype(np.int64)
        self._has_edge_ids = tuple(bool(h) for h in has_ids)
        self._views: dict = {}

    @staticmethod
    def _check_type_names(edge_type) -> tuple:
        if not (isinstance(edge_type, tuple) and len(edge_type) == 3 and all(isinstance(v, str) for v in edge_type)):
            raise TypeError(f"relations' keys must be (src_type, name, dst_type) tuples of str, got {edge_type!r}")
        return edge_type

    def _as_relation(self, edge_type, value) -> CSRGraph:
        src, _, dst = edge_type
        for role, node_type in (("source", src), ("target", dst)):
            if node_type not in self.num_nodes:
                raise ValueError(
                    f"relation {edge_type!r}: {role} type {node_type!r} is not in num_nodes {list(self.num_nodes)}"
                )
        n_src, n_dst = self.num_nodes[src], self.num_nodes[dst]
        if isinstance(value, CSRGraph):
            graph = value.to("cpu")
            if graph.node_order is not None:  # its ids are renumbered; the typed graph would keep them unmapped
                raise ValueError(
                    f"relation {edge_type!r}: its CSRGraph is renumbered (node_order, from reorder= or permute), "
                    "but a HeteroGraph's ids are the caller's local ids; pass the relation without reorder"
                )
            if graph.num_nodes != n_dst:
                raise ValueError(
                    f"relation {edge_type!r}: its CSRGraph has {graph.num_nodes} rows but num_nodes[{dst!r}] = {n_dst}"
                )
            indices = to_numpy(graph.indices)
            if indices.size and indices.max() >= n_src:
                position = int(np.argmax(indices >= n_src))
                raise ValueError(
                    f"relation {edge_type!r}: indices must lie in [0, num_nodes[{src!r}] = {n_src}): "
                    f"indices[{position}] = {indices[position]}"
                )
            return graph
        if isinstance(value, tuple) and len(value) == 2:
            from .validation import int_array

            src_ids, dst_ids = (int_array(f"relations[{edge_type!r}][{i}]", v) for i, v in enumerate(value))
            if len(src_ids) != len(dst_ids):
                raise ValueError(
                    f"relations[{edge_type!r}]: source and target arrays differ in length "
                    f"({len(src_ids)} != {len(dst_ids)})"
                )
            value = np.stack((src_ids, dst_ids))
        try:
            return CSRGraph.from_edge_index(value, num_nodes=n_dst, num_src_nodes=n_src)
        except (TypeError, ValueError) as error:
            raise type(error)(f"relation {edge_type!r}: {error}") from None

    @classmethod
    def from_pyg(cls, data) -> HeteroGraph:
        """From a ``torch_geometric.data.HeteroData`` (its ``edge_index_dict`` and node counts).
        ``TypeError`` for anything else; ``ValueError`` naming a node type whose count PyG does not
        know (no ``num_nodes`` nor node tensor) or an edge type without ``edge_index``."""
        if not (hasattr(data, "node_types") and hasattr(data, "edge_types")):
            raise TypeError(f"data must be a torch_geometric.data.HeteroData, got {type(data).__name__}")
        num_nodes = {}
        for node_type in data.node_types:
            count = data[node_type].num_nodes
            if count is None:  # int(None) was a bare TypeError
                raise ValueError(f"data[{node_type!r}] has no num_nodes (set it, or give the type a node tensor)")
            num_nodes[node_type] = int(count)
        relations = {}
        for edge_type in data.edge_types:
            edge_index = getattr(data[edge_type], "edge_index", None)
            if edge_index is None:  # e.g. only adj_t: the store's AttributeError named no type
                raise ValueError(f"data[{tuple(edge_type)!r}] has no edge_index")
            relations[tuple(edge_type)] = edge_index
        return cls(relations, num_nodes)

    # ------------------------------------------------------------------ properties
    @property
    def num_edges(self) -> dict:
        """Edge type -> number of edges."""
        return {et: int(self.edge_base[r + 1] - self.edge_base[r]) for r, et in enumerate(self.edge_types)}

    @property
    def device(self):
        return self.stacked.device

    @property
    def placement(self) -> str:
        return self.stacked.placement

    @property
    def weighted(self) -> bool:
        return self.stacked.weights is not None

    @property
    def nbytes(self) -> int:
        return self.stacked.nbytes

    def has_edge_ids(self, edge_type) -> bool:
        """Whether ``edge_type`` was given edge ids (else ``e_id`` is the position in its CSR)."""
        return self._has_edge_ids[self.edge_types.index(edge_type)]

    def __getitem__(self, edge_type) -> CSRGraph:
        """The relation ``edge_type`` as a bipartite :class:`CSRGraph` (a view of the stack)."""
        edge_type = check_edge_type(edge_type, self.edge_types)
        if edge_type not in self._views:
            r = self.edge_types.index(edge_type)
            (rb, re), (eb, ee) = self.row_base[r : r + 2], self.edge_base[r : r + 2]
            s = self.stacked
            view = CSRGraph.__new__(CSRGraph)
            view.indptr = s.indptr[rb : re + 1] - eb
            view.indices = s.indices[eb:ee]
            view.edge_ids = s.edge_ids[eb:ee] if s.edge_ids is not None and self._has_edge_ids[r] else None
            view.weights = None if s.weights is None else s.weights[eb:ee]
            view.num_src_nodes = self.num_nodes[edge_type[0]]
            view.device, view.placement = s.device, s.placement
            self._views[edge_type] = view
        return self._views[edge_type]

    def in_degree(self, node_type: str) -> np.ndarray:
        """Edges into each ``node_type`` node, summed over relations whose target type it is."""
        degree = np.zeros(self._count(node_type), np.int64)
        for et in self.edge_types:
            if et[2] == node_type:
                degree += self[et].to("cpu").degree()
        return degree

    def out_degree(self, node_type: str) -> np.ndarray:
        """Edges out of each ``node_type`` node (how often it can be drawn as a neighbour),
        summed over relations whose source type it is."""
        n = self._count(node_type)
        degree = np.zeros(n, np.int64)
        for et in self.edge_types:
            if et[0] == node_type:
                degree += np.bincount(to_numpy(self[et].indices), minlength=n)
        return degree

    def _count(self, node_type) -> int:
        if node_type not in self.num_nodes:
            raise ValueError(f"node_type {node_type!r} is not a node type of the graph; known: {list(self.num_nodes)}")
        return self.num_nodes[node_type]

    def __repr__(self) -> str:
        return (
            f"HeteroGraph(num_nodes={self.num_nodes}, edge_types={len(self.edge_types)}, "
            f"num_edges={int(self.edge_base[-1])}, device={self.device}, placement={self.placement!r})"
        )

    # ------------------------------------------------------------------ transforms
    def node_offsets(self) -> dict:
        """Node type -> offset of its ids in :meth:`to_homogeneous`'s id space (types in order)."""
        counts = [self.num_nodes[t] for t in self.node_types]
        return dict(zip(self.node_types, np.concatenate(([0], np.cumsum(counts)[:-1])).astype(int).tolist()))

    def to_homogeneous(self) -> tuple[CSRGraph, dict]:
        """One untyped :class:`CSRGraph` over every node (type ``t``'s node ``i`` is node
        ``offsets[t] + i``) holding every relation's edges; returns ``(graph, offsets)``. Its
        ``edge_ids`` are positions in :attr:`stacked` (relation ``r``'s edges from
        ``edge_base[r]``)."""
        offsets = self.node_offsets()
        rows, cols = [], []
        for edge_type in self.edge_types:  # in stacked order, so an edge's column is its stacked position
            src, _, dst = edge_type
            rel = self[edge_type].to("cpu")
            rows.append(np.repeat(np.arange(rel.num_nodes, dtype=np.int64) + offsets[dst], rel.degree()))
            cols.append(to_numpy(rel.indices) + offsets[src])
        weights = self.stacked.weights
        graph = CSRGraph.from_edge_index(
            np.stack((np.concatenate(cols), np.concatenate(rows))),
            num_nodes=sum(self.num_nodes.values()),
            weights=None if weights is None else to_numpy(weights),
        )
        return graph, offsets

    def to(self, device="cpu", placement: str | None = None) -> HeteroGraph:
        """This graph with its stacked arrays where ``device`` reads them (see ``CSRGraph.to``)."""
        device = as_device(device)
        stacked = self.stacked.to(device, placement)
        if stacked is self.stacked:
            return self
        graph = HeteroGraph.__new__(HeteroGraph)
        graph.num_nodes = dict(self.num_nodes)
        graph._set_stack(stacked, self.edge_types, self._has_edge_ids)
        return graph

    def with_stacked(self, stacked: CSRGraph, has_edge_ids=None) -> HeteroGraph:
        """This graph's node and edge types over ``stacked``, a stacked CSR of the same layout (each
        relation's rows and edges where :attr:`stacked` has them; e.g. rows sorted differently);
        ``has_edge_ids`` per relation (default: as this graph's)."""
        if stacked.num_nodes != self.stacked.num_nodes or stacked.num_edges != self.stacked.num_edges:
            raise ValueError("stacked must have the layout of this graph's stacked CSR (rows and edges)")
        graph = HeteroGraph.__new__(HeteroGraph)
        graph.num_nodes = dict(self.num_nodes)
        graph._set_stack(stacked, self.edge_types, self._has_edge_ids if has_edge_ids is None else has_edge_ids)
        return graph

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike, *, overwrite: bool = True) -> None:
        """Write the graph to the folder ``path``, as :meth:`CSRGraph.save` does (the stacked
        arrays, and the types and counts in the header), atomically; ``path`` is replaced only
        when it holds a graph this library wrote (``overwrite=False``: not even then), else
        ``FileExistsError`` names it."""
        from ._storage import save_graph_arrays

        meta = {
            "node_types": list(self.node_types),
            "num_nodes": [self.num_nodes[t] for t in self.node_types],
            "edge_types": [list(et) for et in self.edge_types],
            "has_edge_ids": list(self._has_edge_ids),
            "edges_per_type": [self.num_edges[et] for et in self.edge_types],
        }
        save_graph_arrays(path, "HeteroGraph", meta, self.stacked, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike, mmap: bool = True, verify: bool = False) -> HeteroGraph:
        """Read a graph written by :meth:`save` (or an ``.npz`` file of older versions), memory-mapped
        with ``mmap=True``; ``verify`` as in :meth:`CSRGraph.load`. Raises ``ValueError`` naming
        ``path`` and what disagrees (types, counts, arrays) for anything else."""
        from ._storage import load_graph_arrays

        arrays, meta, trusted = load_graph_arrays(path, "HeteroGraph", mmap=mmap, verify=verify)
        where = os.fspath(path)
        try:
            num_nodes = _check_num_nodes(dict(zip(meta["node_types"], meta["num_nodes"], strict=True)))
            edge_types = tuple(cls._check_type_names(tuple(et)) for et in meta["edge_types"])
            has_ids = list(meta["has_edge_ids"])
            if not all(isinstance(h, bool) for h in has_ids):  # bool("no") would be True
                raise TypeError(f"has_edge_ids must be true / false flags, got {has_ids!r}")
            counts = meta.get("edges_per_type", [])
            if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):  # int(2.7) would be 2
                raise TypeError(f"edges_per_type must be integers, got {counts!r}")
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{where!r}: its header does not describe a HeteroGraph ({error!r})") from None
        if len(set(edge_types)) != len(edge_types):  # the constructor refuses it: one relation would hide the other
            twice = next(et for i, et in enumerate(edge_types) if et in edge_types[:i])
            raise ValueError(f"{where!r}: its header names edge type {twice!r} twice")
        _check_saved_layout(where, arrays, meta, num_nodes, edge_types, has_ids)
        try:
            stacked = CSRGraph(  # entries are local ids of each relation's source type: bound by the largest
                arrays["indptr"],
                arrays["indices"],
                edge_ids=arrays.get("edge_ids") if any(has_ids) else None,
                weights=arrays.get("weights"),
                num_src_nodes=max(num_nodes.values(), default=0),
                dtype=arrays["indices"].dtype,
                _checked=trusted,
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where!r}: {error}") from None
        graph = cls.__new__(cls)
        graph.num_nodes = num_nodes
        graph._set_stack(stacked, edge_types, has_ids)
        if not trusted:
            for edge_type in edge_types:  # the stack's checks do not know the types
                try:
                    graph._as_relation(edge_type, graph[edge_type])
                except ValueError as error:
                    raise ValueError(f"{where!r}: {error}") from None
        return graph


def _check_saved_layout(where, arrays, meta, num_nodes, edge_types, has_ids) -> None:
    """Raise ``ValueError`` naming ``where`` when a saved graph's header and arrays disagree."""
    for edge_type in edge_types:
        for node_type in (edge_type[0], edge_type[2]):
            if node_type not in num_nodes:
                raise ValueError(
                    f"{where!r}: edge type {edge_type!r} names node type {node_type!r}, absent from the header"
                )
    if len(has_ids) != len(edge_types):
        raise ValueError(
            f"{where!r}: the header lists {len(edge_types)} edge types but {len(has_ids)} has_edge_ids flags"
        )
    rows = sum(num_nodes[et[2]] for et in edge_types)
    indptr = arrays["indptr"]
    if indptr.shape[0] != rows + 1:
        raise ValueError(
            f"{where!r}: the header's {len(edge_types)} edge types have {rows} target rows in all, but the "
            f"stacked indptr holds {indptr.shape[0] - 1}: edge types are missing from or extra in the header"
        )
    if any(has_ids) and "edge_ids" not in arrays:
        raise ValueError(f"{where!r}: the header says relations have edge ids but the edge_ids array is missing")
    if "edges_per_type" in meta:
        counts = [int(c) for c in meta["edges_per_type"]]
        bases = np.cumsum([0] + [num_nodes[et[2]] for et in edge_types])
        saved = np.diff(np.asarray(indptr[bases]))  # O(number of relations) reads of the map
        if len(counts) != len(edge_types) or saved.tolist() != counts:
            raise ValueError(f"{where!r}: the header's edge counts {counts} disagree with the arrays' {saved.tolist()}")


def _check_num_nodes(num_nodes) -> dict:
    from .validation import check_int

    if not isinstance(num_nodes, dict):
        raise TypeError(f"num_nodes must be a dict node type -> count, got {type(num_nodes).__name__}")
    checked = {}
    for node_type, count in num_nodes.items():
        if not isinstance(node_type, str):
            raise TypeError(f"num_nodes' keys must be node type names (str), got {node_type!r}")
        checked[node_type] = check_int(f"num_nodes[{node_type!r}]", count, minimum=0)
    return checked


def _stack(graphs: list, index_width=None) -> CSRGraph:
    """One CSR holding ``graphs`` one after another (rows and edges), edge ids kept per relation."""
    counts = [g.num_edges for g in graphs]
    edge_base = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    indptr = [np.zeros(1, np.int64)] + [to_numpy(g.indptr)[1:] + edge_base[r] for r, g in enumerate(graphs)]
    indices = np.concatenate([to_numpy(g.indices) for g in graphs])
    with_ids = any(g.edge_ids is not None for g in graphs)
    edge_ids = None
    if with_ids:
        edge_ids = np.concatenate(
            [to_numpy(g.edge_ids) if g.edge_ids is not None else np.arange(g.num_edges) for g in graphs]
        )
    weights = None
    if graphs[0].weights is not None:
        dtype = np.result_type(*(g.weights.dtype for g in graphs))
        weights = np.concatenate([to_numpy(g.weights).astype(dtype, copy=False) for g in graphs])
    return CSRGraph(
        np.concatenate(indptr),
        indices,
        edge_ids=edge_ids,
        weights=weights,
        num_src_nodes=max((g.num_src_nodes for g in graphs), default=0),
        dtype=index_width,
        _checked=True,
    )

"""GraphStore: a CSRGraph or HeteroGraph behind PyG's ``torch_geometric.data.GraphStore``.

A :class:`~gglspeedup.CSRGraph` row ``v`` lists the sources of the edges into ``v``: that is PyG's
CSC layout of the edge type, ``colptr = indptr`` and ``row = indices``, handed to torch without a
copy (int64 arrays; int32 ones, the width graphs take while node ids fit, are widened once). COO
(``row = indices``, ``col`` the rows expanded) and CSR (sorted by source) are computed on first
request and kept. Every layout comes with its ``perm``: the edge id (a column of the
``edge_index`` the graph was built from, as ``CSRGraph.from_edge_index`` records it) of each of its
entries, so PyG's own sampler reading this store maps sampled edges to edge features correctly.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import GraphStore as PyGGraphStore
from torch_geometric.data.graph_store import EdgeAttr, EdgeLayout

from ..device import to_numpy
from ..graph import CSRGraph, as_csr_graph
from ..heterograph import HeteroGraph
from ..validation import uint64_beyond_int64

__all__ = ["GraphStore", "graph_from_pyg_store", "csr_of_data"]


class GraphStore(PyGGraphStore):
    """PyG's ``GraphStore`` over a :class:`~gglspeedup.CSRGraph` (edge type ``None``) or the
    relations of a :class:`~gglspeedup.HeteroGraph`.

    Parameters
    ----------
    graph : CSRGraph, HeteroGraph, scipy sparse matrix or None
        The graph (copied to the host if it lives on a GPU). ``None`` starts empty: add edge types
        with PyG's ``put_edge_index(edge_index, edge_type=..., layout="coo" | "csc" | "csr",
        size=(num_src, num_dst))``; ``edge_index`` is a ``(row, col)`` pair or, for COO, a stacked
        ``[2, E]`` tensor.

    PyG's contract (its ``test_graph_store``): a layout that was put comes back exactly as put from
    ``get_edge_index`` (COO in the order it was put), a layout that was not put raises
    ``KeyError`` there and is converted by ``coo()`` / ``csr()`` / ``csc()``, and
    ``get_all_edge_attrs()`` lists every ``(edge type, layout)`` put. An edge type's edge ids are
    its positions in the COO it was put in (else in the CSC, else the CSR), so the ``perm`` of a
    conversion indexes the edge features given in that order, and a COO conversion comes back in
    that order with ``perm=None``. A graph handed to the constructor is stored as CSC (no copy of
    int64 arrays, int32 ones widened once: a CSRGraph row ``v`` lists the sources of the edges into
    ``v``) and answers every layout from
    ``get_edge_index``; its edge ids are the graph's ``edge_ids``. A failed put leaves the store
    as it was.

    :attr:`graph` is the gglspeedup graph a :class:`~gglspeedup.pyg.Sampler` samples from: typed
    edge types must then be ``(src, name, dst)`` triples.

    Examples
    --------
    >>> import gglspeedup as gg
    >>> store = GraphStore(gg.CSRGraph.from_edge_index([[1, 2, 0], [0, 0, 1]], num_nodes=3))
    >>> row, colptr = store.get_edge_index(edge_type=None, layout="csc")
    >>> row.tolist(), colptr.tolist()
    ([1, 2, 0], [0, 2, 3, 3])
    >>> [t.tolist() for t in store.get_edge_index(edge_type=None, layout="coo")]
    [[1, 2, 0], [0, 0, 1]]
    """

    def __init__(self, graph=None):
        super().__init__()
        self._puts: dict = {}  # (edge_type, EdgeLayout) -> (first, second, size, is_sorted) as put
        self._given: dict = {}  # edge_type -> CSRGraph handed to the constructor
        self._relations: dict = {}  # edge_type -> CSRGraph (built from the puts on demand)
        self._layouts: dict = {}
        self._hetero = None
        if isinstance(graph, HeteroGraph):
            graph = graph.to("cpu")
            self._given = {edge_type: graph[edge_type] for edge_type in graph.edge_types}
            self._hetero, self._num_nodes_given = graph, dict(graph.num_nodes)
        elif graph is not None:
            self._given = {None: as_csr_graph(graph).to("cpu")}

    @classmethod
    def from_data(cls, data) -> GraphStore:
        """From a ``torch_geometric.data.Data`` (its ``edge_index`` and ``num_nodes``; no edges is
        fine) or a ``HeteroData`` (:meth:`gglspeedup.HeteroGraph.from_pyg`)."""
        from torch_geometric.data import Data, HeteroData

        if isinstance(data, HeteroData):
            return cls(HeteroGraph.from_pyg(data))
        if isinstance(data, Data):
            return cls(csr_of_data(data))
        raise TypeError(f"data must be a torch_geometric Data or HeteroData, got {type(data).__name__}")

    # ------------------------------------------------------------------ gglspeedup's view
    def _edge_types(self) -> list:
        return list(dict.fromkeys([*self._given, *(edge_type for edge_type, _ in self._puts)]))

    @property
    def is_hetero(self) -> bool:
        edge_types = self._edge_types()
        return bool(edge_types) and None not in edge_types

    @property
    def graph(self):
        """The stored graph: a :class:`~gglspeedup.CSRGraph`, or a :class:`~gglspeedup.HeteroGraph`
        for typed edge types (built once from the relations put so far)."""
        edge_types = self._edge_types()
        if not edge_types:
            raise ValueError("the GraphStore holds no edges yet; put_edge_index(...) first")
        if not self.is_hetero:
            return self._relation(None)
        if self._hetero is None:
            for edge_type in edge_types:
                if not (isinstance(edge_type, tuple) and len(edge_type) == 3):
                    raise ValueError(
                        f"edge type {edge_type!r} is not a (src, name, dst) triple: a typed graph to sample from "
                        "needs its node types"
                    )
            counts = self.num_nodes
            relations = {}
            for edge_type in edge_types:
                relation = self._relation(edge_type)
                if self._sizeless(edge_type):  # put without size: its counts are the largest any relation gives
                    relation = _padded(relation, counts[edge_type[0]], counts[edge_type[-1]])
                relations[edge_type] = relation
            self._hetero = HeteroGraph(relations, counts)
        return self._hetero

    @property
    def num_nodes(self):
        """Node count (an int), or node type -> count for typed graphs (the largest size any
        relation gives the type)."""
        if not self.is_hetero:
            return self.graph.num_nodes
        counts = dict(getattr(self, "_num_nodes_given", {}))
        for edge_type in self._edge_types():
            relation = self._relation(edge_type)
            for node_type, count in ((edge_type[0], relation.num_src_nodes), (edge_type[-1], relation.num_nodes)):
                counts[node_type] = max(counts.get(node_type, 0), int(count))
        return counts

    def __repr__(self) -> str:
        return f"{type(self).__name__}(graph={self.graph!r})" if self._given else f"{type(self).__name__}()"

    # ------------------------------------------------------------------ PyG's GraphStore API
    def get_all_edge_attrs(self) -> list:
        attrs = [
            EdgeAttr(edge_type, EdgeLayout.CSC, is_sorted=True, size=(int(g.num_src_nodes), int(g.num_nodes)))
            for edge_type, g in self._given.items()
        ]
        for (edge_type, layout), (_, _, size, is_sorted) in self._puts.items():
            if edge_type not in self._given:
                attrs.append(EdgeAttr(edge_type, layout, is_sorted=is_sorted, size=size))
        return attrs

    def _get_edge_index(self, edge_attr: EdgeAttr):
        layout = EdgeLayout(edge_attr.layout)
        put = self._puts.get((edge_attr.edge_type, layout))
        if put is not None:
            return put[0], put[1]
        if edge_attr.edge_type in self._given:
            row, col, _ = self._layout(edge_attr.edge_type, layout)
            return row, col
        return None  # PyG's get_edge_index raises KeyError

    def _edge_to_layout(self, attr: EdgeAttr, layout: EdgeLayout, store: bool = False):
        # PyG's base class converts from the stored layout and knows no edge ids; every layout is
        # answered here, with the edge id of each entry as ``perm``.
        if attr.edge_type not in self._edge_types():
            raise KeyError(f"'edge_index' for '{attr}' not found")
        layout = EdgeLayout(layout)
        row, col, perm = self._layout(attr.edge_type, layout)
        if store and (attr.edge_type, layout) not in self._puts and attr.edge_type not in self._given:
            self._puts[(attr.edge_type, layout)] = (row, col, attr.size, perm is None)
        return row, col, perm

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        edge_type, layout, size = edge_attr.edge_type, EdgeLayout(edge_attr.layout), edge_attr.size
        _check_edge_type(edge_type)
        edge_types = [et for et in self._edge_types() if et != edge_type]
        if edge_types and (edge_type is None) != (None in edge_types):
            raise ValueError(
                "a GraphStore holds either one untyped edge set (edge_type=None) or typed edge types "
                f"(src, name, dst), not both; got edge_type={edge_type!r}"
            )
        first, second = _as_pair(edge_index, layout)
        size = _check_size(size)
        # Every check (and the relation build) runs before the store changes.
        relation = _as_relation(first, second, layout, size, typed=edge_type is not None)
        self._given.pop(edge_type, None)
        self._puts[(edge_type, layout)] = (first, second, size, bool(edge_attr.is_sorted))
        self._forget(edge_type)
        if _PREFERRED.index(layout) <= min(_PREFERRED.index(lo) for et, lo in self._puts if et == edge_type):
            self._relations[edge_type] = relation
        return True

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        edge_type, layout = edge_attr.edge_type, EdgeLayout(edge_attr.layout)
        if self._puts.pop((edge_type, layout), None) is not None:
            self._forget(edge_type)
            return True
        if edge_type in self._given and layout == EdgeLayout.CSC:
            del self._given[edge_type]
            self._forget(edge_type)
            return True
        return False

    # ------------------------------------------------------------------ layouts
    def _forget(self, edge_type) -> None:
        self._relations.pop(edge_type, None)
        for key in [key for key in self._layouts if key[0] == edge_type]:
            del self._layouts[key]
        self._hetero = None

    def _relation(self, edge_type) -> CSRGraph:
        """The CSRGraph of ``edge_type``: the one given, or built from its preferred put layout."""
        if edge_type in self._given:
            return self._given[edge_type]
        if edge_type not in self._relations:
            layout = min((lo for et, lo in self._puts if et == edge_type), key=_PREFERRED.index)
            first, second, size, _ = self._puts[(edge_type, layout)]
            self._relations[edge_type] = _as_relation(first, second, layout, size, typed=edge_type is not None)
        return self._relations[edge_type]

    def _sizeless(self, edge_type) -> bool:
        """Whether ``edge_type`` was put without a ``size`` (its node counts inferred from its edges)."""
        sizes = [size for (et, _), (_, _, size, _) in self._puts.items() if et == edge_type]
        return edge_type not in self._given and all(size is None for size in sizes)

    def _layout(self, edge_type, layout: EdgeLayout) -> tuple:
        """``(row, col, perm)`` of ``edge_type`` in ``layout`` (torch tensors; ``perm`` the edge id
        of every entry, ``None`` when the entries are in edge-id order already)."""
        key = (edge_type, layout)
        if key not in self._layouts:
            self._layouts[key] = _layout_of(self._relation(edge_type), layout)
        return self._layouts[key]


# The layout an edge type's edge ids count in, when several were put: PyG converts from COO first.
_PREFERRED = (EdgeLayout.COO, EdgeLayout.CSC, EdgeLayout.CSR)


def _check_edge_type(edge_type) -> None:
    ok = edge_type is None or isinstance(edge_type, str)
    ok = ok or (isinstance(edge_type, tuple) and len(edge_type) == 3 and all(isinstance(v, str) for v in edge_type))
    if not ok:
        raise ValueError(
            f"edge_type must be None (an untyped graph), a (src, name, dst) tuple of str or a str, got {edge_type!r}"
        )


def _check_size(size):
    if size is None:
        return None
    if not (isinstance(size, (tuple, list)) and len(size) == 2):
        raise ValueError(f"size must be (num_src_nodes, num_dst_nodes), got {size!r}")
    from ..validation import check_int

    return tuple(check_int(f"size[{i}]", value, minimum=0) for i, value in enumerate(size))


def _as_pair(edge_index, layout: EdgeLayout) -> tuple:
    """``edge_index`` as two 1-D int64 host tensors: a ``(row, col)`` pair, or for COO a stacked
    ``[2, E]`` tensor (PyG's stores take both)."""
    if isinstance(edge_index, (tuple, list)) and len(edge_index) == 2:
        parts = edge_index
    elif layout == EdgeLayout.COO and hasattr(edge_index, "shape") and len(edge_index.shape) == 2:
        if int(edge_index.shape[0]) != 2:
            raise ValueError(f"edge_index must have shape [2, num_edges], got {tuple(edge_index.shape)}")
        parts = (edge_index[0], edge_index[1])
    else:
        expected = "a (row, col) pair or a [2, num_edges] tensor" if layout == EdgeLayout.COO else "a (row, col) pair"
        raise TypeError(f"edge_index must be {expected} for layout {layout.value!r}, got {type(edge_index).__name__}")
    out = []
    for i, part in enumerate(parts):
        array = to_numpy(part) if not isinstance(part, np.ndarray) else part
        if array.dtype.kind not in "iu":
            raise TypeError(f"edge_index[{i}] must hold integers, got dtype {array.dtype}")
        if array.ndim != 1:
            raise ValueError(f"edge_index[{i}] must be 1-D, got shape {tuple(array.shape)}")
        beyond = uint64_beyond_int64(array)  # the int64 cast would wrap it negative
        if beyond is not None:
            raise ValueError(f"edge_index[{i}][{beyond[0]}] = {array[beyond]} does not fit in int64")
        out.append(torch.from_numpy(np.ascontiguousarray(array, dtype=np.int64)))
    if layout == EdgeLayout.COO and out[0].numel() != out[1].numel():
        raise ValueError(f"edge_index's rows differ in length ({out[0].numel()} != {out[1].numel()})")
    return tuple(out)


def csr_of_data(data) -> CSRGraph:
    """The CSRGraph of a ``Data``: its ``edge_index`` (none: a graph without edges) over ``num_nodes``."""
    edge_index = data.edge_index if "edge_index" in data else None
    num_nodes = data.num_nodes
    if edge_index is None:
        if num_nodes is None:
            raise ValueError("a Data without edge_index needs num_nodes")
        edge_index = np.empty((2, 0), np.int64)
    return CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes)


def _layout_of(graph: CSRGraph, layout: EdgeLayout) -> tuple:
    indptr, indices = to_numpy(graph.indptr), to_numpy(graph.indices)
    edge_ids = None if graph.edge_ids is None else to_numpy(graph.edge_ids)
    if layout == EdgeLayout.CSC:  # the stored arrays themselves
        return _tensor(indices), _tensor(indptr), _tensor(edge_ids)
    targets = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(indptr))
    ids = np.arange(len(indices), dtype=np.int64) if edge_ids is None else np.asarray(edge_ids, np.int64)
    if layout == EdgeLayout.COO:  # in edge-id order: the order the edges were put in
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        in_order = bool(np.array_equal(sorted_ids, np.arange(len(ids))))
        row, col = np.ascontiguousarray(indices[order], np.int64), targets[order]
        return torch.from_numpy(row), torch.from_numpy(col), None if in_order else torch.from_numpy(sorted_ids)
    order = np.lexsort((ids, indices))  # CSR: by source, then edge id (PyG's stable sort of the COO)
    rowptr = np.zeros(graph.num_src_nodes + 1, np.int64)
    np.cumsum(np.bincount(indices, minlength=graph.num_src_nodes), out=rowptr[1:])
    return torch.from_numpy(rowptr), torch.from_numpy(targets[order]), torch.from_numpy(ids[order])


def _tensor(array):
    if array is None:
        return None
    from .outputs import to_torch

    return to_torch(np.asarray(array, dtype=np.int64))


def _as_relation(first, second, layout: EdgeLayout, size, typed: bool) -> CSRGraph:
    """The CSRGraph (rows = targets) of a PyG edge index in ``layout``; ``size`` ``(num_src,
    num_dst)``. Its edge ids are the entries' positions in the layout as put."""
    first, second = first.numpy(), second.numpy()
    try:
        if layout == EdgeLayout.CSC:  # (row, colptr)
            num_src = None if size is None else size[0]
            if size is not None and size[1] != len(second) - 1:
                raise ValueError(f"colptr has {len(second)} entries but size[1] = {size[1]} (num_dst_nodes + 1 needed)")
            if num_src is None:
                num_src = int(first.max()) + 1 if first.size else 0
                num_src = num_src if typed else max(num_src, len(second) - 1)
            bipartite = typed or num_src != len(second) - 1
            return CSRGraph(second, first, num_src_nodes=num_src if bipartite else None)
        if layout == EdgeLayout.CSR:  # (rowptr, col): checked as an out-CSR, then as COO
            num_dst = size[1] if size is not None else (int(second.max()) + 1 if second.size else 0)
            if size is not None and size[0] != len(first) - 1:
                raise ValueError(f"rowptr has {len(first)} entries but size[0] = {size[0]} (num_src_nodes + 1 needed)")
            CSRGraph(first, second, num_src_nodes=num_dst)
            first = np.repeat(np.arange(len(first) - 1, dtype=np.int64), np.diff(first))
        if size is not None:
            num_src, num_dst = size
        elif typed:
            num_src, num_dst = (int(part.max()) + 1 if part.size else 0 for part in (first, second))
        else:
            num_src = num_dst = max(int(first.max(initial=-1)), int(second.max(initial=-1))) + 1
        bipartite = typed or num_src != num_dst
        return CSRGraph.from_edge_index(
            np.stack([first, second]), num_nodes=num_dst, num_src_nodes=num_src if bipartite else None
        )
    except ValueError as error:
        raise ValueError(f"edge_index ({layout.value}): {error}") from None


def _padded(relation: CSRGraph, num_src: int, num_dst: int) -> CSRGraph:
    """``relation`` over ``num_src`` source and ``num_dst`` target nodes (the nodes it lacks have no edges)."""
    if relation.num_nodes == num_dst and relation.num_src_nodes == num_src:
        return relation
    indptr = to_numpy(relation.indptr)
    indptr = np.concatenate([indptr, np.full(num_dst - relation.num_nodes, indptr[-1], indptr.dtype)])
    return CSRGraph(
        indptr, relation.indices, edge_ids=relation.edge_ids, weights=relation.weights, num_src_nodes=num_src
    )


def graph_from_pyg_store(graph_store):
    """The gglspeedup graph of any PyG ``GraphStore``: its :attr:`GraphStore.graph` for ours, else
    built from its ``csc()`` layout (edge ids from the layout's ``perm``; a node type counts the
    largest size any relation gives it, an untyped graph as many nodes as its sources and targets
    reach)."""
    if isinstance(graph_store, GraphStore):
        return graph_store.graph
    attrs = graph_store.get_all_edge_attrs()
    if not attrs:
        raise ValueError("the GraphStore holds no edges")
    sizes = {attr.edge_type: attr.size for attr in attrs}
    rows, colptrs, perms = graph_store.csc()
    if not isinstance(rows, dict):  # one untyped edge set
        rows, colptrs, perms = {None: rows}, {None: colptrs}, {None: perms}
    relations, num_nodes = {}, {}
    for edge_type, row in rows.items():
        colptr, perm, size = colptrs[edge_type], perms.get(edge_type), sizes.get(edge_type)
        num_src = int(size[0]) if size is not None else (int(row.max()) + 1 if row.numel() else 0)
        num_dst = len(colptr) - 1
        if edge_type is None:  # one node set: a source past the last target (size=None) is a node too
            num_src = num_dst = max(num_src, num_dst)
        relation = CSRGraph(
            colptr.to(torch.int64).cpu().numpy(),
            row.to(torch.int64).cpu().numpy(),
            edge_ids=None if perm is None else perm.to(torch.int64).cpu().numpy(),
            num_src_nodes=num_src,
        )
        relation = _padded(relation, num_src, num_dst)
        if edge_type is None:
            return relation
        relations[edge_type] = relation
        for node_type, count in ((edge_type[0], relation.num_src_nodes), (edge_type[-1], relation.num_nodes)):
            num_nodes[node_type] = max(num_nodes.get(node_type, 0), int(count))
    # A type's count is the largest any relation gives it (as our GraphStore's): the others gain edgeless nodes.
    relations = {et: _padded(r, num_nodes[et[0]], num_nodes[et[-1]]) for et, r in relations.items()}
    return HeteroGraph(relations, num_nodes)

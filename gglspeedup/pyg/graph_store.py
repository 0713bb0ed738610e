"""GraphStore: a CSRGraph or HeteroGraph behind PyG's ``torch_geometric.data.GraphStore``.

A :class:`~gglspeedup.CSRGraph` row ``v`` lists the sources of the edges into ``v``: that is PyG's
CSC layout of the edge type, ``colptr = indptr`` and ``row = indices``, handed to torch without a
copy. COO (``row = indices``, ``col`` the rows expanded) and CSR (sorted by source) are computed on
first request and kept. Every layout comes with its ``perm``: the edge id (a column of the
``edge_index`` the graph was built from, as ``CSRGraph.from_edge_index`` records it) of each of its
entries, so PyG's own sampler reading this store maps sampled edges to edge features correctly.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import GraphStore as PyGGraphStore
from torch_geometric.data.graph_store import EdgeAttr, EdgeLayout
from torch_geometric.index import ptr2index

from ..device import to_numpy
from ..graph import CSRGraph, as_csr_graph
from ..heterograph import HeteroGraph

__all__ = ["GraphStore", "graph_from_pyg_store"]


class GraphStore(PyGGraphStore):
    """PyG's ``GraphStore`` over a :class:`~gglspeedup.CSRGraph` (edge type ``None``) or the
    relations of a :class:`~gglspeedup.HeteroGraph`.

    Parameters
    ----------
    graph : CSRGraph, HeteroGraph, scipy sparse matrix or None
        The graph (copied to the host if it lives on a GPU). ``None`` starts empty: add edge types
        with PyG's ``put_edge_index(edge_index, edge_type=..., layout="coo" | "csc" | "csr",
        size=(num_src, num_dst))``.

    Every edge type is listed once by ``get_all_edge_attrs()``, in the CSC layout it is stored in
    (``size == (num_src_nodes, num_dst_nodes)``); ``get_edge_index(edge_type, layout)`` answers
    COO, CSC and CSR. :attr:`graph` is the gglspeedup graph a :class:`~gglspeedup.pyg.Sampler`
    samples from.

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
        self._relations: dict = {}
        self._num_nodes: dict = {}
        self._hetero = None
        self._layouts: dict = {}
        if isinstance(graph, HeteroGraph):
            graph = graph.to("cpu")
            self._hetero = graph
            self._relations = {edge_type: graph[edge_type] for edge_type in graph.edge_types}
            self._num_nodes = dict(graph.num_nodes)
        elif graph is not None:
            self._relations = {None: as_csr_graph(graph).to("cpu")}

    @classmethod
    def from_data(cls, data) -> GraphStore:
        """From a ``torch_geometric.data.Data`` (its ``edge_index`` and ``num_nodes``) or a
        ``HeteroData`` (:meth:`gglspeedup.HeteroGraph.from_pyg`)."""
        from torch_geometric.data import Data, HeteroData

        if isinstance(data, HeteroData):
            return cls(HeteroGraph.from_pyg(data))
        if isinstance(data, Data):
            return cls(CSRGraph.from_edge_index(data.edge_index, num_nodes=data.num_nodes))
        raise TypeError(f"data must be a torch_geometric Data or HeteroData, got {type(data).__name__}")

    # ------------------------------------------------------------------ gglspeedup's view
    @property
    def is_hetero(self) -> bool:
        return None not in self._relations

    @property
    def graph(self):
        """The stored graph: a :class:`~gglspeedup.CSRGraph`, or a :class:`~gglspeedup.HeteroGraph`
        for typed edge types (built once from the relations put so far)."""
        if not self._relations:
            raise ValueError("the GraphStore holds no edges yet; put_edge_index(...) first")
        if not self.is_hetero:
            return self._relations[None]
        if self._hetero is None:
            self._hetero = HeteroGraph(dict(self._relations), dict(self._num_nodes))
        return self._hetero

    @property
    def num_nodes(self):
        """Node count (an int), or node type -> count for typed graphs."""
        return dict(self._num_nodes) if self.is_hetero else self.graph.num_nodes

    def __repr__(self) -> str:
        return f"{type(self).__name__}(graph={self.graph!r})" if self._relations else f"{type(self).__name__}()"

    # ------------------------------------------------------------------ PyG's GraphStore API
    def get_all_edge_attrs(self) -> list:
        return [
            EdgeAttr(edge_type, EdgeLayout.CSC, is_sorted=True, size=(int(g.num_src_nodes), int(g.num_nodes)))
            for edge_type, g in self._relations.items()
        ]

    def _get_edge_index(self, edge_attr: EdgeAttr):
        if edge_attr.edge_type not in self._relations:
            return None
        row, col, _ = self._layout(edge_attr.edge_type, EdgeLayout(edge_attr.layout))
        return row, col

    def _edge_to_layout(self, attr: EdgeAttr, layout: EdgeLayout, store: bool = False):
        # PyG's base class converts from the stored layout and knows no edge ids; every layout is
        # answered here, with the edge id of each entry as ``perm``.
        if attr.edge_type not in self._relations:
            raise KeyError(f"'edge_index' for '{attr}' not found")
        return self._layout(attr.edge_type, EdgeLayout(layout))

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        edge_type = edge_attr.edge_type
        if self._relations and (edge_type is None) != (None in self._relations):
            raise ValueError(
                "a GraphStore holds either one untyped edge set (edge_type=None) or typed edge types "
                f"(src, name, dst), not both; got edge_type={edge_type!r}"
            )
        graph = _as_relation(edge_index, EdgeLayout(edge_attr.layout), edge_attr.size, typed=edge_type is not None)
        self._relations[edge_type] = graph
        if edge_type is not None:
            src, _, dst = edge_type
            for node_type, count in ((src, graph.num_src_nodes), (dst, graph.num_nodes)):
                self._num_nodes[node_type] = max(self._num_nodes.get(node_type, 0), int(count))
        self._forget()
        return True

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        if edge_attr.edge_type not in self._relations:
            return False
        del self._relations[edge_attr.edge_type]
        self._forget()
        return True

    # ------------------------------------------------------------------ layouts
    def _forget(self) -> None:
        self._layouts.clear()
        self._hetero = None

    def _layout(self, edge_type, layout: EdgeLayout) -> tuple:
        """``(row, col, perm)`` of ``edge_type`` in ``layout`` (torch tensors; ``perm`` the edge id
        of every entry, ``None`` when the entries are in edge-id order already)."""
        key = (edge_type, layout)
        if key not in self._layouts:
            self._layouts[key] = _layout_of(self._relations[edge_type], layout)
        return self._layouts[key]


def _layout_of(graph: CSRGraph, layout: EdgeLayout) -> tuple:
    indptr, indices = to_numpy(graph.indptr), to_numpy(graph.indices)
    edge_ids = None if graph.edge_ids is None else to_numpy(graph.edge_ids)
    if layout == EdgeLayout.CSC:  # the stored arrays themselves
        return _tensor(indices), _tensor(indptr), _tensor(edge_ids)
    targets = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(indptr))
    if layout == EdgeLayout.COO:
        return _tensor(indices), torch.from_numpy(targets), _tensor(edge_ids)
    order = np.argsort(indices, kind="stable")  # CSR: by source, targets ascending within a source
    rowptr = np.zeros(graph.num_src_nodes + 1, np.int64)
    np.cumsum(np.bincount(indices, minlength=graph.num_src_nodes), out=rowptr[1:])
    perm = order if edge_ids is None else edge_ids[order]
    return torch.from_numpy(rowptr), torch.from_numpy(targets[order]), torch.from_numpy(perm)


def _tensor(array):
    if array is None:
        return None
    from .outputs import to_torch

    return to_torch(np.asarray(array, dtype=np.int64))


def _as_relation(edge_index, layout: EdgeLayout, size, typed: bool) -> CSRGraph:
    """The CSRGraph (rows = targets) of a PyG edge index in ``layout``; ``size`` ``(num_src, num_dst)``."""
    if not (isinstance(edge_index, (tuple, list)) and len(edge_index) == 2):
        raise TypeError(f"edge_index must be a (row, col) pair of tensors for layout {layout.value!r}")
    first, second = (torch.as_tensor(part).to(torch.int64).cpu() for part in edge_index)
    if layout == EdgeLayout.CSC:  # (row, colptr)
        num_src = None if size is None else int(size[0])
        if num_src is None and typed:
            num_src = int(first.max()) + 1 if first.numel() else 0
        return CSRGraph(second.numpy(), first.numpy(), num_src_nodes=num_src)
    if layout == EdgeLayout.CSR:  # (rowptr, col) -> COO
        first = ptr2index(first, int(second.numel()))
    coo = torch.stack([first, second]).numpy()
    if size is not None:
        num_src, num_dst = int(size[0]), int(size[1])
    elif typed:
        num_src, num_dst = (int(part.max()) + 1 if part.numel() else 0 for part in (first, second))
    else:
        num_src = num_dst = int(coo.max()) + 1 if coo.size else 0
    bipartite = typed or num_src != num_dst
    return CSRGraph.from_edge_index(coo, num_nodes=num_dst, num_src_nodes=num_src if bipartite else None)


def graph_from_pyg_store(graph_store):
    """The gglspeedup graph of any PyG ``GraphStore``: its :attr:`GraphStore.graph` for ours, else
    built from its ``csc()`` layout (edge ids from the layout's ``perm``)."""
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
        relation = CSRGraph(
            colptr.to(torch.int64).cpu().numpy(),
            row.to(torch.int64).cpu().numpy(),
            edge_ids=None if perm is None else perm.to(torch.int64).cpu().numpy(),
            num_src_nodes=num_src if edge_type is not None else None,
        )
        if edge_type is None:
            return relation
        relations[edge_type] = relation
        for node_type, count in ((edge_type[0], relation.num_src_nodes), (edge_type[-1], relation.num_nodes)):
            num_nodes[node_type] = max(num_nodes.get(node_type, 0), int(count))
    return HeteroGraph(relations, num_nodes)

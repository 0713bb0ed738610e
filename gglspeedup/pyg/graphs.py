"""The gglspeedup graph a PyG sampler's ``data`` stands for: edges (none is fine), weights, direction.

PyG samplers take a ``Data`` / ``HeteroData`` or a ``(FeatureStore, GraphStore)`` pair, plus
``weight_attr`` (edge weights: an edge attribute of a ``Data`` / ``HeteroData``, whose edge types
without it get equal weights, drawn uniformly as pyg-lib draws them; as in PyG, not
for a store pair, whose graph carries weights itself when built from a weighted graph) and
``sample_direction`` (``"backward"``: sample along out-edges, over the transposed layout).
:func:`graph_of` turns all of that into one :class:`~gglspeedup.CSRGraph` or
:class:`~gglspeedup.HeteroGraph`, whose edge ids index the
caller's edge attributes in the order the edges were given. A store pair's node counts are PyG's
(``remote_backend_utils.num_nodes``): the ``size`` an edge attribute gives a node type, else the
rows of its first feature tensor too (featured nodes without edges are nodes of the graph).

A typed graph without any edge type (PyG accepts ``HeteroData(paper={"num_nodes": 100})``) gets
one empty placeholder relation, :data:`NO_EDGES`, which the outputs leave out; link batches of an
edge type the graph does not hold sample over the graph plus that edge type, empty.
"""

from __future__ import annotations

import numpy as np

from ..device import to_numpy
from ..graph import CSRGraph, as_csr_graph
from ..heterograph import HeteroGraph

__all__ = ["graph_of", "transpose", "NO_EDGES", "with_empty_relation", "reverse_name"]

NO_EDGES = "__gglspeedup_no_edges__"  # the name of an edgeless typed graph's placeholder relation
_REVERSED = "__gglspeedup_rev__"


def graph_of(data, weight_attr=None, backward: bool = False):
    """The gglspeedup graph (:class:`~gglspeedup.CSRGraph` or :class:`~gglspeedup.HeteroGraph`)
    of a sampler's ``data``: a ``(FeatureStore, GraphStore)`` pair, a ``GraphStore``, a ``Data`` /
    ``HeteroData``, a CSRGraph / HeteroGraph (or a scipy matrix). ``weight_attr`` names the edge
    weights; ``backward`` transposes every relation (see :func:`transpose`)."""
    from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData

    from .graph_store import csr_of_data, graph_from_pyg_store

    # Data and HeteroData are GraphStores too: their branches come first.
    if isinstance(data, HeteroData):
        graph = _hetero_of_data(data, weight_attr)
    elif isinstance(data, Data):
        graph = csr_of_data(data)
        if weight_attr is not None:
            graph = _with_weights(graph, _edge_attr(data, weight_attr, "data"))
    elif (isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[1], GraphStore)) or isinstance(
        data, GraphStore
    ):
        if isinstance(data, (tuple, list)) and not isinstance(data[0], FeatureStore):
            raise TypeError(f"data must be a (FeatureStore, GraphStore) pair, got a {type(data[0]).__name__} first")
        if weight_attr is not None:  # as PyG's own NeighborSampler
            raise NotImplementedError(
                "weight_attr is not supported for (FeatureStore, GraphStore) inputs (PyG's remote contract has no "
                "edge weights): build the GraphStore from a weighted CSRGraph / HeteroGraph and pass weighted=True"
            )
        graph = graph_from_pyg_store(data[1] if isinstance(data, (tuple, list)) else data)
        if isinstance(data, (tuple, list)):
            graph = _with_feature_rows(graph, data[0], data[1])
    elif isinstance(data, HeteroGraph):
        graph = data
    else:
        try:
            graph = as_csr_graph(data)
        except TypeError:
            raise TypeError(
                "data must be a (FeatureStore, GraphStore) pair, a GraphStore, a Data / HeteroData, a CSRGraph / "
                f"HeteroGraph or a gglspeedup sampler, got {type(data).__name__}"
            ) from None
    if backward:
        graph = _transpose_graph(graph)
    return graph


def _with_feature_rows(graph, feature_store, graph_store):
    """``graph`` over PyG's node counts of a store pair (``remote_backend_utils.num_nodes``): a node
    type (untyped: the graph) that no edge attribute gives a ``size`` has as many nodes as the rows
    of its first feature tensor, so featured nodes past the last one the edges reach are nodes too,
    and a typed graph gets the featured node types without edges; never fewer nodes than the edges
    reach (PyG would take the rows then, and sample ids with no features)."""
    from .graph_store import _padded

    sized = set()
    for attr in graph_store.get_all_edge_attrs():
        if attr.size is not None:  # PyG's first answer: a size wins over the features
            sized.update([None] if attr.edge_type is None else [attr.edge_type[0], attr.edge_type[-1]])
    rows: dict = {}
    for attr in feature_store.get_all_tensor_attrs():
        group = attr.group_name
        if group in rows or group in sized or not (group is None or isinstance(group, str)):
            continue
        size = feature_store.get_tensor_size(attr)
        rows[group] = None if not size else int(size[0])  # PyG reads the group's first tensor only
    rows = {group: count for group, count in rows.items() if count is not None}
    if isinstance(graph, CSRGraph):
        count = rows.get(None, 0)
        if count <= graph.num_nodes or graph.num_src_nodes != graph.num_nodes:
            return graph
        return _padded(graph, count, count)
    counts = dict(graph.num_nodes)
    for group, count in rows.items():
        if isinstance(group, str):
            counts[group] = max(counts.get(group, 0), count)
    if counts == dict(graph.num_nodes):
        return graph
    relations = {et: _padded(graph[et], counts[et[0]], counts[et[2]]) for et in graph.edge_types}
    return HeteroGraph(relations, counts)


def _weighted_edge_types(data, weight_attr) -> list:
    """The edge types of ``data`` holding ``weight_attr`` (PyG's ``data.collect(weight_attr)``); at
    least one must, as in PyG."""
    if weight_attr is None:
        return []
    weighted = [edge_type for edge_type in data.edge_types if weight_attr in data[edge_type]]
    if data.edge_types and not weighted:
        raise ValueError(f"weight_attr={weight_attr!r}: no edge type of data has an edge attribute {weight_attr!r}")
    return weighted


def _edge_attr(store, name: str, what: str):
    if name not in store:
        raise ValueError(f"weight_attr={name!r}: {what} has no edge attribute {name!r}")
    return to_numpy(store[name])


def _with_weights(graph: CSRGraph, weights) -> CSRGraph:
    """``graph`` with ``weights`` (one per edge, in edge-id order) placed at its CSR positions."""
    weights = np.asarray(weights)
    if weights.ndim != 1 or len(weights) != graph.num_edges:
        raise ValueError(f"edge weights must have one entry per edge ({graph.num_edges}), got shape {weights.shape}")
    ids = np.arange(graph.num_edges) if graph.edge_ids is None else to_numpy(graph.edge_ids)
    return CSRGraph(
        graph.indptr,
        graph.indices,
        edge_ids=graph.edge_ids,
        weights=weights[ids],
        num_src_nodes=graph.num_src_nodes if graph.num_src_nodes != graph.num_nodes else None,
    )


def _hetero_of_data(data, weight_attr) -> HeteroGraph:
    num_nodes = {}
    for node_type in data.node_types:
        count = data[node_type].num_nodes
        if count is None:  # int(None) was a bare TypeError (as HeteroGraph.from_pyg says it)
            raise ValueError(f"data[{node_type!r}] has no num_nodes (set it, or give the type a node tensor)")
        num_nodes[node_type] = int(count)
    relations = {}
    weighted = _weighted_edge_types(data, weight_attr)
    for edge_type in data.edge_types:
        src, _, dst = edge_type
        for node_type in (src, dst):
            if node_type not in num_nodes:  # was a bare KeyError; data[node_type] would create the store
                raise ValueError(
                    f"edge type {tuple(edge_type)!r} names node type {node_type!r}, which data has no node store "
                    f"for: set data[{node_type!r}].num_nodes (or give the type a node tensor); sampling needs "
                    "every node type's count (PyG's own sampler leaves it out of its node types)"
                )
        store = data[edge_type]
        weights = None
        if edge_type in weighted:
            weights = _edge_attr(store, weight_attr, f"edge type {edge_type!r}")
        elif weight_attr is not None:  # pyg-lib draws an edge type without the weights uniformly: equal ones
            weights = np.ones(store.num_edges)
        relations[tuple(edge_type)] = CSRGraph.from_edge_index(
            store.edge_index, num_nodes=num_nodes[dst], num_src_nodes=num_nodes[src], weights=weights
        )
    if not relations:
        if not num_nodes:
            raise ValueError("data must have at least one node type")
        first = next(iter(num_nodes))
        relations[(first, NO_EDGES, first)] = CSRGraph(np.zeros(num_nodes[first] + 1, np.int64), np.empty(0, np.int64))
    return HeteroGraph(relations, num_nodes)


def transpose(graph: CSRGraph) -> CSRGraph:
    """The transposed CSR (row ``u`` lists the targets of ``u``'s edges), edge ids and weights
    carried, rows in edge-id order within a source."""
    indices, indptr = to_numpy(graph.indices), to_numpy(graph.indptr)
    targets = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(indptr))
    ids = np.arange(len(indices), dtype=np.int64) if graph.edge_ids is None else to_numpy(graph.edge_ids)
    order = np.lexsort((ids, indices))
    rowptr = np.zeros(graph.num_src_nodes + 1, np.int64)
    np.cumsum(np.bincount(indices, minlength=graph.num_src_nodes), out=rowptr[1:])
    weights = None if graph.weights is None else to_numpy(graph.weights)[order]
    bipartite = graph.num_src_nodes != graph.num_nodes
    return CSRGraph(
        rowptr,
        targets[order],
        edge_ids=ids[order],
        weights=weights,
        num_src_nodes=graph.num_nodes if bipartite else None,
    )


def reverse_name(edge_type) -> tuple:
    """The key a relation ``(s, name, d)`` has in the transposed typed graph: ``(d, name, s)``,
    marked (so it cannot collide with a relation of that name from ``d`` to ``s``)."""
    src, name, dst = edge_type
    return (dst, _REVERSED + name, src)


def forward_name(edge_type) -> tuple:
    """The inverse of :func:`reverse_name`."""
    src, name, dst = edge_type
    return (dst, name[len(_REVERSED) :], src) if name.startswith(_REVERSED) else tuple(edge_type)


def _transpose_graph(graph):
    if isinstance(graph, CSRGraph):
        return transpose(graph)
    relations = {reverse_name(et): transpose(graph[et]) for et in graph.edge_types}
    return HeteroGraph(relations, dict(graph.num_nodes))


def with_empty_relation(graph: HeteroGraph, edge_type) -> HeteroGraph:
    """``graph`` plus ``edge_type`` without edges (for link batches of an edge type it lacks)."""
    src, _, dst = edge_type
    for node_type in (src, dst):
        if node_type not in graph.num_nodes:
            raise ValueError(
                f"edge type {edge_type!r}: node type {node_type!r} is not in the graph's {list(graph.num_nodes)}"
            )
    relations = {et: graph[et] for et in graph.edge_types if et[1] != NO_EDGES}
    relations[tuple(edge_type)] = CSRGraph(
        np.zeros(graph.num_nodes[dst] + 1, np.int64), np.empty(0, np.int64), num_src_nodes=graph.num_nodes[src]
    )
    if graph.weighted:
        relations[tuple(edge_type)].weights = np.empty(0, np.float64)
    return HeteroGraph(relations, dict(graph.num_nodes))

"""PyG's ``time_attr``: which times a sampler's ``data`` holds, as gglspeedup's samplers take them.

PyG's ``NeighborSampler`` reads ``data[time_attr]`` as node times when it is a node attribute and
as edge times when it is an edge attribute (a ``HeteroData``: per node type / per edge type, never
both); from a ``(FeatureStore, GraphStore)`` pair it reads the feature store's tensors named
``time_attr``: untyped, node times when the name is ``"time"`` and edge times otherwise (PyG's
rule); typed, node times under node-type groups and edge times under edge-type groups. Edge times
follow the edges in the order they were given, which are the edge ids of the graph gglspeedup
builds (:func:`.graphs.graph_of`), so no permutation is needed here; gglspeedup sorts rows by time
itself, so PyG's ``is_sorted`` requirement does not apply.
"""

from __future__ import annotations

import copy

__all__ = ["times_of"]


def times_of(data, time_attr: str, typed: bool) -> tuple:
    """``(node_time, edge_time)`` of ``data`` under ``time_attr`` (one of them ``None``): arrays for
    untyped data, dicts per type for typed data (``typed``: the graph built from ``data`` is a
    HeteroGraph). ``ValueError`` (PyG's messages) when ``data`` holds no such attribute or holds
    it at both levels."""
    from torch_geometric.data import Data, FeatureStore, HeteroData

    if isinstance(data, HeteroData):
        nodes = {t: data[t][time_attr] for t in data.node_types if time_attr in data[t]}
        edges = {tuple(et): data[et][time_attr] for et in data.edge_types if time_attr in data[et]}
        if nodes and edges:
            raise ValueError(f"The time attribute '{time_attr}' holds both node-level and edge-level information")
        if not nodes and not edges:
            raise ValueError(f"The time attribute '{time_attr}' is neither a node-level or edge-level attribute")
        return (nodes, None) if nodes else (None, edges)
    if isinstance(data, Data):
        if time_attr in data and data.is_node_attr(time_attr):
            return data[time_attr], None
        if time_attr in data and data.is_edge_attr(time_attr):
            return None, data[time_attr]
        raise ValueError(f"The time attribute '{time_attr}' is neither a node-level or edge-level attribute")
    if isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[0], FeatureStore):
        return _store_times(data[0], time_attr, typed)
    raise ValueError(
        f"time_attr={time_attr!r} needs data with attributes (a Data, HeteroData or (FeatureStore, GraphStore)); "
        "pass node_time= or edge_time= with a gglspeedup graph"
    )


def _store_times(feature_store, time_attr: str, typed: bool) -> tuple:
    attrs = [copy.copy(a) for a in feature_store.get_all_tensor_attrs() if a.attr_name == time_attr]
    if not attrs or (not typed and len(attrs) != 1):
        raise ValueError("Temporal sampling specified but did not find any temporal data")
    for attr in attrs:
        attr.index = None  # the whole tensor
    tensors = feature_store.multi_get_tensor(attrs)
    if not typed:
        return (tensors[0], None) if time_attr == "time" else (None, tensors[0])
    groups = [a.group_name for a in attrs]
    if all(isinstance(g, str) for g in groups):
        return dict(zip(groups, tensors)), None
    if all(isinstance(g, tuple) for g in groups):
        return None, {tuple(g): t for g, t in zip(groups, tensors)}
    raise ValueError(f"Found time attribute '{time_attr}' for both node-level and edge-level types")

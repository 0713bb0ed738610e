"""NeighborLoader / LinkNeighborLoader: PyG's ``NodeLoader`` / ``LinkLoader`` on gglspeedup's Sampler.

They take PyG's usual arguments (``num_neighbors``, ``input_nodes``, ``edge_label_index``,
``edge_label``, ``neg_sampling``, ``batch_size``, ``shuffle``, ``num_workers``, ...) and yield what
PyG's own loaders yield: ``Data`` / ``HeteroData`` batches with ``x``, ``y``, ``edge_index``,
``n_id``, ``e_id``, ``batch_size``, ``num_sampled_nodes`` / ``num_sampled_edges`` (and
``edge_label_index`` / ``edge_label`` or ``src_index`` / ``dst_pos_index`` / ``dst_neg_index`` for
link batches). ``data`` is a ``Data`` / ``HeteroData`` (features indexed by PyG's ``filter_data``,
edge attributes included) or a ``(FeatureStore, GraphStore)`` pair (features from the feature
store: gglspeedup's device cache with :class:`~gglspeedup.pyg.FeatureStore`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data, GraphStore
from torch_geometric.loader import LinkLoader, NodeLoader

from .sampler import Sampler

__all__ = ["NeighborLoader", "LinkNeighborLoader"]

_SAMPLER_OPTIONS = ("seed", "device", "placement", "weighted", "exclude", "reverse_edge_types", "strict_negatives")


class NeighborLoader(NodeLoader):
    """PyG's ``NeighborLoader`` with gglspeedup's :class:`~gglspeedup.pyg.Sampler` underneath.

    Parameters
    ----------
    data : Data, HeteroData or (FeatureStore, GraphStore)
    num_neighbors : list of int or dict edge type -> list of int
        Neighbours per hop, seed hop first (``-1``: all).
    input_nodes : tensor, str or (node type, tensor), optional
        Seeds (ids or a bool mask); ``None``: every node (untyped graphs).
    replace : bool
    neighbor_sampler : Sampler, optional
        A ready sampler (the sampling options below are then ignored).
    seed, device, placement, weighted
        Sampling options of :class:`~gglspeedup.pyg.Sampler` (keyword only).
    **kwargs
        PyG's ``NodeLoader`` / ``torch.utils.data.DataLoader`` arguments: ``batch_size``,
        ``shuffle``, ``drop_last``, ``num_workers``, ``transform``, ``filter_per_worker``, ...

    ``subgraph_type`` (``"directional"``, ``"bidirectional"``, ``"induced"``; PyG's
    ``directed=False`` is ``"induced"``), ``weight_attr`` (weighted sampling), ``disjoint`` and
    temporal sampling (``time_attr``, ``input_time``, ``temporal_strategy``) work as in PyG.
    """

    def __init__(
        self,
        data,
        num_neighbors,
        input_nodes=None,
        input_time=None,
        replace=False,
        *,
        subgraph_type="directional",
        disjoint=False,
        temporal_strategy="uniform",
        time_attr=None,
        weight_attr=None,
        neighbor_sampler=None,
        directed=True,
        **kwargs,
    ):
        _check_time(time_attr, input_time, "input_time")
        options = {name: kwargs.pop(name) for name in _SAMPLER_OPTIONS if name in kwargs}
        options.update(disjoint=disjoint, time_attr=time_attr, temporal_strategy=temporal_strategy)
        if neighbor_sampler is None:
            neighbor_sampler = _make_sampler(
                data, num_neighbors, replace, weight_attr, _subgraph(subgraph_type, directed), options
            )
        input_nodes = _default_input_nodes(data, input_nodes, neighbor_sampler)
        super().__init__(
            data=data, node_sampler=neighbor_sampler, input_nodes=input_nodes, input_time=input_time, **kwargs
        )
        _check_time_count(self.input_data.time, self.input_data.node.numel(), "input_time", "seed")

    def __iter__(self):
        _start_epoch(self.node_sampler, len(self))
        return super().__iter__()


class LinkNeighborLoader(LinkLoader):
    """PyG's ``LinkNeighborLoader`` with gglspeedup's :class:`~gglspeedup.pyg.Sampler` underneath.

    Parameters
    ----------
    data : Data, HeteroData or (FeatureStore, GraphStore)
    num_neighbors : list of int or dict edge type -> list of int
    edge_label_index : tensor (2, B), edge type, or (edge type, tensor), optional
        The pairs (``None``: every edge). For an untyped ``(FeatureStore, GraphStore)`` pair a
        plain (2, B) tensor is fine (PyG's own loader wants ``(None, tensor)`` there).
    edge_label : tensor (B,), optional
    replace : bool
    neg_sampling : NegativeSampling, str or None
        ``"binary"`` or ``"triplet"`` (or ``NegativeSampling(mode, amount)``), as PyG.
    neg_sampling_ratio : float, optional
        PyG's deprecated spelling of binary negatives.
    seed, device, placement, weighted, exclude, reverse_edge_types, strict_negatives
        Sampling options of :class:`~gglspeedup.pyg.Sampler` (keyword only); ``exclude="self"`` /
        ``"reverse"`` keep the batch's own edges out of its neighbourhoods (PyG keeps them).
    **kwargs
        PyG's ``LinkLoader`` / ``DataLoader`` arguments (``batch_size``, ``shuffle``, ...).
    """

    def __init__(
        self,
        data,
        num_neighbors,
        edge_label_index=None,
        edge_label=None,
        edge_label_time=None,
        replace=False,
        *,
        neg_sampling=None,
        neg_sampling_ratio=None,
        subgraph_type="directional",
        disjoint=False,
        temporal_strategy="uniform",
        time_attr=None,
        weight_attr=None,
        neighbor_sampler=None,
        directed=True,
        **kwargs,
    ):
        _check_time(time_attr, edge_label_time, "edge_label_time")
        options = {name: kwargs.pop(name) for name in _SAMPLER_OPTIONS if name in kwargs}
        options.update(disjoint=disjoint, time_attr=time_attr, temporal_strategy=temporal_strategy)
        if neighbor_sampler is None:
            neighbor_sampler = _make_sampler(
                data, num_neighbors, replace, weight_attr, _subgraph(subgraph_type, directed), options
            )
        edge_label_index, edge_label = _check_label_index(edge_label_index, edge_label, neighbor_sampler.is_hetero)
        if _is_remote(data) and not neighbor_sampler.is_hetero:
            if edge_label_index is None:
                edge_label_index = _all_edges(data[1], neighbor_sampler)
            if isinstance(edge_label_index, torch.Tensor):
                edge_label_index = (None, edge_label_index)
        if edge_label_index is None and isinstance(data, Data) and data.edge_index is None:  # no edges: no pairs
            edge_label_index = torch.empty(2, 0, dtype=torch.long)  # (PyG's loader read None[0])
        super().__init__(
            data=data,
            link_sampler=neighbor_sampler,
            edge_label_index=edge_label_index,
            edge_label=edge_label,
            edge_label_time=edge_label_time,
            neg_sampling=neg_sampling,
            neg_sampling_ratio=neg_sampling_ratio,
            **kwargs,
        )
        _check_time_count(self.input_data.time, self.input_data.row.numel(), "edge_label_time", "pair")

    def __iter__(self):
        _start_epoch(self.link_sampler, len(self))
        return super().__iter__()


def _start_epoch(sampler, num_batches: int) -> None:
    if isinstance(sampler, Sampler):  # this epoch's batch keys, before any worker forks
        sampler.start_epoch(num_batches)


def _is_remote(data) -> bool:
    return isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[1], GraphStore)


def _make_sampler(data, num_neighbors, replace, weight_attr, subgraph_type, options) -> Sampler:
    from .neighbor_sampler import NeighborSampler

    return NeighborSampler(
        data, num_neighbors, subgraph_type=subgraph_type, replace=replace, weight_attr=weight_attr, **options
    )


def _subgraph(subgraph_type, directed):
    return "induced" if not directed else subgraph_type


def _check_label_index(edge_label_index, edge_label, hetero: bool):
    """Refuse, by name, pairs that are not (2, B) and labels that are not one per pair."""
    if hetero and not _typed_pairs(edge_label_index):  # PyG's bare asserts
        raise ValueError(
            "a typed graph needs typed pairs: edge_label_index=(edge_type, pairs), (edge_type, None) or an "
            f"edge type (src, name, dst), got {_described(edge_label_index)}"
        )
    pairs = edge_label_index
    if isinstance(pairs, (tuple, list)) and len(pairs) == 2 and not isinstance(pairs[0], (str, int)):
        pairs = pairs[1]  # (edge type or None, pairs)
    elif isinstance(pairs, (tuple, list)) and len(pairs) == 2 and isinstance(pairs[1], torch.Tensor):
        pairs = pairs[1]
    edge_type = isinstance(pairs, str) or (
        isinstance(pairs, (tuple, list)) and len(pairs) == 3 and all(isinstance(part, str) for part in pairs)
    )
    if pairs is not None and not isinstance(pairs, torch.Tensor) and not (hetero and edge_type):  # PyG's bare assert
        raise TypeError(
            "edge_label_index must be a (2, num_pairs) tensor, an edge type or (edge type, tensor), "
            f"got {type(pairs).__name__}"
        )
    if isinstance(pairs, torch.Tensor):
        if pairs.dim() != 2 or pairs.size(0) != 2:
            raise ValueError(f"edge_label_index must have shape (2, num_pairs), got {tuple(pairs.shape)}")
        if edge_label is not None:
            edge_label = torch.as_tensor(edge_label)
            if edge_label.dim() < 1 or edge_label.size(0) != pairs.size(1):
                raise ValueError(
                    f"edge_label must have one entry per pair ({pairs.size(1)}), got shape {tuple(edge_label.shape)}"
                )
    return edge_label_index, edge_label


def _typed_pairs(edge_label_index) -> bool:
    """An edge type ``(src, name, dst)`` or ``(edge type, pairs or None)``: the forms PyG's loaders take on
    typed data."""
    if not isinstance(edge_label_index, (tuple, list)):
        return False
    if len(edge_label_index) == 3 and all(isinstance(part, str) for part in edge_label_index):
        return True
    edge_type = edge_label_index[0] if len(edge_label_index) == 2 else None
    return isinstance(edge_type, (tuple, list)) and len(edge_type) == 3 and all(isinstance(p, str) for p in edge_type)


def _described(value) -> str:
    if value is None or isinstance(value, str):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} ({', '.join(_described(part) for part in value)})"
    return type(value).__name__


def _default_input_nodes(data, input_nodes, sampler: Sampler):
    """PyG's remote path takes no ``None`` seeds: every node (of the given type) instead."""
    typed_pair = isinstance(input_nodes, (tuple, list)) and len(input_nodes) == 2 and isinstance(input_nodes[0], str)
    if (typed_pair or isinstance(input_nodes, str)) and not sampler.is_hetero:
        raise ValueError(
            f"input_nodes names node type {input_nodes[0] if typed_pair else input_nodes!r} but the graph is untyped: "
            "pass the seed ids (a tensor) or None"
        )
    if getattr(sampler, "is_hetero", False) and not (typed_pair or isinstance(input_nodes, str)):  # PyG's bare assert
        raise ValueError(
            "a typed graph needs typed seeds: input_nodes=(node_type, ids), (node_type, None) or a node type, "
            f"got {'None' if input_nodes is None else type(input_nodes).__name__}"
        )
    if typed_pair:
        node_type = input_nodes[0]
        input_nodes = (node_type, _seed_tensor(input_nodes[1], sampler.num_nodes.get(node_type)))
    elif not isinstance(input_nodes, str):
        input_nodes = _seed_tensor(input_nodes, sampler.num_nodes)
    if not _is_remote(data):
        return input_nodes
    if input_nodes is None and not sampler.is_hetero:
        return torch.arange(sampler.num_nodes)
    if typed_pair and input_nodes[1] is None:
        return (input_nodes[0], torch.arange(sampler.num_nodes[input_nodes[0]]))
    return input_nodes


def _seed_tensor(ids, num_nodes):
    """Seed ids or a bool mask as the 1-D tensor PyG's loaders index: a NumPy array or a list is
    converted here (PyG reads a NumPy bool mask as the ids 0 and 1, and its remote path takes tensors
    only); a mask must have one entry per node (``num_nodes``; ``None``: unknown)."""
    if ids is None:
        return None
    if not isinstance(ids, torch.Tensor):
        array = np.asarray(ids)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"input_nodes must hold integer node ids or be a bool mask, got dtype {array.dtype}")
        ids = torch.from_numpy(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("=")))
    if ids.dim() != 1:
        raise ValueError(f"input_nodes must be 1-D (node ids or a bool mask), got shape {tuple(ids.shape)}")
    if ids.dtype == torch.bool and num_nodes is not None and ids.numel() != int(num_nodes):
        raise ValueError(f"input_nodes as a bool mask must have one entry per node ({num_nodes}), got {ids.numel()}")
    return ids


def _all_edges(graph_store, sampler: Sampler) -> torch.Tensor:
    """Every edge as a (2, E) COO in edge-id order: the order the edges (and so an ``edge_label``
    given for them) were put in, as PyG's own stores return it."""
    from torch_geometric.data.graph_store import EdgeLayout

    from .graph_store import _layout_of

    if isinstance(graph_store, GraphStore) and graph_store.get_all_edge_attrs():
        row, col, _ = graph_store.coo()
        if not isinstance(row, dict):
            return torch.stack([row, col])
    row, col, _ = _layout_of(sampler.sampler.graph.to("cpu"), EdgeLayout.COO)  # ascending edge ids
    return torch.stack([row, col])


def _check_time_count(time, count: int, name: str, what: str) -> None:
    """One time per seed (pair), checked as the loader is built: PyG's loader indexes the times by
    batch and would fail mid-epoch with an IndexError (or read the wrong times if too many)."""
    if time is not None and tuple(time.shape) != (count,):
        raise ValueError(f"{name} must hold one time per {what} ({count}), got shape {tuple(time.shape)}")


def _check_time(time_attr, time, name: str) -> None:
    if time is not None and time_attr is None:  # PyG's check
        raise ValueError(
            f"Received conflicting '{name}' and 'time_attr' arguments: '{name}' is set while 'time_attr' is not set."
        )

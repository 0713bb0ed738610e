"""NeighborSampler: gglspeedup's sampler taking PyG's ``NeighborSampler`` argument list.

A drop-in for ``torch_geometric.sampler.NeighborSampler``: hand it to PyG's own loaders
(``NeighborLoader(..., neighbor_sampler=...)``, ``LinkNeighborLoader``, ``NodeLoader``,
``LinkLoader``), disjoint and temporal sampling included (``disjoint``, ``time_attr``,
``temporal_strategy``: :mod:`gglspeedup.pyg.times` reads the times as PyG does). Options it does
not implement raise ``NotImplementedError`` naming them.
"""

from __future__ import annotations

import warnings

import torch
from torch_geometric.sampler import NodeSamplerInput
from torch_geometric.sampler.base import NumNeighbors

from ..validation import check_bool
from .graphs import forward_name
from .sampler import Sampler, _check_induced, _fanouts

__all__ = ["NeighborSampler"]


class NeighborSampler(Sampler):
    """PyG's ``NeighborSampler`` signature over :class:`gglspeedup.pyg.Sampler`.

    Parameters
    ----------
    data : Data, HeteroData or (FeatureStore, GraphStore)
    num_neighbors : list of int, dict edge type -> list, or ``NumNeighbors``
    subgraph_type : {"directional", "bidirectional", "induced"}
    replace : bool
    disjoint : bool
        Every seed its own subgraph (``SamplerOutput.batch`` filled); implied by ``time_attr``.
    temporal_strategy : {"uniform", "last"}
        With ``time_attr``: draw uniformly among the eligible neighbours, or take the latest.
    time_attr : str, optional
        Node or edge times (see :mod:`gglspeedup.pyg.times`): each seed's subgraph holds only
        neighbours (edges) at or before its time (``input_time`` / ``edge_label_time``, else the
        seed's own node time). Not with ``sample_direction="backward"`` (as PyG).
    weight_attr : str, optional
        Edge weights: an edge attribute of the ``Data`` / ``HeteroData`` (edge types without it
        drawn uniformly; a store pair: ``NotImplementedError``, as PyG).
    is_sorted, share_memory
        Accepted and ignored (gglspeedup builds its own CSR once; its samplers pickle and fork).
    directed : bool
        PyG's deprecated spelling: ``False`` means ``subgraph_type="induced"``.
    sample_direction : {"forward", "backward"}
    **options
        gglspeedup's :class:`~gglspeedup.pyg.Sampler` options (``seed``, ``device``,
        ``placement``, ``exclude``, ``reverse_edge_types``, ``strict_negatives``).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> data = Data(edge_index=torch.tensor([[1, 2, 3], [0, 0, 1]]), num_nodes=4)
    >>> sampler = NeighborSampler(data, num_neighbors=[-1, -1])
    >>> from torch_geometric.sampler import NodeSamplerInput
    >>> out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([0])))
    >>> out.node.tolist(), out.num_sampled_nodes, out.num_sampled_edges
    ([0, 1, 2, 3], [1, 2, 1], [2, 1])
    """

    def __init__(
        self,
        data,
        num_neighbors,
        subgraph_type="directional",
        replace=False,
        disjoint=False,
        temporal_strategy="uniform",
        time_attr=None,
        weight_attr=None,
        is_sorted=False,
        share_memory=False,
        directed=True,
        sample_direction="forward",
        **options,
    ):
        if not directed:
            warnings.warn(
                "directed=False is deprecated in PyG; use subgraph_type='induced'", DeprecationWarning, stacklevel=2
            )
            subgraph_type = "induced"
        if time_attr is not None and sample_direction == "backward":
            raise NotImplementedError("Temporal Sampling not yet supported for backward sampling")
        unknown = set(options) - _OPTIONS
        if unknown:
            raise TypeError(f"NeighborSampler got unexpected arguments {sorted(unknown)}")
        super().__init__(
            data,
            num_neighbors,
            replace=replace,
            subgraph_type=subgraph_type,
            sample_direction=sample_direction,
            weight_attr=weight_attr,
            disjoint=disjoint,
            time_attr=time_attr,
            temporal_strategy=temporal_strategy,
            **options,
        )
        self.temporal_strategy = temporal_strategy
        self.time_attr = time_attr
        self.weight_attr = weight_attr
        self.sample_direction = sample_direction

    # PyG's NeighborSampler attributes that PyG's own code reads (BidirectionalNeighborSampler
    # sets num_neighbors and disjoint, and calls _sample).
    @property
    def is_temporal(self) -> bool:
        return self.sampler.temporal

    @property
    def disjoint(self) -> bool:
        return self.sampler.disjoint

    @disjoint.setter
    def disjoint(self, disjoint) -> None:
        disjoint = check_bool("disjoint", disjoint) or self.sampler.temporal
        _check_induced(self.subgraph_type, disjoint)
        self.sampler.disjoint = disjoint

    @property
    def num_neighbors(self) -> NumNeighbors:
        """The fanouts, as PyG's ``NumNeighbors``; setting it resamples with new fanouts."""
        fanouts = self.sampler.fanouts
        if isinstance(fanouts, dict):  # keyed as the user names the relations (a backward sampler renames them)
            return NumNeighbors({forward_name(edge_type): list(v) for edge_type, v in fanouts.items()})
        return NumNeighbors(list(fanouts))

    @num_neighbors.setter
    def num_neighbors(self, num_neighbors) -> None:
        self.sampler = self.sampler.with_fanouts(_fanouts(num_neighbors, self.sampler.graph))

    def _sample(self, seed, seed_time=None, **kwargs):
        """PyG's internal per-seed call: the batch of ``seed`` (a tensor, or node type -> tensor)
        at ``seed_time`` (likewise), without metadata."""
        if isinstance(seed, dict):
            (node_type, ids), *rest = seed.items()
            if rest:
                raise NotImplementedError("gglspeedup.pyg.NeighborSampler._sample takes seeds of one node type")
            time = None if seed_time is None else seed_time[node_type]
            out = self.sample_from_nodes(NodeSamplerInput(None, _ids(ids), time=time, input_type=node_type))
        else:
            out = self.sample_from_nodes(NodeSamplerInput(None, _ids(seed), time=seed_time))
        out.metadata = None
        return out


def _ids(seed):
    seed = torch.as_tensor(seed)
    return seed.long() if seed.numel() == 0 else seed  # PyG builds an empty next frontier as float


_OPTIONS = {
    "seed",
    "device",
    "placement",
    "exclude",
    "reverse_edge_types",
    "strict_negatives",
    "weighted",
    "expand",
    "node_time",
    "edge_time",
}

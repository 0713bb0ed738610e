"""NeighborSampler: gglspeedup's sampler taking PyG's ``NeighborSampler`` argument list.

A drop-in for ``torch_geometric.sampler.NeighborSampler``: hand it to PyG's own loaders
(``NeighborLoader(..., neighbor_sampler=...)``, ``LinkNeighborLoader``, ``NodeLoader``,
``LinkLoader``). Options it does not implement raise ``NotImplementedError`` naming them:
``disjoint=True`` and the temporal ones (``time_attr``, ``temporal_strategy`` other than
``"uniform"``), which belong to temporal sampling.
"""

from __future__ import annotations

import warnings

import torch
from torch_geometric.sampler import NodeSamplerInput
from torch_geometric.sampler.base import NumNeighbors

from .sampler import Sampler, _fanouts

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
        Only ``False`` (``NotImplementedError`` otherwise).
    temporal_strategy : str
        Only ``"uniform"`` without ``time_attr``.
    time_attr : None
        Temporal sampling is not implemented (``NotImplementedError``).
    weight_attr : str, optional
        Edge weights: an edge attribute of the ``Data`` / ``HeteroData`` (a store pair:
        ``NotImplementedError``, as PyG).
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
        if disjoint:
            raise NotImplementedError("gglspeedup.pyg.NeighborSampler does not sample disjoint subgraphs (disjoint)")
        if time_attr is not None:
            raise NotImplementedError("gglspeedup.pyg.NeighborSampler does not sample temporally (time_attr)")
        if temporal_strategy != "uniform":
            raise NotImplementedError(
                f"gglspeedup.pyg.NeighborSampler does not sample temporally (temporal_strategy={temporal_strategy!r})"
            )
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
            **options,
        )
        self.disjoint = False
        self.temporal_strategy = temporal_strategy
        self.time_attr = None
        self.weight_attr = weight_attr
        self.sample_direction = sample_direction

    # PyG's NeighborSampler attributes that PyG's own code reads (BidirectionalNeighborSampler
    # sets num_neighbors hop by hop and calls _sample).
    is_temporal = False

    @property
    def num_neighbors(self) -> NumNeighbors:
        """The fanouts, as PyG's ``NumNeighbors``; setting it resamples with new fanouts."""
        fanouts = self.sampler.fanouts
        return NumNeighbors(dict(fanouts) if isinstance(fanouts, dict) else list(fanouts))

    @num_neighbors.setter
    def num_neighbors(self, num_neighbors) -> None:
        self.sampler = self.sampler.with_fanouts(_fanouts(num_neighbors, self.sampler.graph))

    def _sample(self, seed, seed_time=None, **kwargs):
        """PyG's internal per-seed call: the batch of ``seed`` (a tensor, or node type -> tensor)
        without metadata."""
        if seed_time is not None:
            raise NotImplementedError("gglspeedup.pyg.NeighborSampler does not sample temporally (seed_time)")
        if isinstance(seed, dict):
            (node_type, ids), *rest = seed.items()
            if rest:
                raise NotImplementedError("gglspeedup.pyg.NeighborSampler._sample takes seeds of one node type")
            out = self.sample_from_nodes(NodeSamplerInput(None, _ids(ids), input_type=node_type))
        else:
            out = self.sample_from_nodes(NodeSamplerInput(None, _ids(seed)))
        out.metadata = None
        return out


def _ids(seed):
    seed = torch.as_tensor(seed)
    return seed.long() if seed.numel() == 0 else seed  # PyG builds an empty next frontier as float


_OPTIONS = {"seed", "device", "placement", "exclude", "reverse_edge_types", "strict_negatives", "weighted", "expand"}

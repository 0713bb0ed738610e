"""R-GCN (Schlichtkrull et al., 2018) on typed sampled blocks, in plain PyTorch.

A layer updates every target node ``i`` of type ``t`` as

    h_i = W_root[t] x_i + sum over relations r = (s, name, t) of mean_{j in N_r(i)} W_r x_j + b[t]

with one weight per relation (``W_r``) and per node type (``W_root``, ``b``), on the blocks of a
:class:`~gglspeedup.HeteroSampleOutput` (``adjs`` outermost hop first; ``edge_index[0]`` rows of
the source type's ``x``, ``edge_index[1]`` rows of the target type's). Node types without
features get a learned embedding per node. Importing this module imports torch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["RGCNConv", "RGCN", "layer_targets"]


def _key(edge_type) -> str:
    return "__".join(edge_type)


def layer_targets(num_sampled_nodes: dict, num_layers: int) -> list:
    """Per layer (outermost hop first), node type -> its targets' count: the nodes of that type in
    ``n_id`` before the layer's hop (``num_sampled_nodes``' running sums)."""
    out = []
    for layer in range(num_layers):
        depth = num_layers - layer  # the outermost layer's targets: every node but the last hop's
        out.append({t: int(sum(counts[:depth])) for t, counts in num_sampled_nodes.items()})
    return out


class RGCNConv(nn.Module):
    """One R-GCN layer (see the module docstring) from ``in_channels`` (int, or dict node type ->
    int) to ``out_channels`` for the given ``node_types`` and ``edge_types``."""

    def __init__(self, in_channels, out_channels: int, node_types, edge_types):
        super().__init__()
        width = in_channels if isinstance(in_channels, dict) else {t: in_channels for t in node_types}
        self.edge_types = [tuple(et) for et in edge_types]
        self.rel = nn.ModuleDict(
            {_key(et): nn.Linear(width[et[0]], out_channels, bias=False) for et in self.edge_types}
        )
        self.root = nn.ModuleDict({t: nn.Linear(width[t], out_channels, bias=True) for t in node_types})

    def forward(self, x: dict, layer: dict, targets: dict) -> dict:
        """``x``: node type -> (N_t, F) rows of ``n_id[t]``; ``layer``: edge type -> Adj of one hop;
        ``targets``: node type -> T_t. Returns node type -> (T_t, out_channels)."""
        out = {t: self.root[t](x[t][:count]) for t, count in targets.items() if t in self.root and t in x}
        for et, (edge_index, _, size) in layer.items():
            src, _, dst = et
            if _key(et) not in self.rel or dst not in out or edge_index.shape[1] == 0:
                continue
            source, target = edge_index[0], edge_index[1]
            messages = self.rel[_key(et)](x[src].index_select(0, source))
            total = messages.new_zeros((size[1], messages.shape[1])).index_add_(0, target, messages)
            count = torch.bincount(target, minlength=size[1]).clamp_(min=1).to(messages.dtype)
            out[dst] = out[dst] + total / count.unsqueeze(1)
        return out


class RGCN(nn.Module):
    """``num_layers`` :class:`RGCNConv` layers, ReLU and dropout between, ``out_channels`` logits
    for every node type in ``node_types``.

    in_channels : dict node type -> feature width; types missing from it (or with width 0) get
        an ``nn.Embedding(num_nodes[t], hidden)`` looked up by ``n_id[t]``.
    """

    def __init__(
        self,
        in_channels: dict,
        hidden: int,
        out_channels: int,
        node_types,
        edge_types,
        num_nodes: dict,
        num_layers: int = 2,
        dropout: float = 0.5,
    ):
        super().__init__()
        self.node_types = list(node_types)
        self.embed = nn.ModuleDict(
            {t: nn.Embedding(num_nodes[t], hidden) for t in self.node_types if not in_channels.get(t)}
        )
        width = {t: in_channels[t] if in_channels.get(t) else hidden for t in self.node_types}
        layers = []
        for i in range(num_layers):
            out = out_channels if i == num_layers - 1 else hidden
            layers.append(RGCNConv(width, out, self.node_types, edge_types))
            width = {t: out for t in self.node_types}
        self.convs = nn.ModuleList(layers)
        self.dropout = dropout

    @classmethod
    def for_graph(
        cls, graph, in_channels: dict, hidden: int, out_channels: int, num_layers: int = 2, dropout: float = 0.5
    ) -> RGCN:
        """The model over every node and edge type of ``graph`` (a :class:`~gglspeedup.HeteroGraph`)."""
        return cls(
            in_channels,
            hidden,
            out_channels,
            graph.node_types,
            graph.edge_types,
            graph.num_nodes,
            num_layers=num_layers,
            dropout=dropout,
        )

    def forward(self, x: dict, adjs: list, n_id: dict, num_sampled_nodes: dict) -> dict:
        if len(adjs) != len(self.convs):
            raise ValueError(f"the model has {len(self.convs)} layers but the batch has {len(adjs)} hops")
        h = {t: x[t] for t in self.node_types if t in x and t not in self.embed}
        for t, embedding in self.embed.items():
            h[t] = embedding(n_id[t])
        for i, (layer, targets) in enumerate(zip(adjs, layer_targets(num_sampled_nodes, len(adjs)))):
            h = self.convs[i](h, layer, targets)
            if i != len(self.convs) - 1:
                h = {t: F.dropout(F.relu(v), p=self.dropout, training=self.training) for t, v in h.items()}
        return h

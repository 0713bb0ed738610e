"""The layers :func:`gglspeedup.inference.layerwise` runs fused, and how it runs them.

A recognised layer is not called: its neighbour aggregation is the fused CSR kernel
(:func:`gglspeedup._aggregate.csr_aggregate`, the batch's rows of the previous layer's table read
in place) and its linear parts (the layer's own submodules, unchanged) run in torch on the
aggregate. Recognised, by exact type (a subclass may change ``forward``), only without forward
hooks (which a fused call would skip) and, for PyG's, only with the default
``flow="source_to_target"`` (``"target_to_source"`` aggregates over out-edges, not the CSR's rows):

- ``gglspeedup.examples.torch_models.SAGEConv`` (mean): ``lin_l(mean) + lin_r(x_i)``;
- PyG's ``SAGEConv`` with ``aggr`` ``"mean"``, ``"sum"`` or ``"add"`` and ``project=False``:
  ``lin_l(agg) [+ lin_r(x_i)] [-> F.normalize]`` as its flags say;
- PyG's ``GINConv``: ``nn((1 + eps) x_i + sum_j x_j)``;
- PyG's ``GCNConv`` with ``improved=False``: ``lin(agg) + bias`` with GCN's normalisation over the
  whole graph (``normalize=True``: one self loop per node when ``add_self_loops``, ``deg`` the
  in-degree with it, ``agg_i = d_i (d_i x_i + sum_{j != i} d_j x_j)``, ``d = deg ** -0.5``; a
  plain sum when ``normalize=False``). Aggregating before the linear map instead of after (as
  PyG does) changes the float rounding, not the result.

Anything else (GAT, a PyG layer with other flags, any callable) is called on a block as before.
Importing this module imports neither torch nor PyG: :func:`fused_kind` looks at the layer's
class's module first.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fused_kind", "fusable_table", "fused_batches", "DeviceGraph"]


def fused_kind(layer) -> str | None:
    """``"sage"``, ``"gin"`` or ``"gcn"`` when :func:`~gglspeedup.inference.layerwise` runs
    ``layer`` fused, else None (it is called on blocks)."""
    cls = type(layer)
    module = getattr(cls, "__module__", "") or ""
    if getattr(layer, "_forward_hooks", None) or getattr(layer, "_forward_pre_hooks", None):
        return None
    if module == "gglspeedup.examples.torch_models":
        from .examples import torch_models

        return "sage" if cls is torch_models.SAGEConv else None
    if not module.startswith("torch_geometric."):
        return None
    from torch_geometric.nn import GCNConv, GINConv, SAGEConv

    if getattr(layer, "flow", "source_to_target") != "source_to_target":  # it aggregates out-edges, not rows
        return None
    if cls is SAGEConv:
        ok = isinstance(layer.aggr, str) and layer.aggr in ("mean", "sum", "add") and not layer.project
        return "sage" if ok else None
    if cls is GINConv:
        return "gin" if layer.aggr in ("add", "sum") else None
    if cls is GCNConv:
        return "gcn" if layer.aggr in ("add", "sum") and not layer.improved else None
    return None


def fusable_table(table) -> bool:
    """Whether the fused kernel reads ``table`` in place: a 2-D float32 host array (or memmap)."""
    return isinstance(table, np.ndarray) and table.ndim == 2 and table.dtype == np.float32


class DeviceGraph:
    """The graph's CSR arrays on the device, and GCN's ``deg ** -0.5`` per flavour, made once."""

    def __init__(self, graph, device):
        self.graph, self.device, self.xp = graph, device, device.xp
        self.indptr = self.xp.asarray(graph.indptr)
        self.indices = self.xp.asarray(graph.indices)
        self._scales = {}
        # The fused kernel reads table rows at these ids unchecked: a graph loaded without verify
        # may hold corrupt ones (a read past the table, or a segfault), so bound them once per call.
        if self.indices.shape[0]:
            low, high = int(self.indices.min()), int(self.indices.max())  # sync: once per layerwise call
            if low < 0 or high >= graph.num_nodes:
                from ._integrity import corrupt_indices_error

                raise corrupt_indices_error(self.indices, [(0, self.indices.shape[0], graph.num_nodes, "")])

    def gcn_scale(self, self_loops: bool):
        """float32 ``deg ** -0.5`` (0 where ``deg`` is 0): ``deg`` counts a node's in-edges, its
        own loops replaced by one when ``self_loops`` (PyG's ``add_remaining_self_loops``)."""
        if self_loops not in self._scales:
            from ._aggregate import csr_aggregate

            if self_loops:  # the kernel counts the non-loop in-edges: a sum over a table of ones
                ones = self.xp.ones((self.graph.num_nodes, 1), dtype=np.float32)
                deg = csr_aggregate(self.indptr, self.indices, ones, skip_loops=True, device=self.device, check=False)
                deg = deg[:, 0] + np.float32(1.0)
            else:
                deg = self.xp.diff(self.indptr).astype(np.float32)
            with np.errstate(divide="ignore"):
                scale = deg ** np.float32(-0.5)
            scale[self.xp.isinf(scale)] = 0
            self._scales[self_loops] = scale.astype(np.float32)
        return self._scales[self_loops]


def fused_batches(kind, layer, graph_arrays, table, starts, batch_size, num_nodes):
    """``(start, count, output)`` for every batch of ``layer`` run fused over ``table`` (the
    previous layer's rows, on ``graph_arrays.device``): the output is the layer's torch tensor."""
    import torch

    from . import backends
    from ._aggregate import csr_aggregate

    device, xp = graph_arrays.device, graph_arrays.xp
    mean, scale, skip = kind == "sage" and getattr(layer, "aggr", "mean") == "mean", None, False
    gcn_norm = kind == "gcn" and layer.normalize
    if gcn_norm:
        skip = bool(layer.add_self_loops)
        scale = graph_arrays.gcn_scale(skip)
    out = None
    for start in starts:
        stop = min(start + batch_size, num_nodes)
        if out is None or out.shape[0] != stop - start:
            out = xp.empty((stop - start, table.shape[1]), dtype=np.float32)
        csr_aggregate(graph_arrays.indptr, graph_arrays.indices, table, start, stop, mean=mean, scale=scale,
                      skip_loops=skip, out=out, device=device, check=False)  # fmt: skip
        agg = backends.to("torch", out)
        x_target = backends.to("torch", table[start:stop])
        if kind == "sage":
            result = layer.lin_l(agg)
            if getattr(layer, "root_weight", True):
                result = result + layer.lin_r(x_target)
            if getattr(layer, "normalize", False):
                result = torch.nn.functional.normalize(result, p=2.0, dim=-1)
        elif kind == "gin":
            result = layer.nn(agg + (1 + layer.eps) * x_target)
        else:
            if gcn_norm:
                d = backends.to("torch", scale[start:stop]).unsqueeze(1)
                agg = d * (agg + d * x_target) if skip else d * agg
            result = layer.lin(agg)
            if layer.bias is not None:
                result = result + layer.bias
        yield start, stop - start, result

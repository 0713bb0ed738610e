"""GammaGL drop-ins: GammaGL's loaders, class for class, with gglspeedup doing the sampling.

>>> from gglspeedup.gammagl import NeighborSampler         # was: from gammagl.loader import NeighborSampler
>>> loader = NeighborSampler(edge_index=graph.edge_index, node_idx=train_idx,
...                          sample_lists=[25, 10], batch_size=1024, shuffle=True)  # doctest: +SKIP
>>> for dst_node, n_id, adjs in loader:                     # doctest: +SKIP
...     logits = net(tlx.gather(x, n_id), adjs)

- :class:`NeighborSampler` replaces ``gammagl.loader.NeighborSampler`` (GraphSAGE's loader): the
  same arguments, ``(dst_node, n_id, adjs)`` batches of tensors of TensorLayerX's backend, ``adjs``
  **always a list** of :class:`EdgeIndex` hop records (outermost hop first). It needs neither
  TensorLayerX nor GammaGL (``backend="torch"`` / ``"numpy"`` work without them).
- :class:`NodeNeighborLoader` and :class:`LinkNeighborLoader` replace GammaGL's loaders of the
  same names over ``gammagl.data.Graph`` / ``HeteroGraph`` and yield the same batch objects; they
  import GammaGL (and so TensorLayerX) when built.
- :func:`tensorlayerx_problem` says whether TensorLayerX can train on the installed torch (PyPI's
  TensorLayerX 0.5.8 cannot on torch 2 without two fixes; see ``docs/gammagl.md``).

Nothing here imports TensorLayerX or GammaGL until a class that needs them is built, and ``import
gglspeedup`` never imports this package.
"""

from __future__ import annotations

import importlib

_LAZY_NAMES = {
    "NeighborSampler": ".neighbor_sampler",
    "EdgeIndex": ".neighbor_sampler",
    "NodeNeighborLoader": ".loaders",
    "LinkNeighborLoader": ".loaders",
    "tensorlayerx_problem": "._tlx",
}
__all__ = [*_LAZY_NAMES]


def __getattr__(name: str):
    if name not in _LAZY_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY_NAMES[name], __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))

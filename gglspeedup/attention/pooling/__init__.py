"""Attention pooling over a batch of graphs: the attpool2 family.

- :mod:`.maps`: ``softmax``, ``sparsemax``, ``gfusedmax`` and ``fused_lasso`` as differentiable
  torch functions over every graph and head of a batch in one call;
- :mod:`.numpy_maps`: the same maps on NumPy arrays (``*_numpy``, with their exact backward);
  ``_state``: what both share with the layer (the forward state, the drivers, the parameter checks,
  the per-head gradients' reduction);
- :mod:`.batch`: :class:`GraphBatch`, a batch's checked structure, cached;
- :mod:`.layers`: :class:`AttentionPooling` and attpool2's classes under its names;
- ``_layer``: the layer's CPU path, one kernel per direction (the CPU driver's
  ``layer_forward`` / ``layer_backward``);
- :mod:`.distributed`: pooling a batch split over devices or processes.

Kernels live in ``_kernels/``: one body per (head, graph) problem, run by a CPU driver
(``prange`` over problems) and a CUDA driver (one thread per problem). Names load on first access
(the modules' own ``__all__``), so importing this package imports neither torch nor Numba.
"""

from __future__ import annotations

from .._face import Face, read_names

_NAMES = read_names(__name__, __path__[0], ("maps", "numpy_maps", "batch", "layers", "distributed"))

__all__ = list(_NAMES)

_lazy = Face(__name__, globals(), _NAMES)
__getattr__, __dir__ = _lazy.getattr, _lazy.dir

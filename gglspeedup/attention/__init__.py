"""The attention models' data side, in two rooms: attention pooling over graph batches, and attention
graphs over long sequences.

- :mod:`.pooling`: attention maps over a batch of graphs (softmax, sparsemax, gfusedmax: the
  attpool2 family), their NumPy entry points, the batch structure, the layers under attpool2's
  names and the multi-device helpers.
- :mod:`.sequence`: long-sequence transformers whose attention runs on a sparse pattern over tokens
  (Diffuser and fractional attention): the pattern sampler, the attention graph, the fused
  attention functions, Diffuser's layers and the row-sharded form.

Each room keeps its kernels in its own ``_kernels/`` (one body compiled for the CPU with
``numba.njit`` and for the GPU with ``numba.cuda.jit``, behind one driver per device, as in
:mod:`gglspeedup.sampling`). Every public name of both rooms is also a name of this package; names
load on first access (each room lists its modules' own ``__all__``), so ``import
gglspeedup.attention`` imports neither torch nor Numba.
"""

from __future__ import annotations

import importlib

from ._face import Face

_ROOMS = ("pooling", "sequence")
# public name -> the room that loads it (each room's __all__: its modules' names)
_NAMES = {
    name: f"{__name__}.{room}" for room in _ROOMS for name in importlib.import_module(f".{room}", __name__).__all__
}

__all__ = list(_NAMES)

_lazy = Face(__name__, globals(), _NAMES)
__getattr__, __dir__ = _lazy.getattr, _lazy.dir

"""Attention graphs over long sequences: Diffuser's and fractional attention on a sparse pattern.

- :mod:`.patterns`: :class:`SequencePattern`, the rule of a pattern (window, random keys, global
  tokens, seed), and its builds;
- :mod:`.graph`: :class:`AttentionGraph`, a batch's in-CSR over tokens, and its hand-offs (DGL,
  torch, PyG);
- :mod:`.diffusion` / :mod:`.fractional`: the fused attention functions (forward and hand-written
  backward in one ``autograd.Function`` each);
- :mod:`.layers`: Diffuser's layers (``DiffuserSelfAttention``, ``DiffuserFracSelfAttention``);
- :mod:`.sharded`: the query rows of one long sequence split over a ``torch.distributed`` group.

Kernels live in ``_kernels/``: one body per query row (pattern rows, attention rows), run by a CPU
driver and a CUDA driver. Names load on first access (the modules' own ``__all__``), so importing
this package imports neither torch nor Numba.
"""

from __future__ import annotations

from .._face import Face, read_names

_NAMES = read_names(__name__, __path__[0], ("patterns", "graph", "diffusion", "fractional", "layers", "sharded"))

__all__ = list(_NAMES)

_lazy = Face(__name__, globals(), _NAMES)
__getattr__, __dir__ = _lazy.getattr, _lazy.dir

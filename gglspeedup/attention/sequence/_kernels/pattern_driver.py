"""What the two pattern drivers share: a pattern's in-CSR as count -> scan -> fill, allocated with the
driver's array module (``xp``: NumPy on the CPU, CuPy or the simulator's NumPy on a GPU).
:class:`~.pattern_cpu.CPUPatternDriver` and :class:`~.pattern_cuda.CUDAPatternDriver` supply the
device's steps (the contract: :class:`gglspeedup.attention._drivers.PatternDriver`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["PatternDriverBase"]


class PatternDriverBase:
    """A pattern's rows counted and scanned into ``indptr``, then filled into ``indices``."""

    xp = np

    def build(self, arrays, indptr_dtype, index_dtype):
        """``(indptr, indices)`` of the pattern ``arrays`` describes (the record
        :mod:`gglspeedup.attention.sequence.patterns` prepares: lengths, global tokens, states,
        table), in ``indptr_dtype`` and ``index_dtype``, rows sorted."""
        indptr = self._scan(arrays, indptr_dtype)
        indices = self.xp.empty(self._edges(indptr), index_dtype)
        self._fill(arrays, indptr, indices)
        return indptr, indices

    def _scan(self, arrays, indptr_dtype):
        """``indptr`` (``num_rows + 1``): every row's key count, scanned."""
        raise NotImplementedError

    def _edges(self, indptr) -> int:
        """The edge count, ``indptr[-1]``, on the host."""
        return int(indptr[-1])

    def _fill(self, arrays, indptr, indices) -> None:
        """Every row's keys, sorted, into ``indices[indptr[r]:indptr[r + 1]]``."""
        raise NotImplementedError

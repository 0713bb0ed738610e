"""GPU driver of the pattern sampler (:class:`CUDAPatternDriver`): ``@cuda.jit`` count and fill kernels
over the same row bodies.

One thread per query row; two launches, a device ``cumsum`` and one sync (the edge count, to size
the indices). Arrays are CuPy on a real GPU and NumPy under the simulator.
"""

from __future__ import annotations

from numba import cuda

from ...._launch import launch_rows, to_host
from .pattern_driver import PatternDriverBase
from .pattern_rows import count_arguments, fill_arguments, row_count, row_fill

__all__ = ["CUDAPatternDriver"]


@cuda.jit(cache=True)
def _count_kernel(lengths, seq_len, gptr, gids, layout, half, num_random, num_rows, counts):
    r = cuda.grid(1)
    if r < num_rows:
        counts[r + 1] = row_count(lengths, seq_len, gptr, gids, layout, half, num_random, r)


@cuda.jit(cache=True)
def _fill_kernel(lengths, seq_len, gptr, gids, layout, half, num_random, mode, cdf, states, indptr, out):
    r = cuda.grid(1)
    if r < indptr.shape[0] - 1:
        row_fill(lengths, seq_len, gptr, gids, layout, half, num_random, mode, cdf, states, r, indptr[r], out)


class CUDAPatternDriver(PatternDriverBase):
    """Patterns built on one CUDA device (real or simulated): arrays of ``device.xp``."""

    def __init__(self, device):
        self.device = device
        self.xp = device.xp

    def _scan(self, arrays, indptr_dtype):
        counts = self.xp.zeros(arrays.num_rows + 1, self.xp.int64)
        launch_rows(_count_kernel, self.device, arrays.num_rows, *count_arguments(arrays), arrays.num_rows, counts)
        return self.xp.cumsum(counts).astype(indptr_dtype, copy=False)

    def _edges(self, indptr) -> int:
        return int(to_host(indptr[-1:])[0])  # sync: the edge count sizes the indices

    def _fill(self, arrays, indptr, indices) -> None:
        arguments = (*fill_arguments(arrays), indptr, indices)  # a thread keeps its draws sorted by insertion
        launch_rows(_fill_kernel, self.device, arrays.num_rows, *arguments)

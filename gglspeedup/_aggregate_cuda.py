"""The CUDA twin of :mod:`gglspeedup._aggregate`: a warp per output row, the same row body.

Lane ``l`` of row ``i``'s warp accumulates features ``l, l + 32, ...`` over the row's edges in CSR
order (:func:`gglspeedup._aggregate_row.aggregate_row`, the body the CPU's ``prange`` runs with one
lane), so each neighbour row is read by consecutive lanes (coalesced) and every output entry is
the same float32 sum as on the CPU. Importing this module imports ``numba.cuda`` (under
``NUMBA_ENABLE_CUDASIM=1``, its simulator). Numba's on-disk cache checks only this file, so a
change of the body comes with a line here (last: the first version).
"""

from __future__ import annotations

from numba import cuda

from ._aggregate_row import aggregate_row
from ._launch import launch_rows

__all__ = ["aggregate_cuda", "LANES"]

LANES = 32


@cuda.jit(cache=True)
def _aggregate_kernel(start, indptr, indices, table, scale, use_scale, skip_loops, mean, out):
    t = cuda.grid(1)
    i = t // LANES
    if i < out.shape[0]:
        aggregate_row(i, t % LANES, LANES, start, indptr, indices, table, scale, use_scale, skip_loops, mean, out)


def aggregate_cuda(device, start, indptr, indices, table, scale, use_scale, skip_loops, mean, out) -> None:
    """Launch the kernel over ``out``'s rows (device arrays of ``device``, checked by the caller)."""
    args = (start, indptr, indices, table, scale, bool(use_scale), bool(skip_loops), bool(mean), out)
    launch_rows(_aggregate_kernel, device, out.shape[0] * LANES, *args)

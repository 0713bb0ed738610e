"""The row body of the fused CSR aggregation, shared by the CPU kernel (:mod:`gglspeedup._aggregate`,
one lane per row) and the CUDA kernel (:mod:`gglspeedup._aggregate_cuda`, a warp per row).

Every output entry is the float32 sum over the row's edges in CSR order, whatever the lanes, so
both kernels give the same bits. Numba's on-disk cache checks only the kernels' files: a change
here comes with a line in both.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

__all__ = ["aggregate_row"]


@register_jitable
def aggregate_row(i, lane, step, start, indptr, indices, table, scale, use_scale, skip_loops, mean, out):
    """Row ``i`` of ``out`` (graph row ``start + i``), features ``lane, lane + step, ...``.

    ``scale`` is read only when ``use_scale``; ``skip_loops`` leaves out edges from the row's own
    node; ``mean`` divides by the edges taken (an empty row stays 0).
    """
    row = start + i
    dim = out.shape[1]
    for f in range(lane, dim, step):
        out[i, f] = np.float32(0.0)
    first = indptr[row]
    last = indptr[row + 1]
    count = last - first
    # ``step == 1`` (the CPU's) runs as plain ``range`` loops, which LLVM vectorises (a strided
    # loop ran 6x slower); each entry gets the same float32 operations either way. The plain sum
    # apart (GCN's and the loop-skipping variants are not in the hot path): the loop with their
    # branches ran 1.4x slower.
    if not (use_scale or skip_loops):
        for e in range(first, last):
            j = indices[e]
            if step == 1:
                for f in range(dim):
                    out[i, f] += table[j, f]
            else:
                for f in range(lane, dim, step):
                    out[i, f] += table[j, f]
    else:
        count = 0
        for e in range(first, last):
            j = indices[e]
            if skip_loops and j == row:
                continue
            count += 1
            if not use_scale:
                for f in range(lane, dim, step):
                    out[i, f] += table[j, f]
            else:
                s = scale[j]
                for f in range(lane, dim, step):
                    out[i, f] += s * table[j, f]
    if mean and count > 0:
        c = np.float32(count)
        for f in range(lane, dim, step):
            out[i, f] = out[i, f] / c

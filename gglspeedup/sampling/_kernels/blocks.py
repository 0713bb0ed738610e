"""The scaffolding the CPU hop kernels share (:func:`.cpu.sample_hop`, :func:`.typed.sample_typed_hop`,
:func:`.disjoint.sample_tree_hop`, :func:`.disjoint.sample_typed_tree_hop`): the buffers the row
bodies fill and the blocks of rows their fill loop runs over in parallel; the offsets' prefix sum
for the two disjoint kernels (the other two sum inside their counting loops).

Each block draws its rows' positions, then gathers their neighbours in one tight loop whose loads
are independent (:func:`.rows.row_finish`: they overlap, unlike loads inside the row loop).
Inlined into the kernels' IR (``inline="always"``), so each kernel compiles as if written out.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

__all__ = ["ROWS_PER_BLOCK", "prefix_sum", "draw_buffers", "row_blocks", "block_rows"]

ROWS_PER_BLOCK = 256


@register_jitable(inline="always")
def prefix_sum(offsets, count):
    """Turn the per-row counts ``offsets[1 : count + 1]`` (``offsets[0] == 0``) into offsets, in
    place; returns the total ``offsets[count]``."""
    for i in range(count):
        offsets[i + 1] += offsets[i]
    return offsets[count]


@register_jitable(inline="always")
def draw_buffers(num_edges):
    """``(e_id, col)``: a hop's drawn positions (then edge ids) and their neighbours (int64)."""
    return np.empty(num_edges, np.int64), np.empty(num_edges, np.int64)


@register_jitable(inline="always")
def row_blocks(num_rows):
    """How many blocks of :data:`ROWS_PER_BLOCK` rows cover ``num_rows`` rows."""
    return (num_rows + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK


@register_jitable(inline="always")
def block_rows(block, num_rows):
    """``(lo, hi)``: the rows of block ``block`` (of :func:`row_blocks`)."""
    lo = block * ROWS_PER_BLOCK
    return lo, min(lo + ROWS_PER_BLOCK, num_rows)

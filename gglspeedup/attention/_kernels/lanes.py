"""Dot products over a head of ``(rows, H, D)`` arrays in one fixed order, fast on the CPU.

A dot product ``sum_d a[ar, h, d] * b[br, h, d]`` is summed in **lanes** of ``W = 64 bytes /
itemsize`` (16 float32 or 8 float64): lane ``j`` adds the products ``d = j, W + j, 2W + j, ...``
of the first ``W * (D // W)`` positions in order, the lanes are folded in halves
(``lane[j] + lane[j + W/2]``, then ``W/4``, ... down to one), and the tail ``d >= W * (D // W)``
is added after, in order (``D < W``: a plain sequential sum). That order is a sum of ``W`` independent
chains, so it is what one 64-byte vector register computes: on the CPU :func:`dot_lanes` is
explicit LLVM vector instructions (Numba disables LLVM's SLP vectoriser, and the loop vectoriser
needs ``fastmath`` to reassociate a reduction, which would make the order the compiler's choice),
while CUDA (``cuda.jit``) and the CUDA simulator run the scalar reference below, which performs
the same operations in the same order: the results are equal bit for bit.

(Elementwise loops such as ``acc[h, :] += w * x[key, h, :]`` need nothing of this: any order gives
the same bits, and Numba's loop vectoriser compiles them to vector instructions as written.)
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload, register_jitable

__all__ = ["LANE_BYTES", "dot_lanes"]

LANE_BYTES = 64  # one AVX-512 register; two AVX2 registers


@register_jitable
def _dot_reference(a, ar, b, br, h, lanes):
    depth = a.shape[2]
    width = LANE_BYTES // a.itemsize
    chunks = depth // width
    if chunks == 0:
        total = a[ar, h, 0] * b[br, h, 0]
        for d in range(1, depth):
            total = total + a[ar, h, d] * b[br, h, d]
        return total
    for j in range(width):
        lanes[j] = a[ar, h, j] * b[br, h, j]
    for c in range(1, chunks):
        for j in range(width):
            lanes[j] = lanes[j] + a[ar, h, c * width + j] * b[br, h, c * width + j]
    half = width >> 1
    while half > 0:
        for j in range(half):
            lanes[j] = lanes[j] + lanes[j + half]
        half >>= 1
    total = lanes[0]
    for d in range(chunks * width, depth):
        total = total + a[ar, h, d] * b[br, h, d]
    return total


def dot_lanes(a, ar, b, br, h, lanes):
    """``sum_d a[ar, h, d] * b[br, h, d]`` in the lane order (module docstring). ``a``, ``b``:
    C-contiguous ``(rows, H, D)`` float arrays of one dtype; ``lanes``: scratch of at least
    ``64 // itemsize`` elements of that dtype (unused by the CPU's vector version)."""
    return _dot_reference(a, ar, b, br, h, lanes)


# -- generic targets (CUDA): the scalar reference ------------------------------------------------
@overload(dot_lanes, target="generic")
def _dot_lanes_generic(a, ar, b, br, h, lanes):
    return _dot_reference


# -- the CPU: explicit vectors ---------------------------------------------------------------------
def _vector_type(array_type):
    width = LANE_BYTES // array_type.dtype.bitwidth * 8
    element = ir.FloatType() if array_type.dtype == types.float32 else ir.DoubleType()
    return ir.VectorType(element, width), width


def _head_pointer(context, builder, array_type, array, row, head):
    """Pointer to ``array[row, head, 0]`` of a C-contiguous 3-D array, and its ``D``."""
    view = context.make_array(array_type)(context, builder, array)
    _, heads, depth = cgutils.unpack_tuple(builder, view.shape, 3)
    offset = builder.mul(builder.add(builder.mul(row, heads), head), depth)
    return builder.gep(view.data, [offset]), depth


def _supported(*arrays):
    return all(
        isinstance(t, types.Array) and t.ndim == 3 and t.layout == "C" and t.dtype in (types.float32, types.float64)
        for t in arrays
    ) and all(t.dtype == arrays[0].dtype for t in arrays)


@intrinsic
def _vector_dot(typingctx, a, ar, b, br, h):
    """The first ``D // W`` chunks of the lane order, folded (``D >= W``); int64 indices."""
    signature = a.dtype(a, types.int64, b, types.int64, types.int64)

    def codegen(context, builder, sig, args):
        vector, width = _vector_type(sig.args[0])
        i64 = ir.IntType(64)
        pa, depth = _head_pointer(context, builder, sig.args[0], args[0], args[1], args[4])
        pb, _ = _head_pointer(context, builder, sig.args[2], args[2], args[3], args[4])
        chunks = builder.udiv(depth, ir.Constant(i64, width))

        def load(pointer, chunk):
            address = builder.gep(pointer, [builder.mul(chunk, ir.Constant(i64, width))])
            return builder.load(builder.bitcast(address, vector.as_pointer()), align=sig.args[0].dtype.bitwidth // 8)

        entry = builder.block
        loop = builder.append_basic_block("dot_lanes.loop")
        done = builder.append_basic_block("dot_lanes.done")
        first = builder.fmul(load(pa, ir.Constant(i64, 0)), load(pb, ir.Constant(i64, 0)))
        builder.cbranch(builder.icmp_unsigned(">", chunks, ir.Constant(i64, 1)), loop, done)
        builder.position_at_end(loop)
        chunk = builder.phi(i64)
        total = builder.phi(vector)
        chunk.add_incoming(ir.Constant(i64, 1), entry)
        total.add_incoming(first, entry)
        added = builder.fadd(total, builder.fmul(load(pa, chunk), load(pb, chunk)))
        following = builder.add(chunk, ir.Constant(i64, 1))
        chunk.add_incoming(following, loop)
        total.add_incoming(added, loop)
        builder.cbranch(builder.icmp_unsigned("<", following, chunks), loop, done)
        builder.position_at_end(done)
        lanes = builder.phi(vector)
        lanes.add_incoming(first, entry)
        lanes.add_incoming(added, loop)
        value = lanes
        half = width // 2
        while half >= 1:  # lane[j] + lane[j + half]: the reference's fold
            index = ir.VectorType(ir.IntType(32), half)
            low = builder.shuffle_vector(value, value, ir.Constant(index, list(range(half))))
            high = builder.shuffle_vector(value, value, ir.Constant(index, list(range(half, 2 * half))))
            value = builder.fadd(low, high)
            half //= 2
        return builder.extract_element(value, ir.Constant(ir.IntType(32), 0))

    return signature, codegen


@overload(dot_lanes, target="cpu", inline="always")
def _dot_lanes_cpu(a, ar, b, br, h, lanes):
    if not _supported(a, b):
        return _dot_reference

    def vector(a, ar, b, br, h, lanes):
        depth = a.shape[2]
        width = LANE_BYTES // a.itemsize
        chunks = depth // width
        if chunks == 0:
            total = a[ar, h, 0] * b[br, h, 0]
            for d in range(1, depth):
                total = total + a[ar, h, d] * b[br, h, d]
            return total
        total = _vector_dot(a, np.int64(ar), b, np.int64(br), np.int64(h))
        for d in range(chunks * width, depth):
            total = total + a[ar, h, d] * b[br, h, d]
        return total

    return vector

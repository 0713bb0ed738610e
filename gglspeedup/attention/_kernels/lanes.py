"""Dot products over a head of ``(rows, H, D)`` arrays in one fixed order, fast on the CPU.

A dot product ``sum_d a[ar, h, d] * b[br, h, d]`` is summed in **lanes**. With ``W = 64 bytes /
itemsize`` (16 float32 or 8 float64) and ``V = 4, 2`` or ``1`` vectors (the largest with
``V * W <= D``), there are ``L = V * W`` lanes: lane ``j`` adds the products ``d = j, L + j,
2L + j, ...`` of the first ``L * (D // L)`` positions in order (the first product starts it), the
lanes are folded in halves (``lane[j] + lane[j + L/2]``, then ``L/4``, ... down to one), and the
tail ``d >= L * (D // L)`` is added after, in order; ``D < W``: a plain sequential sum. A stack of
``S`` such pairs (:func:`dot_stack`: ``(S, rows, H, D)`` arrays) runs the lanes through the
chunks of every entry in turn before the one fold, then adds the tails of every entry in turn.

That order is ``L`` independent chains, so it is what ``V`` 64-byte vector registers compute: on
the CPU :func:`dot_lanes` and :func:`dot_stack` are explicit LLVM vector instructions (Numba
disables LLVM's SLP vectoriser, and the loop vectoriser needs ``fastmath`` to reassociate a
reduction, which would make the order the compiler's choice), while CUDA (``cuda.jit``) and the
CUDA simulator run the scalar reference below, which performs the same operations in the same
order: the results are equal bit for bit. Several vectors keep several additions in flight (a
single chain of dependent vector additions would wait on each one's latency).

(Elementwise loops such as ``acc[h, :] += w * x[key, h, :]`` need nothing of this: any order gives
the same bits, and Numba's loop vectoriser compiles them to vector instructions as written.)
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload, register_jitable

__all__ = ["LANE_BYTES", "SCRATCH_BYTES", "dot_lanes", "dot_stack"]

LANE_BYTES = 64  # one AVX-512 register; two AVX2 registers
MAX_VECTORS = 4
SCRATCH_BYTES = LANE_BYTES * MAX_VECTORS  # the scalar reference's lanes


@register_jitable
def _lane_count(depth, width):
    """``L = V * W`` lanes for a head of ``depth`` (``0`` when ``depth < W``: a sequential sum)."""
    if depth >= 4 * width:
        return 4 * width
    if depth >= 2 * width:
        return 2 * width
    if depth >= width:
        return width
    return 0


@register_jitable
def _fold(lanes, count):
    half = count >> 1
    while half > 0:
        for j in range(half):
            lanes[j] = lanes[j] + lanes[j + half]
        half >>= 1
    return lanes[0]


@register_jitable
def _dot_reference(a, ar, b, br, h, lanes):
    depth = a.shape[2]
    count = _lane_count(depth, LANE_BYTES // a.itemsize)
    if count == 0:
        total = a[ar, h, 0] * b[br, h, 0]
        for d in range(1, depth):
            total = total + a[ar, h, d] * b[br, h, d]
        return total
    chunks = depth // count
    for j in range(count):
        lanes[j] = a[ar, h, j] * b[br, h, j]
    for c in range(1, chunks):
        for j in range(count):
            lanes[j] = lanes[j] + a[ar, h, c * count + j] * b[br, h, c * count + j]
    total = _fold(lanes, count)
    for d in range(chunks * count, depth):
        total = total + a[ar, h, d] * b[br, h, d]
    return total


@register_jitable
def _stack_reference(a, ar, b, br, h, lanes):
    stack = a.shape[0]
    depth = a.shape[3]
    count = _lane_count(depth, LANE_BYTES // a.itemsize)
    if count == 0:
        total = a[0, ar, h, 0] * b[0, br, h, 0]
        for s in range(stack):
            for d in range(1 if s == 0 else 0, depth):
                total = total + a[s, ar, h, d] * b[s, br, h, d]
        return total
    chunks = depth // count
    for j in range(count):
        lanes[j] = a[0, ar, h, j] * b[0, br, h, j]
    for s in range(stack):
        for c in range(1 if s == 0 else 0, chunks):
            for j in range(count):
                lanes[j] = lanes[j] + a[s, ar, h, c * count + j] * b[s, br, h, c * count + j]
    total = _fold(lanes, count)
    for s in range(stack):
        for d in range(chunks * count, depth):
            total = total + a[s, ar, h, d] * b[s, br, h, d]
    return total


def dot_lanes(a, ar, b, br, h, lanes):
    """``sum_d a[ar, h, d] * b[br, h, d]`` in the lane order (module docstring). ``a``, ``b``:
    C-contiguous ``(rows, H, D)`` float arrays of one dtype; ``lanes``: scratch of at least
    ``SCRATCH_BYTES // itemsize`` elements of that dtype (unused by the CPU's vector version)."""
    return _dot_reference(a, ar, b, br, h, lanes)


def dot_stack(a, ar, b, br, h, lanes):
    """``sum_s sum_d a[s, ar, h, d] * b[s, br, h, d]`` over ``(S, rows, H, D)`` stacks: one set of
    lanes runs through the chunks of every stack entry in turn (entry 0's first chunk starts them),
    one fold, then the tails of every entry in turn (``D < W``: a plain sequential sum)."""
    return _stack_reference(a, ar, b, br, h, lanes)


# -- generic targets (CUDA): the scalar reference ------------------------------------------------
@overload(dot_lanes, target="generic")
def _dot_lanes_generic(a, ar, b, br, h, lanes):
    return _dot_reference


@overload(dot_stack, target="generic")
def _dot_stack_generic(a, ar, b, br, h, lanes):
    return _stack_reference


# -- the CPU: explicit vectors ---------------------------------------------------------------------
def _vector_type(array_type):
    width = LANE_BYTES // array_type.dtype.bitwidth * 8
    element = ir.FloatType() if array_type.dtype == types.float32 else ir.DoubleType()
    return ir.VectorType(element, width), width


def _supported(*arrays):
    ndim = arrays[0].ndim if isinstance(arrays[0], types.Array) else 0
    return all(
        isinstance(t, types.Array) and t.ndim == ndim and t.layout == "C" and t.dtype == arrays[0].dtype for t in arrays
    ) and arrays[0].dtype in (types.float32, types.float64)


def _codegen_dot(context, builder, sig, args):
    """``a[.., ar, h, :] . b[.., br, h, :]`` over the first ``L * (D // L)`` positions of every
    stack entry (3-D arrays: one) in ``V`` vectors of lanes, then folded (``D >= W``)."""
    array_type = sig.args[0]
    vector, width = _vector_type(array_type)
    align = array_type.dtype.bitwidth // 8
    i64 = ir.IntType(64)
    views = [context.make_array(array_type)(context, builder, args[i]) for i in (0, 2)]
    shape = cgutils.unpack_tuple(builder, views[0].shape, array_type.ndim)
    stack = shape[0] if array_type.ndim == 4 else ir.Constant(i64, 1)
    rows, heads, depth = shape[-3:]
    stack_stride = builder.mul(builder.mul(rows, heads), depth)
    bases = [
        builder.gep(view.data, [builder.mul(builder.add(builder.mul(row, heads), args[4]), depth)])
        for view, row in zip(views, (args[1], args[3]))
    ]
    zero = ir.Constant(i64, 0)
    result = cgutils.alloca_once(builder, vector.element)

    def product(entry, position):
        offset = builder.add(builder.mul(entry, stack_stride), position)
        a, b = (
            builder.load(builder.bitcast(builder.gep(base, [offset]), vector.as_pointer()), align=align)
            for base in bases
        )
        return builder.fmul(a, b)

    def lanes(vectors):  # the path for V = vectors (a Python constant): accumulate, fold, store
        count = ir.Constant(i64, vectors * width)
        chunks = builder.udiv(depth, count)
        totals = [cgutils.alloca_once(builder, vector) for _ in range(vectors)]
        for v, total in enumerate(totals):
            builder.store(product(zero, ir.Constant(i64, v * width)), total)
        with cgutils.for_range(builder, stack) as outer:
            first = builder.select(builder.icmp_unsigned("==", outer.index, zero), ir.Constant(i64, 1), zero)
            with cgutils.for_range_slice(builder, first, chunks, ir.Constant(i64, 1)) as (chunk, _):
                start = builder.mul(chunk, count)
                for v, total in enumerate(totals):
                    position = builder.add(start, ir.Constant(i64, v * width))
                    builder.store(builder.fadd(builder.load(total), product(outer.index, position)), total)
        values = [builder.load(total) for total in totals]
        while len(values) > 1:  # lane[j] + lane[j + L/2] across whole vectors first
            half = len(values) // 2
            values = [builder.fadd(values[i], values[i + half]) for i in range(half)]
        value = values[0]
        half = width // 2
        while half >= 1:  # then within the vector
            index = ir.VectorType(ir.IntType(32), half)
            low = builder.shuffle_vector(value, value, ir.Constant(index, list(range(half))))
            high = builder.shuffle_vector(value, value, ir.Constant(index, list(range(half, 2 * half))))
            value = builder.fadd(low, high)
            half //= 2
        builder.store(builder.extract_element(value, ir.Constant(ir.IntType(32), 0)), result)

    four = builder.icmp_unsigned(">=", depth, ir.Constant(i64, 4 * width))
    two = builder.icmp_unsigned(">=", depth, ir.Constant(i64, 2 * width))
    with builder.if_else(four) as (then, otherwise):
        with then:
            lanes(4)
        with otherwise:
            with builder.if_else(two) as (then_two, otherwise_two):
                with then_two:
                    lanes(2)
                with otherwise_two:
                    lanes(1)
    return builder.load(result)


@intrinsic
def _vector_dot(typingctx, a, ar, b, br, h):
    """The vector part of :func:`dot_lanes` / :func:`dot_stack` (``D >= W``); int64 indices."""
    return a.dtype(a, types.int64, b, types.int64, types.int64), _codegen_dot


@overload(dot_lanes, target="cpu", inline="always")
def _dot_lanes_cpu(a, ar, b, br, h, lanes):
    if not _supported(a, b) or a.ndim != 3:
        return _dot_reference

    def vector(a, ar, b, br, h, lanes):
        depth = a.shape[2]
        count = _lane_count(depth, LANE_BYTES // a.itemsize)
        if count == 0:
            total = a[ar, h, 0] * b[br, h, 0]
            for d in range(1, depth):
                total = total + a[ar, h, d] * b[br, h, d]
            return total
        total = _vector_dot(a, np.int64(ar), b, np.int64(br), np.int64(h))
        for d in range(depth // count * count, depth):
            total = total + a[ar, h, d] * b[br, h, d]
        return total

    return vector


@overload(dot_stack, target="cpu", inline="always")
def _dot_stack_cpu(a, ar, b, br, h, lanes):
    if not _supported(a, b) or a.ndim != 4:
        return _stack_reference

    def vector(a, ar, b, br, h, lanes):
        stack = a.shape[0]
        depth = a.shape[3]
        count = _lane_count(depth, LANE_BYTES // a.itemsize)
        if count == 0:
            total = a[0, ar, h, 0] * b[0, br, h, 0]
            for s in range(stack):
                for d in range(1 if s == 0 else 0, depth):
                    total = total + a[s, ar, h, d] * b[s, br, h, d]
            return total
        total = _vector_dot(a, np.int64(ar), b, np.int64(br), np.int64(h))
        for s in range(stack):
            for d in range(depth // count * count, depth):
                total = total + a[s, ar, h, d] * b[s, br, h, d]
        return total

    return vector

"""Dot products over a head of ``(rows, H, D)`` arrays in one fixed order, fast on the CPU.

A dot product ``sum_d a[ar, h, d] * b[br, h, d]`` is summed in **lanes**. With ``W = 64 bytes /
itemsize`` (16 float32 or 8 float64) and ``V = 4, 2`` or ``1`` vectors (the largest with
``V * W <= D``), there are ``L = V * W`` lanes: lane ``j`` adds the products ``d = j, L + j,
2L + j, ...`` of the first ``L * (D // L)`` positions in order (the first product starts it), the
lanes are folded in halves (``lane[j] + lane[j + L/2]``, then ``L/4``, ... down to one), and the
tail ``d >= L * (D // L)`` is added after, in order; ``D < W``: a plain sequential sum.

That order is ``L`` independent chains, so it is what ``V`` 64-byte vector registers compute: on
the CPU :func:`dot_lanes` and :func:`dots_into` are explicit LLVM vector instructions (Numba
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

__all__ = ["LANE_BYTES", "SCRATCH_BYTES", "dot_lanes", "dots_into"]

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
def _dots_reference(a, ar, b, br, out, orow, scale, lanes):
    for h in range(a.shape[1]):
        out[orow, h] += scale * _dot_reference(a, ar, b, br, h, lanes)


def dot_lanes(a, ar, b, br, h, lanes):
    """``sum_d a[ar, h, d] * b[br, h, d]`` in the lane order (module docstring). ``a``, ``b``:
    C-contiguous ``(rows, H, D)`` float arrays of one dtype; ``lanes``: scratch of at least
    ``SCRATCH_BYTES // itemsize`` elements of that dtype (unused by the CPU's vector version)."""
    return _dot_reference(a, ar, b, br, h, lanes)


def dots_into(a, ar, b, br, out, orow, scale, lanes):
    """``out[orow, h] += scale * dot_lanes(a, ar, b, br, h)`` for every head ``h`` (``out``:
    ``(rows, H)``). On the CPU, four heads at a time share their folds (the same lane additions,
    packed into fewer vector instructions)."""
    _dots_reference(a, ar, b, br, out, orow, scale, lanes)


# -- generic targets (CUDA): the scalar reference ------------------------------------------------
@overload(dot_lanes, target="generic")
def _dot_lanes_generic(a, ar, b, br, h, lanes):
    return _dot_reference


@overload(dots_into, target="generic")
def _dots_into_generic(a, ar, b, br, out, orow, scale, lanes):
    return _dots_reference


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


class _Lanes:
    """IR of the lane order for C-contiguous ``(rows, H, D)`` arrays ``a``, ``b`` with ``D >= W``."""

    def __init__(self, context, builder, array_type, a, b):
        self.builder = builder
        self.vector, self.width = _vector_type(array_type)
        self.align = array_type.dtype.bitwidth // 8
        self.i64 = ir.IntType(64)
        self.views = [context.make_array(array_type)(context, builder, x) for x in (a, b)]
        _, self.heads, self.depth = cgutils.unpack_tuple(builder, self.views[0].shape, 3)

    def constant(self, value):
        return ir.Constant(self.i64, value)

    def head(self, vectors, rows, head):
        """The ``V = vectors`` lane vectors of ``a[rows[0], head] . b[rows[1], head]`` accumulated
        over the chunks and folded across vectors (``lane[j] + lane[j + L/2]`` ... down to ``W``)."""
        builder = self.builder
        bases = [
            builder.gep(view.data, [builder.mul(builder.add(builder.mul(row, self.heads), head), self.depth)])
            for view, row in zip(self.views, rows)
        ]
        count = self.constant(vectors * self.width)

        def product(position):
            a, b = (
                builder.load(builder.bitcast(builder.gep(base, [position]), self.vector.as_pointer()), align=self.align)
                for base in bases
            )
            return builder.fmul(a, b)

        totals = [cgutils.alloca_once(builder, self.vector) for _ in range(vectors)]
        for v, total in enumerate(totals):
            builder.store(product(self.constant(v * self.width)), total)
        chunks = builder.udiv(self.depth, count)
        with cgutils.for_range_slice(builder, self.constant(1), chunks, self.constant(1)) as (chunk, _):
            start = builder.mul(chunk, count)
            for v, total in enumerate(totals):
                position = builder.add(start, self.constant(v * self.width))
                builder.store(builder.fadd(builder.load(total), product(position)), total)
        values = [builder.load(total) for total in totals]
        while len(values) > 1:
            half = len(values) // 2
            values = [builder.fadd(values[i], values[i + half]) for i in range(half)]
        return values[0]

    def fold(self, value, blocks, lanes, other=None):
        """Halve every block of ``lanes`` lanes (``lane[j] + lane[j + lanes/2]``); with ``other``,
        the blocks of ``value`` then ``other``, packed into one vector."""
        builder = self.builder
        total = blocks * (2 if other is not None else 1)
        half = lanes // 2
        low = [k * lanes + i for k in range(total) for i in range(half)]
        high = [k * lanes + half + i for k in range(total) for i in range(half)]
        index = ir.VectorType(ir.IntType(32), len(low))
        second = other if other is not None else value
        return builder.fadd(
            builder.shuffle_vector(value, second, ir.Constant(index, low)),
            builder.shuffle_vector(value, second, ir.Constant(index, high)),
        )

    def by_vectors(self, emit):
        """``emit(V)`` under the branch of ``V = 4, 2, 1`` that ``D`` selects (as ``_lane_count``)."""
        builder = self.builder
        four = builder.icmp_unsigned(">=", self.depth, self.constant(4 * self.width))
        two = builder.icmp_unsigned(">=", self.depth, self.constant(2 * self.width))
        with builder.if_else(four) as (then, otherwise):
            with then:
                emit(4)
            with otherwise:
                with builder.if_else(two) as (then_two, otherwise_two):
                    with then_two:
                        emit(2)
                    with otherwise_two:
                        emit(1)


def _codegen_dot(context, builder, sig, args):
    """:func:`dot_lanes` without its tail (``D >= W``)."""
    lanes = _Lanes(context, builder, sig.args[0], args[0], args[2])
    result = cgutils.alloca_once(builder, lanes.vector.element)

    def emit(vectors):
        value = lanes.head(vectors, (args[1], args[3]), args[4])
        width = lanes.width
        while width > 1:
            value = lanes.fold(value, 1, width)
            width //= 2
        builder.store(builder.extract_element(value, ir.Constant(ir.IntType(32), 0)), result)

    lanes.by_vectors(emit)
    return builder.load(result)


def _codegen_dots_into(context, builder, sig, args):
    """:func:`dots_into` for ``D`` a multiple of the lane count: heads in fours, folds packed."""
    a, ar, b, br, out, orow, scale = args
    lanes = _Lanes(context, builder, sig.args[0], a, b)
    target = context.make_array(sig.args[4])(context, builder, out)
    row = builder.gep(target.data, [builder.mul(orow, lanes.heads)])
    groups = builder.udiv(lanes.heads, lanes.constant(4))
    four = ir.VectorType(lanes.vector.element, 4)
    scales = ir.Constant(four, ir.Undefined)
    for j in range(4):
        scales = builder.insert_element(scales, scale, ir.Constant(ir.IntType(32), j))

    def emit(vectors):
        with cgutils.for_range(builder, groups) as group:
            first = builder.mul(group.index, lanes.constant(4))
            heads = [lanes.head(vectors, (ar, br), builder.add(first, lanes.constant(i))) for i in range(4)]
            width = lanes.width
            pair = [lanes.fold(heads[0], 1, width, heads[1]), lanes.fold(heads[2], 1, width, heads[3])]
            width //= 2
            value = lanes.fold(pair[0], 2, width, pair[1])
            width //= 2
            while width > 1:
                value = lanes.fold(value, 4, width)
                width //= 2
            pointer = builder.bitcast(builder.gep(row, [first]), four.as_pointer())
            old = builder.load(pointer, align=lanes.align)
            builder.store(builder.fadd(old, builder.fmul(scales, value)), pointer, align=lanes.align)
        with cgutils.for_range_slice(
            builder, builder.mul(groups, lanes.constant(4)), lanes.heads, lanes.constant(1)
        ) as (
            head,
            _,
        ):
            value = lanes.head(vectors, (ar, br), head)
            width = lanes.width
            while width > 1:
                value = lanes.fold(value, 1, width)
                width //= 2
            pointer = builder.gep(row, [head])
            old = builder.load(pointer)
            dot = builder.extract_element(value, ir.Constant(ir.IntType(32), 0))
            builder.store(builder.fadd(old, builder.fmul(scale, dot)), pointer)

    lanes.by_vectors(emit)
    return context.get_dummy_value()


@intrinsic
def _vector_dots_into(typingctx, a, ar, b, br, out, orow, scale):
    """The packed part of :func:`dots_into` (``D`` a multiple of the lane count); int64 indices."""
    return types.void(a, types.int64, b, types.int64, out, types.int64, a.dtype), _codegen_dots_into


@intrinsic
def _vector_dot(typingctx, a, ar, b, br, h):
    """The vector part of :func:`dot_lanes` (``D >= W``); int64 indices."""
    return a.dtype(a, types.int64, b, types.int64, types.int64), _codegen_dot


@overload(dot_lanes, target="cpu")
def _dot_lanes_cpu(a, ar, b, br, h, lanes):
    if not _supported(a, b) or a.ndim != 3:
        return _dot_reference

    def vector(a, ar, b, br, h, lanes):
        depth = a.shape[2]
        count = _lane_count(depth, LANE_BYTES // a.itemsize)
        if count == 0:  # a head shorter than one vector: the sequential sum
            return _dot_reference(a, ar, b, br, h, lanes)
        total = _vector_dot(a, np.int64(ar), b, np.int64(br), np.int64(h))
        for d in range(depth // count * count, depth):
            total = total + a[ar, h, d] * b[br, h, d]
        return total

    return vector


@overload(dots_into, target="cpu")
def _dots_into_cpu(a, ar, b, br, out, orow, scale, lanes):
    if not _supported(a, b) or a.ndim != 3 or not _supported(out) or out.ndim != 2 or out.dtype != a.dtype:
        return _dots_reference
    cast = a.dtype

    def vector(a, ar, b, br, out, orow, scale, lanes):
        depth = a.shape[2]
        count = _lane_count(depth, LANE_BYTES // a.itemsize)
        if count > 0 and depth % count == 0:
            _vector_dots_into(a, np.int64(ar), b, np.int64(br), out, np.int64(orow), cast(scale))
        else:
            for h in range(a.shape[1]):
                out[orow, h] += scale * dot_lanes(a, ar, b, br, h, lanes)

    return vector

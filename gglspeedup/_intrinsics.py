"""Memory instructions the CPU kernels need and Numba does not expose, as LLVM intrinsics.

Shared by the sampling and the gather kernels (one home, one rule for ``llvm.prefetch``'s name):

- :func:`prefetch` asks for the cache line of ``array[index]`` (1-D) ahead of use, and
  :func:`prefetch_row` for the lines of ``array[row]`` (2-D). A random row or map entry is a fresh
  DRAM access that the hardware prefetchers cannot predict; announcing it a few iterations (or KiB
  of output) ahead keeps more misses in flight per core. :func:`prefetch_row` hints "read", and
  :func:`prefetch` "write" (``prefetchw`` on x86: the sampler's relabel map entries it announces are
  read and then written, and its offsets share lines with them); both keep the line in every level.
- :func:`stream_line` copies 64 bytes with a non-temporal store (``!nontemporal`` metadata: one
  64-byte store that skips the cache). A normal store first reads the output line into the cache
  (read-for-ownership), so a gather into a buffer larger than the cache moves three bytes over
  the memory bus per useful byte; streamed stores move two.
- :func:`store_fence` orders those weakly ordered stores before the parallel loop's join
  (``fence seq_cst``: ``mfence`` on x86, ``dmb`` on ARM).

CPU only (the CUDA kernels never import this module). Kernels call these with indices already in
range; nothing here checks bounds.
"""

from __future__ import annotations

import llvmlite.ir as ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["prefetch", "prefetch_row", "stream_line", "store_fence"]

_BYTE_PTR = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_LINE = ir.VectorType(ir.IntType(64), 8)  # 64 bytes


def _element_pointer(context, builder, array_type, array, row, col):
    """``&array[row, col]`` as an ``i8*``; ``row`` and ``col`` are ``(value, numba type)`` pairs."""
    array = context.make_array(array_type)(context, builder, array)
    indices = [context.cast(builder, value, kind, types.intp) for value, kind in (row, col)]
    pointer = cgutils.get_item_pointer(context, builder, array_type, array, indices)
    return builder.bitcast(pointer, _BYTE_PTR)


# llvm.prefetch is overloaded on its pointer argument, so its name carries the pointer's mangling:
# "p0i8" where llvmlite writes typed pointers (``i8*``), "p0" where it writes opaque ones (``ptr``).
# llvmlite's own ``intrinsic_name`` of the pointer type is that mangling, whatever the LLVM version.
_PREFETCH = "llvm.prefetch." + _BYTE_PTR.intrinsic_name


def _emit_prefetch(builder, pointer, write: bool) -> None:
    """``llvm.prefetch(pointer, read 0 / write 1, locality 3 = keep in all cache levels, data cache = 1)``."""
    function = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [_BYTE_PTR, _I32, _I32, _I32]), _PREFETCH
    )
    hints = [ir.Constant(_I32, int(write)), ir.Constant(_I32, 3), ir.Constant(_I32, 1)]
    builder.call(function, [pointer, *hints])


@intrinsic
def prefetch(typingctx, array, index):
    """Prefetch, for writing, the cache line holding ``array[index]`` of a 1-D array (no effect on
    results)."""
    signature = types.void(array, index)

    def codegen(context, builder, sig, args):
        view = context.make_array(sig.args[0])(context, builder, args[0])
        position = context.cast(builder, args[1], sig.args[1], types.intp)
        pointer = cgutils.get_item_pointer(context, builder, sig.args[0], view, [position], wraparound=False)
        _emit_prefetch(builder, builder.bitcast(pointer, _BYTE_PTR), write=True)
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def prefetch_row(typingctx, array, row, lines):
    """Prefetch ``lines`` consecutive 64-byte lines from ``&array[row, 0]`` (read, into all levels)."""
    signature = types.void(array, row, lines)

    def codegen(context, builder, sig, args):
        start = _element_pointer(
            context,
            builder,
            sig.args[0],
            args[0],
            (args[1], sig.args[1]),
            (context.get_constant(types.intp, 0), types.intp),
        )
        count = context.cast(builder, args[2], sig.args[2], types.intp)
        with cgutils.for_range(builder, count) as loop:
            line = builder.gep(start, [builder.mul(loop.index, ir.Constant(loop.index.type, 64))])
            _emit_prefetch(builder, line, write=False)
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def stream_line(typingctx, source, source_row, out, out_row, col):
    """Copy the 64 bytes at ``&source[source_row, col]`` to ``&out[out_row, col]``, bypassing the cache.

    The destination must be 64-byte aligned (the store is an aligned 64-byte vector store); the
    source may have any alignment.
    """
    signature = types.void(source, source_row, out, out_row, col)

    def codegen(context, builder, sig, args):
        col = (args[4], sig.args[4])
        src = _element_pointer(context, builder, sig.args[0], args[0], (args[1], sig.args[1]), col)
        dst = _element_pointer(context, builder, sig.args[2], args[2], (args[3], sig.args[3]), col)
        value = builder.load(builder.bitcast(src, _LINE.as_pointer()), align=1)
        store = builder.store(value, builder.bitcast(dst, _LINE.as_pointer()), align=64)
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(_I32, 1)]))
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def store_fence(typingctx):
    """Make this thread's streamed stores visible before it reports its work done."""
    signature = types.void()

    def codegen(context, builder, sig, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return signature, codegen

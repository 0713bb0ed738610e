"""The kernels' side of :mod:`gglspeedup._interrupt`: :func:`stop_requested`, a check of the
one-byte stop flag a long CPU kernel polls between blocks of its work.

A kernel takes the flag as a trailing ``stop_flag=None`` argument: called without it (every short
call, and every existing caller) the check compiles to the constant ``False``, so that kernel
carries no code for it; called with the array (:meth:`gglspeedup._interrupt.interruptible.run`) it
is one atomic (relaxed) load. Atomic, because another thread sets the flag while the kernel runs:
a plain load of memory the loop never writes is loop-invariant to the compiler, which hoists it
out of the loop and never sees the flag change.
"""

from __future__ import annotations

import llvmlite.ir as ir
from numba import types
from numba.extending import intrinsic, overload

__all__ = ["stop_requested"]


def stop_requested(stop_flag) -> bool:
    """Whether the flag ``stop_flag`` (a uint8 array of one element, or ``None``) is set."""
    return stop_flag is not None and stop_flag[0] != 0


@intrinsic
def _flag_is_set(typingctx, flag):
    """``flag[0] != 0`` read with a relaxed atomic load (never hoisted out of a loop)."""

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = builder.bitcast(array.data, ir.IntType(8).as_pointer())
        value = builder.load_atomic(pointer, "monotonic", 1)
        return builder.icmp_unsigned("!=", value, ir.Constant(ir.IntType(8), 0))

    return types.boolean(flag), codegen


@overload(stop_requested)
def _overload_stop_requested(stop_flag):
    if isinstance(stop_flag, (types.NoneType, types.Omitted)):
        return lambda stop_flag: False
    return lambda stop_flag: _flag_is_set(stop_flag)

"""The direct launch path of :mod:`gglspeedup._launch`: argument kinds, the parameter layout
numba-cuda's ``_Kernel._prepare_args`` uses, and (on a real GPU) the same results as numba's path."""

import ctypes
from collections import namedtuple

import numpy as np
import pytest

from gglspeedup import _launch

from conftest import to_host

Pair = namedtuple("Pair", "left right")


class FakeArray:
    """What :func:`_launch._key` and :func:`_launch._flatten` read off a CuPy array."""

    def __init__(self, array, pointer=0x7F0000001000):
        self.dtype, self.ndim, self.shape, self.strides = array.dtype, array.ndim, array.shape, array.strides
        self.size, self.itemsize, self.flags = array.size, array.itemsize, array.flags
        self.data = type("Memory", (), {"ptr": pointer})()


def test_keys_tell_apart_what_selects_an_overload():
    base = np.zeros((4, 6), np.int64)
    key = _launch._key((FakeArray(base), 3), FakeArray)
    assert key == _launch._key((FakeArray(np.ones((5, 7), np.int64)), 9), FakeArray)  # values do not matter
    others = [
        (FakeArray(base.astype(np.int32)), 3),  # dtype
        (FakeArray(base[0]), 3),  # rank
        (FakeArray(base[:, ::2]), 3),  # layout
        (FakeArray(base), 2**63),  # an int numba types as uint64
        (FakeArray(base), np.int64(3)),
        (FakeArray(base), 3.0),
        (FakeArray(base), True),
    ]
    keys = [_launch._key(args, FakeArray) for args in others]
    assert key not in keys and len(set(keys)) == len(keys)
    record = Pair(FakeArray(base), FakeArray(base[0]))
    assert _launch._key((record,), FakeArray) != _launch._key((Pair(FakeArray(base), FakeArray(base)),), FakeArray)
    assert _launch._key((object(),), FakeArray) is None  # unknown kinds stay on numba's path
    assert _launch._key((Pair(FakeArray(base), object()),), FakeArray) is None
    assert _launch._key((np.zeros(3),), FakeArray) is None  # host arrays need numba's view


def test_parameters_are_laid_out_as_numba_prepares_them():
    from numba.cuda import types
    from numba.cuda.dispatcher import _Kernel

    class Overload:  # numba's own _prepare_args for scalars, as the direct path calls it
        extensions = ()
        _prepare_args = _Kernel._prepare_args

    table = np.zeros((4, 6), np.float32)[:, ::2]
    column = np.zeros(5, np.int64)
    argtypes = (
        types.Array(types.float32, 2, "A"),
        types.NamedUniTuple(types.Array(types.int64, 1, "C"), 2, Pair),
        types.int64,
        types.uint64,
        types.float32,
        types.boolean,
    )
    record = Pair(FakeArray(column, 0x2000), FakeArray(column[:3], 0x3000))
    args = (FakeArray(table, 0x1000), record, 7, 2**63 + 1, 0.5, True)
    params = []
    for ty, arg in zip(argtypes, args):
        _launch._flatten(Overload(), ty, arg, FakeArray, 0, params)

    class NumbaView:  # a numba device array an owner made once: its own attribute names
        def __init__(self, array, pointer):
            self.size, self.dtype, self.shape, self.strides = array.size, array.dtype, array.shape, array.strides
            self.device_ctypes_pointer = type("Pointer", (), {"value": pointer})()

    _launch._flatten(Overload(), argtypes[0], NumbaView(table, 0x4000), FakeArray, 0, params, NumbaView)
    values = [getattr(p, "value", p) for p in params]
    # meminfo, parent, size, itemsize, data, shape..., strides... per array; scalars by value
    assert values == [
        *(0, 0, 12, 4, 0x1000, 4, 3, 24, 8),
        *(0, 0, 5, 8, 0x2000, 5, 8),
        *(0, 0, 3, 8, 0x3000, 3, 8),
        *(7, 2**63 + 1, 0.5, True),
        *(0, 0, 12, 4, 0x4000, 4, 3, 24, 8),
    ]
    assert type(params[-13]).__name__ == "c_long" and type(params[-12]).__name__ == "c_ulong"


def test_a_learned_overload_launches_directly_on_cupys_stream():
    # _Direct's plumbing with stand-ins for CuPy, numba and cuda.core (the GPU test below runs it for real)
    import types as pytypes

    from numba.cuda import types
    from numba.cuda.dispatcher import _Kernel

    signature = (types.Array(types.float32, 2, "A"), types.int64)

    def overload(argument_types):
        cufunc = pytypes.SimpleNamespace(kernel="the cufunc")
        library = pytypes.SimpleNamespace(get_cufunc=lambda: cufunc)
        fields = {"extensions": (), "debug": False, "cooperative": False, "_codelibrary": library}
        fields.update(argument_types=argument_types, _prepare_args=_Kernel._prepare_args)
        return type("Overload", (), fields)()

    class Kernel:
        def __init__(self, argument_types):
            self.overloads = {signature: overload(argument_types)}

    launched = []
    direct = _launch._Direct()
    direct.enabled, direct._core = (
        True,
        _launch._Core(
            FakeArray,
            (),
            lambda: pytypes.SimpleNamespace(ptr=0x77),
            lambda handle: ("stream", handle),
            lambda grid, block: ("config", grid, block),
            lambda *call: launched.append(call),
            lambda view: view,  # the "views" below are their own numba types
        ),
    )
    plain, with_defaults = Kernel(signature), Kernel((*signature, types.int64))
    args = (FakeArray(np.zeros((4, 6), np.float32)[:, ::2], 0x1000), 7)
    assert not direct.launch(plain, 2, 32, args)  # not learned yet: numba's path
    for kernel in (plain, with_defaults):
        direct.learn(kernel, args, signature)
    assert not direct.launch(with_defaults, 2, 32, args)  # numba filled in a default: its path
    assert direct.launch(plain, 2, 32, args)
    ((stream, config, cufunc, *params),) = launched
    assert (stream, config, cufunc) == (("stream", 0x77), ("config", 2, 32), "the cufunc")
    assert [getattr(p, "value", p) for p in params] == [0, 0, 12, 4, 0x1000, 4, 3, 24, 8, 7]


@pytest.mark.gpu_hardware
def test_direct_launches_match_numbas_on_a_gpu(monkeypatch):
    import cupy
    from numba import cuda

    from gglspeedup.device import Device

    @cuda.jit
    def describe(table, record, count, big, scale, flag, out):
        out[0] = table.shape[0]
        out[1] = table.shape[1]
        out[2] = table[1, 2]
        out[3] = record.left[record.left.shape[0] - 1]
        out[4] = record.right.shape[0]
        out[5] = count
        out[6] = big >> 60
        out[7] = int(scale * 4)
        out[8] = 1 if flag else 0

    device = Device("cuda", 0)
    table = cupy.arange(60, dtype=np.int64).reshape(6, 10)[:, ::2]  # strided: layout "A"
    record = Pair(cupy.arange(7, dtype=np.int64), cupy.arange(3, dtype=np.int64))
    args = (table, record, 11, 2**63 + 5, 0.75, True)
    expected = [6, 5, 14, 6, 3, 11, 8, 3, 1]
    handles = []
    core = _launch._direct._imports()
    real_launch = core.launch

    def recorded(stream, *rest):
        handles.append(int(stream.handle))
        real_launch(stream, *rest)

    monkeypatch.setattr(_launch._direct, "_core", core._replace(launch=recorded))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        results = []
        for _ in range(3):  # numba's path, then the direct one twice
            out = cupy.full(9, -1, dtype=np.int64)
            _launch.launch(describe, device, 1, 1, *args, out)
            results.append(to_host(out).tolist())
    assert results == [expected] * 3
    assert _launch._direct.overloads[(describe, _launch._key((*args, out), cupy.ndarray))] is not None
    assert handles == [stream.ptr, stream.ptr]


def test_scalars_convert_as_numbas_prepare_args_converts_them():
    # the direct path's cached converters against numba-cuda's own _prepare_args, per scalar kind
    from numba.cuda import types
    from numba.cuda.dispatcher import _Kernel

    class Overload:
        extensions = ()
        _prepare_args = _Kernel._prepare_args

    cases = [
        (types.int64, 7),
        (types.int64, -(2**63)),
        (types.int64, np.int64(-5)),
        (types.uint64, 2**63 + 1),
        (types.uint64, np.uint64(2**64 - 1)),
        (types.int32, -3),
        (types.int32, np.int32(2**31 - 1)),
        (types.uint32, np.uint32(4_000_000_000)),
        (types.int16, 12),
        (types.uint8, np.uint8(255)),
        (types.intp, 9),
        (types.float64, 0.1),
        (types.float64, np.float64(-1.5e300)),
        (types.float32, 0.1),
        (types.float32, np.float32(3.25)),
        (types.boolean, True),
        (types.boolean, np.bool_(False)),
        (types.float16, np.float16(0.5)),  # numba's own code
        (types.complex128, 1 + 2j),  # numba's own code
    ]
    for ty, value in cases:
        ours, numbas = [], []
        _launch._flatten(Overload(), ty, value, FakeArray, 0, ours)
        Overload()._prepare_args(ty, value, 0, [], numbas)
        assert [type(p) for p in ours] == [type(p) for p in numbas], ty
        assert [getattr(p, "value", p) for p in ours] == [getattr(p, "value", p) for p in numbas], (ty, value)
        assert [type(getattr(p, "value", p)) for p in ours] == [type(getattr(p, "value", p)) for p in numbas]
    assert _launch._scalar_converter(types.float16) is None  # cached as numba's path
    assert _launch._scalar_converter(types.int64) is ctypes.c_int64

"""Compile every CUDA kernel of gglspeedup to PTX for a real GPU, on a machine without one.

The CUDA simulator runs kernels as Python and accepts code that numba-cuda's real pipeline
(typing for the device, NVVM) rejects; this script runs that pipeline for each kernel with the
argument types the drivers pass, for compute capability 9.0 (H100 / H200) by default:

    python tools/compile_ptx.py [--cc 9.0] [--out DIR]
    python tools/compile_ptx.py --list    # the variants and argument types, without compiling
    python tools/compile_ptx.py --typing-only --cpu-first   # no toolkit at all: what CI runs

It needs NVVM and NVRTC libraries but no GPU and no CUDA driver: where the CUDA toolkit is not
installed, ``pip install nvidia-cuda-nvrtc nvidia-nvvm`` (into any environment) and point
``LD_LIBRARY_PATH`` at the ``nvidia/cu13/lib`` folder they install. The current device is faked
(only its compute capability is read while compiling). Each sampling kernel's PTX is also checked
for fused multiply-adds: the row bodies avoid them so that a GPU computes the same bits as the CPU.
With ``--registers`` each kernel is also assembled by ``ptxas -v`` (from the CUDA toolkit, when
present) to report registers per thread and spills: occupancy, known without a GPU. Exits non-zero
when any kernel fails to compile or a sampling kernel contains ``fma``.

``--typing-only`` stops before NVVM (numba's typing and lowering to LLVM IR, the step that rejects
what the simulator accepts) and so needs no NVVM library at all; ``--cpu-first`` runs the CPU
paths of the kernels that share jitted helpers with the CUDA ones before anything is typed, as a
user's process does (the CUDA kernels of the diffusion layer once failed to type on an H200 only
after the CPU's float32 path had compiled in the same process, with a cold cache: an overload
inlined for the CPU was reused for CUDA). ``tests/test_cuda_typing.py`` runs both in a fresh process;
``--cpu-done PATH`` creates ``PATH`` once the CPU paths ran, so a script can take their kernels
from the cache while the typing goes on (``scripts/test.sh`` does).
"""

from __future__ import annotations

import argparse
import os
import sys
import types as pytypes


def _fake_device(cc):
    import numba.cuda.compiler as compiler
    import numba.cuda.cudadrv.nvrtc as nvrtc
    import numba.cuda.dispatcher as dispatcher

    device = pytypes.SimpleNamespace(compute_capability=cc)
    dispatcher.get_current_device = compiler.get_current_device = lambda: device
    nvrtc.get_supported_ccs = lambda: [cc]


def _kernels():
    """``(name, python function, argument types, check for fma)`` for every kernel and variant."""
    import numpy as np
    from numba import typeof, types

    from gglspeedup.feature._kernels import gather_cuda
    from gglspeedup.sampling._kernels import cuda as sampling_cuda
    from gglspeedup.sampling._kernels import cuda_links, cuda_typed, reindex
    from gglspeedup.sampling._kernels.records import GraphArrays, SampleOptions

    i64 = types.Array(types.int64, 1, "C")
    marker = np.int8(0)
    plain = typeof(SampleOptions(False, False, False, marker, marker, marker, marker))  # sample(): no exclusion code
    ex, flags = np.zeros(1, np.int64), np.zeros(1, np.uint8)
    linked = typeof(SampleOptions(False, False, False, ex, flags, marker, marker))  # link batch
    # Temporal samplers (disjoint: stride > 0 at run time): times per edge and per tree, int or float
    timed = [
        (f"{np.dtype(t).name} times{', excluding' if e is not marker else ''}", typeof(SampleOptions(
            False, False, False, e, f, np.zeros(1, t), np.zeros(1, t), True, 1
        )))
        for t in (np.int64, np.float64)
        for e, f in ((marker, marker), (ex, flags))
    ]  # fmt: skip
    ints = np.zeros(1, np.int64)
    narrow = np.zeros(1, np.int32)
    # Graphs at both index widths (int32 indices and edge ids while ids fit; int64 beyond), each
    # with float64 and float32 weights: one kernel body, four compiled variants.
    for width, weight in (
        (np.int64, np.float64),
        (np.int64, np.float32),
        (np.int32, np.float64),
        (np.int32, np.float32),
    ):
        index = ints if width == np.int64 else narrow
        graph = typeof(GraphArrays(ints, index, index, np.zeros(1, weight), ints, np.zeros(1)))
        tag = f"{np.dtype(width).name} indices, {np.dtype(weight).name}"
        for mode, options in (("", plain), (", excluding", linked), *((f", {n}", o) for n, o in timed)):
            count = (graph, options, i64, types.int64, i64)
            yield f"sampling count ({tag} weights{mode})", sampling_cuda._count_kernel, count, True
            fill = (
                graph,
                options,
                i64,
                types.int64,
                types.int64,
                types.uint64,
                types.boolean,
                *([i64] * 8),
                types.int64,
                i64,  # the corrupt-id flag
            )
            yield f"sampling fill + insert ({tag} weights{mode})", sampling_cuda._fill_insert_kernel, fill, True
            table = types.Array(types.int64, 2, "C")  # a typed hop's relation table
            typed_count = (graph, options, i64, table, types.int64, i64)
            yield f"typed count ({tag} weights{mode})", cuda_typed._typed_count_kernel, typed_count, True
            states = types.Array(types.uint64, 2, "C")  # the same table's RNG row
            typed_fill = (
                graph,
                options,
                i64,
                table,
                states,
                types.int64,
                types.boolean,
                *([i64] * 7),
                types.int64,
                i64,
            )
            yield f"typed fill + insert ({tag} weights{mode})", cuda_typed._typed_fill_insert_kernel, typed_fill, True
        from gglspeedup.sampling._kernels.links import NegativeTimes

        for when, eligible in (("", typeof(marker)), (", temporal", typeof(NegativeTimes(ints, ints, ints, ints)))):
            negatives = (
                graph,
                types.uint64,
                types.UniTuple(types.int64, 3),  # (num_sources, num_targets, row_base)
                i64,
                types.boolean,
                types.int64,
                types.boolean,
                eligible,
                i64,
                i64,
                types.Array(types.int8, 1, "C"),
            )
            yield f"link negatives ({tag} weights{when})", cuda_links._negatives_kernel, negatives, True
        flag = types.boolean
        yield (
            f"link exclusion count ({tag} weights)",
            cuda_links._count_matches_kernel,
            (graph, i64, i64, flag, i64, i64),
            False,
        )
        fill = (graph, i64, i64, flag, i64, i64, i64)
        yield f"link exclusion fill ({tag} weights)", cuda_links._fill_matches_kernel, fill, False
    yield "relabel flag", reindex.flag_kernel, (i64, i64, types.int64, i64), False
    table = types.Array(types.int64, 2, "C")
    typed_sizes = (table, types.int64, types.boolean, i64, i64, i64, i64, i64)
    yield "typed sizes", cuda_typed._typed_sizes_kernel, typed_sizes, False
    typed_compact = (i64, table, types.int64, types.int64, types.boolean, *([i64] * 11))
    yield "typed compact", cuda_typed._typed_compact_kernel, typed_compact, False
    compact = (types.int64, types.int64, types.int64, types.boolean, *([i64] * 10))
    yield "relabel compact", reindex.compact_kernel, compact, False
    yield from _pooling_kernels()
    for word in (types.uint64, types.uint32, types.uint16, types.uint8):
        for index in (types.int32, types.int64):
            flat = types.Array(word, 1, "C")
            signature = (flat, flat, i64, types.Array(index, 1, "C"), flat, types.int64, types.int64, i64)
            yield f"gather ({word} words, {index} ids)", gather_cuda.gather_two_tier, signature, False
            checked = (*signature, types.int64, i64, types.int64)  # num_rows, flag, key_base
            yield f"checked gather ({word} words, {index} ids)", gather_cuda.gather_two_tier_checked, checked, False
    yield from _attention_kernels()
    yield from _aggregate_kernels()


def _aggregate_kernels():
    """The fused CSR aggregation of layer-wise inference, at both index widths. Float sums: the
    scaled (GCN) branch's multiply-add may be fused, so no fma check (the unscaled sum has no
    multiply; the simulator matches the CPU bit for bit)."""
    from numba import types

    from gglspeedup._aggregate_cuda import _aggregate_kernel

    rows = types.Array(types.float32, 2, "C")
    scale = types.Array(types.float32, 1, "C")
    flag = types.boolean
    for index in (types.int32, types.int64):
        csr = types.Array(index, 1, "C")
        signature = (types.int64, csr, csr, rows, scale, flag, flag, flag, rows)
        yield f"csr aggregate ({index} indices)", _aggregate_kernel, signature, False


def _attention_kernels():
    """The sequence-pattern kernels (integer draws: checked for fma like the samplers) and the fused
    attention kernels (float arithmetic: fma allowed, so a real GPU may differ from the CPU in the
    last bits; the simulator matches bit for bit)."""
    from numba import types

    from gglspeedup.attention.sequence._kernels import diffusion_cuda, pattern_cuda

    i64 = types.Array(types.int64, 1, "C")
    u64 = types.Array(types.uint64, 1, "C")
    f64 = types.Array(types.float64, 1, "C")
    scalar = types.int64
    for index in (types.int32, types.int64):
        indices = types.Array(index, 1, "C")
        shape = (i64, scalar, i64, i64, scalar, scalar, scalar)
        yield f"pattern count ({index})", pattern_cuda._count_kernel, (*shape, scalar, i64), True
        fill = (*shape, scalar, f64, u64, types.Array(index, 1, "C"), indices)
        yield f"pattern fill ({index})", pattern_cuda._fill_kernel, fill, True
    for dtype in ("float32", "float64"):
        value = getattr(types, dtype)
        nodes = types.Array(value, 3, "C")
        edges = types.Array(value, 2, "C")
        ints = types.Array(types.int32, 1, "C")
        pad = types.Array(types.uint8, 1, "C")
        kernels = diffusion_cuda._KERNELS[dtype]
        flag = types.boolean
        bits = types.Array(types.uint8, 2, "C")
        f64v, u64v = types.float64, types.uint64
        score = (ints, ints, scalar, scalar, nodes, nodes, flag, pad, scalar, edges, pad, flag, f64v, u64v, bits)
        yield f"attention scores ({dtype})", kernels["scores"], score, False
        drop = (flag, bits, value, flag, f64v, u64v, bits, value)  # edge and node dropout
        spmm = (ints, ints, scalar, scalar, edges, nodes, nodes, value, flag, value, nodes, flag, edges, *drop)
        yield f"attention propagate ({dtype})", kernels["spmm"], spmm, False
        spmm_t = (
            ints, ints, ints, scalar, scalar, edges, flag, nodes, nodes, value, flag, edges, flag, edges, nodes, value,
            flag, bits, value, flag, bits, value, flag, nodes, value,
        )  # fmt: skip
        yield f"attention transposed propagate + edge gradients ({dtype})", kernels["spmm_t"], spmm_t, False
        permuted = (flag, ints)  # the attention in the out-CSR's order, read through the edge positions
        back = (ints, ints, scalar, scalar, edges, *permuted, edges, flag, pad, scalar, flag, bits, value, nodes, nodes)
        yield f"attention softmax backward + query gradient ({dtype})", kernels["score_grad"], back, False
        transpose = (ints, ints, scalar, scalar, edges, flag, flag, bits, value, edges, scalar)
        yield f"attention weights in out-CSR order ({dtype})", kernels["transpose_weights"], transpose, False
        keep = (ints, ints, scalar, scalar, bits, flag, flag, bits, types.uint8, bits, scalar)  # edge keep bits
        yield f"attention keep bits in out-CSR order ({dtype} driver)", kernels["transpose_weights"], keep, False
        yield f"attention out-degrees ({dtype})", kernels["colsum"], (ints, ints, scalar, scalar, edges, edges), False


def _pooling_kernels():
    """The attention-pooling kernels (one thread per (head, graph) problem), as the driver calls
    them: float64 head-major arrays, int64 structure and labels. Float kernels: no fma check."""
    import numpy as np
    from numba import typeof, types

    from gglspeedup.attention.pooling._kernels import cuda as pooling_cuda
    from gglspeedup.attention.pooling._kernels.fused_lasso import FUSED_WORK_INT_FIELDS, FusedWork
    from gglspeedup.attention.pooling._kernels.structure import BatchArrays

    i64 = types.Array(types.int64, 1, "C")
    f64 = types.Array(types.float64, 1, "C")
    i64_2d = types.Array(types.int64, 2, "C")
    f64_2d = types.Array(types.float64, 2, "C")
    ints, floats = np.zeros(1, np.int64), np.zeros(1)
    graph = typeof(BatchArrays(ints, ints, ints, ints, ints, ints, ints, floats, ints, ints, ints))
    ints2, floats2 = np.zeros((1, 1), np.int64), np.zeros((1, 1))
    work = typeof(FusedWork(*([ints2] * len(FUSED_WORK_INT_FIELDS)), floats2, floats2, floats2))
    yield "pooling softmax", pooling_cuda._softmax_kernel, (i64, f64_2d, f64_2d), False
    yield "pooling softmax backward", pooling_cuda._softmax_backward_kernel, (i64, *[f64_2d] * 3), False
    yield "pooling sparsemax", pooling_cuda._sparsemax_kernel, (i64, f64_2d, f64, f64_2d), False
    signature = (i64, f64_2d, f64_2d, f64, f64_2d, f64_2d, f64_2d)
    yield "pooling sparsemax backward", pooling_cuda._sparsemax_backward_kernel, signature, False
    signature = (graph, f64_2d, f64, f64, work, f64_2d, i64_2d, i64_2d, f64_2d, i64_2d, f64_2d, types.boolean)
    yield "pooling fused lasso (+ sparsemax)", pooling_cuda._fused_kernel, signature, False
    signature = (i64, f64_2d, f64_2d, i64_2d, i64_2d, f64, f64_2d, work, f64_2d, f64_2d, f64_2d, f64_2d)
    yield "pooling fused lasso backward", pooling_cuda._fused_backward_kernel, signature, False


def _registers(ptx: str, cc) -> str:
    """``ptxas -v``'s register and spill report for ``ptx`` ('' without ptxas on the PATH or in
    CUDA_HOME). PTX newer than this ptxas is relabelled to the version it reads (same instructions)."""
    import re
    import shutil
    import subprocess
    import tempfile

    ptxas = shutil.which("ptxas") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas")
    if not os.path.exists(ptxas):
        return ""
    arch = f"sm_{cc[0]}{cc[1]}"
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as handle:
        handle.write(ptx)
        handle.flush()
        done = subprocess.run(
            [ptxas, f"-arch={arch}", "-v", handle.name, "-o", os.devnull], capture_output=True, text=True
        )
        supported = re.search(r"current version is '([\d.]+)'", done.stderr)
        if supported:
            handle.seek(0)
            handle.write(re.sub(r"^\.version [\d.]+", f".version {supported.group(1)}", ptx, flags=re.M))
            handle.truncate()
            handle.flush()
            done = subprocess.run(
                [ptxas, f"-arch={arch}", "-v", handle.name, "-o", os.devnull], capture_output=True, text=True
            )
    used = re.search(r"Used (\d+) registers", done.stderr)
    spills = re.search(r"(\d+) bytes spill stores", done.stderr)
    if used is None:
        return f"ptxas failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
    return f"{used.group(1)} registers" + (
        f", {spills.group(1)} bytes spilled" if spills and spills.group(1) != "0" else ""
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="9.0", help="compute capability, e.g. 9.0 (default), 8.0, 10.0")
    parser.add_argument("--out", default=None, help="folder to write each kernel's PTX into")
    parser.add_argument(
        "--registers",
        action="store_true",
        help="also assemble each kernel with ptxas -v and report registers per thread and spills",
    )
    parser.add_argument(
        "--list", action="store_true", help="only list the kernel variants and argument types (needs no toolchain)"
    )
    parser.add_argument(
        "--typing-only", action="store_true", help="type and lower to LLVM IR only (no NVVM, no toolkit: CI)"
    )
    parser.add_argument(
        "--cpu-first", action="store_true", help="run the CPU paths that share helpers with the kernels first"
    )
    parser.add_argument(
        "--cpu-done",
        default=None,
        metavar="PATH",
        help="with --cpu-first: create PATH once the CPU paths ran (their kernels are in Numba's cache)",
    )
    args = parser.parse_args(argv)
    if args.list:
        variants = list(_kernels())
        for name, kernel, signature, _ in variants:
            print(f"{name}: {kernel.py_func.__module__}.{kernel.py_func.__name__}{tuple(signature)}")
        print(f"{len(variants)} kernel variants")
        return 0
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        parser.error("unset NUMBA_ENABLE_CUDASIM: the simulator has no PTX to compile")
    cc = tuple(int(part) for part in args.cc.split("."))
    if args.cpu_first:
        _run_cpu_paths()
        if args.cpu_done:
            os.makedirs(os.path.dirname(os.path.abspath(args.cpu_done)), exist_ok=True)
            open(args.cpu_done, "w").close()
    _fake_device(cc)
    from numba import cuda

    failures = 0
    if args.typing_only:
        return _type_only(cc)
    for name, kernel, signature, no_fma in _kernels():
        try:
            bounds = getattr(kernel, "targetoptions", {}).get("launch_bounds")  # as the kernel declares them
            ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=cc, launch_bounds=bounds)
        except Exception as error:  # report every kernel, then fail
            failures += 1
            print(f"FAIL  {name}: {type(error).__name__}: {_first_line(error)}")
            continue
        fused = no_fma and "fma." in ptx
        failures += fused
        registers = _registers(ptx, cc) if args.registers else ""
        print(
            f"{'FAIL' if fused else 'ok  '}  {name}: {len(ptx.splitlines())} PTX lines"
            + (f", {registers}" if registers else "")
            + (" (contains fma: CPU and GPU bits could differ)" if fused else "")
        )
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            slug = "".join(c if c.isalnum() else "_" for c in name).strip("_")
            with open(os.path.join(args.out, f"{slug}.ptx"), "w") as handle:
                handle.write(ptx)
    print(f"{failures} failure(s); compute capability {args.cc}")
    return 1 if failures else 0


def _first_line(error) -> str:
    """The first non-blank line of ``error``'s message (numba's start with a blank line)."""
    return next((line for line in str(error).splitlines() if line.strip()), "(no message)")


def _run_cpu_paths() -> None:
    """The CPU kernels that share jitted helpers with CUDA kernels, compiled and run first (both
    float widths, gradients, masks and dropout), as in a process that trains on the CPU before
    it meets a GPU."""
    import warnings

    import numpy as np

    from gglspeedup.attention import (
        SequencePattern,
        diffusion_attention,
        fractional_attention,
        gfusedmax_numpy,
        softmax_numpy,
        sparsemax_numpy,
    )

    try:
        import torch
    except ImportError:  # the diffusion layer is torch's; the pooling kernels below still run
        torch = None
    if torch is not None:
        graph = SequencePattern(window=4, num_random=2, num_global=1, seed=1).csc(10, batch=2, step=2)
        mask = torch.zeros(2, 10, dtype=torch.bool)
        mask[1, 7:] = True
        for dtype in (torch.float32, torch.float64):
            for head_dim in (3, 21):  # the scalar path and the lanes
                q, k, v = (torch.randn(2, 10, 2, head_dim, dtype=dtype, requires_grad=True) for _ in range(3))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    for function, kwargs in ((diffusion_attention, {"hops": 2, "dropout": 0.2}),
                                             (fractional_attention, {"steps": 1, "terms": 2})):  # fmt: skip
                        out = function(q, k, v, graph, key_padding_mask=mask, **kwargs)
                        torch.autograd.grad(out.sum(), (q, k, v))
    sizes = np.array([3, 4])
    edges = [np.array([[0, 1], [1, 2]]), np.array([[0, 1], [2, 3]])]
    scores = np.random.default_rng(0).standard_normal((7, 2))
    grad = np.ones_like(scores)
    for result in (
        softmax_numpy(scores, sizes=sizes),
        sparsemax_numpy(scores, sizes=sizes, gamma=0.5),
        gfusedmax_numpy(scores, sizes=sizes, edge_index=edges, lam=np.array([0.3, 0.1]), gamma=np.array([1.0, 1.0])),
    ):
        result.vjp(grad)


def _type_only(cc) -> int:
    """Numba's typing and lowering (to LLVM IR) of every kernel for ``cc``, without NVVM."""
    from numba import types
    from numba.cuda import compiler

    failures = 0
    variants = list(_kernels())
    typed = set()
    for name, kernel, signature, _ in variants:
        # Two drivers may name one variant (the float32 and float64 diffusion drivers share the
        # int32 keep-bits transpose): its typing is the same, so it is typed once.
        if (kernel.py_func, tuple(signature)) in typed:
            continue
        typed.add((kernel.py_func, tuple(signature)))
        try:
            compiler.compile_cuda(kernel.py_func, types.void, signature, cc=cc)
        except Exception as error:
            failures += 1
            print(f"FAIL  {name}: {type(error).__name__}: {_first_line(error)}")
    print(f"{len(variants) - failures} of {len(variants)} kernels typed and lowered; {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

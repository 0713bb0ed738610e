"""The checks of ``python -m gglspeedup.bench gpu``, each run in its own process.

    python -m gglspeedup.bench.gpu.checks NAME --size tiny|full --json PATH [--budget-s SECONDS]

(``--budget-s``: the ``attention`` check's budget, 120 s by default, for a longer run of it alone.)

Each check returns a dict: ``status`` ("pass" / "fail" / "skip"), ``summary`` (one line) and its
``figures`` or ``details``; a failed check raises (the runner records the traceback). Checks run
on ``cuda:0``, a real GPU, or numba's simulator under ``NUMBA_ENABLE_CUDASIM=1`` (``--size tiny``
there: every thread is Python), so the whole command is exercised in CI before it meets a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback

import numpy as np

from ._common import _device

__all__ = ["CHECKS", "SIZES", "run_check", "main"]

# Problem sizes: "full" for a GPU (the 2.4M-node / ~62M-edge graph), "tiny" for the simulator.
SIZES = {
    "full": {
        "nodes": 2_400_000,
        "degree": 26,
        "batches": (1, 16, 256, 4096, 65536),
        "repeats": 5,
        "check_nodes": 20_000,
        "rows": 2_000_000,
        "dim": 128,
        "ids": 200_000,
        "back_to_back_calls": 50,
        "staging_mb": 200,
        "typed_papers": 2_000_000,
        "typed_batches": (1, 1024, 16384),
    },
    "tiny": {
        "nodes": 120,
        "degree": 4,
        "batches": (1, 8),
        "repeats": 2,
        "check_nodes": 40,
        "rows": 64,
        "dim": 6,
        "ids": 16,
        "back_to_back_calls": 2,
        "staging_mb": 0,
        "typed_papers": 150,
        "typed_batches": (1, 6),
    },
}


def environment(size: dict) -> dict:
    """Versions, the GPU and its memory: the header of the report."""
    import numba

    import gglspeedup as gg

    device = _device()
    info = {
        "gglspeedup": gg.__version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "numba": numba.__version__,
        "simulated": device.simulated,
    }
    try:
        import numba_cuda

        info["numba_cuda"] = getattr(numba_cuda, "__version__", "?")
    except ImportError:
        pass
    for name in ("cupy", "torch"):
        try:
            info[name] = __import__(name).__version__
        except ImportError:
            info[name] = None
    if not device.simulated:
        import cupy

        properties = cupy.cuda.runtime.getDeviceProperties(device.index)
        info.update(
            gpu=properties["name"].decode(),
            memory_gb=round(properties["totalGlobalMem"] / 2**30, 1),
            multiprocessors=properties["multiProcessorCount"],
            driver=cupy.cuda.runtime.driverGetVersion(),
            runtime=cupy.cuda.runtime.runtimeGetVersion(),
        )
    gpu = info.get("gpu", "numba's CUDA simulator")
    return {"status": "pass", "summary": f"{gpu}; numba {info['numba']}, cupy {info['cupy']}", "figures": info}


def tests(size: dict) -> dict:
    """The GPU test suite (``-m "cuda or gpu_hardware"``; on the simulator, the GPU-path tests only)."""
    import importlib.util
    import os
    import subprocess

    import gglspeedup

    root = os.path.dirname(os.path.dirname(os.path.abspath(gglspeedup.__file__)))
    folder = os.path.join(root, "tests")
    if not os.path.isdir(folder):
        return {"status": "skip", "summary": "no tests/ folder beside the package (an installed wheel)"}
    target = [os.path.join(folder, "test_gpu_path.py")] if size is SIZES["tiny"] else [folder]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "cuda or gpu_hardware", *target]
    if size is not SIZES["tiny"] and importlib.util.find_spec("xdist") is not None:
        # On a GPU most of the suite's time is numba compiling kernels on the CPU: spread it over
        # the cores (every worker opens its own context on the one GPU).
        command[4:4] = ["-n", str(min(12, os.cpu_count() or 1))]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    if done.returncode != 0:
        raise AssertionError(f"GPU tests failed: {last}\n{done.stdout[-4000:]}")
    return {"status": "pass", "summary": last}


def _graph(nodes: int, degree: float, seed: int = 0, weights: bool = False):
    import gglspeedup as gg

    graph = gg.datasets.synthetic_powerlaw(nodes, degree, seed=seed)
    ids = np.arange(graph.num_edges, dtype=np.int64)[::-1].copy()
    w = np.random.default_rng(seed).random(graph.num_edges) if weights else None
    return gg.CSRGraph(graph.indptr, graph.indices, edge_ids=ids, weights=w)


def bitwise(size: dict) -> dict:
    """CPU == GPU bit for bit, per placement and sampling mode; the gather per cache and pin mode."""
    import gglspeedup as gg
    from gglspeedup.testing import assert_same_sample

    device = _device()
    graph = _graph(size["check_nodes"], size["degree"], weights=True)
    seeds = np.random.default_rng(1).integers(0, graph.num_nodes, 12 if size is SIZES["tiny"] else 2048)
    seeds[:3] = seeds[0]  # duplicate seeds keep their place and draws
    cases = 0
    modes = [dict(), dict(replace=True), dict(weighted=True), dict(weighted=True, replace=True)]
    for placement in ("device", "pinned"):
        for options in modes:
            for fanouts in ([4, 3], [-1, 2], [3, 0, 2]):
                cpu = gg.NeighborSampler(graph, fanouts, seed=7, **options).sample(seeds, key=5)
                gpu = gg.NeighborSampler(graph, fanouts, seed=7, device=device, placement=placement, **options)
                assert_same_sample(gpu.sample(seeds, key=5), cpu)
                cases += 1
    x = np.random.default_rng(2).standard_normal((graph.num_nodes, 5)).astype(np.float32)
    ids = np.concatenate([seeds, seeds[::-1]])
    for fraction in (0.0, 0.3, 1.0):
        for pin in ("copy", "register"):
            store = gg.FeatureStore(x, device=device, cache_size=int(fraction * x.nbytes), graph=graph, pin=pin)
            got = store[ids]
            np.testing.assert_array_equal(got if device.simulated else got.get(), x[ids])
            cases += 1
    return {"status": "pass", "summary": f"{cases} CPU == GPU cases identical (placements, modes, caches, pins)"}


def streams(size: dict) -> dict:
    """Sampling and gathering on a non-blocking CuPy stream while the legacy stream is busy, and a
    prefetching loader, against the CPU: the ordering races of one-stream-per-library code."""
    import gglspeedup as gg
    from gglspeedup.testing import assert_same_sample

    device = _device()
    graph = _graph(size["check_nodes"], size["degree"])
    x = np.random.default_rng(3).standard_normal((graph.num_nodes, 8)).astype(np.float32)
    seeds = np.arange(min(graph.num_nodes, 64 if size is SIZES["tiny"] else 4096))
    sampler = gg.NeighborSampler(graph, [5, 4, 3], seed=2, device=device)
    store = gg.FeatureStore(x, device=device, cache_size=x.nbytes // 3, graph=graph)
    expected = gg.NeighborSampler(graph, [5, 4, 3], seed=2).sample(seeds, key=9)
    if device.simulated:
        out = sampler.sample(seeds, key=9)
        rows = store[out.n_id]
    else:
        import cupy

        with device:
            busy = cupy.ones((4096, 4096), dtype=cupy.float32)
            for _ in range(8):  # seconds of work queued on the legacy default stream
                busy = busy @ busy
            with cupy.cuda.Stream(non_blocking=True) as stream:
                out = sampler.sample(cupy.asarray(seeds), key=9)
                rows = store[out.n_id]
                host = (out.n_id.get(), [(a.edge_index.get(), a.e_id.get(), a.size) for a in out.adjs], rows.get())
                stream.synchronize()
            out = gg.SampleOutput(host[0], [gg.Adj(*a) for a in host[1]])
            rows = host[2]
    assert_same_sample(out, expected)
    np.testing.assert_array_equal(rows, x[np.asarray(expected.n_id)])
    loaders = [
        gg.NodeLoader(s, f, seeds, 16, labels=np.arange(graph.num_nodes), prefetch=p, backend=None, seed=4)
        for s, f, p in (
            (gg.NeighborSampler(graph, [3, 2], seed=5), gg.FeatureStore(x), 0),
            (gg.NeighborSampler(graph, [3, 2], seed=5, device=device), store, 2),
        )
    ]
    count = 0
    for a, b in zip(*loaders):
        assert_same_sample(gg.SampleOutput(b.n_id, b.adjs), gg.SampleOutput(a.n_id, a.adjs))
        np.testing.assert_array_equal(b.x if device.simulated else b.x.get(), a.x)
        count += 1
    return {"status": "pass", "summary": f"stream-ordered sample + gather exact; {count} prefetched batches exact"}


def staging(size: dict) -> dict:
    """A device cache filled through many staging chunks (a cache larger than 64 MiB on a GPU),
    checked row by row against the table."""
    import gglspeedup as gg

    device = _device()
    if size["staging_mb"]:
        rows = size["staging_mb"] * 2**20 // (64 * 4)
        x = np.random.default_rng(5).standard_normal((rows, 64)).astype(np.float32)
        staging = 64 << 20
    else:  # the simulator: a tiny table in chunks of 3 rows
        x = np.random.default_rng(5).standard_normal((40, 6)).astype(np.float32)
        staging = 3 * x.shape[1] * 4
    order = np.random.default_rng(6).permutation(len(x))
    store = gg.FeatureStore(x, device=device, cache_size=x.nbytes, policy=order, staging=staging)
    table = store._tier.device_table
    cached = np.asarray(table if device.simulated else table.get()).view(np.float32)
    bad = np.flatnonzero((cached != x[order]).any(axis=1))
    chunks = -(-x.nbytes // staging)
    if len(bad):
        raise AssertionError(f"{len(bad)} of {len(x)} cached rows differ (first slot {bad[0]})")
    return {"status": "pass", "summary": f"{len(x)} rows ({x.nbytes / 2**20:.0f} MiB) in {chunks} chunks exact"}


CHECKS = {"environment": environment, "tests": tests, "bitwise": bitwise, "streams": streams, "staging": staging}


def _measurements():
    from . import attention, measure, papers

    def papers_shape(size):  # its own sizes: the full one needs ~50 GB of GPU and ~80 GB of host memory
        return papers.papers(papers.SIZES["tiny" if size is SIZES["tiny"] else "full"])

    return {
        "sampling": measure.sampling,
        "typed": measure.typed_sampling,
        "gather": measure.gather,
        "attention": lambda size, budget_s=None: attention.attention(
            next(name for name, sizes in SIZES.items() if sizes is size), budget_s
        ),
        "papers": papers_shape,
    }


def run_check(name: str, size_name: str, budget_s: float | None = None) -> dict:
    """Run check ``name``; ``{"status", "summary", ..., "seconds"}``, a failure as ``status: fail``.
    ``budget_s``: the ``attention`` check's budget (seconds; default its size's), no other's."""
    checks = {**CHECKS, **_measurements()}
    if budget_s is not None and name != "attention":
        raise ValueError(f"budget_s is the attention check's only, not {name!r}'s")
    start = time.perf_counter()
    try:
        result = checks[name](SIZES[size_name], *(() if budget_s is None else (budget_s,)))
    except Exception as error:  # the runner reports it; the next check runs in a fresh process
        result = {
            "status": "fail",
            "summary": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}",
            "details": traceback.format_exc()[-6000:],
        }
    result["seconds"] = round(time.perf_counter() - start, 2)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="one check of python -m gglspeedup.bench gpu")
    parser.add_argument("name")
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--json", required=True)
    parser.add_argument(
        "--budget-s", default=None, help='the attention check\'s budget, seconds or "10min" (default 120 s)'
    )
    args = parser.parse_args(argv)
    result = run_check(args.name, args.size, args.budget_s)
    with open(args.json, "w") as handle:
        json.dump(result, handle, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where the GPU path's time goes, on a real GPU: launch overhead, the gather kernel against
``cupy.take``, the host side of a one-seed ``sample`` call, and of a typed call at 16,384 papers.

    python tools/gpu_probe.py [--json PATH] [--steps launches,gather,sample,typed] [--size full|tiny]

Prints one table per question (the device call's reply keeps the end of the output). ``typed``
also runs under numba's CUDA simulator at ``--size tiny`` (how CI proves it; its times mean
nothing there); the other steps need CuPy on a GPU. Written for
the first H200 lease (``python -m gglspeedup.bench gpu`` showed a 5-9 ms one-seed call and a
cached gather at 0.13x a device-to-device copy); every figure is timed with CUDA events or after a
synchronisation, medians of repeated runs after a warm-up.
"""

from __future__ import annotations

import argparse
import functools
import json
import time

import numpy as np

from gglspeedup.bench.gpu.measure import _timed


def _median_ms(call, repeats, sync):
    return 1e3 * float(np.median(_timed(call, repeats, sync)))


def _event_ms(call, repeats):
    import cupy

    call()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(repeats):
        call()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / repeats


def _back_to_back_ms(call, calls):
    """Host wall per call of ``calls`` calls in a row and one sync after the last (median of 5)."""
    import cupy

    sync = cupy.cuda.get_current_stream().synchronize
    call()
    sync()
    seconds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        seconds.append(time.perf_counter() - start)
    return 1e3 * float(np.median(seconds)) / calls


def launches(results):
    import cupy
    from numba import cuda

    import gglspeedup as gg
    from gglspeedup import _launch

    @cuda.jit
    def touch(a, b, c, d, e, f, g, h):
        i = cuda.grid(1)
        if i < a.shape[0]:
            a[i] += b[i] + c[i] + d[i] + e[i] + f[i] + g[i] + h[i]

    device = gg.device.as_device("cuda:0")
    arrays = [cupy.zeros(1024, dtype=np.int64) for _ in range(8)]
    views = [cuda.as_cuda_array(a, sync=False) for a in arrays]
    stream = _launch.current_stream(device)
    sync = cupy.cuda.get_current_stream().synchronize
    n = 300
    _launch.launch(touch, device, 4, 256, *arrays)  # compiles; the direct path learns the overload
    rows = {
        "ours (_launch.launch, CuPy args)": _median_ms(
            lambda: [_launch.launch(touch, device, 4, 256, *arrays) for _ in range(n)], 5, sync
        )
        / n,
        "ours, numba's path (GGLSPEEDUP_NUMBA_LAUNCH)": _numba_path(
            lambda: _median_ms(lambda: [_launch.launch(touch, device, 4, 256, *arrays) for _ in range(n)], 5, sync)
        )
        / n,
        "numba as_cuda_array per argument": _median_ms(
            lambda: [touch[4, 256, stream](*(cuda.as_cuda_array(a, sync=False) for a in arrays)) for _ in range(n)],
            5,
            sync,
        )
        / n,
        "numba, views made once": _median_ms(lambda: [touch[4, 256, stream](*views) for _ in range(n)], 5, sync) / n,
        "cupy elementwise add": _median_ms(lambda: [arrays[0].__iadd__(arrays[1]) for _ in range(n)], 5, sync) / n,
    }
    results["launch_ms"] = rows
    print("\nper launch, ms (8 array arguments, host wall incl. sync at the end of", n, "launches)")
    for name, ms in rows.items():
        print(f"  {name:40s} {ms:8.4f}")


def _numba_path(measure):
    """``measure()`` with every launch on numba's own path (``_launch._Direct`` off)."""
    from gglspeedup import _launch

    _launch._direct.enabled = False
    try:
        return measure()
    finally:
        _launch._direct.enabled = True


def gather(results):
    import cupy

    import gglspeedup as gg
    from gglspeedup.feature import _tiers

    rng = np.random.default_rng(3)
    x = rng.random((2_000_000, 128), dtype=np.float32)
    ids = rng.integers(0, len(x), 200_000, dtype=np.int64)
    store = gg.FeatureStore(x, device="cuda:0", cache_size=x.nbytes, policy=np.arange(len(x)))
    table = cupy.asarray(x)
    ids_d = cupy.asarray(ids)
    out = cupy.empty((len(ids), 128), dtype=np.float32)
    nbytes = ids.size * 128 * 4
    tier = store._tier
    rows = {}
    rows["cupy.take"] = _event_ms(lambda: cupy.take(table, ids_d, axis=0, out=out), 50)
    rows["store.gather(ids host, out=)"] = _event_ms(lambda: store.gather(ids, out=out), 50)
    rows["store.gather(ids device, out=)"] = _event_ms(lambda: store.gather(ids_d, out=out), 50)
    rows["store.gather(ids device, out=, check=False)"] = _event_ms(
        lambda: store.gather(ids_d, out=out, check=False), 50
    )
    rows["store.gather(ids device, out=, check='deferred')"] = _event_ms(
        lambda: store.gather(ids_d, out=out, check="deferred"), 50
    )
    rows["store.gather(ids device) alloc"] = _event_ms(lambda: store.gather(ids_d), 50)
    source, copy_out = table[: len(ids)], cupy.empty_like(out)
    back_to_back = {  # host wall per call, 50 calls and one sync: what a caller that never waits sees
        "D2D copy of the same bytes": lambda: copy_out.__setitem__(Ellipsis, source),
        "check=True": lambda: store.gather(ids_d, out=out),
        "check='deferred'": lambda: store.gather(ids_d, out=out, check="deferred"),
        "check=False": lambda: store.gather(ids_d, out=out, check=False),
    }
    wall_back_to_back = {name: _back_to_back_ms(call, 50) for name, call in back_to_back.items()}
    store.synchronize()  # the deferred gathers found nothing
    rows["store.gather(ids device, out=), numba's launch path"] = _numba_path(
        lambda: _event_ms(lambda: store.gather(ids_d, out=out), 50)
    )
    default_group = tier.group
    for group in (32, 16, 8, 4, 2):  # lanes per row: 64 uint64 words a row, so 2..32 words a lane
        tier.group = group
        rows[f"store.gather(check=False), group {group}"] = _event_ms(
            lambda: store.gather(ids_d, out=out, check=False), 50
        )
        np.testing.assert_array_equal(store.gather(ids_d).get(), x[ids])
    tier.group = default_group
    host_store = gg.FeatureStore(x, device="cuda:0", cache_size=0)  # every row read over PCIe
    pinned = gg.device.pinned_empty((len(ids), 128), np.float32)
    pinned[...] = x[: len(ids)]
    rows["pinned H2D copy of the same bytes"] = _event_ms(lambda: out.set(pinned), 20)
    for group in (32, 16, 8, 4):
        host_store._tier.group = group
        rows[f"pinned rows, check=False, group {group}"] = _event_ms(
            lambda: host_store.gather(ids_d, out=out, check=False), 20
        )
        np.testing.assert_array_equal(host_store.gather(ids_d).get(), x[ids])
    sync = cupy.cuda.get_current_stream().synchronize
    wall = _median_ms(lambda: store.gather(ids_d, out=out), 20, sync)
    default_grid = tier._max_grid
    for per_sm in (4, 8, 32, 64, 256):
        tier._max_grid = _tiers._multiprocessors(tier.device) * per_sm
        rows[f"store.gather, grid {per_sm}/SM"] = _event_ms(lambda: store.gather(ids_d, out=out), 50)
    tier._max_grid = default_grid
    np.testing.assert_array_equal(store.gather(ids_d).get(), x[ids])
    print(f"\ngather of {ids.size} rows x 512 B ({nbytes / 1e6:.0f} MB): ms by CUDA events, GB/s")
    for name, ms in rows.items():
        print(f"  {name:40s} {ms:8.3f} ms {nbytes / ms / 1e6:8.1f} GB/s")
    print(f"  host wall per gather (device ids, out=): {wall:.3f} ms; word {tier.word}, group {tier.group}")
    copy_ms = wall_back_to_back["D2D copy of the same bytes"]
    print("50 calls back to back, one sync: host wall per call, and the D2D copy's over it")
    for name, ms in wall_back_to_back.items():
        print(f"  {name:40s} {ms:8.3f} ms {copy_ms / ms:8.2f}x")
    results["gather_back_to_back_ms"] = wall_back_to_back
    results["gather_ms"] = rows
    results["gather_wall_ms"] = wall
    results["gather_word"] = str(tier.word)


def sample(results):
    import cupy

    import gglspeedup as gg
    from gglspeedup.sampling._kernels import cuda as kernels

    graph = gg.datasets.synthetic_powerlaw(2_400_000, 26, seed=0)
    sampler = gg.NeighborSampler(graph, [15, 10, 5], seed=1, device="cuda:0")
    seeds = cupy.asarray(np.array([7], dtype=np.int64))
    sync = cupy.cuda.get_current_stream().synchronize
    total = _median_ms(lambda: sampler.sample(seeds), 20, sync)
    numba_total = _numba_path(lambda: _median_ms(lambda: sampler.sample(seeds), 20, sync))
    print(f"\none-seed sample: {total:.3f} ms direct launches, {numba_total:.3f} ms numba's launch path")
    results["sample_one_seed_numba_path_ms"] = numba_total
    for count in (256, 4096, 65536):
        many = cupy.asarray(np.random.default_rng(count).integers(0, graph.num_nodes, count))
        call = functools.partial(sampler.sample, many)
        results[f"sample_{count}_seeds_ms"] = [
            _median_ms(call, 10, sync),
            _numba_path(functools.partial(_median_ms, call, 10, sync)),
        ]
        print(f"{count} seeds: {results[f'sample_{count}_seeds_ms']} ms (direct, numba path)")
    for _ in range(5):  # the last of five traced calls
        spans, wall = _traced(lambda: sampler.sample(seeds), sync, [kernels])
    accounted = sum(s for _, s in spans)
    print(f"\none-seed sample, fanouts [15, 10, 5]: median {total:.3f} ms; last traced call {1e3 * wall:.3f} ms")
    for name, seconds in spans:
        print(f"  {name:40s} {1e3 * seconds:8.3f} ms")
    print(f"  {'(outside launches and syncs)':40s} {1e3 * (wall - accounted):8.3f} ms")
    results["sample_one_seed_ms"] = total
    results["sample_spans_ms"] = [(n, 1e3 * s) for n, s in spans]


# The typed step's sizes: the bench's igbh-like graph (``gpu --checks typed``) and its largest batch.
TYPED_SIZES = {
    "full": {"papers": 2_000_000, "batch": 16_384, "calls": 20},
    "tiny": {"papers": 150, "batch": 6, "calls": 2},
}


def _traced(call, sync, modules):
    """``[(name, seconds)]`` of every launch and sync of one ``call()`` (host wall time each) and
    the call's wall time; ``modules`` import ``to_host`` by name (patched there too)."""
    from gglspeedup import _launch

    spans = []
    original_launch, original_to_host = _launch.launch, _launch.to_host

    def timed_launch(kernel, device, grid, block, *args):
        start = time.perf_counter()
        original_launch(kernel, device, grid, block, *args)
        spans.append(("launch " + getattr(kernel, "__name__", "?"), time.perf_counter() - start))

    def timed_to_host(array):
        start = time.perf_counter()
        value = original_to_host(array)
        spans.append(("sync", time.perf_counter() - start))
        return value

    _launch.launch, _launch.to_host = timed_launch, timed_to_host
    for module in modules:
        module.to_host = timed_to_host
    try:
        start = time.perf_counter()
        call()
        sync()
        wall = time.perf_counter() - start
    finally:
        _launch.launch, _launch.to_host = original_launch, original_to_host
        for module in modules:
            module.to_host = original_to_host
    return spans, wall


def typed(results, size="full"):
    """The host side of a typed call (igbh-like graph, 7 relations, fanouts [15, 10]) at 16,384
    papers: its median, launches and syncs, each launch's and sync's host time in one traced call
    and the time outside them, and the top 15 functions by cumulative time over ``calls`` calls
    (cProfile). ``results["typed"]`` gets one JSON-able dict."""
    import cProfile
    import pstats

    import gglspeedup as gg
    from gglspeedup import _launch
    from gglspeedup.bench.gpu._common import _device, _sync
    from gglspeedup.bench.gpu.measure import _typed_edges
    from gglspeedup.datasets.synthetic_hetero import synthetic_igbh
    from gglspeedup.sampling._kernels import cuda_typed

    shape = TYPED_SIZES[size]
    device = _device()
    graph = synthetic_igbh(shape["papers"], seed=0)
    sampler = gg.HeteroNeighborSampler(graph, [15, 10], seed=1, device=device)
    batch = min(shape["batch"], graph.num_nodes["paper"])
    chosen = np.random.default_rng(0).choice(graph.num_nodes["paper"], batch, replace=False)
    seeds = {"paper": device.xp.asarray(chosen)}
    sync = functools.partial(_sync, device)
    edges = _typed_edges(sampler.sample(seeds, key=0))
    _launch.reset_counters()
    sampler.sample(seeds, key=1)
    counts = _launch.counters()
    calls = shape["calls"]
    median = _median_ms(lambda: sampler.sample(seeds), calls, sync)
    spans, wall = _traced(lambda: sampler.sample(seeds), sync, [cuda_typed])
    accounted = sum(seconds for _, seconds in spans)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        sampler.sample(seeds)
    sync()
    profile.disable()
    stats = pstats.Stats(profile)
    stats.sort_stats("cumulative")
    top = []
    for function in stats.fcn_list[:15]:
        _, ncalls, _, cumulative, _ = stats.stats[function]
        name = f"{function[0].rsplit('/', 1)[-1]}:{function[1]}({function[2]})"
        top.append({"function": name, "calls_per_call": ncalls / calls, "ms_per_call": 1e3 * cumulative / calls})
    figures = {
        "papers": shape["papers"],
        "batch": batch,
        "edges": edges,
        "ms_median": median,
        "m_edges_per_s": edges / median / 1e3,
        "launches": counts["launches"],
        "syncs": counts["syncs"],
        "traced_call_ms": 1e3 * wall,
        "spans_ms": [[name, 1e3 * seconds] for name, seconds in spans],
        "outside_spans_ms": 1e3 * (wall - accounted),
        "profile_top": top,
    }
    results["typed"] = figures
    print(
        f"\ntyped call, {batch} papers of {shape['papers']}, fanouts [15, 10]: median {median:.3f} ms, "
        f"{figures['m_edges_per_s']:.1f} M edges/s, {counts['launches']} launches, {counts['syncs']} syncs"
    )
    print(f"one traced call {1e3 * wall:.3f} ms:")
    for name, seconds in spans:
        print(f"  {name:40s} {1e3 * seconds:8.3f} ms")
    print(f"  {'(outside launches and syncs)':40s} {figures['outside_spans_ms']:8.3f} ms")
    print(f"top 15 by cumulative time over {calls} calls (ms per call, calls per call):")
    for row in top:
        print(f"  {row['function'][:70]:70s} {row['ms_per_call']:8.3f} {row['calls_per_call']:6.1f}")


STEPS = {"launches": launches, "gather": gather, "sample": sample, "typed": typed}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None)
    parser.add_argument("--steps", default=",".join(STEPS), help=f"some of {','.join(STEPS)} (default all)")
    parser.add_argument("--size", choices=tuple(TYPED_SIZES), default="full", help="the typed step's size")
    args = parser.parse_args()
    steps = [name.strip() for name in args.steps.split(",") if name.strip()]
    unknown = [name for name in steps if name not in STEPS]
    if unknown or not steps:
        parser.error(f"--steps must name some of {', '.join(STEPS)}, got {args.steps!r}")
    results = {}
    for name in steps:
        step = STEPS[name]
        try:
            step(results, args.size) if step is typed else step(results)
        except Exception as error:  # one failed probe must not hide the others
            print(f"{step.__name__} failed: {type(error).__name__}: {error}")
            results[step.__name__ + "_error"] = repr(error)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()

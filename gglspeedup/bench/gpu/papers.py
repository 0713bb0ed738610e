"""The ``papers`` check of ``python -m gglspeedup.bench gpu``: ogbn-papers100M's shape on one GPU.

ogbn-papers100M has 111,059,956 nodes and 1,615,685,872 edges; ``papers-like``
(:mod:`gglspeedup.datasets.papers_like`) is a power-law graph of that shape. Its out-of-core CPU
build is mostly serial (461 s on 2 cores, BENCHMARKS "Full-shape build"), so here the same graph is
built with the GPU doing the heavy part: the CPU draws the endpoint pairs exactly as
:class:`~gglspeedup.datasets.synthetic.PowerlawPairs` draws them for ``synthetic_powerlaw`` (the
same PCG64 stream), the GPU sorts and deduplicates the 1.6 billion (source, target) keys and counts
the rows. The result equals ``synthetic_powerlaw(num_nodes, 14.6, seed=0)`` edge for edge (checked
at the tiny size in CI, where the "GPU" is NumPy).

Then, as GraphLearn-for-PyTorch's ``benchmarks/api/bench_sampler.py`` measures (batches of 1024
random seeds, fanouts [15, 10, 5], each call timed to a synchronisation, sampled edges summed over
summed time): sampled edges/s at 1,024 and 65,536 seeds with the graph in device memory and in
page-locked host memory (UVA); one batch checked against the CPU sampler bit for bit; and the
gather of each batch's ``n_id`` from a float16 111M x 128 table whose highest-degree rows are cached
on the device and the rest read from page-locked host memory, beside a device-to-device and a pinned
host-to-device copy of the same bytes.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit, prange

__all__ = ["papers", "build_on_device", "SIZES"]

FANOUTS = [15, 10, 5]
SIZES = {
    "full": {"nodes": 111_059_956, "degree": 14.6, "dim": 128, "cache": 0.2, "batches": {1024: 40, 65536: 6}},
    "tiny": {"nodes": 300, "degree": 6.0, "dim": 8, "cache": 0.2, "batches": {16: 2, 64: 1}},
}


def _say(start: float, text: str) -> None:
    print(f"[papers {time.perf_counter() - start:7.1f} s] {text}", flush=True)


def build_on_device(
    num_nodes: int, avg_degree: float, seed: int, xp, *, exponent: float = 2.5, chunk: int = 1 << 25, bucket=1 << 29
):
    """``synthetic_powerlaw(num_nodes, avg_degree, seed)`` (the same graph, edge for edge): the
    endpoints drawn on the CPU from the generator's own streams (:class:`PowerlawPairs`' sources
    and targets, in chunks of ``chunk`` pairs: the doubles are the same whatever the chunking),
    self loops dropped, both directions keyed ``source * num_nodes + target`` and split by source
    range into buckets of about ``bucket`` keys, each sorted, deduplicated and counted by ``xp``
    (CuPy on a GPU). No array reaches 2**31 entries, where CuPy's sort and compaction are not
    trusted (CCCL issue #744, CuPy issue #10290). Returns host ``(indptr int64, indices int32)``."""
    from gglspeedup.datasets.synthetic import PowerlawPairs

    num_pairs = int(num_nodes * float(avg_degree) / 2)
    pairs = PowerlawPairs(num_nodes, num_pairs, seed, float(exponent))
    buckets = max(1, -(-2 * num_pairs // bucket))  # the shuffled ids spread sources evenly
    bounds = [num_nodes * b // buckets for b in range(buckets + 1)]
    pieces = [[] for _ in range(buckets)]
    for sources, targets in pairs.endpoints(chunk):
        u, v = xp.asarray(sources), xp.asarray(targets)
        keep = u != v
        u, v = u[keep].astype(np.int64), v[keep].astype(np.int64)
        owners, keys = xp.concatenate((u, v)), xp.concatenate((u * num_nodes + v, v * num_nodes + u))
        for b in range(buckets):
            if buckets == 1:
                pieces[b].append(keys)
            else:
                pieces[b].append(keys[(owners >= bounds[b]) & (owners < bounds[b + 1])])
        del owners, keys, u, v, keep
    host = getattr(xp, "asnumpy", np.asarray)
    counts, indices = [], []
    for b in range(buckets):
        keys = xp.concatenate(pieces[b]) if pieces[b] else xp.empty(0, dtype=np.int64)
        pieces[b] = None
        keys.sort()
        keep = xp.empty(keys.shape[0], dtype=bool)
        keep[:1] = True
        xp.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
        sources = keys // num_nodes
        indices.append(host((keys - sources * num_nodes).astype(np.int32)))
        counts.append(host(xp.bincount(sources - bounds[b], minlength=bounds[b + 1] - bounds[b])))
        del keys, keep, sources
        if xp is not np:
            xp.get_default_memory_pool().free_all_blocks()  # the sort's memory back for the samplers
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.concatenate(counts), out=indptr[1:])
    return indptr, np.concatenate(indices)


@njit(parallel=True, cache=True)
def _fill_bits(bits):
    rows, dim = bits.shape
    for i in prange(rows):
        mixed = (i * 2654435761) & 0xFFFFFFFF
        for j in range(dim):
            bits[i, j] = ((mixed >> (j % 16)) + j) & 0x3BFF  # exponent below 15: finite, below 1


def _edges(out) -> int:
    return sum(int(adj.e_id.shape[0]) for adj in out.adjs)


def _glt_style(sampler, batch: int, count: int, rng, num_nodes: int, device, sync) -> dict:
    """``count`` batches of ``batch`` distinct random seeds, each call timed to a sync (GLT's
    bench_sampler loop); edges summed over time summed. Launches and syncs of one call counted."""
    from gglspeedup import _launch

    batches = [device.xp.asarray(rng.choice(num_nodes, batch, replace=False)) for _ in range(count + 1)]
    sampler.sample(batches[0], key=0)  # warm-up: compilation, pools
    sync()
    _launch.reset_counters()
    sampler.sample(batches[0], key=1)
    counts = _launch.counters()
    sync()
    seconds, edges, per_call = 0.0, 0, []
    for key, seeds in enumerate(batches[1:], start=2):
        start = time.perf_counter()
        out = sampler.sample(seeds, key=key)
        sync()
        spent = time.perf_counter() - start
        seconds += spent
        per_call.append(spent)
        edges += _edges(out)
    return {
        "batch": batch,
        "batches": count,
        "edges": edges,
        "seconds": seconds,
        "m_edges_per_s": edges / seconds / 1e6,
        "ms_median": 1e3 * float(np.median(per_call)),
        "launches": counts["launches"],
        "syncs": counts["syncs"],
    }


def papers(size: dict) -> dict:
    import gglspeedup as gg
    from gglspeedup.testing import assert_same_sample

    from ._common import _device, _sync

    start = time.perf_counter()
    device = _device()
    xp = device.xp
    sync = lambda: _sync(device)  # noqa: E731
    with device:
        indptr, indices = build_on_device(size["nodes"], size["degree"], 0, xp)
    build_s = time.perf_counter() - start
    graph = gg.CSRGraph(indptr, indices, _checked=True)  # sorted, deduplicated, in range by construction
    del indptr, indices
    _say(start, f"built {graph.num_nodes:,} nodes / {graph.num_edges:,} edges in {build_s:.1f} s")
    figures = {
        "graph": {"nodes": graph.num_nodes, "edges": graph.num_edges, "build_s": round(build_s, 1)},
        "fanouts": FANOUTS,
        "anchor": "GraphLearn-for-PyTorch: 32.1 M sampled edges/s per A100 on ogbn-papers100M "
        "(its bench_sampler.py: batch 1024, fanouts [15, 10, 5])",
    }
    rng = np.random.default_rng(7)
    rows = []
    for placement in ("device", "pinned"):
        made = time.perf_counter()
        sampler = gg.NeighborSampler(graph, FANOUTS, seed=1, device=device, placement=placement)
        _say(start, f"{placement} sampler ready in {time.perf_counter() - made:.1f} s")
        if placement == "device":
            check = rng.choice(graph.num_nodes, min(1024, graph.num_nodes), replace=False)
            cpu = gg.NeighborSampler(graph, FANOUTS, seed=1)
            assert_same_sample(sampler.sample(xp.asarray(check), key=99), cpu.sample(check, key=99))
            figures["cpu_equal_batch"] = int(check.size)
            _say(start, "one 1024-seed batch equal to the CPU's bit for bit")
            first = min(size["batches"], key=int)
            picks = [xp.asarray(rng.choice(graph.num_nodes, first, replace=False)) for _ in range(3)]
            batch_ids = [sampler.sample(seeds, key=k).n_id for k, seeds in enumerate(picks)]
        for batch, count in size["batches"].items():
            row = _glt_style(sampler, min(batch, graph.num_nodes), count, rng, graph.num_nodes, device, sync)
            rows.append({"placement": placement, **row})
            _say(start, f"{placement} batch {batch}: {row['m_edges_per_s']:.1f} M edges/s")
        del sampler
    figures["rows"] = rows
    figures["gather"] = _gather(graph, batch_ids, size, device, sync, start)
    first = rows[0]["batch"]
    rate = {(r["placement"], r["batch"]): r["m_edges_per_s"] for r in rows}
    gather = figures["gather"]
    summary = (
        f"{graph.num_edges / 1e9:.2f}B edges built in {build_s:.0f} s; batch {first}: "
        f"{rate['device', first]:.0f} M edges/s in device memory ({rate['device', first] / 32.1:.1f}x GLT's 32.1), "
        f"{rate['pinned', first]:.0f} over UVA ({rate['pinned', first] / 32.1:.1f}x); batch {rows[-1]['batch']}: "
        f"{rate['device', rows[-1]['batch']]:.0f} / {rate['pinned', rows[-1]['batch']]:.0f}; float16 gather "
        f"{gather['gb_per_s']:.1f} GB/s at {gather['hit_rate']:.2f} of rows cached"
    )
    return {"status": "pass", "summary": summary, "figures": figures}


def _gather(graph, batch_ids, size, device, sync, start) -> dict:
    """Each batch's ``n_id`` gathered from a float16 (nodes, dim) table, the highest-degree
    ``cache`` fraction of rows on the device and the rest page-locked, beside the copies of the
    same bytes that bound each tier."""
    import gglspeedup as gg

    from .measure import _timed

    xp = device.xp
    x = np.empty((graph.num_nodes, size["dim"]), dtype=np.float16)
    _fill_bits(x.view(np.uint16))  # distinct finite rows, no 28 GB of random draws
    cached = int(size["cache"] * graph.num_nodes)
    degree = np.diff(graph.indptr)
    hottest = np.argpartition(-degree, cached)[:cached] if cached < graph.num_nodes else np.arange(cached)
    del degree
    made = time.perf_counter()
    store = gg.FeatureStore(x, device=device, cache_size=cached * x.shape[1] * 2, policy=hottest)
    _say(start, f"store ready in {time.perf_counter() - made:.1f} s ({cached:,} rows cached)")
    for ids in batch_ids:
        got = store.gather(ids)
        np.testing.assert_array_equal(got if device.simulated else got.get(), x[gg.device.to_numpy(ids)])
    store.reset_stats()
    rows_total = sum(int(ids.shape[0]) for ids in batch_ids)
    nbytes = rows_total * x.shape[1] * 2
    outs = [xp.empty((int(ids.shape[0]), x.shape[1]), dtype=np.float16) for ids in batch_ids]
    timed = {}

    def timing(name, call, repeats=5):
        best = min(_timed(call, repeats, sync))
        timed[name] = {"ms_best": 1e3 * best, "gb_per_s": nbytes / best / 1e9}

    timing(
        "gather, check=False (the loader)",
        lambda: [store.gather(i, out=o, check=False) for i, o in zip(batch_ids, outs)],
    )
    timing("gather, check=True", lambda: [store.gather(i, out=o) for i, o in zip(batch_ids, outs)])
    timing(
        "gather, check='deferred'", lambda: [store.gather(i, out=o, check="deferred") for i, o in zip(batch_ids, outs)]
    )
    store.synchronize()  # raises if the kernel found an id out of range
    stats = store.stats()
    figures = {
        "table": [graph.num_nodes, x.shape[1]],
        "dtype": "float16",
        "table_gb": round(x.nbytes / 1e9, 2),
        "cached_rows": cached,
        "rows_per_pass": rows_total,
        "bytes_per_pass": nbytes,
        "timings": timed,
        "hit_rate": stats["hit_rate"],
        "gb_per_s": timed["gather, check=False (the loader)"]["gb_per_s"],
    }
    if not device.simulated:
        from gglspeedup.device import pinned_empty

        with device:
            source = xp.asarray(x[:rows_total])
            copy_out = xp.empty_like(source)
            pinned = pinned_empty(source.shape, np.float16)
            pinned[...] = x[:rows_total]
            timing("device-to-device copy", lambda: copy_out.__setitem__(Ellipsis, source))
            timing("pinned host-to-device copy", lambda: copy_out.set(pinned))
    return figures

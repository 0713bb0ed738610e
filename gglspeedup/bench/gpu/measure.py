"""The measurements of ``python -m gglspeedup.bench gpu``: sampling and gathering on ``cuda:0``.

- :func:`sampling`: sampled edges/s per placement (graph in device memory, or pinned host memory
  read over PCIe) for batches of 1 .. 65,536 seeds, fanouts [15, 10, 5], on a power-law graph of
  2.4M nodes and ~62M edges; the kernel launches and host syncs of one call (the launcher's
  counters) and the time of a one-seed call (the per-call floor).
- :func:`typed_sampling`: the same for the typed sampler on an IGBH-shaped graph (4 node types,
  every relation with fanouts [15, 10]), after checking one batch against the CPU bit for bit;
  launches and syncs per call (4 launches and 1 sync per typed hop, plus on a GPU the one sync of
  the seeds' range check).
- :func:`gather`: GB/s of ``FeatureStore.gather`` with every row cached (device tier) and none
  (pinned host tier), beside ``cupy.take`` and ``torch.index_select`` on the same device arrays,
  a device-to-device copy and a pinned host-to-device copy of the same bytes (the tiers'
  ceilings), interleaved rounds, paired ratios (:mod:`gglspeedup.bench.gather`), each check mode
  (``True``, ``"deferred"``, ``False``); then the host wall per call of ``back_to_back_calls``
  calls made back to back with one sync at the end (:func:`~gglspeedup.bench.gather.time_back_to_back`)
  for the D2D copy, the cached gather in each check mode and ``cupy.take``, each against the copy.

Under the simulator both run at tiny sizes to prove they work; the times there mean nothing.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["sampling", "typed_sampling", "gather"]

FANOUTS = [15, 10, 5]


def _timed(call, repeats: int, sync) -> list[float]:
    call()  # warm-up: compilation, pools
    sync()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        sync()
        seconds.append(time.perf_counter() - start)
    return seconds


def _batch_row(sample, seeds, batch: int, count_edges, size: dict, device) -> dict:
    """The timing row of one batch of ``batch`` seeds: ``sample(seeds, key=...)`` once for its
    edges (``count_edges`` of the output), once counted (launches, syncs), then timed (``_timed``,
    best and median)."""
    from gglspeedup import _launch

    from ._common import _sync

    edges = count_edges(sample(seeds, key=0))
    _launch.reset_counters()
    sample(seeds, key=1)
    counts = _launch.counters()
    seconds = _timed(lambda: sample(seeds), size["repeats"], lambda: _sync(device))
    best = min(seconds)
    return {
        "batch": batch,
        "edges": edges,
        "ms_best": 1e3 * best,
        "ms_median": 1e3 * float(np.median(seconds)),
        "m_edges_per_s": edges / best / 1e6,
        "launches": counts["launches"],
        "syncs": counts["syncs"],
    }


def sampling(size: dict) -> dict:
    import gglspeedup as gg

    from ._common import _device

    device = _device()
    build = time.perf_counter()
    graph = gg.datasets.synthetic_powerlaw(size["nodes"], size["degree"], seed=0)
    build = time.perf_counter() - build
    rng = np.random.default_rng(0)
    rows = []
    for placement in ("device", "pinned"):
        sampler = gg.NeighborSampler(graph, FANOUTS, seed=1, device=device, placement=placement)
        for batch in size["batches"]:
            batch = min(batch, graph.num_nodes)
            seeds = device.xp.asarray(rng.choice(graph.num_nodes, batch, replace=False))
            row = _batch_row(sampler.sample, seeds, batch, _untyped_edges, size, device)
            rows.append({"placement": placement, **row})
    floor = {row["placement"]: row["ms_best"] for row in rows if row["batch"] == min(size["batches"])}
    peak = {p: max(r["m_edges_per_s"] for r in rows if r["placement"] == p) for p in ("device", "pinned")}
    summary = (
        f"peak {peak['device']:.1f} M edges/s in device memory, {peak['pinned']:.1f} M pinned; "
        f"one-seed call {floor['device']:.2f} / {floor['pinned']:.2f} ms; "
        f"{rows[-1]['launches']} launches, {rows[-1]['syncs']} syncs per call"
    )
    figures = {
        "graph": {"nodes": graph.num_nodes, "edges": graph.num_edges, "build_s": round(build, 1)},
        "fanouts": FANOUTS,
        "rows": rows,
        "peak_m_edges_per_s": peak,
        "floor_ms": floor,
    }
    return {"status": "pass", "summary": summary, "figures": figures}


def typed_sampling(size: dict) -> dict:
    import gglspeedup as gg
    from gglspeedup.datasets.synthetic_hetero import synthetic_igbh

    from ._common import _device

    device = _device()
    build = time.perf_counter()
    graph = synthetic_igbh(size["typed_papers"], seed=0)
    build = time.perf_counter() - build
    fanouts = FANOUTS[:2]
    cpu = gg.HeteroNeighborSampler(graph, fanouts, seed=1)
    gpu = gg.HeteroNeighborSampler(graph, fanouts, seed=1, device=device)
    rng = np.random.default_rng(0)
    check = {"paper": rng.choice(graph.num_nodes["paper"], min(64, graph.num_nodes["paper"]), replace=False)}
    _same_typed(gpu.sample(check, key=5), cpu.sample(check, key=5))
    rows = []
    for batch in size["typed_batches"]:
        batch = min(batch, graph.num_nodes["paper"])
        seeds = {"paper": device.xp.asarray(rng.choice(graph.num_nodes["paper"], batch, replace=False))}
        rows.append(_batch_row(gpu.sample, seeds, batch, _typed_edges, size, device))
    summary = (
        f"one batch equal to the CPU's; peak {max(r['m_edges_per_s'] for r in rows):.1f} M edges/s; "
        f"one-seed call {rows[0]['ms_best']:.2f} ms; "
        f"{rows[-1]['launches']} launches, {rows[-1]['syncs']} syncs per call"
    )
    figures = {
        "graph": {
            "nodes": sum(graph.num_nodes.values()),
            "edges": sum(graph.num_edges.values()),
            "relations": len(graph.edge_types),
            "build_s": round(build, 1),
        },
        "fanouts": fanouts,
        "rows": rows,
    }
    return {"status": "pass", "summary": summary, "figures": figures}


def _untyped_edges(out) -> int:
    return sum(int(adj.e_id.shape[0]) for adj in out.adjs)


def _typed_edges(out) -> int:
    return sum(int(adj.e_id.shape[0]) for layer in out.adjs for adj in layer.values())


def _same_typed(out, ref) -> None:
    """Two typed samples equal bit for bit (node ids per type, every relation's edges and ids)."""

    from gglspeedup.device import to_numpy as host

    assert set(out.n_id) == set(ref.n_id)
    for node_type in ref.n_id:
        np.testing.assert_array_equal(host(out.n_id[node_type]), host(ref.n_id[node_type]), err_msg=node_type)
    assert len(out.adjs) == len(ref.adjs)
    for layer, ref_layer in zip(out.adjs, ref.adjs):
        assert list(layer) == list(ref_layer)
        for edge_type, adj in layer.items():
            expected = ref_layer[edge_type]
            np.testing.assert_array_equal(host(adj.edge_index), host(expected.edge_index), err_msg=str(edge_type))
            np.testing.assert_array_equal(host(adj.e_id), host(expected.e_id), err_msg=str(edge_type))
            assert adj.size == expected.size, edge_type


BACK_TO_BACK = (
    "device-to-device copy",
    "gglspeedup cache=1",
    "gglspeedup cache=1, check=deferred",
    "gglspeedup cache=1, check=False",
    "cupy.take (table on GPU)",
)


def gather(size: dict) -> dict:
    import gglspeedup as gg

    from ..gather import gpu_contenders, paired_ratio, time_back_to_back, time_interleaved
    from ._common import _device, _sync

    device = _device()
    rng = np.random.default_rng(3)
    x = rng.random((size["rows"], size["dim"]), dtype=np.float32)
    ids = rng.integers(0, size["rows"], size["ids"], dtype=np.int64)
    useful = ids.size * size["dim"] * 4
    if device.simulated:  # no CuPy: our two tiers and a NumPy copy in its place, to prove the path runs
        contenders, stores = _simulated_contenders(gg, x, ids, device)
    else:
        contenders, stores = gpu_contenders(x, ids, device, [0.0, 1.0], graph=None)
    for store in stores.values():  # exact before timed, in every check mode
        for check in (True, "deferred"):
            got = store.gather(device.xp.asarray(ids), check=check)
            np.testing.assert_array_equal(got if device.simulated else got.get(), x[ids])
    sync = lambda: _sync(device)  # noqa: E731
    timings = time_interleaved(contenders, size["repeats"], sync)
    rows = {
        name: {"gb_per_s_best": useful / min(rounds) / 1e9, "gb_per_s_median": useful / float(np.median(rounds)) / 1e9}
        for name, (rounds, _) in timings.items()
    }
    calls = size["back_to_back_calls"]
    back_to_back = time_back_to_back(
        {name: contenders[name] for name in BACK_TO_BACK if name in contenders}, calls, size["repeats"], sync
    )
    for store in stores.values():
        store.synchronize()  # no id was out of range: nothing recorded by the deferred gathers
    copy_rounds = back_to_back["device-to-device copy"]
    back_rows = {
        name: {
            "ms_per_call_best": 1e3 * min(rounds),
            "ms_per_call_median": 1e3 * float(np.median(rounds)),
            "paired_vs_d2d": paired_ratio(rounds, copy_rounds),
        }
        for name, rounds in back_to_back.items()
    }
    deferred = back_rows["gglspeedup cache=1, check=deferred"]["paired_vs_d2d"]
    summary = f"simulator: both tiers exact in every check mode, {calls} calls back to back ran (times meaningless)"
    if not device.simulated:
        device_tier, host_tier = timings["gglspeedup cache=1"][0], timings["gglspeedup cache=0"][0]
        rows["gglspeedup cache=1"]["paired_vs_d2d"] = paired_ratio(device_tier, timings["device-to-device copy"][0])
        rows["gglspeedup cache=0"]["paired_vs_h2d"] = paired_ratio(host_tier, timings["pinned host-to-device copy"][0])
        for name, ceiling in (("cache=1", "device-to-device copy"), ("cache=0", "pinned host-to-device copy")):
            for mode in ("check=False", "check=deferred"):
                rows[f"gglspeedup {name}, {mode}"]["paired_vs_ceiling"] = paired_ratio(
                    timings[f"gglspeedup {name}, {mode}"][0], timings[ceiling][0]
                )
        checked = back_rows["gglspeedup cache=1"]["paired_vs_d2d"]
        unchecked = back_rows["gglspeedup cache=1, check=False"]["paired_vs_d2d"]
        summary = (
            f"{calls} cached gathers back to back, one sync: check=deferred {deferred:.2f}x a D2D copy by host wall "
            f"(check=True {checked:.2f}x, check=False {unchecked:.2f}x); per call with a sync: cached rows "
            f"{rows['gglspeedup cache=1']['gb_per_s_best']:.0f} GB/s = "
            f"{rows['gglspeedup cache=1']['paired_vs_d2d']:.2f}x a D2D copy "
            f"({rows['gglspeedup cache=1, check=deferred']['paired_vs_ceiling']:.2f}x deferred, "
            f"{rows['gglspeedup cache=1, check=False']['paired_vs_ceiling']:.2f}x unchecked); pinned rows "
            f"{rows['gglspeedup cache=0']['gb_per_s_best']:.1f} GB/s = "
            f"{rows['gglspeedup cache=0']['paired_vs_h2d']:.2f}x a pinned H2D copy "
            f"({rows['gglspeedup cache=0, check=False']['paired_vs_ceiling']:.2f}x unchecked)"
        )
    figures = {
        "table": list(x.shape),
        "ids": int(ids.size),
        "bytes_per_gather": useful,
        "rows": rows,
        "back_to_back_calls": calls,
        "back_to_back": back_rows,
        "deferred_back_to_back_vs_d2d": deferred,
    }
    return {"status": "pass", "summary": summary, "figures": figures}


def _simulated_contenders(gg, x, ids, device):
    """The simulator's stand-ins for :func:`~gglspeedup.bench.gather.gpu_contenders`: our store per
    tier in each check mode (NumPy ids are the simulator's device ids, so ``"deferred"`` checks in
    the kernel) and a NumPy copy of the same bytes in place of the D2D copy."""
    stores = {
        ratio: gg.FeatureStore(x, device=device, cache_size=int(ratio * x.nbytes), policy=np.arange(len(x)))
        for ratio in (0.0, 1.0)
    }
    contenders = {}
    for ratio, store in stores.items():
        for mode, check in (("", True), (", check=False", False), (", check=deferred", "deferred")):
            contenders[f"gglspeedup cache={ratio:g}{mode}"] = lambda s=store, c=check: s.gather(ids, check=c)
    source, copy_out = x[: len(ids)].copy(), np.empty((len(ids), x.shape[1]), x.dtype)
    contenders["device-to-device copy"] = lambda: np.copyto(copy_out, source)
    return contenders, stores

"""kern42's floor of a temporal row on today's kernels (issue 42's temporal row, stop 56).

    python tools/temporal_floor.py [--rounds 31] [--graph powerlaw:2000000:32]

Each temporal row ([15, 10], batch 1024, uniform and ``last``; rows built in time order and the
sorted copy with edge ids) beside its floor row: the same graph and hop drawn disjoint without
times (what a temporal row costs besides its window search), timed in one process, rows rotated
round by round, 2 Numba threads, wall time, medians. Prints each row's edges/s against plain
sampling and the floor a temporal row could reach: the floor row's ratio times the temporal row's
edges per row over the floor row's (a temporal row draws from the part of its row inside the
window, so it yields fewer edges). Rows per batch are counted in an untimed pass that wraps the
CPU hop kernels.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gglspeedup.bench import _common
from gglspeedup.bench.temporal import TIME_RANGE, make_times, time_ordered
from gglspeedup.sampling import NeighborSampler
from gglspeedup.sampling._kernels import cpu as cpu_mod
from gglspeedup.sampling.temporal import position_times, sort_by_time


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--graph", default="powerlaw:2000000:32")
    args = parser.parse_args(argv)
    rounds = args.rounds
    graph, _ = _common.load_graph(args.graph)
    times = make_times(graph, "node", 0)
    batches = _common.seed_batches(graph.num_nodes, 1024, 6, seed=0)
    rng = np.random.default_rng([0, 21])
    seed_times = [rng.integers(0, TIME_RANGE, len(b), dtype=np.int64) for b in batches]
    per_position = position_times(graph, times, None)[0]
    sorted_graph, _ = sort_by_time(graph, per_position)
    del per_position
    built, built_times = time_ordered(sorted_graph, {"node_time": times})
    fan = [15, 10]
    rows = {
        "plain": (NeighborSampler(graph, fan, seed=0), False),
        "floor, time order (disjoint, no times)": (NeighborSampler(built, fan, seed=0, disjoint=True), False),
        "uniform, time order": (NeighborSampler(built, fan, seed=0, **built_times, temporal_strategy="uniform"), True),
        "last, time order": (NeighborSampler(built, fan, seed=0, **built_times, temporal_strategy="last"), True),
        "floor, sorted rows (disjoint, no times)": (NeighborSampler(sorted_graph, fan, seed=0, disjoint=True), False),
        "uniform, sorted rows": (
            NeighborSampler(sorted_graph, fan, seed=0, node_time=times, temporal_strategy="uniform"),
            True,
        ),
        "last, sorted rows": (
            NeighborSampler(sorted_graph, fan, seed=0, node_time=times, temporal_strategy="last"),
            True,
        ),
    }
    # rows (hop targets) per batch, counted in an untimed pass
    counted = []
    real_tree, real_hop = cpu_mod.sample_tree_hop, cpu_mod.sample_hop

    def c_tree(graph, options, n_id, k, hs, first):
        counted.append(n_id.shape[0] - first)
        return real_tree(graph, options, n_id, k, hs, first)

    def c_hop(graph, options, n_id, k, hs, local_map, epoch, first, plain, stop_flag=None):
        counted.append(n_id.shape[0] - first)
        return real_hop(graph, options, n_id, k, hs, local_map, epoch, first, plain)

    cpu_mod.sample_tree_hop, cpu_mod.sample_hop = c_tree, c_hop
    info = {}
    for name, (smp, timed) in rows.items():
        counted.clear()
        edges = 0
        for b, t in zip(batches[1:], seed_times[1:]):
            out = smp.sample(b, seed_time=t) if timed else smp.sample(b)
            edges += sum(int(a.e_id.shape[0]) for a in out.adjs)
        info[name] = (sum(counted) / 5, edges / 5)
    cpu_mod.sample_tree_hop, cpu_mod.sample_hop = real_tree, real_hop

    def run_pass(smp, timed):
        b, t = batches[0], seed_times[0]
        smp.sample(b, seed_time=t) if timed else smp.sample(b)
        t0 = time.perf_counter()
        for b, t in zip(batches[1:], seed_times[1:]):
            smp.sample(b, seed_time=t) if timed else smp.sample(b)
        return (time.perf_counter() - t0) / 5

    l0 = open("/proc/loadavg").read().split()[:3]
    s0 = time.strftime("%H:%M:%S", time.gmtime())
    res = {n: [] for n in rows}
    names = list(rows)
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            res[name].append(run_pass(*rows[name]))
    l1 = open("/proc/loadavg").read().split()[:3]
    s1 = time.strftime("%H:%M:%S", time.gmtime())
    print(f"{s0}-{s1} UTC, load {' '.join(l0)} -> {' '.join(l1)}; {rounds} rounds, 2 threads, wall; medians")
    plain = np.array(res["plain"])
    print("| row | rows/batch | edges/batch | edges/row | ms/batch | ns/row | vs plain (edges/s) |")
    print("|---|---|---|---|---|---|---|")
    ratio = {}
    for name in names:
        t = np.array(res[name])
        nr, ne = info[name]
        ratio[name] = np.median((ne / t) / (info["plain"][1] / plain))
        print(
            f"| {name} | {nr:,.0f} | {ne:,.0f} | {ne / nr:.2f} | {np.median(t) * 1e3:.2f} | "
            f"{np.median(t) / nr * 1e9:.0f} | {ratio[name]:.3f} |"
        )
    for layout in ("time order", "sorted rows"):
        fl = f"floor, {layout} (disjoint, no times)"
        for s in ("uniform", "last"):
            tn = f"{s}, {layout}"
            epr = info[tn][1] / info[tn][0]
            fepr = info[fl][1] / info[fl][0]
            per_row = np.median(np.array(res[tn]) / info[tn][0] - np.array(res[fl]) / info[fl][0]) * 1e9
            print(
                f"{tn}: floor = {ratio[fl]:.3f} x {epr:.2f}/{fepr:.2f} = {ratio[fl] * epr / fepr:.3f} of plain; "
                f"measured {ratio[tn]:.3f}; "
                f"temporal row minus floor row: {per_row:.0f} ns (paired median)"
            )


if __name__ == "__main__":
    main()

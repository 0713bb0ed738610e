"""The scale row's floor: how much slower a batch's unavoidable reads get on a graph past the caches.

    NUMBA_NUM_THREADS=1 python tools/scale_floor.py --nodes 40000000 [--base-nodes 2000000] [--reorder degree]

Replays the memory reads of ``tools/sample_floor.py`` (each target's ``indptr`` entries and
``min(k, deg)`` row entries, one relabel-map read per sampled neighbour; nothing drawn, nothing
written) for batches sampled on ``papers-like:NODES`` (read into memory; with ``--reorder`` also the
copy built renumbered, its seeds mapped) and on ``papers-like:BASE``, and times them beside
``sample()`` on the same batches, rounds alternating, in CPU time (``time.process_time``: the
other jobs on a shared machine do not inflate it; run with one Numba thread so it is the
sampler's). Printed per graph: the floor and the sampler in ms a batch, the sampler over its
floor, and the base's time over this graph's (the share of base), for the floor and the sampler.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sample_floor import replay

from gglspeedup import CSRGraph, NeighborSampler
from gglspeedup.bench._common import seed_batches
from gglspeedup.datasets.papers_like import load_papers_like


def prepare(graph, fanouts, batches):
    """``(floor, ours)``: the batches' reads replayed, and the sampler on the same batches."""
    _, floor, ours = replay(graph, NeighborSampler(graph, fanouts, seed=0), fanouts, batches)
    floor(), ours()  # compile and warm
    return floor, ours


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=40_000_000)
    parser.add_argument("--base-nodes", type=int, default=2_000_000)
    parser.add_argument("--folder", default=None, help="papers-like cache folder (default: cache_folder())")
    parser.add_argument("--reorder", choices=["degree"], default=None)
    parser.add_argument("--fanouts", default="15,10,5")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    fanouts = [int(k) for k in args.fanouts.split(",")]
    specs = {"big": (args.nodes, None), "base": (args.base_nodes, None)}
    if args.reorder:
        specs[f"big, {args.reorder} order"] = (args.nodes, args.reorder)
    runs = {}
    for name, (nodes, reorder) in specs.items():
        mapped, _ = load_papers_like(nodes, 0, folder=args.folder, reorder=reorder)
        graph = CSRGraph(np.array(mapped.indptr), np.array(mapped.indices), node_order=mapped.node_order, _checked=True)
        batches = [graph.new_ids(b) for b in seed_batches(nodes, 1024, args.batches, 0)]  # unordered ids, mapped
        runs[name] = (graph, *prepare(graph, fanouts, batches))
    times = {(name, part): [] for name in runs for part in ("floor", "ours")}
    for r in range(args.rounds):
        for name, (graph, floor, ours) in runs.items():
            np.asarray(graph.indptr).max(), np.asarray(graph.indices).max()  # every page read first
            for part, run in (("floor", floor), ("ours", ours)) if r % 2 == 0 else (("ours", ours), ("floor", floor)):
                start = time.process_time()
                run()
                times[(name, part)].append((time.process_time() - start) * 1e3 / args.batches)
    times = {key: np.array(values) for key, values in times.items()}
    print(f"papers-like:{args.nodes} against :{args.base_nodes}, fanouts {fanouts}, batch 1024, CPU time")
    for name in runs:
        floor, ours = times[(name, "floor")], times[(name, "ours")]
        print(
            f"  {name:18s} floor {np.median(floor):7.2f} ms  sample() {np.median(ours):7.2f} ms  "
            f"sample/floor {np.median(ours / floor):.2f}  of base: floor "
            f"{np.median(times[('base', 'floor')] / floor):.3f}, "
            f"sample() {np.median(times[('base', 'ours')] / ours):.3f}"
        )


if __name__ == "__main__":
    main()

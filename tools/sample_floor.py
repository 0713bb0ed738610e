"""How far the CPU sampler is from the memory reads a batch cannot avoid, and what they allow against DGL.

    python tools/sample_floor.py [--graph powerlaw:2000000:32] [--fanouts 25,10] [--batch 1024] [--peers dgl]

Every hop of every batch is captured from ``NeighborSampler.sample`` and its memory reads replayed
by two read-only kernels (nothing is written, nothing is drawn):

- *fill reads*: each target's ``indptr`` entries and ``min(k, deg)`` entries of its row at spread
  positions, in blocks of 256 rows over Numba's threads with the fill loop's prefetch: the reads
  the count and fill passes cannot avoid;
- *map reads*: one read of the relabel map per sampled neighbour, serially, in sampled order, with
  the relabel's prefetch distance: the reads a relabel that keeps first-appearance order cannot
  avoid (its serial pass is what orders ``n_id``).

The floor runs them hop by hop, each hop's fill reads then its map reads, as the sampler does (run
apart, the map stays cached from one batch to the next and its reads look cheaper than they are). Rounds
interleave the floor, ``sample()`` and, with ``--peers dgl`` (run in the DGL peer venv),
DGL's ``sample_blocks`` on the same batches. Printed: ms per batch (median of rounds), our batch
over the floor, and DGL's batch over the floor: the most any sampler that makes these reads could
beat DGL by on this machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from numba import njit, prange

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gglspeedup import NeighborSampler
from gglspeedup._intrinsics import prefetch
from gglspeedup.bench import _common, peers
from gglspeedup.sampling._kernels.blocks import ROWS_PER_BLOCK
from gglspeedup.sampling._kernels.cpu import _PREFETCH_DISTANCE, _ROW_PREFETCH


@njit(parallel=True, nogil=True, cache=True)
def fill_reads(indptr, indices, targets, k, sums):
    """Read what a hop's count and fill read: ``indptr`` of each target, ``min(k, deg)`` row entries."""
    num_targets = targets.shape[0]
    for block in prange((num_targets + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK):
        lo = block * ROWS_PER_BLOCK
        hi = min(lo + ROWS_PER_BLOCK, num_targets)
        total = 0
        for i in range(lo, hi):
            if i + _ROW_PREFETCH < hi:
                prefetch(indptr, targets[i + _ROW_PREFETCH])
            start = indptr[targets[i]]
            deg = indptr[targets[i] + 1] - start
            for j in range(min(k, deg)):
                total += indices[start + (j * 7919) % deg]  # spread over the row, as draws are
        sums[block] = total


@njit(nogil=True, cache=True)
def map_reads(neighbours, local_map):
    """Read the relabel map once per sampled neighbour, in order (the serial relabel's reads)."""
    total = 0
    n = neighbours.shape[0]
    for q in range(n):
        if q + _PREFETCH_DISTANCE < n:
            prefetch(local_map, neighbours[q + _PREFETCH_DISTANCE])
        total += local_map[neighbours[q]]
    return total


def capture_hops(sampler, fanouts, batches):
    """Per batch, per hop (seeds' hop first): ``(targets, k, sampled neighbours)`` of the
    sampler's batches, the reads :func:`fill_reads` and :func:`map_reads` replay."""
    hops = []
    for seeds in batches:
        out = sampler.sample(seeds)
        n_id = np.asarray(out.n_id)
        per_batch = []
        for adj, k in zip(reversed(out.adjs), fanouts):  # adjs are outermost hop first
            targets = np.ascontiguousarray(n_id[: adj.size[1]])
            per_batch.append((targets, k, np.ascontiguousarray(n_id[np.asarray(adj.edge_index[0])])))
        hops.append(per_batch)
    return hops


def replay(graph, sampler, fanouts, batches):
    """``(hops, floor, ours)``: the batches' hops (:func:`capture_hops`), their reads replayed,
    and the sampler on the same batches (both uncompiled until first called)."""
    hops = capture_hops(sampler, fanouts, batches)
    local_map = np.full(graph.num_nodes, -1, np.int32)
    largest = max(len(targets) for per_batch in hops for targets, _, _ in per_batch)
    sums = np.zeros(largest // ROWS_PER_BLOCK + 1, np.int64)

    def floor():  # hop by hop as the sampler goes: the fill's reads evict map lines, as they do there
        for per_batch in hops:
            for targets, k, col in per_batch:
                fill_reads(graph.indptr, graph.indices, targets, k, sums)
                map_reads(col, local_map)

    def ours():
        for seeds in batches:
            sampler.sample(seeds)

    return hops, floor, ours


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="powerlaw:2000000:32")
    parser.add_argument("--fanouts", default="25,10")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--peers", default="", help="dgl: time DGL's sampler in the same rounds")
    args = parser.parse_args()
    fanouts = [int(k) for k in args.fanouts.split(",")]
    graph, _ = _common.load_graph(args.graph)
    batches = _common.seed_batches(graph.num_nodes, args.batch, args.batches, seed=0)
    sampler = NeighborSampler(graph, fanouts, seed=0)

    hops, floor, ours = replay(graph, sampler, fanouts, batches)
    edges = sum(len(col) for per_batch in hops for _, _, col in per_batch) / len(hops)
    contenders = {"floor": floor, "gglspeedup": ours}
    if "dgl" in args.peers.split(","):
        dgl = peers.prepare("dgl", graph, fanouts, seed=0)
        converted = [dgl.convert(seeds) for seeds in batches]

        def dgl_batches():
            for seeds in converted:
                dgl.sample(seeds)

        contenders["dgl"] = dgl_batches
    for run in contenders.values():  # compile and warm
        run()
    times = {name: [] for name in contenders}
    for r in range(args.rounds):
        for name in list(contenders) if r % 2 == 0 else list(contenders)[::-1]:
            start = time.perf_counter()
            contenders[name]()
            times[name].append((time.perf_counter() - start) * 1e3 / len(batches))
    times = {name: np.array(values) for name, values in times.items()}
    floor = times["floor"]
    print(
        f"{args.graph}, fanouts {fanouts}, batch {args.batch}: {edges:,.0f} edges a batch, "
        f"{args.batches} batches x {args.rounds} rounds"
    )
    for name, values in times.items():
        print(f"  {name:12s} {np.median(values):7.3f} ms a batch (median of rounds)")
    for name in ("gglspeedup", "dgl"):
        if name in times:
            ratio = times[name] / floor
            print(f"  {name} / floor: {np.median(ratio):.2f} (rounds {ratio.min():.2f}-{ratio.max():.2f})")
    if "dgl" in times:
        ratio = times["dgl"] / times["gglspeedup"]
        print(f"  dgl / gglspeedup: {np.median(ratio):.2f} (rounds {ratio.min():.2f}-{ratio.max():.2f})")


if __name__ == "__main__":
    main()

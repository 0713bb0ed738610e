"""PyG's own NeighborLoader against PyG's NodeLoader on gglspeedup.pyg's stores and sampler, in
interleaved rounds (the paired median is the figure; ``bench pyg``'s 10-batch rounds swing more).

    PYTHONPATH=. /work/peers/pyg/bin/python tools/pyg_loader_ab.py [--rounds 7] [--batches 30]

Run in the pyg-lib peer venv (scripts/peer_env_pyg.sh). Power-law graph of 200k nodes / 3.18M
edges, 128 float32 features, fanouts [15, 10], batch 1024: the graph of ``bench pyg``. On
2026-11-26 this script also had a third contender, PyG's stores with recycled output buffers
(commit 9202fb4, reverted: 0.93-1.00x fresh buffers).
"""

import argparse
import os
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader, NodeLoader

import gglspeedup as gg
from gglspeedup import pyg


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batches", type=int, default=30)
    args = parser.parse_args()
    graph = gg.datasets.synthetic_powerlaw(200_000, 16, seed=0)
    x = np.random.default_rng(0).random((graph.num_nodes, 128), dtype=np.float32)
    targets = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), graph.degree())
    edge_index = torch.from_numpy(np.stack([np.asarray(graph.indices, np.int64), targets]))
    data = Data(x=torch.from_numpy(x), edge_index=edge_index, num_nodes=graph.num_nodes)
    stores = (pyg.FeatureStore({"x": x}), pyg.GraphStore(graph))
    everyone = torch.arange(graph.num_nodes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaders = {
            "PyG's own (pyg-lib)": NeighborLoader(data, [15, 10], batch_size=1024),
            "ours (stores + Sampler)": NodeLoader(
                stores, pyg.Sampler(stores, [15, 10], seed=0), input_nodes=everyone, batch_size=1024
            ),
        }
    rng = np.random.default_rng(1)
    batches = [torch.from_numpy(rng.integers(0, graph.num_nodes, 1024)) for _ in range(args.batches)]
    for loader in loaders.values():
        for batch in batches[:3]:
            loader(batch)
    times = {name: [] for name in loaders}
    for _ in range(args.rounds):
        for name, loader in loaders.items():
            start = time.perf_counter()
            for batch in batches:
                loader(batch)
            times[name].append(time.perf_counter() - start)
    for name, rounds in times.items():
        median, best = args.batches / np.median(rounds), args.batches / min(rounds)
        print(f"{name:26s} {median:7.1f} batches/s median, best {best:7.1f}")
    own, ours = (np.array(rounds) for rounds in times.values())
    print(f"ours / PyG's own, paired median over rounds: {np.median(own / ours):.2f}x")


if __name__ == "__main__":
    main()

"""GraphSAGE with DistributedDataParallel: one process per device, spawned with torch.

The sampler and the feature store are built once, here in the parent, and passed to
``torch.multiprocessing.spawn``: their graph and feature table travel through shared memory
(a few hundred bytes are pickled), and each child builds its device state on first use.
Without a GPU every rank is a CPU process (gloo); with GPUs each rank gets one (NCCL).

    python demos/multigpu_torch_spawn.py                       # every visible GPU, else 2 CPU ranks
    python demos/multigpu_torch_spawn.py --devices cpu,cpu,cpu --epochs 5
    python demos/multigpu_torch_spawn.py --devices cuda:0,cuda:1 --cache-size 0.1G

The seed API spells the same thing ``MultiGPUSampler(device, csr)`` + ``set_size([25, 10])`` and
``Multi_CGPUFeature(rank, device_list, "0.1G", csr)`` (``gglspeedup.compat``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import time

import numpy as np


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default=None, help="comma-separated, one rank each (default: GPUs, else cpu,cpu)")
    parser.add_argument("--dataset", default="cora", choices=("cora", "citeseer"))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--fanouts", default="25,10", help="neighbours per hop, seeds' hop first")
    parser.add_argument("--batch-size", type=int, default=32, help="seeds per batch on each rank")
    parser.add_argument("--cache-size", default="0.1G", help="per-GPU feature cache (ignored on CPU ranks)")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120, help="seconds before a stuck collective fails")
    parser.add_argument("--json", default=None, help="write the final metrics here")
    return parser.parse_args(argv)


def default_devices() -> list[str]:
    from gglspeedup import _config

    if _config.HAS_CUPY_GPU and _config.HAS_NUMBA_CUDA:
        import cupy

        return [f"cuda:{i}" for i in range(cupy.cuda.runtime.getDeviceCount())]
    return ["cpu", "cpu"]


def run(rank, world_size, port, sampler, feature, y, split, args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from gglspeedup import backends
    from gglspeedup.examples.torch_models import SAGE

    device = sampler.devices[rank]
    on_gpu = device.is_cuda and not device.simulated
    torch_device = torch.device("cuda", device.index) if on_gpu else torch.device("cpu")
    if torch_device.type == "cuda":
        torch.cuda.set_device(torch_device)
    dist.init_process_group(
        "nccl" if torch_device.type == "cuda" else "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=args.timeout),
    )
    torch.manual_seed(args.seed)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = SAGE(feature.shape[1], args.hidden, int(y.max()) + 1).to(torch_device)
    model = DistributedDataParallel(model, device_ids=[torch_device.index] if torch_device.type == "cuda" else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)
    labels = torch.from_numpy(y).to(torch_device)
    train = split["train"]
    per_rank = len(train) // world_size  # equal batch counts on every rank, or DDP would wait forever

    def batch(seeds, key):
        n_id, adjs = sampler.sample(seeds, rank, key=key)  # on this rank's device
        x = feature.rank(rank)[n_id]  # rows equal x[n_id], on the same device
        x, adjs = backends.to("torch", (x, adjs))
        return x.to(torch_device), [(a.edge_index.to(torch_device), None, a.size) for a in adjs]

    history = []
    for epoch in range(args.epochs):
        model.train()
        order = np.random.default_rng(args.seed + epoch).permutation(train)  # same on every rank
        mine = order[rank * per_rank : (rank + 1) * per_rank]
        start, total_loss, steps = time.perf_counter(), 0.0, 0
        for step, first in enumerate(range(0, per_rank, args.batch_size)):
            seeds = mine[first : first + args.batch_size]
            x, adjs = batch(seeds, key=epoch * 100_000 + step)
            loss = torch.nn.functional.cross_entropy(model(x, adjs), labels[torch.from_numpy(seeds).to(torch_device)])
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients here
            optimizer.step()
            total_loss, steps = total_loss + loss.detach().item(), steps + 1
        if rank == 0:
            history.append({"epoch": epoch, "loss": total_loss / max(steps, 1), "seconds": time.perf_counter() - start})
            print(f"epoch {epoch:3d}  loss {history[-1]['loss']:.4f}  {history[-1]['seconds']:.2f} s", flush=True)
    if rank == 0:
        model.eval()
        correct = {}
        with torch.no_grad():
            for part in ("val", "test"):
                ids = split[part]
                x, adjs = batch(ids, key=10**9)
                correct[part] = float((model.module(x, adjs).argmax(1).cpu().numpy() == y[ids]).mean())
        print(
            f"world size {world_size} on {[str(d) for d in sampler.devices]}: "
            f"val accuracy {correct['val']:.3f}, test accuracy {correct['test']:.3f}",
            flush=True,
        )
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"world_size": world_size, "history": history, **correct}, handle, indent=2)
    dist.barrier()
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv=None):
    import torch.multiprocessing as mp

    import gglspeedup as gg
    from gglspeedup import datasets

    args = parse_args(argv)
    devices = args.devices.split(",") if args.devices else default_devices()
    graph, x, y, split = datasets.load(args.dataset, normalize=True)
    fanouts = [int(k) for k in args.fanouts.split(",")]
    sampler = gg.MultiDeviceSampler(graph, devices, fanouts, seed=args.seed)
    feature = gg.MultiDeviceFeature(x, devices, cache_size=args.cache_size, graph=graph)
    print(
        f"{args.dataset}: {graph.num_nodes} nodes, {graph.num_edges} edges; spawning {len(devices)} ranks on {devices}",
        flush=True,
    )
    # Split the cores between CPU ranks (children read these at import; oversubscribed thread
    # pools slow every rank down).
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for variable in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(variable, str(max(1, cores // len(devices))))
    mp.spawn(run, args=(len(devices), free_port(), sampler, feature, y, split, args), nprocs=len(devices), join=True)


if __name__ == "__main__":
    main()

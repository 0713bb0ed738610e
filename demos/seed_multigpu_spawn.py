"""The original gglspeedup README's multi-GPU example, as its users wrote it, with torch's spawn.

The seed API end to end: ``MultiGPUSampler(1, csr)`` and ``Multi_CGPUFeature(1, [0, 1], ".1G",
csr)`` built in the parent from a scipy CSR matrix, handed to the spawned ranks; each rank calls
``set_size([25, 10])``, ``ml_sp.sample(seed, rank)``, ``feat[dst_node]``, ``adj.cp2torch()`` and
``from_dlpack(x.toDlpack())``, then trains its GraphSAGE replica (``DistributedDataParallel``, the
README's ``paddle.DataParallel``) on its share of Cora's training nodes. (The README used Paddle's
``dist.spawn(..., gpus='0,1')`` and names it never defined; here every rank gets what it uses.)

On a machine without GPUs change only the two device arguments, as GammaGL's examples select the
CPU with ``-1``: ``MultiGPUSampler(-1, csr)`` and ``Multi_CGPUFeature(1, [-1, -1], ".1G", csr)``
(``tests/test_compat_spawn.py`` runs exactly that edit of this file)::

    python demos/seed_multigpu_spawn.py --epochs 5 --out results/
"""

import argparse
import json
import os
import socket
import time

import numpy as np
import scipy.sparse as sp
import torch
import torch.multiprocessing as mp
from torch.utils.dlpack import from_dlpack

from gglspeedup import datasets
from gglspeedup.compat import Multi_CGPUFeature, MultiGPUSampler
from gglspeedup.examples.torch_models import SAGE


def train(rank, ml_sp, feat, x, y, train_idx, test_idx, port, args):
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    ml_sp.set_size([25, 10])
    model, optimizer, device = None, None, None
    per_rank = len(train_idx) // args.nprocs  # equal step counts, or the gradient all-reduce would wait forever
    mine = train_idx[rank * per_rank : (rank + 1) * per_rank]
    rows_match, losses = True, []
    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = np.random.default_rng([args.seed, rank, epoch]).permutation(mine)
        for first in range(0, len(order), args.batch_size):
            seed = order[first : first + args.batch_size]
            dst_node, adjs = ml_sp.sample(seed, rank)
            cur_feat = feat[dst_node]
            adjs = [adj.cp2torch() for adj in adjs]
            all_node = from_dlpack(dst_node.toDlpack())
            cur_feat = from_dlpack(cur_feat.toDlpack())
            if model is None:  # the rank's device: where the sampler and the feature put the batch
                device = cur_feat.device
                model, optimizer = data_parallel_model(rank, device, cur_feat.shape[1], int(y.max()) + 1, port, args)
            rows_match &= bool(np.array_equal(cur_feat.cpu().numpy(), x[all_node.cpu().numpy()]))
            model.train()
            label = torch.from_numpy(y[seed]).to(device)
            loss = torch.nn.functional.cross_entropy(model(cur_feat, adjs), label)
            optimizer.zero_grad()
            loss.backward()  # the ranks' gradients are averaged here
            optimizer.step()
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        dst_node, adjs = ml_sp.sample(test_idx, rank)
        cur_feat = from_dlpack(feat[dst_node].toDlpack())
        predicted = model.module(cur_feat, [adj.cp2torch() for adj in adjs]).argmax(1).cpu().numpy()
    result = {
        "rank": rank,
        "device": str(device),
        "batches": len(losses),
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "rows_match": rows_match,
        "test_accuracy": float((predicted == y[test_idx]).mean()),
        "seconds": time.perf_counter() - start,
    }
    print(json.dumps(result), flush=True)
    if args.out:
        with open(os.path.join(args.out, f"rank{rank}.json"), "w") as handle:
            json.dump(result, handle)
    torch.distributed.destroy_process_group()


def data_parallel_model(rank, device, in_channels, out_channels, port, args):
    """GraphSAGE replicated with DistributedDataParallel (the README's paddle.DataParallel): NCCL
    between GPUs, gloo between CPU processes."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    init = f"tcp://127.0.0.1:{port}"
    torch.distributed.init_process_group(backend, init_method=init, rank=rank, world_size=args.nprocs)
    model = SAGE(in_channels, 64, out_channels).to(device)
    model = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )
    return model, torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="folder for each rank's rank<r>.json")
    args = parser.parse_args()
    if args.out:  # the docstring's `--out results/`: each rank wrote into it after training, and failed
        os.makedirs(args.out, exist_ok=True)
    graph, x, y, split = datasets.load("cora", normalize=True)
    source = np.asarray(graph.indices)
    target = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    edge_index = np.stack([source, target])  # Cora's (2, E) edge_index, as GammaGL's dataset holds it
    csr = sp.csr_matrix((np.ones((edge_index.shape[1],)), edge_index), shape=(graph.num_nodes,) * 2)

    ml_sp = MultiGPUSampler(1, csr)
    multi_feat = Multi_CGPUFeature(1, [0, 1], ".1G", csr)
    multi_feat.from_cpu_tensor(x)

    os.environ.setdefault("OMP_NUM_THREADS", "1")  # the ranks share the machine's cores
    spawn_args = (ml_sp, multi_feat, x, y, split["train"], split["test"], free_port(), args)
    mp.spawn(train, args=spawn_args, nprocs=args.nprocs)


if __name__ == "__main__":
    main()

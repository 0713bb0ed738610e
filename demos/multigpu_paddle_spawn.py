"""GraphSAGE with paddle.DataParallel: the original gglspeedup README's ``dist.spawn`` pattern, fixed.

The original README built ``MultiGPUSampler(1, csr)`` and ``Multi_CGPUFeature(1, [0, 1], ".1G", csr)``
in the parent, then called ``dist.spawn(train, args=(ml_sp, ), ...)`` although ``train`` took the
feature too, and used ``y``, ``all_node`` and ``adjs`` that were never defined. Here everything a
rank needs is passed to it, and the sampled ``n_id`` / ``adjs`` are the names used afterwards.

    python demos/multigpu_paddle_spawn.py                      # every visible GPU, else 2 CPU ranks
    python demos/multigpu_paddle_spawn.py --devices cpu,cpu --epochs 5

On a CPU-only Paddle build, ``paddle.distributed.spawn`` runs the ranks as CPU processes over
gloo (checked with paddlepaddle 3.3.1); if a build cannot, the demo exits with a message saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
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
    parser.add_argument("--json", default=None, help="write the final metrics here")
    return parser.parse_args(argv)


def make_model(in_channels, hidden, out_channels):
    import paddle
    from paddle import nn

    class SAGEConv(nn.Layer):
        """Mean-aggregating GraphSAGE layer on one sampled hop (targets first in ``x``)."""

        def __init__(self, fan_in, fan_out):
            super().__init__()
            self.neighbours = nn.Linear(fan_in, fan_out)
            self.root = nn.Linear(fan_in, fan_out, bias_attr=False)

        def forward(self, x, edge_index, num_targets):
            mean = paddle.geometric.send_u_recv(x, edge_index[0], edge_index[1], reduce_op="mean", out_size=num_targets)
            return self.neighbours(mean) + self.root(x[:num_targets])

    class SAGE(nn.Layer):
        def __init__(self):
            super().__init__()
            self.convs = nn.LayerList([SAGEConv(in_channels, hidden), SAGEConv(hidden, out_channels)])

        def forward(self, x, adjs):  # adjs: outermost hop first, as the sampler returns them
            for i, (edge_index, _, size) in enumerate(adjs):
                x = self.convs[i](x, edge_index, size[1])
                if i == 0:
                    x = nn.functional.dropout(nn.functional.relu(x), p=0.5, training=self.training)
            return x

    return SAGE()


def train(sampler, feature, y, split, args):
    import paddle
    import paddle.distributed as dist

    from gglspeedup import backends

    dist.init_parallel_env()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    sampler.set_fanouts([int(k) for k in args.fanouts.split(",")])  # the seed API's set_size
    paddle.seed(args.seed)
    model = paddle.DataParallel(make_model(feature.shape[1], args.hidden, int(y.max()) + 1))
    optimizer = paddle.optimizer.Adam(learning_rate=args.lr, parameters=model.parameters(), weight_decay=5e-4)
    train_idx = split["train"]
    per_rank = len(train_idx) // world_size  # equal step counts on every rank

    def batch(seeds, key):
        n_id, adjs = sampler.sample(seeds, rank, key=key)  # on this rank's device
        x = feature[n_id]  # the rank comes from paddle's launcher (PADDLE_TRAINER_ID)
        return backends.to("paddle", (x, adjs))

    for epoch in range(args.epochs):
        model.train()
        order = np.random.default_rng(args.seed + epoch).permutation(train_idx)  # same on every rank
        mine = order[rank * per_rank : (rank + 1) * per_rank]
        start, total_loss, steps = time.perf_counter(), 0.0, 0
        for step, first in enumerate(range(0, per_rank, args.batch_size)):
            seeds = mine[first : first + args.batch_size]
            x, adjs = batch(seeds, key=epoch * 100_000 + step)
            label = paddle.to_tensor(y[seeds])
            loss = nn_loss(model(x, adjs), label)
            loss.backward()  # DataParallel all-reduces the gradients
            optimizer.step()
            optimizer.clear_grad()
            total_loss, steps = total_loss + float(loss), steps + 1
        if rank == 0:
            print(
                f"epoch {epoch:3d}  loss {total_loss / max(steps, 1):.4f}  {time.perf_counter() - start:.2f} s",
                flush=True,
            )
    if rank == 0:
        model.eval()
        accuracy = {}
        with paddle.no_grad():
            for part in ("val", "test"):
                ids = split[part]
                x, adjs = batch(ids, key=10**9)
                accuracy[part] = float((model(x, adjs).argmax(1).numpy() == y[ids]).mean())
        print(
            f"world size {world_size}: val accuracy {accuracy['val']:.3f}, test accuracy {accuracy['test']:.3f}",
            flush=True,
        )
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"world_size": world_size, **accuracy}, handle, indent=2)


def nn_loss(logits, label):
    import paddle

    return paddle.nn.functional.cross_entropy(logits, label)


def default_devices() -> list[str]:
    from gglspeedup import _config

    if _config.HAS_CUPY_GPU and _config.HAS_NUMBA_CUDA:
        import cupy

        return [f"cuda:{i}" for i in range(cupy.cuda.runtime.getDeviceCount())]
    return ["cpu", "cpu"]


def main(argv=None):
    import paddle.distributed as dist

    import gglspeedup as gg
    from gglspeedup import datasets

    args = parse_args(argv)
    devices = args.devices.split(",") if args.devices else default_devices()
    parsed = [gg.device.as_device(d) for d in devices]
    if any(d.is_cuda for d in parsed) and not all(d.is_cuda for d in parsed):
        sys.exit("--devices must be all CUDA devices or all 'cpu'")
    graph, x, y, split = datasets.load(args.dataset, normalize=True)
    fanouts = [int(k) for k in args.fanouts.split(",")]
    sampler = gg.MultiDeviceSampler(graph, devices, fanouts, seed=args.seed)
    feature = gg.MultiDeviceFeature(x, devices, cache_size=args.cache_size, graph=graph)
    print(
        f"{args.dataset}: {graph.num_nodes} nodes; paddle.distributed.spawn with {len(devices)} ranks on {devices}",
        flush=True,
    )
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for variable in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(variable, str(max(1, cores // len(devices))))
    options = {"gpus": ",".join(str(d.index) for d in parsed)} if parsed[0].is_cuda else {}
    try:
        dist.spawn(train, args=(sampler, feature, y, split, args), nprocs=len(devices), **options)
    except (RuntimeError, ValueError) as error:
        if parsed[0].is_cuda:
            raise
        sys.exit(
            f"paddle.distributed.spawn could not run CPU ranks with this Paddle build ({error}); "
            "run on GPUs (--devices cuda:0,cuda:1) or use demos/multigpu_torch_spawn.py"
        )


if __name__ == "__main__":
    main()

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

import datetime
import socket

from gglspeedup.examples import cli, ranks


def parse_args(argv=None):
    parser = ranks.build_rank_parser(__doc__.splitlines()[0], spawn=True)
    parser.add_argument("--timeout", type=float, default=120, help="seconds before a stuck collective fails")
    parser.add_argument("--json", default=None, type=cli.out_file, help="write the final metrics here")
    return parser.parse_args(argv)


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

    def batch(seeds, key):
        n_id, adjs = sampler.sample(seeds, rank, key=key)  # on this rank's device
        x = feature.rank(rank)[n_id]  # rows equal x[n_id], on the same device
        x, adjs = backends.to("torch", (x, adjs))
        return x.to(torch_device), [(a.edge_index.to(torch_device), None, a.size) for a in adjs]

    def step(seeds, epoch, index):
        x, adjs = batch(seeds, key=epoch * 100_000 + index)
        loss = torch.nn.functional.cross_entropy(model(x, adjs), labels[torch.from_numpy(seeds).to(torch_device)])
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        return loss.detach().item()

    history = ranks.train_epochs(model, step, split["train"], rank, world_size, args)
    if rank == 0:
        model.eval()
        with torch.no_grad():
            correct = ranks.split_accuracy(
                lambda ids: model.module(*batch(ids, key=10**9)).argmax(1).cpu().numpy(), y, split
            )
        print(
            f"world size {world_size} on {[str(d) for d in sampler.devices]}: "
            f"val accuracy {correct['val']:.3f}, test accuracy {correct['test']:.3f}",
            flush=True,
        )
        ranks.write_metrics(args.json, {"world_size": world_size, "history": history, **correct})
    dist.barrier()
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv=None):
    import torch.multiprocessing as mp

    args = parse_args(argv)
    devices = ranks.rank_devices(args)
    graph, y, split, sampler, feature = ranks.spawn_inputs(args, devices)
    print(
        f"{args.dataset}: {graph.num_nodes} nodes, {graph.num_edges} edges; spawning {len(devices)} ranks on {devices}",
        flush=True,
    )
    ranks.share_cores(len(devices))
    mp.spawn(run, args=(len(devices), free_port(), sampler, feature, y, split, args), nprocs=len(devices), join=True)


if __name__ == "__main__":
    main()

"""GraphSAGE over features partitioned across processes or machines, launched with torchrun.

Every rank holds the whole graph topology (replicated) but only its own partition of the node
features and of a learnable node-embedding table; ``DistFeature`` fetches the rows a mini-batch
needs from their owners with ``all_to_all_single`` and, for the embeddings, sends their gradients
back to the owners in ``backward``. The dense weights are trained with DistributedDataParallel.

One machine, two processes::

    torchrun --standalone --nnodes 1 --nproc-per-node 2 demos/distributed_torch.py

Two machines, two processes each (run on both, with node-rank 0 and 1)::

    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr HOST0 --master-port 29500 \\
        demos/distributed_torch.py

Without GPUs the ranks are CPU processes over gloo; with GPUs rank ``r`` uses ``cuda:LOCAL_RANK``
and NCCL. Every lookup and every backward is a collective, so all ranks run the same number of
steps; a rank that dies makes the others fail after ``--timeout`` seconds instead of hanging.
"""

from __future__ import annotations

import datetime
import os

import numpy as np

from gglspeedup.examples import cli, ranks


def parse_args(argv=None):
    parser = ranks.build_rank_parser(__doc__.splitlines()[0])
    parser.add_argument("--embedding-dim", type=int, default=16, help="learnable per-node embedding width (0: none)")
    parser.add_argument("--partition", default="range", choices=("range", "hash"))
    parser.add_argument("--cache-size", default="0", help="local copy of the hottest remote feature rows")
    parser.add_argument("--timeout", type=float, default=120, help="seconds before a stuck collective fails")
    parser.add_argument("--json", default=None, type=cli.out_file, help="rank 0 writes the final metrics here")
    return parser.parse_args(argv)


def main(argv=None):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import gglspeedup as gg
    from gglspeedup import backends, datasets
    from gglspeedup.distributed import DistFeature, hash_partition, range_partition
    from gglspeedup.examples.torch_models import SAGE

    args = parse_args(argv)
    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # Lookups get their own group, so their exchanges never interleave with DDP's all-reduces.
    feature_group = dist.new_group(timeout=datetime.timedelta(seconds=args.timeout))

    graph, x, y, split = datasets.load(args.dataset, normalize=True)  # every rank: the topology
    num_nodes = graph.num_nodes
    if args.partition == "range":
        part = range_partition(num_nodes, world_size)
    else:
        part = hash_partition(num_nodes, world_size)
    mine = part == rank
    # In a real deployment each rank reads only its own rows from disk; Cora is small enough to slice.
    features = DistFeature(
        torch.from_numpy(x[mine]).to(device), part, group=feature_group, cache_size=args.cache_size, graph=graph
    )
    embedding = None
    if args.embedding_dim:
        generator = torch.Generator().manual_seed(args.seed + rank)
        local = torch.randn(int(mine.sum()), args.embedding_dim, generator=generator) * 0.1
        embedding = DistFeature(torch.nn.Parameter(local.to(device)), part, group=feature_group)

    sampler = gg.NeighborSampler(
        graph,
        args.fanouts,
        seed=args.seed,
        device=f"cuda:{local_rank}" if use_cuda else "cpu",
    )
    torch.manual_seed(args.seed)
    model = SAGE(x.shape[1] + args.embedding_dim, args.hidden, int(y.max()) + 1).to(device)
    model = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    parameters = list(model.parameters()) + ([embedding.local_rows] if embedding is not None else [])
    optimizer = torch.optim.Adam(parameters, lr=args.lr)
    labels = torch.from_numpy(y).to(device)

    def inputs(seeds, key):
        n_id, adjs = sampler.sample(seeds, key=key)
        n_id, adjs = backends.to("torch", (n_id, adjs))
        h = features[n_id.to(device)]  # collective: every rank calls it once per step
        if embedding is not None:
            h = torch.cat([h, embedding[n_id.to(device)]], dim=1)  # differentiable, also collective
        return h, [(a.edge_index.to(device), None, a.size) for a in adjs]

    def step(seeds, epoch, index):
        h, adjs = inputs(seeds, key=(epoch * 100_000 + index) * world_size + rank)
        loss = torch.nn.functional.cross_entropy(model(h, adjs), labels[torch.from_numpy(seeds).to(device)])
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduce + embedding gradients sent to their owners
        optimizer.step()
        return loss.detach().item()

    ranks.train_epochs(model, step, split["train"], rank, world_size, args)

    model.eval()
    results = {}
    with torch.no_grad():
        for part_name in ("val", "test"):
            ids = np.array_split(split[part_name], world_size)[rank]  # every rank scores its share
            h, adjs = inputs(ids, key=10**9 + rank)
            correct = (model.module(h, adjs).argmax(1) == labels[torch.from_numpy(ids).to(device)]).sum()
            counts = torch.stack([correct, torch.tensor(len(ids), device=device)]).to(torch.float64)
            dist.all_reduce(counts)
            results[part_name] = float(counts[0] / counts[1])
    if rank == 0:
        print(
            f"world size {world_size} ({'NCCL' if use_cuda else 'gloo'}): val accuracy {results['val']:.3f}, "
            f"test accuracy {results['test']:.3f}; feature lookups on rank 0: {features.stats()}",
            flush=True,
        )
        ranks.write_metrics(args.json, {"world_size": world_size, **results})
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

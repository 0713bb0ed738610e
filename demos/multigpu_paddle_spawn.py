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

import sys

from gglspeedup.examples import cli, ranks


def parse_args(argv=None):
    parser = ranks.build_rank_parser(__doc__.splitlines()[0], spawn=True)
    parser.add_argument("--json", default=None, type=cli.out_file, help="write the final metrics here")
    return parser.parse_args(argv)


def train(sampler, feature, y, split, args):
    import paddle
    import paddle.distributed as dist

    from gglspeedup import backends
    from gglspeedup.examples.paddle_models import build_sage

    dist.init_parallel_env()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    sampler.set_fanouts(args.fanouts)  # the seed API's set_size
    paddle.seed(args.seed)
    model = paddle.DataParallel(build_sage(feature.shape[1], args.hidden, int(y.max()) + 1))
    optimizer = paddle.optimizer.Adam(learning_rate=args.lr, parameters=model.parameters(), weight_decay=5e-4)

    def batch(seeds, key):
        n_id, adjs = sampler.sample(seeds, rank, key=key)  # on this rank's device
        x = feature[n_id]  # the rank comes from paddle's launcher (PADDLE_TRAINER_ID)
        return backends.to("paddle", (x, adjs))

    def step(seeds, epoch, index):
        x, adjs = batch(seeds, key=epoch * 100_000 + index)
        label = paddle.to_tensor(y[seeds])
        loss = paddle.nn.functional.cross_entropy(model(x, adjs), label)
        loss.backward()  # DataParallel all-reduces the gradients
        optimizer.step()
        optimizer.clear_grad()
        return float(loss)

    ranks.train_epochs(model, step, split["train"], rank, world_size, args)
    if rank == 0:
        model.eval()
        with paddle.no_grad():
            accuracy = ranks.split_accuracy(lambda ids: model(*batch(ids, key=10**9)).argmax(1).numpy(), y, split)
        print(
            f"world size {world_size}: val accuracy {accuracy['val']:.3f}, test accuracy {accuracy['test']:.3f}",
            flush=True,
        )
        ranks.write_metrics(args.json, {"world_size": world_size, **accuracy})


def main(argv=None):
    import paddle.distributed as dist

    import gglspeedup as gg

    args = parse_args(argv)
    devices = ranks.rank_devices(args)
    parsed = [gg.device.as_device(d) for d in devices]
    if any(d.is_cuda for d in parsed) and not all(d.is_cuda for d in parsed):
        sys.exit("--devices must be all CUDA devices or all 'cpu'")
    graph, y, split, sampler, feature = ranks.spawn_inputs(args, devices)
    print(
        f"{args.dataset}: {graph.num_nodes} nodes; paddle.distributed.spawn with {len(devices)} ranks on {devices}",
        flush=True,
    )
    ranks.share_cores(len(devices))
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

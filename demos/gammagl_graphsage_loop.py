"""GammaGL's own GraphSAGE loop, on GammaGL's NeighborSampler and on gglspeedup's drop-in, same run.

The loop is GammaGL's (``examples/graphsage/reddit_sage_trainer.py``): its ``GraphSAGE_Sample_Model``,
its ``NeighborSampler(edge_index=..., node_idx=..., sample_lists=[25, 10], batch_size=...,
shuffle=True)`` call, ``tlx.gather(x, n_id)``, ``TrainOneStep``, and ``net.inference`` over a
full-neighbour loader (``sample_lists=[-1]``, every node, layer by layer). It runs twice with the
same model seed: once with ``gammagl.loader.NeighborSampler``, once with
``gglspeedup.gammagl.NeighborSampler`` (the only line that differs), and prints each epoch's time
and the validation / test accuracy of both::

    TL_BACKEND=torch python demos/gammagl_graphsage_loop.py --dataset cora --epochs 20
    TL_BACKEND=torch python demos/gammagl_graphsage_loop.py --device cuda:0   # gglspeedup samples on the GPU

Needs GammaGL and TensorLayerX (``bash scripts/peer_env_gammagl.sh`` builds an environment with
both); exits with one line naming what is missing, or what to fix in TensorLayerX on torch 2.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

os.environ.setdefault("TL_BACKEND", "torch")


def parse_args(argv=None):
    from gglspeedup.examples.cli import out_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora", choices=("cora", "citeseer"))
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--fanouts", default="25,10")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.005)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--device", default="cpu", help="where gglspeedup samples: cpu (or -1), cuda:0 (or 0)")
    parser.add_argument("--samplers", default="gammagl,gglspeedup", help="which samplers to run, in order")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, type=out_file, help="write the results here")
    return parser.parse_args(argv)


def load_gammagl():
    """``(tlx, GammaGL's NeighborSampler, GraphSAGE_Sample_Model, TrainOneStep, WithLoss)``, or exit
    with one line saying what is missing or broken."""
    try:
        import tensorlayerx as tlx
        from gammagl.loader import NeighborSampler
        from gammagl.models import GraphSAGE_Sample_Model
        from tensorlayerx.model import TrainOneStep, WithLoss
    except ImportError as error:
        sys.exit(
            f"this demo needs GammaGL and TensorLayerX, which do not import here ({error}); "
            "bash scripts/peer_env_gammagl.sh builds an environment with both"
        )
    from gglspeedup.gammagl import tensorlayerx_problem

    problem = tensorlayerx_problem()
    if problem:
        sys.exit(problem)
    return tlx, NeighborSampler, GraphSAGE_Sample_Model, TrainOneStep, WithLoss


class Moved:
    """``loader``'s batches through ``to_model``, iterable again for each layer of ``inference``."""

    def __init__(self, loader, to_model):
        self.loader, self.to_model = loader, to_model

    def __iter__(self):
        return (self.to_model(*batch) for batch in self.loader)


def run(name, make_loader, tlx, Model, TrainOneStep, WithLoss, data, args) -> dict:
    """GammaGL's loop with ``make_loader`` as its ``NeighborSampler``: per-epoch seconds, accuracy."""
    edge_index, x, y, train_idx, val_idx, test_idx, num_classes, to_model = data
    fanouts = [int(k) for k in args.fanouts.split(",")]
    train_loader = make_loader(edge_index=edge_index, node_idx=train_idx, sample_lists=fanouts,
                               batch_size=args.batch_size, shuffle=True)  # fmt: skip
    full_loader = make_loader(edge_index=edge_index, node_idx=None, sample_lists=[-1], batch_size=4096, shuffle=False)
    tlx.set_seed(args.seed)
    net = Model(in_feat=x.shape[1], hid_feat=args.hidden, out_feat=num_classes, drop_rate=args.dropout,
                num_layers=len(fanouts))  # fmt: skip

    class SemiSpvzLoss(WithLoss):
        def __init__(self, net, loss_fn):
            super().__init__(backbone=net, loss_fn=loss_fn)

        def forward(self, data, y):
            logits = self.backbone_network(data["x"], data["subgs"])
            return self._loss_fn(logits, tlx.gather(data["y"], data["dst_node"]))

    train_one_step = TrainOneStep(
        SemiSpvzLoss(net, tlx.losses.softmax_cross_entropy_with_logits),
        tlx.optimizers.Adam(args.lr),
        net.trainable_weights,
    )

    def accuracy(logits, index):
        predicted = tlx.argmax(tlx.gather(logits, index), axis=1)
        return float(tlx.reduce_mean(tlx.cast(predicted == tlx.gather(y, index), tlx.float32)))

    history = []
    for epoch in range(args.epochs):
        start = time.perf_counter()
        for dst_node, n_id, adjs in train_loader:
            dst_node, n_id, adjs = to_model(dst_node, n_id, adjs)
            net.set_train()
            batch = {"x": tlx.gather(x, n_id), "y": y, "dst_node": dst_node, "subgs": adjs}
            loss = train_one_step(batch, tlx.convert_to_tensor([0]))
        seconds = time.perf_counter() - start
        net.set_eval()
        logits = net.inference(x, Moved(full_loader, to_model), x)
        val, test = accuracy(logits, val_idx), accuracy(logits, test_idx)
        history.append({"epoch": epoch, "seconds": seconds, "loss": float(loss), "val": val, "test": test})
        print(
            f"[{name:10s}] epoch {epoch:3d}  {seconds:6.3f} s  loss {float(loss):.4f}  val {val:.3f}  test {test:.3f}"
        )
    warm = [h["seconds"] for h in history[1:]] or [history[0]["seconds"]]
    return {"history": history, "first_epoch_s": history[0]["seconds"], "mean_epoch_s": sum(warm) / len(warm),
            "val": history[-1]["val"], "test": history[-1]["test"]}  # fmt: skip


def main(argv=None) -> dict:
    args = parse_args(argv)
    tlx, GammaGLSampler, Model, TrainOneStep, WithLoss = load_gammagl()
    import numpy as np

    from gglspeedup import datasets
    from gglspeedup.gammagl import NeighborSampler

    graph, x, y, split = datasets.load(args.dataset, normalize=True)
    sources = np.asarray(graph.indices, dtype=np.int64)
    targets = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
    on_gpu = str(args.device) not in ("cpu", "-1")
    if on_gpu:
        tlx.set_device("GPU", int(str(args.device).split(":")[-1]))

    def to_model(dst_node, n_id, adjs):
        """GammaGL's sampler yields CPU tensors: on a GPU the loop moves them (ours are there)."""
        if not on_gpu or n_id.is_cuda:
            return dst_node, n_id, adjs
        for adj in adjs if isinstance(adjs, list) else [adjs]:
            adj.edge_index = adj.edge_index.cuda()
        return dst_node.cuda(), n_id.cuda(), adjs

    data = (
        tlx.convert_to_tensor(np.stack([sources, targets])),
        tlx.convert_to_tensor(x),
        tlx.convert_to_tensor(y.astype(np.int64)),
        *(tlx.convert_to_tensor(np.asarray(split[part], dtype=np.int64)) for part in ("train", "val", "test")),
        int(y.max()) + 1,
        to_model,
    )
    loaders = {
        "gammagl": GammaGLSampler,
        "gglspeedup": functools.partial(NeighborSampler, seed=args.seed, device=args.device),
    }
    results = {}
    for name in args.samplers.split(","):
        results[name] = run(name, loaders[name], tlx, Model, TrainOneStep, WithLoss, data, args)
    print(
        f"\n{args.dataset}, fanouts {args.fanouts}, batch {args.batch_size}, {args.epochs} epochs, device {args.device}"
    )
    for name, result in results.items():
        print(
            f"  {name:10s} first epoch {result['first_epoch_s']:.3f} s, later epochs {result['mean_epoch_s']:.3f} s; "
            f"val {result['val']:.3f}, test {result['test']:.3f}"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])

"""GraphSAGE with GammaGL's sampled-subgraph model, fed by gglspeedup (the original gglspeedup's
home). Written against GammaGL's ``examples/graphsage`` sampler-based script: the model is called
as ``net(x, adjs)`` with ``adjs`` a list of ``Adj(edge_index, e_id, size)`` named tuples, outermost
hop first, ``edge_index`` int64 (2, E) tensors of TensorLayerX's backend and ``size`` a tuple of
Python ints (what ``adj.cp2torch()`` / ``cp2tf()`` / ``cp2paddle()`` return).

    TL_BACKEND=torch python demos/gammagl_sage.py --dataset cora --epochs 20

Needs ``gammagl`` and ``tensorlayerx`` (``bash scripts/peer_env_gammagl.sh`` builds an environment
with both). Exits with one line when they do not import, or when TensorLayerX cannot train on the
installed torch (PyPI's TensorLayerX 0.5.8 on torch 2: the line names the two call sites to fix).
For GammaGL's own loop and ``NeighborSampler`` call with gglspeedup's drop-in, see
``demos/gammagl_graphsage_loop.py``.
"""

import os
import sys

os.environ.setdefault("TL_BACKEND", "torch")

from gglspeedup import examples


def gammagl_inputs(batch) -> dict:
    """The ``data`` dict GammaGL's ``SemiSpvzLoss`` reads, from a loader batch in backend ``tlx``."""
    return {"x": batch.x, "y": batch.y, "subgs": list(batch.adjs), "batch_size": batch.batch_size}


def main(argv=None) -> dict:
    parser = examples.build_parser(
        "GraphSAGE (GammaGL GraphSAGE_Sample_Model) trained on gglspeedup batches.", epochs=20, batch_size=64
    )
    args = parser.parse_args(argv)
    try:
        import tensorlayerx as tlx
        from gammagl.models import GraphSAGE_Sample_Model
        from tensorlayerx.model import TrainOneStep, WithLoss
    except ImportError as error:
        sys.exit(
            f"gammagl_sage.py needs GammaGL and TensorLayerX, which do not import here ({type(error).__name__}: "
            f"{error}); bash scripts/peer_env_gammagl.sh builds an environment with both"
        )
    from gglspeedup.gammagl import tensorlayerx_problem

    problem = tensorlayerx_problem()  # TensorLayerX 0.5.8 on torch 2 fails at the model and the optimizer
    if problem:
        sys.exit(problem)

    setup = examples.setup_training(args, "tlx")  # tensors of TL_BACKEND's framework, zero-copy
    net = GraphSAGE_Sample_Model(
        in_feat=setup.info["features"],
        hid_feat=args.hidden,
        out_feat=setup.num_classes,
        drop_rate=args.dropout,
        num_layers=len(args.fanouts),
    )

    class SemiSpvzLoss(WithLoss):
        def __init__(self, net, loss_fn):
            super().__init__(backbone=net, loss_fn=loss_fn)

        def forward(self, data, label):
            logits = self.backbone_network(data["x"], data["subgs"])
            return self._loss_fn(logits, label)

    optimizer = tlx.optimizers.Adam(lr=args.lr, weight_decay=args.weight_decay)
    train_one_step = TrainOneStep(
        SemiSpvzLoss(net, tlx.losses.softmax_cross_entropy_with_logits), optimizer, net.trainable_weights
    )

    def correct(logits, y):
        return int(tlx.reduce_sum(tlx.cast(tlx.argmax(logits, axis=1) == y, tlx.int64)))

    def train_step(batch):
        net.set_train()
        loss = train_one_step(gammagl_inputs(batch), batch.y)
        net.set_eval()
        return float(loss), correct(net(batch.x, list(batch.adjs)), batch.y)

    def eval_step(batch):
        net.set_eval()
        return correct(net(batch.x, list(batch.adjs)), batch.y)

    history, result = examples.fit(setup, args, train_step, eval_step)
    return examples.report(result, history, args, name="gammagl_sage.png", title="GraphSAGE (GammaGL)")


if __name__ == "__main__":
    main(sys.argv[1:])

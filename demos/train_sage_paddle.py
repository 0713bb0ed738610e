"""GraphSAGE in Paddle on gglspeedup batches, handed over zero-copy (DLPack).

python demos/train_sage_paddle.py --dataset cora --epochs 20
"""

import sys

from gglspeedup import examples


def main(argv=None) -> dict:
    parser = examples.build_parser(
        "GraphSAGE (Paddle) trained on gglspeedup's sampler and loader.", epochs=20, batch_size=64
    )
    args = parser.parse_args(argv)
    import paddle  # before anything imports tensorflow (the reverse order crashes the process)

    from gglspeedup.examples.paddle_models import build_sage

    paddle.seed(args.seed)
    if examples.best_device() == "cpu" and args.device in ("auto", "cpu"):
        paddle.set_device("cpu")
    setup = examples.setup_training(args, "paddle")
    print(f"GraphSAGE (Paddle {paddle.__version__}) on {setup.info}, fanouts {args.fanouts}")
    model = build_sage(setup.info["features"], args.hidden, setup.num_classes, len(args.fanouts), args.dropout)
    optimizer = paddle.optimizer.Adam(
        learning_rate=args.lr, parameters=model.parameters(), weight_decay=args.weight_decay
    )

    def correct(logits, y):
        return int((logits.argmax(axis=1) == y).astype("int64").sum())

    def train_step(batch):
        model.train()
        logits = model(batch.x, batch.adjs)
        loss = paddle.nn.functional.cross_entropy(logits, batch.y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        return float(loss), correct(logits, batch.y)

    @paddle.no_grad()
    def eval_step(batch):
        model.eval()
        return correct(model(batch.x, batch.adjs), batch.y)

    def snapshot():
        return {name: value.clone() for name, value in model.state_dict().items()}

    history, result = examples.fit(setup, args, train_step, eval_step, snapshot=snapshot, restore=model.set_state_dict)
    return examples.report(result, history, args, name="train_sage_paddle.png", title="GraphSAGE (Paddle)")


if __name__ == "__main__":
    main(sys.argv[1:])

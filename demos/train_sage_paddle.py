"""GraphSAGE in Paddle on gglspeedup batches, handed over zero-copy (DLPack).

python demos/train_sage_paddle.py --dataset cora --epochs 20
"""

import sys

from gglspeedup import examples


def build_model(paddle, in_channels, hidden, out_channels, num_layers, dropout):
    nn, F = paddle.nn, paddle.nn.functional

    class SAGEConv(nn.Layer):
        """Mean aggregation over sampled neighbours + root weight (PyG's SAGEConv)."""

        def __init__(self, in_dim, out_dim):
            super().__init__()
            self.lin_l = nn.Linear(in_dim, out_dim)
            self.lin_r = nn.Linear(in_dim, out_dim, bias_attr=False)

        def forward(self, x, x_target, edge_index):
            mean = paddle.geometric.send_u_recv(
                x, edge_index[0], edge_index[1], reduce_op="mean", out_size=x_target.shape[0]
            )
            return self.lin_l(mean) + self.lin_r(x_target)

    class SAGE(nn.Layer):
        def __init__(self):
            super().__init__()
            widths = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
            self.convs = nn.LayerList([SAGEConv(widths[i], widths[i + 1]) for i in range(num_layers)])

        def forward(self, x, adjs):
            for i, (edge_index, _, size) in enumerate(adjs):  # outermost hop first
                x = self.convs[i](x, x[: size[1]], edge_index)
                if i != len(self.convs) - 1:
                    x = F.dropout(F.relu(x), p=dropout, training=self.training)
            return x

    return SAGE()


def main(argv=None) -> dict:
    parser = examples.build_parser(
        "GraphSAGE (Paddle) trained on gglspeedup's sampler and loader.", epochs=20, batch_size=64
    )
    args = parser.parse_args(argv)
    import paddle  # before anything imports tensorflow (the reverse order crashes the process)

    paddle.seed(args.seed)
    if examples.best_device() == "cpu" and args.device in ("auto", "cpu"):
        paddle.set_device("cpu")
    setup = examples.setup_training(args, "paddle")
    print(f"GraphSAGE (Paddle {paddle.__version__}) on {setup.info}, fanouts {args.fanouts}")
    model = build_model(paddle, setup.info["features"], args.hidden, setup.num_classes, len(args.fanouts), args.dropout)
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

"""GraphSAGE in TensorFlow (Keras layers) on gglspeedup batches, handed over zero-copy (DLPack).

python demos/train_sage_tensorflow.py --dataset cora --epochs 20
"""

import sys

from gglspeedup import examples


def build_model(tf, in_channels, hidden, out_channels, num_layers, dropout, seed=0):
    """A ``tf.Module`` (plain variables: Keras 3 layers refuse Python ints inside ``adjs``)."""
    init = tf.keras.initializers.GlorotUniform(seed=seed)

    class SAGEConv(tf.Module):
        """Mean aggregation over sampled neighbours + root weight (PyG's SAGEConv)."""

        def __init__(self, in_dim, out_dim):
            super().__init__()
            self.w_l = tf.Variable(init((in_dim, out_dim)), name="w_l")  # neighbours
            self.w_r = tf.Variable(init((in_dim, out_dim)), name="w_r")  # root
            self.bias = tf.Variable(tf.zeros(out_dim), name="bias")

        def __call__(self, x, x_target, edge_index):
            messages = tf.gather(x, edge_index[0])
            mean = tf.math.unsorted_segment_mean(messages, edge_index[1], num_segments=tf.shape(x_target)[0])
            return mean @ self.w_l + x_target @ self.w_r + self.bias

    class SAGE(tf.Module):
        def __init__(self):
            super().__init__()
            widths = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
            self.convs = [SAGEConv(widths[i], widths[i + 1]) for i in range(num_layers)]

        def __call__(self, x, adjs, training=False):
            for i, (edge_index, _, size) in enumerate(adjs):  # outermost hop first
                x = self.convs[i](x, x[: size[1]], edge_index)
                if i != len(self.convs) - 1:
                    x = tf.nn.relu(x)
                    if training and dropout > 0:
                        x = tf.nn.dropout(x, rate=dropout)
            return x

    return SAGE()


def main(argv=None) -> dict:
    parser = examples.build_parser(
        "GraphSAGE (TensorFlow) trained on gglspeedup's sampler and loader.", epochs=20, batch_size=64
    )
    args = parser.parse_args(argv)
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(examples.cpu_threads(args))
    except RuntimeError:  # TensorFlow already ran an op in this process: keep its thread pool
        pass
    tf.random.set_seed(args.seed)
    setup = examples.setup_training(args, "tensorflow")
    print(f"GraphSAGE (TensorFlow {tf.__version__}) on {setup.info}, fanouts {args.fanouts}")
    model = build_model(
        tf, setup.info["features"], args.hidden, setup.num_classes, len(args.fanouts), args.dropout, seed=args.seed
    )
    optimizer = tf.keras.optimizers.Adam(learning_rate=args.lr, weight_decay=args.weight_decay)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def correct(logits, y):
        return int(tf.reduce_sum(tf.cast(tf.argmax(logits, axis=1) == y, tf.int64)))

    def train_step(batch):
        with tf.GradientTape() as tape:
            logits = model(batch.x, batch.adjs, training=True)
            loss = loss_fn(batch.y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return float(loss), correct(logits, batch.y)

    def eval_step(batch):
        return correct(model(batch.x, batch.adjs, training=False), batch.y)

    def snapshot():
        return [w.numpy().copy() for w in model.trainable_variables]

    def restore(state):
        for variable, value in zip(model.trainable_variables, state):
            variable.assign(value)

    history, result = examples.fit(setup, args, train_step, eval_step, snapshot=snapshot, restore=restore)
    return examples.report(result, history, args, name="train_sage_tensorflow.png", title="GraphSAGE (TensorFlow)")


if __name__ == "__main__":
    main(sys.argv[1:])

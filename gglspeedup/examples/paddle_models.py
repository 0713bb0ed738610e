"""GraphSAGE in Paddle on sampled blocks, for the Paddle demos (``demos/train_sage_paddle.py``,
``demos/multigpu_paddle_spawn.py``).

Batches in the layout of :mod:`.torch_models`: ``adjs`` outermost hop first, each
``(edge_index, e_id, size)`` with ``edge_index[0]`` a row of the current ``x`` and ``edge_index[1]``
a row of ``x[:size[1]]`` (targets come first). Paddle is imported when a model is built, not with
this module: a script that also uses TensorFlow must import Paddle first (the reverse order crashes
the process).
"""

from __future__ import annotations

__all__ = ["build_sage"]


def build_sage(in_channels: int, hidden: int, out_channels: int, num_layers: int = 2, dropout: float = 0.5):
    """A ``paddle.nn.Layer``: one mean-aggregating GraphSAGE layer per hop (PyG's ``SAGEConv``:
    neighbours' mean and root, each through its own weight), ReLU + dropout between layers;
    called as ``model(x, adjs)``."""
    import paddle
    from paddle import nn

    F = nn.functional

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

"""PyTorch models on sampled blocks and the training step shared by the torch demos.

Models read the loader's batches in PyG's layout: ``adjs`` outermost hop first, each
``Adj(edge_index, e_id, size)`` with ``edge_index[0]`` the source (a row of the current ``x``) and
``edge_index[1]`` the target (a row of ``x[:size[1]]``, since targets come first in ``n_id``).
The plain-torch layers below are the default; :func:`conv_classes` gives PyG's ``SAGEConv`` /
``GATConv`` on request (``--pyg-layers``), never because ``torch_geometric`` happens to be
installed: a run computes the same thing on every machine. Importing this module imports torch.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .cli import cpu_threads
from .loop import fit

__all__ = ["SAGEConv", "GATConv", "SAGE", "GAT", "train_model", "evaluate", "conv_classes", "torch_device"]


class SAGEConv(nn.Module):
    """GraphSAGE layer with mean aggregation: ``W_r x_i + W_n mean_{j -> i} x_j + b``.

    Call as ``conv((x, x_target), edge_index)`` with ``x`` (N, F_in), ``x_target`` (T, F_in) and
    ``edge_index`` int64 (2, E) (sources in ``[0, N)``, targets in ``[0, T)``); returns (T, F_out).
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.lin_l = nn.Linear(in_channels, out_channels, bias=True)  # neighbours
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False)  # root

    def forward(self, x, edge_index):
        x, x_target = x if isinstance(x, tuple) else (x, x)
        source, target = edge_index[0], edge_index[1]
        num_targets = x_target.shape[0]
        total = x.new_zeros((num_targets, x.shape[1])).index_add_(0, target, x.index_select(0, source))
        count = torch.bincount(target, minlength=num_targets).clamp_(min=1).to(x.dtype)
        return self.lin_l(total / count.unsqueeze(1)) + self.lin_r(x_target)


class GATConv(nn.Module):
    """Graph attention layer (GAT, Velickovic et al.) on a sampled block, with self loops.

    Attention logits ``LeakyReLU(a_s . W x_j + a_t . W x_i)`` are soft-maxed over each target's
    sampled neighbours plus itself; ``heads`` outputs are concatenated (``concat=True``) or
    averaged. Same call convention as :class:`SAGEConv`; returns (T, heads * F_out) or (T, F_out).
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 4, concat: bool = True, dropout: float = 0.0):
        super().__init__()
        self.heads, self.out_channels, self.concat, self.dropout = heads, out_channels, concat, dropout
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        self.bias = nn.Parameter(torch.zeros(heads * out_channels if concat else out_channels))
        nn.init.xavier_uniform_(self.lin.weight)
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)

    def forward(self, x, edge_index):
        x, x_target = x if isinstance(x, tuple) else (x, x)
        num_targets = x_target.shape[0]
        loops = torch.arange(num_targets, device=edge_index.device, dtype=edge_index.dtype)
        source = torch.cat([edge_index[0], loops])  # target i is row i of x (targets come first)
        target = torch.cat([edge_index[1], loops])
        h = self.lin(x).view(-1, self.heads, self.out_channels)
        score_src = (h * self.att_src).sum(-1)
        score_dst = (h[:num_targets] * self.att_dst).sum(-1)
        logits = F.leaky_relu(score_src[source] + score_dst[target], 0.2)  # (E, heads)
        index = target.unsqueeze(1).expand_as(logits)
        peak = logits.new_full((num_targets, self.heads), float("-inf"))
        peak = peak.scatter_reduce(0, index, logits, reduce="amax", include_self=True)
        weight = (logits - peak[target]).exp()
        norm = weight.new_zeros((num_targets, self.heads)).index_add_(0, target, weight)
        alpha = F.dropout(weight / norm[target], p=self.dropout, training=self.training)
        out = h.new_zeros((num_targets, self.heads, self.out_channels))
        out.index_add_(0, target, h[source] * alpha.unsqueeze(-1))
        # not reshape(T, -1): with no targets (a graph without nodes) -1 is ambiguous and torch refuses
        out = out.reshape(num_targets, self.heads * self.out_channels) if self.concat else out.mean(dim=1)
        return out + self.bias


def conv_classes(pyg: bool = False):
    """``(SAGEConv, GATConv, source)``: this module's plain-torch layers (``"plain torch"``), or
    with ``pyg`` PyG's (``"torch_geometric"``; ``ImportError`` naming the extra when PyG does not
    import). The default does not depend on what is installed."""
    if not pyg:
        return SAGEConv, GATConv, "plain torch"
    try:
        from torch_geometric.nn import GATConv as PyGGATConv
        from torch_geometric.nn import SAGEConv as PyGSAGEConv
    except ImportError as error:
        raise ImportError(
            f"--pyg-layers needs torch_geometric, which does not import ({error}): pip install gglspeedup[pyg]"
        ) from None
    return PyGSAGEConv, PyGGATConv, "torch_geometric"


class SAGE(nn.Module):
    """GraphSAGE over sampled blocks: one :class:`SAGEConv` per hop, ReLU + dropout between;
    ``input_dropout`` drops input features first (the link demo's regulariser on sparse
    bag-of-words features)."""

    def __init__(
        self,
        in_channels: int,
        hidden: int,
        out_channels: int,
        num_layers: int = 2,
        dropout: float = 0.5,
        conv=None,
        input_dropout: float = 0.0,
    ):
        super().__init__()
        conv = conv or conv_classes()[0]
        widths = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.convs = nn.ModuleList(conv(widths[i], widths[i + 1]) for i in range(num_layers))
        self.dropout, self.input_dropout = dropout, input_dropout

    def forward(self, x, adjs):
        if len(adjs) != len(self.convs):
            raise ValueError(f"the model has {len(self.convs)} layers but the batch has {len(adjs)} hops")
        if self.input_dropout:
            x = F.dropout(x, p=self.input_dropout, training=self.training)
        for i, (edge_index, _, size) in enumerate(adjs):  # outermost hop first
            x = self.convs[i]((x, x[: size[1]]), edge_index)
            if i != len(self.convs) - 1:
                x = F.dropout(F.relu(x), p=self.dropout, training=self.training)
        return x


class GAT(nn.Module):
    """Two-or-more-layer GAT over sampled blocks (multi-head hidden layers, one averaged head out)."""

    def __init__(
        self,
        in_channels: int,
        hidden: int,
        out_channels: int,
        num_layers: int = 2,
        heads: int = 4,
        dropout: float = 0.5,
        conv=None,
    ):
        super().__init__()
        conv = conv or conv_classes()[1]
        layers, width = [], in_channels
        for _ in range(num_layers - 1):
            layers.append(conv(width, hidden, heads=heads, dropout=dropout))
            width = hidden * heads
        layers.append(conv(width, out_channels, heads=1, concat=False, dropout=dropout))
        self.convs = nn.ModuleList(layers)
        self.dropout = dropout

    def forward(self, x, adjs):
        if len(adjs) != len(self.convs):
            raise ValueError(f"the model has {len(self.convs)} layers but the batch has {len(adjs)} hops")
        for i, (edge_index, _, size) in enumerate(adjs):
            x = F.dropout(x, p=self.dropout, training=self.training)
            x = self.convs[i]((x, x[: size[1]]), edge_index)
            if i != len(self.convs) - 1:
                x = F.elu(x)
        return x


def torch_device(device) -> torch.device:
    """The ``torch.device`` for a gglspeedup device string (``"cpu"``, ``"cuda:1"``)."""
    from ..device import as_device

    parsed = as_device(device)
    return torch.device("cuda", parsed.index) if parsed.is_cuda and not parsed.simulated else torch.device("cpu")


@torch.no_grad()
def evaluate(model, loader) -> float:
    """Accuracy of ``model`` over every seed of ``loader`` (batches with labels)."""
    model.eval()
    correct = total = 0
    for batch in loader:
        out = model(batch.x, batch.adjs)
        correct += int((out.argmax(dim=1) == batch.y).sum())
        total += batch.batch_size
    return correct / total if total else float("nan")


def train_model(model, setup, args, *, log=None) -> tuple:
    """Train with Adam on ``setup.train_loader`` (see :func:`gglspeedup.examples.loop.fit`), keep the
    weights of the epoch with the best validation accuracy, test them; ``(history, result)``."""
    model = model.to(torch_device(setup.device))
    torch.set_num_threads(cpu_threads(args))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    def train_step(batch):
        model.train()
        optimizer.zero_grad()
        out = model(batch.x, batch.adjs)
        loss = F.cross_entropy(out, batch.y)
        loss.backward()
        optimizer.step()
        return float(loss.detach()), int((out.argmax(dim=1) == batch.y).sum())

    @torch.no_grad()
    def eval_step(batch):
        model.eval()
        return int((model(batch.x, batch.adjs).argmax(dim=1) == batch.y).sum())

    return fit(
        setup,
        args,
        train_step,
        eval_step,
        log=log,
        snapshot=lambda: copy.deepcopy(model.state_dict()),
        restore=model.load_state_dict,
    )

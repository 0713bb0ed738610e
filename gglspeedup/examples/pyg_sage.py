"""PyG's GraphSAGE example with the loader swapped: gglspeedup samples and gathers, PyG trains.

The code of ``demos/pyg_sage_cora.py`` (:func:`run` is its ``main``):

    python demos/pyg_sage_cora.py                          # node classification on Cora
    python demos/pyg_sage_cora.py --dataset citeseer --runs 3
    python demos/pyg_sage_cora.py --task link              # link prediction on Cora (ROC-AUC)

The model is PyG's: ``SAGEConv`` layers over ``batch.edge_index``, the first ``batch.batch_size``
rows of the output are the seeds (PyG's ``examples/graph_sage_*.py`` shape). The only gglspeedup
lines build the data and the loaders: a :class:`gglspeedup.pyg.FeatureStore` (features and labels
in gglspeedup's feature store, device cache on a GPU), a :class:`gglspeedup.pyg.GraphStore` (the
CSR graph, no copy) and :class:`gglspeedup.pyg.NeighborLoader` /
:class:`gglspeedup.pyg.LinkNeighborLoader`: PyG's own ``NodeLoader`` / ``LinkLoader`` driven by
gglspeedup's sampler, yielding ``torch_geometric.data.Data`` batches.

Node task: 2-layer GraphSAGE, fanouts [10, 10], batches of 64 training nodes, Adam, the weights of
the best validation epoch (full neighbourhoods) tested. Link task: the 85/5/10 edge split of
``gglspeedup.datasets.split_edges`` (message graph = training edges), binary negatives, the batch's
own edges (both directions) kept out of its neighbourhoods (``exclude="reverse"``), dot-product
decoder, test ROC-AUC of the best validation epoch. Both run PyG's ``trim_to_layer`` on each batch
(``--no-trim``: every layer on the whole batch, as PyG's simplest example).
"""

from __future__ import annotations

import sys

import numpy as np

from .link_cora import LINK_DEFAULTS
from .pyg_common import fit_best, repeat_runs, start_pyg


def build_parser():
    from .cli import build_parser as common_parser

    parser = common_parser(
        "PyG's GraphSAGE on gglspeedup's PyG loaders (node classification or link prediction).",
        epochs=30,
        fanouts="10,10",
        batch_size=64,
        hidden=256,
    )
    parser.add_argument("--task", choices=("node", "link"), default="node", help="(default: %(default)s)")
    parser.add_argument("--runs", type=int, default=1, help="repeat with consecutive seeds (default: %(default)s)")
    parser.add_argument("--embedding", type=int, default=64, help="link task: output width (default: %(default)s)")
    parser.add_argument(
        "--no-trim",
        dest="trim",
        action="store_false",
        help="run every layer on the whole batch instead of PyG's trim_to_layer (layer i reads the hops it needs)",
    )
    parser.add_argument(
        "--input-dropout", type=float, default=None, help="dropout on the input (default: 0 node, 0.5 link)"
    )
    return parser


def make_model(in_channels, hidden, out_channels, num_layers, dropout, input_dropout):
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import SAGEConv
    from torch_geometric.utils import trim_to_layer

    class SAGE(torch.nn.Module):
        """PyG's example GraphSAGE: ``SAGEConv`` layers on one ``edge_index``."""

        def __init__(self):
            super().__init__()
            widths = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
            self.convs = torch.nn.ModuleList(SAGEConv(widths[i], widths[i + 1]) for i in range(num_layers))

        def forward(self, x, edge_index, num_sampled_nodes=None, num_sampled_edges=None):
            x = F.dropout(x, p=input_dropout, training=self.training)
            for i, conv in enumerate(self.convs):
                if num_sampled_nodes is not None:  # PyG's hierarchical sampling: drop what layer i no longer needs
                    x, edge_index, _ = trim_to_layer(i, num_sampled_nodes, num_sampled_edges, x, edge_index)
                x = conv(x, edge_index)
                if i < len(self.convs) - 1:
                    x = F.dropout(x.relu(), p=dropout, training=self.training)
            return x

    return SAGE()


def forward(model, batch, args):
    """The model on one batch; each layer sees only the hops it needs (``trim_to_layer``) unless ``--no-trim``."""
    if args.trim:
        return model(batch.x, batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    return model(batch.x, batch.edge_index)


def node_run(args, seed: int) -> dict:
    import torch
    import torch.nn.functional as F

    from .. import pyg
    from ..datasets import parse_dataset_spec
    from .data import normalize_rows

    graph, x, y, split = parse_dataset_spec(args.dataset, seed=seed)
    if args.dataset.strip().lower() in ("cora", "citeseer"):
        x = normalize_rows(x)
    y = np.asarray(y, dtype=np.int64)
    split = {name: torch.from_numpy(ids[y[ids] >= 0]) for name, ids in split.items()}
    # --- the gglspeedup part: stores and loaders (PyG's NodeLoader underneath) ---
    data = (pyg.FeatureStore({"x": x, "y": y}, device=args.device, cache_size=args.cache_size), pyg.GraphStore(graph))
    options = dict(seed=seed, device=args.device)
    train_loader = pyg.NeighborLoader(
        data, args.fanouts, input_nodes=split["train"], batch_size=args.batch_size, shuffle=True, **options
    )
    full = [-1] * len(args.fanouts)
    eval_loaders = {
        name: list(pyg.NeighborLoader(data, full, input_nodes=split[name], batch_size=1024, **options))
        for name in ("val", "test")  # full neighbourhoods never change: sampled once
    }
    # --- PyG's example from here on ---
    model = make_model(x.shape[1], args.hidden, int(y.max()) + 1, len(args.fanouts), args.dropout, args.input_dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    @torch.no_grad()
    def accuracy(batches) -> float:
        model.eval()
        correct = total = 0
        for batch in batches:
            out = forward(model, batch, args)[: batch.batch_size]
            correct += int((out.argmax(-1) == batch.y[: batch.batch_size]).sum())
            total += batch.batch_size
        return correct / total

    def train_epoch():
        total_loss, seeds = 0.0, 0
        for batch in train_loader:
            optimizer.zero_grad()
            out = forward(model, batch, args)[: batch.batch_size]
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            loss.backward()
            optimizer.step()
            total_loss += float(loss.detach()) * batch.batch_size
            seeds += batch.batch_size
        return total_loss / len(split["train"]), seeds

    validate = lambda: accuracy(eval_loaders["val"])  # noqa: E731
    best_val, rate = fit_best(model, args.epochs, train_epoch, validate, not args.no_progress, "val acc")
    test = accuracy(eval_loaders["test"])
    print(f"seed {seed}: best val acc {best_val:.4f}, test accuracy {test:.4f} ({rate:,.0f} seeds/s)")
    return {"test": test, "val": best_val, "stats": data[0].stats()}


def link_run(args, seed: int) -> dict:
    import torch
    import torch.nn.functional as F

    from .. import pyg
    from ..datasets import parse_dataset_spec, split_edges
    from .data import normalize_rows
    from .loop import roc_auc

    graph, x, _, _ = parse_dataset_spec(args.dataset, seed=seed)
    if args.dataset.strip().lower() in ("cora", "citeseer"):
        x = normalize_rows(x)
    split = split_edges(graph, val=0.05, test=0.10, seed=seed)
    # --- the gglspeedup part: stores on the message graph, PyG's LinkLoader underneath ---
    data = (pyg.FeatureStore({"x": x}, device=args.device, cache_size=args.cache_size), pyg.GraphStore(split.graph))
    options = dict(seed=seed, device=args.device)
    train_loader = pyg.LinkNeighborLoader(
        data,
        args.fanouts,
        edge_label_index=torch.from_numpy(split.train),
        neg_sampling="binary",
        exclude="reverse",
        batch_size=args.batch_size,
        shuffle=True,
        **options,
    )
    full = [-1] * len(args.fanouts)
    eval_loaders = {
        name: list(
            pyg.LinkNeighborLoader(
                data,
                full,
                edge_label_index=torch.from_numpy(getattr(split, name)),
                edge_label=torch.from_numpy(getattr(split, f"{name}_labels")),
                batch_size=2048,
                **options,
            )
        )
        for name in ("val", "test")
    }
    # --- PyG's link-prediction example from here on ---
    model = make_model(x.shape[1], args.hidden, args.embedding, len(args.fanouts), args.dropout, args.input_dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    def scores(batch):
        h = forward(model, batch, args)
        return (h[batch.edge_label_index[0]] * h[batch.edge_label_index[1]]).sum(dim=-1)

    @torch.no_grad()
    def auc(batches) -> float:
        model.eval()
        out = [scores(batch).numpy() for batch in batches]
        return roc_auc(np.concatenate(out), np.concatenate([batch.edge_label.numpy() for batch in batches]))

    def train_epoch():
        total_loss, pairs = 0.0, 0
        for batch in train_loader:
            optimizer.zero_grad()
            logits = scores(batch)
            loss = F.binary_cross_entropy_with_logits(logits, batch.edge_label)
            loss.backward()
            optimizer.step()
            total_loss += float(loss.detach()) * len(logits)
            pairs += len(logits)
        return total_loss / (2 * split.train.shape[1]), pairs

    validate = lambda: auc(eval_loaders["val"])  # noqa: E731
    best_val, rate = fit_best(model, args.epochs, train_epoch, validate, not args.no_progress, "val AUC")
    test = auc(eval_loaders["test"])
    print(f"seed {seed}: best val ROC-AUC {best_val:.4f}, test ROC-AUC {test:.4f} ({rate:,.0f} pairs/s)")
    return {"test": test, "val": best_val, "stats": data[0].stats()}


def run(argv=None) -> dict:
    """``demos/pyg_sage_cora.py``: parse ``argv``, train ``--runs`` times, print and return the results."""
    args = build_parser().parse_args(argv)
    torch, torch_geometric = start_pyg(args)
    if args.task == "link":  # the link demo's defaults (gglspeedup.examples.link_cora) where not given
        given = argv if argv is not None else sys.argv[1:]
        for name, value in LINK_DEFAULTS.items():
            if "--" + name.replace("_", "-") not in given:
                setattr(args, name, value)
    if args.input_dropout is None:
        args.input_dropout = 0.5 if args.task == "link" else 0.0
    print(
        f"PyG {torch_geometric.__version__} GraphSAGE on {args.dataset} ({args.task} task) through gglspeedup.pyg, "
        f"device {args.device}, fanouts {args.fanouts}, batch {args.batch_size}, torch {torch.__version__}"
    )
    results = repeat_runs(torch, args, link_run if args.task == "link" else node_run)
    tests = [r["test"] for r in results]
    metric = "test ROC-AUC" if args.task == "link" else "test accuracy"
    print(f"{metric} over {len(tests)} run(s): mean {np.mean(tests):.4f}, std {np.std(tests):.4f}")
    return {"task": args.task, "tests": tests, "test": float(np.mean(tests)), "stats": results[-1]["stats"]}

"""PyG's heterogeneous recipe on WordNet: an R-GCN built with ``to_hetero``, on gglspeedup's PyG loaders.

The code of ``demos/pyg_rgcn_wordnet.py`` (:func:`run` is its ``main``):

    python demos/pyg_rgcn_wordnet.py                    # 10 epochs, fanouts [10, 10]
    python demos/pyg_rgcn_wordnet.py --epochs 1 --runs 3

Classifies every synset of WordNet 3.0 (nouns, verbs, adjectives, adverbs: 4 node types, 61
relations, :func:`gglspeedup.datasets.load` ``("wordnet")``) into its lexicographer file (45
classes) from the hashed bag of words of its gloss. The model is built with PyG's
``torch_geometric.nn.to_hetero``: each layer is a ``SAGEConv`` without root weight plus a
``Linear``, which ``to_hetero`` turns into one ``SAGEConv`` per relation (summed over the
relations into a type) and one ``Linear`` per node type: R-GCN (mean per relation, a weight per
relation, a root weight per type), run on ``batch.x_dict`` / ``batch.edge_index_dict`` with PyG's
``trim_to_layer`` between layers. The data side is gglspeedup's: a
:class:`gglspeedup.pyg.FeatureStore` over a :class:`gglspeedup.HeteroFeatureStore` (one cache
budget for every type), a :class:`gglspeedup.pyg.GraphStore` over the ``HeteroGraph`` and one
:class:`gglspeedup.pyg.NeighborLoader` per node type (PyG's loaders take seeds of one type), their
batches interleaved at random. Validation and test batches sample ``--eval-fanouts`` (25 per hop)
once. The weights of the best validation epoch are tested. The plain-PyTorch R-GCN on the same data
and sampler is ``demos/rgcn_wordnet_torch.py``.
"""

from __future__ import annotations

import numpy as np

from .pyg_common import fit_best, repeat_runs, start_pyg


def build_parser():
    from .cli import build_parser as common_parser
    from .rgcn_wordnet import WORDNET_DEFAULTS, add_rgcn_options

    parser = common_parser(
        "PyG's to_hetero R-GCN on WordNet through gglspeedup.pyg (lexicographer-file classification).",
        **WORDNET_DEFAULTS,
    )
    add_rgcn_options(parser)
    parser.add_argument(
        "--batches-per-epoch", type=int, default=0, help="train on this many batches per epoch (default: 0 = all)"
    )
    return parser


def make_model(metadata, hidden: int, out_channels: int, num_layers: int, dropout: float):
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import SAGEConv, to_hetero
    from torch_geometric.utils import trim_to_layer

    class Relational(torch.nn.Module):
        """One layer: to_hetero gives ``conv`` one copy per relation (mean of the sources, a weight
        per relation, summed over the relations into a type) and ``root`` one per node type: R-GCN."""

        def __init__(self, width: int):
            super().__init__()
            self.conv = SAGEConv((-1, -1), width, root_weight=False)
            self.root = torch.nn.LazyLinear(width)

        def forward(self, x, edge_index):
            return self.conv(x, edge_index) + self.root(x)

    class RGCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            widths = [hidden] * (num_layers - 1) + [out_channels]
            self.layers = torch.nn.ModuleList(to_hetero(Relational(w), metadata, aggr="sum") for w in widths)

        def forward(self, batch):
            x, edge_index = batch.x_dict, batch.edge_index_dict
            for i, layer in enumerate(self.layers):
                # PyG's hierarchical sampling: layer i reads only the hops it still needs
                x, edge_index, _ = trim_to_layer(
                    i, batch.num_sampled_nodes_dict, batch.num_sampled_edges_dict, x, edge_index
                )
                x = layer(x, edge_index)
                if i < len(self.layers) - 1:
                    x = {t: F.dropout(h.relu(), p=dropout, training=self.training) for t, h in x.items()}
            return x

    return RGCN()


def run_once(args, seed: int) -> dict:
    import torch
    import torch.nn.functional as F

    from .. import pyg
    from ..datasets import load

    graph, x, y, split = load(args.dataset)
    # --- the gglspeedup part: typed stores and one PyG loader per node type ---
    data = (
        pyg.FeatureStore({"x": x, "y": y}, device=args.device, cache_size=args.cache_size, graph=graph),
        pyg.GraphStore(graph),
    )
    options = dict(seed=seed, device=args.device)

    def loaders(part, fanouts, batch_size, shuffle):
        return {
            t: pyg.NeighborLoader(
                data, fanouts, input_nodes=(t, torch.from_numpy(ids)), batch_size=batch_size, shuffle=shuffle, **options
            )
            for t, ids in split[part].items()
            if len(ids)
        }

    train = loaders("train", args.fanouts, args.batch_size, True)
    eval_fanouts = args.eval_fanouts or [25] * len(args.fanouts)
    evaluation = {
        part: {t: list(loader) for t, loader in loaders(part, eval_fanouts, 1024, False).items()}
        for part in ("val", "test")
    }  # fixed neighbourhoods: sampled once
    # --- PyG from here on ---
    metadata = (list(graph.node_types), list(graph.edge_types))
    model = make_model(
        metadata, args.hidden, int(max(v.max() for v in y.values())) + 1, len(args.fanouts), args.dropout
    )
    with torch.no_grad():  # initialise the lazy layers
        first = next(iter(evaluation["val"].values()))[0]
        model(first)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    def seeds_out(batch, node_type):
        out = model(batch)[node_type][: batch[node_type].batch_size]
        return out, batch[node_type].y[: batch[node_type].batch_size]

    @torch.no_grad()
    def accuracy(part) -> float:
        model.eval()
        correct = total = 0
        for node_type, batches in evaluation[part].items():
            for batch in batches:
                out, labels = seeds_out(batch, node_type)
                correct += int((out.argmax(-1) == labels).sum())
                total += len(labels)
        return correct / total

    rng = np.random.default_rng(seed)

    def train_epoch():
        order = np.concatenate([[t] * len(loader) for t, loader in train.items()])
        rng.shuffle(order)  # batches of every type, interleaved at random
        if args.batches_per_epoch > 0:
            order = order[: args.batches_per_epoch]
        iterators = {t: iter(loader) for t, loader in train.items()}
        total_loss, seen_epoch = 0.0, 0
        for node_type in order:
            batch = next(iterators[node_type])
            optimizer.zero_grad()
            out, labels = seeds_out(batch, node_type)
            loss = F.cross_entropy(out, labels)
            loss.backward()
            optimizer.step()
            total_loss += float(loss.detach()) * len(labels)
            seen_epoch += len(labels)
        return total_loss / max(seen_epoch, 1), seen_epoch

    validate = lambda: accuracy("val")  # noqa: E731
    best_val, rate = fit_best(model, args.epochs, train_epoch, validate, not args.no_progress, "val acc")
    test = accuracy("test")
    print(f"seed {seed}: best val acc {best_val:.4f}, test accuracy {test:.4f} ({rate:,.0f} seeds/s)")
    return {"test": test, "val": best_val, "stats": data[0].stats()}


def run(argv=None) -> dict:
    """``demos/pyg_rgcn_wordnet.py``: parse ``argv``, train ``--runs`` times, print and return the results."""
    args = build_parser().parse_args(argv)
    # one thread unless told: 61 relations are many small kernels, which a second (busy) core slows
    torch, torch_geometric = start_pyg(args, threads=1)
    print(
        f"PyG {torch_geometric.__version__} to_hetero R-GCN on {args.dataset} through gglspeedup.pyg, device "
        f"{args.device}, fanouts {args.fanouts}, batch {args.batch_size}, torch {torch.__version__}"
    )
    tests = [result["test"] for result in repeat_runs(torch, args, run_once)]
    print(f"test accuracy over {len(tests)} run(s): mean {np.mean(tests):.4f}, std {np.std(tests):.4f}")
    return {"tests": tests, "test": float(np.mean(tests))}

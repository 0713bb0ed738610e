"""Typed link prediction on WordNet 3.0: R-GCN encoder, bilinear decoder, one relation's edges.

    python demos/link_wordnet_torch.py                           # noun hypernyms
    python demos/link_wordnet_torch.py --relation verb:hypernym:verb --runs 3

The split is WN18RR-like (:func:`gglspeedup.datasets.wordnet_link_split`, made once by ``--seed``):
5% of the WN18RR relations' distinct edge pairs are held out for validation and 5% for testing,
each *with its reverse* (``a hyponym b`` for a held-out ``b hypernym a``), so the message graph the
sampler reads cannot reveal them. Training batches are the chosen relation's remaining edges
(:class:`~gglspeedup.LinkLoader` on a :class:`~gglspeedup.HeteroNeighborSampler`), each with
``--num-negatives`` corrupted targets of the target type (``per_source``: the KG convention), and
with the batch's own edges excluded from every hop in both directions (``exclude="reverse"`` with
the relation's inverse as ``reverse_edge_type``). Every node type's gloss features feed an R-GCN
(:class:`gglspeedup.examples.rgcn.RGCN`, one weight per relation); a pair ``(s, d)`` scores
``h_s^T W h_d`` (bilinear: the relations are directed).

Metric: ROC-AUC of the held-out edges of the relation against as many *filtered* corrupted
edges: ``(s, d')`` with ``d'`` uniform over the target type, redrawn while ``(s, d')`` is an edge
of the relation in the full graph (so a negative is never a true edge), drawn once by ``--seed``.
The weights of the best validation epoch are tested.
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["main", "run", "build_parser", "filtered_negatives"]


def build_parser():
    from . import cli
    from .link_cora import add_link_options
    from .rgcn_wordnet import WORDNET_DEFAULTS

    parser = cli.build_parser(
        "Typed link prediction with gglspeedup: R-GCN encoder + bilinear decoder on WordNet relations.",
        lr=0.005,
        dropout=0.3,
        **WORDNET_DEFAULTS,
    )
    parser.add_argument(
        "--relation",
        default="noun:hypernym:noun",
        help="the edge type to predict, SRC:NAME:DST (default: %(default)s)",
    )
    return add_link_options(parser)


def filtered_negatives(graph, edge_type, pairs: np.ndarray, seed: int) -> np.ndarray:
    """One corrupted target per pair: ``(s, d')`` with ``d'`` uniform over ``edge_type``'s target
    type and ``(s, d')`` not an edge of ``edge_type`` in ``graph`` (redrawn until it is not)."""
    relation = graph[edge_type]
    n_dst = relation.num_nodes
    dst = np.repeat(np.arange(n_dst, dtype=np.int64), np.diff(relation.indptr))
    edges = set((relation.indices * n_dst + dst).tolist())  # code s * n_dst + d
    rng = np.random.default_rng(seed)
    out = np.empty_like(pairs)
    out[0] = pairs[0]
    for j, source in enumerate(pairs[0].tolist()):
        while True:
            target = int(rng.integers(n_dst))
            if source * n_dst + target not in edges:
                out[1, j] = target
                break
    return out


def _setup(args, seed: int) -> dict:
    import gglspeedup as gg

    from ..datasets import load, wordnet_link_split
    from ..datasets.wordnet import INVERSE_RELATIONS
    from .cli import best_device
    from .data import ReplayLoader

    device = best_device() if args.device == "auto" else args.device
    graph, x, _, _ = load(args.dataset)
    edge_type = tuple(args.relation.split(":"))
    if edge_type not in graph.edge_types:
        raise ValueError(f"--relation {args.relation!r} is not an edge type of {args.dataset}")
    reverse = (edge_type[2], INVERSE_RELATIONS.get(edge_type[1], ""), edge_type[0])
    reverse = reverse if reverse in graph.edge_types else None
    split = wordnet_link_split(graph, seed=seed)
    message = split.graph
    features = gg.HeteroFeatureStore(x, device=device, cache_size=args.cache_size, graph=message)
    train_sampler = gg.HeteroNeighborSampler(message, args.fanouts, seed=seed, device=device)
    eval_sampler = gg.HeteroNeighborSampler(message, [25] * len(args.fanouts), seed=seed, device=device)
    common = dict(backend="torch", prefetch=args.prefetch, edge_type=edge_type)
    train_loader = gg.LinkLoader(
        train_sampler,
        features,
        split.train[edge_type],
        args.batch_size,
        negatives="per_source",
        num_negatives=args.num_negatives,
        exclude="reverse" if reverse or edge_type[0] == edge_type[2] else "self",
        reverse_edge_type=reverse,
        seed=seed,
        **common,
    )
    loaders = {}
    for name in ("val", "test"):
        positives = getattr(split, name)[edge_type]
        pairs = np.concatenate((positives, filtered_negatives(graph, edge_type, positives, seed)), axis=1)
        labels = np.repeat(np.array([1.0, 0.0], np.float32), positives.shape[1])
        loader = gg.LinkLoader(
            eval_sampler, features, pairs, 2048, labels=labels, exclude=None, shuffle=False, **common
        )
        loaders[name] = ReplayLoader(loader)
    banner = (
        f"gglspeedup typed link demo: R-GCN + bilinear on {args.dataset} {edge_type} "
        f"({sum(graph.num_nodes.values())} nodes, {len(graph.edge_types)} relations; train/val/test pairs "
        f"{split.train[edge_type].shape[1]}/{split.val[edge_type].shape[1]}/{split.test[edge_type].shape[1]}, "
        f"message graph {sum(message.num_edges.values())} edges), device {device}, fanouts {args.fanouts}, "
        f"batch {args.batch_size} pairs + per_source negatives x{args.num_negatives}, reverse {reverse}"
    )
    return {
        "device": device,
        "graph": message,
        "features": {t: int(v.shape[1]) for t, v in x.items()},
        "edge_type": edge_type,
        "train_loader": train_loader,
        "val_loader": loaders["val"],
        "test_loader": loaders["test"],
        "banner": banner,
    }


def rgcn_bilinear(setup: dict, args):
    """``(model, scores)``: the R-GCN encoder with a bilinear decoder for ``setup["edge_type"]``."""
    from torch import nn

    from .rgcn import RGCN

    graph, (src, _, dst) = setup["graph"], setup["edge_type"]
    model = nn.Module()
    model.encoder = RGCN.for_graph(
        graph, setup["features"], args.hidden, args.embedding, len(args.fanouts), args.dropout
    )
    model.decoder = nn.Bilinear(args.embedding, args.embedding, 1)

    def scores(batch):
        h = model.encoder(batch.x, batch.adjs, batch.n_id, batch.num_sampled_nodes)
        index = batch.pair_index
        return model.decoder(h[src][index[0]], h[dst][index[1]]).squeeze(-1)

    return model, scores


def run(argv=None) -> dict:
    """Run the demo with command-line arguments ``argv``; a dict with ``test_auc`` (mean over runs),
    ``test_aucs``, ``best_epoch``, ``pairs_per_s``, ``edges_per_s`` and ``plot`` (last run)."""
    from .link_cora import run_seeds

    args = build_parser().parse_args(argv)
    name = args.relation.split(":")[1] if args.relation.count(":") == 2 else args.relation
    title = f"Link prediction on WordNet {name} (gglspeedup, R-GCN)"
    return run_seeds(
        args, _setup, what="typed link demo", build=rgcn_bilinear, name="gglspeedup-link-wordnet.png", title=title
    )


def main(argv=None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())

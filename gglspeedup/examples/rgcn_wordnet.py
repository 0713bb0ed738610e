"""R-GCN on the bundled WordNet 3.0 typed graph: classify every synset's lexicographer file.

    python demos/rgcn_wordnet_torch.py                   # typed: one weight per relation
    python demos/rgcn_wordnet_torch.py --untyped         # baseline: one node type, one relation
    python demos/rgcn_wordnet_torch.py --runs 3 --out .  # mean over seeds, and a plot

Synsets are typed by part of speech (noun, verb, adjective, adverb), every pointer symbol is a
relation (:func:`gglspeedup.datasets.load` ``("wordnet")``); the features are the hashed bag of
words of each synset's gloss. The model is :class:`gglspeedup.examples.rgcn.RGCN`: one weight per
relation and per node type, mean aggregation, seeds of every type in one batch (a typed
:class:`~gglspeedup.NodeLoader` over a :class:`~gglspeedup.HeteroNeighborSampler` and a
:class:`~gglspeedup.HeteroFeatureStore`). ``--untyped`` runs the very same model on the graph
with types erased (:meth:`HeteroGraph.to_homogeneous`: one node type, one relation, the same
edges and features), the baseline that shows what relation types are worth. Validation and test
batches sample ``--eval-fanouts`` (default 25 per hop) with fixed keys, so every epoch and every
run evaluates the same neighbourhoods. The weights of the best validation epoch are tested.
"""

from __future__ import annotations

import copy
import sys
import time

import numpy as np

__all__ = ["main", "run", "build_parser", "add_rgcn_options", "erase_types"]

# The WordNet demos' settings (cli.build_parser keywords), stated once so that this R-GCN, PyG's
# (pyg_rgcn_wordnet) and the typed link demo (link_wordnet) sample and train alike.
WORDNET_DEFAULTS = {
    "epochs": 10,
    "fanouts": "10,10",
    "batch_size": 512,
    "hidden": 128,
    "weight_decay": 0.0,
    "dataset": "wordnet",
}


def build_parser():
    from . import cli

    parser = cli.build_parser(
        "R-GCN on WordNet 3.0 (typed synsets and relations) with gglspeedup: lexicographer-file classification.",
        lr=0.01,
        dropout=0.5,
        **WORDNET_DEFAULTS,
    )
    parser.add_argument("--untyped", action="store_true", help="erase node and edge types (the baseline: one relation)")
    return add_rgcn_options(parser)


def add_rgcn_options(parser):
    """The R-GCN demos' options besides the common ones (this one's and PyG's,
    :mod:`.pyg_rgcn_wordnet`): ``--eval-fanouts`` and ``--runs``."""
    from .cli import parse_fanouts

    parser.add_argument(
        "--eval-fanouts",
        type=parse_fanouts,
        default=None,
        help="validation / test fanouts, seed hop first (default: 25 per hop)",
    )
    parser.add_argument("--runs", type=int, default=1, help="repeat with seeds seed .. seed+runs-1 (default: 1)")
    return parser


def erase_types(graph, x: dict, y: dict, split: dict):
    """The same dataset with one node type ``"node"`` and one relation ``("node", "edge", "node")``:
    every edge of ``graph`` (:meth:`HeteroGraph.to_homogeneous`), features and labels stacked in
    node-type order, splits offset alike."""
    from ..heterograph import HeteroGraph

    flat, offsets = graph.to_homogeneous()
    types = graph.node_types
    typeless = HeteroGraph({("node", "edge", "node"): flat}, {"node": flat.num_nodes})
    x_all = np.concatenate([x[t] for t in types])
    y_all = np.concatenate([y[t] for t in types])
    split_all = {
        part: {"node": np.concatenate([ids[t] + offsets[t] for t in types if t in ids])} for part, ids in split.items()
    }
    return typeless, {"node": x_all}, {"node": y_all}, split_all


def _setup(args, seed: int):
    import gglspeedup as gg

    from ..datasets import load
    from ..loader import NodeLoader
    from .cli import best_device
    from .data import TrainSetup

    start = time.perf_counter()
    device = best_device() if args.device == "auto" else args.device
    graph, x, y, split = load(args.dataset)
    if args.untyped:
        graph, x, y, split = erase_types(graph, x, y, split)
    eval_fanouts = args.eval_fanouts or [25] * len(args.fanouts)
    features = gg.HeteroFeatureStore(x, device=device, cache_size=args.cache_size, graph=graph)
    target = gg.device.as_device(device)
    labels = {t: target.xp.asarray(v) if target.is_cuda else v for t, v in y.items()}
    train_sampler = gg.HeteroNeighborSampler(graph, args.fanouts, seed=seed, device=device)
    eval_sampler = gg.HeteroNeighborSampler(graph, eval_fanouts, seed=seed, device=device)
    common = dict(labels=labels, backend="torch", prefetch=args.prefetch)
    train = NodeLoader(train_sampler, features, split["train"], args.batch_size, shuffle=True, seed=seed, **common)
    val = NodeLoader(eval_sampler, features, split["val"], 1024, shuffle=False, **common)
    test = NodeLoader(eval_sampler, features, split["test"], 1024, shuffle=False, **common)
    counts = {part: sum(len(ids) for ids in split[part].values()) for part in ("train", "val", "test")}
    info = {
        "nodes": sum(graph.num_nodes.values()),
        "edges": sum(graph.num_edges.values()),
        "node_types": len(graph.node_types),
        "relations": len(graph.edge_types),
        "features": {t: int(v.shape[1]) for t, v in x.items()},
        "classes": int(max(int(v.max()) for v in y.values())) + 1,
        "train/val/test": tuple(counts.values()),
    }
    return TrainSetup(
        device, graph, features, y, split, info["classes"], train, val, test, time.perf_counter() - start, info
    )


def _train(args, setup, seed: int):
    import torch
    import torch.nn.functional as F

    from .loop import fit
    from .rgcn import RGCN
    from .torch_models import torch_device

    torch.manual_seed(seed)
    model = RGCN.for_graph(
        setup.graph, setup.info["features"], args.hidden, setup.num_classes, len(args.fanouts), args.dropout
    ).to(torch_device(setup.device))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    def logits_and_labels(batch):
        out = model(batch.x, batch.adjs, batch.n_id, batch.num_sampled_nodes)
        kinds = [t for t, size in batch.batch_size.items() if size]
        logits = torch.cat([out[t][: batch.batch_size[t]] for t in kinds])
        return logits, torch.cat([batch.y[t] for t in kinds])

    def train_step(batch):
        model.train()
        optimizer.zero_grad()
        logits, labels = logits_and_labels(batch)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        optimizer.step()
        return float(loss.detach()), int((logits.argmax(dim=1) == labels).sum())

    @torch.no_grad()
    def eval_step(batch):
        model.eval()
        logits, labels = logits_and_labels(batch)
        return int((logits.argmax(dim=1) == labels).sum())

    snapshot = lambda: copy.deepcopy(model.state_dict())  # noqa: E731
    return fit(setup, args, train_step, eval_step, snapshot=snapshot, restore=model.load_state_dict)


def run(argv=None) -> dict:
    """Run the demo with command-line arguments ``argv``; return the last run's result dict
    (``test_acc``, ``best_epoch``, ``seeds_per_s``, ``edges_per_s``, ``plot``, ...) with
    ``test_accs`` (every run) and ``mean_test_acc`` / ``std_test_acc``."""
    args = build_parser().parse_args(argv)
    try:
        import torch
    except ImportError:
        from .cli import NO_TORCH

        sys.exit(NO_TORCH)
    from . import loop
    from .cli import cpu_threads

    torch.set_num_threads(cpu_threads(args))
    accs, result = [], {}
    kind = "untyped (one relation)" if args.untyped else "typed R-GCN"
    for run_index in range(args.runs):
        seed = args.seed + run_index
        setup = _setup(args, seed)
        info = setup.info
        print(
            f"gglspeedup R-GCN demo ({kind}, seed {seed}): {args.dataset} with {info['nodes']} nodes of "
            f"{info['node_types']} types, {info['edges']} edges in {info['relations']} relations, "
            f"{info['classes']} classes, train/val/test {info['train/val/test']}; device {setup.device}, "
            f"fanouts {args.fanouts}, batch size {args.batch_size}, torch {torch.__version__}"
        )
        history, result = _train(args, setup, seed)
        name = f"gglspeedup-rgcn-{'untyped' if args.untyped else 'typed'}-{seed}.png"
        result = loop.report(result, history, args, name=name, title=f"R-GCN on WordNet ({kind})")
        accs.append(result["test_acc"])
    result["test_accs"] = accs
    result["mean_test_acc"] = float(np.mean(accs))
    result["std_test_acc"] = float(np.std(accs))
    if args.runs > 1:
        print(f"test accuracy over {args.runs} runs: {result['mean_test_acc']:.4f} +- {result['std_test_acc']:.4f}")
    return result


def main(argv=None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())

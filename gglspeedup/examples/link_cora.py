"""Link prediction on the bundled Cora / CiteSeer: GraphSAGE encoder, dot-product decoder.

    python -m gglspeedup.demo --task link                        # Cora, CPU or the GPU
    python -m gglspeedup.demo --task link --dataset citeseer --runs 3
    python demos/link_prediction_torch.py --help

The graph's distinct edges are split once by ``--seed`` into 85% training, 5% validation and 10%
test pairs (:func:`gglspeedup.datasets.split_edges`); the message graph the sampler reads keeps
only the training edges, and validation / test pairs come with as many non-edge negatives. Each
training batch is :class:`gglspeedup.LinkLoader` output: the batch's pairs, binary negatives
(``--negatives``), and the endpoints' sampled neighbourhoods with the batch's own edges excluded
(``--exclude reverse``: both directions, since the graph stores both), so the model never reads
the edge it is asked to predict. The encoder embeds every endpoint; a pair's score is the dot
product of its two embeddings, trained with binary cross-entropy. Evaluation embeds the held-out
pairs' endpoints over full neighbourhoods of the message graph and reports ROC-AUC. The weights
of the epoch with the best validation AUC are tested. ``--runs N`` repeats with seeds
``seed .. seed + N - 1`` (split, initialisation and sampling) and prints the mean.
"""

from __future__ import annotations

import copy
import sys
import time

import numpy as np

__all__ = ["main", "run", "run_seeds", "build_parser", "add_link_options", "setup_links", "sage_dot", "train"]

# The link demo's settings where they differ from the node demo's (cli.build_parser keywords; the
# PyG demo's link task takes them too): 512 pairs + 512 negatives a batch, no weight decay.
LINK_DEFAULTS = {"epochs": 40, "batch_size": 512, "hidden": 128, "weight_decay": 0.0}


def build_parser():
    from . import cli

    parser = cli.build_parser(
        "Link prediction with gglspeedup: GraphSAGE encoder + dot-product decoder on Cora / CiteSeer edges.",
        fanouts="10,10",
        lr=0.01,
        dropout=0.5,
        **LINK_DEFAULTS,
    )
    cli.add_layers_option(cli.add_task_option(parser, "link"))
    parser.add_argument(
        "--input-dropout", type=float, default=0.5, help="dropout on the input features (default: %(default)s)"
    )
    parser.add_argument(
        "--negatives",
        choices=("binary", "per_source"),
        default="binary",
        help="negative pairs per batch: both endpoints uniform (PyG) or each source with uniform targets "
        "(DGL) (default: %(default)s)",
    )
    parser.add_argument(
        "--exclude",
        choices=("reverse", "self", "none"),
        default="reverse",
        help="edges of the batch's pairs left out of its neighbourhoods (default: %(default)s)",
    )
    return add_link_options(parser)


def add_link_options(parser):
    """The options every link demo has besides the common ones (``--embedding``, ``--num-negatives``,
    ``--runs`` for :func:`run_seeds`), and plots written to the current folder by default."""
    from . import cli

    positive = cli.at_least(1)  # --embedding 0 trained a zero-width model to ROC-AUC 0.5
    parser.add_argument("--embedding", type=positive, default=64, help="output embedding width (default: %(default)s)")
    parser.add_argument("--num-negatives", type=positive, default=1, help="negatives per pair (default: %(default)s)")
    parser.add_argument("--runs", type=positive, default=1, help="repeat with consecutive seeds (default: %(default)s)")
    return cli.set_out_default(parser, ".")


def main(argv=None) -> int:
    run(argv)
    return 0


def run(argv=None) -> dict:
    """Run the link-prediction demo with command-line arguments ``argv``; return a dict with
    ``test_auc`` (mean over runs), ``test_aucs``, ``best_epoch``, ``pairs_per_s``, ``edges_per_s``
    and ``plot`` (of the last run)."""
    return run_seeds(build_parser().parse_args(argv), setup_links, what="link demo")


def run_seeds(args, setup_fn, *, what: str, **train_options) -> dict:
    """``args.runs`` runs with seeds ``args.seed ..``: ``setup_fn(args, seed)`` (a dict with a
    ``banner``), then :func:`train` (``train_options`` passed on); the last run's result with
    ``test_auc`` the mean over runs, ``test_aucs`` and ``test_auc_std``."""
    if args.runs < 1:
        sys.exit("--runs must be at least 1")
    try:
        import torch
    except ImportError:
        from .cli import NO_TORCH

        sys.exit(NO_TORCH)
    start = time.perf_counter()
    results = []
    for run_index in range(args.runs):
        seed = args.seed + run_index
        torch.manual_seed(seed)
        try:
            setup = setup_fn(args, seed)
        except (RuntimeError, FileNotFoundError, ValueError) as error:
            sys.exit(f"gglspeedup {what}: {error}")
        if run_index == 0:
            print(setup["banner"] + f", torch {torch.__version__}")
        results.append(train(setup, args, seed, **train_options))
        print(f"run {run_index + 1}/{args.runs} (seed {seed}): test ROC-AUC {results[-1]['test_auc']:.4f}")
    result = dict(results[-1])
    aucs = [r["test_auc"] for r in results]
    result.update(test_aucs=aucs, test_auc=float(np.mean(aucs)), test_auc_std=float(np.std(aucs)))
    if args.runs > 1:
        print(f"test ROC-AUC over {args.runs} seeds: mean {np.mean(aucs):.4f}, std {np.std(aucs):.4f}")
    result["total_s"] = time.perf_counter() - start
    print(f"total time {result['total_s']:.1f} s")
    return result


def setup_links(args, seed: int) -> dict:
    """The split, the samplers and the loaders of one run."""
    import gglspeedup as gg

    from ..datasets import parse_dataset_spec, split_edges
    from .cli import best_device
    from .data import ReplayLoader, normalize_rows

    device = best_device() if args.device == "auto" else args.device
    graph, x, _, _ = parse_dataset_spec(args.dataset, seed=seed)
    if args.dataset.strip().lower() in ("cora", "citeseer"):
        x = normalize_rows(x)
    split = split_edges(graph, val=0.05, test=0.10, seed=seed)
    features = gg.FeatureStore(x, device=device, cache_size=args.cache_size, graph=split.graph)
    train_sampler = gg.NeighborSampler(split.graph, args.fanouts, seed=seed, device=device)
    eval_sampler = gg.NeighborSampler(split.graph, [-1] * len(args.fanouts), seed=seed, device=device)
    exclude = None if args.exclude == "none" else args.exclude
    common = dict(backend="torch", prefetch=args.prefetch)
    train_loader = gg.LinkLoader(
        train_sampler,
        features,
        split.train,
        args.batch_size,
        negatives=args.negatives,
        num_negatives=args.num_negatives,
        exclude=exclude,
        seed=seed,
        **common,
    )
    loaders = {}
    for name in ("val", "test"):
        pairs, labels = getattr(split, name), getattr(split, f"{name}_labels")
        loader = gg.LinkLoader(
            eval_sampler, features, pairs, 2048, labels=labels, exclude=None, shuffle=False, **common
        )
        loaders[name] = ReplayLoader(loader) if graph.num_nodes <= 100_000 else loader
    banner = (
        f"gglspeedup link demo: GraphSAGE + dot product on {args.dataset} ({graph.num_nodes} nodes, "
        f"{graph.num_edges} edges; train/val/test pairs {split.train.shape[1]}/{split.val.shape[1] // 2}/"
        f"{split.test.shape[1] // 2}, message graph {split.graph.num_edges} edges), device {device}, fanouts "
        f"{args.fanouts}, batch {args.batch_size} pairs + {args.negatives} negatives x{args.num_negatives}, "
        f"exclude {exclude}"
    )
    return {
        "device": device,
        "features": int(x.shape[1]),
        "train_loader": train_loader,
        "val_loader": loaders["val"],
        "test_loader": loaders["test"],
        "banner": banner,
    }


def sage_dot(setup: dict, args):
    """``(model, scores)``: the GraphSAGE encoder and the dot-product score of a batch's pairs."""
    from .torch_models import SAGE, conv_classes

    model = SAGE(
        setup["features"],
        args.hidden,
        args.embedding,
        len(args.fanouts),
        args.dropout,
        conv=conv_classes(pyg=getattr(args, "pyg_layers", False))[0],
        input_dropout=args.input_dropout,
    )

    def scores(batch):
        h = model(batch.x, batch.adjs)  # one row per endpoint: n_id[:adjs[-1].size[1]]
        return (h[batch.pair_index[0]] * h[batch.pair_index[1]]).sum(dim=-1)

    return model, scores


def train(setup: dict, args, seed: int, *, build=sage_dot, name="gglspeedup-link-demo.png", title=None) -> dict:
    """Train, keep the best validation epoch's weights, test them; the run's result dict.

    ``build(setup, args) -> (model, scores)`` makes the model (an ``nn.Module``) and the function
    scoring a batch's pairs (logits, one per pair); default :func:`sage_dot`."""
    import torch
    import torch.nn.functional as F

    from .cli import cpu_threads
    from .loop import EpochTimer, History, plot_history, progress, roc_auc
    from .torch_models import torch_device

    torch.set_num_threads(cpu_threads(args))
    model, scores = build(setup, args)
    model = model.to(torch_device(setup["device"]))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    @torch.no_grad()
    def evaluate(loader) -> float:
        model.eval()
        out, labels = [], []
        for batch in loader:
            out.append(scores(batch).cpu().numpy())
            labels.append(batch.labels.cpu().numpy())
        return roc_auc(np.concatenate(out), np.concatenate(labels))

    from tqdm import tqdm

    history, loader = History(), setup["train_loader"]
    best_state, best_val = None, -1.0
    epochs = progress(
        range(1, args.epochs + 1), total=args.epochs, desc=f"training (seed {seed})", disable=args.no_progress
    )
    for epoch in epochs:
        loss_sum = seen = 0
        train_scores, train_labels = [], []
        with EpochTimer(loader) as timer:
            for batch in timer.batches(epoch, args):
                model.train()
                optimizer.zero_grad()
                logits = scores(batch)
                loss = F.binary_cross_entropy_with_logits(logits, batch.labels)
                loss.backward()
                optimizer.step()
                loss_sum += float(loss.detach()) * len(logits)
                seen += len(logits)
                train_scores.append(logits.detach().cpu().numpy())
                train_labels.append(batch.labels.cpu().numpy())
        val_auc = evaluate(setup["val_loader"])
        row = {
            "epoch": epoch,
            "loss": loss_sum / max(seen, 1),
            "train_auc": roc_auc(np.concatenate(train_scores), np.concatenate(train_labels)),
            "val_auc": val_auc,
            **timer.fields("pairs", "edges"),
        }
        history.rows.append(row)
        tqdm.write(
            f"epoch {epoch:3d}  loss {row['loss']:.4f}  train AUC {row['train_auc']:.4f}  val AUC {val_auc:.4f}  "
            f"{row['seconds']:.2f}s  sample+gather {100 * row['sample_share']:.0f}% "
            f"(waited {100 * row['wait_share']:.0f}%)"
        )
        epochs.set_postfix(loss=f"{row['loss']:.3f}", val_auc=f"{val_auc:.3f}")
        if val_auc > best_val:
            best_val, best_state = val_auc, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    test_auc = evaluate(setup["test_loader"])
    best = max(history.rows, key=lambda r: (r["val_auc"], -r["epoch"]))
    seconds = sum(r["seconds"] for r in history.rows)
    pairs, edges = sum(r["pairs"] for r in history.rows), sum(r["edges"] for r in history.rows)
    busy = sum(r["sample_share"] * r["seconds"] for r in history.rows)
    plot = None
    if args.out:
        plot = plot_history(
            history,
            args.out,
            name=name,
            title=title or f"Link prediction on {args.dataset} (gglspeedup)",
            curves=(("train (sampled negatives)", "train_auc"), ("validation", "val_auc")),
            metric="ROC-AUC",
        )
    print(f"best epoch {best['epoch']} (val ROC-AUC {best_val:.4f})")
    print(f"test ROC-AUC: {test_auc:.4f}")
    print(
        f"throughput: {pairs / seconds:,.0f} training pairs/s, {edges / seconds / 1e6:.2f} M sampled edges/s over "
        f"{seconds:.1f} s of training; sampling + gathering busy for {100 * busy / seconds:.0f}% of the epoch time"
    )
    if plot:
        print(f"plot of loss and ROC-AUC per epoch: {plot}")
    return {
        "test_auc": test_auc,
        "best_epoch": best["epoch"],
        "best_val_auc": best_val,
        "pairs_per_s": pairs / seconds,
        "edges_per_s": edges / seconds,
        "sample_share": busy / seconds,
        "plot": plot,
        "history": history.rows,
    }


if __name__ == "__main__":
    sys.exit(main())

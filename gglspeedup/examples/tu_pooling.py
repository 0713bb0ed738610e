"""Graph classification on the TU sets with an attention-pooling readout (softmax, sparsemax,
gfusedmax), 10-fold cross-validation, in plain PyTorch.

    python demos/attention_pooling_tu.py                          # ENZYMES and PROTEINS, 3 maps, 10 folds
    python demos/attention_pooling_tu.py --datasets proteins --mappings gfusedmax --folds 10 --epochs 50

Model: a linear embedding, three graph convolutions ``h' = relu(W_self h + W_nbr sum_{j -> i} h_j)``
(sum aggregation over the batch's edge index), the layers' outputs concatenated (jumping
knowledge), then :class:`~gglspeedup.attention.AttentionPooling` over each graph's nodes (scores
standardised per graph; for gfusedmax the graph's own edges fuse neighbouring scores) and a
two-layer classifier. Protocol: stratified folds (seeded); in each, 10% of the training graphs
are held out for validation, the epoch with the best validation accuracy is kept, and its test
accuracy is the fold's score. Reports mean and standard deviation over folds and the mean seconds
per training epoch, as a table, a JSON file and a plot. Before a mapping's first fold, one
untimed training step and one evaluation (a throwaway model) compile its kernels and warm torch,
so no row's seconds per epoch include that (reported apart as ``warmup_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

__all__ = ["GraphClassifier", "build_parser", "parse_args", "run", "stratified_folds", "batches", "MAPPINGS"]

MAPPINGS = ("softmax", "sparsemax", "gfusedmax")


def _torch():
    import torch

    return torch


def GraphClassifier(in_features, hidden, num_classes, mapping, *, layers=3, heads=1, lam=1.0, gamma=1.0, dropout=0.3):
    """The demo model (a ``torch.nn.Module``): ``model(x, ptr, edge_index) -> (B, num_classes)``."""
    torch = _torch()
    from ..attention import AttentionPooling

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(in_features, hidden)
            self.self_weights = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden) for _ in range(layers))
            self.nbr_weights = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden, bias=False) for _ in range(layers))
            self.pool = AttentionPooling(hidden * layers, hidden, mapping, lam=lam, gamma=gamma, heads=heads)
            self.classify = torch.nn.Sequential(
                torch.nn.ReLU(), torch.nn.Dropout(dropout), torch.nn.Linear(hidden, num_classes)
            )

        def forward(self, x, ptr, edge_index):
            src, dst = edge_index
            h = torch.relu(self.embed(x))
            outputs = []
            for own, nbr in zip(self.self_weights, self.nbr_weights):
                message = torch.zeros_like(h).index_add_(0, dst, h[src])
                h = torch.relu(own(h) + nbr(message))
                outputs.append(h)
            return self.classify(self.pool(torch.cat(outputs, dim=1), ptr, edge_index))

    return Model()


def stratified_folds(y: np.ndarray, folds: int, seed: int) -> list[np.ndarray]:
    """``folds`` disjoint test index arrays covering every graph, each class spread evenly."""
    rng = np.random.default_rng(seed)
    parts: list[list[int]] = [[] for _ in range(folds)]
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        for k, chunk in enumerate(np.array_split(members, folds)):
            parts[(k + label) % folds].extend(chunk.tolist())
    return [np.sort(np.array(part, dtype=np.int64)) for part in parts]


def batches(data, graphs: np.ndarray, batch_size: int, rng=None):
    """``(x, ptr, edge_index, y)`` torch batches of ``graphs`` (shuffled when ``rng`` is given)."""
    torch = _torch()
    order = rng.permutation(graphs) if rng is not None else graphs
    for start in range(0, order.shape[0], batch_size):
        part = data.subset(order[start : start + batch_size])
        yield (
            torch.from_numpy(part.x),
            torch.from_numpy(part.ptr),
            torch.from_numpy(part.edge_index),
            torch.from_numpy(part.y),
        )


def _accuracy(model, cached):
    torch = _torch()
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, ptr, edge_index, y in cached:
            correct += int((model(x, ptr, edge_index).argmax(1) == y).sum())
            total += int(y.shape[0])
    model.train()
    return correct / max(total, 1)


def warm_up(data, graphs, args, mapping) -> float:
    """One training step and one evaluation of a throwaway model over ``graphs`` with ``mapping``:
    the first call of a map compiles its kernels (seconds) and warms torch, which must not count
    in any fold's seconds per epoch. Returns the seconds it took."""
    torch = _torch()
    start = time.perf_counter()
    model = GraphClassifier(
        data.x.shape[1], args.hidden, data.num_classes, mapping, heads=args.heads, lam=args.lam, gamma=args.gamma
    )
    batch = next(batches(data, graphs[: args.batch_size], args.batch_size))
    torch.nn.functional.cross_entropy(model(*batch[:3]), batch[3]).backward()
    _accuracy(model, [batch])
    return time.perf_counter() - start


def run_fold(data, train, test, args, mapping, progress=None):
    """Train on ``train`` (10% of it held out) and return ``(test accuracy at the best validation
    epoch, seconds per training epoch)``."""
    torch = _torch()
    rng = np.random.default_rng(args.seed)
    shuffled = rng.permutation(train)
    val_count = max(1, train.shape[0] // 10)
    val, fit = np.sort(shuffled[:val_count]), shuffled[val_count:]
    torch.manual_seed(args.seed)
    model = GraphClassifier(
        data.x.shape[1], args.hidden, data.num_classes, mapping, heads=args.heads, lam=args.lam, gamma=args.gamma
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    val_batches = list(batches(data, val, args.batch_size))
    test_batches = list(batches(data, test, args.batch_size))
    best = (-1.0, 0.0)
    seconds = []
    for _ in range(args.epochs):
        start = time.perf_counter()
        for x, ptr, edge_index, y in batches(data, fit, args.batch_size, rng):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x, ptr, edge_index), y)
            loss.backward()
            optimizer.step()
        seconds.append(time.perf_counter() - start)
        val_accuracy = _accuracy(model, val_batches)
        if val_accuracy > best[0]:
            best = (val_accuracy, _accuracy(model, test_batches))
        if progress is not None:
            progress.update(1)
    return best[1], float(np.mean(seconds))


def build_parser() -> argparse.ArgumentParser:
    from .cli import above, at_least, out_folder

    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--datasets", default="enzymes,proteins", help="comma-separated: enzymes, proteins")
    parser.add_argument("--mappings", default=",".join(MAPPINGS), help="comma-separated: softmax, sparsemax, gfusedmax")
    # Each value is checked here, so that a bad one is a usage error on its flag, not the model's
    # ValueError naming its parameter (lam, gamma, output_size) or NumPy's, out of the first fold.
    parser.add_argument("--folds", type=at_least(2), default=10, help="cross-validation folds (default 10)")
    parser.add_argument("--max-folds", type=at_least(1), default=None, help="run only the first N folds (quick looks)")
    parser.add_argument("--epochs", type=at_least(1), default=50, help="epochs per fold (default 50)")
    parser.add_argument("--batch-size", type=at_least(1), default=32, help="graphs per batch (default 32)")
    parser.add_argument("--hidden", type=at_least(1), default=64, help="hidden width (default 64)")
    parser.add_argument(
        "--heads", type=at_least(1), default=1, help="attention heads of the readout, at most --hidden (default 1)"
    )
    parser.add_argument(
        "--lam", type=at_least(0.0, float), default=1.0, help="gfusedmax's fused-lasso strength (default 1.0)"
    )
    parser.add_argument("--gamma", type=above(0.0), default=1.0, help="sparsemax temperature (default 1.0)")
    parser.add_argument("--lr", type=above(0.0), default=1e-3, help="Adam learning rate (default 1e-3)")
    parser.add_argument(
        "--weight-decay", type=at_least(0.0, float), default=1e-4, help="Adam weight decay (default 1e-4)"
    )
    parser.add_argument("--seed", type=at_least(0), default=0, help="seed of folds, splits and weights (default 0)")
    parser.add_argument(
        "--torch-threads",
        type=at_least(0),
        default=1,
        help="torch's CPU threads (default 1: on a busy 2-core machine two spinning OpenMP threads made "
        "every layer 10-40x slower; 0 leaves torch's default). Numba's pooling kernels use every core.",
    )
    parser.add_argument(
        "--out", default=".", type=out_folder, help="folder for tu_pooling.json and tu_pooling.png (default .)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """The command line, checked: every value on its own (:func:`build_parser`), then ``--heads``
    against ``--hidden`` (every head pools at least one of the readout's columns)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.heads > args.hidden:
        parser.error(f"--heads must be at most --hidden ({args.hidden}): every head pools a column; got {args.heads}")
    return args


def _names(text, known, option):
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise SystemExit(f"{option} must name some of {', '.join(known)}; got {text!r}")
    return names


def format_table(results: list[dict]) -> str:
    lines = ["dataset   mapping     folds  accuracy (mean +- std)  s/epoch", "-" * 62]
    for row in results:
        lines.append(
            f"{row['dataset']:<9} {row['mapping']:<10} {len(row['fold_accuracy']):>6}  "
            f"{100 * row['accuracy_mean']:>8.1f} +- {100 * row['accuracy_std']:<4.1f} %     "
            f"{row['seconds_per_epoch']:>7.3f}"
        )
    return "\n".join(lines)


def plot(results: list[dict], path: str) -> str | None:
    """Accuracy (mean and std over folds) and seconds per epoch, per dataset and mapping."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    datasets = list(dict.fromkeys(row["dataset"] for row in results))
    mappings = list(dict.fromkeys(row["mapping"] for row in results))
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.8 / len(mappings)
    for k, mapping in enumerate(mappings):
        rows = [next((r for r in results if r["dataset"] == d and r["mapping"] == mapping), None) for d in datasets]
        xs = np.arange(len(datasets)) + k * width
        left.bar(
            xs,
            [100 * r["accuracy_mean"] if r else 0 for r in rows],
            width,
            yerr=[100 * r["accuracy_std"] if r else 0 for r in rows],
            label=mapping,
            capsize=3,
        )
        right.bar(xs, [r["seconds_per_epoch"] if r else 0 for r in rows], width, label=mapping)
    for axis, title in ((left, "test accuracy (%)"), (right, "seconds per training epoch")):
        axis.set_xticks(np.arange(len(datasets)) + width * (len(mappings) - 1) / 2, datasets)
        axis.set_title(title)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def run(argv=None) -> list[dict]:
    args = parse_args(argv)
    torch = _torch()
    from ..datasets.tu import TU_NAMES, load_tu

    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    datasets = _names(args.datasets, TU_NAMES, "--datasets")
    mappings = _names(args.mappings, MAPPINGS, "--mappings")
    used_folds = min(args.folds, args.max_folds or args.folds)
    progress = None
    if not args.no_progress:
        from tqdm import tqdm

        progress = tqdm(total=len(datasets) * len(mappings) * used_folds * args.epochs, unit="epoch")
    results = []
    for name in datasets:
        data = load_tu(name)
        folds = stratified_folds(data.y, args.folds, args.seed)
        for mapping in mappings:
            warmup_s = warm_up(data, folds[0], args, mapping)  # outside every fold's clock
            accuracies, seconds = [], []
            for k in range(used_folds):
                if progress is not None:
                    progress.set_description(f"{name} {mapping} fold {k + 1}/{used_folds}")
                test = folds[k]
                train = np.sort(np.concatenate([folds[j] for j in range(args.folds) if j != k]))
                accuracy, per_epoch = run_fold(data, train, test, args, mapping, progress)
                accuracies.append(accuracy)
                seconds.append(per_epoch)
            results.append(
                {
                    "dataset": name,
                    "mapping": mapping,
                    "fold_accuracy": accuracies,
                    "accuracy_mean": float(np.mean(accuracies)),
                    "accuracy_std": float(np.std(accuracies)),
                    "seconds_per_epoch": float(np.mean(seconds)),
                    "warmup_s": warmup_s,
                }
            )
    if progress is not None:
        progress.close()
    print(format_table(results))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tu_pooling.json"), "w") as handle:
        json.dump({"args": vars(args), "results": results}, handle, indent=2)
    figure = plot(results, os.path.join(args.out, "tu_pooling.png"))
    print(f"wrote {os.path.join(args.out, 'tu_pooling.json')}" + (f" and {figure}" if figure else ""))
    return results

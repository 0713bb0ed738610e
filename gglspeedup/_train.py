"""Framework-neutral helpers shared by the training demos and ``python -m gglspeedup.demo``.

Argument parsing (``--dataset``, ``--device``, ``--fanouts``, ``--batch-size``, ``--cache-size``,
...), data set-up (graph, feature store, samplers, loaders), per-epoch history with the share of
step time spent sampling and gathering, and the loss/accuracy plot. Frameworks are imported only
by the callers.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

INNER_BAR_MIN_BATCHES = 20  # a per-batch bar inside each epoch only when an epoch has this many

__all__ = [
    "build_parser",
    "parse_fanouts",
    "best_device",
    "cpu_threads",
    "TrainSetup",
    "ReplayLoader",
    "setup_training",
    "History",
    "EpochTimer",
    "progress",
    "plot_history",
    "accuracy",
    "fit",
    "report",
]


def parse_fanouts(text: str) -> list[int]:
    """``"25,10"`` -> ``[25, 10]`` (seed hop first; ``-1`` takes every neighbour)."""
    try:
        fanouts = [int(part) for part in str(text).replace(" ", "").split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(f"fanouts must be comma-separated ints like 25,10, got {text!r}") from None
    if not fanouts or any(k < -1 for k in fanouts):
        raise argparse.ArgumentTypeError(f"fanouts must be ints >= -1 like 25,10, got {text!r}")
    return fanouts


def best_device() -> str:
    """``"cuda:0"`` when a real GPU is usable (CuPy and numba-cuda both see one), else ``"cpu"``."""
    from . import _config

    return "cuda:0" if _config.HAS_CUPY_GPU and _config.HAS_NUMBA_CUDA else "cpu"


def cpu_threads(args) -> int:
    """Threads for the framework's CPU kernels: ``args.threads``, or (0 = auto) every core but one
    when a prefetching loader samples on the CPU next to it (on 2 cores that is 1: two busy
    threads per core make both sides several times slower)."""
    if args.threads > 0:
        return args.threads
    cores = os.cpu_count() or 1
    return max(1, cores - 1) if args.prefetch > 0 else cores


def build_parser(description: str, *, epochs: int = 20, fanouts: str = "25,10", batch_size: int = 512,
                 hidden: int = 256, lr: float = 0.01, weight_decay: float = 5e-4, dropout: float = 0.5,
                 dataset: str = "cora") -> argparse.ArgumentParser:
    """The demos' common command line (each demo may add its own options)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dataset", default=dataset,
                        help="cora | citeseer | powerlaw:N:D | ogb:PATH | reddit:PATH (default: %(default)s)")
    parser.add_argument("--device", default="auto",
                        help="cpu | cuda[:i] | auto (a real GPU when usable, else cpu; default: %(default)s)")
    parser.add_argument("--fanouts", type=parse_fanouts, default=parse_fanouts(fanouts),
                        help=f"neighbours per hop, seed hop first, -1 = all (default: {fanouts})")
    parser.add_argument("--batch-size", type=int, default=batch_size, help="seeds per batch (default: %(default)s)")
    parser.add_argument("--cache-size", default="0",
                        help="feature rows kept in device memory, in bytes: 0, 512M, 0.1G (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=epochs, help="training epochs (default: %(default)s)")
    parser.add_argument("--hidden", type=int, default=hidden, help="hidden width (default: %(default)s)")
    parser.add_argument("--lr", type=float, default=lr, help="Adam learning rate (default: %(default)s)")
    parser.add_argument("--weight-decay", type=float, default=weight_decay, help="(default: %(default)s)")
    parser.add_argument("--dropout", type=float, default=dropout, help="(default: %(default)s)")
    parser.add_argument("--prefetch", type=int, default=2, help="batches prepared ahead (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=0,
                        help="framework CPU threads; 0 = auto: all cores but one, which the prefetching "
                             "loader's thread uses (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="sampling, shuffling and init seed (default: %(default)s)")
    parser.add_argument("--out", default=None, help="folder for the loss/accuracy plot (default: no plot)")
    parser.add_argument("--no-progress", action="store_true", help="hide the tqdm progress bars")
    return parser


@dataclass
class TrainSetup:
    """Everything a training loop needs, built by :func:`setup_training`."""

    device: str
    graph: Any
    features: Any
    labels: np.ndarray
    split: dict
    num_classes: int
    train_loader: Any
    val_loader: Any
    test_loader: Any
    setup_s: float = 0.0
    info: dict = field(default_factory=dict)


def _normalize_rows(x: np.ndarray) -> np.ndarray:
    sums = x.sum(axis=1, keepdims=True)
    return np.divide(x, sums, out=np.zeros_like(x), where=sums > 0).astype(x.dtype, copy=False)


def setup_training(args, backend: str, *, eval_batch_size: int = 1024, normalize: bool | None = None) -> TrainSetup:
    """Load ``args.dataset`` and build the feature store, samplers and loaders for ``backend``.

    Training batches sample with ``args.fanouts``; validation and test batches sample every
    neighbour (fanout -1 per hop) without shuffling. Planetoid features (Cora, CiteSeer) are
    row-normalised unless ``normalize`` says otherwise. Labels of -1 (unlabelled) are dropped from
    the splits.
    """
    import gglspeedup as gg
    from .datasets import parse_dataset_spec
    from .loader import NodeLoader

    start = time.perf_counter()
    device = best_device() if args.device == "auto" else args.device
    graph, x, y, split = parse_dataset_spec(args.dataset, seed=args.seed)
    if normalize is None:
        normalize = args.dataset.strip().lower() in ("cora", "citeseer")
    if normalize:
        x = _normalize_rows(x)
    y = np.asarray(y, dtype=np.int64)
    split = {name: ids[y[ids] >= 0] for name, ids in split.items()}
    features = gg.FeatureStore(x, device=device, cache_size=args.cache_size, graph=graph)
    target = gg.device.as_device(device)
    labels = target.xp.asarray(y) if target.is_cuda else y  # y of a batch on the sampler's device
    train_sampler = gg.NeighborSampler(graph, args.fanouts, seed=args.seed, device=device)
    eval_sampler = gg.NeighborSampler(graph, [-1] * len(args.fanouts), seed=args.seed, device=device)
    common = dict(labels=labels, backend=backend, prefetch=args.prefetch)
    train_loader = NodeLoader(train_sampler, features, split["train"], args.batch_size, shuffle=True,
                              seed=args.seed, **common)
    val_loader = NodeLoader(eval_sampler, features, split["val"], eval_batch_size, shuffle=False, **common)
    test_loader = NodeLoader(eval_sampler, features, split["test"], eval_batch_size, shuffle=False, **common)
    if graph.num_nodes <= CACHE_EVAL_MAX_NODES:
        val_loader = ReplayLoader(val_loader)  # full-neighbourhood batches never change: sample once
    num_classes = int(y.max()) + 1
    info = {"dataset": args.dataset, "nodes": graph.num_nodes, "edges": graph.num_edges,
            "features": int(x.shape[1]), "classes": num_classes,
            "train/val/test": tuple(len(split[name]) for name in ("train", "val", "test"))}
    return TrainSetup(device, graph, features, y, split, num_classes, train_loader, val_loader, test_loader,
                      time.perf_counter() - start, info)


CACHE_EVAL_MAX_NODES = 100_000  # small graphs keep their (deterministic) validation batches


class ReplayLoader:
    """Iterates ``loader`` once, keeps the batches and replays them on every later iteration.

    For evaluation loaders whose sampler takes every neighbour (fanout -1), where every epoch
    would sample the very same batches again.
    """

    def __init__(self, loader):
        self.loader, self._batches = loader, None

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        if self._batches is None:
            self._batches = list(self.loader)
        return iter(self._batches)


def progress(iterable, *, total=None, desc=None, disable=False, leave=False):
    """A tqdm progress bar over ``iterable`` (tqdm is a core dependency)."""
    from tqdm import tqdm  # not tqdm.auto: its asyncio class calls iter() eagerly, a wasted epoch

    return tqdm(iterable, total=total, desc=desc, disable=disable, leave=leave, dynamic_ncols=True)


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Share of rows whose arg-max equals the label."""
    logits, labels = np.asarray(logits), np.asarray(labels)
    return float((logits.argmax(axis=1) == labels).mean()) if len(labels) else float("nan")


class EpochTimer:
    """Times one epoch and reads the loader's sample/gather counters for it.

    ``share`` is (sampling + gathering time on the loader's producer) / (epoch wall time): with
    prefetching that work overlaps the training step, so the caller-side wait (``wait_share``)
    shows how much of it the step could not hide.
    """

    def __init__(self, loader):
        self.loader = loader

    def __enter__(self):
        self.loader.stats(reset=True)
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        self.stats = self.loader.stats(reset=True)
        busy = self.stats["sample_s"] + self.stats["gather_s"]
        self.share = busy / self.seconds if self.seconds > 0 else 0.0
        self.wait_share = self.stats["wait_s"] / self.seconds if self.seconds > 0 else 0.0
        return False


class History:
    """Per-epoch loss and accuracies, printed as one line each and plotted at the end."""

    def __init__(self):
        self.rows: list[dict] = []

    def add(self, epoch: int, loss: float, train_acc: float, val_acc: float, timer: EpochTimer) -> dict:
        row = {"epoch": epoch, "loss": float(loss), "train_acc": float(train_acc), "val_acc": float(val_acc),
               "seconds": timer.seconds, "sample_share": timer.share, "wait_share": timer.wait_share,
               "seeds": timer.stats["seeds"], "edges": timer.stats["edges"]}
        self.rows.append(row)
        return row

    @staticmethod
    def line(row: dict) -> str:
        return (f"epoch {row['epoch']:3d}  loss {row['loss']:.4f}  train acc {row['train_acc']:.4f}  "
                f"val acc {row['val_acc']:.4f}  {row['seconds']:.2f}s  sample+gather {100 * row['sample_share']:.0f}% "
                f"(waited {100 * row['wait_share']:.0f}%)")

    def best(self) -> dict:
        """The row with the best validation accuracy (earliest on ties)."""
        return max(self.rows, key=lambda row: (row["val_acc"], -row["epoch"]))

    def totals(self) -> dict:
        seconds = sum(row["seconds"] for row in self.rows)
        seeds = sum(row["seeds"] for row in self.rows)
        edges = sum(row["edges"] for row in self.rows)
        busy = sum(row["sample_share"] * row["seconds"] for row in self.rows)
        return {"seconds": seconds, "seeds": seeds, "edges": edges,
                "seeds_per_s": seeds / seconds if seconds else 0.0,
                "edges_per_s": edges / seconds if seconds else 0.0,
                "sample_share": busy / seconds if seconds else 0.0}


def plot_history(history: History, out_dir: str, name: str = "gglspeedup-demo.png", title: str = "") -> str | None:
    """Write loss and accuracy per epoch to ``out_dir/name``; return the path, or ``None`` (with a
    warning) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warnings.warn("matplotlib is not installed, so no plot was written: pip install gglspeedup[demo]",
                      stacklevel=2)
        return None
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.abspath(os.path.join(out_dir, name))
    epochs = [row["epoch"] for row in history.rows]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax_loss.plot(epochs, [row["loss"] for row in history.rows], color="tab:red")
    ax_loss.set(xlabel="epoch", ylabel="training loss", title="loss")
    ax_acc.plot(epochs, [row["train_acc"] for row in history.rows], label="train")
    ax_acc.plot(epochs, [row["val_acc"] for row in history.rows], label="validation")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy", ylim=(0, 1))
    ax_acc.legend(loc="lower right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _evaluate(loader, eval_step) -> float:
    correct = total = 0
    for batch in loader:
        correct += int(eval_step(batch))
        total += batch.batch_size
    return correct / total if total else float("nan")


def fit(setup: TrainSetup, args, train_step, eval_step, *, snapshot=None, restore=None, log=None):
    """The demos' training loop, framework-neutral.

    Parameters
    ----------
    setup : TrainSetup
    args : argparse.Namespace
        Reads ``epochs`` and ``no_progress``.
    train_step : callable(batch) -> (loss: float, num_correct: int)
        One optimisation step on a training batch.
    eval_step : callable(batch) -> int
        Correct predictions on an evaluation batch (model in inference mode).
    snapshot, restore : callables, optional
        ``snapshot()`` returns the model state after the best validation epoch so far;
        ``restore(state)`` loads it back before testing.
    log : callable(str), optional
        Per-epoch lines (default: ``tqdm.write``, which keeps the progress bar intact).

    Returns
    -------
    (History, dict)
        The dict holds ``test_acc``, ``best_epoch``, ``best_val_acc`` and the throughput totals
        of :meth:`History.totals`.
    """
    if log is None:
        from tqdm import tqdm

        log = tqdm.write
    history = History()
    best_state, best_val = None, -1.0
    loader = setup.train_loader
    epochs = progress(range(1, args.epochs + 1), total=args.epochs, desc="training", disable=args.no_progress)
    for epoch in epochs:
        loss_sum = correct = seen = 0
        with EpochTimer(loader) as timer:
            batches = progress(loader, total=len(loader), desc=f"epoch {epoch}",
                               disable=args.no_progress or len(loader) < INNER_BAR_MIN_BATCHES)
            for batch in batches:
                loss, num_correct = train_step(batch)
                loss_sum += float(loss) * batch.batch_size
                correct += int(num_correct)
                seen += batch.batch_size
        val_acc = _evaluate(setup.val_loader, eval_step)
        row = history.add(epoch, loss_sum / max(seen, 1), correct / max(seen, 1), val_acc, timer)
        log(History.line(row))
        epochs.set_postfix(loss=f"{row['loss']:.3f}", val_acc=f"{val_acc:.3f}")
        if val_acc > best_val:
            best_val = val_acc
            best_state = snapshot() if snapshot is not None else None
    if best_state is not None and restore is not None:
        restore(best_state)
    test_acc = _evaluate(setup.test_loader, eval_step)
    result = {"test_acc": test_acc, "best_epoch": history.best()["epoch"], "best_val_acc": best_val,
              **history.totals()}
    return history, result


def report(result: dict, history: History, args, *, name: str, title: str) -> dict:
    """Print the end-of-run summary (best epoch, test accuracy, throughput) and write the plot
    when ``args.out`` is set; returns ``result`` with ``plot`` (path or None) added."""
    result["plot"] = plot_history(history, args.out, name=name, title=title) if args.out else None
    print(f"best epoch {result['best_epoch']} (val acc {result['best_val_acc']:.4f})")
    print(f"test accuracy: {result['test_acc']:.4f}")
    print(f"throughput: {result['seeds_per_s']:,.0f} training seeds/s, {result['edges_per_s'] / 1e6:.2f} M sampled "
          f"edges/s over {result['seconds']:.1f} s of training; sampling + gathering busy for "
          f"{100 * result['sample_share']:.0f}% of the epoch time (on the prefetching loader's thread)")
    if result["plot"]:
        print(f"plot of loss and accuracy per epoch: {result['plot']}")
    return result

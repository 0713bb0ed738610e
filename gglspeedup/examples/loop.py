"""The demos' training loop, framework-neutral: per-epoch history with the share of step time
spent sampling and gathering, progress bars, the end-of-run report and the loss/accuracy plot.
Frameworks are imported only by the callers (see :mod:`.torch_models` for PyTorch)."""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np

from .data import TrainSetup

INNER_BAR_MIN_BATCHES = 20  # a per-batch bar inside each epoch only when an epoch has this many

__all__ = [
    "History",
    "EpochTimer",
    "progress",
    "plot_history",
    "history_figure",
    "accuracy",
    "roc_auc",
    "batch_count",
    "fit",
    "report",
    "rate",
    "on_terminal",
    "INNER_BAR_MIN_BATCHES",
]


def on_terminal() -> bool:
    """Whether both stdout and stderr are terminals. When either is piped (CI logs, ``| tee``),
    tqdm's carriage-return frames (stderr) would interleave with the per-epoch lines (stdout) into
    one unreadable line per epoch, so the demos show no bars then, only the epoch lines."""
    return all(getattr(stream, "isatty", lambda: False)() for stream in (sys.stdout, sys.stderr))


def progress(iterable, *, total=None, desc=None, disable=False, leave=False):
    """A tqdm progress bar over ``iterable`` (tqdm is a core dependency); disabled, whatever
    ``disable`` says, when the output is not a terminal (:func:`on_terminal`)."""
    from tqdm import tqdm  # not tqdm.auto: its asyncio class calls iter() eagerly, a wasted epoch

    disable = disable or not on_terminal()
    return tqdm(iterable, total=total, desc=desc, disable=disable, leave=leave, dynamic_ncols=True)


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Share of rows whose arg-max equals the label."""
    logits, labels = np.asarray(logits), np.asarray(labels)
    return float((logits.argmax(axis=1) == labels).mean()) if len(labels) else float("nan")


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (1 positive, 0 negative): the
    probability that a random positive scores above a random negative, ties counting one half
    (the Mann-Whitney U statistic over average ranks); ``nan`` without both classes.

    >>> roc_auc(np.array([0.9, 0.2, 0.6, 0.6]), np.array([1, 0, 1, 0]))
    0.875
    """
    from scipy.stats import rankdata

    scores, labels = np.asarray(scores, dtype=np.float64).reshape(-1), np.asarray(labels).reshape(-1) > 0.5
    positives = int(labels.sum())
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def _kernel_counter():
    """A Numba event listener counting how often the compiler was entered: a kernel variant
    compiled, or loaded from Numba's disk cache (both happen on a variant's first call in a
    process, on any thread), and nothing else."""
    from numba.core import event

    class KernelCounter(event.Listener):
        count = 0

        def on_start(self, event):
            self.count += 1

        def on_end(self, event):
            pass

    return KernelCounter()


class EpochTimer:
    """Times one epoch and reads the loader's sample/gather counters for it.

    ``share`` is (sampling + gathering time on the loader's producer) / (epoch wall time): with
    prefetching that work overlaps the training step, so the caller-side wait (``wait_share``)
    shows how much of it the step could not hide. ``kernels`` counts the Numba kernel variants
    compiled or loaded from the cache during the epoch (by any thread): an epoch with any is not
    a steady epoch, and :meth:`History.totals` leaves it out of the throughput.
    """

    def __init__(self, loader):
        self.loader = loader
        self.kernels = 0

    def __enter__(self):
        from numba.core import event

        self.loader.stats(reset=True)
        self._counter = _kernel_counter()
        self._listening = event.install_listener("numba:compiler_lock", self._counter)
        self._listening.__enter__()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        self._listening.__exit__(None, None, None)
        self.kernels = self._counter.count
        self.stats = self.loader.stats(reset=True)
        busy = self.stats["sample_s"] + self.stats["gather_s"]
        self.share = busy / self.seconds if self.seconds > 0 else 0.0
        self.wait_share = self.stats["wait_s"] / self.seconds if self.seconds > 0 else 0.0
        return False

    def batches(self, epoch: int, args):
        """The loader's batches for ``epoch`` under a progress bar: hidden with ``args.no_progress``
        or when an epoch has fewer than ``INNER_BAR_MIN_BATCHES`` batches."""
        return progress(
            self.loader,
            total=len(self.loader),
            desc=f"epoch {epoch}",
            disable=args.no_progress or len(self.loader) < INNER_BAR_MIN_BATCHES,
        )

    def fields(self, *counters: str) -> dict:
        """The timed epoch's history fields: ``seconds``, ``sample_share``, ``wait_share``, then the
        loader's ``counters`` (e.g. ``"seeds", "edges"``) for the epoch."""
        timing = {"seconds": self.seconds, "sample_share": self.share, "wait_share": self.wait_share}
        timing["kernels"] = self.kernels
        return {**timing, **{name: self.stats[name] for name in counters}}


class History:
    """Per-epoch loss and accuracies, printed as one line each and plotted at the end."""

    def __init__(self):
        self.rows: list[dict] = []

    def add(self, epoch: int, loss: float, train_acc: float, val_acc: float, timer: EpochTimer) -> dict:
        row = {
            "epoch": epoch,
            "loss": float(loss),
            "train_acc": float(train_acc),
            "val_acc": float(val_acc),
            **timer.fields("seeds", "edges"),
        }
        self.rows.append(row)
        return row

    @staticmethod
    def line(row: dict) -> str:
        return (
            f"epoch {row['epoch']:3d}  loss {row['loss']:.4f}  train acc {row['train_acc']:.4f}  "
            f"val acc {row['val_acc']:.4f}  {row['seconds']:.2f}s  sample+gather {100 * row['sample_share']:.0f}% "
            f"(waited {100 * row['wait_share']:.0f}%)"
        )

    def best(self) -> dict:
        """The row with the best validation accuracy (earliest on ties)."""
        return max(self.rows, key=lambda row: (row["val_acc"], -row["epoch"]))

    def totals(self) -> dict:
        """Throughput over the steady epochs (``steady_epochs``): every epoch but the first (which
        also starts the loader's threads and the framework's first calls; its seconds are
        ``first_epoch_s``) and but those that compiled or loaded Numba kernels (a row's
        ``kernels``; ``warm_up_epochs`` lists every epoch left out). When no epoch is steady, the
        epochs without kernel work, else every epoch, are all there is."""
        quiet = [row for row in self.rows if not row.get("kernels", 0)]
        steady = [row for row in self.rows[1:] if not row.get("kernels", 0)] or quiet or self.rows
        seconds = sum(row["seconds"] for row in steady)
        seeds = sum(row["seeds"] for row in steady)
        edges = sum(row["edges"] for row in steady)
        busy = sum(row["sample_share"] * row["seconds"] for row in steady)
        return {
            "first_epoch_s": self.rows[0]["seconds"] if self.rows else 0.0,
            "steady_epochs": [row["epoch"] for row in steady],
            "warm_up_epochs": [row["epoch"] for row in self.rows if row not in steady],
            "seconds": seconds,
            "seeds": seeds,
            "edges": edges,
            "seeds_per_s": seeds / seconds if seconds else 0.0,
            "edges_per_s": edges / seconds if seconds else 0.0,
            "sample_share": busy / seconds if seconds else 0.0,
        }


def plot_history(
    history: History,
    out_dir: str,
    name: str = "gglspeedup-demo.png",
    title: str = "",
    *,
    curves: tuple = (("train", "train_acc"), ("validation", "val_acc")),
    metric: str = "accuracy",
) -> str | None:
    """Write the loss and the ``curves`` (``(label, row key)`` pairs, plotted against ``metric``)
    per epoch to ``out_dir/name``; return the path, or ``None`` (with a warning) when matplotlib is
    not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warnings.warn("matplotlib is not installed, so no plot was written: pip install gglspeedup[demo]", stacklevel=2)
        return None
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.abspath(os.path.join(out_dir, name))
    fig = history_figure(history, title, curves=curves, metric=metric)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def history_figure(history: History, title: str = "", *, curves=(("train", "train_acc"),), metric="accuracy"):
    """The matplotlib figure :func:`plot_history` saves: loss, and the ``curves`` against
    ``metric``, per epoch. Every point has a marker, so a one-epoch run (a single point, which a
    line alone does not draw) shows its values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [row["epoch"] for row in history.rows]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax_loss.plot(epochs, [row["loss"] for row in history.rows], color="tab:red", marker="o", markersize=3)
    ax_loss.set(xlabel="epoch", ylabel="training loss", title="loss")
    for label, key in curves:
        ax_acc.plot(epochs, [row[key] for row in history.rows], label=label, marker="o", markersize=3)
    ax_acc.set(xlabel="epoch", ylabel=metric, title=metric, ylim=(0, 1))
    ax_acc.legend(loc="lower right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def _epoch_list(epochs) -> str:
    """``"epoch 3"``, ``"epochs 2-5"`` (consecutive) or ``"epochs 2, 4, 5"``."""
    if len(epochs) == 1:
        return f"epoch {epochs[0]}"
    if list(epochs) == list(range(epochs[0], epochs[0] + len(epochs))):
        return f"epochs {epochs[0]}-{epochs[-1]}"
    return "epochs " + ", ".join(str(epoch) for epoch in epochs)


def rate(per_s: float) -> str:
    """``per_s`` with three significant digits and a k/M/G prefix: ``rate(1234.5) == '1.23 k'``
    (a fixed ``M`` with two decimals printed a small graph's rate as 0.00 M)."""
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if per_s >= scale:
            return f"{per_s / scale:.3g} {prefix}"
    return f"{per_s:.3g}"


def batch_count(batch) -> int:
    """Seeds of a batch: ``batch_size``, summed over node types for a typed batch."""
    size = batch.batch_size
    return int(sum(size.values())) if isinstance(size, dict) else int(size)


def _evaluate(loader, eval_step) -> float:
    correct = total = 0
    for batch in loader:
        correct += int(eval_step(batch))
        total += batch_count(batch)
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
            for batch in timer.batches(epoch, args):
                loss, num_correct = train_step(batch)
                size = batch_count(batch)
                loss_sum += float(loss) * size
                correct += int(num_correct)
                seen += size
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
    result = {"test_acc": test_acc, "best_epoch": history.best()["epoch"], "best_val_acc": best_val, **history.totals()}
    return history, result


def report(result: dict, history: History, args, *, name: str, title: str) -> dict:
    """Print the end-of-run summary (best epoch, test accuracy, throughput) and write the plot
    when ``args.out`` is set; returns ``result`` with ``plot`` (path or None) added."""
    result["plot"] = plot_history(history, args.out, name=name, title=title) if args.out else None
    print(f"best epoch {result['best_epoch']} (val acc {result['best_val_acc']:.4f})")
    print(f"test accuracy: {result['test_acc']:.4f}")
    epochs = result.get("steady_epochs") or []
    left_out = [row for row in history.rows if row["epoch"] not in epochs]
    if history.rows and history.rows[0] in left_out:
        print(
            f"first epoch {result['first_epoch_s']:.1f} s, kernel compilation (or loading from Numba's cache) "
            "included: not counted in the throughput below"
        )
    later = [row for row in left_out if row is not history.rows[0]]
    if later:  # epochs after the first that still compiled (or loaded) kernels
        print(
            f"not counted either: {_epoch_list([row['epoch'] for row in later])} "
            f"({sum(row['seconds'] for row in later):.1f} s), which compiled (or loaded) Numba kernels too "
            "(python -m gglspeedup warmup compiles them ahead)"
        )
    over = _epoch_list(epochs) if epochs else "no epoch"
    print(
        f"throughput over {over} ({result['seconds']:.2f} s): {result['seeds_per_s']:,.0f} training seeds/s, "
        f"{result['edges']:,} sampled edges ({rate(result['edges_per_s'])} edges/s); sampling + gathering busy "
        f"for {100 * result['sample_share']:.0f}% of the epoch time (on the prefetching loader's thread)"
    )
    if result["plot"]:
        print(f"plot of loss and accuracy per epoch: {result['plot']}")
    return result

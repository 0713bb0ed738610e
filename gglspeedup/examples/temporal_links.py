"""Temporal link prediction on the bundled UC Irvine messages: train on the past, test on the future.

    python demos/temporal_links_torch.py                    # both samplers side by side (CPU)
    python demos/temporal_links_torch.py --time respect --epochs 10 --strategy last

Every message ``(s, d, t)`` is a query "does ``s`` write to ``d`` at ``t``?". The 59,835 messages
are split by time (:func:`gglspeedup.datasets.chronological_split`): the first 70% train, the next
15% validate, the last 15% test. Each positive gets a negative ``(s, n, t)`` with ``n`` uniform
among the users that exist at ``t`` (first message, sent or received, at or before ``t``). The
model is a 2-layer GraphSAGE over a learned 64-d embedding per user; a pair's score is the dot
product of its two endpoints' outputs, trained with binary cross-entropy. Reported: ROC-AUC (each
positive against its negative) and MRR (the true target ranked among ``--mrr-negatives`` existing
users, over ``--mrr-queries`` queries per split) on validation and test, for the weights of the
best validation epoch.

Two ways to sample the endpoints' neighbourhoods (``--time``; ``both`` runs the two and prints them
side by side):

``respect``
    :class:`gglspeedup.NeighborSampler` with ``edge_time``: every endpoint grows its own tree at
    the query's time and reads only messages sent strictly before it (``seed_time = t - 1``: times
    are whole seconds and eligibility is ``edge_time <= seed_time``, so the message asked about is
    never read). For the test, the history is frozen at the end of the validation period
    (``seed_time = min(t - 1, last validation time)``): the same information the other sampler has;
    the test is also scored streaming (``t - 1`` inside the test period too), which only a
    temporal sampler can do without reading the future.
``ignore``
    A plain sampler over the graph of every message known when the model is built (training and
    validation periods), with no time filter: what a static pipeline does. Training and validation
    queries then read the future, including the very message they predict, so validation looks
    better than it is; test queries (all later than that graph) cannot, and fall short of it.

Prints per-epoch loss and validation ROC-AUC (progress bars with ``tqdm``), writes a plot per
sampler to ``--out`` and the metrics to ``--json``. CPU by default; a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time

import numpy as np

__all__ = ["main", "run", "build_parser", "TemporalLinkTask"]

MODES = ("respect", "ignore")
_PAST = {"respect": "respected", "ignore": "ignored"}  # a mode as the plot title says it


def build_parser() -> argparse.ArgumentParser:
    from .cli import above, at_least, device_text, dropout_fraction, out_folder, parse_fanouts

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--time",
        choices=(*MODES, "both"),
        default="both",
        help="respect time (temporal sampler), ignore it (plain sampler over all known messages), or both "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--strategy", choices=("uniform", "last"), default="uniform", help="temporal_strategy (default: %(default)s)"
    )
    parser.add_argument("--device", default="cpu", type=device_text, help="cpu | cuda[:i] (default: %(default)s)")
    parser.add_argument(
        "--fanouts", type=parse_fanouts, default=parse_fanouts("10,5"), help="neighbours per hop (default: 10,5)"
    )
    parser.add_argument("--epochs", type=int, default=5, help="training epochs (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=256, help="positive queries per batch (default: %(default)s)")
    parser.add_argument(
        "--embedding", type=at_least(1), default=64, help="learned input width per user (default: %(default)s)"
    )
    parser.add_argument("--hidden", type=at_least(1), default=64, help="hidden and output width (default: %(default)s)")
    parser.add_argument("--lr", type=above(0.0), default=0.005, help="Adam learning rate (default: %(default)s)")
    parser.add_argument("--dropout", type=dropout_fraction, default=0.1, help="(default: %(default)s)")
    parser.add_argument(
        "--mrr-queries", type=int, default=1000, help="queries per split for MRR (default: %(default)s)"
    )
    parser.add_argument("--mrr-negatives", type=int, default=50, help="candidates per MRR query (default: %(default)s)")
    parser.add_argument(
        "--max-events", type=int, default=0, help="use only the first N messages (0: all; tiny runs) (default: 0)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads; batches are small (~10k rows), so one thread is about as fast and does "
        "not spin on a shared machine (default: %(default)s)",
    )
    parser.add_argument(
        "--seed", type=at_least(0), default=0, help="initialisation, negatives and sampling (default: 0)"
    )
    parser.add_argument("--out", default=None, type=out_folder, help="folder for the plots (default: no plot)")
    parser.add_argument("--json", default=None, help="write the metrics here (default: none)")
    parser.add_argument("--no-progress", action="store_true", help="hide the tqdm progress bars")
    return parser


class TemporalLinkTask:
    """The data of a run: events, chronological split, negatives and the two samplers' inputs."""

    def __init__(self, args):
        from ..datasets import chronological_split, load_uci_messages

        events = load_uci_messages()
        if args.max_events:
            keep = slice(0, args.max_events)
            events = events._replace(src=events.src[keep], dst=events.dst[keep], time=events.time[keep])
        self.events, self.args = events, args
        self.split = chronological_split(events.num_events, 0.15, 0.15)
        node_time = events.node_time()
        self._order = np.argsort(node_time, kind="stable")
        self._sorted_time = node_time[self._order]
        self.val_end = int(events.time[self.split["val"][-1]])
        rng = np.random.default_rng([args.seed, 1])
        self.eval_negatives = {part: self.negatives(self.split[part], rng) for part in ("val", "test")}
        self.mrr = {}
        for part in ("val", "test"):
            chosen = np.sort(rng.choice(self.split[part], min(args.mrr_queries, len(self.split[part])), replace=False))
            candidates = np.stack([self.negatives(chosen, rng) for _ in range(args.mrr_negatives)], axis=1)
            self.mrr[part] = (chosen, candidates)

    def negatives(self, index: np.ndarray, rng) -> np.ndarray:
        """One target per event ``index``: uniform among the users existing at its time."""
        existing = np.searchsorted(self._sorted_time, self.events.time[index], side="right")
        return self._order[(rng.random(len(index)) * existing).astype(np.int64)]

    def sampler(self, mode: str, seed: int):
        import gglspeedup as gg

        args = self.args
        if mode == "respect":
            graph, edge_time = self.events.graph()
            return gg.NeighborSampler(
                graph, args.fanouts, edge_time=edge_time, temporal_strategy=args.strategy, seed=seed, device=args.device
            )
        known = np.concatenate((self.split["train"], self.split["val"]))
        graph, _ = self.events.graph(known)
        return gg.NeighborSampler(graph, args.fanouts, seed=seed, device=args.device)

    def query_time(self, mode: str, index: np.ndarray, part: str, streaming: bool = False):
        """``seed_time`` of the queries ``index`` (``None`` for the plain sampler): just before
        each query, frozen at the end of validation for the test unless ``streaming``."""
        if mode != "respect":
            return None
        seed_time = self.events.time[index] - 1
        return np.minimum(seed_time, self.val_end) if part == "test" and not streaming else seed_time


def _model(num_nodes: int, args):
    import torch

    from .torch_models import SAGE

    class EmbeddingSAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(num_nodes, args.embedding)
            torch.nn.init.normal_(self.embedding.weight, std=0.1)
            self.sage = SAGE(args.embedding, args.hidden, args.hidden, len(args.fanouts), args.dropout)

        def forward(self, n_id, adjs):
            return self.sage(self.embedding(n_id), adjs)

    return EmbeddingSAGE()


def _embed(model, sampler, nodes: np.ndarray, seed_time, key=None):
    """The model's output for ``nodes``, each over its sampled neighbourhood (at ``seed_time``)."""
    import torch

    from ..device import to_numpy

    out = sampler.sample(nodes, key, seed_time=seed_time)
    n_id = torch.from_numpy(to_numpy(out.n_id).astype(np.int64))
    adjs = [(torch.from_numpy(to_numpy(a.edge_index).astype(np.int64)), None, a.size) for a in out.adjs]
    return model(n_id, adjs)[: len(nodes)], int(sum(a.edge_index.shape[1] for a in out.adjs))


def _scores(model, sampler, task, mode, index, targets, part, key=None, streaming=False):
    """Dot-product logits of ``(src[index], targets)`` at the events' times, and sampled edges."""
    events = task.events
    src = events.src[index]
    seed_time = task.query_time(mode, index, part, streaming)
    both_time = None if seed_time is None else np.concatenate((seed_time, seed_time))
    h, edges = _embed(model, sampler, np.concatenate((src, targets)), both_time, key)
    return (h[: len(src)] * h[len(src) :]).sum(-1), edges


def _evaluate(model, sampler, task, mode: str, part: str, chunk: int = 2048, streaming: bool = False) -> dict:
    import torch

    from .loop import roc_auc

    model.eval()
    index, negatives = task.split[part], task.eval_negatives[part]
    with torch.no_grad():
        pos, neg = [], []
        for start in range(0, len(index), chunk):
            rows = slice(start, start + chunk)
            for out, targets in ((pos, task.events.dst[index[rows]]), (neg, negatives[rows])):
                out.append(_scores(model, sampler, task, mode, index[rows], targets, part, 0, streaming)[0])
        pos, neg = torch.cat(pos).numpy(), torch.cat(neg).numpy()
        auc = roc_auc(np.concatenate((pos, neg)), np.concatenate((np.ones(len(pos)), np.zeros(len(neg)))))
        queries, candidates = task.mrr[part]
        k = candidates.shape[1]
        ranks = []
        for start in range(0, len(queries), max(1, chunk // (k + 1))):
            q = queries[start : start + max(1, chunk // (k + 1))]
            targets = np.concatenate((task.events.dst[q][:, None], candidates[start : start + len(q)]), axis=1)
            repeated = np.repeat(q, k + 1)
            logits = _scores(model, sampler, task, mode, repeated, targets.reshape(-1), part, 0, streaming)[0]
            logits = logits.reshape(len(q), k + 1).numpy()
            above = (logits[:, 1:] > logits[:, :1]).sum(1) + 0.5 * (logits[:, 1:] == logits[:, :1]).sum(1)
            ranks.append(1.0 + above)
    return {"auc": auc, "mrr": float(np.mean(1.0 / np.concatenate(ranks)))}


def train_mode(task: TemporalLinkTask, mode: str) -> dict:
    """Train one model with the ``mode`` sampler; the metrics of its best validation epoch."""
    import torch
    import torch.nn.functional as F
    from tqdm import tqdm

    from .loop import History, plot_history, progress

    args = task.args
    torch.manual_seed(args.seed)
    sampler = task.sampler(mode, args.seed)
    model = _model(task.events.num_nodes, args)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    rng = np.random.default_rng([args.seed, 2])
    train, history = task.split["train"], History()
    best_val, best_state, trained_s, edges_total = -1.0, None, 0.0, 0
    for epoch in progress(range(1, args.epochs + 1), desc=f"time {mode}", disable=args.no_progress, leave=True):
        order = rng.permutation(train)
        loss_sum, started = 0.0, time.perf_counter()
        batches = range(0, len(order), args.batch_size)
        for start in progress(batches, desc=f"epoch {epoch}", disable=args.no_progress):
            index = order[start : start + args.batch_size]
            model.train()
            optimizer.zero_grad()
            targets = np.concatenate((task.events.dst[index], task.negatives(index, rng)))
            logits, edges = _scores(model, sampler, task, mode, np.concatenate((index, index)), targets, "train")
            labels = torch.cat((torch.ones(len(index)), torch.zeros(len(index))))
            loss = F.binary_cross_entropy_with_logits(logits, labels)
            loss.backward()
            optimizer.step()
            loss_sum += float(loss.detach()) * len(index)
            edges_total += edges
        trained_s += time.perf_counter() - started
        val = _evaluate(model, sampler, task, mode, "val")
        history.rows.append(
            {"epoch": epoch, "loss": loss_sum / len(order), "val_auc": val["auc"], "val_mrr": val["mrr"]}
        )
        tqdm.write(
            f"time {mode:7s} epoch {epoch:3d}  loss {history.rows[-1]['loss']:.4f}  val ROC-AUC {val['auc']:.4f}  "
            f"val MRR {val['mrr']:.4f}"
        )
        if val["auc"] > best_val:
            best_val, best_state, best_epoch = val["auc"], copy.deepcopy(model.state_dict()), epoch
    model.load_state_dict(best_state)
    val, test = _evaluate(model, sampler, task, mode, "val"), _evaluate(model, sampler, task, mode, "test")
    # Only a temporal sampler can read the test period's own past without reading its future.
    stream = _evaluate(model, sampler, task, mode, "test", streaming=True) if mode == "respect" else None
    plot = None
    if args.out:
        plot = plot_history(
            history,
            args.out,
            name=f"gglspeedup-temporal-links-{mode}.png",
            title=f"UC Irvine messages, time {_PAST[mode]} (gglspeedup)",
            curves=(("validation ROC-AUC", "val_auc"), ("validation MRR", "val_mrr")),
            metric="ROC-AUC / MRR",
        )
    return {
        "best_epoch": best_epoch,
        "val_auc": val["auc"],
        "val_mrr": val["mrr"],
        "test_auc": test["auc"],
        "test_mrr": test["mrr"],
        "test_streaming_auc": stream and stream["auc"],
        "test_streaming_mrr": stream and stream["mrr"],
        "train_seconds": trained_s,
        "sampled_edges_per_s": edges_total / trained_s if trained_s else 0.0,
        "history": history.rows,
        "plot": plot,
    }


def run(argv=None) -> dict:
    """Run the demo with command-line arguments ``argv``; return ``{mode: metrics}`` plus ``args``."""
    args = build_parser().parse_args(argv)
    for name in ("epochs", "batch_size", "mrr_queries", "mrr_negatives", "threads"):
        if getattr(args, name) < 1:
            sys.exit(f"--{name.replace('_', '-')} must be at least 1")
    if args.max_events < 0 or 0 < args.max_events < 100:
        sys.exit("--max-events must be 0 (all) or at least 100")
    try:
        import torch
    except ImportError:
        from .cli import NO_TORCH

        sys.exit(NO_TORCH)
    torch.set_num_threads(args.threads)
    task = TemporalLinkTask(args)
    sizes = "/".join(str(len(task.split[p])) for p in ("train", "val", "test"))
    print(
        f"gglspeedup temporal link demo: UC Irvine messages ({task.events.num_nodes} users, "
        f"{task.events.num_events} messages; train/val/test {sizes} by time), GraphSAGE {args.fanouts} "
        f"({args.strategy}), device {args.device}, torch {torch.__version__}"
    )
    modes = MODES if args.time == "both" else (args.time,)
    results = {mode: train_mode(task, mode) for mode in modes}
    print(
        f"\n{'time':8s} {'best epoch':>10s} {'val AUC':>8s} {'val MRR':>8s} {'test AUC':>9s} {'test MRR':>9s}"
        f"   streaming test AUC / MRR"
    )
    for mode, r in results.items():
        stream = (
            "-" if r["test_streaming_auc"] is None else f"{r['test_streaming_auc']:.4f} / {r['test_streaming_mrr']:.4f}"
        )
        print(
            f"{mode:8s} {r['best_epoch']:10d} {r['val_auc']:8.4f} {r['val_mrr']:8.4f} {r['test_auc']:9.4f} "
            f"{r['test_mrr']:9.4f}   {stream}"
        )
        if r["plot"]:
            print(f"plot: {r['plot']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"args": {k: v for k, v in vars(args).items()}, **results}, handle, indent=2)
    return {"args": vars(args), **results}


def main(argv=None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Data set-up for the demos: the dataset a ``--dataset`` names, then the feature store, samplers
and loaders a training loop reads (:func:`setup_training`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cli import best_device

__all__ = ["TrainSetup", "setup_training", "ReplayLoader", "CACHE_EVAL_MAX_NODES"]


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


def normalize_rows(x: np.ndarray) -> np.ndarray:
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

    from ..datasets import parse_dataset_spec
    from ..loader import NodeLoader

    start = time.perf_counter()
    device = best_device() if args.device == "auto" else args.device
    graph, x, y, split = parse_dataset_spec(args.dataset, seed=args.seed)
    if normalize is None:
        normalize = args.dataset.strip().lower() in ("cora", "citeseer")
    if normalize:
        x = normalize_rows(x)
    y = np.asarray(y, dtype=np.int64)
    split = {name: ids[y[ids] >= 0] for name, ids in split.items()}
    features = gg.FeatureStore(x, device=device, cache_size=args.cache_size, graph=graph)
    target = gg.device.as_device(device)
    labels = target.xp.asarray(y) if target.is_cuda else y  # y of a batch on the sampler's device
    train_sampler = gg.NeighborSampler(graph, args.fanouts, seed=args.seed, device=device)
    eval_sampler = gg.NeighborSampler(graph, [-1] * len(args.fanouts), seed=args.seed, device=device)
    common = dict(labels=labels, backend=backend, prefetch=args.prefetch)
    train_loader = NodeLoader(
        train_sampler, features, split["train"], args.batch_size, shuffle=True, seed=args.seed, **common
    )
    val_loader = NodeLoader(eval_sampler, features, split["val"], eval_batch_size, shuffle=False, **common)
    test_loader = NodeLoader(eval_sampler, features, split["test"], eval_batch_size, shuffle=False, **common)
    if graph.num_nodes <= CACHE_EVAL_MAX_NODES:
        val_loader = ReplayLoader(val_loader)  # full-neighbourhood batches never change: sample once
    num_classes = int(y.max()) + 1
    info = {
        "dataset": args.dataset,
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "features": int(x.shape[1]),
        "classes": num_classes,
        "train/val/test": tuple(len(split[name]) for name in ("train", "val", "test")),
    }
    return TrainSetup(
        device,
        graph,
        features,
        y,
        split,
        num_classes,
        train_loader,
        val_loader,
        test_loader,
        time.perf_counter() - start,
        info,
    )


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

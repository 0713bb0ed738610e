"""What the multi-process demos share: their command line, the devices and data a spawning parent
builds once, and each rank's training epochs over its share of the training nodes.

Used by ``demos/multigpu_torch_spawn.py``, ``demos/multigpu_paddle_spawn.py`` and
``demos/distributed_torch.py``. Framework-neutral: the demos import torch or Paddle and hand the
framework's work (a training step, a model) in as callables; nothing here starts a process.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from .cli import parse_fanouts

__all__ = [
    "build_rank_parser",
    "rank_devices",
    "spawn_inputs",
    "share_cores",
    "train_epochs",
    "split_accuracy",
    "write_metrics",
]


def build_rank_parser(description: str, *, spawn: bool = False) -> argparse.ArgumentParser:
    """The multi-process demos' common options (``--fanouts`` parsed to a list of ints); with
    ``spawn``, also ``--devices`` and the per-GPU ``--cache-size`` of the demos whose parent
    spawns one rank per device. Each demo adds its own options."""
    parser = argparse.ArgumentParser(description=description)
    if spawn:
        parser.add_argument(
            "--devices", default=None, help="comma-separated, one rank each (default: GPUs, else cpu,cpu)"
        )
    parser.add_argument("--dataset", default="cora", choices=("cora", "citeseer"))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument(
        "--fanouts", type=parse_fanouts, default=parse_fanouts("25,10"), help="neighbours per hop, seeds' hop first"
    )
    parser.add_argument("--batch-size", type=int, default=32, help="seeds per batch on each rank")
    if spawn:
        parser.add_argument("--cache-size", default="0.1G", help="per-GPU feature cache (ignored on CPU ranks)")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def rank_devices(args) -> list[str]:
    """One device per rank: ``--devices`` split at commas, else every visible GPU, else two CPU
    ranks."""
    if args.devices:
        return args.devices.split(",")
    from .. import _config

    if _config.HAS_CUPY_GPU and _config.HAS_NUMBA_CUDA:
        import cupy

        return [f"cuda:{i}" for i in range(cupy.cuda.runtime.getDeviceCount())]
    return ["cpu", "cpu"]


def spawn_inputs(args, devices: list[str]):
    """``(graph, y, split, sampler, feature)``: ``args.dataset`` and the multi-device sampler and
    feature store over ``devices`` that the parent builds once and passes to every rank (their
    graph and feature table travel through shared memory; each rank builds its device state on
    first use)."""
    from .. import datasets
    from ..multigpu import MultiDeviceFeature, MultiDeviceSampler

    graph, x, y, split = datasets.load(args.dataset, normalize=True)
    sampler = MultiDeviceSampler(graph, devices, args.fanouts, seed=args.seed)
    feature = MultiDeviceFeature(x, devices, cache_size=args.cache_size, graph=graph)
    return graph, y, split, sampler, feature


def share_cores(ranks: int) -> None:
    """Split this process's cores between ``ranks`` CPU ranks through ``NUMBA_NUM_THREADS`` and
    ``OMP_NUM_THREADS`` (children read them at import; oversubscribed thread pools slow every rank
    down), unless they are already set."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for variable in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(variable, str(max(1, cores // ranks)))


def train_epochs(model, step, train: np.ndarray, rank: int, world_size: int, args) -> list[dict]:
    """``args.epochs`` epochs of this rank's training steps; rank 0's per-epoch history.

    Every epoch shuffles ``train`` alike on every rank (``args.seed + epoch``) and gives each rank
    an equal share (the same number of steps everywhere, or a collective would wait forever),
    in batches of ``args.batch_size`` seeds; ``step(seeds, epoch, index) -> float`` trains on one
    (``index`` counts the epoch's batches) and returns its loss, with ``model`` in training mode.
    Rank 0 prints a line per epoch and returns ``[{"epoch", "loss", "seconds"}, ...]`` (``loss``:
    the mean over its steps); the other ranks return ``[]``.
    """
    history = []
    per_rank = len(train) // world_size
    for epoch in range(args.epochs):
        model.train()
        order = np.random.default_rng(args.seed + epoch).permutation(train)  # same on every rank
        mine = order[rank * per_rank : (rank + 1) * per_rank]
        start, total_loss, steps = time.perf_counter(), 0.0, 0
        for index, first in enumerate(range(0, per_rank, args.batch_size)):
            total_loss, steps = total_loss + step(mine[first : first + args.batch_size], epoch, index), steps + 1
        if rank == 0:
            history.append({"epoch": epoch, "loss": total_loss / max(steps, 1), "seconds": time.perf_counter() - start})
            print(f"epoch {epoch:3d}  loss {history[-1]['loss']:.4f}  {history[-1]['seconds']:.2f} s", flush=True)
    return history


def split_accuracy(predict, y: np.ndarray, split: dict) -> dict:
    """``{"val": ..., "test": ...}``: the share of each part's nodes ``ids = split[part]`` whose
    predicted classes ``predict(ids)`` (a NumPy array, one per node) equal their labels ``y[ids]``.
    The caller puts the model in inference mode (and gradients off) around the call."""
    return {part: float((predict(split[part]) == y[split[part]]).mean()) for part in ("val", "test")}


def write_metrics(path: str | None, metrics: dict) -> None:
    """Write ``metrics`` as indented JSON to ``path`` (the demos' ``--json``); nothing when ``None``."""
    if path:
        with open(path, "w") as handle:
            json.dump(metrics, handle, indent=2)

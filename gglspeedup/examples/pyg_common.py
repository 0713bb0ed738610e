"""What the PyG demos share: the start-up (torch and PyG, device, threads), the training loop that
keeps the best validation epoch's weights, and the runs over consecutive seeds.

Used by :mod:`.pyg_sage` (``demos/pyg_sage_cora.py``) and :mod:`.pyg_rgcn_wordnet`
(``demos/pyg_rgcn_wordnet.py``). Imports torch only inside its functions.
"""

from __future__ import annotations

import copy
import os
import sys
import time
from collections.abc import Callable

__all__ = ["start_pyg", "fit_best", "repeat_runs"]


def start_pyg(args, threads: int | None = None):
    """Import torch and PyG (exit with the install line when either is missing), resolve
    ``--device auto`` and set torch's threads (``--threads``, else ``threads``, else torch's
    default). Returns ``(torch, torch_geometric)``."""
    # torch's OpenMP threads spin after each op; waiting passively leaves the cores to gglspeedup's
    # sampling and gather threads between PyG's steps (only takes effect before torch is imported)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
        import torch_geometric
    except ImportError as error:
        sys.exit(f"this demo needs PyTorch and PyG: pip install gglspeedup[torch,pyg] ({error})")
    if args.device == "auto":
        from .cli import best_device

        args.device = best_device()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    else:
        torch.set_num_threads(threads if threads is not None else torch.get_num_threads())
    return torch, torch_geometric


def fit_best(model, epochs: int, train_epoch: Callable, validate: Callable, progress: bool, metric: str):
    """Train ``epochs`` epochs and load the weights of the best validation epoch into ``model``.

    ``train_epoch()`` runs one epoch (``model`` already in training mode) and returns ``(loss, seen)``:
    the loss to print and how many seeds (or pairs) it trained on; ``validate()`` the validation
    score, higher is better, printed as ``metric``. Returns ``(best_val, seen per second)``.
    """
    best_val, best_state, seen, start = -1.0, None, 0, time.perf_counter()
    for epoch in range(1, epochs + 1):
        model.train()
        loss, count = train_epoch()
        seen += count
        val = validate()
        if val > best_val:
            best_val, best_state = val, copy.deepcopy(model.state_dict())
        if progress:
            print(f"epoch {epoch:3d}  loss {loss:.4f}  {metric} {val:.4f}")
    seconds = time.perf_counter() - start
    model.load_state_dict(best_state)
    return best_val, seen / seconds


def repeat_runs(torch, args, run: Callable) -> list:
    """``run(args, seed)`` for ``--runs`` consecutive seeds from ``--seed``, torch seeded alike."""
    results = []
    for index in range(args.runs):
        torch.manual_seed(args.seed + index)
        results.append(run(args, args.seed + index))
    return results

"""Runnable examples: the code the training demos share, and the README's main job.

Not part of the library's core (nothing in the core imports it); a public home so scripts can
reuse it instead of copying it:

- :mod:`.cli`: the demos' command line (:func:`build_parser`, :func:`add_layers_option`,
  :func:`parse_fanouts`, :func:`best_device`, :func:`cpu_threads`).
- :mod:`.data`: dataset, feature store, samplers and loaders for a run (:func:`setup_training`).
- :mod:`.loop`: the framework-neutral training loop (:func:`fit`), history, report and plot.
- :mod:`.torch_models`: GraphSAGE / GAT on sampled blocks in PyTorch and the torch training
  step (imports torch; load it explicitly).
- :mod:`.paddle_models`: GraphSAGE on sampled blocks in Paddle (the Paddle demos').
- :mod:`.ranks`: what the multi-process demos share (command line, data built once in a spawning
  parent, each rank's training epochs).
- :mod:`.sage_cora`: the main job, ``python -m gglspeedup.demo`` (GraphSAGE on the bundled Cora).
- :mod:`.link_cora`: link prediction, ``python -m gglspeedup.demo --task link`` (GraphSAGE
  encoder and dot-product decoder on Cora / CiteSeer edges, test ROC-AUC).
- :mod:`.temporal_links`: temporal link prediction on the bundled UC Irvine messages, time
  respected (temporal sampling) vs ignored, ``demos/temporal_links_torch.py``.
- :mod:`.pyg_sage` and :mod:`.pyg_rgcn_wordnet`: PyG's own models and loops on
  :mod:`gglspeedup.pyg`'s stores and loaders (``demos/pyg_sage_cora.py``,
  ``demos/pyg_rgcn_wordnet.py``); :mod:`.pyg_common` is what they share.

The scripts in the repository's ``demos/`` folder (TensorFlow, Paddle, GammaGL, multi-GPU,
multi-machine) are built from these pieces.
"""

from .cli import add_layers_option, best_device, build_parser, cpu_threads, parse_fanouts
from .data import CACHE_EVAL_MAX_NODES, ReplayLoader, TrainSetup, setup_training
from .loop import (
    INNER_BAR_MIN_BATCHES,
    EpochTimer,
    History,
    accuracy,
    fit,
    plot_history,
    progress,
    report,
    roc_auc,
)

__all__ = [
    "build_parser",
    "add_layers_option",
    "parse_fanouts",
    "best_device",
    "cpu_threads",
    "TrainSetup",
    "setup_training",
    "ReplayLoader",
    "CACHE_EVAL_MAX_NODES",
    "History",
    "EpochTimer",
    "progress",
    "plot_history",
    "accuracy",
    "roc_auc",
    "fit",
    "report",
    "INNER_BAR_MIN_BATCHES",
]

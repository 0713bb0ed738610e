"""Datasets: the bundled Cora and CiteSeer graphs, synthetic benchmark graphs, and readers for
graphs users already have on disk.

Every loader returns the same 4-tuple ``(graph, x, y, split)``:

``graph``  :class:`~gglspeedup.CSRGraph`, row ``v`` = in-neighbours of ``v``
``x``      float32 ``(num_nodes, num_features)``
``y``      int64 ``(num_nodes,)`` (``-1`` where a reader's file has no label)
``split``  dict of ascending int64 node-id arrays ``"train"``, ``"val"``, ``"test"``

>>> from gglspeedup import datasets
>>> graph, x, y, split = datasets.load("cora")
>>> graph.num_nodes, graph.num_edges, x.shape, len(split["train"])
(2708, 10556, (2708, 1433), 140)

Numba (used by the synthetic generator) loads on first use, not with this module.
"""

from __future__ import annotations

import importlib

from .links import EdgeSplit, split_edges
from .planetoid import load
from .readers import read_ogb_node, read_reddit
from .spec import parse_dataset_spec

__all__ = [
    "load",
    "synthetic_powerlaw",
    "synthetic_features",
    "synthetic_labels",
    "random_split",
    "read_ogb_node",
    "read_reddit",
    "parse_dataset_spec",
    "split_edges",
    "EdgeSplit",
]

_SYNTHETIC = ("synthetic_powerlaw", "synthetic_features", "synthetic_labels", "random_split")


def __getattr__(name: str):
    if name in _SYNTHETIC:
        value = getattr(importlib.import_module(f"{__name__}.synthetic"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))

"""Datasets: the bundled Cora, CiteSeer and WordNet graphs, the UC Irvine messages (a temporal
graph), synthetic benchmark graphs, and readers for graphs users already have on disk.

Every loader returns the same 4-tuple ``(graph, x, y, split)``:

``graph``  :class:`~gglspeedup.CSRGraph`, row ``v`` = in-neighbours of ``v``
``x``      float32 ``(num_nodes, num_features)``
``y``      int64 ``(num_nodes,)`` (``-1`` where a reader's file has no label)
``split``  dict of ascending int64 node-id arrays ``"train"``, ``"val"``, ``"test"``

Typed datasets (:func:`load_wordnet`, :func:`load_igbh_like`) return a
:class:`~gglspeedup.HeteroGraph` and the same three per node type: ``x[t]``, ``y[t]`` and
``split[part][t]`` (only for the types that have them). The temporal
:func:`load_uci_messages` returns :class:`TemporalEvents` (timestamped ``src -> dst`` events).

>>> from gglspeedup import datasets
>>> graph, x, y, split = datasets.load("cora")
>>> graph.num_nodes, graph.num_edges, x.shape, len(split["train"])
(2708, 10556, (2708, 1433), 140)

A bundled file that is damaged (truncated, flipped, a member missing) raises
:class:`DatasetFileError` (a ``ValueError`` and an ``OSError``) naming it.

Numba (used by the synthetic generators) loads on first use, not with this module.
"""

from __future__ import annotations

import importlib
import os

from . import planetoid
from ._bundled import DatasetFileError
from .links import EdgeSplit, split_edges
from .readers import read_ogb_node, read_reddit
from .spec import parse_dataset_spec
from .temporal import TemporalEvents, chronological_split, load_uci_messages
from .wordnet import HeteroEdgeSplit, load_wordnet, wordnet_link_split

__all__ = [
    "load",
    "DatasetFileError",
    "synthetic_powerlaw",
    "synthetic_features",
    "synthetic_labels",
    "random_split",
    "read_ogb_node",
    "read_reddit",
    "parse_dataset_spec",
    "split_edges",
    "EdgeSplit",
    "load_wordnet",
    "wordnet_link_split",
    "HeteroEdgeSplit",
    "synthetic_igbh",
    "synthetic_hetero_features",
    "load_igbh_like",
    "build_csr",
    "load_tu",
    "TUDataset",
    "load_uci_messages",
    "TemporalEvents",
    "chronological_split",
]

_LAZY = {
    **dict.fromkeys(("synthetic_powerlaw", "synthetic_features", "synthetic_labels", "random_split"), "synthetic"),
    **dict.fromkeys(("synthetic_igbh", "synthetic_hetero_features", "load_igbh_like"), "synthetic_hetero"),
    "build_csr": "build",
    **dict.fromkeys(("load_tu", "TUDataset"), "tu"),  # graph classification: ENZYMES, PROTEINS
}


def load(name: str, root: str | os.PathLike | None = None, normalize: bool = False):
    """Load a bundled dataset: ``(graph, x, y, split)``.

    ``"cora"`` and ``"citeseer"`` (case-insensitive) are read by
    :func:`gglspeedup.datasets.planetoid.load` (see it for the arguments and the counts);
    ``"wordnet"`` by :func:`load_wordnet`, a typed dataset (a ``HeteroGraph`` and dicts per node
    type). ``root`` names the folder holding the ``.npz`` file (default: the package's copy);
    ``normalize`` divides each feature row by its sum.
    """
    if isinstance(name, str) and name.lower() == "wordnet":
        return load_wordnet(root, normalize)
    if isinstance(name, str) and name.lower() not in planetoid.NAMES:
        raise ValueError(f"name must be one of {planetoid.NAMES}, got {name!r}; 'wordnet' loads the typed WordNet")
    return planetoid.load(name, root, normalize)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))

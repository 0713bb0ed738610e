"""The Cora and CiteSeer citation graphs (Planetoid split), shipped inside the package.

The files ``gglspeedup/data/{cora,citeseer}.npz`` are written once by
``tools/convert_planetoid.py`` from the raw Planetoid files (MIT licence, see
``gglspeedup/data/LICENSE-planetoid.md``) and read here with ``allow_pickle=False``.
"""

from __future__ import annotations

import os

import numpy as np

from ..graph import CSRGraph
from ._bundled import bundled_path, read_members, reading

__all__ = ["load", "NAMES"]

NAMES = ("cora", "citeseer")
_CONVERTER = "tools/convert_planetoid.py"


def load(name: str, root: str | os.PathLike | None = None, normalize: bool = False):
    """Load a bundled Planetoid graph: ``(graph, x, y, split)``.

    The same graph, features, labels and split as PyG's ``Planetoid(root, name)`` with no
    transform.

    Parameters
    ----------
    name : {"cora", "citeseer"}
        Case-insensitive.
    root : path, optional
        Folder holding ``<name>.npz`` as written by ``tools/convert_planetoid.py`` (default: the
        copy inside the package).
    normalize : bool
        Divide each feature row by its sum (PyG's ``NormalizeFeatures``); the default returns the
        raw binary bag-of-words features, as PyG's ``Planetoid`` does by default.

    Returns
    -------
    graph : CSRGraph
        Built with ``from_edge_index(edge_index, num_nodes, direction="in")`` from the symmetric
        edge list (Cora: 2,708 nodes, 10,556 directed edges; CiteSeer: 3,327 nodes, 9,104), no
        self loops; ``graph.edge_ids`` index the coalesced (source-sorted) edge list.
    x : float32 ndarray, shape (num_nodes, num_features)
        Cora 1,433 features, CiteSeer 3,703; CiteSeer's 15 isolated test-gap nodes have zero rows.
    y : int64 ndarray, shape (num_nodes,)
        Classes in ``[0, 7)`` (Cora) or ``[0, 6)`` (CiteSeer).
    split : dict of int64 ndarrays
        ``"train"`` (140 / 120 nodes), ``"val"`` (500), ``"test"`` (1,000), ascending.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    from ..validation import check_bool

    normalize = check_bool("normalize", normalize)
    key = name.lower()
    if key not in NAMES:
        raise ValueError(f"name must be one of {NAMES}, got {name!r}")
    path = bundled_path(f"{key}.npz", root, _CONVERTER)
    with reading(path, _CONVERTER):  # a damaged file is named, whatever part of it is bad
        arrays = read_members(path)
        num_nodes = len(arrays["y"])
        graph = CSRGraph.from_edge_index(arrays["edge_index"], num_nodes=num_nodes, direction="in")
        x = _dense_binary(arrays["x_indptr"], arrays["x_indices"], tuple(arrays["x_shape"].tolist()))
        y = arrays["y"].astype(np.int64)
        split = {part: arrays[f"{part}_index"].astype(np.int64) for part in ("train", "val", "test")}
    if normalize:
        row_sums = x.sum(axis=1, keepdims=True)
        np.divide(x, row_sums, out=x, where=row_sums > 0)
    return graph, x, y, split


def _dense_binary(indptr: np.ndarray, indices: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    x = np.zeros(shape, dtype=np.float32)
    rows = np.repeat(np.arange(shape[0], dtype=np.int64), np.diff(indptr.astype(np.int64)))
    x[rows, indices.astype(np.int64)] = 1.0
    return x

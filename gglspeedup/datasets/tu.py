"""The bundled TU graph-classification sets: ENZYMES and PROTEINS (``gglspeedup/data/tu_*.npz``,
made by ``tools/convert_tu.py``; sources and citations in ``gglspeedup/data/LICENSE-tu.md``).

>>> from gglspeedup.datasets import load_tu
>>> data = load_tu("proteins")
>>> data.num_graphs, data.x.shape, data.edge_index.shape, data.num_classes
(1113, (43471, 3), (2, 162088), 2)
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from ._bundled import bundled_path, read_members, reading

__all__ = ["load_tu", "TUDataset", "TU_NAMES"]

TU_NAMES = ("enzymes", "proteins")


class TUDataset(NamedTuple):
    """A batch of every graph of a set.

    ``ptr`` int64 ``(G + 1,)`` node offsets; ``edge_index`` int64 ``(2, 2E)``, both directions of
    every undirected edge (PyG's convention; global node ids); ``x`` float32 ``(N, F)``: the
    one-hot node label, then the node attributes where the set has them (ENZYMES: 3 + 18, PROTEINS:
    3, PyG's ``TUDataset(use_node_attr=True)`` features); ``y`` int64 ``(G,)`` classes from 0;
    ``node_label`` int64 ``(N,)``.
    """

    name: str
    ptr: np.ndarray
    edge_index: np.ndarray
    x: np.ndarray
    y: np.ndarray
    node_label: np.ndarray
    num_classes: int

    @property
    def num_graphs(self) -> int:
        return int(self.ptr.shape[0] - 1)

    def subset(self, graphs) -> TUDataset:
        """The graphs ``graphs`` (ids, in that order) as one batch, renumbered from 0.

        ``graphs`` is a 1-D array or list of distinct integer ids in ``[0, num_graphs)``: a float
        raises ``TypeError``, an id out of range (a negative one too: nothing wraps around)
        ``IndexError`` naming it and the range, an id given twice ``ValueError`` naming both places.
        """
        from ..validation import check_ids_in_range, int_array

        graphs = check_ids_in_range(
            "graphs", int_array("graphs", graphs, beyond=IndexError), self.num_graphs, what="num_graphs"
        )
        seen = np.full(self.num_graphs, -1, np.int64)
        for position, g in enumerate(graphs.tolist()):  # a node map holds one copy: a repeat's edges went to it
            if seen[g] >= 0:
                raise ValueError(
                    f"graphs[{position}] = {g} repeats graphs[{seen[g]}]: subset takes each graph at most once"
                )
            seen[g] = position
        sizes = np.diff(self.ptr)[graphs]
        ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        nodes = (
            np.concatenate([np.arange(self.ptr[g], self.ptr[g + 1]) for g in graphs])
            if graphs.size
            else np.zeros(0, np.int64)
        )
        new_id = np.full(self.ptr[-1], -1, np.int64)
        new_id[nodes] = np.arange(nodes.shape[0])
        keep = new_id[self.edge_index[0]] >= 0
        edge_index = new_id[self.edge_index[:, keep]]
        return TUDataset(
            self.name, ptr, edge_index, self.x[nodes], self.y[graphs], self.node_label[nodes], self.num_classes
        )


def load_tu(name: str, root: str | os.PathLike | None = None) -> TUDataset:
    """Load ``"enzymes"`` or ``"proteins"`` (case-insensitive) as a :class:`TUDataset`."""
    key = str(name).lower()
    if key not in TU_NAMES:
        raise ValueError(f"name must be one of {', '.join(TU_NAMES)}, got {name!r}")
    path = bundled_path(f"tu_{key}.npz", root, "tools/convert_tu.py")
    with reading(path, "tools/convert_tu.py"):  # a damaged file is named, whatever part of it is bad
        data = read_members(path)
        ptr = data["ptr"].astype(np.int64)
        edges = data["edges"].astype(np.int64)
        node_label = data["node_label"].astype(np.int64)
        y = data["graph_label"].astype(np.int64)
        attributes = data.get("node_attr")
        one_hot = np.eye(int(node_label.max()) + 1, dtype=np.float32)[node_label]
        x = one_hot if attributes is None else np.concatenate([one_hot, attributes.astype(np.float32)], axis=1)
        edge_index = np.concatenate([edges, edges[::-1]], axis=1)
        return TUDataset(key, ptr, edge_index, x, y, node_label, int(y.max()) + 1)

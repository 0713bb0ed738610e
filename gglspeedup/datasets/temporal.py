"""A real temporal graph shipped inside the package: the UC Irvine messages network.

``gglspeedup/data/uci_messages.npz`` is written once by ``tools/convert_uci_messages.py`` from
KONECT's ``opsahl-ucsocial`` (CC BY-SA 2.0 DE, see ``gglspeedup/data/LICENSE-uci-messages.md``)
and read here with ``allow_pickle=False``: 59,835 timestamped messages between 1,899 students of
an online community at UC Irvine (April to October 2004; Opsahl and Panzarasa, 2009).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from ._bundled import bundled_path, read_members, reading

__all__ = ["TemporalEvents", "load_uci_messages", "chronological_split"]


class TemporalEvents(NamedTuple):
    """Timestamped directed events (messages): event ``i`` is ``src[i] -> dst[i]`` at ``time[i]``.

    src, dst : int64 ndarrays, shape (E,)
        Node ids in ``[0, num_nodes)``; repeated pairs are separate events.
    time : int64 ndarray, shape (E,)
        Unix seconds, ascending (ties kept).
    num_nodes : int
    """

    src: np.ndarray
    dst: np.ndarray
    time: np.ndarray
    num_nodes: int

    @property
    def num_events(self) -> int:
        return len(self.time)

    def node_time(self) -> np.ndarray:
        """int64 (num_nodes,): each node's first event (sent or received); a node without events
        gets the largest int64."""
        first = np.full(self.num_nodes, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, self.src, self.time)
        np.minimum.at(first, self.dst, self.time)
        return first

    def graph(self, events=None, *, undirected: bool = True):
        """``(graph, edge_time)``: a :class:`~gglspeedup.CSRGraph` of ``events`` (a boolean mask or
        index array over the events; default all) and one time per edge id.

        ``undirected`` stores every message in both directions (edge ids ``j`` and ``j + k`` for
        the ``j``-th of the ``k`` chosen events, both with its time), so a node's row lists
        everyone it talked with; else row ``v`` lists the senders of ``v``'s messages.
        """
        from ..graph import CSRGraph

        chosen = np.arange(self.num_events) if events is None else np.arange(self.num_events)[events]
        src, dst, time = self.src[chosen], self.dst[chosen], self.time[chosen]
        if undirected:
            src, dst, time = np.concatenate((src, dst)), np.concatenate((dst, src)), np.concatenate((time, time))
        return CSRGraph.from_edge_index(np.stack((src, dst)), num_nodes=self.num_nodes), time


def load_uci_messages(root: str | os.PathLike | None = None) -> TemporalEvents:
    """Load the UC Irvine messages network: 59,835 messages between 1,899 users, sorted by time.

    Parameters
    ----------
    root : path, optional
        Folder holding ``uci_messages.npz`` as written by ``tools/convert_uci_messages.py``
        (default: the copy inside the package).

    Returns
    -------
    TemporalEvents
        ``src``, ``dst`` (sender, receiver) and ``time`` (Unix seconds, ascending), int64; node
        ids are numbered in order of first appearance.

    Examples
    --------
    >>> events = load_uci_messages()
    >>> events.num_nodes, events.num_events, int(events.time[0]), bool((events.time[1:] >= events.time[:-1]).all())
    (1899, 59835, 1082008561, True)
    """
    path = bundled_path("uci_messages.npz", root, "tools/convert_uci_messages.py")
    with reading(path, "tools/convert_uci_messages.py"):  # a damaged file is named, whatever part is bad
        data = read_members(path)
        src, dst = data["src"].astype(np.int64), data["dst"].astype(np.int64)
        time, num_nodes = data["time"].astype(np.int64), int(data["num_nodes"])
        return TemporalEvents(src, dst, time, num_nodes)


def chronological_split(num_events: int, val: float = 0.15, test: float = 0.15) -> dict:
    """``{"train", "val", "test"}`` -> ascending int64 event indices: the first ``1 - val - test``
    share of time-sorted events trains, the next ``val`` validates, the last ``test`` tests (the
    future is never trained on)."""
    for name, share in (("val", val), ("test", test)):
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
            raise ValueError(f"{name} must be a share in (0, 1), got {share!r}")
    if val + test >= 1:
        raise ValueError(f"val + test must leave events to train on (< 1), got {val} + {test}")
    from ..validation import check_int

    num_events = check_int("num_events", num_events, minimum=0)  # int() truncated 5.7, took "10" and True
    train_end = round(num_events * (1 - val - test))
    val_end = round(num_events * (1 - test))
    idx = np.arange(num_events, dtype=np.int64)
    return {"train": idx[:train_end], "val": idx[train_end:val_end], "test": idx[val_end:]}

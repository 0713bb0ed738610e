"""Rows of a partitioned table asked of the servers that own them: what the remote feature tier
and the remote labels read through.

Requests are ``("rows" | "labels", {"ids": int64 global ids owned by the group, "node_type": str or
None})`` -> ``{"values": rows}`` (:mod:`.server`), every owning group at once, at most
:data:`MESSAGE_BYTES` of rows each.
"""

from __future__ import annotations

import numpy as np

__all__ = ["RemoteRows", "MESSAGE_BYTES"]

# A fetch of more row bytes than this asks for them in several rounds (each a call to every group),
# so no message is larger than this: Ray moves large objects through its object store.
MESSAGE_BYTES = 64 << 20


class RemoteRows:
    """Rows of one table (``kind`` ``"x"`` features or ``"y"`` labels, of ``node_type``) fetched
    from the groups owning them: :meth:`fetch` asks every owning group at once."""

    def __init__(self, transport, book, kind: str, node_type=None):
        from .book import PartitionBook

        if not isinstance(book, PartitionBook):
            if not isinstance(book, str) and not hasattr(book, "__fspath__"):
                raise TypeError(f"book must be a PartitionBook or a partitioned folder, got {type(book).__name__}")
            book = PartitionBook.load(book)
        self.transport, self.book, self.node_type = transport, book, node_type
        self.method = "rows" if kind == "x" else "labels"
        t = book.type_index(node_type)
        table = book.meta["tables"].get(f"{kind}_{t}")
        if table is None:
            where = "" if node_type is None else f" of node type {node_type!r}"
            raise ValueError(f"the partitioned folder holds no {'features' if kind == 'x' else 'labels'}{where}")
        self.dtype = np.dtype(table["dtype"])
        self.shape = (book.count(node_type), *table["shape"])
        self.row_bytes = max(int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize, 1)
        group_of_part = np.empty(book.num_parts, np.int64)
        for group, parts in enumerate(transport.group_parts):
            group_of_part[list(parts)] = group
        self.group_of_part = group_of_part
        self.offset = int(book.type_offsets[t])
        self.rows_fetched = 0

    def fetch(self, ids: np.ndarray, out: np.ndarray, positions: np.ndarray | None = None) -> None:
        """``out[positions[i]] = table[ids[i]]`` (``positions`` default ``0 .. len(ids) - 1``) for
        distinct in-range int64 ``ids``, asked of their servers; each answer is copied once, into
        ``out``."""
        step = max(MESSAGE_BYTES // self.row_bytes, 1)
        for lo in range(0, ids.shape[0], step):
            where = np.arange(lo, min(lo + step, ids.shape[0])) if positions is None else positions[lo : lo + step]
            self._fetch_round(ids[lo : lo + step], out, where)
        self.rows_fetched += int(ids.shape[0])

    def _fetch_round(self, ids: np.ndarray, out: np.ndarray, where: np.ndarray) -> None:
        flat = ids + self.offset if self.offset else ids
        groups = self.group_of_part[np.asarray(self.book.part[flat])]
        order = np.argsort(groups, kind="stable")
        bounds = np.searchsorted(groups[order], np.arange(len(self.transport.group_parts) + 1))
        requests, positions = {}, {}
        for group in range(len(bounds) - 1):
            mine = order[bounds[group] : bounds[group + 1]]
            if mine.shape[0]:
                positions[group] = mine
                requests[group] = (self.method, {"ids": ids[mine], "node_type": self.node_type})
        answers = self.transport.call(requests)
        for group, mine in positions.items():
            out[where[mine]] = answers[group]["values"]

"""Sampling across processes: the owners' draws and the trainer's remote drivers (issue 40).

Two sides of one hop, each built on the local sampler's own pieces:

- :class:`OwnedRows` (a partition server's): answers ``"draw"`` and ``"edges"`` requests
  (the messages of :mod:`._kernels.remote`) for the partitions it holds, drawing each row of its
  own CSR with the global node's RNG state through the local row bodies
  (:mod:`._kernels.remote_rows`), and finding a link batch's excluded positions in its rows.
- :class:`RemoteDriver` / :class:`TypedRemoteDriver` (a trainer's): the local drivers' contract
  over an ``exchange(requests, key)`` callable, relabelling on the trainer
  (:mod:`._kernels.remote_relabel`), and :class:`Routes`, who owns what.

``gglspeedup.service`` builds its server and its samplers on these; kernels stay in ``_kernels``.
"""

from __future__ import annotations

import numpy as np

from ._kernels.cpu import KERNEL_LOCK, weight_tables
from ._kernels.exclusion import row_filter, rows_ascending
from ._kernels.links import match_positions
from ._kernels.records import GraphArrays, SampleOptions, no_exclusions, without_exclusions
from ._kernels.remote import RemoteDriver, Routes, TypedRemoteDriver
from ._kernels.remote_rows import draw_owned_rows, owned_edges

__all__ = ["OwnedRows", "RemoteDriver", "TypedRemoteDriver", "Routes", "narrowest_counts", "remote_options"]


def remote_options(replace: bool, weighted: bool, last: bool) -> SampleOptions:
    """A remote driver's options record: the owners report the partitions' edge ids (always
    stored), so ``has_edge_ids`` is on."""
    return SampleOptions(bool(replace), bool(weighted), True, last=bool(last))


def narrowest_counts(counts: np.ndarray) -> np.ndarray:
    """``counts`` (non-negative) in the narrowest unsigned type holding them (what goes on the wire)."""
    top = int(counts.max()) if counts.shape[0] else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts.astype(np.uint64)


class _Part:
    """One partition's rows as the kernels read them."""

    def __init__(self, arrays: dict):
        self.row_base = np.asarray(arrays["row_base"], np.int64)
        indptr, weights = arrays["indptr"], arrays.get("weights")
        tables = weight_tables(indptr, weights) if weights is not None and indptr.shape[0] > 1 else None

        def present(array, dtype):
            return np.zeros(1, dtype) if array is None or array.shape[0] == 0 else array

        live, cum = tables if tables is not None else (None, None)
        self.graph = GraphArrays(
            indptr=indptr,
            indices=present(arrays["indices"], arrays["indices"].dtype),
            edge_ids=present(arrays["edge_ids"], arrays["edge_ids"].dtype),
            weights=present(weights, np.float64),
            live=present(live, np.int64),
            cum=present(cum, np.float64),
        )
        self.times = arrays.get("times")
        self.weighted = weights is not None
        self._ascending = None

    def ascending(self) -> bool:
        if self._ascending is None:
            self._ascending = rows_ascending(np, self.graph.indptr, self.graph.indices)
        return self._ascending


class OwnedRows:
    """The sampling side of a partition server over ``parts`` of ``book`` (``arrays[i]`` the
    memory-mapped arrays of ``parts[i]``: see :mod:`gglspeedup.service._layout`)."""

    def __init__(self, book, parts, arrays):
        self.book = book
        self.parts = {int(p): _Part(a) for p, a in zip(parts, arrays)}
        self.type_offsets = book.type_offsets
        if book.typed:
            index = {t: i for i, t in enumerate(book.node_types)}
            self.dst_type = np.array([index[et[2]] for et in book.edge_types], np.int64)
        else:
            self.dst_type = np.zeros(1, np.int64)

    def _rows(self, part: _Part, ids, rel):
        """Each target's row in ``part``'s CSR (relation ``rel[i]``'s row of node ``ids[i]``)."""
        flat = self.type_offsets[self.dst_type[rel]] + ids
        return part.row_base[rel] + np.asarray(self.book.local[flat], np.int64)

    def _owned(self, p: int) -> _Part:
        part = self.parts.get(int(p))
        if part is None:
            raise ValueError(f"partition {int(p)} is not served here (this server holds {sorted(self.parts)})")
        return part

    def _options(self, part: _Part, payload: dict, times, exclusions):
        marker = no_exclusions()
        temporal = times is not None
        if temporal and part.times is None:
            raise ValueError("a request with times needs a partition written with node_time or edge_time")
        if bool(payload["weighted"]) and not part.weighted:
            raise ValueError("a weighted request needs a partition written from a graph with weights")
        excluded, flagged = exclusions if exclusions is not None else (marker, marker)
        return SampleOptions(
            bool(payload["replace"]),
            bool(payload["weighted"]),
            True,
            excluded=excluded,
            excluded_rows=flagged,
            times=part.times if temporal else marker,
            seed_time=times if temporal else marker,
            last=bool(payload.get("last", False)),
        )

    def _exclusions(self, p: int, part: _Part, payload: dict):
        """``(positions, row flags)`` of the excluded edges whose rows ``p`` holds, or ``None``."""
        if "excl_src" not in payload:
            return None
        dst = np.asarray(payload["excl_dst"], np.int64)
        rel = np.asarray(payload["excl_rel"], np.int64)
        flat = self.type_offsets[self.dst_type[rel]] + dst
        mine = np.asarray(self.book.part[flat]) == p
        if not mine.any():
            return None
        rows = self._rows(part, dst[mine], rel[mine])
        sources = np.asarray(payload["excl_src"], np.int64)[mine]
        positions = match_positions(part.graph, sources, rows, part.ascending())
        return (positions, row_filter(np, rows)) if positions.shape[0] else None

    def draw(self, payload: dict) -> dict:
        """Answer a ``"draw"`` request: ``{"counts", "nbrs", "e_id"}`` (see :mod:`._kernels.remote`)."""
        ids = np.asarray(payload["ids"], np.int64)
        ks = np.asarray(payload["ks"], np.int64)
        states = np.asarray(payload["states"], np.uint64)
        num_relations = ks.shape[0]
        rel_counts = np.asarray(payload["rel_counts"], np.int64).reshape(-1, num_relations)
        times = payload.get("times")
        counts, nbrs, e_ids = [], [], []
        start = 0
        for p, per_relation in zip(np.asarray(payload["parts"]).tolist(), rel_counts):
            stop = start + int(per_relation.sum())
            if stop == start:
                continue
            part = self._owned(p)
            rel = np.repeat(np.arange(num_relations, dtype=np.int64), per_relation)
            mine = ids[start:stop]
            window = None if times is None else np.ascontiguousarray(times[start:stop])
            options = self._options(part, payload, window, self._exclusions(p, part, payload))
            with KERNEL_LOCK:
                offsets, part_nbrs, part_e_id = draw_owned_rows(
                    part.graph, options, without_exclusions(options), self._rows(part, mine, rel), mine, rel, ks, states
                )
            counts.append(np.diff(offsets))
            nbrs.append(part_nbrs)
            e_ids.append(part_e_id)
            start = stop
        if start != ids.shape[0]:
            raise ValueError(f"rel_counts cover {start} targets, ids holds {ids.shape[0]}")
        return {
            "counts": narrowest_counts(np.concatenate(counts) if counts else np.zeros(0, np.int64)),
            "nbrs": np.concatenate(nbrs) if nbrs else np.zeros(0, np.int32),
            "e_id": np.concatenate(e_ids) if e_ids else np.zeros(0, np.int32),
        }

    def edges(self, payload: dict) -> dict:
        """Answer an ``"edges"`` request: ``{"found": uint8}`` per ``(src, dst)`` pair."""
        src = np.asarray(payload["src"], np.int64)
        dst = np.asarray(payload["dst"], np.int64)
        rel = np.full(src.shape[0], int(payload["rel"]), np.int64)
        found, start = [], 0
        for p, count in zip(np.asarray(payload["parts"]).tolist(), np.asarray(payload["part_counts"]).tolist()):
            part = self._owned(p)
            stop = start + int(count)
            rows = self._rows(part, dst[start:stop], rel[start:stop])
            with KERNEL_LOCK:
                found.append(owned_edges(part.graph, src[start:stop], rows))
            start = stop
        return {"found": np.concatenate(found) if found else np.zeros(0, np.uint8)}

    def warm(self) -> None:
        """Compile (or load from Numba's cache) the kernels of the requests this server can get."""
        empty = np.zeros(0, np.int64)
        for part in self.parts.values():
            kinds = [(False, None)]
            if part.weighted:
                kinds.append((True, None))
            if part.times is not None:
                kinds.append((False, part.times[:0]))
            for weighted, times in kinds:
                payload = {"replace": False, "weighted": weighted, "last": False}
                options = self._options(part, payload, times, None)
                ks, states = np.zeros(1, np.int64), np.zeros(1, np.uint64)
                draw_owned_rows(part.graph, options, options, empty, empty, empty, ks, states)
            owned_edges(part.graph, empty, empty)
            break  # every partition of a folder has the same array types: one compiles for all

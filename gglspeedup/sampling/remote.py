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

from .._parallel import KERNEL_LOCK, kernel_threads, read_only
from ._kernels.cpu import weight_tables
from ._kernels.exclusion import row_filter, rows_ascending
from ._kernels.links import match_positions
from ._kernels.records import GraphArrays, SampleOptions, no_exclusions, without_exclusions
from ._kernels.remote import RemoteDriver, Routes, TypedRemoteDriver
from ._kernels.remote_rows import draw_owned_rows, owned_edges

__all__ = [
    "OwnedRows",
    "RemoteDriver",
    "TypedRemoteDriver",
    "Routes",
    "narrowest_counts",
    "remote_options",
    "threads_for",
    "wire_dtype",
]


def remote_options(replace: bool, weighted: bool, last: bool) -> SampleOptions:
    """A remote driver's options record: the owners report the partitions' edge ids (always
    stored), so ``has_edge_ids`` is on."""
    return SampleOptions(bool(replace), bool(weighted), True, last=bool(last))


def wire_dtype(book) -> np.dtype:
    """The type node ids of ``book``'s graph travel in: int32 while they fit, else int64."""
    return np.dtype(np.int32 if np.dtype(book.meta["index_dtype"]) == np.int32 else np.int64)


def threads_for(work: int) -> kernel_threads:
    """The parallel region of a kernel drawing about ``work`` edges: the one runtime's
    :class:`gglspeedup._parallel.kernel_threads` (its lock, and one thread below the local
    drivers' threshold: on a busy machine each parallel barrier costs a scheduler time slice)."""
    return kernel_threads(work)


def _writable(array, dtype=None) -> np.ndarray:
    """``array`` as a writable C-contiguous array (a copy when it is not: Ray hands arrays over
    read-only, and Numba compiles a kernel again for read-only arguments, which a fresh server
    process would do against a request's deadline)."""
    array = np.ascontiguousarray(array, dtype)
    return array if array.flags.writeable else array.copy()


def narrowest_counts(counts: np.ndarray) -> np.ndarray:
    """``counts`` (non-negative) in the narrowest unsigned type holding them (what goes on the wire)."""
    top = int(counts.max()) if counts.shape[0] else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts.astype(np.uint64)


class _Part:
    """One partition's rows as the kernels read them."""

    def __init__(self, number: int, arrays: dict):
        self.number = int(number)
        self.row_base = np.asarray(arrays["row_base"], np.int64)
        indptr, weights = arrays["indptr"], arrays.get("weights")
        tables = weight_tables(indptr, weights) if weights is not None and indptr.shape[0] > 1 else None

        def present(array, dtype):
            # Every field read-only, as the mapped ones are (_parallel.read_only): a placeholder or
            # a table built here (a partition without weights or edges) would otherwise compile
            # the draw kernel once more
            return read_only(np.zeros(1, dtype) if array is None or array.shape[0] == 0 else array)

        live, cum = tables if tables is not None else (None, None)
        self.graph = GraphArrays(
            indptr=present(indptr, indptr.dtype),
            indices=present(arrays["indices"], arrays["indices"].dtype),
            edge_ids=present(arrays["edge_ids"], arrays["edge_ids"].dtype),
            # an edgeless part's placeholder in the folder's weight type, as the part that warmed has
            weights=present(weights, np.float64 if weights is None else weights.dtype),
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
        self.parts = {int(p): _Part(p, a) for p, a in zip(parts, arrays)}
        self.type_offsets = book.type_offsets
        if book.typed:
            index = {t: i for i, t in enumerate(book.node_types)}
            self.dst_type = np.array([index[et[2]] for et in book.edge_types], np.int64)
        else:
            self.dst_type = np.zeros(1, np.int64)
        # What the draw kernel reads of the book per relation (it maps ids to rows itself).
        owner, local = np.asarray(book.part), np.asarray(book.local)
        type_base = np.ascontiguousarray(self.type_offsets[self.dst_type])
        type_size = np.ascontiguousarray(self.type_offsets[self.dst_type + 1] - type_base)
        for part in self.parts.values():
            part.book = (owner, local, type_base, type_size, part.row_base)
        self._plain = {}  # (part, replace, weighted, last) -> options of a request without times or exclusions
        first = next(iter(self.parts.values())).graph  # every partition of a folder: the same widths
        self._types = (first.indices.dtype, first.edge_ids.dtype)

    def _rows(self, part: _Part, ids, rel):
        """Each target's row in ``part``'s CSR (relation ``rel[i]``'s row of node ``ids[i]``)."""
        flat = self.type_offsets[self.dst_type[rel]] + ids
        return part.row_base[rel] + np.asarray(self.book.local[flat], np.int64)

    def _check_owned(self, p: int, ids: np.ndarray, r: int, offset: int) -> None:
        """``ValueError`` naming the first of ``ids`` (relation ``r``'s targets) partition ``p`` does not own."""
        t = int(self.dst_type[r])
        count = int(self.type_offsets[t + 1] - self.type_offsets[t])
        inside = (ids >= 0) & (ids < count)
        owned = inside.copy()
        owned[inside] = np.asarray(self.book.part[self.type_offsets[t] + ids[inside]]) == p
        if not owned.all():
            bad = int(np.argmin(owned))
            raise ValueError(f"dst[{offset + bad}] = {int(ids[bad])} is not a node partition {p} owns")

    def _owned(self, p: int) -> _Part:
        part = self.parts.get(int(p))
        if part is None:
            raise ValueError(f"partition {int(p)} is not served here (this server holds {sorted(self.parts)})")
        return part

    def _options(self, part: _Part, payload: dict, times, exclusions) -> tuple:
        """``(options, plain)`` of a request to ``part``: its :class:`SampleOptions` and those
        without exclusions (what rows holding no excluded edge draw through); a request without
        times or exclusions reuses the pair built for its flags the first time."""
        flags = (bool(payload["replace"]), bool(payload["weighted"]), bool(payload.get("last", False)))
        plain = times is None and exclusions is None
        if plain:
            cached = self._plain.get((part.number, *flags))
            if cached is not None:
                return cached
        marker = no_exclusions()
        temporal = times is not None
        if temporal and part.times is None:
            raise ValueError("a request with times needs a partition written with node_time or edge_time")
        if flags[1] and not part.weighted:
            raise ValueError("a weighted request needs a partition written from a graph with weights")
        excluded, flagged = exclusions if exclusions is not None else (marker, marker)
        options = SampleOptions(
            flags[0],
            flags[1],
            True,
            excluded=excluded,
            excluded_rows=flagged,
            times=part.times if temporal else marker,
            seed_time=times if temporal else marker,
            last=flags[2],
        )
        pair = (options, without_exclusions(options))
        if plain:
            self._plain[(part.number, *flags)] = pair
        return pair

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

    def draw(self, payload: dict, arena=None) -> dict:
        """Answer a ``"draw"`` request: ``{"counts", "nbrs", "e_id"}`` (see :mod:`._kernels.remote`).
        ``ValueError`` for a request this server cannot answer (an id it does not own, counts
        that do not cover the ids). ``arena`` (optional, a writable ``uint8`` array: the memory
        the answer is sent from) takes ``nbrs`` and ``e_id`` when the fanouts bound the draws
        and it holds that bound: the kernel writes them there, part after part, uncopied."""
        ids = _writable(payload["ids"])
        if ids.dtype.kind not in "iu" or ids.ndim != 1:
            raise ValueError(f"ids must be a 1-D array of integers, got dtype {ids.dtype}, shape {ids.shape}")
        num_relations = self.dst_type.shape[0]
        ks = _writable(payload["ks"], np.int64).reshape(-1, num_relations)
        states = _writable(payload["states"], np.uint64).reshape(-1, num_relations)
        rel_counts = _writable(payload["rel_counts"], np.int64).reshape(-1, num_relations)
        parts = np.asarray(payload["parts"]).tolist()
        # a merged request (several batches: service._merge) names each listed partition's batch
        batch_of = np.asarray(payload["part_batch"]).tolist() if "part_batch" in payload else [0] * len(parts)
        if len(batch_of) != len(parts) or len(parts) != rel_counts.shape[0] or max(batch_of, default=0) >= ks.shape[0]:
            raise ValueError("parts, part_batch, rel_counts and ks disagree in length")
        # One relation (untyped): each part's size is its single count, no reduction to run.
        sizes = (rel_counts[:, 0] if num_relations == 1 else rel_counts.sum(axis=1)).tolist()
        if sum(sizes) != ids.shape[0]:
            raise ValueError(f"rel_counts cover {sum(sizes)} targets, ids holds {ids.shape[0]}")
        times = payload.get("times")
        # Counts go out as uint8 when the fanouts bound them there (the kernel writes them so);
        # otherwise the kernel writes int64 and they are narrowed after the draw, to the largest
        # one drawn. Two count types: each is a kernel compiled (and warmed) per request kind.
        k_min, k_max = (int(ks[0, 0]),) * 2 if ks.size == 1 else (int(ks.min()), int(ks.max()))
        small = 0 <= k_min and k_max <= 255
        counts = np.empty(ids.shape[0], np.uint8 if small else np.int64)
        nbrs_out, e_out = self._outputs(arena, ids.shape[0] * k_max if k_min >= 0 else -1)
        answers, start, written, in_arena = [], 0, 0, nbrs_out.shape[0] > 0
        excluding = "excl_src" in payload
        for p, batch, per_relation, size in zip(parts, batch_of, rel_counts, sizes):
            stop = start + size
            if stop == start:
                continue
            part = self._owned(p)
            window = None if times is None else _writable(times[start:stop])
            exclusions = self._exclusions(p, part, payload) if excluding else None
            options, plain = self._options(part, payload, window, exclusions)
            mine, fanouts, drawn = ids[start:stop], ks[batch], counts[start:stop]
            outputs = (nbrs_out[written:], e_out[written:])
            with threads_for(size * max(int(fanouts.max()) if num_relations > 1 else int(fanouts[0]), 16)):
                arguments = (part.graph, options, plain, part.book, p, mine, per_relation, fanouts, states[batch])
                nbrs, e_id, bad = draw_owned_rows(*arguments, drawn, *outputs)
            if bad >= 0:
                raise ValueError(f"ids[{start + bad}] = {int(mine[bad])} is not a node partition {p} owns")
            answers.append((nbrs, e_id))
            in_arena = in_arena and (not nbrs.shape[0] or nbrs.ctypes.data == outputs[0].ctypes.data)
            written += nbrs.shape[0]
            start = stop
        if in_arena and answers:  # drawn into the arena, part after part: one run already
            nbrs, e_id = nbrs_out[:written], e_out[:written]
        elif len(answers) == 1:
            nbrs, e_id = answers[0]
        elif answers:
            nbrs, e_id = (np.concatenate(arrays) for arrays in zip(*answers))
        else:
            nbrs = e_id = np.zeros(0, np.int32)
        return {"counts": counts if small else narrowest_counts(counts), "nbrs": nbrs, "e_id": e_id}

    def _outputs(self, arena, bound: int) -> tuple:
        """``(nbrs, e_id)`` buffers of ``bound`` draws each in ``arena`` (64-byte aligned, one
        after the other), or empty ones (the kernel allocates) without an arena, without a
        bound (``-1``: a fanout of -1) or when the arena cannot hold it."""
        indices, edge_ids = self._types
        if arena is None or bound <= 0:
            return np.zeros(0, indices), np.zeros(0, edge_ids)
        split = -(-bound * indices.itemsize // 64) * 64
        end = split + bound * edge_ids.itemsize
        if end > arena.shape[0]:
            return np.zeros(0, indices), np.zeros(0, edge_ids)
        return arena[: bound * indices.itemsize].view(indices), arena[split:end].view(edge_ids)

    def edges(self, payload: dict) -> dict:
        """Answer an ``"edges"`` request: ``{"found": uint8}`` per ``(src, dst)`` pair."""
        src = _writable(payload["src"], np.int64)
        dst = _writable(payload["dst"], np.int64)
        r = int(payload["rel"])
        parts, counts = np.asarray(payload["parts"]).tolist(), np.asarray(payload["part_counts"]).tolist()
        if src.ndim != 1 or dst.shape != src.shape or len(parts) != len(counts) or sum(counts) != src.shape[0]:
            raise ValueError(f"src, dst and part_counts disagree: {src.shape}, {dst.shape}, {counts}")
        if not 0 <= r < self.dst_type.shape[0]:
            raise ValueError(f"rel must lie in [0, {self.dst_type.shape[0]}), got {r}")
        rel = np.full(src.shape[0], r, np.int64)
        found, start = [], 0
        for p, count in zip(parts, counts):
            part = self._owned(p)
            stop = start + int(count)
            self._check_owned(p, dst[start:stop], r, start)  # as draw refuses them: rows of p only
            rows = self._rows(part, dst[start:stop], rel[start:stop])
            with KERNEL_LOCK:
                found.append(owned_edges(part.graph, src[start:stop], rows))
            start = stop
        return {"found": np.concatenate(found) if found else np.zeros(0, np.uint8)}

    def warm(self) -> None:
        """Compile (or load from Numba's cache) the kernels of every kind of request this server
        can get (a timed partition's requests carry times, others none; with or without a link
        batch's exclusions; both count types), so that none compiles against a request's deadline."""
        empty = np.zeros(0, np.int64)
        wire = np.zeros(0, wire_dtype(self.book))
        ks, states = np.zeros(1, np.int64), np.zeros(1, np.uint64)
        excluded = (np.zeros(1, np.int64), row_filter(np, empty))
        for p, part in self.parts.items():
            payload = {"replace": False, "weighted": part.weighted, "last": False}
            times = None if part.times is None else np.zeros(0, part.times.dtype)  # as _writable gives them
            plain = self._options(part, payload, times, None)[0]
            outputs = self._outputs(None, 0)
            for options in (plain, self._options(part, payload, times, excluded)[0]):
                for counts in (np.zeros(0, np.uint8), empty):
                    draw_owned_rows(part.graph, options, plain, part.book, p, wire, empty, ks, states, counts, *outputs)
            match_positions(part.graph, empty, empty, True)
            owned_edges(part.graph, empty, empty)
            break  # every partition of a folder has the same array types: one compiles for all

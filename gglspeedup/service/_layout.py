"""How a partition is laid out and written: the graph seen as relations, assignments, part folders.

A part folder (kind ``"Partition"``, :mod:`gglspeedup._storage`) holds, for the nodes it owns:

- ``nodes_<t>``: the owned ids of node type ``t`` (untyped: ``t = 0``), ascending: its rows;
- ``indptr`` (int64), ``indices`` (global neighbour ids: int32 while the graph's ids fit),
  ``edge_ids`` (the ``e_id`` the local sampler reports for each entry: the graph's edge ids, else
  its CSR position; typed graphs the relation's ids), ``row_base`` (typed: each relation's first
  row; untyped ``[0, rows]``) and, where given, ``weights`` and ``times`` (one per entry);
- ``x_<t>`` / ``y_<t>``: the owned feature rows and labels of type ``t``.

Each row keeps the local sampler's edge order: the graph's, or with times the row sorted by them,
stably (as :func:`gglspeedup.sampling.temporal.sort_by_time` sorts it), so a server drawing a row
draws what the local sampler draws. Everything is written in pieces of at most the ``memory``
budget, so a memory-mapped graph is partitioned out of core.
"""

from __future__ import annotations

import numpy as np

from .._storage import FolderWriter

__all__ = ["Relations", "relations_of", "range_assignment", "local_rows", "write_part", "BYTES_PER_ENTRY"]

# Bytes a piece of rows holds per entry while it is written: its positions, neighbours, edge ids,
# weights, times, the sort order and their casts (int64 each, rounded up).
BYTES_PER_ENTRY = 72


class Relations:
    """A graph as the partitioner reads it: one stacked CSR of relations (untyped: one relation
    ``(0, "", 0)``), node types laid out one after another (``type_offsets``)."""

    def __init__(self, graph):
        from ..heterograph import HeteroGraph

        self.typed = isinstance(graph, HeteroGraph)
        csr = graph.stacked.to("cpu") if self.typed else graph.to("cpu")
        self.indptr, self.indices = csr.indptr, csr.indices
        self.edge_ids, self.weights = csr.edge_ids, csr.weights
        if self.typed:
            self.node_types, self.edge_types = graph.node_types, graph.edge_types
            counts = [graph.num_nodes[t] for t in graph.node_types]
            index = {t: i for i, t in enumerate(graph.node_types)}
            self.src_type = [index[et[0]] for et in graph.edge_types]
            self.dst_type = [index[et[2]] for et in graph.edge_types]
            self.row_base = [int(v) for v in graph.row_base]
            self.edge_base = [int(v) for v in graph.edge_base]
        else:
            self.node_types, self.edge_types = None, None
            counts = [graph.num_nodes]
            self.src_type = self.dst_type = [0]
            self.row_base, self.edge_base = [0, graph.num_nodes], [0, graph.num_edges]
        self.counts = counts
        self.type_offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.num_nodes = int(self.type_offsets[-1])
        self.num_edges = int(csr.num_edges)
        self.id_dtype = np.dtype(csr.indices.dtype)

    @property
    def num_relations(self) -> int:
        return len(self.src_type)

    def degrees(self) -> np.ndarray:
        """int64 (N,): every node's entries summed over the relations whose rows it has."""
        degree = np.zeros(self.num_nodes, np.int64)
        for r in range(self.num_relations):
            rows = np.diff(np.asarray(self.indptr[self.row_base[r] : self.row_base[r + 1] + 1]))
            first = self.type_offsets[self.dst_type[r]]
            degree[first : first + rows.shape[0]] += rows
        return degree

    def edge_id_dtype(self) -> np.dtype:
        """int32 when every reported edge id fits, else int64."""
        if self.edge_ids is None:
            largest = self.num_edges - 1
        else:
            largest = int(np.max(self.edge_ids)) if self.edge_ids.shape[0] else 0
        return np.dtype(np.int32 if largest < 2**31 else np.int64)


def relations_of(graph) -> Relations:
    return Relations(graph)


def range_assignment(degrees: np.ndarray, num_parts: int) -> np.ndarray:
    """Contiguous id ranges, one per part, balanced by nodes and edges together (each node weighs
    1 + its degree) and never empty; returns the part of each node (int64)."""
    n = degrees.shape[0]
    cum = np.cumsum(degrees + 1, dtype=np.float64)
    total = cum[-1] if n else 0.0
    bounds = np.zeros(num_parts + 1, np.int64)
    bounds[-1] = n
    for k in range(1, num_parts):
        b = int(np.searchsorted(cum, k * total / num_parts, side="left"))
        bounds[k] = min(max(b, bounds[k - 1] + 1), n - (num_parts - k))
    return np.repeat(np.arange(num_parts, dtype=np.int64), np.diff(bounds))


def local_rows(part: np.ndarray, type_offsets: np.ndarray, num_parts: int) -> tuple:
    """``(local, sizes)``: each node's rank among its part's nodes of its type (ascending ids), and
    the (num_types, num_parts) node counts."""
    local = np.empty(part.shape[0], np.int64)
    sizes = np.zeros((type_offsets.shape[0] - 1, num_parts), np.int64)
    for t in range(type_offsets.shape[0] - 1):
        lo, hi = int(type_offsets[t]), int(type_offsets[t + 1])
        of_type = np.asarray(part[lo:hi])
        order = np.argsort(of_type, kind="stable")
        sizes[t] = np.bincount(of_type, minlength=num_parts)
        starts = np.concatenate(([0], np.cumsum(sizes[t])[:-1]))
        local[lo + order] = np.arange(hi - lo, dtype=np.int64) - starts[of_type[order]]
    return local, sizes


def _pieces(lengths: np.ndarray, budget: int):
    """``(lo, hi)`` runs of consecutive items whose ``lengths`` sum to at most ``budget`` (an item
    longer than that alone)."""
    cum = np.cumsum(lengths)
    lo, total = 0, cum.shape[0]
    while lo < total:
        base = cum[lo - 1] if lo else 0
        hi = int(np.searchsorted(cum, base + budget, side="right"))
        hi = max(hi, lo + 1)
        yield lo, hi
        lo = hi


def _positions(indptr, rows: np.ndarray) -> tuple:
    """``(positions, counts)``: every CSR position of ``rows``, row by row, and each row's length."""
    starts = np.asarray(indptr[rows], np.int64)
    counts = np.asarray(indptr[rows + 1], np.int64) - starts
    offsets = np.concatenate(([0], np.cumsum(counts)))
    positions = np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1], dtype=np.int64)
    return positions, counts


def write_part(parent, name: str, meta: dict, rel: Relations, owned: list, tables: dict, times, budget: int):
    """Write part folder ``parent/name``: ``owned[t]`` the ascending ids of type ``t`` it owns,
    ``tables`` ``{array name: (t, table)}`` the feature and label tables to slice, ``times`` an
    object whose ``of(r, positions, entries)`` gives the entries' times (``None`` without), ``budget``
    the bytes a piece may hold."""
    import os

    id_dtype, eid_dtype = rel.id_dtype, rel.edge_id_dtype()
    with FolderWriter(os.path.join(parent, name), "Partition", meta) as out:
        for t, ids in enumerate(owned):
            out.add(f"nodes_{t}", ids)
        row_base = [0]
        for r in range(rel.num_relations):
            row_base.append(row_base[-1] + owned[rel.dst_type[r]].shape[0])
        out.add("row_base", np.asarray(row_base, np.int64))
        indptr = out.open("indptr", np.int64, (row_base[-1] + 1,))
        indptr.write(np.zeros(1, np.int64))
        columns = {"indices": out.open("indices", id_dtype, None), "edge_ids": out.open("edge_ids", eid_dtype, None)}
        if rel.weights is not None:
            columns["weights"] = out.open("weights", rel.weights.dtype, None)
        if times is not None:
            columns["times"] = out.open("times", times.dtype, None)
        written = 0
        for r in range(rel.num_relations):
            rows = owned[rel.dst_type[r]] + rel.row_base[r]
            lengths = np.asarray(rel.indptr[rows + 1]) - np.asarray(rel.indptr[rows])
            for lo, hi in _pieces(lengths, max(budget // BYTES_PER_ENTRY, 1)):
                positions, counts = _positions(rel.indptr, rows[lo:hi])
                entries = np.asarray(rel.indices[positions])
                if times is not None:
                    stamps = times.of(r, positions, entries)
                    order = np.lexsort((stamps, np.repeat(np.arange(hi - lo), counts)))  # stable, per row
                    positions, entries, stamps = positions[order], entries[order], stamps[order]
                    columns["times"].write(stamps)
                columns["indices"].write(entries.astype(id_dtype, copy=False))
                if rel.edge_ids is not None:
                    columns["edge_ids"].write(np.asarray(rel.edge_ids[positions]).astype(eid_dtype, copy=False))
                else:
                    columns["edge_ids"].write((positions - rel.edge_base[r]).astype(eid_dtype, copy=False))
                if rel.weights is not None:
                    columns["weights"].write(np.asarray(rel.weights[positions]))
                indptr.write(written + np.cumsum(counts))
                written += int(positions.shape[0])
        for array_name, (t, table) in tables.items():
            ids = owned[t]
            row_bytes = max(int(np.prod(table.shape[1:], dtype=np.int64)) * table.dtype.itemsize, 1)
            writer = out.open(array_name, table.dtype, (ids.shape[0], *table.shape[1:]))
            step = max(budget // (row_bytes + 16), 1)
            for lo in range(0, ids.shape[0], step):
                writer.write(np.asarray(table[ids[lo : lo + step]]))

"""METIS assignments through ``pymetis`` (the ``service`` extra), balanced by nodes and by edges.

METIS partitions an undirected graph without self loops, so the graph's entries (every relation's,
a typed graph's node types laid out one after another) are symmetrised and de-duplicated first.
Each node weighs one plus its stored entries, so METIS balances the nodes and the rows' edges a
server holds together (measured here, 2,000 nodes / 20,000 edges in 3 parts: nodes within 4% and
edges within 1% of even; METIS's two-constraint form, a weight each, left parts 20% apart in
edges). With ``num_parts`` near the node count METIS leaves parts empty (a 20-node power-law
graph in 20 parts: 9 empty); each empty part, lowest first, then takes the lowest id of the part
holding the most nodes (the lowest such part on a tie), so every server owns a node. The seed is
fixed: the same graph gives the same parts. METIS holds the whole graph in memory (about
:data:`BYTES_PER_EDGE` per edge while it is built): larger graphs take ``method="range"``.
"""

from __future__ import annotations

import heapq

import numpy as np

__all__ = ["metis_assignment", "fill_empty_parts", "metis_bytes", "BYTES_PER_EDGE", "import_pymetis"]

BYTES_PER_EDGE = 64  # the COO pair, its transpose, the symmetric CSR and METIS's own copy
_SEED = 0


def import_pymetis():
    """``pymetis``, or ``ImportError`` naming the extra that installs it."""
    try:
        import pymetis
    except ImportError:
        raise ImportError(
            "method='metis' needs pymetis: pip install 'gglspeedup[service]' (or method='range')"
        ) from None
    return pymetis


def metis_bytes(num_nodes: int, num_edges: int) -> int:
    """About the memory a METIS assignment of a graph this size takes."""
    return BYTES_PER_EDGE * int(num_edges) + 48 * int(num_nodes)


def metis_assignment(rel, num_parts: int) -> np.ndarray:
    """The part of each node (int64 (N,)) of ``rel`` (:class:`._layout.Relations`) by METIS."""
    import scipy.sparse as sp

    n = rel.num_nodes
    if num_parts == 1 or n == 0:
        return np.zeros(n, np.int64)
    pymetis = import_pymetis()
    rows, cols = [], []
    for r in range(rel.num_relations):
        lo, hi = rel.row_base[r], rel.row_base[r + 1]
        indptr = np.asarray(rel.indptr[lo : hi + 1])
        degree = np.diff(indptr)
        first, last = int(indptr[0]), int(indptr[-1])
        rows.append(np.repeat(np.arange(hi - lo, dtype=np.int64) + rel.type_offsets[rel.dst_type[r]], degree))
        cols.append(np.asarray(rel.indices[first:last], np.int64) + rel.type_offsets[rel.src_type[r]])
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    keep = rows != cols  # METIS takes no self loops
    rows, cols = rows[keep], cols[keep]
    ones = np.ones(rows.shape[0] * 2, np.int8)
    matrix = sp.csr_matrix((ones, (np.concatenate((rows, cols)), np.concatenate((cols, rows)))), shape=(n, n))
    del rows, cols, ones, keep
    matrix.sum_duplicates()
    xadj = matrix.indptr.astype(np.int64)
    adjncy = matrix.indices.astype(np.int64)
    del matrix
    weights = rel.degrees() + 1
    options = pymetis.Options(seed=_SEED)
    result = pymetis.part_graph(num_parts, pymetis.CSRAdjacency(xadj, adjncy), vweights=weights, options=options)
    return fill_empty_parts(np.asarray(result.vertex_part, dtype=np.int64), num_parts)


def fill_empty_parts(part: np.ndarray, num_parts: int) -> np.ndarray:
    """``part`` (int64 (N,), ``num_parts <= N``) with every part non-empty: each empty part, lowest
    first, takes the lowest id of the part holding the most nodes (the lowest such part on a tie)."""
    counts = np.bincount(part, minlength=num_parts)
    empty = np.flatnonzero(counts == 0)
    if empty.shape[0] == 0:
        return part
    order = np.argsort(part, kind="stable")  # each part's nodes, ascending ids
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    taken = np.zeros(num_parts, np.int64)
    largest = [(-int(c), p) for p, c in enumerate(counts) if c > 1]
    heapq.heapify(largest)
    for p in empty:
        # a donor always holds two nodes or more: no more parts than nodes, and one is empty
        count, donor = heapq.heappop(largest)
        part[order[starts[donor] + taken[donor]]] = p
        taken[donor] += 1
        if -count - 1 > 1:
            heapq.heappush(largest, (count + 1, donor))
    return part

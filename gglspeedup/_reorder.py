"""Node orders that keep hot rows together, and the mapping of ids, features and labels by one.

A sampler reads row ``u`` each time ``u`` is drawn, and ``u`` is drawn in proportion to how often it
appears in ``indices`` (its out-degree for an ``"in"`` graph). On a graph of billions of edges the
rows are scattered over gigabytes, so almost every row read misses the caches; numbering the
nodes so that the rows read most often sit next to each other packs the hot part of ``indptr``
and of the short rows together. What it buys on a power-law graph is small (about 3% of the
sampling CPU time at 40M nodes; a long row's draws stay scattered): BENCHMARKS.md, "Node order".

An *order* is an int64 array ``order`` with ``order[new_id] = original_id``; its inverse
``rank[original_id] = new_id``.

Orders (``ORDERS``):

``"degree"``
    Descending appearance count in ``indices`` (ties: ascending original id), so the hottest
    rows come first. Needs only the counts, which an out-of-core build has after its first pass.
``"bfs"``
    Breadth-first from the hottest node (then from the hottest node not reached yet), neighbours
    in row order: rows read one after the other by a sample sit near each other. Needs the graph.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "ORDERS",
    "check_order_name",
    "check_node_order",
    "degree_order",
    "bfs_order",
    "inverse_order",
    "map_ids",
    "rows_in_order",
    "reorder_arrays",
]

ORDERS = ("degree", "bfs")


def check_order_name(name: str, reorder, known: tuple = ORDERS) -> str | None:
    """``reorder`` checked: ``None`` or one of ``known``; else ``ValueError`` naming ``name``."""
    if reorder is None:
        return None
    if not isinstance(reorder, str) or reorder not in known:
        raise ValueError(f"{name} must be None or one of {known}, got {reorder!r}")
    return reorder


def check_node_order(
    node_order, num_nodes: int, num_src_nodes: int, *, full: bool, name: str = "node_order"
) -> np.ndarray:
    """``node_order`` as an int64 array of ``num_nodes`` entries; with ``full`` also checked to be
    a permutation of ``range(num_nodes)`` (O(N); a trusted graph folder skips it, as its other
    contents). ``ValueError`` naming ``name`` and the first bad entry."""
    from .validation import int_array

    order = int_array(name, node_order)
    if num_src_nodes != num_nodes:
        raise ValueError(f"{name} needs a square graph; this one is bipartite (num_src_nodes != num_nodes)")
    if order.shape[0] != num_nodes:
        raise ValueError(f"{name} must have num_nodes = {num_nodes} entries, got {order.shape[0]}")
    if full and num_nodes:
        bad = (order < 0) | (order >= num_nodes)
        if bad.any():
            position = int(np.argmax(bad))
            raise ValueError(f"{name}[{position}] = {order[position]} is out of range [0, {num_nodes})")
        seen = np.zeros(num_nodes, np.bool_)
        seen[order] = True
        if not seen.all():
            missing = int(np.argmin(seen))
            raise ValueError(f"{name} must be a permutation of range({num_nodes}): node {missing} is missing")
    return order


def map_ids(graph, ids, *, to_original: bool) -> np.ndarray:
    """``ids`` (any shape) through ``graph.node_order`` (``to_original``) or its inverse, int64, of
    the shape of ``ids`` (a NumPy int64 for a 0-d ``ids``); ``IndexError`` naming ``ids`` and the first id outside
    ``[0, num_nodes)``."""
    from .validation import check_ids_in_range, int_array

    shape = np.shape(ids)
    # int_array's ascontiguousarray makes a 0-d array 1-D: the shape is put back
    ids = int_array("ids", ids, ndim=len(shape), dtype=np.int64, beyond=IndexError).reshape(shape)
    check_ids_in_range("ids", ids.reshape(-1), graph.num_nodes, what="num_nodes")
    if graph.node_order is None:
        mapped = ids.copy()
    elif to_original:
        mapped = graph.node_order[ids]
    else:
        if graph._node_rank is None:  # O(N) once per graph, on the first call
            graph._node_rank = inverse_order(graph.node_order)
        mapped = graph._node_rank[ids]
    return mapped[()] if not shape else mapped  # one id: a NumPy int64, as NumPy's indexing gives


def rows_in_order(graph, array):
    """``array[graph.node_order]`` (rows renumbered as the graph's nodes), or ``array`` without an
    order; ``ValueError`` unless ``array`` has ``num_nodes`` rows."""
    rows = len(array) if np.ndim(array) else None
    if rows != graph.num_nodes:
        raise ValueError(f"array must have num_nodes = {graph.num_nodes} rows (one per node), got {rows}")
    if graph.node_order is None:
        return array
    if hasattr(array, "index_select"):  # a torch tensor: index it with a tensor of the order
        import torch

        return array.index_select(0, torch.from_numpy(graph.node_order).to(array.device))
    return np.asarray(array)[graph.node_order]


def degree_order(counts: np.ndarray) -> np.ndarray:
    """int64 ``order`` (new id -> original id) by descending ``counts`` (how often each node
    appears in ``indices``), ties by ascending original id."""
    counts = np.asarray(counts)
    # A stable sort of the negated counts keeps equal counts in id order.
    return np.argsort(-counts.astype(np.int64), kind="stable").astype(np.int64, copy=False)


def bfs_order(indptr: np.ndarray, indices: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """int64 ``order`` visiting the graph breadth-first from its hottest nodes (``counts``
    descending, as :func:`degree_order`), neighbours in row order."""
    from ._reorder_kernels import bfs

    return bfs(np.asarray(indptr), np.asarray(indices), degree_order(counts))


def inverse_order(order: np.ndarray) -> np.ndarray:
    """``rank`` with ``rank[order[i]] = i`` (int64)."""
    rank = np.empty(order.shape[0], np.int64)
    rank[order] = np.arange(order.shape[0], dtype=np.int64)
    return rank


def reorder_arrays(arrays: dict, reorder: str, num_src_nodes) -> tuple[dict, np.ndarray]:
    """``(arrays, order)``: the CSR constructor arguments ``arrays`` (``indptr``, ``indices``,
    ``edge_ids``, ``weights``, ``dtype``) renumbered by the order ``reorder`` names, rows in their
    edges' order (as a stable sort of the renumbered edge list), and the order itself."""
    indptr, indices = arrays["indptr"], arrays["indices"]
    num_nodes = indptr.shape[0] - 1
    if num_src_nodes is not None and num_src_nodes != num_nodes:
        raise ValueError("reorder needs a square graph; num_src_nodes != num_nodes (a bipartite graph)")
    counts = np.bincount(indices, minlength=num_nodes)
    order = degree_order(counts) if reorder == "degree" else bfs_order(indptr, indices, counts)
    from ._csr_build import permuted_rows

    rank = inverse_order(order)
    new_indptr, positions = permuted_rows(indptr, order)  # positions[p]: old position of new p
    out = dict(arrays, indptr=new_indptr, indices=rank[indices[positions]].astype(indices.dtype))
    for name in ("edge_ids", "weights"):
        if arrays[name] is not None:
            out[name] = arrays[name][positions]
    return out, order

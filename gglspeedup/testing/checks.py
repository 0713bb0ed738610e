"""Invariant checks for sampler output, usable by any test (``check_sample``, ``assert_same_sample``)."""

from __future__ import annotations

import numpy as np

from ..device import to_numpy

__all__ = ["check_sample", "assert_same_sample"]


def _fail(message: str):
    raise AssertionError(message)


def _host(array) -> np.ndarray:
    return np.asarray(to_numpy(array))


def check_sample(graph, seeds, fanouts, out, *, replace=False, weighted=False) -> None:
    """Raise ``AssertionError`` unless ``out = (n_id, adjs)`` keeps the sampling contract.

    Checks: int64 arrays; ``n_id[:B] == seeds``; no duplicates in ``n_id`` beyond duplicated
    seeds; one ``Adj`` per hop, outermost first, sizes chaining ``(T_{h+1}, T_h)`` from
    ``T_0 = B`` to ``len(n_id)``; every edge exists in the graph and ``e_id`` names it; edges
    grouped by target in target order; sources relabelled in order of first appearance;
    per-target counts ``min(k, avail)`` without replacement (no repeated edge) and ``k`` with
    replacement; zero-weight edges never drawn; duplicated targets get identical neighbours.
    Host or device arrays are accepted; ``graph.edge_ids``, when set, must be unique. Python
    loops per target: meant for graphs and batches of test size.
    """
    indptr, indices = _host(graph.indptr), _host(graph.indices)
    weights = None if graph.weights is None else _host(graph.weights)
    position_of = None
    if graph.edge_ids is not None:
        edge_ids = _host(graph.edge_ids)
        position_of = np.full(int(edge_ids.max()) + 1 if edge_ids.size else 0, -1, np.int64)
        position_of[edge_ids] = np.arange(len(edge_ids))
    seeds = np.asarray(_host(seeds), dtype=np.int64).reshape(-1)
    n_id, adjs = out
    n_id = _host(n_id)
    if n_id.dtype != np.int64 or n_id.ndim != 1:
        _fail(f"n_id must be 1-D int64, got {n_id.dtype} shape {n_id.shape}")
    batch = len(seeds)
    if not np.array_equal(n_id[:batch], seeds):
        _fail("n_id[:len(seeds)] differs from seeds")
    if len(np.unique(n_id[batch:])) != len(n_id) - batch or np.isin(n_id[batch:], seeds).any():
        _fail("n_id repeats a node beyond duplicated seeds")
    if len(adjs) != len(fanouts):
        _fail(f"expected {len(fanouts)} adjs (one per hop), got {len(adjs)}")
    first = {}
    for i, node in enumerate(n_id.tolist()):
        first.setdefault(node, i)
    next_new = batch
    num_targets = batch
    for hop, k in enumerate(fanouts):
        edge_index, e_id, size = adjs[len(fanouts) - 1 - hop]
        edge_index, e_id = _host(edge_index), _host(e_id)
        if edge_index.dtype != np.int64 or e_id.dtype != np.int64:
            _fail(f"hop {hop}: edge_index/e_id must be int64, got {edge_index.dtype}/{e_id.dtype}")
        if edge_index.ndim != 2 or edge_index.shape[0] != 2 or e_id.shape != (edge_index.shape[1],):
            _fail(f"hop {hop}: edge_index must be (2, E) and e_id (E,), got {edge_index.shape}, {e_id.shape}")
        if not all(isinstance(s, int) for s in size) or size[1] != num_targets:
            _fail(f"hop {hop}: size {size} must be Python ints with size[1] == {num_targets}")
        src, dst = edge_index
        if len(dst) and (np.diff(dst) < 0).any():
            _fail(f"hop {hop}: edges are not grouped by target in target order")
        if len(dst) and (dst.min() < 0 or dst.max() >= size[1] or src.min() < 0 or src.max() >= size[0]):
            _fail(f"hop {hop}: a local index is outside size {size}")
        positions = e_id if position_of is None else position_of[e_id]
        for j, s in enumerate(src.tolist()):
            node = int(n_id[s])
            if first[node] != s:
                _fail(f"hop {hop}: edge {j} source {s} is not the first position of node {node}")
            if s >= next_new:
                if s != next_new:
                    _fail(f"hop {hop}: new node at local {s} appears out of first-appearance order")
                next_new += 1
        targets = n_id[dst]
        if positions.size:
            if (positions < 0).any() or (positions >= len(indices)).any():
                _fail(f"hop {hop}: e_id names an edge that does not exist")
            if not np.array_equal(indices[positions], n_id[src]):
                _fail(f"hop {hop}: e_id does not point at the sampled neighbour")
            if ((positions < indptr[targets]) | (positions >= indptr[targets + 1])).any():
                _fail(f"hop {hop}: a sampled edge is not in its target's row")
            if weighted and (weights[positions] <= 0).any():
                _fail(f"hop {hop}: a zero-weight edge was drawn")
        counts = np.bincount(dst, minlength=num_targets)
        by_node = {}
        for i in range(num_targets):
            node = int(n_id[i])
            row = slice(indptr[node], indptr[node + 1])
            avail = int((weights[row] > 0).sum()) if weighted else int(indptr[node + 1] - indptr[node])
            expect = avail if k < 0 else (0 if avail == 0 else (k if replace else min(k, avail)))
            if counts[i] != expect:
                _fail(f"hop {hop}: target {i} (node {node}) has {counts[i]} edges, expected {expect}")
            mine = positions[dst == i]
            if not replace and len(np.unique(mine)) != len(mine):
                _fail(f"hop {hop}: target {i} drew an edge twice without replacement")
            if node in by_node and not np.array_equal(by_node[node], mine):
                _fail(f"hop {hop}: duplicated node {node} got different neighbours")
            by_node.setdefault(node, mine)
        if size[0] != next_new:
            _fail(f"hop {hop}: size[0] = {size[0]} but n_id holds {next_new} nodes after this hop")
        num_targets = size[0]
    if num_targets != len(n_id):
        _fail(f"the outermost hop has {num_targets} sources but n_id has {len(n_id)} nodes")


def assert_same_sample(actual, expected) -> None:
    """Raise ``AssertionError`` unless two sampler outputs are identical (values, dtypes, sizes)."""
    a_nid, a_adjs = actual
    e_nid, e_adjs = expected
    a_nid, e_nid = _host(a_nid), _host(e_nid)
    if a_nid.dtype != e_nid.dtype or not np.array_equal(a_nid, e_nid):
        _fail(f"n_id differs: {a_nid.tolist()[:20]} vs {e_nid.tolist()[:20]}")
    if len(a_adjs) != len(e_adjs):
        _fail(f"{len(a_adjs)} adjs vs {len(e_adjs)}")
    for h, (a, e) in enumerate(zip(a_adjs, e_adjs)):
        if tuple(a.size) != tuple(e.size):
            _fail(f"adjs[{h}].size {a.size} vs {e.size}")
        for name in ("edge_index", "e_id"):
            x, y = _host(getattr(a, name)), _host(getattr(e, name))
            if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y):
                _fail(f"adjs[{h}].{name} differs:\n{x}\nvs\n{y}")

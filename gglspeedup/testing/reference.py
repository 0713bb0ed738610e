"""A pure-NumPy / pure-Python reference of :class:`gglspeedup.NeighborSampler`.

It re-implements the sampling contract and the counter-based RNG independently of the Numba
kernels (Python integers instead of ``np.uint64``), one row at a time, so tests can compare the
kernels with it exactly. It is slow: use it on graphs of up to a few thousand edges.
"""

from __future__ import annotations

import functools

import numpy as np

from ..device import to_numpy
from ..sampling.types import Adj, SampleOutput

__all__ = [
    "reference_sample",
    "reference_hop_state",
    "reference_draw",
    "reference_relation_state",
    "reference_hetero_sample",
]

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_NODE_MUL = 0xD6E8FEB86659FD93


def _mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def reference_hop_state(seed: int, key: int, hop: int) -> int:
    """The RNG state of one hop of one batch, as a Python int."""
    state = _mix64((seed + _GAMMA) & _MASK)
    state = _mix64(((state ^ (key & _MASK)) + _GAMMA) & _MASK)
    return _mix64(((state ^ (hop & _MASK)) + _GAMMA) & _MASK)


def _row_state(hop_state: int, node: int) -> int:
    return _mix64(hop_state ^ ((node * _NODE_MUL) & _MASK))


def reference_draw(seed: int, key: int, hop: int, node: int, index: int) -> int:
    """64 random bits: draw ``index`` of ``node``'s row at ``hop`` of batch ``key``."""
    return _draw(_row_state(reference_hop_state(seed, key, hop), node), index)


def _draw(row_state: int, index: int) -> int:
    return _mix64((row_state + ((index + 1) * _GAMMA)) & _MASK)


def _below(bits: int, n: int) -> int:
    return ((bits >> 32) * n) >> 32 if n < (1 << 32) else bits % n


def _u01(bits: int) -> float:
    return float(bits >> 11) * 2.0**-53


def _sample_row(start, deg, weights, k, replace, weighted, state):
    """CSR positions drawn for one row (same conventions as ``_kernels/rows.py``)."""
    row = range(start, start + deg)
    live = [p for p in row if not weighted or float(weights[p]) > 0]
    if k == 0 or not live:
        return []
    if k < 0 or (not replace and len(live) < k) or (not replace and not weighted and deg <= k):
        return live
    if replace and not weighted:
        return [start + _below(_draw(state, i), deg) for i in range(k)]
    if replace:  # inverse CDF: the first edge whose running sum exceeds u * total
        cum = _running_sums(weights, row)
        picks = []
        for i in range(k):
            target = _u01(_draw(state, i)) * cum[-1]
            j = next((j for j, c in enumerate(cum) if c > target), None)
            picks.append(live[-1] if j is None else start + j)
        return picks
    if not weighted:  # Floyd's algorithm (a set beside the draws: a list's `in` made it O(k^2))
        chosen, seen = [], set()
        for c, j in enumerate(range(deg - k, deg)):
            p = start + _below(_draw(state, c), j + 1)
            chosen.append(start + j if p in seen else p)
            seen.add(chosen[-1])
        return chosen
    return _successive(start, deg, weights, k, state)


def _running_sums(weights, row):
    cum, acc = [], 0.0
    for p in row:
        acc += float(weights[p])
        cum.append(acc)
    return cum


def _successive(start, deg, weights, k, state):
    """Weighted sampling without replacement, step for step as ``_kernels/rows.py`` does it."""
    cum = _running_sums(weights, range(start, start + deg))
    end = start + deg
    chosen = []
    remaining = cum[-1]

    def first_above(base, target):  # first p with cum[p] - base > target, or end
        return next((start + j for j, c in enumerate(cum) if c - base > target), end)

    def free(p):
        return float(weights[p]) > 0 and p not in chosen

    for i in range(k):
        target = _u01(_draw(state, i)) * remaining
        base = 0.0
        while True:
            p = first_above(base, target)
            mass = 0.0
            for c in chosen:
                if c <= p:
                    mass += float(weights[c])
            if mass == base:
                break
            base = mass
        if p == end or not free(p):
            p = min(p, end - 1)
            while not free(p):
                p = p + 1 if p + 1 < end else start
        chosen.append(p)
        remaining -= float(weights[p])
    return chosen


def reference_sample(
    graph, seeds, fanouts, *, replace=False, weighted=False, seed=0, key=0, expand="all"
) -> SampleOutput:
    """What ``NeighborSampler(graph, fanouts, replace=..., weighted=..., seed=seed,
    expand=expand).sample(seeds, key=key)`` must return, computed row by row in Python (host NumPy
    arrays, int64). ``expand="new"``: hop ``h + 1`` draws only for the nodes new at hop ``h``."""
    indptr = to_numpy(graph.indptr)
    indices = to_numpy(graph.indices)
    edge_ids = None if graph.edge_ids is None else to_numpy(graph.edge_ids)
    weights = None if graph.weights is None else to_numpy(graph.weights)
    n_id = [int(s) for s in to_numpy(np.asarray(seeds) if isinstance(seeds, list) else seeds)]
    local = {}
    for i, node in enumerate(n_id):
        local.setdefault(node, i)
    picks = functools.partial(_csr_picks, indptr, indices, weights, replace, weighted)
    hops = _grow_hops(n_id, local, fanouts, seed, key, expand, edge_ids, picks)
    return SampleOutput(np.array(n_id, dtype=np.int64), hops)


def _grow_hops(n_id: list, local: dict, fanouts, seed: int, key: int, expand: str, edge_ids, picks) -> list:
    """The hops of an untyped sample grown from the rows ``n_id`` (outermost first; ``n_id`` and
    ``local`` grow in place): hop ``h`` draws ``picks(k, hop_state, row)`` for each target row
    (every row so far, or with ``expand="new"`` the rows new at hop ``h - 1``)."""
    hops, first = [], 0
    for hop, k in enumerate(fanouts):
        targets = list(n_id)
        hop_picks = functools.partial(picks, k, reference_hop_state(seed, key, hop))
        hops.append(_draw_hop(n_id, local, targets, first, edge_ids, hop_picks))
        first = len(targets) if expand == "new" else 0
    return hops[::-1]


def _csr_picks(indptr, indices, weights, replace, weighted, k, state: int, node: int) -> list:
    """``(p, neighbour)`` for every CSR position ``p`` drawn in ``node``'s row with RNG ``state``."""
    start, end = int(indptr[node]), int(indptr[node + 1])
    row_state = _row_state(state, node)
    return [(p, int(indices[p])) for p in _sample_row(start, end - start, weights, k, replace, weighted, row_state)]


def _draw_hop(n_id: list, local: dict, targets: list, first: int, edge_ids, picks) -> Adj:
    """One hop (of one relation): the edges ``picks(row)`` draws for each target row
    ``targets[first:]`` (``(p, neighbour)`` pairs: CSR position, source row), each new source row
    appended to ``n_id`` (and ``local``: row -> position) in order of first appearance."""
    src, dst, e_id = [], [], []
    for i in range(first, len(targets)):
        for p, neighbour in picks(targets[i]):
            if neighbour not in local:
                local[neighbour] = len(n_id)
                n_id.append(neighbour)
            src.append(local[neighbour])
            dst.append(i)
            e_id.append(p if edge_ids is None else int(edge_ids[p]))
    edge_index = np.array([src, dst], dtype=np.int64).reshape(2, -1)
    return Adj(edge_index, np.array(e_id, dtype=np.int64), (len(n_id), len(targets)))


def reference_relation_state(hop_state: int, edge_type) -> int:
    """A relation's state within a hop: the hop state folded with the edge type's BLAKE2b key."""
    import hashlib

    key = int.from_bytes(hashlib.blake2b("\x1f".join(edge_type).encode(), digest_size=8).digest(), "little")
    return _mix64(((hop_state ^ key) + _GAMMA) & _MASK)


def reference_hetero_sample(graph, seeds, fanouts, *, replace=False, weighted=False, seed=0, key=0, expand="all"):
    """What ``HeteroNeighborSampler(graph, fanouts, ...).sample(seeds, key=key)`` must return, as a
    ``HeteroSampleOutput`` of host arrays, computed relation by relation and row by row in Python.

    ``fanouts`` is a list (every relation) or a dict edge type -> list (missing types: zeros);
    ``expand="new"``: hop ``h + 1``'s targets are only the nodes of each type new at hop ``h``.
    """
    from ..sampling.types import HeteroSampleOutput

    edge_types, node_types = graph.edge_types, graph.node_types
    num_hops = len(next(iter(fanouts.values()))) if isinstance(fanouts, dict) else len(fanouts)
    if not isinstance(fanouts, dict):
        fanouts = {et: list(fanouts) for et in edge_types}
    n_id = {t: [int(v) for v in to_numpy(np.asarray(seeds.get(t, []), dtype=np.int64))] for t in node_types}
    local = {t: {} for t in node_types}
    for t in node_types:
        for i, node in enumerate(n_id[t]):
            local[t].setdefault(node, i)
    counts_n = {t: [len(n_id[t])] for t in node_types}
    counts_e = {et: [] for et in edge_types}
    adjs = []
    starts = {t: 0 for t in node_types}
    for hop in range(num_hops):
        hop_state = reference_hop_state(seed, key, hop)
        targets = {t: list(n_id[t]) for t in node_types}
        before = {t: len(n_id[t]) for t in node_types}
        layer = {}
        for et in edge_types:
            src_type, _, dst_type = et
            k = fanouts.get(et, [0] * num_hops)[hop]
            rel = graph[et].to("cpu")
            indptr, indices = to_numpy(rel.indptr), to_numpy(rel.indices)
            edge_ids = None if rel.edge_ids is None else to_numpy(rel.edge_ids)
            weights = None if rel.weights is None else to_numpy(rel.weights)
            state = reference_relation_state(hop_state, et)
            picks = functools.partial(_csr_picks, indptr, indices, weights, replace, weighted, k, state)
            first = starts[dst_type] if k != 0 else len(targets[dst_type])
            layer[et] = _draw_hop(n_id[src_type], local[src_type], targets[dst_type], first, edge_ids, picks)
            counts_e[et].append(len(layer[et].e_id))
        for et in edge_types:  # sizes count every source of the hop, new ones of later relations too
            adj = layer[et]
            layer[et] = Adj(adj.edge_index, adj.e_id, (len(n_id[et[0]]), adj.size[1]))
        for t in node_types:
            counts_n[t].append(len(n_id[t]) - before[t])
            starts[t] = before[t] if expand == "new" else 0
        adjs.append(layer)
    arrays = {t: np.array(v, dtype=np.int64) for t, v in n_id.items()}
    return HeteroSampleOutput(arrays, adjs[::-1], counts_n, counts_e)

"""Cache policies: which rows go to the device cache first.

A policy yields an *order*: distinct row ids, hottest first; the cache takes the first rows of it
that fit the byte budget.

- ``"degree"`` (PaGraph, torch-quiver): rows by descending in-degree (``graph.degree()``), ties by
  ascending id.
- ``"presample"`` (GNNLab's PreSC): run the sampler over a few epochs' worth of batches, count how
  often each node appears in the sampled ``n_id``, and order by that count (ties by degree, then
  id). It reports the hit rate the cache would have had on those batches.
- an explicit order array: the caller's own ranking (e.g. from an earlier run's statistics).
- ``"none"``: nothing is cached.

>>> import numpy as np, gglspeedup as gg
>>> g = gg.CSRGraph([0, 1, 3, 3], [1, 0, 2])
>>> degree_order(g).tolist()
[1, 0, 2]
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "POLICIES",
    "degree_order",
    "presample_counts",
    "presample_order",
    "expected_hit_rate",
    "resolve_policy",
]

POLICIES = ("degree", "presample", "none")

_PRESAMPLE_KEYS = {"fanouts", "batch_size", "num_batches", "seeds", "seed", "sampler"}


def degree_order(graph) -> np.ndarray:
    """Row ids by descending in-degree, ties by ascending id: int64, shape (num_nodes,)."""
    return np.argsort(-graph.degree(), kind="stable").astype(np.int64, copy=False)


def presample_counts(
    graph,
    fanouts=(15, 10, 5),
    batch_size: int = 1024,
    num_batches: int | None = None,
    seeds=None,
    seed: int = 0,
    sampler=None,
) -> np.ndarray:
    """How often each node appears in ``n_id`` over ``num_batches`` sampled mini-batches.

    Parameters
    ----------
    graph : CSRGraph
    fanouts : sequence of int
        Neighbours per hop, ``fanouts[0]`` for the seeds (ignored when ``sampler`` is given).
    batch_size : int
        Seeds per batch.
    num_batches : int, optional
        Batches to sample; default: one epoch over ``seeds`` (at most 64 batches).
    seeds : int array, optional
        The training nodes batches are drawn from (default: every node). Each epoch is a fresh
        permutation, as a shuffling loader draws them.
    seed : int
        Seeds the permutation and the sampler.
    sampler : object with ``sample(seeds) -> (n_id, adjs)``, optional
        Default: ``gglspeedup.NeighborSampler(graph, fanouts, seed=seed)`` on the CPU.

    Returns
    -------
    counts : int64, shape (num_nodes,)
    """
    num_nodes = graph.num_nodes
    seeds = np.arange(num_nodes, dtype=np.int64) if seeds is None else _as_node_ids("presample['seeds']", seeds, num_nodes)
    batch_size = _positive_int("presample['batch_size']", batch_size)
    if num_batches is None:
        num_batches = min(64, max(1, -(-len(seeds) // batch_size)))
    num_batches = _positive_int("presample['num_batches']", num_batches)
    if len(seeds) == 0:
        raise ValueError("presample['seeds'] must not be empty")
    if sampler is None:
        from ..sampling import NeighborSampler

        sampler = NeighborSampler(graph, list(fanouts), seed=seed, device="cpu")
    rng = np.random.default_rng(seed)
    counts = np.zeros(num_nodes, dtype=np.int64)
    permutation, position = rng.permutation(seeds), 0
    for _ in range(num_batches):
        if position >= len(permutation):
            permutation, position = rng.permutation(seeds), 0
        batch = permutation[position : position + batch_size]
        position += batch_size
        n_id = np.asarray(_to_host(sampler.sample(batch)[0]), dtype=np.int64)
        counts += np.bincount(n_id, minlength=num_nodes)
    return counts


def presample_order(graph, counts: np.ndarray) -> np.ndarray:
    """Row ids by descending ``counts``, ties by descending degree, then ascending id."""
    ids = np.arange(graph.num_nodes, dtype=np.int64)
    return np.lexsort((ids, -graph.degree(), -np.asarray(counts))).astype(np.int64, copy=False)


def expected_hit_rate(counts: np.ndarray, cached_ids: np.ndarray) -> float:
    """Share of the counted lookups that ``cached_ids`` would have served (0.0 when nothing counted)."""
    total = int(np.sum(counts))
    return float(np.sum(counts[cached_ids]) / total) if total else 0.0


def resolve_policy(policy: Any, graph, num_rows: int, presample: dict | None):
    """Check ``policy`` and return ``(name, compute)``: ``compute()`` yields ``(order, info)``.

    Checks run now (unknown names, a missing or mismatched graph, a bad order array); the order
    itself is computed only when the store has a cache to fill. ``info`` is a dict for
    ``store.policy_info``.
    """
    if graph is not None:
        from ..graph import as_csr_graph

        graph = as_csr_graph(graph)
        if graph.num_nodes != num_rows:
            raise ValueError(f"graph has {graph.num_nodes} nodes but x has {num_rows} rows; they must match")
    if policy is None:
        policy = "degree" if graph is not None else "none"
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES} or an order array, got {policy!r}")
        if policy in ("degree", "presample") and graph is None:
            raise ValueError(f"policy={policy!r} needs graph= (a CSRGraph with one node per row of x)")
        if presample is not None and policy != "presample":
            raise ValueError(f"presample= options are only used with policy='presample', got policy={policy!r}")
    else:
        order = _as_node_ids("policy (an order array)", policy, num_rows)
        if len(np.unique(order)) != len(order):
            raise ValueError("policy (an order array) must not repeat ids")
        return "order", lambda: (order, {"policy": "order"})
    if policy == "none":
        return "none", lambda: (np.empty(0, dtype=np.int64), {"policy": "none"})
    if policy == "degree":
        return "degree", lambda: (degree_order(graph), {"policy": "degree"})
    options = dict(presample or {})
    unknown = set(options) - _PRESAMPLE_KEYS
    if unknown:
        raise ValueError(f"unknown presample option(s) {sorted(unknown)}; known: {sorted(_PRESAMPLE_KEYS)}")

    def compute():
        counts = presample_counts(graph, **options)
        return presample_order(graph, counts), {"policy": "presample", "counts": counts}

    return "presample", compute


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _as_node_ids(name: str, values, num_nodes: int) -> np.ndarray:
    array = np.asarray(_to_host(values))
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer node ids, got dtype {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    bad = (array < 0) | (array >= num_nodes)
    if bad.any():
        position = int(np.argmax(bad))
        raise ValueError(f"{name}[{position}] = {array[position]} is out of range [0, {num_nodes})")
    return array.astype(np.int64, copy=False)


def _to_host(array):
    from ..device import to_numpy

    return to_numpy(array)

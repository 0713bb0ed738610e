"""Cache policies: which rows go to the device cache first.

A policy yields an *order*: distinct row ids, hottest first; the cache takes the first rows of it
that fit the byte budget.

- ``"degree"`` (PaGraph, torch-quiver): rows by descending in-degree (``graph.degree()``), ties by
  ascending id.
- ``"presample"`` (GNNLab's PreSC): run the sampler over a few epochs' worth of batches and count
  how often each node appears in the sampled ``n_id``. A few batches give noisy counts, so each
  node's rate is shrunk toward the rate of nodes of similar degree (empirical Bayes, by how much
  the counts vary beyond sampling noise), and the batches are split in two halves that score each
  other: when the presampled order predicts the other half worse than the degree order at the
  store's budget, the degree order is used (``policy_info["order_from"]`` says which). It reports
  the hit rate the cache would have had on the presampled batches.
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

from ..device import to_numpy
from ..protocols import Sampler
from ..validation import check_fanouts, check_ids_in_range, check_int, int_array

__all__ = [
    "POLICIES",
    "degree_order",
    "presample_counts",
    "presample_scores",
    "presample_order",
    "presample_policy",
    "presample_halves",
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
    sampler : Sampler, optional
        Anything with ``sample(seeds, key=None) -> SampleOutput`` (:class:`gglspeedup.protocols.Sampler`).
        Default: ``gglspeedup.NeighborSampler(graph, fanouts, seed=seed)`` on the CPU.

    Returns
    -------
    counts : int64, shape (num_nodes,)
    """
    num_nodes = graph.num_nodes
    if seeds is None:
        seeds = np.arange(num_nodes, dtype=np.int64)
    else:
        seeds = _as_node_ids("presample['seeds']", seeds, num_nodes)
    batch_size = check_int("presample['batch_size']", batch_size, minimum=1)
    num_batches = _default_batches(len(seeds), batch_size) if num_batches is None else num_batches
    num_batches = check_int("presample['num_batches']", num_batches, minimum=1)
    if len(seeds) == 0:
        raise ValueError("presample['seeds'] must not be empty")
    _check_sampler(sampler)
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
        # a user's sampler: ids out of range failed inside bincount, float ids were truncated
        n_id = _as_node_ids("presample['sampler'].sample(seeds)'s n_id", to_numpy(sampler.sample(batch)[0]), num_nodes)
        counts += np.bincount(n_id, minlength=num_nodes)
    return counts


def _default_batches(num_seeds: int, batch_size: int) -> int:
    return min(64, max(1, -(-num_seeds // batch_size)))  # one epoch, at most 64 batches


def _degree_buckets(degree: np.ndarray) -> np.ndarray:
    """Bucket per node, ordered by degree: exact below 64, then 8 buckets per doubling."""
    wide = 64 + np.floor(8 * np.log2(np.maximum(degree, 64) / 64.0))
    return np.unique(np.where(degree < 64, degree, wide), return_inverse=True)[1].reshape(-1)


def _isotonic(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The non-decreasing weighted least-squares fit of ``values`` (pool adjacent violators)."""
    blocks = []  # [mean, weight, length]
    for value, weight in zip(values.tolist(), weights.tolist()):
        blocks.append([value, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean2, weight2, length2 = blocks.pop()
            mean1, weight1, length1 = blocks.pop()
            total = weight1 + weight2
            blocks.append([(mean1 * weight1 + mean2 * weight2) / total, total, length1 + length2])
    return np.repeat([b[0] for b in blocks], [b[2] for b in blocks])


def presample_scores(graph, counts: np.ndarray, num_batches: int) -> np.ndarray:
    """Each node's estimated share of batches that touch it: float64, shape (num_nodes,).

    ``counts / num_batches`` is shrunk toward a prior that rises with degree (the isotonic fit of
    the mean rate per degree bucket). The weight on a node's own rate is ``tau2 / (tau2 + s2)``,
    where ``s2`` is the sampling variance of a rate over ``num_batches`` batches and ``tau2`` the
    variance the bucket's rates show beyond it; a bucket whose spread is within sampling noise
    (3 standard errors) keeps the prior, so presampling never reorders nodes on noise alone.
    """
    rate = np.asarray(counts, dtype=np.float64) / num_batches
    bucket = _degree_buckets(graph.degree())
    size = np.bincount(bucket).astype(np.float64)
    mean = np.bincount(bucket, weights=rate) / size
    spread = np.maximum(np.bincount(bucket, weights=rate * rate) / size - mean * mean, 0.0)
    noise = mean * (1.0 - mean) / num_batches
    excess = spread - noise
    significant = (noise > 0) & (spread > noise * (1.0 + 3.0 * np.sqrt(2.0 / np.maximum(size - 1.0, 1.0))))
    weight = np.where(significant, excess / np.where(significant, spread, 1.0), 0.0)[bucket]
    prior = _isotonic(mean, size)[bucket]
    return weight * rate + (1.0 - weight) * prior


def presample_order(graph, counts: np.ndarray, num_batches: int) -> np.ndarray:
    """Row ids by descending :func:`presample_scores`, ties by descending degree, then ascending id."""
    ids = np.arange(graph.num_nodes, dtype=np.int64)
    scores = presample_scores(graph, counts, num_batches)
    return np.lexsort((ids, -graph.degree(), -scores)).astype(np.int64, copy=False)


def presample_policy(graph, budget: int, halves) -> tuple[np.ndarray, dict]:
    """The presample order for a cache of ``budget`` rows, cross-checked against degree.

    ``halves`` is ``[(counts_a, batches_a), (counts_b, batches_b)]`` from two independent
    presample runs. Each half's order is scored on the other half; the order from both halves'
    counts is used unless the degree order scored higher, in which case the degree order is.

    Returns
    -------
    order : int64, shape (num_nodes,)
    info : dict with ``order_from`` ("presample" or "degree"), ``cv_hit_rate`` (both scores) and
        ``counts`` (both halves summed).
    """
    (counts_a, batches_a), (counts_b, batches_b) = halves
    degree = degree_order(graph)
    order_a = presample_order(graph, counts_a, batches_a)
    order_b = presample_order(graph, counts_b, batches_b)

    def cross_score(order_for_a, order_for_b):
        """Mean hit rate of each half's order on the other half's counts."""
        on_b = expected_hit_rate(counts_b, order_for_a[:budget])
        return (on_b + expected_hit_rate(counts_a, order_for_b[:budget])) / 2

    scores = {"presample": cross_score(order_a, order_b), "degree": cross_score(degree, degree)}
    counts = counts_a + counts_b
    use_presample = scores["presample"] >= scores["degree"]
    order = presample_order(graph, counts, batches_a + batches_b) if use_presample else degree
    info = {"order_from": "presample" if use_presample else "degree", "cv_hit_rate": scores, "counts": counts}
    return order, info


def presample_halves(graph, fanouts=(15, 10, 5), batch_size=1024, num_batches=None, seeds=None, seed=0, sampler=None):
    """Two independent :func:`presample_counts` runs splitting ``num_batches`` (for :func:`presample_policy`)."""
    if num_batches is None:
        num_seeds = graph.num_nodes if seeds is None else len(np.asarray(to_numpy(seeds)).reshape(-1))
        num_batches = _default_batches(num_seeds, check_int("presample['batch_size']", batch_size, minimum=1))
    num_batches = max(2, check_int("presample['num_batches']", num_batches, minimum=1))
    halves = []
    for part, batches in enumerate((num_batches // 2, num_batches - num_batches // 2)):
        counts = presample_counts(graph, fanouts, batch_size, batches, seeds, seed + part, sampler)
        halves.append((counts, batches))
    return halves


def expected_hit_rate(counts: np.ndarray, cached_ids: np.ndarray) -> float:
    """Share of the counted lookups that ``cached_ids`` would have served (0.0 when nothing counted)."""
    total = int(np.sum(counts))
    return float(np.sum(counts[cached_ids]) / total) if total else 0.0


def checked_policy(policy, graph, presample, expected: str, graph_kind: str, names=POLICIES):
    """``policy``, ``None`` read as ``"degree"`` with a graph and ``"none"`` without; a name is
    checked here: one of ``names`` (else the error says it must be ``expected``), given
    ``graph`` (``graph_kind``) unless ``"none"``, and ``presample`` options only for
    ``"presample"``."""
    if presample is not None and not isinstance(presample, dict):
        raise TypeError(
            f"presample must be a dict of options (e.g. {{'fanouts': [10, 5]}}), got {type(presample).__name__}"
        )
    if policy is None:
        policy = "degree" if graph is not None else "none"
    if isinstance(policy, str):
        if policy not in names:
            raise ValueError(f"policy must be {expected}, got {policy!r}")
        if policy != "none" and graph is None:
            raise ValueError(f"policy={policy!r} needs graph= ({graph_kind})")
        if presample is not None and policy != "presample":
            raise ValueError(f"presample= options are only used with policy='presample', got policy={policy!r}")
    return policy


def resolve_policy(policy: Any, graph, num_rows: int, presample: dict | None):
    """Check ``policy`` and return ``(name, compute)``: ``compute(budget)`` yields ``(order, info)``
    for a cache of ``budget`` rows.

    Checks run now (unknown names, a missing or mismatched graph, a bad order array); the order
    itself is computed only when the store has a cache to fill. ``info`` is a dict for
    ``store.policy_info``.
    """
    if graph is not None:
        from ..graph import as_csr_graph

        graph = as_csr_graph(graph)
        if graph.num_nodes != num_rows:
            raise ValueError(f"graph has {graph.num_nodes} nodes but x has {num_rows} rows; they must match")
    expected, graph_kind = f"one of {POLICIES} or an order array", "a CSRGraph with one node per row of x"
    policy = checked_policy(policy, graph, presample, expected, graph_kind)
    if not isinstance(policy, str):
        order = _as_node_ids("policy (an order array)", policy, num_rows)
        if len(np.unique(order)) != len(order):
            raise ValueError("policy (an order array) must not repeat ids")
        return "order", lambda budget: (order, {"policy": "order"})
    if policy == "none":
        return "none", lambda budget: (np.empty(0, dtype=np.int64), {"policy": "none"})
    if policy == "degree":
        return "degree", lambda budget: (degree_order(graph), {"policy": "degree"})
    options = dict(presample or {})
    check_presample_options(options, graph.num_nodes)

    def compute(budget):
        order, info = presample_policy(graph, budget, presample_halves(graph, **options))
        return order, {"policy": "presample", **info}

    return "presample", compute


def check_presample_options(options: dict, num_nodes: int) -> None:
    """Check an untyped store's ``presample=`` options (a dict) when the store is built: no
    unknown option, the scalars (:func:`check_presample_scalars`), ``seeds`` non-empty ids in
    ``[0, num_nodes)``, ``sampler`` a :class:`~gglspeedup.protocols.Sampler`."""
    unknown = set(options) - _PRESAMPLE_KEYS
    if unknown:
        raise ValueError(f"unknown presample option(s) {sorted(unknown)}; known: {sorted(_PRESAMPLE_KEYS)}")
    check_presample_scalars(options)
    if options.get("seeds") is not None:
        seeds = _as_node_ids("presample['seeds']", options["seeds"], num_nodes)
        if len(seeds) == 0:
            raise ValueError("presample['seeds'] must not be empty")
    _check_sampler(options.get("sampler"))


def check_presample_scalars(options: dict) -> None:
    """Check the ``presample=`` options every store reads the same way (``fanouts``,
    ``batch_size``, ``num_batches``, ``seed``) when the store is built, whether or not it has a
    cache to fill: a CPU store over a table in memory never runs the presample, and a bad option
    must not wait for the first store that does (a GPU's)."""
    fanouts = options.get("fanouts")
    if isinstance(fanouts, dict):  # typed stores: per edge type
        for edge_type, values in fanouts.items():
            check_fanouts(values, name=f"presample['fanouts'][{edge_type!r}]")
    elif "fanouts" in options:
        check_fanouts(fanouts, name="presample['fanouts']")
    if "batch_size" in options:
        check_int("presample['batch_size']", options["batch_size"], minimum=1)
    if options.get("num_batches") is not None:
        check_int("presample['num_batches']", options["num_batches"], minimum=1)
    if "seed" in options:
        check_int("presample['seed']", options["seed"], minimum=0)


def _check_sampler(sampler) -> None:
    if sampler is not None and not isinstance(sampler, Sampler):
        raise TypeError(
            f"presample['sampler'] must have a sample(seeds, key=None) method (gglspeedup.protocols.Sampler), "
            f"got {type(sampler).__name__}"
        )


def _as_node_ids(name: str, values, num_nodes: int) -> np.ndarray:
    ids = int_array(name, values, expected="must hold integer node ids")
    return check_ids_in_range(name, ids, num_nodes, error=ValueError)

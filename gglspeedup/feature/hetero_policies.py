"""Typed cache policies: one global ranking of ``(node type, id)`` rows, one byte budget.

A typed policy yields a :class:`Ranking`, every cacheable row of every node type with features,
hottest first; :func:`split_budget` walks it and takes each row whose bytes still fit, so the
budget is shared *globally* and each type ends up caching a prefix of its own order.

- ``"degree"`` (the default with a graph): a node's hotness is how often it can be drawn as a
  neighbour, its out-degree summed over every relation whose source type is its type
  (``graph.out_degree(t)``). Rows are ranked by **degree per byte** (``out_degree / row_bytes``):
  the budget buys the most expected hits when a 512-byte row must be four times as hot as a
  128-byte row to earn its place (the greedy knapsack rule, optimal but for the rows that do not
  fit whole). Ties: type order, then ascending id.
- ``"presample"``: count how often each node appears in ``n_id`` over typed batches of a typed
  sampler (``sample({type: seeds}, key=k) -> HeteroSampleOutput``), shrink each type's counts
  toward its degree prior as the homogeneous policy does
  (:func:`~gglspeedup.feature.policies.presample_scores`), rank by score per byte, and keep the
  degree ranking instead when it predicts held-out batches better at this budget.
- ``{node_type: order}``: the caller's order per type; types are merged by **equal bytes** (row
  ``k`` of type ``t`` is ranked at ``(k + 1) * row_bytes[t]`` bytes), so each listed type gets the
  same share of the budget until its order runs out, and leftovers go to the others. Types left
  out cache nothing.
- a list of ``(node_type, id)`` pairs: the caller's own global ranking, taken as is.
- ``"none"``: nothing is cached.

>>> r = Ranking(("a", "b"), np.array([1, 0, 1, 0]), np.array([0, 0, 1, 1]))
>>> cached = split_budget(r, {"a": 8, "b": 2}, budget=12)  # b0 (2), a0 (8), b1 (2): a1 does not fit
>>> {t: ids.tolist() for t, ids in cached.items()}
{'a': [0], 'b': [0, 1]}
"""

from __future__ import annotations

import types as _types
from typing import Any, NamedTuple

import numpy as np

from ..device import to_numpy
from ..validation import check_int, int_array
from .policies import (
    _PRESAMPLE_KEYS,
    _as_node_ids,
    _default_batches,
    check_presample_scalars,
    checked_policy,
    presample_scores,
)

__all__ = [
    "HETERO_POLICIES",
    "Ranking",
    "degree_ranking",
    "merge_orders",
    "pair_ranking",
    "split_budget",
    "presample_visits",
    "typed_hit_rate",
    "plan_cache",
    "resolve_hetero_policy",
]

HETERO_POLICIES = ("degree", "presample", "none")
_HETERO_PRESAMPLE_KEYS = _PRESAMPLE_KEYS | {"counts"}


class Ranking(NamedTuple):
    """Rows hottest first: row ``i`` is ``ids[i]`` of node type ``types[type_index[i]]``.

    types : tuple of str; type_index, ids : int64 arrays, shape (num_ranked,).
    """

    types: tuple
    type_index: np.ndarray
    ids: np.ndarray

    def only(self, keep: np.ndarray) -> Ranking:
        """The ranking restricted to the positions where the bool array ``keep`` is true."""
        return Ranking(self.types, self.type_index[keep], self.ids[keep])


def _rank(types: tuple, scores: list, tiebreak: list | None = None) -> Ranking:
    """Every row of every type by descending ``scores`` (then ``tiebreak``, type order, id)."""
    type_index = np.concatenate([np.full(len(s), i, np.int64) for i, s in enumerate(scores)] or [np.empty(0, np.int64)])
    ids = np.concatenate([np.arange(len(s), dtype=np.int64) for s in scores] or [np.empty(0, np.int64)])
    keys = [ids, type_index]
    if tiebreak is not None:
        keys.append(-np.concatenate(tiebreak))
    keys.append(-np.concatenate(scores) if scores else np.empty(0))
    order = np.lexsort(keys)
    return Ranking(types, type_index[order], ids[order])


def degree_ranking(graph, row_bytes: dict) -> Ranking:
    """Rows of the types in ``row_bytes`` by descending ``graph.out_degree(t) / row_bytes[t]``."""
    types = tuple(row_bytes)
    return _rank(types, [graph.out_degree(t) / float(row_bytes[t]) for t in types])


def merge_orders(orders: dict, row_bytes: dict) -> Ranking:
    """Per-type orders (distinct ids, hottest first) merged by equal bytes per type."""
    types = tuple(row_bytes)
    cost, type_index, ids = [], [], []
    for i, t in enumerate(types):
        order = orders.get(t, np.empty(0, np.int64))
        cost.append(np.arange(1, len(order) + 1, dtype=np.float64) * row_bytes[t])
        type_index.append(np.full(len(order), i, np.int64))
        ids.append(np.asarray(order, np.int64))
    type_index = np.concatenate(type_index)
    position = np.lexsort((type_index, np.concatenate(cost)))
    return Ranking(types, type_index[position], np.concatenate(ids)[position])


def pair_ranking(pairs, num_rows: dict) -> Ranking:
    """A list of ``(node_type, id)`` pairs as a :class:`Ranking` over ``num_rows``' types."""
    types = tuple(num_rows)
    index = {t: i for i, t in enumerate(types)}
    type_index, ids = np.empty(len(pairs), np.int64), np.empty(len(pairs), np.int64)
    for position, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and isinstance(pair[0], str)):
            raise TypeError(f"policy (a global ranking) must hold (node_type, id) pairs: policy[{position}] = {pair!r}")
        if pair[0] not in index:
            raise ValueError(
                f"policy[{position}] names node type {pair[0]!r}, which has no features here; "
                f"types with features: {list(types)}"
            )
        type_index[position] = index[pair[0]]
        ids[position] = check_int(f"policy[{position}][1]", pair[1], minimum=0, below=num_rows[pair[0]])
    key = ids * len(types) + type_index
    if len(np.unique(key)) != len(key):
        raise ValueError("policy (a global ranking) must not repeat a (node_type, id) pair")
    return Ranking(types, type_index, ids)


def split_budget(ranking: Ranking, row_bytes: dict, budget: int) -> dict:
    """The rows ``budget`` bytes cache: walk ``ranking`` and take every row whose bytes still fit.

    Returns
    -------
    dict node type -> int64 array of cached ids, hottest first (every type of the ranking; a
    type whose first row did not fit gets an empty array). Each is a prefix of that type's order
    in the ranking: once one row of a type does not fit, none of its later rows can.
    """
    cost = np.array([row_bytes[t] for t in ranking.types], np.int64)[ranking.type_index]
    taken = np.zeros(len(cost), bool)
    active = np.ones(len(cost), bool)
    left = int(budget)
    while True:
        positions = np.flatnonzero(active)
        if not len(positions):
            break
        spent = np.cumsum(cost[positions])
        stop = int(np.searchsorted(spent, left, side="right"))  # rows [0, stop) fit
        taken[positions[:stop]] = True
        if stop == len(positions):
            break
        left -= int(spent[stop - 1]) if stop else 0
        active[positions[:stop]] = False
        blocked = ranking.type_index[positions[stop]]
        active[positions[stop:][ranking.type_index[positions[stop:]] == blocked]] = False
    return {t: ranking.ids[taken & (ranking.type_index == i)] for i, t in enumerate(ranking.types)}


def _sample_n_id(output) -> dict:
    n_id = getattr(output, "n_id", output[0] if isinstance(output, tuple) else output)
    if not isinstance(n_id, dict):
        raise TypeError(f"presample['sampler'].sample must return n_id as a dict node type -> ids, got {type(n_id)}")
    return n_id


def presample_visits(
    graph, fanouts=(15, 10, 5), batch_size=1024, num_batches=None, seeds=None, seed=0, sampler=None, first_key=0
) -> dict:
    """How often each node of each type appears in ``n_id`` over ``num_batches`` typed batches.

    Every batch holds ``batch_size`` seeds drawn, without replacement within an epoch, from the
    pool of every ``(type, id)`` of ``seeds`` (dict node type -> ids; default every node of the
    graph), grouped by type. Batch ``b`` is sampled with ``key=first_key + b``.

    Returns
    -------
    dict node type -> int64 counts, shape (graph.num_nodes[type],), for every node type.
    """
    types = tuple(graph.node_types)
    if seeds is None:
        seeds = {t: np.arange(graph.num_nodes[t], dtype=np.int64) for t in types}
    if not isinstance(seeds, dict):
        raise TypeError(f"presample['seeds'] must be a dict node type -> ids, got {type(seeds).__name__}")
    pool_type, pool_id = [], []
    for t, ids in seeds.items():
        if t not in graph.num_nodes:
            raise ValueError(f"presample['seeds'] names node type {t!r}; the graph's node types: {list(types)}")
        ids = _as_node_ids(f"presample['seeds'][{t!r}]", ids, graph.num_nodes[t])
        pool_type.append(np.full(len(ids), types.index(t), np.int64))
        pool_id.append(ids)
    pool = np.stack((np.concatenate(pool_type or [[]]), np.concatenate(pool_id or [[]]))).astype(np.int64)
    if pool.shape[1] == 0:
        raise ValueError("presample['seeds'] must not be empty")
    batch_size = check_int("presample['batch_size']", batch_size, minimum=1)
    num_batches = _default_batches(pool.shape[1], batch_size) if num_batches is None else num_batches
    num_batches = check_int("presample['num_batches']", num_batches, minimum=1)
    if sampler is None:
        from ..sampling import HeteroNeighborSampler

        sampler = HeteroNeighborSampler(graph, list(fanouts), seed=seed, device="cpu")
    elif not callable(getattr(sampler, "sample", None)):
        raise TypeError(f"presample['sampler'] must have sample(seeds, key=None), got {type(sampler).__name__}")
    rng = np.random.default_rng(seed)
    counts = {t: np.zeros(graph.num_nodes[t], np.int64) for t in types}
    permutation, position = pool[:, rng.permutation(pool.shape[1])], 0
    for number in range(num_batches):
        if position >= permutation.shape[1]:
            permutation, position = pool[:, rng.permutation(pool.shape[1])], 0
        chunk = permutation[:, position : position + batch_size]
        position += batch_size
        batch = {types[i]: chunk[1][chunk[0] == i] for i in np.unique(chunk[0]).tolist()}
        for t, n_id in _sample_n_id(sampler.sample(batch, key=first_key + number)).items():
            name = f"presample['sampler'].sample(seeds)'s n_id[{t!r}]"
            if t not in counts:
                raise ValueError(f"{name} names a node type the graph lacks; its node types: {list(types)}")
            ids = _as_node_ids(name, to_numpy(n_id), graph.num_nodes[t])  # a user's sampler: checked
            counts[t] += np.bincount(ids, minlength=graph.num_nodes[t])
    return counts


def typed_hit_rate(counts: dict, cached: dict) -> float:
    """Share of the counted lookups (dict node type -> counts) that ``cached`` (dict node type ->
    ids) would have served; 0.0 when nothing was counted."""
    total = sum(int(np.sum(c)) for c in counts.values())
    hits = sum(int(np.sum(counts[t][ids])) for t, ids in cached.items())
    return hits / total if total else 0.0


def _presample_ranking(graph, row_bytes: dict, counts: dict, num_batches: int | None) -> Ranking:
    types = tuple(row_bytes)
    scores, degree = [], []
    for t in types:
        out_degree = graph.out_degree(t)
        rate = np.asarray(counts[t], np.float64)
        if num_batches and len(rate):  # shrink toward the degree prior (the homogeneous policy's rule)
            rate = presample_scores(_types.SimpleNamespace(degree=lambda d=out_degree: d), counts[t], num_batches)
        scores.append(rate / row_bytes[t])
        degree.append(out_degree / float(row_bytes[t]))
    return _rank(types, scores, degree)


def _presample(graph, row_bytes: dict, budget: int, options: dict) -> tuple[Ranking, dict]:
    given = options.pop("counts", None)
    if given is not None:
        counts = given() if callable(given) else given
        if not isinstance(counts, dict):
            raise TypeError(f"presample['counts'] must be a dict node type -> visit counts, got {type(counts)}")
        unknown = [t for t in counts if t not in graph.num_nodes]
        if unknown:  # a misspelt type would leave its rows uncounted, silently
            raise ValueError(
                f"presample['counts'] names node type {unknown[0]!r}; the graph's node types: {list(graph.num_nodes)}"
            )
        checked = {}
        for t in row_bytes:
            name = f"presample['counts'][{t!r}]"
            c = int_array(name, counts[t], expected="must hold visit counts (integers)") if t in counts else None
            c = np.zeros(graph.num_nodes[t], np.int64) if c is None else c.astype(np.int64, copy=False)
            if c.shape != (graph.num_nodes[t],):
                raise ValueError(f"{name} must have shape ({graph.num_nodes[t]},), got {c.shape}")
            if c.size and int(c.min()) < 0:
                raise ValueError(f"{name} must not be negative, got {int(c.min())}")
            checked[t] = c
        counts = checked
        return _presample_ranking(graph, row_bytes, counts, None), {"order_from": "counts", "counts": counts}
    total = options.pop("num_batches", None)
    if total is None:
        seeds = options.get("seeds")
        size = (
            sum(len(to_numpy(s)) for s in seeds.values()) if isinstance(seeds, dict) else sum(graph.num_nodes.values())
        )
        total = _default_batches(size, check_int("presample['batch_size']", options.get("batch_size", 1024), minimum=1))
    total = max(2, check_int("presample['num_batches']", total, minimum=1))
    halves = []
    seed = options.pop("seed", 0)
    for part, batches in enumerate((total // 2, total - total // 2)):
        first_key = part * (total // 2)
        counts = presample_visits(graph, num_batches=batches, seed=seed + part, first_key=first_key, **options)
        halves.append((counts, batches))
    (counts_a, batches_a), (counts_b, batches_b) = halves
    degree = split_budget(degree_ranking(graph, row_bytes), row_bytes, budget)
    cached_a = split_budget(_presample_ranking(graph, row_bytes, counts_a, batches_a), row_bytes, budget)
    cached_b = split_budget(_presample_ranking(graph, row_bytes, counts_b, batches_b), row_bytes, budget)
    scores = {
        "presample": (typed_hit_rate(counts_b, cached_a) + typed_hit_rate(counts_a, cached_b)) / 2,
        "degree": (typed_hit_rate(counts_b, degree) + typed_hit_rate(counts_a, degree)) / 2,
    }
    counts = {t: counts_a[t] + counts_b[t] for t in counts_a}
    use_presample = scores["presample"] >= scores["degree"]
    ranking = _presample_ranking(graph, row_bytes, counts, total) if use_presample else degree_ranking(graph, row_bytes)
    info = {"order_from": "presample" if use_presample else "degree", "cv_hit_rate": scores, "counts": counts}
    return ranking, info


def resolve_hetero_policy(policy: Any, graph, num_rows: dict, row_bytes: dict, presample: dict | None = None):
    """Check a typed ``policy`` and return ``(name, compute)``; ``compute(budget)`` yields
    ``(ranking, info)`` for a cache of ``budget`` bytes (computed only when there is one to fill).

    ``num_rows`` / ``row_bytes``: node type -> rows / bytes per row, for the types with features
    (their order is the ranking's type order). ``info`` may hold ``counts`` (dict of presample
    visit counts).
    """
    for t, rows in num_rows.items() if graph is not None else ():
        if graph.num_nodes.get(t) != rows:
            count = graph.num_nodes.get(t, "absent")
            raise ValueError(f"node type {t!r} has {rows} rows but graph.num_nodes[{t!r}] is {count}; they must match")
    expected = f"one of {HETERO_POLICIES}, a dict of orders or a ranking"
    policy = checked_policy(
        policy, graph, presample, expected, "a HeteroGraph with one node per row of each table", HETERO_POLICIES
    )
    if isinstance(policy, dict):
        orders = {}
        for t, order in policy.items():
            if t not in num_rows:
                raise ValueError(
                    f"policy names node type {t!r}, which has no features here; types with features: {list(num_rows)}"
                )
            orders[t] = _as_node_ids(f"policy[{t!r}]", order, num_rows[t])
            if len(np.unique(orders[t])) != len(orders[t]):
                raise ValueError(f"policy[{t!r}] (an order array) must not repeat ids")
        return "order", lambda budget: (merge_orders(orders, row_bytes), {})
    if isinstance(policy, (list, tuple)):
        ranking = pair_ranking(policy, num_rows)
        return "ranking", lambda budget: (ranking, {})
    if not isinstance(policy, str):
        raise TypeError(
            "policy must be 'degree', 'presample', 'none', a dict node type -> order array or a list of "
            f"(node_type, id) pairs, got {type(policy).__name__}"
        )
    if policy == "none":
        return "none", lambda budget: (merge_orders({}, row_bytes), {})
    if policy == "degree":
        return "degree", lambda budget: (degree_ranking(graph, row_bytes), {})
    options = dict(presample or {})
    unknown = set(options) - _HETERO_PRESAMPLE_KEYS
    if unknown:
        raise ValueError(f"unknown presample option(s) {sorted(unknown)}; known: {sorted(_HETERO_PRESAMPLE_KEYS)}")
    check_presample_scalars(options)
    _check_typed_seeds(graph, options.get("seeds"))
    sampler = options.get("sampler")
    if sampler is not None and not callable(getattr(sampler, "sample", None)):
        raise TypeError(f"presample['sampler'] must have sample(seeds, key=None), got {type(sampler).__name__}")
    return "presample", lambda budget: _presample(graph, row_bytes, budget, dict(options))


def _check_typed_seeds(graph, seeds) -> None:
    """``presample['seeds']``: ``None`` or a dict node type -> ids in range, not all empty."""
    if seeds is None:
        return
    if not isinstance(seeds, dict):
        raise TypeError(f"presample['seeds'] must be a dict node type -> ids, got {type(seeds).__name__}")
    total = 0
    for t, ids in seeds.items():
        if t not in graph.num_nodes:
            raise ValueError(
                f"presample['seeds'] names node type {t!r}; the graph's node types: {list(graph.num_nodes)}"
            )
        total += len(_as_node_ids(f"presample['seeds'][{t!r}]", ids, graph.num_nodes[t]))
    if total == 0:
        raise ValueError("presample['seeds'] must not be empty")


def plan_cache(policy, graph, num_rows: dict, row_bytes: dict, budget: int, *, skip: dict | None = None) -> dict:
    """Node type -> cached ids (hottest first) for ``budget`` bytes: ``policy`` checked and ranked
    (as :func:`resolve_hetero_policy`), rows where the bool array ``skip[type]`` is true left out
    (e.g. rows a rank owns anyway), then :func:`split_budget`. For layers that plan once and
    hand the result to :class:`~gglspeedup.feature.HeteroFeatureStore` s as ``{type: ids}``."""
    name, compute = resolve_hetero_policy(policy, graph, num_rows, row_bytes)
    if name == "none" or not budget:
        return {t: np.empty(0, np.int64) for t in num_rows}
    ranking = compute(budget)[0]
    if skip:
        skipped = np.zeros(len(ranking.ids), bool)
        for i, t in enumerate(ranking.types):
            if t in skip:
                at = ranking.type_index == i
                skipped[at] = np.asarray(skip[t], bool)[ranking.ids[at]]
        ranking = ranking.only(~skipped)
    return split_budget(ranking, row_bytes, budget)

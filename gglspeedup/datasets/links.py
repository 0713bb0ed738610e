"""Edge splits for link prediction: message graph, training pairs, held-out pairs with negatives.

:func:`split_edges` is the split of the GAE paper (Kipf & Welling, 2016) and PyG's
``RandomLinkSplit``: a share of the edges is held out for validation and test, the model's
message graph keeps only the rest (so held-out edges never leak into a neighbourhood), and each
held-out set gets as many negative pairs (node pairs that are not edges) as it has positives.

>>> from gglspeedup import datasets
>>> graph, *_ = datasets.load("cora")
>>> split = datasets.split_edges(graph, val=0.05, test=0.10, seed=0)
>>> split.train.shape, split.val.shape, split.test.shape, split.graph.num_edges
((2, 4486), (2, 528), (2, 1056), 8972)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..graph import CSRGraph, as_csr_graph
from ..validation import check_bool, check_int

__all__ = ["EdgeSplit", "split_edges"]


class EdgeSplit(NamedTuple):
    """The result of :func:`split_edges`.

    graph : CSRGraph
        The message graph: every edge of the input whose pair is a training pair (both directions
        of it when ``undirected``; parallel edges, weights and ``edge_ids`` kept), self loops too;
        the input's ``node_order`` too (its ids stay the renumbered ones).
    train : int64 (2, T)
        Training pairs (source, target), one per distinct pair (undirected: ``source < target``).
    val, test : int64 (2, 2 * V)
        Held-out pairs: ``V`` positives, then ``V`` negatives.
    val_labels, test_labels : float32 (2 * V,)
        1 for the positives, 0 for the negatives.
    """

    graph: CSRGraph
    train: np.ndarray
    val: np.ndarray
    val_labels: np.ndarray
    test: np.ndarray
    test_labels: np.ndarray


def split_edges(graph, val: float = 0.05, test: float = 0.10, *, seed: int = 0, undirected: bool = True) -> EdgeSplit:
    """Hold out ``val`` and ``test`` shares of ``graph``'s distinct edges, with as many negatives.

    Parameters
    ----------
    graph : CSRGraph
        Row ``v`` lists the sources of edges into ``v`` (as everywhere in gglspeedup).
    val, test : float
        Shares of the distinct pairs held out (``0 <= val, test`` and ``val + test < 1``).
    seed : int
        The split and the negatives depend only on ``seed`` (and the graph).
    undirected : bool
        Treat ``u -> v`` and ``v -> u`` as one pair (graphs stored with both directions, like the
        bundled Planetoid graphs): a held-out pair leaves the message graph in both directions,
        and negatives are pairs with no edge either way.

    Self loops are never held out. Negatives are uniform over ordered pairs ``u != v`` that are
    not edges (nor reversed edges when ``undirected``), distinct from each other.

    Raises
    ------
    TypeError
        a non-float share, a non-int seed, a non-bool ``undirected``.
    ValueError
        shares out of range, a bipartite graph, or a graph too dense to find enough negatives.
    """
    graph = as_csr_graph(graph)
    if graph.num_src_nodes != graph.num_nodes:  # pairs and negatives are drawn over one node set
        raise ValueError(
            f"graph is bipartite (num_src_nodes = {graph.num_src_nodes}, num_nodes = {graph.num_nodes}): "
            "split_edges splits the edges of a graph whose sources and targets are one set of nodes"
        )
    seed = check_split(val, test, seed)
    undirected = check_bool("undirected", undirected)
    host = graph.to("cpu")
    n = host.num_nodes
    target = np.repeat(np.arange(n, dtype=np.int64), np.diff(np.asarray(host.indptr)))
    source = np.asarray(host.indices, dtype=np.int64)
    low, high = (np.minimum(source, target), np.maximum(source, target)) if undirected else (source, target)
    codes = low * n + high  # one code per (distinct, unordered when undirected) pair
    pairs = np.unique(codes[source != target])
    rng = np.random.default_rng([seed, 0x11])
    order = rng.permutation(len(pairs))
    num_val, num_test = (int(np.rint(share * len(pairs))) for share in (val, test))
    held_val, held_test = pairs[order[:num_val]], pairs[order[num_val : num_val + num_test]]
    train = np.sort(pairs[order[num_val + num_test :]])
    held = np.isin(codes, np.concatenate([held_val, held_test])) & (source != target)
    keep = ~held
    counts = np.bincount(target[keep], minlength=n)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    edge_ids = np.flatnonzero(keep) if host.edge_ids is None else np.asarray(host.edge_ids)[keep]
    weights = None if host.weights is None else np.asarray(host.weights)[keep]
    message = CSRGraph(  # a renumbered graph's order kept: without it original_ids would be the identity
        indptr, source[keep], num_nodes=n, edge_ids=edge_ids, weights=weights, node_order=host.node_order
    )
    negatives = _negatives(rng, n, pairs, num_val + num_test, undirected)  # self loops are no candidates
    out_val, val_labels = _with_negatives(held_val, negatives[:num_val], n)
    out_test, test_labels = _with_negatives(held_test, negatives[num_val:], n)
    return EdgeSplit(message, _decode(train, n), out_val, val_labels, out_test, test_labels)


def _decode(codes: np.ndarray, n: int) -> np.ndarray:
    return np.stack([codes // n, codes % n]).astype(np.int64)


def _with_negatives(positives: np.ndarray, negatives: np.ndarray, n: int):
    pairs = _decode(np.concatenate([positives, negatives]), n)
    labels = np.concatenate([np.ones(len(positives), np.float32), np.zeros(len(negatives), np.float32)])
    return pairs, labels


def _negatives(rng, n: int, edge_codes: np.ndarray, count: int, undirected: bool) -> np.ndarray:
    """``count`` distinct codes of uniform ordered pairs ``u != v`` that are not in ``edge_codes``
    (compared unordered when ``undirected``), in the order drawn. ``edge_codes``: the graph's
    distinct pairs ``u != v`` (a self loop is no candidate, so it must not shrink the count of
    free pairs)."""
    if count == 0:
        return np.empty(0, np.int64)
    free = n * (n - 1) // (2 if undirected else 1) - len(edge_codes)
    if free < 2 * count:
        raise ValueError(f"the graph is too dense to draw {count} distinct non-edge pairs (about {free} exist)")
    found = np.empty(0, np.int64)
    while len(found) < count:
        u, v = rng.integers(0, n, size=(2, 2 * count), dtype=np.int64)
        u, v = u[u != v], v[u != v]
        key = np.minimum(u, v) * n + np.maximum(u, v) if undirected else u * n + v
        ok = ~np.isin(key, edge_codes)
        candidates = np.concatenate([found, (u * n + v)[ok]])
        keys = np.concatenate([_key(found, n, undirected), key[ok]])
        _, first = np.unique(keys, return_index=True)
        found = candidates[np.sort(first)]
    return found[:count]


def _key(codes: np.ndarray, n: int, undirected: bool) -> np.ndarray:
    if not undirected:
        return codes
    u, v = codes // n, codes % n
    return np.minimum(u, v) * n + np.maximum(u, v)


def check_split(val, test, seed) -> int:
    """Refuse held-out shares that are not floats in ``[0, 1)`` leaving edges to train on
    (``val + test < 1``); return ``seed`` checked (a non-negative int)."""
    for name, share in (("val", val), ("test", test)):
        if isinstance(share, bool) or not isinstance(share, (int, float, np.floating)):
            raise TypeError(f"{name} must be a share of the edges (a float), got {type(share).__name__}")
        if not 0 <= share < 1:
            raise ValueError(f"{name} must be in [0, 1), got {share}")
    if val + test >= 1:
        raise ValueError(f"val + test must leave edges to train on (< 1), got {val} + {test}")
    return check_int("seed", seed, minimum=0)

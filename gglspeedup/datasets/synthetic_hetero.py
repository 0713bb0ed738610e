"""A synthetic typed graph shaped like MLPerf's IGBH, with features, labels and a split.

IGBH (the Illinois Graph Benchmark, heterogeneous; its ``full`` size is the dataset of MLPerf
Training's R-GAT benchmark) is an academic graph: papers, their authors, the authors'
institutes and the papers' fields of study. :func:`synthetic_igbh` draws a graph with the same
node types and relations, the same number of nodes and edges *per paper* as IGBH-full, and
power-law degrees, at any size, in seconds: a stand-in for benchmarks that cannot download
IGBH's terabytes. Everything is deterministic for a given ``seed``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._csr_kernels import compact_rows, sort_unique_rows
from ..graph import CSRGraph
from ..heterograph import HeteroGraph
from ..validation import check_int
from .synthetic import _CHUNK, _powerlaw_endpoints_into, _relabel, random_split
from .synthetic import synthetic_labels as _synthetic_labels

__all__ = ["synthetic_igbh", "synthetic_hetero_features", "load_igbh_like", "IGBH_FULL_NODES", "IGBH_FULL_EDGES"]

# IGBH-full's published sizes (the IGB repository's ``num_nodes`` / ``num_edges`` tables).
IGBH_FULL_NODES = {"paper": 269_346_174, "author": 277_220_883, "institute": 26_918, "fos": 712_960}
IGBH_FULL_EDGES = {
    ("paper", "cites", "paper"): 3_996_442_004,
    ("paper", "written_by", "author"): 716_761_549,
    ("author", "affiliated_to", "institute"): 48_521_486,
    ("paper", "topic", "fos"): 1_050_280_600,
}
# The reverse relations that MLPerf's R-GAT adds (``cites`` stays one-way, as there).
_REVERSE = {"written_by": "writes", "affiliated_to": "rev_affiliated_to", "topic": "rev_topic"}


def synthetic_igbh(num_papers: int, seed: int = 0, *, exponent: float = 2.5) -> HeteroGraph:
    """A power-law typed graph shaped like IGBH-full, scaled to ``num_papers`` papers.

    Node types ``paper``, ``author``, ``institute``, ``fos`` (field of study), with as many nodes
    per paper as IGBH-full (1.03 authors, 1e-4 institutes, 2.6e-3 fields of study; at least one
    each), so per-node degrees, which is what sampling costs depend on, match the full dataset.
    Each base relation draws as many edges per paper as IGBH-full has (cites 14.8,
    written_by 2.66, affiliated_to 0.18, topic 3.90) Chung-Lu style: both endpoints with
    probability proportional to ``(rank + 1) ** (-1 / (exponent - 1))`` over a seeded random
    ranking of their type's nodes, independent per relation and side; repeated edges (and
    citation self loops) are then dropped, so a relation holds a little fewer edges than drawn
    (the hub-heavy ``topic`` about 3% fewer).

    Relations, in this order (row ``v`` of a relation lists the sources of the edges into ``v``):
    ``(paper, cites, paper)``, ``(paper, written_by, author)`` and its reverse ``(author,
    writes, paper)``, ``(author, affiliated_to, institute)`` and its reverse ``(institute,
    rev_affiliated_to, author)``, ``(paper, topic, fos)`` and its reverse ``(fos, rev_topic,
    paper)``. A reverse holds exactly the reversed edges of its relation.

    Parameters
    ----------
    num_papers : int
        Number of papers (>= 1).
    seed : int
        Seed of the NumPy PCG64 streams (one per relation); the same seed gives the same graph.
    exponent : float
        Power-law exponent of the degree distributions, > 2.

    Returns
    -------
    HeteroGraph
        int64 CSRs, each row sorted ascending.

    Notes
    -----
    2,000,000 papers give 56.1M edges (29.6M citations) in about 11 s on 2 cores, with a peak
    of about 1.3 GiB. Scaled this way, the rare types stay small (200 institutes, 5,294 fields of
    study at 2M papers), so their reverse relations have hubs of tens of thousands of papers, as
    in IGBH-full.

    Examples
    --------
    >>> g = synthetic_igbh(1000, seed=0)
    >>> g.num_nodes
    {'paper': 1000, 'author': 1029, 'institute': 1, 'fos': 3}
    >>> g.edge_types[:3]
    (('paper', 'cites', 'paper'), ('paper', 'written_by', 'author'), ('author', 'writes', 'paper'))
    """
    num_papers = check_int("num_papers", num_papers, minimum=1)
    seed = check_int("seed", seed, minimum=0, expected="a non-negative int")
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float, np.integer, np.floating)):
        raise TypeError(f"exponent must be a number, got {exponent!r}")
    if not np.isfinite(exponent) or exponent <= 2:
        raise ValueError(f"exponent must be a finite number > 2, got {exponent!r}")
    scale = num_papers / IGBH_FULL_NODES["paper"]
    num_nodes = {t: max(1, round(n * scale)) for t, n in IGBH_FULL_NODES.items()}
    num_nodes["paper"] = num_papers
    alpha = 1.0 / (float(exponent) - 1.0)
    relations = {}
    for index, ((src, name, dst), full_count) in enumerate(IGBH_FULL_EDGES.items()):
        rng = np.random.default_rng([seed, 0x16B, index])
        count = round(full_count * scale)
        indptr, indices = _draw_relation(rng, num_nodes[src], num_nodes[dst], count, alpha, src == dst)
        relations[(src, name, dst)] = CSRGraph(indptr, indices, num_src_nodes=num_nodes[src])
        if name in _REVERSE:
            reverse_indptr, reverse_indices = _transpose(indptr, indices, num_nodes[src])
            relations[(dst, _REVERSE[name], src)] = CSRGraph(
                reverse_indptr, reverse_indices, num_src_nodes=num_nodes[dst]
            )
        del indptr, indices
    return HeteroGraph(relations, num_nodes)


def _draw_relation(rng, num_src: int, num_dst: int, count: int, alpha: float, drop_loops: bool):
    """``count`` Chung-Lu draws as a CSR (rows = targets), rows sorted, repeats dropped."""
    src = _endpoints(rng, num_src, count, alpha)
    dst = _endpoints(rng, num_dst, count, alpha)
    indptr = np.cumsum(_count_targets(src, dst, num_dst, drop_loops))  # counts[0] == 0
    indices = _fill_by_target(src, dst, indptr, drop_loops)
    del src, dst
    lengths = sort_unique_rows(indptr, indices)
    compact_indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(lengths, out=compact_indptr[1:])
    return compact_indptr, compact_rows(indptr, indices, compact_indptr)


def _endpoints(rng, num_nodes: int, count: int, alpha: float) -> np.ndarray:
    out = np.empty(count, dtype=np.int64)
    uniform = np.empty(min(count, _CHUNK), dtype=np.float64)
    for start in range(0, count, _CHUNK):
        chunk = out[start : start + _CHUNK]
        draws = uniform[: len(chunk)]
        rng.random(out=draws)
        _powerlaw_endpoints_into(draws, chunk, num_nodes, alpha)
    _relabel(out, rng.permutation(num_nodes))  # hubs at random ids, not at 0, 1, 2, ...
    return out


@njit(cache=True)
def _count_targets(src, dst, num_dst, drop_loops):
    counts = np.zeros(num_dst + 1, dtype=np.int64)
    for i in range(len(src)):
        if not (drop_loops and src[i] == dst[i]):
            counts[dst[i] + 1] += 1
    return counts


@njit(cache=True)
def _fill_by_target(src, dst, indptr, drop_loops):
    cursor = indptr[:-1].copy()
    indices = np.empty(indptr[-1], dtype=np.int64)
    for i in range(len(src)):
        if not (drop_loops and src[i] == dst[i]):
            indices[cursor[dst[i]]] = src[i]
            cursor[dst[i]] += 1
    return indices


@njit(cache=True)
def _transpose(indptr, indices, num_src):
    # The reversed relation: rows = the source type; walking rows in order keeps each new row sorted.
    counts = np.zeros(num_src + 1, dtype=np.int64)
    for j in range(len(indices)):
        counts[indices[j] + 1] += 1
    out_indptr = np.cumsum(counts)
    cursor = out_indptr[:-1].copy()
    out = np.empty(len(indices), dtype=np.int64)
    for row in range(len(indptr) - 1):
        for j in range(indptr[row], indptr[row + 1]):
            out[cursor[indices[j]]] = row
            cursor[indices[j]] += 1
    return out_indptr, out


def synthetic_hetero_features(graph: HeteroGraph, dims=128, seed: int = 0, labels=None, signal: float = 1.0) -> dict:
    """Random float32 features per node type: dict node type -> ``(num_nodes[t], dims[t])``.

    Parameters
    ----------
    graph : HeteroGraph
        Gives the node types and counts.
    dims : int or dict
        One width for every node type, or node type -> width (only those types get features).
    seed : int
        Each type draws from its own PCG64 stream of ``seed``.
    labels : dict, optional
        Node type -> int64 labels ``(num_nodes[t],)``: those types' rows also get ``signal``
        times a random centroid of their class (as :func:`synthetic_features`), so a model can
        learn the labels.
    signal : float
        Scale of the class centroids.
    """
    if not isinstance(graph, HeteroGraph):
        raise TypeError(f"graph must be a HeteroGraph, got {type(graph).__name__}")
    if isinstance(dims, dict):
        unknown = [t for t in dims if t not in graph.num_nodes]
        if unknown:
            raise ValueError(f"dims names node types the graph lacks: {unknown}; known: {list(graph.node_types)}")
        widths = {t: check_int(f"dims[{t!r}]", d, minimum=1) for t, d in dims.items()}
    else:
        widths = dict.fromkeys(graph.node_types, check_int("dims", dims, minimum=1))
    seed = check_int("seed", seed, minimum=0, expected="a non-negative int")
    labels = {} if labels is None else labels
    if not isinstance(labels, dict) or any(t not in widths for t in labels):
        raise ValueError(f"labels must be a dict over node types that get features ({list(widths)})")
    x = {}
    for t, width in widths.items():
        n = graph.num_nodes[t]
        rng = np.random.default_rng([seed, 0x48, graph.node_types.index(t)])
        x[t] = rng.standard_normal((n, width), dtype=np.float32)
        if t in labels:
            y = np.asarray(labels[t])
            if y.shape != (n,) or y.dtype.kind not in "iu" or (n and y.min() < 0):
                raise ValueError(f"labels[{t!r}] must be non-negative ints of shape ({n},), got {y.dtype} {y.shape}")
            centroids = rng.standard_normal((int(y.max()) + 1 if n else 0, width), dtype=np.float32)
            x[t] += np.float32(signal) * centroids[y]
    return x


def load_igbh_like(num_papers: int, seed: int = 0, *, feature_dim: int = 128, num_classes: int = 19):
    """The ``igbh-like:NUM_PAPERS[:SEED]`` dataset: ``(graph, x, y, split)``, typed.

    Returns
    -------
    graph : HeteroGraph
        :func:`synthetic_igbh` ``(num_papers, seed)``.
    x : dict of float32 ndarrays
        ``feature_dim`` features for every node type (:func:`synthetic_hetero_features`); the
        papers' carry their class (IGBH has features for every type).
    y : dict
        ``{"paper": int64 (num_papers,)}``: ``num_classes`` uniform classes (IGBH labels papers
        only, with 19 or 2,983 classes).
    split : dict
        ``{"train", "val", "test"}`` -> ``{"paper": ascending int64 ids}``, a random 60/20/20
        split of the papers.
    """
    if not isinstance(feature_dim, dict):  # named as given ("dims" was), and before the graph is built
        feature_dim = check_int("feature_dim", feature_dim, minimum=1)
    num_classes = check_int("num_classes", num_classes, minimum=1)
    graph = synthetic_igbh(num_papers, seed)
    paper_labels = _synthetic_labels(num_papers, num_classes, seed=seed)
    x = synthetic_hetero_features(graph, feature_dim, seed=seed, labels={"paper": paper_labels})
    split = {part: {"paper": ids} for part, ids in random_split(num_papers, seed=seed).items()}
    return graph, x, {"paper": paper_labels}, split

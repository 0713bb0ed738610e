"""WordNet 3.0 as a typed graph (shipped inside the package), and a WN18RR-like link split.

The file ``gglspeedup/data/wordnet.npz`` is written once by ``tools/convert_wordnet.py`` from
WordNet's ``data.{noun,verb,adj,adv}`` files (WordNet 3.0 licence, see
``gglspeedup/data/LICENSE-wordnet.md``) and read here with ``allow_pickle=False``.

Synsets are nodes typed by part of speech; every pointer kind is a relation (see
:func:`load_wordnet`); :func:`wordnet_link_split` holds out edges of the relations WN18RR keeps
(Dettmers et al., 2018), the standard knowledge-graph completion benchmark drawn from WordNet.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from ..device import to_numpy
from ..graph import CSRGraph
from ..heterograph import HeteroGraph
from ._bundled import bundled_path, read_members, reading
from .links import check_split

__all__ = [
    "load_wordnet",
    "wordnet_link_split",
    "HeteroEdgeSplit",
    "NODE_TYPES",
    "NUM_CLASSES",
    "WN18RR_RELATIONS",
    "INVERSE_RELATIONS",
]

NODE_TYPES = ("noun", "verb", "adjective", "adverb")
NUM_CLASSES = 45  # lexicographer files (lexnames(5WN))
_CONVERTER = "tools/convert_wordnet.py"

# The 11 relations WN18RR keeps, as pointer names of the bundled graph (WN18RR's name after #):
# each in the direction WN18RR states it, so inverse relations (hyponym, ...) stay out.
WN18RR_RELATIONS = (
    "hypernym",
    "instance_hypernym",
    "member_meronym",
    "part_meronym",  # _has_part
    "domain_topic",  # _synset_domain_topic_of
    "member_of_domain_usage",
    "member_of_domain_region",
    "derivationally_related",  # _derivationally_related_form
    "also_see",
    "verb_group",
    "similar_to",
)

_PAIRS = (
    ("hypernym", "hyponym"),
    ("instance_hypernym", "instance_hyponym"),
    ("member_holonym", "member_meronym"),
    ("substance_holonym", "substance_meronym"),
    ("part_holonym", "part_meronym"),
    ("domain_topic", "member_of_domain_topic"),
    ("domain_region", "member_of_domain_region"),
    ("domain_usage", "member_of_domain_usage"),
)
_SYMMETRIC = ("antonym", "attribute", "derivationally_related", "also_see", "verb_group", "similar_to")
# Pointer name -> the name of its reverse pointer (WordNet stores both directions of these);
# entailment, cause, participle_of, pertainym and derived_from have none.
INVERSE_RELATIONS = {
    **{a: b for a, b in _PAIRS},
    **{b: a for a, b in _PAIRS},
    **{name: name for name in _SYMMETRIC},
}


def load_wordnet(root: str | os.PathLike | None = None, normalize: bool = False):
    """Load WordNet 3.0 as a typed graph: ``(graph, x, y, split)``, each per node type.

    Parameters
    ----------
    root : path, optional
        Folder holding ``wordnet.npz`` as written by ``tools/convert_wordnet.py`` (default: the
        copy inside the package).
    normalize : bool
        Divide each feature row by its sum; the default returns binary bag-of-words rows (as
        :func:`~gglspeedup.datasets.load` does for Cora).

    Returns
    -------
    graph : HeteroGraph
        Node types ``"noun"`` (82,115 synsets), ``"verb"`` (13,767), ``"adjective"`` (18,156,
        satellites included), ``"adverb"`` (3,621): 117,659 synsets, local ids in the order of
        the synsets in WordNet's ``data.<pos>`` file. 61 relations ``(src_type, pointer,
        dst_type)``, 364,552 edges, each from the synset holding the pointer to the synset it
        names; pointer names as in wninput(5WN): ``antonym``, ``hypernym``,
        ``instance_hypernym``, ``hyponym``, ``instance_hyponym``, ``{member,substance,part}_
        {holonym,meronym}``, ``attribute``, ``derivationally_related``, ``domain_{topic,region,
        usage}`` and ``member_of_domain_{topic,region,usage}``, ``entailment``, ``cause``,
        ``also_see``, ``verb_group``, ``similar_to``, ``participle_of``, ``pertainym``
        (adjective to noun or adjective) and ``derived_from`` (adverb to adjective). Largest:
        ``(noun, hypernym, noun)`` and ``(noun, hyponym, noun)``, 75,850 edges each;
        ``(adjective, similar_to, adjective)`` 21,386; ``(noun, derivationally_related, verb)``
        18,347. Lexical (word-to-word) pointers are lifted to their synsets and exact
        duplicates dropped (377,592 pointers give 364,552 edges); the 9 self loops (lexical
        pointers between two words of one synset, all in ``(noun, derivationally_related,
        noun)``) are kept.
    x : dict of float32 ndarrays, shape (n_t, 256)
        The gloss (definition and examples) as a hashed bag of words: lower-cased ``[a-z0-9]+``
        tokens, minus 22 function words, each hashed into bucket ``zlib.crc32(token) % 256``;
        1.0 where a bucket is hit (rows divided by their sums with ``normalize``).
    y : dict of int64 ndarrays, shape (n_t,)
        The lexicographer file number, 45 classes in ``[0, 45)`` (lexnames(5WN); each type uses
        its own files: nouns 3-28, verbs 29-43, adjectives 0, 1 and 44, adverbs 2).
    split : dict
        ``{"train", "val", "test"}`` -> dict node type -> ascending int64 ids: a fixed
        stratified split, 80/10/10 within every node type and label (computed once, seed 0, by
        the converter and stored): 94,125 / 11,767 / 11,767 synsets.

    Examples
    --------
    >>> graph, x, y, split = load_wordnet()
    >>> graph.num_nodes
    {'noun': 82115, 'verb': 13767, 'adjective': 18156, 'adverb': 3621}
    >>> graph[("noun", "hypernym", "noun")].num_edges, x["verb"].shape, int(y["adverb"][0])
    (75850, (13767, 256), 2)
    """
    from ..validation import check_bool

    normalize = check_bool("normalize", normalize)
    path = bundled_path("wordnet.npz", root, _CONVERTER)
    with reading(path, _CONVERTER):  # a damaged file is named, whatever part of it is bad
        return _decode(read_members(path), normalize)


def _decode(arrays: dict, normalize: bool):
    """``(graph, x, y, split)`` from the members of ``wordnet.npz``."""
    node_types = tuple(arrays["node_types"].tolist())
    counts = arrays["num_nodes"].astype(np.int64)
    num_nodes = dict(zip(node_types, counts.tolist()))
    bounds = np.concatenate(([0], np.cumsum(counts)))
    edge_bounds = np.concatenate(([0], np.cumsum(arrays["edge_counts"])))
    relations = {}
    for r, edge_type in enumerate(map(tuple, arrays["edge_types"].tolist())):
        src = arrays["edge_src"][edge_bounds[r] : edge_bounds[r + 1]].astype(np.int64)
        dst = arrays["edge_dst"][edge_bounds[r] : edge_bounds[r + 1]].astype(np.int64)
        n_dst = num_nodes[edge_type[2]]
        indptr = np.zeros(n_dst + 1, np.int64)
        np.cumsum(np.bincount(dst, minlength=n_dst), out=indptr[1:])  # stored sorted by (dst, src)
        relations[edge_type] = CSRGraph(indptr, src, num_src_nodes=num_nodes[edge_type[0]])
    graph = HeteroGraph(relations, num_nodes)
    x_all = _dense_binary(arrays["x_indptr"], arrays["x_indices"], int(arrays["feature_dim"]))
    if normalize:
        row_sums = x_all.sum(axis=1, keepdims=True)
        np.divide(x_all, row_sums, out=x_all, where=row_sums > 0)
    x, y, split = {}, {}, {part: {} for part in ("train", "val", "test")}
    for t, node_type in enumerate(node_types):
        rows = slice(bounds[t], bounds[t + 1])
        x[node_type] = x_all[rows]
        y[node_type] = arrays["label"][rows].astype(np.int64)
        for code, part in enumerate(("train", "val", "test")):
            split[part][node_type] = np.flatnonzero(arrays["split"][rows] == code).astype(np.int64)
    return graph, x, y, split


def _dense_binary(indptr: np.ndarray, indices: np.ndarray, dim: int) -> np.ndarray:
    x = np.zeros((len(indptr) - 1, dim), dtype=np.float32)
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr.astype(np.int64)))
    x[rows, indices.astype(np.int64)] = 1.0
    return x


class HeteroEdgeSplit(NamedTuple):
    """The result of :func:`wordnet_link_split`; each dict maps every held-out edge type to int64
    ``(2, k)`` pairs ``[src; dst]`` of local ids (positives only), sorted by ``(src, dst)``.

    graph : HeteroGraph
        The message graph: every relation of the input, minus the held-out edges and their
        reverses (relations keep their other edges, ``edge_ids`` = positions in the input's
        relation, and weights).
    train : dict
        The held-out relations' edges left in ``graph``.
    val, test : dict
        The held-out edges.
    """

    graph: HeteroGraph
    train: dict
    val: dict
    test: dict


def wordnet_link_split(
    graph: HeteroGraph,
    relations=WN18RR_RELATIONS,
    *,
    val: float = 0.05,
    test: float = 0.05,
    seed: int = 0,
    inverses: dict | None = None,
) -> HeteroEdgeSplit:
    """Hold out ``val`` and ``test`` shares of the edges of ``relations``, WN18RR style.

    WN18RR removed inverse relations from WN18 because a test triple could be read off its
    inverse training triple (``a hyponym b`` reveals ``b hypernym a``). Here every relation stays
    in the message graph, but each held-out edge ``(s, d)`` of ``(A, name, B)`` leaves it
    together with its reverse ``(d, s)`` in ``(B, inverses[name], A)``. An edge and its reverse
    are one *pair*: the shares are of distinct pairs, both directions of a pair land in the same
    part (reported in each direction that is a held-out relation: a symmetric relation such as
    ``similar_to`` lists both), and self loops are never held out.

    Parameters
    ----------
    graph : HeteroGraph
        Usually :func:`load_wordnet`'s graph.
    relations : iterable of str or edge types
        Pointer names (every edge type of that name) or ``(src_type, name, dst_type)`` tuples;
        default :data:`WN18RR_RELATIONS` (30 edge types of the bundled graph, 218,367 edges).
    val, test : float
        Shares of each relation's distinct pairs held out (``0 <= val, test``, ``val + test <
        1``); rounded per relation (WN18RR holds out about 3.3% each).
    seed : int
        The split depends only on ``seed`` and the graph.
    inverses : dict, optional
        Relation name -> the name of its reverse (default :data:`INVERSE_RELATIONS`); a name
        without an entry, or whose reverse edge type is absent, has no reverse to remove.

    Returns
    -------
    HeteroEdgeSplit

    Raises
    ------
    TypeError
        a graph that is not a ``HeteroGraph``, a relation of the wrong kind, a non-float share.
    ValueError
        a relation the graph does not have, shares out of range.

    Examples
    --------
    >>> graph, *_ = load_wordnet()
    >>> split = wordnet_link_split(graph, ["hypernym"], val=0.05, test=0.05, seed=0)
    >>> hyper = ("noun", "hypernym", "noun")
    >>> split.val[hyper].shape, split.graph.num_edges[hyper], split.graph.num_edges[("noun", "hyponym", "noun")]
    ((2, 3792), 68266, 68266)
    """
    if not isinstance(graph, HeteroGraph):
        raise TypeError(f"graph must be a HeteroGraph, got {type(graph).__name__}")
    seed = check_split(val, test, seed)
    inverses = INVERSE_RELATIONS if inverses is None else inverses
    if not isinstance(inverses, dict):
        raise TypeError(f"inverses must be a dict relation name -> name, got {type(inverses).__name__}")
    targets = _target_edge_types(graph, relations)
    edges = {et: _edge_arrays(graph[et]) for et in graph.edge_types}
    drop = {et: np.zeros(graph.num_edges[et], bool) for et in graph.edge_types}
    held = {"val": {}, "test": {}}
    grouped = set()
    for group, et in enumerate(targets):
        if et in grouped:
            continue
        reverse = (et[2], inverses.get(et[1]), et[0])
        reverse = reverse if reverse in edges else None
        members = [et] + ([reverse] if reverse in targets and reverse != et else [])
        grouped.update(members)
        own = reverse == et
        codes = {
            m: _pair_codes(graph.num_nodes[et[2]], m != et, own, *edges[m])
            for m in dict.fromkeys([*members, reverse])
            if m
        }
        loops = {m: (edges[m][0] == edges[m][1]) & (m[0] == m[2]) for m in members}  # never held out
        keys = np.unique(np.concatenate([codes[m][~loops[m]] for m in members]))
        order = np.random.default_rng([seed, 0x57, group]).permutation(len(keys))
        num_val, num_test = (int(np.rint(share * len(keys))) for share in (val, test))
        parts = {"val": keys[order[:num_val]], "test": keys[order[num_val : num_val + num_test]]}
        for part, part_keys in parts.items():
            for m in members:
                hit = np.isin(codes[m], part_keys)
                held[part][m] = _sorted_pairs(edges[m][0][hit], edges[m][1][hit], graph.num_nodes[m[2]])
        for m, member_codes in codes.items():
            drop[m] |= np.isin(member_codes, np.concatenate(list(parts.values())))
    message = HeteroGraph({et: _keep(graph[et], ~drop[et]) for et in graph.edge_types}, dict(graph.num_nodes))
    train = {et: _sorted_pairs(*_edge_arrays(message[et]), graph.num_nodes[et[2]]) for et in targets}
    return HeteroEdgeSplit(message, train, held["val"], held["test"])


def _target_edge_types(graph: HeteroGraph, relations) -> list:
    if isinstance(relations, str) or (isinstance(relations, tuple) and relations in graph.edge_types):
        relations = [relations]
    targets = []
    for relation in relations:
        if isinstance(relation, str):
            found = [et for et in graph.edge_types if et[1] == relation]
            if not found:
                names = sorted({et[1] for et in graph.edge_types})
                raise ValueError(f"relations names {relation!r}, which no edge type of the graph has; known: {names}")
        elif isinstance(relation, (tuple, list)) and len(relation) == 3:
            if tuple(relation) not in graph.edge_types:
                raise ValueError(f"relations names edge type {tuple(relation)!r}, which the graph does not have")
            found = [tuple(relation)]
        else:
            raise TypeError(f"relations must hold relation names or (src, name, dst) tuples, got {relation!r}")
        targets += [et for et in found if et not in targets]
    if not targets:
        raise ValueError("relations must name at least one relation")
    return sorted(targets, key=graph.edge_types.index)


def _edge_arrays(relation: CSRGraph) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` int64 of a relation, in CSR order."""
    host = relation.to("cpu")
    dst = np.repeat(np.arange(host.num_nodes, dtype=np.int64), host.degree())
    return to_numpy(host.indices).astype(np.int64), dst


def _pair_codes(n_dst: int, flip: bool, unordered: bool, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """One int64 code per edge naming its pair in the held-out relation's orientation: ``flip``
    for the edges of its reverse, ``unordered`` when the relation is its own reverse."""
    if flip:
        src, dst = dst, src
    elif unordered:
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    return src * n_dst + dst


def _sorted_pairs(src: np.ndarray, dst: np.ndarray, n_dst: int) -> np.ndarray:
    order = np.argsort(src * n_dst + dst, kind="stable")
    return np.stack((src[order], dst[order])).astype(np.int64)


def _keep(relation: CSRGraph, keep: np.ndarray) -> CSRGraph:
    host = relation.to("cpu")
    dst = np.repeat(np.arange(host.num_nodes, dtype=np.int64), host.degree())
    indptr = np.zeros(host.num_nodes + 1, np.int64)
    np.cumsum(np.bincount(dst[keep], minlength=host.num_nodes), out=indptr[1:])
    edge_ids = np.flatnonzero(keep) if host.edge_ids is None else to_numpy(host.edge_ids)[keep]
    weights = None if host.weights is None else to_numpy(host.weights)[keep]
    indices = to_numpy(host.indices)[keep]
    return CSRGraph(indptr, indices, edge_ids=edge_ids, weights=weights, num_src_nodes=host.num_src_nodes)

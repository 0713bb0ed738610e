"""Typed datasets: bundled WordNet, its converter and link split, the IGBH-like generator, specs."""

import os
from unittest import mock

import numpy as np
import pytest

from gglspeedup import datasets
from gglspeedup.datasets.spec import load_spec, load_spec_graph, load_spec_typed_graph, parse_spec
from gglspeedup.datasets.synthetic_hetero import load_igbh_like, synthetic_hetero_features, synthetic_igbh
from gglspeedup.datasets.wordnet import INVERSE_RELATIONS, WN18RR_RELATIONS, load_wordnet, wordnet_link_split
from gglspeedup.heterograph import HeteroGraph

from conftest import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDNET_SRC = os.path.join(ROOT, "..", "shared", "data", "wordnet")

WORDNET_NODES = {"noun": 82115, "verb": 13767, "adjective": 18156, "adverb": 3621}
# A sample of relation sizes (all 61 are pinned by the total and the converter test).
WORDNET_EDGES = {
    ("noun", "hypernym", "noun"): 75850,
    ("noun", "hyponym", "noun"): 75850,
    ("verb", "hypernym", "verb"): 13239,
    ("noun", "instance_hypernym", "noun"): 8577,
    ("noun", "member_meronym", "noun"): 12293,
    ("noun", "part_holonym", "noun"): 9097,
    ("adjective", "similar_to", "adjective"): 21386,
    ("noun", "derivationally_related", "verb"): 18347,
    ("noun", "derivationally_related", "noun"): 2703,
    ("adjective", "pertainym", "noun"): 3750,
    ("adverb", "derived_from", "adjective"): 2882,
    ("adjective", "antonym", "adjective"): 3998,
    ("verb", "entailment", "verb"): 408,
    ("noun", "member_of_domain_topic", "adverb"): 37,
}


@pytest.fixture(scope="module")
def wordnet():
    return load_wordnet()


def edges_of(graph, edge_type):
    """(src, dst) int64 arrays of one relation (rows are the targets)."""
    relation = graph[edge_type]
    dst = np.repeat(np.arange(relation.num_nodes), relation.degree())
    return np.asarray(relation.indices, dtype=np.int64), dst


def pair_set(graph, edge_type):
    return set(zip(*(a.tolist() for a in edges_of(graph, edge_type))))


# ---------------------------------------------------------------------------- WordNet
def test_wordnet_counts_per_type_and_relation(wordnet):
    graph = wordnet[0]
    assert isinstance(graph, HeteroGraph)
    assert graph.node_types == ("noun", "verb", "adjective", "adverb")
    assert graph.num_nodes == WORDNET_NODES
    assert len(graph.edge_types) == 61 and sum(graph.num_edges.values()) == 364552
    assert {et: graph.num_edges[et] for et in WORDNET_EDGES} == WORDNET_EDGES
    names = {et[1] for et in graph.edge_types}
    assert names == set(INVERSE_RELATIONS) | {"entailment", "cause", "participle_of", "pertainym", "derived_from"}
    for edge_type in graph.edge_types:
        src, dst = edges_of(graph, edge_type)
        assert src.min() >= 0 and src.max() < graph.num_nodes[edge_type[0]], edge_type
        assert dst.max() < graph.num_nodes[edge_type[2]], edge_type
        codes = src * graph.num_nodes[edge_type[2]] + dst
        assert len(np.unique(codes)) == len(codes), f"{edge_type} has repeated edges"
    loops = {et: int((np.equal(*edges_of(graph, et))).sum()) for et in graph.edge_types if et[0] == et[2]}
    assert {et: n for et, n in loops.items() if n} == {("noun", "derivationally_related", "noun"): 9}


def test_wordnet_edges_point_from_the_synset_holding_the_pointer(wordnet):
    graph = wordnet[0]
    # data.noun's first synsets: 0 entity, 1 physical_entity ("@ entity"); data.adj's: 0 able, 1
    # unable (a lexical "!" pointer between the words able and unable, lifted to the synsets).
    assert (1, 0) in pair_set(graph, ("noun", "hypernym", "noun"))
    assert (0, 1) in pair_set(graph, ("noun", "hyponym", "noun"))
    hypernym = graph[("noun", "hypernym", "noun")]
    assert hypernym.degree()[0] == 3  # entity's hyponyms (physical_entity, abstraction, thing) point to it
    assert 0 not in np.asarray(hypernym.indices)  # and entity, the root, has no hypernym
    assert graph[("noun", "hyponym", "noun")].degree()[0] == 0  # nor is it anyone's hyponym
    assert {(0, 1), (1, 0)} <= pair_set(graph, ("adjective", "antonym", "adjective"))


def test_wordnet_inverse_pointers_are_reversed_relations(wordnet):
    graph = wordnet[0]
    for a, b in [
        ("hypernym", "hyponym"),
        ("member_meronym", "member_holonym"),
        ("domain_topic", "member_of_domain_topic"),
    ]:
        for et in graph.edge_types:
            if et[1] == a:
                reverse = {(d, s) for s, d in pair_set(graph, et)}
                assert reverse == pair_set(graph, (et[2], b, et[0])), et
    similar = pair_set(graph, ("adjective", "similar_to", "adjective"))
    assert similar == {(d, s) for s, d in similar}


def test_wordnet_labels_features_and_split(wordnet):
    _graph, x, y, split = wordnet
    allowed = {"noun": range(3, 29), "verb": range(29, 44), "adjective": (0, 1, 44), "adverb": (2,)}
    for t, n in WORDNET_NODES.items():
        assert y[t].dtype == np.int64 and y[t].shape == (n,)
        assert set(np.unique(y[t]).tolist()) == set(allowed[t])
        assert x[t].dtype == np.float32 and x[t].shape == (n, 256) and x[t].flags.c_contiguous
        assert np.isin(x[t], (0.0, 1.0)).all() and (x[t].sum(axis=1) > 0).all()
        parts = [split[p][t] for p in ("train", "val", "test")]
        for ids in parts:
            assert ids.dtype == np.int64 and (np.diff(ids) > 0).all()
        assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(n)), "parts must be disjoint and cover"
        for cls in np.unique(y[t]):  # stratified: round(10%) of every class in val and in test
            members = int((y[t] == cls).sum())
            assert [int((y[t][ids] == cls).sum()) for ids in parts[1:]] == [round(0.1 * members)] * 2
    assert [sum(len(ids) for ids in split[p].values()) for p in ("train", "val", "test")] == [94125, 11767, 11767]
    assert len(np.unique(np.concatenate([y[t] for t in y]))) == 45


def test_wordnet_loads_the_same_twice_and_normalizes():
    graph, x, y, split = load_wordnet()
    again = load_wordnet()
    assert np.array_equal(graph.stacked.indices, again[0].stacked.indices)
    assert all(np.array_equal(x[t], again[1][t]) and np.array_equal(y[t], again[2][t]) for t in x)
    assert all(np.array_equal(split[p][t], again[3][p][t]) for p in split for t in split[p])
    _, normalized, *_ = load_wordnet(normalize=True)
    assert np.allclose(normalized["verb"].sum(axis=1), 1.0)
    assert np.array_equal(normalized["verb"] > 0, x["verb"] > 0)


def test_datasets_load_dispatches_wordnet_and_keeps_planetoid(wordnet):
    graph, x, *_ = datasets.load("WordNet")
    assert graph.num_nodes == wordnet[0].num_nodes and np.array_equal(x["adverb"], wordnet[1]["adverb"])
    cora = datasets.load("cora")
    assert cora[0].num_nodes == 2708
    with pytest.raises(ValueError, match=r"name must be one of \('cora', 'citeseer'\), got 'pubmed'; 'wordnet'"):
        datasets.load("pubmed")
    with pytest.raises(FileNotFoundError, match=r"wordnet.npz' not found"):
        datasets.load("wordnet", root="/nonexistent/folder")
    with pytest.raises(TypeError, match=r"normalize must be a bool"):
        load_wordnet(normalize="yes")


def _converter():
    return load_file("tools/convert_wordnet.py")


@pytest.mark.skipif(not os.path.isdir(WORDNET_SRC), reason="the raw WordNet files (../shared/data/wordnet) are absent")
def test_converter_reproduces_the_shipped_files(tmp_path):
    written = _converter().convert(WORDNET_SRC, str(tmp_path))
    assert sorted(os.path.basename(p) for p in written) == ["LICENSE-wordnet.md", "wordnet.npz"]
    shipped = os.path.join(ROOT, "gglspeedup", "data", "wordnet.npz")
    assert os.path.getsize(shipped) < 3_000_000
    with np.load(shipped, allow_pickle=False) as old, np.load(tmp_path / "wordnet.npz", allow_pickle=False) as new:
        assert sorted(old.files) == sorted(new.files)
        for key in old.files:
            assert old[key].dtype == new[key].dtype and np.array_equal(old[key], new[key]), key
    with (
        open(tmp_path / "LICENSE-wordnet.md", encoding="utf-8") as fresh,
        open(os.path.join(ROOT, "gglspeedup", "data", "LICENSE-wordnet.md"), encoding="utf-8") as kept,
    ):
        text = fresh.read()
        assert text == kept.read()
    assert "WordNet 3.0 Copyright 2006 by Princeton University.  All rights reserved." in text
    assert "Permission to use, copy, modify and distribute" in text


def test_gloss_features_hash_with_crc32():
    import zlib

    buckets = _converter().gloss_buckets('the dog; "a Dog barked"')  # "the" and "a" are stop words
    assert buckets.tolist() == sorted({zlib.crc32(w) % 256 for w in (b"dog", b"barked")})


# ---------------------------------------------------------------------------- WN18RR-like split
def test_link_split_holds_out_pairs_and_their_reverses(wordnet):
    graph = wordnet[0]
    split = wordnet_link_split(graph, val=0.05, test=0.05, seed=0)
    assert set(split.train) == set(split.val) == set(split.test)
    assert len(split.train) == 30 and {et[1] for et in split.train} == set(WN18RR_RELATIONS)
    assert sum(graph.num_edges[et] for et in split.train) == 218367
    removed = {et: pair_set(graph, et) - pair_set(split.graph, et) for et in graph.edge_types}
    for et in split.train:
        train, val, test = ({tuple(p) for p in part[et].T.tolist()} for part in (split.train, split.val, split.test))
        assert not (train & val or train & test or val & test), et
        assert train | val | test == pair_set(graph, et), et
        assert train == pair_set(split.graph, et), et
        assert removed[et] == val | test, et
        assert all(s != d for s, d in val | test) or et[0] != et[2]
        reverse = (et[2], INVERSE_RELATIONS[et[1]], et[0])
        if reverse in graph.edge_types:
            existing = pair_set(graph, reverse)
            assert {(d, s) for s, d in val | test} & existing <= removed[reverse], et
            if reverse in split.val:  # both directions of a pair land in the same part
                assert {(d, s) for s, d in val} & existing <= {tuple(p) for p in split.val[reverse].T.tolist()}
    hyper = ("noun", "hypernym", "noun")
    assert split.val[hyper].shape == (2, 3792) and split.test[hyper].shape == (2, 3792)
    assert removed[("noun", "hyponym", "noun")] == {(d, s) for s, d in removed[hyper]}
    assert all(not removed[et] for et in graph.edge_types if et[1] in ("cause", "pertainym", "antonym"))
    message = split.graph[hyper]
    kept = np.asarray(message.edge_ids)
    assert np.array_equal(np.asarray(graph[hyper].indices)[kept], np.asarray(message.indices))


def test_link_split_is_seeded(wordnet):
    graph = wordnet[0]
    a = wordnet_link_split(graph, ["similar_to", ("verb", "verb_group", "verb")], val=0.1, test=0.1, seed=3)
    b = wordnet_link_split(graph, ["similar_to", ("verb", "verb_group", "verb")], val=0.1, test=0.1, seed=3)
    c = wordnet_link_split(graph, ["similar_to", ("verb", "verb_group", "verb")], val=0.1, test=0.1, seed=4)
    et = ("adjective", "similar_to", "adjective")
    assert list(a.val) == [("verb", "verb_group", "verb"), et]
    assert all(np.array_equal(a.val[k], b.val[k]) and np.array_equal(a.test[k], b.test[k]) for k in a.val)
    assert not np.array_equal(a.val[et], c.val[et])
    held = {tuple(p) for p in a.val[et].T.tolist()}
    assert held == {(d, s) for s, d in held}, "a symmetric relation holds out both directions together"
    assert len(held) == 2 * round(0.1 * len(pair_set(graph, et)) / 2)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(relations=["synonym"]), ValueError, r"relations names 'synonym', which no edge type"),
        (dict(relations=[("noun", "hypernym", "verb")]), ValueError, r"which the graph does not have"),
        (dict(relations=[3]), TypeError, r"relations must hold relation names"),
        (dict(val=0.6, test=0.5), ValueError, r"val \+ test must leave edges"),
        (dict(val="0.1"), TypeError, r"val must be a share"),
        (dict(test=-0.1), ValueError, r"test must be in \[0, 1\)"),
        (dict(seed=-1), ValueError, r"seed"),
    ],
)
def test_link_split_rejects(wordnet, kwargs, error, message):
    with pytest.raises(error, match=message):
        wordnet_link_split(wordnet[0], **kwargs)
    with pytest.raises(TypeError, match=r"graph must be a HeteroGraph"):
        wordnet_link_split(datasets.load("cora")[0])


# ---------------------------------------------------------------------------- IGBH-like
IGBH_CITES = ("paper", "cites", "paper")  # one-way, as in MLPerf's R-GAT
IGBH_TOPIC = ("paper", "topic", "fos")
IGBH_REVERSES = [  # each base relation, then the reverse R-GAT adds
    (("paper", "written_by", "author"), ("author", "writes", "paper")),
    (("author", "affiliated_to", "institute"), ("institute", "rev_affiliated_to", "author")),
    (IGBH_TOPIC, ("fos", "rev_topic", "paper")),
]
IGBH_TYPES = [IGBH_CITES, *(et for pair in IGBH_REVERSES for et in pair)]


def test_igbh_like_shape_and_reverses():
    graph = synthetic_igbh(50_000, seed=1)
    assert graph.num_nodes == {"paper": 50000, "author": 51462, "institute": 5, "fos": 132}
    assert list(graph.edge_types) == IGBH_TYPES
    edges = graph.num_edges
    assert 0.97 * 14.84 * 50000 < edges[IGBH_CITES] <= 14.84 * 50000  # repeats dropped, a few
    assert 0.85 * 3.9 * 50000 < edges[IGBH_TOPIC] <= 3.9 * 50000
    for a, b in IGBH_REVERSES:
        assert edges[a] == edges[b]
        assert {(d, s) for s, d in pair_set(graph, a)} == pair_set(graph, b)
    for et in IGBH_TYPES:
        src, dst = edges_of(graph, et)
        assert src.min() >= 0 and src.max() < graph.num_nodes[et[0]] and dst.max() < graph.num_nodes[et[2]]
        assert len(np.unique(src * graph.num_nodes[et[2]] + dst)) == len(src), f"{et} has repeated edges"
        relation = graph[et]
        for v in range(0, relation.num_nodes, max(1, relation.num_nodes // 50)):
            row = np.asarray(relation.indices[relation.indptr[v] : relation.indptr[v + 1]])
            assert (np.diff(row) > 0).all()
    src, dst = edges_of(graph, IGBH_CITES)
    assert (src != dst).all(), "citations have no self loops"


def test_igbh_like_degrees_are_skewed():
    graph = synthetic_igbh(50_000, seed=0)
    for et in [("paper", "cites", "paper"), ("author", "writes", "paper")]:
        in_degree = graph[et].degree()
        top = np.sort(in_degree)[::-1][: len(in_degree) // 100]
        assert top.sum() > 0.15 * in_degree.sum(), et  # the top 1% hold far more than 1% of the edges
        assert in_degree.max() > 50 * in_degree.mean(), et
    author_papers = graph[("paper", "written_by", "author")].degree()
    assert np.median(author_papers) <= author_papers.mean()  # a long tail of prolific authors


def test_igbh_like_is_deterministic_by_seed():
    a, b, c = synthetic_igbh(3000, seed=5), synthetic_igbh(3000, seed=5), synthetic_igbh(3000, seed=6)
    assert np.array_equal(a.stacked.indptr, b.stacked.indptr) and np.array_equal(a.stacked.indices, b.stacked.indices)
    assert not np.array_equal(a.stacked.indices, c.stacked.indices)
    small = synthetic_igbh(1)
    assert small.num_nodes == {"paper": 1, "author": 1, "institute": 1, "fos": 1}


def test_igbh_like_dataset_features_labels_split():
    graph, x, y, split = load_igbh_like(2000, seed=2, feature_dim=16, num_classes=5)
    assert set(x) == set(graph.node_types) and list(y) == ["paper"]
    assert all(x[t].shape == (graph.num_nodes[t], 16) and x[t].dtype == np.float32 for t in x)
    assert y["paper"].dtype == np.int64 and y["paper"].min() >= 0 and y["paper"].max() == 4
    assert [len(split[p]["paper"]) for p in ("train", "val", "test")] == [1200, 400, 400]
    ids = np.concatenate([split[p]["paper"] for p in split])
    assert len(np.unique(ids)) == 2000
    for bad, message in [
        (dict(feature_dim=0), r"feature_dim must be >= 1, got 0"),  # was "dims must be"
        (dict(feature_dim=1.5), r"feature_dim must be an int"),
        (dict(num_classes=0), r"num_classes"),
    ]:
        with (
            pytest.raises((TypeError, ValueError), match=message),
            mock.patch(
                "gglspeedup.datasets.synthetic_hetero.synthetic_igbh", side_effect=AssertionError("built first")
            ),
        ):
            load_igbh_like(2000, seed=2, **bad)
    again = load_igbh_like(2000, seed=2, feature_dim=16, num_classes=5)
    assert all(np.array_equal(x[t], again[1][t]) for t in x)
    only = synthetic_hetero_features(graph, {"paper": 4}, seed=0)
    assert list(only) == ["paper"] and only["paper"].shape == (2000, 4)
    with pytest.raises(ValueError, match=r"dims names node types the graph lacks: \['venue'\]"):
        synthetic_hetero_features(graph, {"venue": 4})
    with pytest.raises(ValueError, match=r"labels\['paper'\] must be non-negative ints"):
        synthetic_hetero_features(graph, 4, labels={"paper": np.zeros(3, np.int64)})
    with pytest.raises(TypeError, match=r"graph must be a HeteroGraph"):
        synthetic_hetero_features(datasets.load("cora")[0], 4)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(num_papers=0), ValueError, r"num_papers"),
        (dict(num_papers=1.5), TypeError, r"num_papers"),
        (dict(num_papers=10, seed=-1), ValueError, r"seed"),
        (dict(num_papers=10, exponent=2.0), ValueError, r"exponent must be a finite number > 2"),
    ],
)
def test_igbh_like_rejects(kwargs, error, message):
    with pytest.raises(error, match=message):
        synthetic_igbh(**kwargs)


# ---------------------------------------------------------------------------- spec strings
def test_typed_spec_strings_parse_and_load(tmp_path):
    assert parse_spec("WordNet").kind == "wordnet"
    spec = parse_spec("igbh-like:2k")
    assert (spec.kind, spec.num_nodes, spec.seed) == ("igbh-like", 2000, None)
    assert parse_spec("igbh-like:2k:7", graph_only=True).seed == 7
    graph, x, y, _split = datasets.parse_dataset_spec("igbh-like:500", feature_dim=8, num_classes=3, seed=4)
    expected = load_igbh_like(500, 4, feature_dim=8, num_classes=3)
    assert np.array_equal(graph.stacked.indices, expected[0].stacked.indices)
    assert np.array_equal(x["author"], expected[1]["author"]) and np.array_equal(y["paper"], expected[2]["paper"])
    seeded = load_spec(parse_spec("igbh-like:500:9"), seed=4)[0]  # the string's seed wins
    assert np.array_equal(seeded.stacked.indices, synthetic_igbh(500, seed=9).stacked.indices)
    typed = load_spec_typed_graph("igbh-like:500:9")
    assert np.array_equal(typed.stacked.indices, seeded.stacked.indices)
    flat = load_spec_graph(parse_spec("igbh-like:500:9", graph_only=True))
    assert flat.num_nodes == sum(typed.num_nodes.values()) and flat.num_edges == sum(typed.num_edges.values())
    typed.save(tmp_path / "typed.npz")
    loaded = load_spec_typed_graph(f"file:{tmp_path / 'typed.npz'}")
    assert loaded.edge_types == typed.edge_types and np.array_equal(loaded.stacked.indices, typed.stacked.indices)
    assert load_spec_typed_graph(parse_spec("wordnet")).num_nodes == WORDNET_NODES


@pytest.mark.parametrize(
    "text, graph_only, message",
    [
        ("wordnet:3", False, r"dataset spec must be 'wordnet' \(no arguments\), got 'wordnet:3'"),
        ("wordnet:3", True, r"--graph 'wordnet:3': 'wordnet' takes no arguments"),
        ("igbh-like", False, r"dataset spec 'igbh-like': expected 'igbh-like:NUM_PAPERS\[:SEED\]'"),
        ("igbh-like:10:1:2", True, r"expected 'igbh-like:NUM_PAPERS\[:SEED\]'"),
        ("igbh-like:x", False, r"NUM_PAPERS must be a number like 2000000 or 2M, got 'x'"),
        ("igbh-like:0", True, r"NUM_PAPERS must be >= 1"),
        ("igbh-like:10:s", False, r"SEED must be a number"),
        ("igbh:10", False, r"typed datasets: 'wordnet' or 'igbh-like:NUM_PAPERS\[:SEED\]'"),
        ("igbh:10", True, r"is not understood"),
    ],
)
def test_typed_spec_strings_reject_clearly(text, graph_only, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(text, graph_only=graph_only)


def test_typed_graph_of_an_untyped_spec_is_refused():
    with pytest.raises(ValueError, match=r"'cora' names an untyped graph \(cora\); typed datasets"):
        load_spec_typed_graph("cora")
    with pytest.raises(TypeError, match=r"spec must be a dataset string or a DatasetSpec"):
        load_spec_typed_graph(3)

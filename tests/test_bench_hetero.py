"""bench hetero: dataset strings, typed seed batches, the three contenders on a small typed graph,
the command end to end (JSON and report), DGL when present."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gglspeedup.bench import main
from gglspeedup.bench._common import Timing, paired_ratio
from gglspeedup.bench.hetero import (
    _prepare_dgl,
    _prepare_ours,
    _prepare_untyped,
    load_typed,
    seed_types,
    typed_seed_batches,
)

from conftest import CITES, HAS_TOPIC, TOPIC_OF, WRITES, WRITTEN_BY, academic_graph, assert_rejects, require_dgl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EDGE_COUNTS = (900, 600, 600, 150, 150)  # edges of CITES, WRITES, WRITTEN_BY, TOPIC_OF, HAS_TOPIC


def _graph(seed=5, sizes=None):
    """A small IGBH-shaped graph with parallel edges and isolated nodes."""
    num_nodes = sizes or {"paper": 120, "author": 70, "field": 9}
    return academic_graph(np.random.default_rng(seed), num_nodes, EDGE_COUNTS)


def test_typed_seed_batches_hold_distinct_ids_of_the_asked_types_and_repeat():
    graph = _graph()
    batches = typed_seed_batches(graph, ["paper"], 50, 4, seed=2)
    assert len(batches) == 4 and all(list(b) == ["paper"] for b in batches)
    assert all(len(np.unique(b["paper"])) == 50 and b["paper"].max() < 120 for b in batches)
    mixed = typed_seed_batches(graph, ["paper", "author", "field"], 150, 3, seed=2)
    for batch in mixed:
        assert sum(len(ids) for ids in batch.values()) == 150 and set(batch) <= {"paper", "author", "field"}
        for t, ids in batch.items():
            assert ids.dtype == np.int64 and len(np.unique(ids)) == len(ids)
            assert ((ids >= 0) & (ids < graph.num_nodes[t])).all()
    again = typed_seed_batches(graph, ["paper", "author", "field"], 150, 3, seed=2)
    assert all(a.keys() == b.keys() and all(np.array_equal(a[t], b[t]) for t in a) for a, b in zip(mixed, again))


def test_dataset_strings_load_saved_graphs_and_reject_clearly(tmp_path):
    _graph().save(tmp_path / "g.npz")
    graph, labelled, info = load_typed(f"file:{tmp_path / 'g.npz'}")
    assert labelled == [] and info["num_nodes"] == {"paper": 120, "author": 70, "field": 9}
    assert info["total_edges"] == 2400 and info["num_edges"]["author/writes/paper"] == 600
    assert graph.edge_types == (CITES, WRITES, WRITTEN_BY, TOPIC_OF, HAS_TOPIC)
    for bad, message in [
        ("powerlaw:10:2", "not understood"),
        (f"file:{tmp_path / 'missing.npz'}", "no such file"),
        ("igbh-like:x", "NUM_PAPERS"),
        ("igbh-like:10:1:2", "igbh-like:NUM_PAPERS"),
        ("cora", "not understood"),
        ("wordnet:3", "no arguments"),
    ]:
        with pytest.raises(ValueError, match=message):
            load_typed(bad)


def test_bundled_wordnet_seeds_every_labelled_type_by_default():
    graph, labelled, info = load_typed("wordnet")
    assert labelled == ["noun", "verb", "adjective", "adverb"] and info["total_edges"] == 364_552
    assert seed_types(graph, labelled, None) == labelled and seed_types(graph, labelled, "noun") == ["noun"]
    small, papers, _ = load_typed("igbh-like:1000")
    assert papers == ["paper"] and seed_types(small, papers, "all") == list(small.node_types)


def test_untyped_contender_samples_the_same_seeds_on_the_homogeneous_graph():
    # One hop taking every neighbour is fully determined: typed and untyped take every in-edge of
    # the seeds, over all relations, so they count the same edges.
    graph = _graph()
    batch = typed_seed_batches(graph, ["paper", "author"], 40, 1, seed=1)[0]
    typed, untyped = _prepare_ours(graph, [-1], 0), _prepare_untyped(graph, [-1], 0)
    in_degree = sum(int(graph.in_degree(t)[ids].sum()) for t, ids in batch.items())
    assert typed.sample(typed.convert(batch)) == untyped.sample(untyped.convert(batch)) == in_degree
    offsets = graph.node_offsets()
    mapped = untyped.convert(batch)
    expected = np.concatenate([batch[t] + offsets[t] for t in graph.node_types if t in batch])
    np.testing.assert_array_equal(mapped, expected)


def test_paired_ratio_is_the_median_of_per_round_ratios():
    fast = Timing(1.0, 1, 100, round_seconds=[1.0, 2.0, 1.0], round_edges=[100, 100, 100])
    slow = Timing(2.0, 1, 100, round_seconds=[2.0, 2.0, 4.0], round_edges=[100, 100, 100])
    assert paired_ratio(fast, slow) == pytest.approx(2.0)  # per round: 2, 1, 4
    assert paired_ratio(Timing(1.0, 1, 1, [1.0, 1.0], [3, 5]), Timing(1.0, 1, 1, [1.0, 1.0], [1, 1])) == 4.0


def test_hetero_command_runs_end_to_end(tmp_path):
    # The command line itself, in its own process: a crash in a peer's native code fails this test.
    _graph().save(tmp_path / "g.npz")
    out_path = tmp_path / "hetero.json"
    argv = ["hetero", "--dataset", f"file:{tmp_path / 'g.npz'}", "--fanouts", "4,3", "--batch", "16"]
    argv += ["--batches", "2", "--warmup", "1", "--repeats", "3", "--seed-type", "paper", "--json", str(out_path)]
    done = subprocess.run(
        [sys.executable, "-m", "gglspeedup.bench", *argv], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out_path.read_text())
    assert results["command"] == "hetero" and results["seed_types"] == ["paper"] and results["fanouts"] == [4, 3]
    assert results["dataset"]["total_edges"] == 2400 and results["batch"] == 16
    rows = {row["name"]: row for row in results["results"]}
    ours, untyped = rows["gglspeedup"], rows["gglspeedup untyped"]
    for row in (ours, untyped):
        assert row["status"] == "ok" and row["edges_per_s"] > 0 and len(row["round_s"]) == 3
    assert ours["ratio"] == 1.0 and ours["paired_ratio"] == 1.0
    ratio = results["typed_vs_untyped"]
    assert ratio["median"] == pytest.approx(ours["edges_per_s"] / untyped["edges_per_s"])
    assert ratio["best"] == pytest.approx(ours["best_edges_per_s"] / untyped["best_edges_per_s"])
    assert ratio["paired"] > 0 and ratio["target"] == 0.8
    if rows["dgl"]["status"] != "ok":
        assert rows["dgl"]["status"].startswith("unavailable: ")
    else:  # the same seeds and min(k, deg) per relation at every hop: the edge counts agree closely
        assert rows["dgl"]["edges_per_batch"] == pytest.approx(ours["edges_per_batch"], rel=0.15)
    assert "typed / untyped edges/s" in done.stdout and "ours/peer" in done.stdout


def test_hetero_command_rejects_bad_options(tmp_path):
    cases = [(["--batch", "0"], "--batch must be >= 1"), (["--peers", "quiver"], "--peers")]
    assert_rejects(main, ["hetero", "--dataset", "file:/never/read.npz"], [*cases, (["--fanouts", "a,b"], "fanouts")])
    _graph().save(tmp_path / "g.npz")
    with pytest.raises(ValueError, match="--seed-type"):
        main(["hetero", "--dataset", f"file:{tmp_path / 'g.npz'}", "--seed-type", "venue", "--peers", ""])


def test_dgl_typed_sampler_takes_the_edges_ours_takes_when_installed():
    require_dgl()
    # Every neighbour at both hops is fully determined: both must take exactly the same edges,
    # relation by relation and hop by hop, so the totals agree.
    graph = _graph()
    ours, dgl = _prepare_ours(graph, [-1, -1], 0), _prepare_dgl(graph, [-1, -1], 0)
    for batch in typed_seed_batches(graph, ["paper", "author"], 20, 3, seed=3):
        assert dgl.sample(dgl.convert(batch)) == ours.sample(ours.convert(batch))

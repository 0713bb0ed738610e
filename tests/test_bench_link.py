"""bench link: option parsing, reverse edge positions, edge batches, the command end to end, DGL when present."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.bench import main
from gglspeedup.bench.link import edge_batches, parse_negatives, reverse_positions

from conftest import assert_rejects, require_dgl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _graph(num_nodes=80, num_edges=600, seed=5):
    """Half the edges stored both ways, the rest one way only, with parallel edges."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes, size=(2, num_edges))
    both = np.concatenate([edges, edges[::-1, : num_edges // 2]], axis=1)
    return gg.CSRGraph.from_edge_index(both, num_nodes=num_nodes)


def graph_edges(graph):
    return np.stack([graph.indices, np.repeat(np.arange(graph.num_nodes), graph.degree())])


def test_negatives_option_parses_and_rejects_clearly():
    assert parse_negatives("per_source:1") == ("per_source", 1)
    assert parse_negatives("binary:3") == ("binary", 3)
    assert parse_negatives("triplet") == ("triplet", 1)
    assert parse_negatives("none") == (None, 1)
    for bad, message in [("uniform:1", "MODE:K"), ("binary:x", "K must be an int"), ("binary:0", ">= 1")]:
        with pytest.raises(ValueError, match=message):
            parse_negatives(bad)


def test_reverse_positions_point_at_the_edge_stored_the_other_way_or_at_themselves():
    graph = _graph()
    reverse = reverse_positions(graph)
    rows = np.repeat(np.arange(graph.num_nodes), graph.degree())
    stored = set(zip(graph.indices.tolist(), rows.tolist()))
    for p, q in enumerate(reverse.tolist()):
        source, target = int(graph.indices[p]), int(rows[p])
        if (target, source) in stored:
            assert (int(graph.indices[q]), int(rows[q])) == (target, source)
        else:
            assert q == p


def test_edge_batches_are_distinct_positions_and_deterministic():
    graph = _graph()
    batches = edge_batches(graph, 50, 4, seed=2)
    assert len(batches) == 4 and all(len(np.unique(b)) == 50 for b in batches)
    assert all(((b >= 0) & (b < graph.num_edges)).all() for b in batches)
    again = edge_batches(graph, 50, 4, seed=2)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))


@pytest.mark.parametrize("exclude", ["reverse", "none"])
@pytest.mark.slow
def test_link_command_runs_end_to_end_with_the_exclusion_cost(tmp_path, exclude):
    # The command line itself, in its own process (a crash in a peer's native code, as DGL's
    # GlobalUniform on read-only memory-mapped arrays once did, fails this test, not the session).
    _graph().save(tmp_path / "g.npz")
    out_path = tmp_path / "link.json"
    argv = ["link", "--graph", f"file:{tmp_path / 'g.npz'}", "--fanouts", "4,3", "--batch", "16", "--batches", "2"]
    argv += [
        "--warmup",
        "1",
        "--repeats",
        "2",
        "--exclude",
        exclude,
        "--negatives",
        "binary:2",
        "--json",
        str(out_path),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "gglspeedup.bench", *argv], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout
    results = json.loads(out_path.read_text())
    assert results["command"] == "link" and results["negatives"] == "binary:2" and results["batch"] == 16
    rows = {row["name"]: row for row in results["results"]}
    ours = rows["gglspeedup"]
    assert ours["status"] == "ok" and ours["edges_per_s"] > 0 and len(ours["round_s"]) == 2
    if exclude == "reverse":
        free = rows["gglspeedup exclude=None"]
        assert free["status"] == "ok" and "exclusion_cost" in ours
        assert ours["exclusion_cost"] == pytest.approx(free["edges_per_s"] / ours["edges_per_s"] - 1)
    else:
        assert "gglspeedup exclude=None" not in rows and "exclusion_cost" not in ours
    if rows["dgl"]["status"] != "ok":
        assert rows["dgl"]["status"].startswith("unavailable: ")
    else:  # the same seeds and the same draws per hop: the edge counts agree closely
        assert rows["dgl"]["edges_per_batch"] == pytest.approx(ours["edges_per_batch"], rel=0.2)
    assert "exclusion cost" in printed and "ours/peer" in printed


def test_link_command_rejects_bad_options_before_loading():
    cases = [(["--negatives", "random"], "--negatives"), (["--batch", "0"], "--batch must be >= 1")]
    assert_rejects(main, ["link", "--graph", "file:/never/read.npz"], [*cases, (["--peers", "quiver"], "--peers")])


def test_dgl_edge_sampler_excludes_what_ours_excludes_when_installed():
    require_dgl()
    from gglspeedup.bench.link import _prepare_dgl, _prepare_ours
    from gglspeedup.device import as_device

    # a simple graph: DGL excludes the seed edge ids (and their reverses), we every parallel edge
    edges = np.unique(np.random.default_rng(4).integers(0, 80, size=(2, 600)), axis=1)
    edges = edges[:, edges[0] != edges[1]]
    graph = gg.CSRGraph.from_edge_index(np.concatenate([edges, edges[::-1, ::2]], axis=1), num_nodes=80)
    graph = gg.CSRGraph.from_edge_index(np.unique(graph_edges(graph), axis=1), num_nodes=80)
    rows = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), graph.degree())
    positions = edge_batches(graph, 30, 1, seed=1)[0]
    # one hop taking every neighbour is fully determined: both must drop exactly the same edges
    dgl_sample, dgl_convert, *_ = _prepare_dgl(
        graph, [-1], 0, as_device("cpu"), (None, 1), "reverse", reverse_positions(graph)
    )
    ours_sample, ours_convert, *_ = _prepare_ours(graph, rows, [-1], 0, as_device("cpu"), "auto", (None, 1), "reverse")
    assert dgl_sample(dgl_convert(positions)) == ours_sample(ours_convert(positions))

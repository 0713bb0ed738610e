"""``python -m gglspeedup.bench temporal`` on tiny settings: every contender of ours measured, the
ratios paired, sorted and unsorted rows drawing the same edges, peers measured or said unavailable."""

import json

import numpy as np
import pytest

from gglspeedup.bench import main
from gglspeedup.bench.temporal import TIME_RANGE, make_times


@pytest.mark.parametrize("kind", ["node", "edge"])
def test_temporal_command_runs_end_to_end(tmp_path, capsys, kind):
    out_path = tmp_path / "temporal.json"
    argv = ["temporal", "--graph", "powerlaw:3000:6", "--fanouts", "4,3", "--batch", "32", "--batches", "2"]
    argv += ["--warmup", "1", "--repeats", "3", "--time", kind, "--strategies", "uniform,last", "--json", str(out_path)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    results = json.loads(out_path.read_text())
    assert results["command"] == "temporal" and results["time"] == kind and results["strategies"] == ["uniform", "last"]
    rows = {row["name"]: row for row in results["results"]}
    ours = [
        "plain",
        "plain disjoint",
        "temporal uniform, sorted rows",
        "temporal last, sorted rows",
        "temporal uniform, unsorted rows",
        "temporal uniform, built in time order",
        "temporal last, built in time order",
    ]
    for name in ours:
        row = rows[name]
        assert row["status"] == "ok" and row["edges_per_s"] > 0 and len(row["round_s"]) == 3, name
        assert row["vs_plain"] > 0
    assert rows["plain"]["vs_plain"] == 1.0
    # The sampler sorts the unsorted graph's rows into the very graph given sorted: same draws
    sorted_rows, unsorted_rows = rows["temporal uniform, sorted rows"], rows["temporal uniform, unsorted rows"]
    assert sorted_rows["round_edges"] == unsorted_rows["round_edges"]
    for strategy in ("uniform", "last"):  # the same rows without edge ids: the same draws
        built = rows[f"temporal {strategy}, built in time order"]
        assert built["round_edges"] == rows[f"temporal {strategy}, sorted rows"]["round_edges"]
    assert all(sum(rows[name]["round_edges"]) > 0 for name in ours)
    for name in ("pyg temporal uniform", "pyg temporal last", "pyg plain", "dgl temporal"):
        assert rows[name]["status"] == "ok" or rows[name]["status"].startswith("unavailable: "), name
    if rows["pyg plain"]["status"] == "ok":
        assert rows["pyg plain"]["ours_vs_pyg"] == rows["plain"]["ours_vs_pyg"] > 0
    assert "vs plain" in printed and "temporal uniform, unsorted rows" in printed


def test_times_are_seeded_and_in_range():
    from gglspeedup.bench._common import load_graph

    graph, _ = load_graph("powerlaw:500:4")
    node = make_times(graph, "node", 3)
    edge = make_times(graph, "edge", 3)
    assert node.shape == (graph.num_nodes,) and edge.shape == (graph.num_edges,)
    assert node.dtype == edge.dtype == np.int64
    assert node.min() >= 0 and edge.max() < TIME_RANGE
    np.testing.assert_array_equal(node, make_times(graph, "node", 3))
    assert not np.array_equal(node, make_times(graph, "node", 4))


def test_temporal_command_rejects_bad_options_before_loading():
    never = ["temporal", "--graph", "file:/never/read.npz"]
    with pytest.raises(ValueError, match="--strategies"):
        main([*never, "--strategies", "uniform,latest"])
    with pytest.raises(ValueError, match="--batch must be >= 1"):
        main([*never, "--batch", "0"])
    with pytest.raises(ValueError, match="--peers"):
        main([*never, "--peers", "quiver"])
    with pytest.raises(SystemExit):
        main([*never, "--time", "wall"])

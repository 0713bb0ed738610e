"""bench pyg: PyG's loaders on PyG's sampler and on gglspeedup.pyg, and the conversion cost, end to end."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import gglspeedup as gg
from gglspeedup.bench import main

from conftest import assert_rejects


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench_pyg") / "g.npz"
    edges = np.random.default_rng(1).integers(0, 300, size=(2, 2400))
    gg.CSRGraph.from_edge_index(edges, num_nodes=300).save(path)
    return path


def test_pyg_command_times_every_contender_and_the_conversion(graph_file, tmp_path, capsys):
    out_path = tmp_path / "pyg.json"
    argv = ["pyg", "--graph", f"file:{graph_file}", "--fanouts", "4,3", "--batch", "32", "--batches", "2"]
    argv += ["--warmup", "1", "--repeats", "2", "--dim", "8", "--negatives", "triplet:2", "--json", str(out_path)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    results = json.loads(out_path.read_text())
    assert results["command"] == "pyg" and set(results["tasks"]) == {"node", "link"}
    for task, block in results["tasks"].items():
        rows = {row["name"]: row for row in block["results"]}
        assert list(rows) == ["pyg", "gglspeedup Sampler + Data", "gglspeedup Sampler + stores"]
        ours = [rows["gglspeedup Sampler + Data"], rows["gglspeedup Sampler + stores"]]
        assert all(row["status"] == "ok" and row["batches_per_s"] > 0 and len(row["round_s"]) == 2 for row in ours)
        # the same sampler and seeds (each round draws with new keys, so the median rounds may differ a little)
        assert ours[0]["edges_per_batch"] == pytest.approx(ours[1]["edges_per_batch"], rel=0.2)
        if rows["pyg"]["status"] == "ok":
            assert ours[0]["ratio_vs_pyg"] > 0
        else:
            assert rows["pyg"]["status"].startswith("unavailable: ") and "pyg-lib" in rows["pyg"]["status"]
        conversion = block["conversion"]
        assert conversion["sample_ms"] > 0 and conversion["convert_ms"] > 0 and conversion["convert_share"] > 0, task
    assert "conversion to PyG's records" in printed and "vs PyG's own" in printed


def test_pyg_command_rejects_bad_options_before_loading():
    cases = [(["--task", "graph"], "--task"), (["--negatives", "per_source:1"], "per_source")]
    assert_rejects(main, ["pyg", "--graph", "file:/never/read.npz"], [*cases, (["--dim", "0"], "--dim must be >= 1")])

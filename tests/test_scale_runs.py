"""The scale tooling runs end to end at CI size: bench build, bench scale and the papers-like demo."""

import json
import os

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.bench import main as bench_main
from gglspeedup.datasets.papers_like import PAPERS_NODES, load_papers_like, papers_like_features, papers_like_labels


def test_bench_build_checks_outputs_and_reports_the_speedup(tmp_path, capsys):
    out = tmp_path / "build.json"
    assert bench_main(["build", "--graph", "powerlaw:20000:8", "--repeats", "1", "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    names = [row["name"] for row in results["results"]]
    assert names == ["gglspeedup", "gglspeedup, no edge ids", "argsort (previous from_edge_index)"]
    assert all(row["median_s"] > 0 and row["peak_mb"] > 0 for row in results["results"])
    assert "x argsort" in capsys.readouterr().out


def test_bench_scale_reports_every_section(tmp_path, capsys):
    out = tmp_path / "scale.json"
    argv = ["scale", "--nodes", "6000", "--base-nodes", "3000", "--batches", "2", "--repeats", "1",
            "--feature-dim", "8", "--cache-size", "4K", "--folder", str(tmp_path), "--json", str(out)]  # fmt: skip
    assert bench_main(argv) == 0
    results = json.loads(out.read_text())
    assert results["build"]["built"] and results["build"]["peak_rss"] > 0
    assert results["graph"]["index_dtype"] == "int32"
    assert results["graph"]["bytes_per_edge_resident"] <= 4 + 8 * 6001 / results["graph"]["num_edges"] + 1e-9
    sampling = results["sampling"]
    assert sampling["big, mapped"]["edges_per_s"] > 0 and "of_base" in sampling["big, mapped"]
    assert {"sample, huge pages off", "gather, huge pages on"} <= set(results["huge_pages"])
    assert results["features"]["cold_gb_per_s"] > 0 and results["features"]["warm_gb_per_s"] > 0
    again = json.loads(out.read_text()) if bench_main([*argv[:-2], "--json", str(out)]) == 0 else None
    assert again is not None and not again["build"]["built"]  # the cached graph is reused, not rebuilt
    assert "disk gather" in capsys.readouterr().out


def test_bench_scale_rejects_bad_options_before_building(tmp_path, capsys):
    cases = [
        (["--memory", "lots"], "--memory must be a number"),  # failed in the build's child process
        (["--cache-size", "x"], "--cache-size must be a number"),  # these four: after both builds
        (["--feature-dim", "-1"], "--feature-dim must be >= 0"),
        (["--feature-dtype", "bogus"], "--feature-dtype must be a float dtype"),
    ]
    argv = ["scale", "--nodes", "6000", "--base-nodes", "3000", "--folder", str(tmp_path)]
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            bench_main([*argv, *extra])
    with pytest.raises(SystemExit) as done:  # a usage error on the flag (argparse's type)
        bench_main([*argv, "--seed", "-1"])
    assert done.value.code == 2 and "argument --seed: must be an int >= 0, got '-1'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing built
    (tmp_path / "notes").write_text("kept")
    with pytest.raises(ValueError, match=r"--folder must be a folder .*, got the file"):
        bench_main([*argv[:-1], str(tmp_path / "notes")])  # a FileExistsError traceback
    assert [path.name for path in tmp_path.iterdir()] == ["notes"] and (tmp_path / "notes").read_text() == "kept"


def test_papers_like_is_cached_and_its_features_match_their_labels(tmp_path):
    graph, built = load_papers_like(4000, 1, folder=tmp_path, memory="1M")
    assert built and graph.num_nodes == 4000 and 13 < graph.num_edges / 4000 < 15
    again, built_again = load_papers_like(4000, 1, folder=tmp_path)
    assert not built_again and np.array_equal(again.indices, graph.indices)
    with pytest.raises(TypeError, match=r"rebuild must be a bool \(True or False\), got str 'no'"):
        load_papers_like(4000, 1, folder=tmp_path, rebuild="no")  # bool("no") rebuilt it
    path, labels = papers_like_features(tmp_path / "x.npy", 4000, 16, num_classes=5, seed=2)
    table = np.load(path, mmap_mode="r")
    assert table.shape == (4000, 16) and table.dtype == np.float16 and labels.shape == (4000,)
    means = np.stack([np.asarray(table[labels == c], np.float32).mean(0) for c in range(5)])
    assert np.abs(means[:, None] - means[None]).max() > 0.5  # the classes are told apart by their rows
    assert PAPERS_NODES == 111_059_956
    with pytest.raises(ValueError, match=r"--graph 'papers-like:1:2:3': expected"):
        gg.datasets.spec.parse_spec("papers-like:1:2:3", graph_only=True)


def test_papers_like_caches_never_replace_a_users_files(tmp_path):
    taken = tmp_path / "papers-like-300-0"  # where the cache would put the graph: a user's folder
    taken.mkdir()
    np.save(taken / "x.npy", np.arange(3))
    with pytest.raises(FileExistsError, match=r"papers-like-300-0' is not a graph folder written by gglspeedup"):
        load_papers_like(300, 0, folder=tmp_path, memory="1M")
    assert os.listdir(taken) == ["x.npy"] and np.load(taken / "x.npy").tolist() == [0, 1, 2]
    features = tmp_path / "x.npy"
    np.save(features, np.ones(4))
    with pytest.raises(FileExistsError, match=r"x\.npy' already exists: papers_like_features writes a new file"):
        papers_like_features(features, 300, 4)
    assert np.load(features).tolist() == [1.0] * 4
    path, labels = papers_like_features(features, 300, 4, num_classes=5, seed=3, overwrite=True)
    assert np.load(path).shape == (300, 4)
    np.testing.assert_array_equal(labels, papers_like_labels(300, num_classes=5, seed=3))
    assert sorted(os.listdir(tmp_path)) == ["papers-like-300-0", "x.npy"]  # no temporary file left


def test_papers_like_demo_trains_and_reports_throughput_and_memory(tmp_path, capsys):
    from gglspeedup.examples import sage_papers_like

    result = sage_papers_like.run(
        ["--nodes", "5000", "--batches", "4", "--batch-size", "64", "--log-every", "2", "--folder", str(tmp_path),
         "--feature-dim", "16", "--cache-size", "8K", "--fanouts", "5,5", "--hidden", "16", "--prefetch", "1"]
    )  # fmt: skip
    assert result["batches"] == 4 and result["batches_per_s"] > 0 and result["peak_rss_gib"] > 0
    assert np.isfinite(result["last_loss"]) and 0 <= result["cache_hit_rate"] <= 1
    assert "peak RSS" in capsys.readouterr().out

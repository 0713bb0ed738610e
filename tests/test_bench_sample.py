"""The sampling benchmark: graph specs, seed batches, timing loop, the NumPy reference peer's
sampling invariants, the DGL peer when installed, and the command end to end on a tiny graph."""

import argparse
import json

import numpy as np
import pytest

from gglspeedup import CSRGraph
from gglspeedup.bench import _common, main, peers
from gglspeedup.bench._options import add_common_arguments
from gglspeedup.bench.peers import numpy_sample

from conftest import assert_rejects, require_dgl


def _powerlaw_graph(num_nodes=120, num_edges=1500, seed=3):
    """Skewed in-degrees (a few hubs, many short rows, some empty), duplicates and self loops."""
    rng = np.random.default_rng(seed)
    targets = np.minimum((rng.pareto(1.1, num_edges) * 3).astype(np.int64), num_nodes - 1)
    sources = rng.integers(0, num_nodes, num_edges)
    return CSRGraph.from_edge_index(np.stack([sources, targets]), num_nodes=num_nodes)


def _check_sample(graph, fanouts, seeds, out):
    """Every invariant of DESIGN.md's sampling contract that does not depend on the draws."""
    indptr, indices = graph.indptr, graph.indices
    edge_ids = np.arange(graph.num_edges) if graph.edge_ids is None else graph.edge_ids
    position_of = np.argsort(edge_ids)  # e_id -> CSR position
    n_id = np.asarray(out.n_id)
    assert n_id.dtype == np.int64
    np.testing.assert_array_equal(n_id[: len(seeds)], seeds)
    new = n_id[len(seeds) :]
    assert len(np.unique(new)) == len(new)
    assert not np.isin(new, seeds).any()
    assert len(out.adjs) == len(fanouts)
    num_targets = len(seeds)
    for adj, fanout in zip(out.adjs[::-1], fanouts):
        num_sources, size_targets = adj.size
        assert size_targets == num_targets
        source, target = np.asarray(adj.edge_index)
        positions = position_of[np.asarray(adj.e_id)]
        assert source.max(initial=-1) < num_sources and target.max(initial=-1) < num_targets
        # every sampled edge exists: it sits in its target's row and names the source node
        rows = n_id[target]
        assert ((indptr[rows] <= positions) & (positions < indptr[rows + 1])).all()
        np.testing.assert_array_equal(indices[positions], n_id[source])
        # min(k, deg) distinct edges per target, targets grouped in order
        degree = indptr[n_id[:num_targets] + 1] - indptr[n_id[:num_targets]]
        expected = degree if fanout == -1 else np.minimum(degree, fanout)
        np.testing.assert_array_equal(np.bincount(target, minlength=num_targets), expected)
        assert (np.diff(target) >= 0).all()
        pairs = target * graph.num_edges + positions
        assert len(np.unique(pairs)) == len(pairs)
        num_targets = num_sources
    assert num_targets == len(n_id)


@pytest.mark.parametrize("fanouts", [[3, 2], [25, 10], [1, 1, 1], [-1, 2], [2, -1]], ids=str)
def test_numpy_peer_obeys_the_sampling_contract(fanouts):
    graph = _powerlaw_graph()
    degree = graph.degree()
    # hubs (rejection branch), mid rows (sort branch), short and empty rows, a repeated seed
    seeds = np.array([0, 1, 2, int(np.argmin(degree)), 50, 1, 119], dtype=np.int64)
    for key in range(3):
        out = numpy_sample(graph.indptr, graph.indices, fanouts, seeds, np.random.default_rng(key), graph.edge_ids)
        _check_sample(graph, fanouts, seeds, out)


def test_numpy_peer_reports_edge_ids_and_handles_empty_batches():
    graph = CSRGraph.from_edge_index(np.array([[1, 2, 3, 0, 2], [0, 0, 1, 2, 3]]), num_nodes=5)
    out = numpy_sample(
        graph.indptr, graph.indices, [2], np.array([0, 1, 4]), np.random.default_rng(0), edge_ids=graph.edge_ids
    )
    _check_sample(graph, [2], np.array([0, 1, 4]), out)
    assert sorted(out.adjs[0].e_id.tolist()) == [0, 1, 2]  # columns of the caller's edge_index
    empty = numpy_sample(graph.indptr, graph.indices, [2, 2], np.array([], dtype=np.int64), np.random.default_rng(0))
    assert len(empty.n_id) == 0 and all(adj.edge_index.shape == (2, 0) for adj in empty.adjs)


@pytest.mark.parametrize("degree, fanout", [(10, 3), (40, 2)], ids=["sorted-keys", "rejection"])
def test_numpy_peer_draws_neighbours_uniformly(degree, fanout):
    from scipy.stats import chisquare

    graph = CSRGraph(np.array([0, degree]), np.zeros(degree, dtype=np.int64))
    draws = 4000
    out = numpy_sample(graph.indptr, graph.indices, [fanout], np.zeros(draws, dtype=np.int64), np.random.default_rng(7))
    counts = np.bincount(out.adjs[0].e_id, minlength=degree)
    assert counts.sum() == draws * fanout
    assert chisquare(counts).pvalue > 1e-4


def test_graph_specs_load_and_reject_clearly(tmp_path):
    graph = _powerlaw_graph()
    graph.save(tmp_path / "g.npz")
    loaded, info = _common.load_graph(f"file:{tmp_path / 'g.npz'}")
    np.testing.assert_array_equal(loaded.indices, graph.indices)
    assert info["num_nodes"] == 120 and info["num_edges"] == graph.num_edges
    _cora, info = _common.load_graph("cora")
    assert (info["num_nodes"], info["num_edges"]) == (2708, 10556)
    _powerlaw, info = _common.load_graph("powerlaw:1k:4")
    assert info["num_nodes"] == 1000 and 0 < info["num_edges"] <= 4000
    for spec, message in [
        ("nope", "not understood"),
        ("powerlaw:10", "powerlaw:NUM_NODES:AVG_DEGREE"),
        ("powerlaw:x:4", "NUM_NODES must be a number"),
        ("powerlaw:10:y", "AVG_DEGREE must be a number"),
        ("file:/does/not/exist.npz", "no such file"),
        ("cora:1", "takes no arguments"),
        ("", "non-empty"),
        # a dataset folder without its files was a FileNotFoundError traceback on the command line
        (f"ogb:{tmp_path / 'none'}", "--graph 'ogb:.*raw' not found: path must be an OGB dataset folder"),
        (f"reddit:{tmp_path}", "--graph 'reddit:.*reddit_data.npz' not found"),
    ]:
        with pytest.raises(ValueError, match=message):
            _common.load_graph(spec)


def test_options_parse_and_reject_clearly():
    assert _common.parse_fanouts("25, 10") == [25, 10]
    assert _common.parse_fanouts("15,10,-1") == [15, 10, -1]
    assert _common.parse_fanouts("25,0") == [25, 0]  # the sampler's rule everywhere: 0 samples no neighbours
    for bad in ("", "25,x", "2.5", "-2"):
        with pytest.raises(ValueError, match="--fanouts"):
            _common.parse_fanouts(bad)
    assert _common.parse_names(None, peers.PEERS) is None
    assert _common.parse_names("all", peers.PEERS) is None
    assert _common.parse_names("DGL,numpy,dgl", peers.PEERS) == ["dgl", "numpy"]
    with pytest.raises(ValueError, match="unknown: quiver"):
        _common.parse_names("dgl,quiver", peers.PEERS)
    with pytest.raises(ValueError, match="--threads"):
        _common.set_threads(0)


def test_seed_batches_are_distinct_deterministic_and_wrap(capsys):
    batches = _common.seed_batches(10, 4, 5, seed=1)
    assert [len(b) for b in batches] == [4] * 5 and all(b.dtype == np.int64 for b in batches)
    assert all(len(np.unique(b)) == 4 and b.min() >= 0 and b.max() < 10 for b in batches)
    assert len(np.unique(np.concatenate(batches[:2]))) == 8  # one permutation: no id repeats
    again = _common.seed_batches(10, 4, 5, seed=1)
    assert all((a == b).all() for a, b in zip(batches, again))
    assert capsys.readouterr().err == ""
    assert [len(b) for b in _common.seed_batches(3, 8, 2)] == [3, 3]  # shrunk to the graph, and said
    assert "note: --batch 8 > the graph's 3 nodes: batches of them" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--batch"):
        _common.seed_batches(10, 0, 1)


def test_contenders_are_timed_interleaved_after_their_warmup():
    calls = []

    def make(name, edges):
        return lambda batch: calls.append((name, batch)) or edges

    timings = _common.time_contenders(
        {"a": (make("a", 5), [1, 2], [0], None), "b": (make("b", 7), [1, 2], [0], None)}, rounds=2
    )
    # the warm-ups, then each round: every pass after one untimed warm-up batch of its own
    assert calls == [("a", 0), ("b", 0)] + [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)] * 2
    assert (timings["a"].edges, timings["b"].edges, timings["a"].batches) == (10, 14, 2)
    assert len(timings["a"].round_seconds) == 2 and timings["a"].seconds in timings["a"].round_seconds
    assert timings["a"].edges_per_s == pytest.approx(10 / timings["a"].seconds)
    assert timings["a"].best_edges_per_s == pytest.approx(10 / min(timings["a"].round_seconds))


def test_sample_command_runs_end_to_end_and_writes_json(tmp_path, capsys):
    _powerlaw_graph().save(tmp_path / "g.npz")
    out_path = tmp_path / "sample.json"
    argv = [
        "sample",
        "--graph",
        f"file:{tmp_path / 'g.npz'}",
        "--fanouts",
        "4,3",
        "--batch",
        "16",
        "--batches",
        "2",
        "--warmup",
        "1",
        "--repeats",
        "2",
        "--peers",
        "numpy,pyg",
        "--json",
        str(out_path),
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    results = json.loads(out_path.read_text())
    assert results["command"] == "sample" and results["fanouts"] == [4, 3] and results["batch"] == 16
    assert results["graph"]["num_nodes"] == 120
    assert {"cpu_count", "numba_threads"} <= set(results["machine"])
    rows = {row["name"]: row for row in results["results"]}
    assert list(rows) == ["gglspeedup", "numpy", "pyg"]
    for name in ("gglspeedup", "numpy"):
        row = rows[name]
        assert row["status"] == "ok", row
        assert row["edges_per_s"] > 0 and row["ms_per_batch"] > 0 and len(row["round_s"]) == 2
        assert row["ratio"] == pytest.approx(rows["gglspeedup"]["edges_per_s"] / row["edges_per_s"])
        assert row["best_edges_per_s"] >= row["edges_per_s"] and row["best_ratio"] > 0
    # both draw min(k, deg) per target, so hop 0 alone gives the same count; the totals stay close
    assert rows["numpy"]["edges_per_batch"] == pytest.approx(rows["gglspeedup"]["edges_per_batch"], rel=0.5)
    if rows["pyg"]["status"] != "ok":
        assert rows["pyg"]["status"].startswith("unavailable: ")
    assert "gglspeedup" in printed and "ours/peer" in printed and "numba_threads" in printed


def test_sample_command_rejects_bad_options_before_loading(tmp_path):
    cases = [(["--batch", "0"], "--batch must be >= 1"), (["--peers", "quiver"], "--peers")]
    assert_rejects(main, ["sample", "--graph", "file:/never/read.npz"], cases)


def test_an_unwritable_json_path_is_refused_before_the_run(tmp_path):
    # it was opened after the measurements: a typo in the folder lost the run to a traceback
    cases = [
        (["--json", str(tmp_path / "missing" / "out.json")], "--json: must name a file in a folder .*does not exist"),
        (["--json", str(tmp_path)], "--json: must name a file, but .* is a folder"),
        (["--json", str(tmp_path / "file.txt" / "out.json")], "--json: must name a file in a folder .*is not a folder"),
    ]
    (tmp_path / "file.txt").write_text("kept")
    assert_rejects(main, ["sample", "--graph", "file:/never/read.npz"], cases)
    assert (tmp_path / "file.txt").read_text() == "kept" and not (tmp_path / "missing").exists()


@pytest.mark.parametrize("command", ["sample", "link", "hetero"])
def test_fanouts_of_zero_sample_no_edges_and_report_no_ratio(tmp_path, command):
    # --fanouts 0 is a valid fanout (no neighbours): the ratios divided by its 0 edges/s and the
    # run ended in a ZeroDivisionError after its measurements; the table shows '-' instead
    _powerlaw_graph().save(tmp_path / "g.npz")
    graph = ["--dataset", "igbh-like:200"] if command == "hetero" else ["--graph", f"file:{tmp_path / 'g.npz'}"]
    out = tmp_path / "zero.json"
    argv = [command, *graph, "--fanouts", "0", "--batch", "8", "--batches", "1", "--warmup", "0", "--repeats", "1"]
    assert main([*argv, "--peers", "", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert rows and all(row["edges_per_batch"] == 0 and row["ratio"] is None for row in rows)
    assert all(row["best_ratio"] is None and row.get("exclusion_cost") is None for row in rows)


def test_empty_peers_measure_gglspeedup_alone(tmp_path):
    # what PeersMissing's message offers; it measured the numpy peer and listed dgl and pyg
    _powerlaw_graph().save(tmp_path / "g.npz")
    argv = ["sample", "--graph", f"file:{tmp_path / 'g.npz'}", "--fanouts", "2", "--batch", "8", "--batches", "1"]
    out = tmp_path / "alone.json"
    assert main([*argv, "--warmup", "0", "--repeats", "1", "--peers", "", "--json", str(out)]) == 0
    assert [row["name"] for row in json.loads(out.read_text())["results"]] == ["gglspeedup"]


def test_a_bad_option_on_the_command_line_is_a_message_and_status_2_not_a_traceback():
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    argv = [sys.executable, "-m", "gglspeedup.bench", "sample", "--graph", "file:/never/read.npz", "--batch", "0"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip() == "python -m gglspeedup.bench sample: error: --batch must be >= 1, got 0"


def test_a_cuda_device_without_a_gpu_is_a_message_and_status_1_not_a_traceback():
    import os
    import subprocess
    import sys

    from gglspeedup import _config

    if _config.HAS_CUPY_GPU or _config.HAS_NUMBA_CUDA:
        pytest.skip("a real GPU is usable here")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    argv = [sys.executable, "-m", "gglspeedup.bench", "sample", "--graph", "file:/never/read.npz", "--device", "cuda"]
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=root, env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.startswith("python -m gglspeedup.bench sample: device cuda:0 requested but no usable CUDA GPU")


def test_dgl_peer_samples_the_same_hops_when_installed():
    require_dgl()
    graph = _powerlaw_graph()
    seeds = np.array([0, 3, 50, 119], dtype=np.int64)
    one_hop = peers.prepare("dgl", graph, [3], seed=0)
    degree = graph.degree()[seeds]
    # one hop is fully determined by the degrees: min(k, deg) per seed
    assert one_hop.sample(one_hop.convert(seeds)) == int(np.minimum(degree, 3).sum())
    all_hops = peers.prepare("dgl", graph, [-1, -1], seed=0)
    reference = numpy_sample(graph.indptr, graph.indices, [-1, -1], seeds, np.random.default_rng(0))
    assert all_hops.sample(all_hops.convert(seeds)) == sum(len(adj.e_id) for adj in reference.adjs)


@pytest.mark.cuda
def test_sample_command_runs_on_a_cuda_device(tmp_path):
    _powerlaw_graph(num_nodes=12, num_edges=30).save(tmp_path / "g.npz")
    argv = [
        "sample",
        "--graph",
        f"file:{tmp_path / 'g.npz'}",
        "--fanouts",
        "2,1",
        "--batch",
        "2",
        "--batches",
        "1",
        "--warmup",
        "0",
        "--repeats",
        "1",
        "--peers",
        "numpy",
        "--device",
        "cuda:0",
        "--json",
        str(tmp_path / "s.json"),
    ]
    assert main(argv) == 0
    rows = {row["name"]: row for row in json.loads((tmp_path / "s.json").read_text())["results"]}
    assert rows["gglspeedup"]["status"] == "ok" and rows["numpy"]["status"] == "ok"
    assert rows["gglspeedup"]["edges_per_batch"] > 0


@pytest.mark.parametrize(
    "body, survives",
    [
        (
            "VALUE = 1\ndef load_graphbolt():\n"
            "    raise FileNotFoundError('no lib for this torch')\nload_graphbolt()\n",
            True,
        ),
        ("VALUE = 1\nimport not_a_module_anywhere_42\n", False),
    ],
    ids=["library-load-tolerated", "other-import-errors-raise"],
)
def test_graphbolt_hook_tolerates_only_the_native_library_load(tmp_path, body, survives):
    import importlib.util

    path = tmp_path / "fake_graphbolt.py"
    path.write_text(body)
    spec = importlib.util.spec_from_file_location("fake_graphbolt", path)
    loader = peers._GraphBoltTolerantLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    if survives:
        loader.exec_module(module)
        assert module.VALUE == 1 and "no lib" in module.GRAPHBOLT_LOAD_ERROR
    else:
        with pytest.raises(ImportError, match="not_a_module_anywhere_42"):
            loader.exec_module(module)


def test_values_the_library_refuses_are_usage_errors_naming_the_flag(capsys):
    # they reached the user as the library's ValueError naming its parameter (device, avg_degree,
    # lam) or as NumPy's "expected non-negative integer" for a negative seed, after the run began
    cases = [
        (["sample", "--device", "xx"], "argument --device: device must look like 'cpu', 'cuda' or 'cuda:<index>'"),
        (["link", "--device", "cuda:x"], "argument --device: device must look like"),
        (["gather", "--device", "xx"], "argument --device: device must look like"),
        (["sample", "--seed", "-1"], "argument --seed: must be an int >= 0, got '-1'"),
        (["gather", "--seed", "-1"], "argument --seed: must be an int >= 0, got '-1'"),
        (["attention-pooling", "--seed", "x"], "argument --seed: must be an int >= 0, got 'x'"),
        (["gather", "--avg-degree", "nan"], "argument --avg-degree: must be a finite number >= 0, got 'nan'"),
        (["gather", "--avg-degree", "-1"], "argument --avg-degree: must be >= 0, got '-1'"),
        (["attention-pooling", "--lam", "-1"], "argument --lam: must be >= 0, got '-1'"),
        (["attention-pooling", "--lam", "inf"], "argument --lam: must be a finite number >= 0, got 'inf'"),
        # refused only after the table was built
        (["gather", "--repeats", "0"], "argument --repeats: must be >= 1, got '0'"),
        (["gather", "--presample-batches", "-1"], "argument --presample-batches: must be >= 1, got '-1'"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as done:
            main(argv)
        err = capsys.readouterr().err
        assert done.value.code == 2 and message in err and "Traceback" not in err, (argv, err)
    parser = argparse.ArgumentParser()
    add_common_arguments(parser, "device", "seed")
    args = parser.parse_args(["--device", "cuda:1", "--seed", "7"])
    assert (args.device, args.seed) == ("cuda:1", 7)  # the text kept, the seed an int


def test_gather_refuses_a_batch_below_one_before_building_its_table(monkeypatch):
    # --batch 0 was the sampler's error after the table (--rows x --dim) was built
    import numpy as np

    def no_table(*args, **kwargs):
        raise AssertionError("the table was built before --batch was checked")

    monkeypatch.setattr(np.random, "default_rng", no_table)  # the table's generator
    with pytest.raises(ValueError, match="--batch must be >= 1, got 0"):
        main(["gather", "--batch", "0", "--batch-from", "sampler"])

"""The bundled TU sets and the graph-classification demo (a tiny configuration of the one command)."""

import importlib.util
import json
import os

import numpy as np
import pytest

from gglspeedup.datasets import load_tu

from conftest import load_file


@pytest.mark.parametrize(
    ("name", "graphs", "nodes", "directed_edges", "features", "classes"),
    [("enzymes", 600, 19580, 74564, 21, 6), ("proteins", 1113, 43471, 162088, 3, 2)],
)
def test_tu_sets_match_the_collections_counts(name, graphs, nodes, directed_edges, features, classes):
    data = load_tu(name)
    assert data.num_graphs == graphs and data.ptr[-1] == nodes and data.edge_index.shape == (2, directed_edges)
    assert data.x.shape == (nodes, features) and data.num_classes == classes
    assert np.bincount(data.y).min() > 0 and data.y.shape == (graphs,)
    graph_of = np.searchsorted(data.ptr, data.edge_index, side="right") - 1
    assert np.array_equal(graph_of[0], graph_of[1])  # edges stay inside their graph
    pairs = set(map(tuple, data.edge_index.T.tolist()))
    assert all((v, u) in pairs for u, v in list(pairs)[:1000])  # both directions
    np.testing.assert_array_equal(data.x[:, :3].argmax(1), data.node_label)


def test_subset_renumbers_graphs_nodes_and_edges():
    data = load_tu("proteins")
    part = data.subset([5, 2])
    sizes = np.diff(data.ptr)
    assert part.ptr.tolist() == [0, sizes[5], sizes[5] + sizes[2]]
    np.testing.assert_array_equal(part.x[: sizes[5]], data.x[data.ptr[5] : data.ptr[6]])
    inside = (data.edge_index[0] >= data.ptr[2]) & (data.edge_index[0] < data.ptr[3])
    assert (
        part.edge_index.shape[1]
        == inside.sum() + ((data.edge_index[0] >= data.ptr[5]) & (data.edge_index[0] < data.ptr[6])).sum()
    )
    assert part.y.tolist() == [data.y[5], data.y[2]]


def test_subset_refuses_ids_that_are_not_graphs_naming_the_range():
    data = load_tu("enzymes")
    for graphs, error, message in [
        ([-1], IndexError, r"graphs\[0\] = -1 is out of range \[0, num_graphs = 600\)"),  # no wrap-around
        ([3, 5000], IndexError, r"graphs\[1\] = 5000 is out of range \[0, num_graphs = 600\)"),
        ([1.7], TypeError, r"graphs must hold integers"),  # never truncated to graph 1
        ([[1, 2]], ValueError, r"graphs must be 1-D"),
        ([4, 7, 4], ValueError, r"graphs\[2\] = 4 repeats graphs\[0\]: subset takes each graph at most once"),
    ]:
        with pytest.raises(error, match=message):
            data.subset(graphs)
    empty = data.subset([])
    assert empty.ptr.tolist() == [0] and empty.x.shape == (0, 21) and empty.edge_index.shape == (2, 0)
    last = data.subset(np.array([599], np.int32))
    assert last.ptr[-1] == data.ptr[600] - data.ptr[599] == last.x.shape[0]


def test_stratified_folds_partition_every_graph_and_spread_classes():
    pytest.importorskip("torch")
    from gglspeedup.examples.tu_pooling import stratified_folds

    y = load_tu("enzymes").y
    folds = stratified_folds(y, 10, seed=0)
    assert np.array_equal(np.sort(np.concatenate(folds)), np.arange(y.shape[0]))
    for fold in folds:
        assert fold.shape[0] == 60 and np.bincount(y[fold], minlength=6).tolist() == [10] * 6


def test_tiny_demo_run_prints_the_table_and_writes_json_and_plot(capsys, tmp_path):
    pytest.importorskip("torch")
    demo = load_file("demos/attention_pooling_tu.py", "demo_tu")
    argv = ["--datasets", "proteins", "--max-folds", "1", "--epochs", "2", "--hidden", "16", "--batch-size", "64"]
    results = demo.main(argv + ["--no-progress", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert [row["mapping"] for row in results] == ["softmax", "sparsemax", "gfusedmax"]
    for row in results:
        assert row["dataset"] == "proteins" and len(row["fold_accuracy"]) == 1
        assert 0.5 <= row["accuracy_mean"] <= 1.0 and row["seconds_per_epoch"] > 0  # majority class: 59.6%
        assert f"proteins  {row['mapping']:<10}" in out
    with open(tmp_path / "tu_pooling.json") as handle:
        assert json.load(handle)["results"] == results
    if importlib.util.find_spec("matplotlib"):
        assert os.path.getsize(tmp_path / "tu_pooling.png") > 0


def test_values_the_model_would_refuse_are_usage_errors_naming_the_flag(capsys):
    # each reached the user after the data loaded, as the model's ValueError naming its parameter
    # (lam, gamma, output_size, heads), torch's ("Invalid learning rate") or NumPy's (a negative seed)
    from gglspeedup.examples.tu_pooling import parse_args

    cases = [
        (["--lam", "-1"], "argument --lam: must be >= 0.0, got '-1'"),
        (["--lam", "nan"], "argument --lam: must be a finite number >= 0.0, got 'nan'"),
        (["--lam", "inf"], "argument --lam: must be a finite number >= 0.0, got 'inf'"),
        (["--gamma", "0"], "argument --gamma: must be a finite number > 0.0, got '0'"),
        (["--lr", "-1"], "argument --lr: must be a finite number > 0.0, got '-1'"),
        (["--lr", "inf"], "argument --lr: must be a finite number > 0.0, got 'inf'"),
        (["--hidden", "0"], "argument --hidden: must be >= 1, got '0'"),
        (["--heads", "0"], "argument --heads: must be >= 1, got '0'"),
        (["--batch-size", "0"], "argument --batch-size: must be >= 1, got '0'"),
        (["--epochs", "0"], "argument --epochs: must be >= 1, got '0'"),
        (["--max-folds", "0"], "argument --max-folds: must be >= 1, got '0'"),
        (["--folds", "1"], "argument --folds: must be >= 2, got '1'"),
        (["--weight-decay", "-1"], "argument --weight-decay: must be >= 0.0, got '-1'"),
        (["--seed", "-1"], "argument --seed: must be >= 0, got '-1'"),
        (["--torch-threads", "-1"], "argument --torch-threads: must be >= 0, got '-1'"),
        (["--hidden", "4", "--heads", "5"], "--heads must be at most --hidden (4): every head pools a column; got 5"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as done:
            parse_args(argv)
        err = capsys.readouterr().err
        assert done.value.code == 2 and message in err, (argv, err)
    args = parse_args(["--lam", "0", "--gamma", "0.5", "--hidden", "4", "--heads", "4"])
    assert (args.lam, args.gamma, args.heads) == (0.0, 0.5, 4)

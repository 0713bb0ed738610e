"""The bundled temporal graph (UC Irvine messages), its converter, and the temporal link demo."""

import json
import os

import numpy as np
import pytest

from gglspeedup import datasets
from gglspeedup.datasets.temporal import chronological_split, load_uci_messages

from conftest import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "gglspeedup", "data")


@pytest.fixture(scope="module")
def events():
    return load_uci_messages()


def _tool():
    return load_file("tools/convert_uci_messages.py")


def test_uci_messages_shapes_ids_and_sorted_times(events):
    assert events.num_nodes == 1899 and events.num_events == 59835
    for array in (events.src, events.dst, events.time):
        assert array.dtype == np.int64 and array.shape == (59835,)
    assert (np.diff(events.time) >= 0).all()
    assert str(np.datetime64(int(events.time[0]), "s")) == "2004-04-15T05:56:01"
    assert str(np.datetime64(int(events.time[-1]), "s")) == "2004-10-25T22:52:22"
    ids = np.concatenate((events.src, events.dst))
    assert np.array_equal(np.unique(ids), np.arange(1899))  # every user has an event
    assert not (events.src == events.dst).any()
    assert len(set(zip(events.src.tolist(), events.dst.tolist()))) == 20296  # distinct directed pairs


def test_uci_messages_licence_travels_with_the_file():
    assert os.path.getsize(os.path.join(DATA, "uci_messages.npz")) < 1_000_000
    with open(os.path.join(DATA, "LICENSE-uci-messages.md"), encoding="utf-8") as handle:
        text = handle.read()
    for needle in (
        "CC BY-SA 2.0 DE",
        "Opsahl",
        "Kunegis",
        "chengw07/NetWalk",
        "Creative Commons Attribution-ShareAlike",
    ):
        assert needle in text, needle


def test_node_time_is_each_users_first_event(events):
    first = events.node_time()
    expected = np.full(events.num_nodes, np.iinfo(np.int64).max)
    for src, dst, t in zip(events.src.tolist(), events.dst.tolist(), events.time.tolist()):
        expected[src] = min(expected[src], t)
        expected[dst] = min(expected[dst], t)
    assert np.array_equal(first, expected)
    assert (np.diff(first) >= 0).all()  # ids are numbered in order of first appearance


def test_graph_stores_each_chosen_message_both_ways_with_its_time(events):
    chosen = np.arange(0, events.num_events, 7)
    graph, edge_time = events.graph(chosen)
    k = len(chosen)
    assert graph.num_nodes == 1899 and graph.num_edges == 2 * k and edge_time.shape == (2 * k,)
    dst = np.repeat(np.arange(graph.num_nodes), np.diff(np.asarray(graph.indptr)))
    e_id = np.asarray(graph.edge_ids)
    src = np.asarray(graph.indices)
    event = chosen[e_id % k]
    forward = e_id < k
    assert np.array_equal(src[forward], events.src[event[forward]])
    assert np.array_equal(dst[forward], events.dst[event[forward]])
    assert np.array_equal(src[~forward], events.dst[event[~forward]])
    assert np.array_equal(dst[~forward], events.src[event[~forward]])
    assert np.array_equal(edge_time[e_id], events.time[event])
    directed, directed_time = events.graph(chosen, undirected=False)
    assert directed.num_edges == k and np.array_equal(directed_time, events.time[chosen])


def test_chronological_split_partitions_in_time_order():
    split = chronological_split(1000, 0.15, 0.15)
    assert [len(split[p]) for p in ("train", "val", "test")] == [700, 150, 150]
    assert np.array_equal(np.concatenate([split[p] for p in ("train", "val", "test")]), np.arange(1000))
    for bad in (0.0, 1.0, -0.1, True, "0.1"):
        with pytest.raises(ValueError, match="val must be a share in"):
            chronological_split(10, bad, 0.1)
    with pytest.raises(ValueError, match="val \\+ test must leave events"):
        chronological_split(10, 0.5, 0.5)
    # int() read these: 5.7 as 5 events, "10" and True as counts, the events themselves failed in int()
    for bad in (5.7, "10", True, load_uci_messages()):
        with pytest.raises(TypeError, match=r"num_events must be an int"):
            chronological_split(bad)
    with pytest.raises(ValueError, match=r"num_events must be >= 0, got -3"):
        chronological_split(-3)  # an empty split before


def test_load_uci_messages_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"uci_messages\.npz' not found"):
        datasets.load_uci_messages(tmp_path)


def test_converter_reads_konect_lines_into_sorted_zero_based_events(tmp_path):
    tool = _tool()
    (tmp_path / "out.opsahl-ucsocial").write_text("% asym positive\n% 4 3 3\n1 2 1 50\n3 1 1 20\n2 3 1 50\n1 3 1 20\n")
    (tmp_path / "README.opsahl-ucsocial").write_text("a README\n")
    arrays = tool.read_uci_messages(str(tmp_path), expected_sha256=None, num_nodes=3)
    assert arrays["src"].tolist() == [0, 2, 0, 1] and arrays["dst"].tolist() == [2, 0, 1, 2]
    assert arrays["time"].tolist() == [20, 20, 50, 50] and int(arrays["num_nodes"]) == 3
    with pytest.raises(ValueError, match="sha256"):
        tool.read_uci_messages(str(tmp_path))
    with pytest.raises(ValueError, match=r"not exactly 1\.\.4"):
        tool.read_uci_messages(str(tmp_path), expected_sha256=None, num_nodes=4)
    npz, licence = tool.convert(str(tmp_path), str(tmp_path / "out"), expected_sha256=None, num_nodes=3)
    loaded = load_uci_messages(tmp_path / "out")
    assert loaded.num_nodes == 3 and loaded.src.tolist() == [0, 2, 0, 1] and loaded.time.tolist() == [20, 20, 50, 50]
    with open(licence, encoding="utf-8") as handle:
        text = handle.read()
    assert "a README" in text and "4 messages between 3 users" in text and os.path.basename(npz) == "uci_messages.npz"


def _demo_args(*extra):
    from gglspeedup.examples import temporal_links

    base = ["--max-events", "1500", "--epochs", "1", "--mrr-queries", "20", "--mrr-negatives", "5"]
    return temporal_links, temporal_links.build_parser().parse_args(base + ["--fanouts", "3,2", *extra])


def test_demo_queries_never_see_their_own_message_or_the_test_period():
    temporal_links, args = _demo_args()
    task = temporal_links.TemporalLinkTask(args)
    time = task.events.time
    for part in ("train", "val", "test"):
        index = task.split[part]
        seed_time = task.query_time("respect", index, part)
        assert (seed_time < time[index]).all()
        assert task.query_time("ignore", index, part) is None
    assert (task.query_time("respect", task.split["test"], "test") <= time[task.split["val"][-1]]).all()
    node_time = task.events.node_time()
    for part in ("val", "test"):
        assert (node_time[task.eval_negatives[part]] <= time[task.split[part]]).all()
        queries, candidates = task.mrr[part]
        assert candidates.shape == (20, 5) and (node_time[candidates] <= time[queries][:, None]).all()


def test_demo_runs_both_samplers_on_tiny_settings(tmp_path):
    pytest.importorskip("torch")
    temporal_links, _ = _demo_args()
    out = tmp_path / "metrics.json"
    argv = ["--max-events", "1500", "--epochs", "1", "--mrr-queries", "20", "--mrr-negatives", "5"]
    result = temporal_links.run(argv + ["--fanouts", "3,2", "--no-progress", "--json", str(out)])
    saved = json.loads(out.read_text())
    for mode in ("respect", "ignore"):
        for metric in ("val_auc", "test_auc", "val_mrr", "test_mrr"):
            assert 0.0 <= result[mode][metric] <= 1.0 and saved[mode][metric] == result[mode][metric]
        assert result[mode]["best_epoch"] == 1 and result[mode]["sampled_edges_per_s"] > 0


def test_demo_script_is_a_shim_over_the_example(capsys):
    module = load_file("demos/temporal_links_torch.py", "demo_temporal_links_torch")
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert all(option in text for option in ("--time", "--strategy", "--fanouts", "--mrr-negatives", "--json"))

"""Regression tests of issue 19's bad-input items: each failed (wrong rows, a bare error out of
NumPy or a kernel, an unchecked option) before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup import compat, datasets
from gglspeedup.device import parse_size

from conftest import to_host


def _graph(num_nodes=30, seed=0):
    rng = np.random.default_rng(seed)
    return gg.CSRGraph.from_edge_index(rng.integers(0, num_nodes, (2, 6 * num_nodes)), num_nodes=num_nodes)


# ------------------------------------------------------------------ item 4: out overlapping a table


@pytest.mark.parametrize("where", ["head", "middle", "whole"])
def test_gather_refuses_an_out_inside_the_feature_table(where):
    x = np.arange(40 * 4, dtype=np.float32).reshape(40, 4)
    store = gg.FeatureStore(x)
    out = {"head": x[:4], "middle": x[10:14], "whole": x.reshape(-1)[:16].reshape(4, 4)}[where]
    before = x.copy()
    with pytest.raises(ValueError, match="out shares memory with the store's feature table"):
        store.gather([5, 6, 7, 8], out=out)
    np.testing.assert_array_equal(x, before)  # nothing written


def test_gather_refuses_an_out_inside_a_disk_tables_mapping_or_ram_cache(tmp_path):
    x = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    np.save(tmp_path / "x.npy", x)
    store = gg.FeatureStore.from_npy(tmp_path / "x.npy", cache_size=16 * 32, policy=np.arange(64)[::-1])
    assert store.num_cached == 16
    with pytest.raises(ValueError, match="RAM cache"):
        store.gather(np.arange(4), out=store._tier.cache.view(np.float32)[:4])
    writable = np.load(tmp_path / "x.npy", mmap_mode="r+")
    mapped = gg.FeatureStore(writable, cache_size=16 * 32, policy=np.arange(64))
    with pytest.raises(ValueError, match="feature table"):
        mapped.gather(np.arange(4), out=writable[40:44])


def test_separate_buffers_and_a_loaders_pooled_buffers_are_accepted():
    rng = np.random.default_rng(0)
    x = rng.random((50, 6)).astype(np.float32)
    store = gg.FeatureStore(x)
    ids = rng.integers(0, 50, 7)
    np.testing.assert_array_equal(store.gather(ids, out=np.empty((7, 6), np.float32)), x[ids])
    staging = np.empty((20, 6), np.float32)  # two outs cut from one buffer of the caller's: fine
    np.testing.assert_array_equal(store.gather(ids, out=staging[:7]), x[ids])
    np.testing.assert_array_equal(store.gather(ids, out=staging[7:14]), x[ids])
    graph = _graph(50)
    loader = gg.NodeLoader(gg.NeighborSampler(graph, [3]), store, np.arange(50), batch_size=8, prefetch=2)
    for _ in range(2):  # the second epoch reuses pooled buffers
        for batch in loader:
            np.testing.assert_array_equal(batch.x.numpy(), x[batch.n_id.numpy()])
    assert loader.stats()["buffers_reused"] > 0


@pytest.mark.cuda
def test_gpu_tiers_refuse_an_out_inside_their_tables():
    x = np.arange(16 * 4, dtype=np.float32).reshape(16, 4)
    store = gg.FeatureStore(x, device="cuda:0", cache_size=8 * 4 * 4, policy=np.arange(16))  # half cached
    xp = store.device.xp  # CuPy on a GPU; NumPy on the simulator, whose device memory is host memory
    for name, table in store._tier.sources():
        inside = table.reshape(-1).view(np.float32)[:8].reshape(2, 4)
        if not isinstance(inside, xp.ndarray):  # a GPU's host tier: refused as host memory first
            with pytest.raises(TypeError, match="out must be a CuPy array on device cuda:0"):
                store.gather([0, 1], out=inside)
            continue
        with pytest.raises(ValueError, match=f"out shares memory with the store's {name}"):
            store.gather([0, 1], out=inside)
    np.testing.assert_array_equal(to_host(store.gather([5, 6], out=xp.empty((2, 4), np.float32))), x[[5, 6]])


# ------------------------------------------------------------------ item 5: the size grammar


@pytest.mark.parametrize("text", ["1iB", "iB", "1 iB", "1KiBB", "1Bi", "B", "1.5 GiBs"])
def test_parse_size_refuses_what_the_grammar_does_not_allow(text):
    with pytest.raises(ValueError, match="size must be a number with an optional K/M/G/T unit"):
        parse_size(text)


@pytest.mark.parametrize(
    "text, expected", [("1B", 1), ("64", 64), ("1KiB", 1024), ("1kb", 1024), ("2M", 2 << 20), ("1.5GiB", 3 << 29)]
)
def test_parse_size_reads_the_grammar(text, expected):
    assert parse_size(text) == expected


# ------------------------------------------------------------------ item 6: presample options on the CPU


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"num_batches": -1}, ValueError, r"presample\['num_batches'\] must be >= 1"),
        ({"num_batches": "x"}, TypeError, r"presample\['num_batches'\] must be an int"),
        ({"batch_size": 0}, ValueError, r"presample\['batch_size'\] must be >= 1"),
        ({"fanouts": [0.5]}, TypeError, r"presample\['fanouts'\]\[0\]"),
        ({"fanouts": 5}, TypeError, r"presample\['fanouts'\] must be a list"),
        ({"seeds": [10**9]}, ValueError, r"presample\['seeds'\]\[0\] = 1000000000 is out of range"),
        ({"seeds": []}, ValueError, r"presample\['seeds'\] must not be empty"),
        ({"seed": -2}, ValueError, r"presample\['seed'\] must be >= 0"),
    ],
)
@pytest.mark.parametrize("cache_size", [0, "1M"])
def test_presample_options_are_checked_when_the_cpu_store_is_built(options, error, message, cache_size):
    graph = _graph()
    x = np.zeros((30, 4), np.float32)
    with pytest.raises(error, match=message):
        gg.FeatureStore(x, cache_size=cache_size, policy="presample", graph=graph, presample=options)


def test_typed_presample_options_are_checked_when_the_store_is_built():
    graph, x, _, _ = datasets.load("wordnet")
    with pytest.raises(ValueError, match=r"presample\['num_batches'\] must be >= 1"):
        gg.HeteroFeatureStore(x, policy="presample", graph=graph, presample={"num_batches": 0})
    with pytest.raises(ValueError, match=r"presample\['seeds'\] names node type 'nope'"):
        gg.HeteroFeatureStore(x, policy="presample", graph=graph, presample={"seeds": {"nope": [0]}})


# ------------------------------------------------------------------ item 7: fanouts the output cannot hold


def test_a_fanout_no_output_could_hold_is_refused_before_any_kernel():
    graph = _graph()
    with pytest.raises(ValueError, match=r"fanouts\[0\] = 1000000000000 draws up to 1000000000000 edges"):
        gg.NeighborSampler(graph, [10**12], replace=True)
    with pytest.raises(ValueError, match=r"fanouts\[1\] = 1000000000000"):
        gg.NeighborSampler(graph, [2, 2], replace=True).with_fanouts([2, 10**12])
    hetero = gg.HeteroGraph({("a", "r", "a"): np.array([[0, 1], [1, 0]])}, {"a": 2})
    with pytest.raises(ValueError, match=r"fanouts\[\('a', 'r', 'a'\)\]\[0\] = 1000000000000"):
        gg.HeteroNeighborSampler(hetero, [10**12], replace=True)
    # Without replacement a row draws at most its degree: a huge fanout is "every neighbour".
    out = gg.NeighborSampler(graph, [10**12]).sample(np.arange(30), key=0)
    every = gg.NeighborSampler(graph, [-1]).sample(np.arange(30), key=0)
    np.testing.assert_array_equal(np.sort(out.adjs[0].e_id), np.sort(every.adjs[0].e_id))


def test_a_batch_whose_hop_output_cannot_fit_is_refused_naming_the_hop():
    graph = _graph()
    sampler = gg.NeighborSampler(graph, [10**8], replace=True)  # one target's draws fit; 30,000 do not
    with pytest.raises(ValueError, match=r"fanouts\[0\] = 100000000 draws up to 3000000000000 edges at hop 0"):
        sampler.sample(np.repeat(np.arange(30), 1000))


# ------------------------------------------------------------------ item 8: the compatibility names


@pytest.mark.parametrize(
    "sizes, error", [(25, TypeError), (None, TypeError), ("25", TypeError), ([25, -2], ValueError)]
)
def test_set_size_names_its_argument(sizes, error):
    graph = _graph()
    for sampler in (compat.GPUSampler(-1, graph), compat.MultiGPUSampler(-1, graph)):
        with pytest.raises(error, match=r"^sizes"):
            sampler.set_size(sizes)


def test_multi_cgpu_feature_names_a_bad_rank():
    with pytest.raises(TypeError, match=r"rank must be an int, got str 'a'"):
        compat.Multi_CGPUFeature("a", [-1])


# ------------------------------------------------------------------ item 9: readers on missing files


def test_read_ogb_node_names_the_file_it_looked_for_and_what_the_format_needs(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"raw' not found: .*edge, node-feat and node-label.*does not exist"):
        datasets.read_ogb_node(tmp_path / "absent")
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "edge.csv").write_text("0,1\n")
    (tmp_path / "raw" / "node_feat.csv").write_text("0.5\n0.5\n")  # misnamed: node-feat
    with pytest.raises(FileNotFoundError, match=r"node-feat.csv.gz' \(or .csv\) not found.*holds \['edge.csv'"):
        datasets.read_ogb_node(tmp_path)


def test_read_reddit_names_the_file_it_looked_for_and_what_the_format_needs(tmp_path):
    np.savez(tmp_path / "reddit-data.npz", feature=np.zeros((2, 2)))  # misnamed
    with pytest.raises(FileNotFoundError, match=r"reddit_data.npz' not found: .*reddit_graph.npz.*'reddit-data.npz'"):
        datasets.read_reddit(tmp_path)


# ------------------------------------------------------------------ items 11 and 12: the demo's report


def _history(rows):
    from gglspeedup.examples.loop import History

    history = History()
    history.rows = [
        dict(
            epoch=i + 1,
            loss=1.0,
            train_acc=0.5,
            val_acc=0.5,
            seconds=s,
            sample_share=share,
            wait_share=0.0,
            seeds=140,
            edges=e,
        )
        for i, (s, share, e) in enumerate(rows)
    ]
    return history


def test_the_first_epoch_with_its_compilation_is_reported_apart_from_the_throughput(capsys):
    from argparse import Namespace

    from gglspeedup.examples.loop import report

    history = _history([(20.0, 0.93, 2800), (0.2, 0.25, 2900), (0.3, 0.5, 3100)])
    totals = {"test_acc": 0.5, "best_epoch": 1, "best_val_acc": 0.5, **history.totals()}
    result = report(totals, history, Namespace(out=None), name="x.png", title="")
    assert result["first_epoch_s"] == 20.0 and result["steady_epochs"] == [2, 3]
    assert result["seconds"] == pytest.approx(0.5) and result["edges"] == 6000
    assert result["edges_per_s"] == pytest.approx(12000) and result["sample_share"] == pytest.approx(0.4)
    printed = capsys.readouterr().out
    assert "first epoch 20.0 s, kernel compilation" in printed
    assert "throughput over epochs 2-3 (0.50 s): 560 training seeds/s, 6,000 sampled edges (12 k edges/s)" in printed
    assert "busy for 40% of the epoch time" in printed and "0.00 M" not in printed
    single = _history([(2.0, 0.5, 1500)])
    assert single.totals()["steady_epochs"] == [1] and single.totals()["edges_per_s"] == 750


def test_rates_keep_three_digits_at_every_scale():
    from gglspeedup.examples.loop import rate

    assert [rate(x) for x in (0, 7.25, 1234.5, 1.5e6, 2.25e9)] == ["0", "7.25", "1.23 k", "1.5 M", "2.25 G"]


def test_progress_bars_are_off_when_the_output_is_piped(monkeypatch, capsys):
    import io

    from gglspeedup.examples import loop

    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    assert not loop.on_terminal()
    assert list(loop.progress(range(3), total=3, desc="training")) == [0, 1, 2]
    assert piped.getvalue() == ""  # no carriage-return frames between the epoch lines

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdout", Tty())
    monkeypatch.setattr("sys.stderr", Tty())
    assert loop.on_terminal()
    assert loop.progress(range(3), total=3).disable is False


# ------------------------------------------------------------------ item 14: what the fuzz module found


def test_the_fuzz_findings_raise_named_errors():
    with pytest.raises(ValueError, match=r"direction must be 'in' or 'out'"):
        gg.CSRGraph.from_edge_index([[0], [1]], 2, np.array([], np.int32))  # was NumPy's truth-value error
    with pytest.raises(TypeError, match=r"path must be a str or os.PathLike"):
        gg.CSRGraph.load(3)  # was an OverflowError or a bare TypeError
    store = gg.HeteroFeatureStore({"a": np.ones((3, 2), np.float32)})
    with pytest.raises(ValueError, match=r"ids names unknown node type 'z'"):
        store.gather({"z": [0]})


def test_pyg_arguments_are_named_as_pyg_names_them():
    pytest.importorskip("torch_geometric")
    from gglspeedup import pyg

    graph_store, feature_store = pyg.GraphStore(_graph()), pyg.FeatureStore({"x": np.zeros((30, 2), np.float32)})
    with pytest.raises(ValueError, match=r"num_neighbors\[0\] must be an int >= 0 or -1"):
        pyg.NeighborLoader((feature_store, graph_store), [-2], batch_size=4)
    with pytest.raises(TypeError, match=r"edge_label_index must be a \(2, num_pairs\) tensor"):
        pyg.LinkNeighborLoader((feature_store, graph_store), [2], edge_label_index=False, batch_size=4)

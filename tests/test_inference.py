"""Layer-wise full-graph inference (gglspeedup.inference.layerwise) against a full-batch forward."""

from __future__ import annotations

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.sampling import Adj

torch = pytest.importorskip("torch")
from gglspeedup.examples.torch_models import GAT, SAGE, GATConv, SAGEConv  # noqa: E402

from conftest import assert_rejects, assert_same_bits, gpu_hardware, load_file  # noqa: E402


def _full_adjs(graph, num_layers):
    """Every edge of ``graph`` as one block per layer (sources and targets over all nodes)."""
    degree = np.diff(graph.indptr)
    source = torch.from_numpy(graph.indices.astype(np.int64))
    target = torch.from_numpy(np.repeat(np.arange(graph.num_nodes), degree))
    edge_index = torch.stack([source, target])
    return [Adj(edge_index, None, (graph.num_nodes, graph.num_nodes))] * num_layers


def _random_graph(num_nodes=60, num_edges=400, seed=0):
    rng = np.random.default_rng(seed)
    edge_index = rng.integers(0, num_nodes, size=(2, num_edges))
    edge_index[:, :5] = 3  # duplicate self loops
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes)  # node 59.. may be isolated


def _model(kind, in_dim, out_dim, num_layers=3):
    torch.manual_seed(0)
    if kind == "sage":
        return SAGE(in_dim, 16, out_dim, num_layers=num_layers, conv=SAGEConv).eval()
    return GAT(in_dim, 8, out_dim, num_layers=num_layers, heads=2, conv=GATConv).eval()


def _activation(kind):
    return torch.relu if kind == "sage" else torch.nn.functional.elu


@pytest.mark.parametrize("kind", ["sage", "gat"])
@pytest.mark.parametrize("batch_size", [1, 7, 1000])
def test_random_graph_equals_full_batch(kind, batch_size):
    graph = _random_graph()
    x = np.random.default_rng(1).standard_normal((graph.num_nodes, 5)).astype(np.float32)
    model = _model(kind, 5, 3)
    with torch.no_grad():
        expected = model(torch.from_numpy(x), _full_adjs(graph, 3)).numpy()
        out = gg.inference.layerwise(model.convs, graph, x, batch_size=batch_size, activation=_activation(kind))
    assert out.shape == expected.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_planetoid_equals_full_batch(name):
    graph, x, _, _ = gg.datasets.load(name)
    model = _model("sage", x.shape[1], 7, num_layers=2)
    with torch.no_grad():
        expected = model(torch.from_numpy(np.asarray(x)), _full_adjs(graph, 2)).numpy()
        out = gg.inference.layerwise(model, graph, x, batch_size=512, activation=torch.relu)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_batch_size_independent_and_out_dir(tmp_path):
    graph = _random_graph(seed=3)
    x = np.random.default_rng(2).standard_normal((graph.num_nodes, 4)).astype(np.float32)
    model = _model("sage", 4, 2)
    with torch.no_grad():
        small = gg.inference.layerwise(model.convs, graph, x, batch_size=5, activation=torch.relu)
        large = gg.inference.layerwise(model.convs, graph, x, batch_size=64, activation=torch.relu)
        on_disk = gg.inference.layerwise(
            model.convs, graph, x, batch_size=9, activation=torch.relu, out_dir=tmp_path, cache_size="1K"
        )
    np.testing.assert_allclose(small, large, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(on_disk, large, rtol=1e-6, atol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["layer0.npy", "layer1.npy", "layer2.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "layer2.npy"), on_disk)


def test_out_dir_never_rewrites_an_earlier_output_or_an_input(tmp_path):
    graph = _random_graph(seed=8)
    x = np.random.default_rng(9).standard_normal((graph.num_nodes, 4)).astype(np.float32)
    model = _model("sage", 4, 2, num_layers=2)
    with torch.no_grad():
        first = gg.inference.layerwise(model.convs, graph, x, activation=torch.relu, out_dir=tmp_path)
        kept = np.array(first)
        with pytest.raises(FileExistsError, match=r"layer0\.npy' already exists: layerwise writes its outputs to new"):
            gg.inference.layerwise(model.convs, graph, 2 * x, activation=torch.relu, out_dir=tmp_path)
        np.testing.assert_array_equal(first, kept)  # the first call's (mapped) output is intact
        mapped = tmp_path / "inputs"
        mapped.mkdir()
        np.save(mapped / "layer0.npy", x)
        x_mapped = np.load(mapped / "layer0.npy", mmap_mode="r")
        with pytest.raises(FileExistsError, match=r"inputs/layer0\.npy' already exists"):
            gg.inference.layerwise(model.convs, graph, x_mapped, activation=torch.relu, out_dir=mapped)
    np.testing.assert_array_equal(np.load(mapped / "layer0.npy"), x)  # the input was never written
    assert sorted(p.name for p in mapped.iterdir()) == ["layer0.npy"]


def test_a_failed_call_removes_only_the_files_it_made(tmp_path):
    graph = _random_graph(seed=10)
    x = np.ones((graph.num_nodes, 3), np.float32)
    (tmp_path / "notes.txt").write_text("mine")

    def layer0(block, edge_index):  # layer 1 fails after layer 0 wrote its file
        return torch.ones((block[1].shape[0], 2))

    with pytest.raises(ValueError, match=r"layers\[1\] must return a 2-D output"):
        gg.inference.layerwise([layer0, lambda block, ei: block[1][:1]], graph, x, out_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("kind", ["sage", "gat"])  # GATConv's reshape(0, -1) failed in torch
@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_a_graph_without_nodes_gives_every_layers_width(num_layers, kind, tmp_path):
    graph = gg.CSRGraph([0], [])
    model = _model(kind, 4, 3, num_layers=num_layers)
    with torch.no_grad():
        out = gg.inference.layerwise(model.convs, graph, np.zeros((0, 4), np.float32), activation=torch.relu)
        on_disk = gg.inference.layerwise(model.convs, graph, np.zeros((0, 4), np.float32), out_dir=tmp_path)
    assert out.shape == (0, 3) and out.dtype == np.float32 and on_disk.shape == (0, 3)


def test_a_layer_returning_a_list_is_a_type_error_naming_it():
    graph = _random_graph(seed=11)
    x = np.ones((graph.num_nodes, 3), np.float32)
    conv = SAGEConv(3, 2)
    with torch.no_grad():
        for layers, activation, message in [
            ([lambda block, ei: [1.0, 2.0]], None, r"layers\[0\] must return an array or tensor .* got list"),
            ([conv, lambda block, ei: (block[1],)], None, r"layers\[1\] must return an array or tensor .* got tuple"),
            ([lambda block, ei: [1.0], conv], torch.relu, r"layers\[0\] must return an array or tensor .* got list"),
            ([conv, conv], lambda h: h.tolist(), r"activation must return an array or tensor .* got list"),
            ([lambda block, ei: None], None, r"layers\[0\] must return an array or tensor .* got NoneType"),
        ]:
            with pytest.raises(TypeError, match=message):
                gg.inference.layerwise(layers, graph, x, activation=activation)


def test_scipy_graph_store_input_and_progress(capsys):
    graph = _random_graph(seed=4)
    x = np.random.default_rng(5).standard_normal((graph.num_nodes, 4)).astype(np.float32)
    model = _model("sage", 4, 2, num_layers=2)
    with torch.no_grad():
        expected = gg.inference.layerwise(model.convs, graph, x, batch_size=16, activation=torch.relu)
        out = gg.inference.layerwise(
            model.convs, graph.to_scipy(), gg.FeatureStore(x), batch_size=16, activation=torch.relu, progress=True
        )
    np.testing.assert_array_equal(out, expected)
    assert "layer 2/2" in capsys.readouterr().err


def test_gpu_path_matches_cpu(device):
    graph = _random_graph(num_nodes=12, num_edges=30, seed=6)
    x = np.random.default_rng(7).standard_normal((graph.num_nodes, 3)).astype(np.float32)
    model = _model("sage", 3, 2, num_layers=2)
    with torch.no_grad():
        cpu = gg.inference.layerwise(model.convs, graph, x, batch_size=5, activation=torch.relu)
        if gpu_hardware(device):  # the layers run where the batches are (the simulator's are host arrays)
            model.to(device)
        out = gg.inference.layerwise(
            model.convs, graph, x, batch_size=5, activation=torch.relu, device=device, cache_size=3 * 12
        )
    assert isinstance(out, np.ndarray)
    assert_same_bits(device, out, cpu)  # a GPU's matrix products round their own way


def test_bad_inputs(tmp_path):
    graph = _random_graph()
    x = np.zeros((graph.num_nodes, 5), dtype=np.float32)
    conv = SAGEConv(5, 2)
    with pytest.raises(ValueError, match="layers must hold at least one layer"):
        gg.inference.layerwise([], graph, x)
    with pytest.raises(TypeError, match=r"layers\[1\] must be callable"):
        gg.inference.layerwise([conv, 3], graph, x)
    with pytest.raises(TypeError, match="layers must be a sequence"):
        gg.inference.layerwise(5, graph, x)
    with pytest.raises(TypeError, match="activation must be callable"):
        gg.inference.layerwise([conv], graph, x, activation="relu")
    with pytest.raises(ValueError, match="batch_size"):
        gg.inference.layerwise([conv], graph, x, batch_size=0)
    with pytest.raises(TypeError, match="progress must be a bool, got str"):
        gg.inference.layerwise([conv], graph, x, progress="no")
    with pytest.raises(TypeError, match="batch_size"):
        gg.inference.layerwise([conv], graph, x, batch_size=2.5)
    with pytest.raises(ValueError, match=r"one row per graph node \(60\), got 59"):
        gg.inference.layerwise([conv], graph, x[:59])
    with pytest.raises(TypeError, match="graph must be a CSRGraph"):
        gg.inference.layerwise([conv], [[0, 1], [1, 0]], x)
    if not gg.device.gpu_available() and not gg.device.as_device("cuda").simulated:
        # fused, the first layer imported CuPy: "ModuleNotFoundError: No module named 'cupy'"
        with pytest.raises(gg.device.DeviceUnavailableError, match=r"device cuda:0 requested but no usable CUDA GPU"):
            gg.inference.layerwise([conv], graph, x, device="cuda", out_dir=tmp_path)
        assert not any(tmp_path.iterdir())
    # len() was taken as the row count: a path's characters ("got 14 rows"), a dict's keys; None raised
    # "object of type 'NoneType' has no len()"
    for wrong, shown in [("features.npy", r"str \(a path: pass np.load\(path, mmap_mode='r'\)\)"), ({"x": x}, "dict"),
                         (None, "NoneType"), (5, "int")]:  # fmt: skip
        with pytest.raises(TypeError, match=r"x must be an array or tensor \(num_nodes, dim\), a FeatureStore or a "
                           r"list of rows, got " + shown):  # fmt: skip
            gg.inference.layerwise([conv], graph, wrong)
    bipartite = gg.CSRGraph.from_edge_index([[4, 3], [1, 0]], num_nodes=2, num_src_nodes=5)
    for fused in (True, False):  # fused, sources 3 and 4 were read past x's 2 rows
        with pytest.raises(ValueError, match=r"graph is bipartite \(num_src_nodes = 5, num_nodes = 2\)"):
            gg.inference.layerwise([conv], bipartite, x[:2], fused=fused)
    with pytest.raises(ValueError, match="out_dir must be an existing directory"):
        gg.inference.layerwise([conv], graph, x, out_dir=tmp_path / "missing")
    with pytest.raises(ValueError, match=r"layers\[0\] must return a 2-D output with one row per target"):
        gg.inference.layerwise([lambda block, edge_index: block[0]], graph, x, batch_size=8)
    # a later batch of another dtype is refused, not cast into the first batch's table (1.5 -> 1)
    calls = []

    def drifting(block, edge_index):
        calls.append(1)
        return np.full((len(block[1]), 2), 1.5 if len(calls) > 1 else 1, np.float64 if len(calls) > 1 else np.int64)

    with pytest.raises(ValueError, match=r"layers\[0\] returned dtype float64, earlier batches int64"):
        gg.inference.layerwise([drifting], graph, x, batch_size=8, backend="numpy")


def test_sage_demo_layerwise_matches_full_neighbourhood_test_accuracy():

    demo = load_file("demos/train_sage_torch.py", "train_sage_torch_layerwise")
    argv = "--dataset powerlaw:300:6 --epochs 1 --fanouts 4,3 --batch-size 64 --hidden 8 --no-progress --threads 1"
    result = demo.main([*argv.split(), "--device", "cpu", "--prefetch", "0", "--layerwise"])
    # the demo's test batches take every neighbour of every hop: the same outputs as layer-wise
    assert result["layerwise_test_acc"] == result["test_acc"]
    assert 0.0 <= result["sampled_test_acc"] <= 1.0


def test_bench_inference_tiny(tmp_path, capsys):
    import json

    from gglspeedup.bench import main

    path = tmp_path / "inference.json"
    argv = ["inference", "--graph", "powerlaw:400:6", "--layers", "2", "--dim", "8", "--hidden", "8"]
    main([*argv, "--out", "4", "--batch-size", "64", "--threads", "1", "--json", str(path)])
    results = json.loads(path.read_text())
    (row,) = results["rows"]
    assert row["contender"] == "gglspeedup" and row["nodes_per_s"] > 0
    assert row["bound_mib"] == round(2 * 400 * 8 * 4 / 2**20, 1)
    assert row["peak_rss_mib"] >= row["rss_before_mib"] > 0
    assert "nodes/s (x layers)" in capsys.readouterr().out


def test_bench_inference_runs_on_a_graph_smaller_than_its_warm_up_graph(tmp_path):
    # the warm-up graph had 300 nodes whatever the graph: below that, its x[:300] was short and the
    # run stopped with "x must have one row per graph node (300), got 200 rows"
    import json

    from gglspeedup.bench import main

    path = tmp_path / "small.json"
    argv = ["inference", "--graph", "powerlaw:200:4", "--layers", "2", "--dim", "4", "--hidden", "4", "--out", "2"]
    (tmp_path / "tables").mkdir()
    extra = ["--out-dir", str(tmp_path / "tables")]
    assert main([*argv, "--batch-size", "64", "--peers", "", "--json", str(path), *extra]) == 0
    (row,) = json.loads(path.read_text())["rows"]
    assert row["contender"] == "gglspeedup" and row["nodes_per_s"] > 0
    # every run's layerwise-* folder holds its layer tables (kept, as --out-dir says); none is left empty
    assert all(
        sorted(p.name for p in f.iterdir()) == ["layer0.npy", "layer1.npy"] for f in (tmp_path / "tables").iterdir()
    )


def test_bench_inference_rejects_bad_options_before_loading():
    from gglspeedup.bench import main

    cases = [
        (["--dim", "0"], "--dim must be >= 1, got 0"),  # zero widths ran and reported nodes/s
        (["--hidden", "0"], "--hidden must be >= 1, got 0"),
        (["--out", "0"], "--out must be >= 1, got 0"),
        (["--layers", "0"], "--layers must be >= 1, got 0"),  # these two failed after the graph build
        (["--batch-size", "0"], "--batch-size must be >= 1, got 0"),
        # a FileNotFoundError / NotADirectoryError traceback after the graph build
        (["--out-dir", "/never/made"], "--out-dir must be an existing folder, got '/never/made', which does not exist"),
        (["--out-dir", __file__], "--out-dir must be an existing folder, got .*, which is not a folder"),
    ]
    assert_rejects(main, ["inference", "--graph", "file:/never/read.npz", "--peers", ""], cases)

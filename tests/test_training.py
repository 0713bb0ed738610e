"""Training on Cora with every framework: the loss falls and accuracy clears a modest bar; the
main job (``python -m gglspeedup.demo``) reaches GraphSAGE's usual accuracy."""

import importlib.util
import os

import numpy as np
import pytest

from conftest import load_file

HAS_PYG = importlib.util.find_spec("torch_geometric") is not None
FAST = ["--no-progress", "--threads", "1", "--prefetch", "1"]


def load_demo(name):
    return load_file(f"demos/{name}.py", f"demo_{name}")


@pytest.mark.parametrize(
    "script, module, epochs, bar",
    [
        ("train_sage_torch", "torch", 5, 0.5),
        ("train_gat_torch", "torch", 8, 0.5),  # attention starts slower (7 classes: chance is 0.14)
        ("train_sage_tensorflow", "tensorflow", 5, 0.5),
        ("train_sage_paddle", "paddle", 5, 0.5),
    ],
)
@pytest.mark.parametrize("layers", ["default", "pyg"])
def test_training_on_cora_lowers_the_loss_and_learns(script, module, epochs, bar, layers, tmp_path, capsys):
    pytest.importorskip(module)
    if layers == "pyg" and (module != "torch" or not HAS_PYG):
        pytest.skip("--pyg-layers: the torch demos, with torch_geometric installed")
    extra = ["--pyg-layers"] if layers == "pyg" else []
    result = load_demo(script).main(FAST + extra + ["--epochs", str(epochs), "--out", str(tmp_path)])
    out = capsys.readouterr().out
    losses = [float(line.split("loss ")[1].split()[0]) for line in out.splitlines() if line.startswith("epoch")]
    assert len(losses) == epochs and losses[-1] < 0.9 * losses[0], losses
    if module == "torch":  # the demos' own layers unless asked, whether or not PyG is installed (issue 39)
        assert ("torch_geometric" in out) == (layers == "pyg") and ("plain torch" in out) == (layers == "default")
    assert result["test_acc"] >= bar, result
    assert "sample+gather" in out and "test accuracy" in out
    assert os.path.isfile(result["plot"]) and result["plot"].startswith(str(tmp_path))


def test_plain_torch_sage_layer_matches_a_numpy_reference():
    torch = pytest.importorskip("torch")
    from gglspeedup.examples.torch_models import SAGEConv

    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3)).astype(np.float32)
    edge_index = np.array([[1, 2, 3, 5, 4], [0, 0, 1, 1, 2]])  # targets 0..3 (3 has no neighbour)
    conv = SAGEConv(3, 2)
    out = conv((torch.from_numpy(x), torch.from_numpy(x[:4])), torch.from_numpy(edge_index)).detach().numpy()
    w_l, b_l = conv.lin_l.weight.detach().numpy(), conv.lin_l.bias.detach().numpy()
    w_r = conv.lin_r.weight.detach().numpy()
    for target in range(4):
        sources = edge_index[0, edge_index[1] == target]
        mean = x[sources].mean(axis=0) if len(sources) else np.zeros(3, np.float32)
        np.testing.assert_allclose(out[target], mean @ w_l.T + b_l + x[target] @ w_r.T, rtol=1e-5, atol=1e-6)


def test_plain_torch_gat_layer_matches_a_numpy_reference():
    torch = pytest.importorskip("torch")
    from gglspeedup.examples.torch_models import GATConv

    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    edge_index = np.array([[2, 3, 4, 4], [0, 0, 1, 0]])
    conv = GATConv(4, 3, heads=2).eval()
    out = conv((torch.from_numpy(x), torch.from_numpy(x[:2])), torch.from_numpy(edge_index)).detach().numpy()
    h = (x @ conv.lin.weight.detach().numpy().T).reshape(5, 2, 3)
    a_s, a_t = conv.att_src.detach().numpy()[0], conv.att_dst.detach().numpy()[0]
    for target in range(2):
        sources = np.append(edge_index[0, edge_index[1] == target], target)  # plus the self loop
        logits = (h[sources] * a_s).sum(-1) + (h[target] * a_t).sum(-1)
        logits = np.where(logits > 0, logits, 0.2 * logits)
        alpha = np.exp(logits - logits.max(0)) / np.exp(logits - logits.max(0)).sum(0)
        expected = (alpha[:, :, None] * h[sources]).sum(0).reshape(-1) + conv.bias.detach().numpy()
        np.testing.assert_allclose(out[target], expected, rtol=1e-5, atol=1e-6)


def test_plain_layers_equal_pyg_layers_with_the_same_weights():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    from gglspeedup.examples.torch_models import SAGEConv

    torch.manual_seed(0)
    x = torch.randn(7, 5)
    edge_index = torch.tensor([[3, 4, 5, 6, 6], [0, 0, 1, 2, 0]])
    ours, theirs = SAGEConv(5, 4), pyg.SAGEConv(5, 4)
    theirs.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours((x, x[:3]), edge_index), theirs((x, x[:3]), edge_index))


@pytest.mark.slow
def test_main_job_reaches_graphsage_accuracy_on_cora(tmp_path, capsys):
    from gglspeedup import demo

    result = demo.run(["--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert result["test_acc"] >= 0.78, out
    assert os.path.isfile(tmp_path / "gglspeedup-demo.png")
    assert "test accuracy" in out and "training seeds/s" in out and str(tmp_path) in out
    assert result["seeds_per_s"] > 0 and result["edges_per_s"] > 0

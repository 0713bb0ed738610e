"""The layer's fused CPU path (standardise, map and pool in one kernel per direction) against the
general path (torch operations around the batched maps): outputs and every gradient (features,
both linear maps, lam, gamma) equal to rounding, gradcheck of the fused Function, float32, and
the errors bad input gets before the kernel runs."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gglspeedup.attention import AttentionPooling, graph_batch  # noqa: E402
from gglspeedup.attention.pooling._layer import pool_layer  # noqa: E402

# a one-node graph, an edgeless graph, a graph whose nodes share their features (equal scores:
# std 0), then random graphs with edges
SIZES = [1, 4, 3, 6, 7, 5]


def batch_inputs(seed, features=6, dtype=torch.float64, ties=True):
    rng = np.random.default_rng(seed)
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    edges = []
    for g, n in enumerate(SIZES):
        if g in (0, 1):
            continue
        upper = np.triu(rng.random((n, n)), 1) >= 0.5
        edges.append(np.stack(np.nonzero(upper)) + ptr[g])
    x = torch.tensor(rng.random((ptr[-1], features)), dtype=dtype)
    if ties:
        x[ptr[2] : ptr[3]] = x[ptr[2]]
    return x.requires_grad_(), np.concatenate(edges, axis=1)


def both_paths(layer, x, edges):
    batch = graph_batch(None, edges, sizes=SIZES, num_nodes=x.shape[0])
    fused = layer(x, sizes=SIZES, edge_index=edges)
    composed = layer._forward_composed(x, batch)
    grad = torch.rand_like(fused)
    inputs = [x, *(p for p in layer.parameters() if p.requires_grad)]
    return (fused, composed), [torch.autograd.grad(y, inputs, grad) for y in (fused, composed)]


@pytest.mark.parametrize("norm", [True, False], ids=["norm", "raw"])
@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("mapping", ["softmax", "sparsemax", "gfusedmax"])
@pytest.mark.slow
def test_fused_layer_equals_the_composed_layer(mapping, heads, norm):
    torch.manual_seed(heads)
    x, edges = batch_inputs(heads)
    layer = AttentionPooling(6, 7, mapping, norm=norm, heads=heads, lam=0.4, gamma=0.9)
    layer = layer.double()
    if mapping != "softmax":
        layer.gamma.requires_grad_(True)
    if mapping == "gfusedmax":
        layer.lam.requires_grad_(True)
    (fused, composed), (grads, expected) = both_paths(layer, x, edges)
    torch.testing.assert_close(fused, composed, atol=1e-13, rtol=0)
    for got, want in zip(grads, expected):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("mapping", ["softmax", "sparsemax"])
def test_fused_layer_reads_parametrized_linear_maps(mapping):
    # torch.nn.utils.parametrize (weight norm, spectral norm, ...) moves a weight out of the
    # Linear's _parameters into a property: the fast path must read it there, and its gradient
    # must reach the parametrization's own tensor
    from torch.nn.utils import parametrize

    class Doubled(torch.nn.Module):
        def forward(self, weight):
            return 2.0 * weight

    torch.manual_seed(3)
    x, edges = batch_inputs(1)
    plain = AttentionPooling(6, 7, mapping, heads=1).double()
    layer = AttentionPooling(6, 7, mapping, heads=1).double()
    layer.load_state_dict(plain.state_dict())
    with torch.no_grad():
        layer.proj_func.weight.mul_(0.5)
        layer.score_func.bias.mul_(0.5)
    parametrize.register_parametrization(layer.proj_func, "weight", Doubled())
    parametrize.register_parametrization(layer.score_func, "bias", Doubled())
    out = layer(x, sizes=SIZES, edge_index=edges)
    torch.testing.assert_close(out, plain(x, sizes=SIZES, edge_index=edges), atol=1e-13, rtol=0)
    out.sum().backward()
    original = layer.proj_func.parametrizations.weight.original
    assert original.grad is not None and torch.isfinite(original.grad).all()
    assert layer.score_func.parametrizations.bias.original.grad is not None


def test_fused_layer_with_activations_and_in_float32():
    torch.manual_seed(5)
    x, edges = batch_inputs(5)
    layer = AttentionPooling(6, 4, "gfusedmax", lam=0.3, score_activation=torch.tanh, proj_activation=torch.relu)
    layer = layer.double()
    (fused, composed), (grads, expected) = both_paths(layer, x, edges)
    torch.testing.assert_close(fused, composed, atol=1e-13, rtol=0)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)
    single = AttentionPooling(6, 4, "sparsemax", heads=2)
    # no equal scores here: torch's float32 standardisation of equal scores divides its rounding
    # noise by itself (the fused path, in float64, sees std 0 exactly)
    x32, _ = batch_inputs(6, dtype=torch.float32, ties=False)
    (fused, composed), (grads, expected) = both_paths(single, x32, edges)
    assert fused.dtype == torch.float32
    torch.testing.assert_close(fused, composed, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("norm", [True, False], ids=["norm", "raw"])
@pytest.mark.parametrize("mapping", ["softmax", "sparsemax", "gfusedmax"])
def test_gradcheck_fused_layer(mapping, norm):
    rng = np.random.default_rng(7)
    x, edges = batch_inputs(7)
    batch = graph_batch(None, edges, sizes=SIZES, num_nodes=x.shape[0])
    nodes, bounds = x.shape[0], np.array([0, 2, 5], np.int64)
    # no equal scores: standardising them is not differentiable there (the tests above compare the
    # two paths' gradients in that case)
    scores = torch.tensor(rng.normal(size=(nodes, 2)), requires_grad=True)
    proj = torch.tensor(rng.normal(size=(nodes, 5)), requires_grad=True)
    lam = torch.tensor([0.3, 0.05], dtype=torch.float64, requires_grad=True)
    gamma = torch.tensor([0.7, 1.6], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda s, p, l_, g_: pool_layer(s, p, batch, mapping, norm, l_, g_, bounds), (scores, proj, lam, gamma)
    )
    # one tensor [scores | proj] (the layer's joined linear map), one gradient
    both = torch.cat([scores, proj], dim=1).detach().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda b, l_, g_: pool_layer(b, None, batch, mapping, norm, l_, g_, bounds), (both, lam, gamma)
    )


def test_fused_layer_rejects_bad_input():
    x, edges = batch_inputs(8)
    layer = AttentionPooling(6, 3, "gfusedmax", lam=0.5).double()
    bad = x.detach().clone()
    bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match="scores must be finite"):
        layer(bad, sizes=SIZES, edge_index=edges)
    with pytest.raises(ValueError, match="edge_index"):
        layer(x, sizes=SIZES)
    with torch.no_grad():
        layer.lam.fill_(-1.0)
    with pytest.raises(ValueError, match="lam"):
        layer(x, sizes=SIZES, edge_index=edges)


@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("activation", [None, torch.tanh])
def test_softmax_layer_names_a_non_finite_score_found_from_its_sums(norm, dtype, activation):
    # softmax's kernel checks each graph's sum of scores, not a scan of them first
    x, _ = batch_inputs(8, dtype=dtype)
    layer = AttentionPooling(6, 3, "softmax", norm=norm, score_activation=activation).to(dtype)
    bad = x.detach().clone()
    bad[5, 2] = float("nan")
    with pytest.raises(ValueError, match=r"scores must be finite, got scores\[5\] = nan"):
        layer(bad, sizes=SIZES)


@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softmax_layer_names_a_score_its_bias_makes_infinite(norm, dtype):
    # finite features and products: the bias, added inside the kernel, makes every score infinite
    x, _ = batch_inputs(8, dtype=dtype)
    layer = AttentionPooling(6, 3, "softmax", norm=norm).to(dtype)
    with torch.no_grad():
        layer.score_func.bias.fill_(float("inf"))
    with pytest.raises(ValueError, match=r"scores must be finite, got scores\[0\] = inf"):
        layer(x, sizes=SIZES)


def test_softmax_layer_takes_finite_float64_scores_whose_sum_overflows():
    # the sums flag a graph; the scores themselves are then checked, and they are finite
    x, _ = batch_inputs(8)
    layer = AttentionPooling(6, 3, "softmax", norm=False).double()
    with torch.no_grad():
        layer.score_func.weight.zero_()
        layer.score_func.bias.fill_(1e308)
    out = layer(x, sizes=SIZES)
    batch = graph_batch(None, None, sizes=SIZES, num_nodes=x.shape[0])
    assert torch.equal(out, layer._forward_composed(x, batch))


@pytest.mark.parametrize("mapping", ["sparsemax", "gfusedmax"])
def test_layer_driver_refuses_a_bias_outside_softmax(mapping):
    # only softmax's kernel adds the bias: another map's kernel would silently leave it out
    from gglspeedup.attention.pooling._kernels.cpu import CPUPoolingDriver

    batch = graph_batch(None, [[0, 2], [1, 3]], sizes=[2, 3])
    scores = np.zeros((5, 3), np.float32)
    out = np.empty((2, 2), np.float32)
    one = np.ones(1)
    with pytest.raises(ValueError, match="softmax layer's kernel only"):
        CPUPoolingDriver().layer_forward(
            mapping, True, batch.arrays, scores, scores, 1, np.array([0, 2]), one, one, out, np.zeros(3, np.float32)
        )


def test_layer_driver_refuses_a_bias_of_another_dtype():
    from gglspeedup.attention.pooling._kernels.cpu import CPUPoolingDriver

    batch = graph_batch(None, None, sizes=[2, 3])
    scores = np.zeros((5, 3), np.float32)
    with pytest.raises(ValueError, match="in the scores' dtype float32"):
        CPUPoolingDriver().layer_forward(
            "softmax", True, batch.arrays, scores, scores, 1, np.array([0, 2]), np.zeros(0), np.zeros(0),
            np.empty((2, 2), np.float32), np.zeros(3),
        )  # fmt: skip

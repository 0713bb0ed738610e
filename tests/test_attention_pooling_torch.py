"""The torch maps: gradcheck in float64 for scores, lam and gamma (shared or per head), dtypes,
and the errors bad input gets before any kernel runs."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gglspeedup.attention import (  # noqa: E402
    fused_lasso,
    gfusedmax,
    gfusedmax_numpy,
    graph_batch,
    softmax,
    sparsemax,
)

SIZES = [1, 0, 5, 7, 3, 4]
EDGES = [
    np.zeros((0, 2), np.int64),
    np.zeros((0, 2), np.int64),
    np.array([[0, 1], [1, 2], [2, 3], [3, 4], [0, 4], [4, 0]]),
    np.array([[0, 1], [1, 2], [3, 4], [4, 5], [5, 6], [2, 6], [6, 6]]),
    np.zeros((0, 2), np.int64),  # edgeless
    np.array([[0, 1], [1, 2], [2, 3]]),
]


def scores(heads, seed=0):
    rng = np.random.default_rng(seed)
    shape = (sum(SIZES),) if heads == 0 else (sum(SIZES), heads)
    return torch.tensor(rng.standard_normal(shape) * 2, dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("heads", [0, 2], ids=["1-D", "2 heads"])
def test_gradcheck_every_map(heads):
    x = scores(heads)
    per = max(heads, 1)
    lam = torch.tensor([0.31, 0.07][:per] if heads else 0.31, dtype=torch.float64, requires_grad=True)
    gamma = torch.tensor([0.8, 1.9][:per] if heads else 0.8, dtype=torch.float64, requires_grad=True)
    shared_lam = torch.tensor(0.45, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda s, lam_, g: gfusedmax(s, sizes=SIZES, edge_index=EDGES, lam=lam_, gamma=g), (x, lam, gamma)
    )
    assert torch.autograd.gradcheck(
        lambda s, lam_: gfusedmax(s, sizes=SIZES, edge_index=EDGES, lam=lam_), (x, shared_lam)
    )
    assert torch.autograd.gradcheck(lambda s, lam_: fused_lasso(s, sizes=SIZES, edge_index=EDGES, lam=lam_), (x, lam))
    assert torch.autograd.gradcheck(lambda s, g: sparsemax(s, sizes=SIZES, gamma=g), (x, gamma))
    assert torch.autograd.gradcheck(lambda s: softmax(s, sizes=SIZES), (x,))


def test_torch_maps_equal_the_numpy_entry_points_and_keep_the_dtype():
    x = scores(3, seed=1)
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    expected = gfusedmax_numpy(x.detach().numpy(), ptr, EDGES, lam=0.2, gamma=1.5).output
    np.testing.assert_array_equal(gfusedmax(x, ptr, EDGES, lam=0.2, gamma=1.5).detach().numpy(), expected)
    single = gfusedmax(x.detach().float(), ptr, EDGES, lam=0.2, gamma=1.5)
    assert single.dtype == torch.float32 and single.shape == x.shape
    np.testing.assert_allclose(single.numpy(), expected, atol=1e-6)
    batch = graph_batch(ptr, EDGES)
    np.testing.assert_array_equal(gfusedmax(x, batch, lam=0.2, gamma=1.5).detach().numpy(), expected)


def test_float32_gradients_come_back_in_float32():
    x = scores(0).detach().float().requires_grad_()
    lam = torch.tensor(0.5, requires_grad=True)
    gfusedmax(x, sizes=SIZES, edge_index=EDGES, lam=lam).pow(2).sum().backward()
    assert x.grad.dtype == torch.float32 and lam.grad.dtype == torch.float32 and lam.grad.shape == ()


def test_weights_sum_to_one_per_graph_and_head():
    x = scores(2)
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    for weights in (softmax(x, ptr), sparsemax(x, ptr), gfusedmax(x, ptr, EDGES, lam=0.5)):
        sums = torch.zeros(len(SIZES), 2, dtype=torch.float64).index_add_(
            0, torch.repeat_interleave(torch.arange(len(SIZES)), torch.tensor(SIZES)), weights.detach()
        )
        expected = torch.tensor([[1.0, 1.0] if n else [0.0, 0.0] for n in SIZES], dtype=torch.float64)
        torch.testing.assert_close(sums, expected)


def test_bad_input_raises_naming_the_argument():
    x = scores(0)
    n = x.shape[0]
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    with pytest.raises(ValueError, match=r"ptr must cover the scores: ptr\[-1\] = 20 nodes, but the scores have 21"):
        softmax(torch.zeros(n + 1, dtype=torch.float64), ptr)
    with pytest.raises(ValueError, match="ptr must start at 0"):
        softmax(x, ptr + 1)
    with pytest.raises(ValueError, match=r"ptr must not decrease: ptr\[2\]"):
        softmax(x, [0, 5, 3, n])
    with pytest.raises(ValueError, match="exactly one"):
        softmax(x)
    with pytest.raises(ValueError, match=r"sizes must be >= 0, got sizes\[1\] = -1"):
        softmax(x, sizes=[n + 1, -1])
    with pytest.raises(ValueError, match=r"edge_index\[:, 1\] = \(0, 5\) joins graph 0 and graph 2"):
        gfusedmax(x, ptr, np.array([[0, 0], [0, 5]]))
    with pytest.raises(IndexError, match=r"edge_index\[1, 0\] = 20 is out of range \[0, num_nodes = 20\)"):
        gfusedmax(x, ptr, np.array([[0], [20]]))
    with pytest.raises(IndexError, match=r"edge_index\[0, 0\] = -1 is out of range"):
        gfusedmax(x, ptr, np.array([[-1], [0]]))
    bad_local = [e.copy() for e in EDGES]
    bad_local[2] = np.array([[0, 5]])
    with pytest.raises(IndexError, match=r"edge_index\[2\]\[0, 1\] = 5 is out of range \[0, size of graph 2 = 5\)"):
        gfusedmax(x, ptr, bad_local)
    with pytest.raises(ValueError, match=r"edge_index must have shape \(2, E\)"):
        gfusedmax(x, ptr, np.zeros((3, 4), np.int64))
    with pytest.raises(ValueError, match="needs the graphs' edges"):
        gfusedmax(x, ptr)
    with pytest.raises(ValueError, match=r"lam must be finite and >= 0, got -0.5"):
        gfusedmax(x, ptr, EDGES, lam=-0.5)
    with pytest.raises(ValueError, match=r"gamma must be finite and > 0, got 0.0"):
        gfusedmax(x, ptr, EDGES, gamma=0.0)
    with pytest.raises(ValueError, match=r"gamma must be finite and > 0, got -1.0"):
        sparsemax(x, ptr, gamma=torch.tensor(-1.0))
    with pytest.raises(ValueError, match=r"lam must be a number or have one entry per head \(1\)"):
        gfusedmax(x, ptr, EDGES, lam=torch.tensor([0.1, 0.2]))
    nan = x.detach().clone()
    nan[4] = float("nan")
    with pytest.raises(ValueError, match=r"scores must be finite, got scores\[4\] = nan"):
        gfusedmax(nan, ptr, EDGES)
    inf = scores(2).detach().clone()
    inf[7, 1] = float("inf")
    with pytest.raises(ValueError, match=r"scores must be finite, got scores\[7, 1\] = inf"):
        softmax(inf, ptr)
    with pytest.raises(TypeError, match="floating-point"):
        softmax(torch.zeros(n, dtype=torch.int64), ptr)
    with pytest.raises(TypeError, match="ptr must hold integers"):
        softmax(x, np.array([0.0, 20.0]))
    with pytest.raises(TypeError, match="scores must be a torch tensor"):
        softmax(x.detach().numpy(), ptr)


def test_a_per_graph_edge_list_one_graph_short_names_edge_index_and_the_counts():
    from gglspeedup.attention import FastFlexAddAttention, gfusedmax_numpy

    x = scores(0)
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    short = r"^edge_index \(attpool2's edge_list\) must be a list of 6 arrays \(E_g, 2\) .*got 5 arrays for 6 graphs"
    with pytest.raises(ValueError, match=short):
        gfusedmax(x, ptr, EDGES[:-1])
    with pytest.raises(ValueError, match=short):
        gfusedmax_numpy(x.detach().numpy(), ptr, [e.tolist() for e in EDGES[1:]])
    layer = FastFlexAddAttention(3, 2, "gfusedmax").double()
    with pytest.raises(ValueError, match=short):
        layer(torch.zeros(sum(SIZES), 3, dtype=torch.float64), SIZES, EDGES[:-1])
    ragged = [e.tolist() for e in EDGES]
    ragged[2][1] = [1]
    with pytest.raises(
        ValueError, match=r"^edge_index\[2\] must have shape \(E_2, 2\) .*nested lists of unequal lengths"
    ):
        gfusedmax(x, ptr, ragged)
    with pytest.raises(ValueError, match=r"^edge_index must have shape \(2, E\) .*nested lists of unequal lengths"):
        gfusedmax(x, ptr, [[0, 1, 2], [1, 2]])
    # the full list, and the same edges as lists, still pool
    full = gfusedmax(x, ptr, EDGES)
    assert torch.equal(full, gfusedmax(x, ptr, [e.tolist() for e in EDGES]))


def test_meta_tensors_into_the_maps_are_refused_by_name():
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    meta = torch.zeros(sum(SIZES), device="meta")
    for function in (softmax, sparsemax):
        with pytest.raises(TypeError, match=r"^scores is a tensor on torch's 'meta' device"):
            function(meta, ptr)
    with pytest.raises(TypeError, match=r"^ptr is a tensor on torch's 'meta' device"):
        softmax(scores(0), torch.as_tensor(ptr, device="meta"))
    with pytest.raises(TypeError, match=r"^gamma is a tensor on torch's 'meta' device"):
        sparsemax(scores(0), ptr, gamma=torch.ones((), device="meta"))
    with pytest.raises(TypeError, match=r"^scores is a tensor on torch's 'meta' device"):
        gfusedmax_numpy(meta, ptr, EDGES)


def test_sparsemax_gamma_below_2_to_the_minus_511_is_refused_by_name():
    from gglspeedup.attention import sparsemax_numpy

    x = scores(2)
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    tiny = r"^gamma must be >= 2\*\*-511 = 1\.49e-154 \(the backward divides by gamma\*\*2.*got 1e-300"
    with pytest.raises(ValueError, match=tiny):
        sparsemax(x, ptr, gamma=1e-300)
    with pytest.raises(ValueError, match=tiny):
        gfusedmax(x, ptr, EDGES, gamma=torch.tensor([1.0, 1e-300], dtype=torch.float64))
    with pytest.raises(ValueError, match=tiny):
        sparsemax_numpy(x.detach().numpy(), ptr, gamma=1e-300)
    with pytest.raises(ValueError, match=r"^gamma must be finite and > 0, got -1e-300"):
        sparsemax(x, ptr, gamma=-1e-300)


@pytest.mark.parametrize("gamma", [1e-16, 1e-100, 2.0**-511])
def test_sparsemax_with_a_tiny_gamma_is_the_argmax_with_ties_shared(gamma):
    # x / gamma past 2**53: unshifted, the threshold rounded up to the largest score and every node dropped
    x = torch.tensor([1.0, 0.5, 0.2, 0.3, 0.9, 0.9, 0.1], dtype=torch.float64, requires_grad=True)
    ptr = [0, 3, 7]
    weights = sparsemax(x, ptr, gamma=gamma)
    assert weights.tolist() == [1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0]
    (grad,) = torch.autograd.grad(weights[4], x)  # d w_4 / d x on the tie: (1 - 1/2) / gamma, -1/2 / gamma
    torch.testing.assert_close(grad, torch.tensor([0, 0, 0, 0, 0.5, -0.5, 0], dtype=torch.float64) / gamma)
    fused = gfusedmax(x, ptr, [[[0, 1]], [[0, 1]]], lam=0.0, gamma=gamma)
    assert fused.tolist() == weights.tolist()


def test_a_none_lam_or_gamma_is_refused_by_name_by_the_torch_and_numpy_maps():
    # NumPy: None reached the kernels (a Numba TypingError, an IndexError on the CUDA simulator);
    # torch: lam=None silently meant lam = 0 (plain sparsemax), not the default 1.0
    from gglspeedup.attention import fused_lasso_numpy, sparsemax_numpy

    x = scores(2)
    array = x.detach().numpy()
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    for name, call in (
        ("gamma", lambda: sparsemax(x, ptr, gamma=None)),
        ("lam", lambda: gfusedmax(x, ptr, EDGES, lam=None)),
        ("gamma", lambda: gfusedmax(x, ptr, EDGES, gamma=None)),
        ("lam", lambda: fused_lasso(x, ptr, EDGES, lam=None)),
        ("gamma", lambda: sparsemax_numpy(array, ptr, gamma=None)),
        ("lam", lambda: gfusedmax_numpy(array, ptr, EDGES, lam=None)),
        ("gamma", lambda: gfusedmax_numpy(array, ptr, EDGES, gamma=None)),
        ("lam", lambda: fused_lasso_numpy(array, ptr, EDGES, lam=None)),
    ):
        with pytest.raises(TypeError, match=rf"^{name} must be a real number.* got None"):
            call()


def test_lam_and_gamma_one_per_head_as_a_list_or_array_are_taken_as_documented():
    # "numbers, one per head, or tensors": a list or an array per head was refused (TypeError)
    x = scores(2)
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    lam, gamma = torch.tensor([0.31, 0.07], dtype=torch.float64), torch.tensor([0.8, 1.9], dtype=torch.float64)
    expected = gfusedmax(x, ptr, EDGES, lam=lam, gamma=gamma)
    assert torch.equal(gfusedmax(x, ptr, EDGES, lam=[0.31, 0.07], gamma=(0.8, 1.9)), expected)
    assert torch.equal(gfusedmax(x, ptr, EDGES, lam=lam.numpy(), gamma=gamma.numpy()), expected)
    assert torch.equal(sparsemax(x, ptr, gamma=[0.8, 1.9]), sparsemax(x, ptr, gamma=gamma))
    assert torch.equal(fused_lasso(x, ptr, EDGES, lam=[0.31, 0.07]), fused_lasso(x, ptr, EDGES, lam=lam))
    with pytest.raises(ValueError, match=r"^gamma must be a number or have one entry per head \(2\), got shape \(3,\)"):
        sparsemax(x, ptr, gamma=[0.8, 1.9, 1.0])
    with pytest.raises(ValueError, match=r"^lam must be finite and >= 0, got -0.07"):
        gfusedmax(x, ptr, EDGES, lam=[0.31, -0.07])
    with pytest.raises(TypeError, match=r"^gamma must be a real number, one per head, or a tensor, got \['a'\]"):
        sparsemax(x, ptr, gamma=["a"])


def test_a_second_derivative_through_the_maps_and_the_layer_raises_by_name():
    # a gradient penalty on out.sum() (a constant incoming gradient, which once_differentiable does
    # not catch) got first derivatives without a graph: its second-order terms were silently dropped
    from gglspeedup.attention import AttentionPooling

    x = scores(0)
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    (grad,) = torch.autograd.grad(gfusedmax(x, ptr, EDGES).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=r"^the pooling map has first derivatives only"):
        grad.pow(2).sum().backward()
    features = torch.randn(sum(SIZES), 3, dtype=torch.float64, requires_grad=True)
    for mapping in ("softmax", "sparsemax", "gfusedmax"):
        layer = AttentionPooling(3, 4, mapping, heads=2).double()
        (plain,) = torch.autograd.grad(layer(features, ptr, EDGES).sum(), features)
        (grad,) = torch.autograd.grad(layer(features, ptr, EDGES).sum(), features, create_graph=True)
        assert torch.equal(grad, plain)
        with pytest.raises(RuntimeError, match=r"^AttentionPooling \(its CPU path\) has first derivatives only"):
            grad.pow(2).sum().backward()


@pytest.mark.parametrize("heads", [0, 1, 2], ids=["1-D", "1 head", "2 heads"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_outputs_are_tensors_of_their_own_that_take_in_place_operations(heads, dtype):
    # a float64 (N,) or (N, 1) output was a view of the state its backward reads: an in-place operation
    # raised "Output 0 of PoolingMap is a view and is being modified inplace" where float32 and
    # (N, 2) outputs took it
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    upstream = torch.linspace(-1.0, 2.0, scores(heads).numel(), dtype=dtype).reshape(scores(heads).shape)
    for call in (
        lambda s: softmax(s, ptr),
        lambda s: sparsemax(s, ptr, gamma=0.8),
        lambda s: gfusedmax(s, ptr, EDGES, lam=0.3),
        lambda s: fused_lasso(s, ptr, EDGES, lam=0.3),
    ):
        x = scores(heads).detach().to(dtype).requires_grad_()
        (expected,) = torch.autograd.grad((call(x) * 3.0 * upstream).sum(), x)
        out = call(x)
        out.mul_(3.0)
        (got,) = torch.autograd.grad((out * upstream).sum(), x)
        assert torch.equal(got, expected)

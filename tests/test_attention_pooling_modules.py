"""The pooling layers: AttentionPooling against a per-graph torch reference of attpool2's math,
heads in one call equal to MultipleAttention of single heads, and attpool2's classes called the
way its scripts call them ((x, graph_size_list, edge_list) with per-graph (E, 2) edge arrays)."""

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gglspeedup.attention import (  # noqa: E402
    AttentionPooling,
    FastFlexAddAttention,
    Gfusedmax,
    MultipleAttention,
    Softmax,
    Sparsemax,
    TopK,
    gfusedmax,
)
from gglspeedup.testing.pooling_reference import gfusedmax_reference, sparsemax_reference  # noqa: E402


def random_graphs(rng, count=6, low=3, high=9):
    """attpool2-style batches: sizes and, per graph, the (E, 2) upper-triangle pairs of a random
    graph with edge probability one half (an edgeless graph possible)."""
    sizes = [int(n) for n in rng.integers(low, high, size=count)]
    edges = []
    for n in sizes:
        upper = np.triu(rng.random((n, n)) * (1 - np.eye(n))) >= 0.5
        edges.append(np.stack(np.nonzero(upper), axis=-1).astype(int))
    return sizes, edges


def reference_pool(layer, x, sizes, edges, mapping):
    """attpool2's math graph by graph with plain torch / NumPy (no batched kernel)."""
    outputs = []
    proj = layer.proj_func(x)
    scores = layer.score_func(x)
    for (start, stop), e in zip(zip(np.cumsum([0, *sizes[:-1]]), np.cumsum(sizes)), edges):
        s = scores[start:stop, 0]
        s = (s - s.mean()) / (s.std() + 1e-7)
        if mapping == "softmax":
            w = torch.softmax(s, dim=0)
        elif mapping == "sparsemax":
            w = torch.tensor(sparsemax_reference(s.detach().numpy() / float(layer.gamma)))
        else:
            w = torch.tensor(gfusedmax_reference(s.detach().numpy(), e, float(layer.lam), float(layer.gamma)))
        outputs.append((proj[start:stop] * w.to(proj.dtype)[:, None]).sum(0))
    return torch.stack(outputs)


@pytest.mark.parametrize("mapping", ["softmax", "sparsemax", "gfusedmax"])
def test_fast_flex_add_attention_computes_attpool2s_pooling(mapping):
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    sizes, edges = random_graphs(rng)
    x = torch.rand(sum(sizes), 10, dtype=torch.float64, requires_grad=True)
    layer = FastFlexAddAttention(10, 5, mapping, True, lam=0.2, gamma=0.8).double()
    y = layer(x, sizes, edges)
    assert y.shape == (len(sizes), 5)
    torch.testing.assert_close(y, reference_pool(layer, x, sizes, edges, mapping), atol=1e-9, rtol=0)
    (y * y).sum().backward()
    assert x.grad.shape == x.shape and torch.isfinite(x.grad).all()


def test_heads_in_one_call_equal_multiple_attention_of_single_heads():
    rng = np.random.default_rng(1)
    torch.manual_seed(1)
    sizes, edges = random_graphs(rng, count=5)
    x = torch.rand(sum(sizes), 8, dtype=torch.float64)
    multi = MultipleAttention(lambda size: FastFlexAddAttention(8, size, "gfusedmax", True, lam=0.3), 7, 3).double()
    batched = AttentionPooling(8, 7, "gfusedmax", heads=3, lam=0.3).double()
    with torch.no_grad():
        heads = [getattr(multi, f"attention{i}") for i in range(3)]
        batched.proj_func.weight.copy_(torch.cat([h.proj_func.weight for h in heads]))
        batched.proj_func.bias.copy_(torch.cat([h.proj_func.bias for h in heads]))
        batched.score_func.weight.copy_(torch.cat([h.score_func.weight for h in heads]))
        batched.score_func.bias.copy_(torch.cat([h.score_func.bias for h in heads]))
    torch.testing.assert_close(batched(x, sizes=sizes, edge_index=edges), multi(x, sizes, edges), atol=1e-12, rtol=0)


def test_learnable_lam_and_gamma_get_gradients_and_one_node_graphs_stay_finite():
    rng = np.random.default_rng(2)
    sizes, edges = random_graphs(rng)
    sizes[0], edges[0] = 1, np.zeros((0, 2), int)
    starts = np.cumsum([0, *sizes[:-1]])
    edges = np.concatenate([(e + s).T for e, s in zip(edges, starts)], axis=1)  # global (2, E) form
    x = torch.rand(sum(sizes), 6, requires_grad=True)
    layer = AttentionPooling(6, 4, "gfusedmax", learn_lam=True, learn_gamma=True, heads=2, lam=0.5)
    out = layer(x, sizes=sizes, edge_index=edges)
    out.pow(2).sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
    assert layer.lam.grad.shape == (2,) and layer.gamma.grad.shape == (2,)
    assert layer.lam.grad.abs().sum() > 0 and layer.gamma.grad.abs().sum() > 0


def test_attpool2_mapping_modules_take_graph_size_list_and_edge_list():
    rng = np.random.default_rng(3)
    sizes, edges = random_graphs(rng, count=10, low=5, high=10)
    x = torch.rand(sum(sizes), dtype=torch.float64) + 1
    fused = Gfusedmax(lam=0.1)(x, sizes, edges)
    torch.testing.assert_close(fused, gfusedmax(x, sizes=sizes, edge_index=edges, lam=0.1))
    for mapping in (Gfusedmax(lam=0.1), Sparsemax(lam=0.1), Softmax(lam=0.1)):
        weights = mapping(x, sizes, edges)
        sums = torch.stack([w.sum() for w in torch.split(weights, sizes)])
        torch.testing.assert_close(sums, torch.ones(len(sizes), dtype=torch.float64))


@pytest.mark.parametrize("max_type", ["softmax-n", "gfusedmax-n", "sigmoid", "tanh", "sum", "mean", "max", "topk"])
def test_attpool2s_other_mappings_run(max_type):
    rng = np.random.default_rng(4)
    sizes, edges = random_graphs(rng)
    x = torch.rand(sum(sizes), 5, requires_grad=True)
    y = FastFlexAddAttention(5, 3, max_type, True)(x, sizes, edges)
    y.sum().backward()
    assert y.shape == (len(sizes), 3) and torch.isfinite(x.grad).all()
    with pytest.raises(ValueError, match="Wrong max_type"):
        FastFlexAddAttention(5, 3, "bogus")


def test_x_of_the_wrong_shape_kind_or_dtype_is_named():
    layer = AttentionPooling(4, 6)
    for x in (torch.randn(5), torch.randn(5, 4, 1), torch.randn(5, 3)):
        with pytest.raises(
            ValueError, match=r"^x must have shape \(N, input_size = 4\) .*got " + re.escape(str(tuple(x.shape)))
        ):
            layer(x, sizes=[3, 2])
    with pytest.raises(ValueError, match=r"^x must have shape \(N, input_size = 4\)"):
        FastFlexAddAttention(4, 6)(torch.randn(5), [3, 2])
    with pytest.raises(TypeError, match=r"^x must be a torch.Tensor"):
        layer(np.zeros((5, 4), np.float32), sizes=[3, 2])
    with pytest.raises(TypeError, match=r"^x must have the layer's dtype torch.float32"):
        layer(torch.randn(5, 4, dtype=torch.float64), sizes=[3, 2])
    with pytest.raises(TypeError, match=r"^x is a tensor on torch's 'meta' device"):
        layer(torch.randn(5, 4, device="meta"), sizes=[3, 2])


@pytest.mark.parametrize("head_cnt", [0, -1, 7])
def test_multiple_attention_refuses_a_head_count_outside_one_to_output_size(head_cnt):
    with pytest.raises(ValueError, match=rf"^head_cnt must be an int in \[1, output_size = 6\].*got {head_cnt}"):
        MultipleAttention(lambda size: FastFlexAddAttention(4, size), 6, head_cnt)
    with pytest.raises(TypeError, match=r"^head_cnt must be an int"):
        MultipleAttention(lambda size: FastFlexAddAttention(4, size), 6, 1.5)
    assert len(MultipleAttention(lambda size: FastFlexAddAttention(4, size), 6, 6)(torch.randn(5, 4), [3, 2])[0]) == 6


@pytest.mark.parametrize("low", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mapping", ["softmax", "sparsemax", "gfusedmax"])
def test_half_precision_layers_on_the_cpu_are_the_float32_computation_rounded(mapping, low):
    rng = np.random.default_rng(3)
    sizes, edges = random_graphs(rng)
    torch.manual_seed(3)
    layer = AttentionPooling(5, 6, mapping, heads=2, lam=0.3, gamma=0.7).to(low)
    wide = AttentionPooling(5, 6, mapping, heads=2, lam=0.3, gamma=0.7)
    wide.load_state_dict({name: value.float() for name, value in layer.state_dict().items()})
    x = torch.randn(sum(sizes), 5).to(low).requires_grad_()
    x_wide = x.detach().float().requires_grad_()
    out = layer(x, sizes=sizes, edge_index=edges)
    expected = wide(x_wide, sizes=sizes, edge_index=edges)
    assert out.dtype == low and torch.equal(out, expected.to(low))
    upstream = torch.randn(out.shape)
    out.backward(upstream.to(low))
    expected.backward(upstream.to(low).float())
    assert x.grad.dtype == low and torch.equal(x.grad, x_wide.grad.to(low))
    assert torch.equal(layer.proj_func.weight.grad, wide.proj_func.weight.grad.to(low))
    attpool = FastFlexAddAttention(5, 6, mapping).to(low)
    assert attpool(x.detach(), sizes, edges).dtype == low


@pytest.mark.parametrize("ratio", [2.0, 1.5, -0.5, float("nan")])
def test_topk_refuses_a_ratio_outside_zero_to_one(ratio):
    with pytest.raises(ValueError, match=rf"^ratio must be in \(0, 1\] .*got {ratio}"):
        TopK(ratio=ratio)
    with pytest.raises(TypeError, match=r"^ratio must be a number in"):
        TopK(ratio="half")


def test_topk_keeps_attpool2s_default_and_the_whole_graph_at_ratio_one():
    x = torch.tensor([0.5, -1.0, 2.0, 1.0, 3.0])
    assert TopK().ratio == TopK(ratio=0).ratio == 0.5
    everyone = TopK(ratio=1.0)(x, [3, 2])
    torch.testing.assert_close(everyone, torch.tanh(x) / torch.tensor([3.0, 3, 3, 2, 2]))


def test_standardize_scores_takes_a_batch_or_its_ptr_and_names_a_batch_that_does_not_cover_the_scores():
    # a ptr list raised AttributeError ('list' object has no attribute 'placed'), and a batch of
    # another node count torch's index_add_ RuntimeError
    from gglspeedup.attention import graph_batch, standardize_scores

    ptr = [0, 1, 4, 4, 7]
    scores = torch.tensor(np.random.default_rng(5).standard_normal((7, 2)), dtype=torch.float64)
    expected = standardize_scores(scores, graph_batch(ptr))
    assert torch.equal(standardize_scores(scores, ptr), expected)
    assert torch.equal(standardize_scores(scores[:, 1], ptr), expected[:, 1])
    assert expected[0].tolist() == [0.0, 0.0]  # a one-node graph standardises to 0
    for graph in expected[1:4], expected[4:]:
        torch.testing.assert_close(graph.mean(0), torch.zeros(2, dtype=torch.float64), rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match=r"^ptr must cover the scores: ptr\[-1\] = 7 nodes, but the scores have 5"):
        standardize_scores(scores[:5], graph_batch(ptr))
    with pytest.raises(ValueError, match=r"^give the graphs' node offsets as ptr"):
        standardize_scores(scores, None)


@pytest.mark.parametrize(
    "sizes, error, match",
    [
        ((-1, 4), ValueError, r"^input_size must be >= 0, got -1"),
        ((3.0, 4), TypeError, r"^input_size must be an int, got float 3.0"),
        ((3, 0), ValueError, r"^output_size must be >= 1, got 0"),
        ((3, 4.0), TypeError, r"^output_size must be an int, got float 4.0"),
    ],
)
def test_layer_sizes_are_checked_by_name(sizes, error, match):
    # input_size -1 raised torch's "negative dimension", output_size 0 blamed heads ("heads must be an
    # int in [1, output_size = 0], got 1"), a float output_size reached torch.nn.Linear
    with pytest.raises(error, match=match):
        AttentionPooling(*sizes)
    assert AttentionPooling(np.int64(3), np.int64(4), heads=2).output_size == 4


@pytest.mark.parametrize(
    "heads, error",
    [
        (2.0, TypeError),
        (np.float64(2.0), TypeError),
        (True, TypeError),
        ("2", TypeError),
        (0, ValueError),
        (5, ValueError),
    ],
)
def test_a_head_count_is_checked_as_every_int_option(heads, error):
    # heads=2.0 raised ValueError where every other int option (head_cnt, input_size) raises TypeError
    with pytest.raises(
        error, match=rf"^heads must be an int in \[1, output_size = 4\] .*, got {re.escape(repr(heads))}$"
    ):
        AttentionPooling(3, 4, heads=heads)
    assert AttentionPooling(3, 4, heads=np.int64(4)).heads == 4


@pytest.mark.parametrize(
    "kwargs, name, held",
    [
        ({"mapping": "gfusedmax", "lam": 1e39}, "lam", "inf"),
        ({"mapping": "sparsemax", "gamma": 1e39}, "gamma", "inf"),
        ({"mapping": "gfusedmax", "gamma": 1e-50}, "gamma", "0.0"),
    ],
)
def test_lam_and_gamma_the_parameters_dtype_cannot_hold_are_refused_by_name(kwargs, name, held):
    # lam=1e39 raised torch.full's "value cannot be converted to type float without overflow";
    # gamma=1e-50 passed the check of the given value and was stored as float32 0.0, refused only by
    # the first forward ("gamma must be finite and > 0, got 0.0")
    value = kwargs[name]
    with pytest.raises(ValueError, match=rf"^{name} = {re.escape(repr(value))} does not fit the layer's float32 "
                       rf"parameter \(it would hold {held}\)"):  # fmt: skip
        AttentionPooling(3, 4, **kwargs)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # a float64 parameter holds them
    try:
        layer = AttentionPooling(3, 4, **kwargs)
    finally:
        torch.set_default_dtype(previous)
    assert getattr(layer, name).dtype == torch.float64 and float(getattr(layer, name)) == value

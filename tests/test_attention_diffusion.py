"""diffusion_attention / fractional_attention: exact against dense float64 references, gradients
included (and gradcheck), CPU == simulated GPU bit for bit, errors named before any kernel runs."""

import types
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gglspeedup.attention import (  # noqa: E402
    AttentionGraph,
    DiffuserFracSelfAttention,
    DiffuserSelfAttention,
    SequencePattern,
    diffusion_attention,
    fractional_attention,
)
from gglspeedup.testing.attention import dense_diffusion, dense_fractional  # noqa: E402

from conftest import assert_same_bits, gpu_hardware  # noqa: E402

B, L, H, D = 2, 10, 2, 3


def make_inputs(dtype=torch.float64, scale=1.0, seed=0):
    generator = torch.Generator().manual_seed(seed)
    tensors = [scale * torch.randn(B, L, H, D, generator=generator, dtype=dtype) for _ in range(3)]
    return [t.requires_grad_() for t in tensors]


def padding():
    mask = torch.zeros(B, L, dtype=torch.bool)
    mask[1, 7:] = True
    return mask


def graph_for(shared, device="cpu", step=None):
    pattern = SequencePattern(window=4, num_random=2, num_global=1, seed=1, device=device)
    return pattern.csc(L, batch=B, step=step, shared=shared)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("mask", [None, "padding"])
@pytest.mark.slow
def test_diffusion_matches_the_dense_reference_with_gradients(shared, mask):
    graph = graph_for(shared)
    q, k, v = make_inputs()
    pad = padding() if mask else None
    out = diffusion_attention(q, k, v, graph, hops=5, alpha=0.1, key_padding_mask=pad)
    ref = dense_diffusion(q, k, v, graph, hops=5, alpha=0.1, key_padding_mask=pad)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    upstream = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, k, v), upstream)
    theirs = torch.autograd.grad(ref, (q, k, v), upstream)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_diffusion_gradcheck():
    graph = graph_for(False, step=3)
    q, k, v = make_inputs()
    assert torch.autograd.gradcheck(
        lambda q, k, v: diffusion_attention(q, k, v, graph, hops=3, alpha=0.2, key_padding_mask=padding()), (q, k, v)
    )


def test_diffusion_dropout_is_reference_math_with_the_same_masks():
    graph = graph_for(False)
    q, k, v = make_inputs()
    torch.manual_seed(5)
    out = diffusion_attention(q, k, v, graph, hops=2, dropout=0.3)
    torch.manual_seed(5)
    again = diffusion_attention(q, k, v, graph, hops=2, dropout=0.3)
    assert torch.equal(out, again)
    plain = diffusion_attention(q, k, v, graph, hops=2)
    assert not torch.allclose(out, plain)
    torch.manual_seed(5)
    assert torch.autograd.gradcheck(lambda v: _reseeded(q, k, v, graph), (v,))


def _reseeded(q, k, v, graph):
    torch.manual_seed(5)
    return diffusion_attention(q, k, v, graph, hops=2, dropout=0.3)


@pytest.mark.parametrize("shared", [False, True])
def test_fractional_matches_the_dense_reference_with_gradients(shared):
    graph = graph_for(shared)
    q, k, v = make_inputs(scale=0.5)
    out = fractional_attention(q, k, v, graph, gamma=0.5, terms=6, steps=2, key_padding_mask=padding())
    ref = dense_fractional(q, k, v, graph, gamma=0.5, terms=6, steps=2, key_padding_mask=padding())
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    upstream = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, (q, k, v), upstream), torch.autograd.grad(ref, (q, k, v), upstream)):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11)


def test_fractional_gradcheck_and_a_convergent_series():
    graph = graph_for(False, step=1)
    q, k, v = make_inputs(scale=0.5)
    assert torch.autograd.gradcheck(lambda q, k, v: fractional_attention(q, k, v, graph, steps=1), (q, k, v))
    with torch.no_grad():  # (P / rho) is column-stochastic and sum |binom(0.5, n)| <= 2: bounded
        out = fractional_attention(q, k, v, graph, steps=5)
        rho = dense_rho(q, k, graph)  # (B, H)
        scaled = out / rho[:, None, :, None] ** 2.5
        bound = 2.0**5 * v.abs().sum(dim=1)  # 1-norm over the tokens of each sequence, head, dim
    assert torch.all(scaled.abs().sum(dim=1) <= bound)


def dense_rho(q, k, graph):
    from gglspeedup.testing.attention import dense_adjacency

    adjacency = dense_adjacency(graph)
    qf, kf = (t.reshape(B * L, H, D).permute(1, 0, 2) for t in (q, k))
    weights = torch.exp(qf @ kf.transpose(1, 2)) * adjacency[None]  # (H, query, key)
    outdeg = weights.sum(dim=1).reshape(H, B, L)
    return outdeg.amax(dim=2).T


def on(device, *tensors):
    """The tensors as leaves on ``device``'s torch device (a real GPU's memory; the CPU's for the
    simulator, whose "device" arrays are host arrays)."""
    if not gpu_hardware(device):
        return tensors
    return [t.detach().to(device).requires_grad_(t.requires_grad) for t in tensors]


def results_on(device, dtype, function, **kwargs):
    graph = graph_for(False, device=device, step=2)
    q, k, v, mask = on(device, *make_inputs(dtype=dtype, scale=0.5), padding())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = function(q, k, v, graph, key_padding_mask=mask, **kwargs)
        grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    return out, *grads


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_and_simulated_gpu_agree_bit_for_bit(device, dtype):
    for function, kwargs in ((diffusion_attention, {"hops": 2}), (fractional_attention, {"steps": 1, "terms": 2})):
        cpu = results_on("cpu", dtype, function, **kwargs)
        other = results_on(device, dtype, function, **kwargs)
        for a, b in zip(cpu, other):
            assert_same_bits(device, b, a)


def config(hidden=8, heads=2):
    return types.SimpleNamespace(
        hidden_size=hidden, num_attention_heads=heads, attention_probs_dropout_prob=0.1, attention_window=[4, 4]
    )


def test_layers_keep_diffusers_parameter_names_and_masks():
    layer = DiffuserSelfAttention(config(), layer_id=1)
    assert sorted(layer.state_dict()) == [
        "key.bias",
        "key.weight",
        "query.bias",
        "query.weight",
        "value.bias",
        "value.weight",
    ]
    layer.eval()
    graph = SequencePattern(window=4, num_random=1, num_global=1).csc(6, batch=2)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    layer.double()
    mask = torch.zeros(2, 6)
    mask[1, 4:] = -10000.0
    out = layer(x, g=graph, attention_mask=mask)[0]
    q = (layer.query(x) / np.sqrt(4)).reshape(2, 6, 2, 4)
    k, v = layer.key(x).reshape(2, 6, 2, 4), layer.value(x).reshape(2, 6, 2, 4)
    ref = dense_diffusion(q, k, v, graph, key_padding_mask=mask < 0).reshape(2, 6, 8)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    frac = DiffuserFracSelfAttention(config(), layer_id=0, gamma=0.5).double().eval()
    frac.load_state_dict(layer.state_dict())
    assert frac(x, g=SequencePattern(window=4, num_random=1, num_global=1))[0].shape == (2, 6, 8)


def test_bad_inputs_name_the_argument():
    graph = graph_for(False)
    q, k, v = make_inputs()
    with pytest.raises(ValueError, match="same shape"):
        diffusion_attention(q, k, v[:, :5], graph)
    with pytest.raises(TypeError, match="one dtype"):
        diffusion_attention(q, k.float(), v, graph)
    with pytest.raises(ValueError, match="batch, seq_len, heads, head_dim"):
        diffusion_attention(q[0], k[0], v[0], graph)
    with pytest.raises(ValueError, match="graph has 20 nodes"):
        diffusion_attention(q[:1], k[:1], v[:1], graph)
    with pytest.raises(TypeError, match="AttentionGraph"):
        diffusion_attention(q, k, v, "graph")
    with pytest.raises(ValueError, match="key_padding_mask must have shape"):
        diffusion_attention(q, k, v, graph, key_padding_mask=torch.zeros(B, L + 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="alpha"):
        diffusion_attention(q, k, v, graph, alpha=1.5)
    with pytest.raises(ValueError, match="dropout"):
        diffusion_attention(q, k, v, graph, dropout=1.0)
    with pytest.raises(ValueError, match="gamma"):
        fractional_attention(q, k, v, graph, gamma=0.0)
    bad = q.detach().clone()
    bad[0, 3, 1, 0] = float("inf")
    with pytest.raises(ValueError, match="non-finite attention scores"):
        diffusion_attention(bad, k, v, graph)


def test_numpy_scalars_are_taken_for_alpha_dropout_and_gamma_and_non_numbers_refused_by_type():
    # np.float32(0.1) was refused as "alpha must be a float in [0, 1]" (a ValueError), and so were
    # a string and a tensor, which are no number at all
    graph = graph_for(False)
    q, k, v = make_inputs()
    expected = diffusion_attention(q, k, v, graph, hops=3, alpha=0.25)
    assert torch.equal(diffusion_attention(q, k, v, graph, hops=3, alpha=np.float32(0.25)), expected)
    torch.manual_seed(4)
    dropped = diffusion_attention(q, k, v, graph, dropout=0.375)
    torch.manual_seed(4)
    assert torch.equal(diffusion_attention(q, k, v, graph, dropout=np.float32(0.375)), dropped)
    fractional = fractional_attention(q, k, v, graph, gamma=0.5)
    assert torch.equal(fractional_attention(q, k, v, graph, gamma=np.float32(0.5)), fractional)
    for name, call in (
        ("alpha", lambda value: diffusion_attention(q, k, v, graph, alpha=value)),
        ("dropout", lambda value: diffusion_attention(q, k, v, graph, dropout=value)),
        ("gamma", lambda value: fractional_attention(q, k, v, graph, gamma=value)),
    ):
        for value, kind in (("0.1", "str"), (torch.tensor(0.1), "Tensor"), (True, "bool"), (None, "NoneType")):
            with pytest.raises(TypeError, match=rf"^{name} must be a float in .* got {kind} "):
                call(value)
        with pytest.raises(ValueError, match=rf"^{name} must be a float in .* got nan"):
            call(np.float32("nan"))


def test_fractional_terms_past_1024_are_refused_by_name_before_any_kernel():
    # terms had no upper bound: terms=10**8 did not finish (one propagation per term and step)
    graph = graph_for(False)
    q, k, v = make_inputs()
    for value in (1025, 10**8, np.int64(2**40)):
        with pytest.raises(ValueError, match=rf"^terms must be <= 1024 \(each term is .*\), got {int(value)}$"):
            fractional_attention(q, k, v, graph, terms=value, steps=1)
    out = fractional_attention(q, k, v, graph, terms=1024, steps=1, key_padding_mask=padding())
    ref = dense_fractional(q, k, v, graph, terms=1024, steps=1, key_padding_mask=padding())
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)


def test_binomial_coefficients_are_the_series_and_check_gamma_and_terms_by_name():
    # (nan, 2) gave NaN coefficients, (0.5, -1) gave [1.0] and a float terms an unnamed TypeError
    from math import comb

    from gglspeedup.attention.sequence.fractional import binomial_coefficients

    assert binomial_coefficients(0.5, 3) == [1.0, -0.5, -0.125, -0.0625]
    assert binomial_coefficients(np.float32(2.0), np.int64(3)) == [1.0, -2.0, 1.0, 0.0]  # (1 - z)**2
    assert binomial_coefficients(3, 3) == [(-1) ** n * comb(3, n) for n in range(4)]
    assert binomial_coefficients(0.5, 0) == [1.0]
    for value in (float("nan"), float("inf"), np.float64("-inf")):
        with pytest.raises(ValueError, match=r"^gamma must be a float in \(-inf, inf\), got "):
            binomial_coefficients(value, 2)
    for value, kind in (("0.5", "str"), (True, "bool"), (None, "NoneType")):
        with pytest.raises(TypeError, match=rf"^gamma must be a float in .* got {kind} "):
            binomial_coefficients(value, 2)
    with pytest.raises(ValueError, match=r"^terms must be >= 0, got -1"):
        binomial_coefficients(0.5, -1)
    for value, kind in ((2.0, "float"), (True, "bool"), ("2", "str")):
        with pytest.raises(TypeError, match=rf"^terms must be an int, got {kind} "):
            binomial_coefficients(0.5, value)


@pytest.mark.parametrize("shared", [False, True])
def test_diffusion_dropout_equals_the_dense_reference_with_the_recomputed_masks(shared):
    from gglspeedup.testing.attention import dropout_masks

    graph = graph_for(shared)
    q, k, v = make_inputs()
    torch.manual_seed(11)
    seed = int(torch.randint(0, 2**62, (1,)))  # what diffusion_attention draws first
    torch.manual_seed(11)
    out = diffusion_attention(q, k, v, graph, hops=3, alpha=0.2, key_padding_mask=padding(), dropout=0.3)
    masks = dropout_masks(graph, B, H, D, hops=3, p=0.3, seed=seed)
    assert 0.5 < float((masks[1][0] > 0).double().mean()) < 0.9  # about 70 % kept
    ref = dense_diffusion(q, k, v, graph, hops=3, alpha=0.2, key_padding_mask=padding(), dropout_masks=masks)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    upstream = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, (q, k, v), upstream), torch.autograd.grad(ref, (q, k, v), upstream)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def lane_results(device, dtype, dropout):
    """Head dim 21: the lane path (16 float32 / 8 float64 lanes) and a tail, on a tiny graph."""
    graph = SequencePattern(window=4, num_random=2, num_global=1, seed=4, device=device).csc(6, batch=2, step=1)
    generator = torch.Generator().manual_seed(2)
    inputs = (0.3 * torch.randn(2, 6, 2, 21, generator=generator, dtype=dtype).requires_grad_() for _ in range(3))
    q, k, v = on(device, *inputs)
    torch.manual_seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = diffusion_attention(q, k, v, graph, hops=2, key_padding_mask=None, dropout=dropout)
        grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    return out, *grads


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dropout", [0.0, 0.25])
def test_cpu_and_simulated_gpu_agree_bit_for_bit_on_wide_heads(device, dtype, dropout):
    cpu = lane_results("cpu", dtype, dropout)
    other = lane_results(device, dtype, dropout)
    for a, b in zip(cpu, other):
        assert_same_bits(device, b, a)


def shifted(q, k, v, c):
    """``q``, ``k``, ``v`` with one more feature: its product adds ``c`` to every score ``k . q``
    (``v``'s is 0)."""
    ones = torch.ones(*q.shape[:-1], 1, dtype=q.dtype)
    return torch.cat([q, ones], dim=-1), torch.cat([k, c * ones], dim=-1), torch.cat([v, 0 * ones], dim=-1)


@pytest.mark.parametrize("c", [800.0, -800.0], ids=["exp overflows", "exp underflows"])
@pytest.mark.parametrize("shared", [False, True])
def test_fractional_scores_past_exps_range_give_the_shifted_operator(c, shared):
    # adding c to every score multiplies W, rho and the output's scale rho**(gamma * steps) by exp(c)-powers:
    # the output is the reference's times exp(gamma * steps * c) (exp(+-400): representable, exp(+-800) not)
    graph = graph_for(shared)
    q, k, v = make_inputs(scale=0.5)
    out = fractional_attention(*shifted(q, k, v, c), graph, gamma=0.5, terms=6, steps=1, key_padding_mask=padding())
    assert torch.all(out[..., -1] == 0)
    out = out[..., :-1]
    ref = dense_fractional(q, k, v, graph, gamma=0.5, terms=6, steps=1, key_padding_mask=padding())
    factor = float(np.exp(0.5 * c))
    assert torch.isfinite(out).all() and torch.all(out != 0)
    torch.testing.assert_close(out, ref * factor, rtol=1e-10, atol=0)
    upstream = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, k, v), upstream)
    theirs = torch.autograd.grad(ref * factor, (q, k, v), upstream)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=0)


def test_fractional_output_past_the_dtype_raises_the_named_error_diffusion_computes_it():
    graph = graph_for(False)
    q, k, v = (t.detach() for t in make_inputs())
    out = diffusion_attention(30 * q, 30 * k, v, graph)  # a softmax: finite whatever the scale
    torch.testing.assert_close(out, dense_diffusion(30 * q, 30 * k, v, graph), rtol=0, atol=1e-12)
    for dtype in (torch.float64, torch.float32):
        with pytest.raises(
            ValueError, match=r"^q and k give attention scores k \. q up to .*overflows " + str(dtype)[6:]
        ):
            fractional_attention(30 * q.to(dtype), 30 * k.to(dtype), v.to(dtype), graph)
    # the largest scores that fit (float32: about 35 / (gamma * steps)) compute
    small = fractional_attention(*(t.float() for t in (q, k, v)), graph, steps=1)
    assert torch.isfinite(small).all()
    bad = q.clone()
    bad[0, 3, 1, 0] = float("inf")
    for function in (diffusion_attention, fractional_attention):
        with pytest.raises(ValueError, match="q and k give non-finite attention scores"):
            function(bad, k, v, graph)


def test_meta_tensors_are_refused_by_name():
    graph = graph_for(False)
    q, k, v = (t.detach() for t in make_inputs())
    for function in (diffusion_attention, fractional_attention):
        with pytest.raises(TypeError, match=r"^q is a tensor on torch's 'meta' device"):
            function(q.to("meta"), k.to("meta"), v.to("meta"), graph)
        with pytest.raises(TypeError, match=r"^v is a tensor on torch's 'meta' device"):
            function(q, k, v.to("meta"), graph)
        with pytest.raises(TypeError, match=r"^key_padding_mask is a tensor on torch's 'meta' device"):
            function(q, k, v, graph, key_padding_mask=padding().to("meta"))


def test_layer_id_past_attention_window_names_both():
    from gglspeedup.attention.sequence.layers import LayerIndexError

    for layer in (DiffuserSelfAttention, DiffuserFracSelfAttention):
        with pytest.raises(IndexError, match=r"^layer_id = 2 is past config\.attention_window, which lists 2"):
            layer(config(), layer_id=2)
        with pytest.raises(ValueError, match=r"^layer_id = 5 is past config\.attention_window"):
            layer(config(), layer_id=5)
        with pytest.raises(LayerIndexError):
            layer(config(), layer_id=2)
        with pytest.raises(ValueError, match=r"^layer_id must be >= 0, got -1"):
            layer(config(), layer_id=-1)
    single = types.SimpleNamespace(**{**vars(config()), "attention_window": 4})  # one window for every layer
    assert DiffuserSelfAttention(single, layer_id=7).layer_id == 7


def test_a_config_of_no_heads_or_a_non_int_size_is_refused_by_name():
    # num_attention_heads = 0 raised a bare ZeroDivisionError (integer modulo by zero)
    for layer in (DiffuserSelfAttention, DiffuserFracSelfAttention):
        with pytest.raises(ValueError, match=r"^config.num_attention_heads must be >= 1, got 0"):
            layer(config(heads=0), layer_id=0)
        with pytest.raises(TypeError, match=r"^config.num_attention_heads must be an int, got float 2.0"):
            layer(config(heads=2.0), layer_id=0)
        with pytest.raises(TypeError, match=r"^config.hidden_size must be an int, got float 8.0"):
            layer(config(hidden=8.0), layer_id=0)
        with pytest.raises(ValueError, match=r"^The hidden size \(8\) is not a multiple of the number"):
            layer(config(heads=3), layer_id=0)


def test_a_second_derivative_through_the_attention_functions_raises_by_name():
    # with create_graph=True the first derivatives came back without a graph (out.sum()'s incoming
    # gradient is a constant, which once_differentiable does not catch): a gradient penalty's
    # second-order terms were dropped without a word
    graph = graph_for(False)
    q, k, v = (t.detach().requires_grad_() for t in make_inputs())
    upstream = torch.randn(B, L, H, D, dtype=torch.float64)
    for name, function in (
        ("diffusion_attention", lambda: diffusion_attention(q, k, v, graph, hops=2)),
        ("(fractional_attention|the attention scores .*)", lambda: fractional_attention(q, k, v, graph)),
    ):
        first = torch.autograd.grad((function() * upstream).sum(), (q, k, v))
        again = torch.autograd.grad((function() * upstream).sum(), (q, k, v), create_graph=True)
        assert all(torch.equal(a, b) for a, b in zip(first, again))  # the first derivatives are unchanged
        penalty = sum(g.pow(2).sum() for g in torch.autograd.grad(function().sum(), (q, k, v), create_graph=True))
        with pytest.raises(RuntimeError, match=rf"^{name} has first derivatives only"):
            penalty.backward()


def test_sequences_of_no_tokens_attend_to_nothing_with_and_without_dropout():
    # a hand-built graph may have seq_len = 0: dropout's backward failed to reshape its 0 keep bits
    # ("cannot reshape tensor of 0 elements"), fractional_attention stepped indptr by 0 ("slice step
    # cannot be zero")
    # int32, as csc builds them: the kernels' variants the other tests compile
    graph = AttentionGraph(np.zeros(1, np.int32), np.zeros(0, np.int32), seq_len=0, batch=2, shared=False)
    for call in (
        lambda q: diffusion_attention(q, q, q, graph),
        lambda q: diffusion_attention(q, q, q, graph, dropout=0.5),
        lambda q: fractional_attention(q, q, q, graph),
        lambda q: fractional_attention(q, q, q, graph, dropout=0.5),
    ):
        q = torch.zeros(2, 0, H, D, dtype=torch.float64, requires_grad=True)
        out = call(q)
        assert out.shape == (2, 0, H, D)
        out.sum().backward()
        assert q.grad.shape == (2, 0, H, D)


def test_fractional_refuses_a_hand_built_graph_joining_sequences_and_diffusion_takes_it():
    # query 0 (sequence 0) attending to key 2 (sequence 1) was taken: with gamma = 1 and one term the
    # operator is the Laplacian diag(outdeg) - W exactly, yet token 2's row came out 0.0127 where the
    # Laplacian gives 0.0716 (the weights are shifted and divided by rho per sequence of the query,
    # the out-degrees summed over every query)
    import copy
    import pickle

    joined = AttentionGraph(np.array([0, 2, 3, 4, 5]), np.array([0, 2, 1, 2, 3]), seq_len=2, batch=2, shared=False)
    own = AttentionGraph(np.array([0, 2, 3, 4, 5]), np.array([0, 1, 1, 2, 3]), seq_len=2, batch=2, shared=False)
    q, k, v = (t[:, :2].detach() for t in make_inputs())
    expected = r"^graph joins two sequences: query 0 \(sequence 0\) attends to key 2 \(sequence 1\); fractional "
    for graph in (joined, pickle.loads(pickle.dumps(joined)), copy.deepcopy(joined)):
        with pytest.raises(ValueError, match=expected):
            fractional_attention(q, k, v, graph)
    out = fractional_attention(q, k, v, own, gamma=1.0, terms=1, steps=1)
    torch.testing.assert_close(out, dense_fractional(q, k, v, own, gamma=1.0, terms=1, steps=1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(diffusion_attention(q, k, v, joined), dense_diffusion(q, k, v, joined))
    batched = SequencePattern(window=4, num_random=2, num_global=1, seed=1).csc(L, batch=B, step=2)
    assert (
        batched._joining_edge is None
        and AttentionGraph(batched.indptr, batched.indices, L, B, False)._joining_edge is None
    )

"""diffusion_attention's backward memory (issue 42: peak <= half of DGL's at 4096 tokens): one
attention copy (in the out-CSR's order) beside the edges' gradient, never three ``(B * E, H)``
arrays at once; gradients unchanged whatever the upstream gradient's layout."""

import gc

import pytest

torch = pytest.importorskip("torch")

from gglspeedup.attention import SequencePattern, diffusion_attention  # noqa: E402
from gglspeedup.attention.sequence import _ops  # noqa: E402

B, L, H, D = 2, 24, 2, 4


def _inputs(seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(B, L, H, D, generator=generator).requires_grad_() for _ in range(3)]


def _live_tensors(numel):
    return sum(1 for o in gc.get_objects() if type(o) is torch.Tensor and o.numel() == numel)


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_diffusion_backward_holds_at_most_two_edge_arrays_at_once(monkeypatch, dropout):
    graph = SequencePattern(window=4, num_random=3, num_global=1, seed=2).csc(L, batch=B, step=1)
    edge_numel = graph.num_edges * H
    assert edge_numel not in (B * L * H * D, B * L, B * L * H)  # counted tensors are the edge arrays only
    seen = []
    for name in ("spmm_t", "score_grad"):
        original = getattr(_ops.GraphOps, name)

        def counting(self, *args, _original=original, **kwargs):
            seen.append(_live_tensors(edge_numel))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(_ops.GraphOps, name, counting)
    q, k, v = _inputs()
    torch.manual_seed(0)
    out = diffusion_attention(q, k, v, graph, hops=3, dropout=dropout)
    seen.clear()  # the forward's own arrays are not the point: the backward's are
    out.backward(torch.ones_like(out))
    assert len(seen) == 3 + 2  # one transposed pass per hop, the scores' backward, the key gradient
    assert max(seen) == 2, seen  # the attention (out-CSR order) and the edges' gradient


def test_diffusion_gradients_of_a_broadcast_upstream_equal_a_materialised_one():
    graph = SequencePattern(window=4, num_random=3, num_global=1, seed=2).csc(L, batch=1, shared=True)
    grads = []
    for broadcast in (True, False):
        q, k, v = _inputs(seed=3)
        torch.manual_seed(7)
        out = diffusion_attention(q, k, v, graph, hops=4, dropout=0.2)
        if broadcast:
            out.sum().backward()  # autograd hands the backward an expanded (stride-0) gradient
        else:
            out.backward(torch.ones_like(out).contiguous())
        grads.append([t.grad.clone() for t in (q, k, v)])
    for a, b in zip(*grads):
        assert torch.equal(a, b)

"""Row-sharded diffusion attention over a ``torch.distributed`` group, for sequences longer than one device holds.

Every rank builds the same pattern (same seed; nothing is sent) and owns a contiguous block of its
query rows (:func:`row_bounds`). A rank needs the keys its rows point at: its own rows, the window
halos of its neighbours, the global columns and its random keys. :class:`ShardPlan` lists them once
per pattern and rank, and ``all_to_all_single`` fetches those rows from their owners: ``k`` and
``v`` once per layer, and the diffused state ``h`` once per hop (a hop reads the previous hop's
values of the same remote keys, so a one-shot exchange cannot be exact). The local computation is
the single-device kernels on a graph of the local rows whose keys are renumbered into
``[local rows, fetched rows]``, so outputs are those of one device bit for bit; gradients flow back
through the exchanges (``torch.distributed.nn.functional.all_to_all_single``) and agree to rounding.
"""

from __future__ import annotations

import numpy as np
import torch

from ...device import to_numpy
from .._autograd import first_order_only
from ._ops import MODE_SOFTMAX, graph_ops
from .diffusion import EdgeScores
from .graph import AttentionGraph

__all__ = ["row_bounds", "ShardPlan", "sharded_diffusion_attention"]


def row_bounds(num_rows: int, world: int) -> np.ndarray:
    """int64 ``(world + 1,)``: rank ``r`` owns rows ``bounds[r]:bounds[r + 1]`` (near-equal blocks)."""
    return np.linspace(0, num_rows, world + 1).round().astype(np.int64)


class ShardPlan:
    """What rank ``rank`` of ``world`` computes and fetches for ``graph`` (a batched, CPU pattern)."""

    def __init__(self, graph: AttentionGraph, rank: int, world: int):
        from ...validation import check_int

        if not isinstance(graph, AttentionGraph):
            raise TypeError(f"graph must be an AttentionGraph (SequencePattern.csc), got {type(graph).__name__}")
        world = check_int("world", world, minimum=1)
        rank = check_int("rank", rank, minimum=0, below=world)  # -1 made a plan of rows num_nodes .. 0
        if graph.shared:
            raise ValueError("sharded attention needs a batched pattern (shared=False): rows are split over ranks")
        indptr, indices = to_numpy(graph.indptr).astype(np.int64), to_numpy(graph.indices).astype(np.int64)
        self.bounds = row_bounds(graph.num_nodes, world)
        lo, hi = int(self.bounds[rank]), int(self.bounds[rank + 1])
        self.lo, self.hi, self.rank, self.world = lo, hi, rank, world
        local = hi - lo
        keys = indices[indptr[lo] : indptr[hi]]
        remote = np.unique(keys[(keys < lo) | (keys >= hi)])  # sorted: grouped by owner
        owners = np.searchsorted(self.bounds, remote, side="right") - 1
        self.recv_counts = np.bincount(owners, minlength=world).astype(np.int64)
        self.remote = remote
        position = np.where((keys >= lo) & (keys < hi), keys - lo, local + np.searchsorted(remote, keys))
        ext = local + remote.shape[0]
        ext_indptr = np.concatenate(
            [indptr[lo : hi + 1] - indptr[lo], np.full(remote.shape[0], indptr[hi] - indptr[lo])]
        )
        self.graph = AttentionGraph(
            ext_indptr.astype(np.int64),
            position.astype(np.int64),
            ext,
            1,
            False,
            None,
            np.zeros(2, np.int64),
            np.zeros(0, np.int64),
            graph.device,
            _check=False,  # renumbered from a checked graph
        )
        self.send_index = None  # filled by exchange_requests (needs the group)

    def exchange_requests(self, group) -> None:
        """Tell every owner which of its rows this rank reads (two ``all_to_all_single``)."""
        import torch.distributed as dist

        send_counts = torch.from_numpy(self.recv_counts)  # what I ask each rank for
        counts = torch.empty_like(send_counts)
        dist.all_to_all_single(counts, send_counts, group=group)
        self.send_counts = counts.numpy().astype(np.int64)
        requests = torch.from_numpy(self.remote)
        asked = torch.empty(int(self.send_counts.sum()), dtype=torch.int64)
        dist.all_to_all_single(asked, requests, self.send_counts.tolist(), self.recv_counts.tolist(), group=group)
        self.send_index = asked - self.lo

    def fetch(self, rows: torch.Tensor, group) -> torch.Tensor:
        """``rows`` (this rank's, ``(local, ...)``) extended by the remote rows this rank reads."""
        from torch.distributed.nn.functional import all_to_all_single

        outgoing = rows.index_select(0, self.send_index)
        incoming = torch.empty((int(self.recv_counts.sum()), *rows.shape[1:]), dtype=rows.dtype, device=rows.device)
        incoming = all_to_all_single(
            incoming, outgoing, self.recv_counts.tolist(), self.send_counts.tolist(), group=group
        )
        return torch.cat([rows, incoming])


class _Hop(torch.autograd.Function):
    """One hop on the extended graph: ``(1 - alpha) * A h + alpha * v`` for every row."""

    @staticmethod
    def forward(ctx, attn, h, v, ops, alpha):
        ctx.save_for_backward(attn, h)
        ctx.ops, ctx.alpha = ops, alpha
        return ops.spmm(attn, h, 1.0 - alpha, self_rows=v, self_scale=alpha)

    @staticmethod
    @first_order_only("sharded_diffusion_attention")
    def backward(ctx, grad):
        attn, h = ctx.saved_tensors
        grad = grad.contiguous()
        grad_attn = torch.zeros_like(attn)
        grad_h = ctx.ops.spmm_t(attn, grad, 1.0 - ctx.alpha, dw=grad_attn, hx=h, dw_scale=1.0 - ctx.alpha)
        return grad_attn, grad_h, grad * ctx.alpha, None, None


def sharded_diffusion_attention(
    q, k, v, plan: ShardPlan, group=None, hops: int = 5, alpha: float = 0.1, key_padding_mask=None
):
    """:func:`~gglspeedup.attention.diffusion_attention` for this rank's rows ``plan.lo:plan.hi``.

    ``q, k, v``: ``(local rows, H, D)``, the rows this rank owns (token ``b * seq_len + i`` is row
    ``b * seq_len + i`` of the full pattern). ``key_padding_mask``: ``(local rows,)`` bool. Returns
    this rank's rows of the output. Call :meth:`ShardPlan.exchange_requests` once first.
    """
    if plan.send_index is None:
        raise ValueError("call plan.exchange_requests(group) once before sharded_diffusion_attention")
    local = plan.hi - plan.lo
    hops, alpha = _check_inputs(q, k, v, local, hops, alpha, key_padding_mask)
    ops = graph_ops(plan.graph, 1, q.shape[1], q.shape[2])
    pad = None
    if key_padding_mask is not None:
        pad = plan.fetch(key_padding_mask.to(torch.float32)[:, None], group)[:, 0].to(torch.uint8).contiguous()
    k_ext, v_ext = plan.fetch(k, group), plan.fetch(v, group)
    q_ext = torch.cat([q, q.new_zeros((k_ext.shape[0] - local, *q.shape[1:]))])  # fetched rows have no edges
    attn = EdgeScores.apply(q_ext.contiguous(), k_ext.contiguous(), ops, pad, MODE_SOFTMAX)
    h_ext = v_ext
    h = v
    for _ in range(hops):
        h = _Hop.apply(attn, h_ext.contiguous(), v_ext.contiguous(), ops, float(alpha))[:local]
        h_ext = plan.fetch(h, group)
    return h if hops else v.clone()  # a new tensor, as diffusion_attention's (not the caller's v)


def _check_inputs(q, k, v, local, hops, alpha, key_padding_mask):
    """``(hops, alpha)`` checked, with ``q, k, v`` and the mask (as :func:`~._validate.check_inputs`
    checks the single-device call), or raise naming the argument before anything is fetched."""
    from ...device import reject_meta
    from ...validation import check_int
    from ._validate import check_fraction

    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        reject_meta(name, tensor)  # no data for the kernels to read
        if tensor.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{name} must be float32 or float64, got {tensor.dtype}")
    if q.dim() != 3 or q.shape[0] != local or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            f"q, k and v must hold this rank's {local} rows with one shape (local rows, heads, head_dim), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(f"q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.device != k.device or q.device != v.device:
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    hops = check_int("hops", hops, minimum=0)
    alpha = check_fraction("alpha", alpha, "[0, 1]", lambda a: 0.0 <= a <= 1.0)
    if key_padding_mask is not None:
        if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
            raise TypeError("key_padding_mask must be a bool torch.Tensor (True at padding tokens)")
        reject_meta("key_padding_mask", key_padding_mask)
        if tuple(key_padding_mask.shape) != (local,):
            raise ValueError(
                f"key_padding_mask must have shape (local rows,) = ({local},), got {tuple(key_padding_mask.shape)}"
            )
    return hops, alpha

"""The fused kernels as torch-facing operations on one attention graph: the autograd Functions' executor.

:class:`GraphOps` binds an :class:`~gglspeedup.attention.AttentionGraph`, the rows of a call
(``repeats`` sequences sharing it) and their width (``heads`` x ``depth``), and turns each operation
into the kernels' arguments and new output tensors (nothing is ``(E, H, D)``). As the pooling
drivers do, one subclass per device runs the kernels: :class:`CPUGraphOps` the CPU passes on NumPy
views of CPU tensors, in :mod:`gglspeedup._parallel`'s regions; :class:`CUDAGraphOps` the CUDA
passes on CUDA tensors (and, for ``device="cuda:0"`` patterns under ``NUMBA_ENABLE_CUDASIM=1``, the
simulated ones on CPU tensors). :func:`graph_ops` builds the one of a graph's device, once the
call's arguments are checked (the contract: :class:`gglspeedup.attention._drivers.AttentionOps`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..._splitmix import dropout_key

__all__ = [
    "GraphOps",
    "CPUGraphOps",
    "CUDAGraphOps",
    "graph_ops",
    "Dropout",
    "dropout_key",
    "MODE_SOFTMAX",
    "MODE_EXP",
    "MODE_SCORE",
]

# what the score pass writes per edge (``_kernels/diffusion_rows.py``)
MODE_SOFTMAX = 0  # the edge softmax over each query's keys
MODE_EXP = 1  # exp(k . q), 0 when masked (and the backward of an exp of the scores)
MODE_SCORE = 2  # k . q, -inf when masked


class Dropout(NamedTuple):
    """Keyed dropout of one kind of element (edges of the attention, or the nodes after one hop):
    drop probability ``p``, kept values scaled by ``scale = 1 / (1 - p)``, draws keyed by ``key``
    (a uint64), keep bits in ``bits`` (uint8 ``(rows, ceil(count / 8))``, drawn by the kernels)."""

    p: float
    scale: float
    key: int
    bits: Any


def graph_ops(graph, repeats: int, heads: int, depth: int) -> GraphOps:
    """The executor of one call on ``graph`` (its device's :class:`GraphOps`): ``repeats * num_nodes``
    rows of ``heads`` x ``depth`` features."""
    return (CUDAGraphOps if graph.device.is_cuda else CPUGraphOps)(graph, repeats, heads, depth)


class GraphOps:
    """Kernel launches over ``graph`` for ``repeats * graph.num_nodes`` rows of ``heads`` x ``depth``
    features; a subclass per device supplies :meth:`_run` (and :meth:`_array`)."""

    def __init__(self, graph, repeats: int, heads: int, depth: int):
        self.graph = graph
        self.repeats = int(repeats)
        self.n = graph.num_nodes
        self.num_edges = graph.num_edges
        self.device = graph.device
        self.work = self.repeats * self.num_edges * heads * depth  # products of a pass: sizes its threads

    @property
    def rows(self) -> int:
        return self.repeats * self.n

    def _array(self, tensor):
        """What a kernel receives of a tensor: a NumPy view (no copy)."""
        return tensor.detach().numpy()

    def _run(self, name: str, *args) -> None:
        """Run pass ``name`` (``scores``, ``spmm``, ``spmm_t``, ``transpose_weights``,
        ``score_grad``, ``colsum``) on its kernel arguments."""
        raise NotImplementedError

    def _call(self, name, *args):
        self._run(name, *(self._array(a) if hasattr(a, "detach") else a for a in args))

    def _scalar(self, value, like):
        return np.dtype(str(like.dtype).replace("torch.", "")).type(value)

    def _dummy(self, like, ndim):
        import torch

        return torch.zeros((1,) * ndim, dtype=like.dtype, device=like.device)

    def _pad(self, pad, like):
        import torch

        if pad is None:
            return False, torch.zeros(1, dtype=torch.uint8, device=like.device)
        return True, pad

    # -- operations ----------------------------------------------------------------------------
    def _edge_args(self, edges, like):
        """(drop_edges, edge_bits, edge_scale) kernel arguments of an optional :class:`Dropout`."""
        if edges is None:
            return False, self._bits_dummy(like), self._scalar(1.0, like)
        return True, edges.bits, self._scalar(edges.scale, like)

    def _bits_dummy(self, like):
        import torch

        return torch.zeros((1, 1), dtype=torch.uint8, device=like.device)

    def scores(self, q, k, pad, mode, edges=None):
        """Edge scores of every row, softmaxed (``MODE_SOFTMAX``), exponentiated (``MODE_EXP``) or
        as they are (``MODE_SCORE``): ``(repeats * E, H)``; with ``edges`` (a :class:`Dropout`) its
        keep bits are drawn too.
        Raises ``ValueError`` when a score is not finite."""
        import torch

        attn = torch.empty((self.repeats * self.num_edges, q.shape[1]), dtype=q.dtype, device=q.device)
        bad = torch.zeros(self.rows, dtype=torch.uint8, device=q.device)
        has_mask, pad = self._pad(pad, q)
        g = self.graph
        drop, bits = (True, edges.bits) if edges is not None else (False, self._bits_dummy(q))
        p, key = (edges.p, edges.key) if edges is not None else (0.0, 0)
        self._call(
            "scores", g.indptr, g.indices, self.n, self.num_edges, q, k, has_mask, pad, mode, attn, bad, drop,
            np.float64(p), np.uint64(key), bits,
        )  # fmt: skip
        if bool(bad.any()):  # sync on a GPU: the check reads one flag back
            row = int(torch.nonzero(bad)[0, 0])
            raise ValueError(
                f"q and k give non-finite attention scores (k . q is inf or nan) at query row {row}; "
                "check q and k for inf / nan or overflowing values"
            )
        return attn

    def spmm(self, weights, x, scale=1.0, self_rows=None, self_scale=0.0, diag=None, edges=None, nodes=None, out=None):
        """``scale * A x (+ self_scale * self_rows) (+ diag * x)`` with ``A[y, key] = weights[e]``
        (``edges``: after edge dropout); ``nodes`` (a :class:`Dropout`): node dropout on the result,
        its keep bits drawn into ``nodes.bits``. ``out``: where the result goes (may not be ``x``)."""
        import torch

        out = torch.empty_like(x) if out is None else out
        g = self.graph
        drop_nodes = nodes is not None
        self._call(
            "spmm", g.indptr, g.indices, self.n, self.num_edges, weights, x, out, self._scalar(scale, x),
            self_rows is not None, self._scalar(self_scale, x),
            self_rows if self_rows is not None else self._dummy(x, 3),
            diag is not None, diag if diag is not None else self._dummy(x, 2),
            *self._edge_args(edges, x), drop_nodes, np.float64(nodes.p if drop_nodes else 0.0),
            np.uint64(nodes.key if drop_nodes else 0), nodes.bits if drop_nodes else self._bits_dummy(x),
            self._scalar(nodes.scale if drop_nodes else 1.0, x),
        )  # fmt: skip
        return out

    def spmm_t(
        self, weights, g, scale=1.0, diag=None, dw=None, hx=None, dw_scale=0.0, edges=None, nodes=None, total=None,
        sum_scale=1.0, out=None, transposed=False,
    ):  # fmt: skip
        """``scale * A^T g (+ diag * g)``, then node dropout with ``nodes.bits`` (drawn before);
        with ``dw`` also ``dw[e] += dw_scale * g[query] . hx[key]`` (kept edges only), with
        ``total`` also ``total += sum_scale * result``. ``out``: where the result goes (may not be ``g``).
        ``transposed``: ``weights``, ``dw`` and the keep bits of ``edges`` are in the out-CSR's
        order (:meth:`transpose_weights`)."""
        import torch

        out = torch.empty_like(g) if out is None else out
        tindptr, tqueries, tedges = self.graph.transpose()
        drop_nodes = nodes is not None
        self._call(
            "spmm_t", tindptr, tqueries, tedges, self.n, self.num_edges, weights, transposed, g, out,
            self._scalar(scale, g),
            diag is not None, diag if diag is not None else self._dummy(g, 2),
            dw is not None, dw if dw is not None else self._dummy(g, 2),
            hx if hx is not None else self._dummy(g, 3), self._scalar(dw_scale, g),
            *self._edge_args(edges, g), drop_nodes, nodes.bits if drop_nodes else self._bits_dummy(g),
            self._scalar(nodes.scale if drop_nodes else 1.0, g),
            total is not None, total if total is not None else self._dummy(g, 3), self._scalar(sum_scale, g),
        )  # fmt: skip
        return out

    def transpose_weights(self, weights, edges=None, back=False):
        """``weights`` (after edge dropout, ``edges``) in the out-CSR's order, for
        ``spmm_t(..., transposed=True)``; ``back``: from that order to the in-CSR's (no dropout).
        Also moves a :class:`Dropout`'s keep bits (uint8 rows) into that order."""
        import torch

        out = torch.empty_like(weights)
        tindptr, _, tedges = self.graph.transpose()
        self._call(
            "transpose_weights", tindptr, tedges, self.n, self.num_edges, weights, bool(back),
            *self._edge_args(edges, weights), out, self.rows,
        )  # fmt: skip
        return out

    def score_grad(self, attn, grad, pad, mode, k, edges=None, permuted=False):
        """In place: ``grad`` (d loss / d attention after edge dropout, contiguous, owned) becomes
        d loss / d score; returns ``grad_q = sum_e grad_score[e] * k[key_e]`` per query row.
        ``permuted``: ``attn`` and ``grad`` are in the out-CSR's order (:meth:`transpose_weights`;
        ``attn`` without dropout), read and written through :meth:`positions`; ``edges`` stays in
        the in-CSR's."""
        import torch

        has_mask, pad = self._pad(pad, attn)
        g = self.graph
        grad_q = torch.empty_like(k)
        self._call(
            "score_grad", g.indptr, g.indices, self.n, self.num_edges, attn, bool(permuted),
            self.positions() if permuted else g.indices, grad, has_mask, pad, mode, *self._edge_args(edges, attn),
            k, grad_q,
        )  # fmt: skip
        return grad_q

    def positions(self):
        """Where every in-CSR edge ``e`` sits in the out-CSR's order (the inverse of the
        transpose's edge list: ``positions[tedges[t]] = t``), on the device; made once per call."""
        cached = getattr(self, "_positions", None)
        if cached is None:
            _, _, tedges = self.graph.transpose()
            xp = self.device.xp
            cached = xp.empty_like(tedges)
            cached[tedges] = xp.arange(tedges.shape[0], dtype=tedges.dtype)
            self._positions = cached
        return cached

    def colsum(self, weights, heads):
        """Out-degree of every key row: ``(rows, H)``, the sum of its outgoing edge weights."""
        import torch

        out = torch.empty((self.rows, heads), dtype=weights.dtype, device=weights.device)
        tindptr, _, tedges = self.graph.transpose()
        self._call("colsum", tindptr, tedges, self.n, self.num_edges, weights, out)
        return out

    def sources(self):
        """int64 tensor ``(repeats * E,)``: the key row of every edge (kept)."""
        import torch

        cached = getattr(self, "_sources", None)
        if cached is None:
            from ...device import to_numpy

            indices = torch.from_numpy(to_numpy(self.graph.indices).astype(np.int64))
            offsets = torch.arange(self.repeats, dtype=torch.int64)[:, None] * self.n
            cached = (indices[None, :] + offsets).reshape(-1)
            self._sources = cached
        return cached


class CPUGraphOps(GraphOps):
    """The passes on the CPU (:mod:`._kernels.diffusion_cpu`): NumPy views of CPU tensors, each pass
    one parallel region, on one thread below :data:`gglspeedup._parallel.PARALLEL_MIN`'s products."""

    def __init__(self, graph, repeats: int, heads: int, depth: int):
        super().__init__(graph, repeats, heads, depth)
        from ._kernels import diffusion_cpu

        self.kernels = diffusion_cpu

    def _run(self, name, *args):
        from ..._parallel import kernel_threads

        with kernel_threads(self.work, "products"):  # small calls run on one thread
            getattr(self.kernels, name)(*args)


class CUDAGraphOps(GraphOps):
    """The passes on the graph's CUDA device (:mod:`._kernels.diffusion_cuda`): the CUDA tensors
    themselves, or NumPy views of CPU tensors under the simulator."""

    def __init__(self, graph, repeats: int, heads: int, depth: int):
        super().__init__(graph, repeats, heads, depth)
        from ._kernels import diffusion_cuda

        self.kernels = diffusion_cuda
        self.real_gpu = not self.device.simulated

    def _array(self, tensor):
        return tensor.detach() if self.real_gpu else tensor.detach().numpy()

    def _run(self, name, *args):
        getattr(self.kernels, name)(self.device, *args)

"""What the two pooling drivers share: each map's outputs and scratch, allocated with the driver's
array module (``xp``: NumPy on the CPU, CuPy or the simulator's NumPy on a GPU), then one kernel
launch over the (head, graph) problems. :class:`~.cpu.CPUPoolingDriver` and
:class:`~.cuda.CUDAPoolingDriver` supply :meth:`PoolingDriverBase._run` (the contract:
:class:`gglspeedup.attention._drivers.PoolingDriver`).
"""

from __future__ import annotations

import numpy as np

from .fused_lasso import FUSED_WORK_INT_FIELDS, FusedWork

__all__ = ["PoolingDriverBase", "fused_work"]


def fused_work(xp, heads, num_nodes, num_edges):
    """A :class:`FusedWork` of ``xp`` arrays for ``heads`` problems' ``num_nodes`` and ``num_edges``."""
    ints = [xp.empty((heads, num_nodes), np.int64) for _ in FUSED_WORK_INT_FIELDS]
    return FusedWork(*ints, xp.empty((heads, num_edges)), xp.empty((heads, num_nodes)), xp.empty((heads, num_nodes)))


class PoolingDriverBase:
    """The pooling maps; arrays are ``self.xp`` arrays, head-major float64 ``[heads, num_nodes]``."""

    xp = np

    def upload(self, arrays):
        """A :class:`BatchArrays` record of host arrays, on this driver's device."""
        return arrays

    def _run(self, name, problems, size, *args):
        """Run kernel ``name`` (``softmax``, ``softmax_vjp``, ``sparsemax``, ``sparsemax_vjp``,
        ``fused``, ``fused_vjp``) on ``args``: ``problems`` (head, graph) problems of ``size``
        nodes x heads in all."""
        raise NotImplementedError

    def _map(self, name, ptr, x, *args):
        self._run(name, x.shape[0] * (ptr.shape[0] - 1), x.size, ptr, x, *args)

    def softmax(self, ptr, x):
        out = self.xp.zeros_like(x)
        self._map("softmax", ptr, x, out)
        return out

    def softmax_vjp(self, ptr, a, grad_a):
        grad_x = self.xp.zeros_like(a)
        self._map("softmax_vjp", ptr, a, grad_a, grad_x)
        return grad_x

    def sparsemax(self, ptr, x, gamma):
        out = self.xp.zeros_like(x)
        self._map("sparsemax", ptr, x, gamma, out)
        return out

    def sparsemax_vjp(self, ptr, x, a, gamma, grad_a):
        grad_x = self.xp.zeros_like(x)
        grad_gamma = self.xp.zeros((x.shape[0], ptr.shape[0] - 1))
        self._map("sparsemax_vjp", ptr, x, a, gamma, grad_a, grad_x, grad_gamma)
        return grad_x, grad_gamma

    def fused(self, graph, s, lam, gamma, with_sparsemax):
        xp = self.xp
        heads, num_nodes = s.shape
        graphs = graph.ptr.shape[0] - 1
        work = fused_work(xp, heads, num_nodes, graph.edge_u.shape[0])
        fused = xp.zeros_like(s)
        label = xp.zeros((heads, num_nodes), np.int64)
        bnd = xp.zeros((heads, num_nodes), np.int64)
        weights = xp.zeros_like(s) if with_sparsemax else xp.zeros((0, 0))
        status = xp.zeros((heads, graphs), np.int64)
        residual = xp.zeros((heads, graphs))
        outputs = (fused, label, bnd, weights, status, residual)
        self._run("fused", heads * graphs, s.size, graph, s, lam, gamma, work, *outputs, bool(with_sparsemax))
        return outputs

    def fused_vjp(self, ptr, fused, weights, label, bnd, gamma, grad_out):
        xp = self.xp
        heads, num_nodes = fused.shape
        graphs = ptr.shape[0] - 1
        work = fused_work(xp, heads, num_nodes, 0)
        grad_fused = xp.zeros_like(fused) if weights.shape[0] > 0 else xp.zeros((0, 0))
        grad_s = xp.zeros_like(fused)
        grad_lam = xp.zeros((heads, graphs))
        grad_gamma = xp.zeros((heads, graphs))
        inputs = (ptr, fused, weights, label, bnd, gamma, grad_out, work, grad_fused)
        self._run("fused_vjp", heads * graphs, fused.size, *inputs, grad_s, grad_lam, grad_gamma)
        return grad_s, grad_lam, grad_gamma

"""The attention drivers' contracts, written down (``typing.Protocol``), as :mod:`gglspeedup.protocols`
does for the samplers.

Each kernel family of :mod:`gglspeedup.attention` runs through one driver per device behind one
interface, as the samplers' do: a base class holds what both devices share (allocating the outputs,
the algorithm's steps) and each device adds one small part, the launches (kernels compiled once for
the CPU with ``numba.njit``, run in :mod:`gglspeedup._parallel`'s regions, and once for CUDA with
``numba.cuda.jit``, launched through :mod:`gglspeedup._launch`, the simulator included). Drivers
validate nothing: the public functions check their arguments first, then fetch or build the driver.

- :class:`PoolingDriver`: the pooling maps. Base ``pooling._kernels.driver.PoolingDriverBase``; CPU
  ``pooling._kernels.cpu.CPUPoolingDriver``; CUDA ``pooling._kernels.cuda.CUDAPoolingDriver``.
  Made once per device by ``pooling._state.driver_for(device)``.
- :class:`PoolingLayer`: the attention-pooling layer's one-kernel path, the CPU pooling driver's
  (GPU tensors take the composed maps).
- :class:`PatternDriver`: sequence pattern builds. Base
  ``sequence._kernels.pattern_driver.PatternDriverBase``; CPU ``sequence._kernels.pattern_cpu.CPUPatternDriver``;
  CUDA ``sequence._kernels.pattern_cuda.CUDAPatternDriver``. Made once per device by
  ``sequence.patterns.pattern_driver(device)``.
- :class:`AttentionOps`: the fused attention passes. Base ``sequence._ops.GraphOps``; CPU
  ``CPUGraphOps``; CUDA ``CUDAGraphOps``. Made once per call by ``sequence._ops.graph_ops(graph,
  repeats, heads, depth)`` (it binds the call's graph and widths), after ``sequence._validate``'s checks.

All are ``runtime_checkable`` (``isinstance`` checks that the methods exist, not their signatures);
``tests/test_attention_drivers.py`` checks every driver against its contract on each device.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["PoolingDriver", "PoolingLayer", "PatternDriver", "AttentionOps"]


@runtime_checkable
class PoolingDriver(Protocol):
    """The pooling maps over every (head, graph) problem of a batch in one launch each.

    Arrays are ``xp``'s (NumPy; CuPy on a GPU), head-major float64 ``[heads, N]``; ``ptr`` the
    batch's node offsets and ``graph`` its :class:`~gglspeedup.attention.pooling._kernels.structure.BatchArrays`
    (:meth:`upload`-ed); ``lam`` / ``gamma`` float64 ``(heads,)``. Each map returns new arrays:
    ``softmax`` / ``sparsemax`` the weights, ``fused`` ``(fused, label, bnd, weights, status,
    residual)``; each ``*_vjp`` the gradients of its map's inputs (``[heads, B]`` per problem for
    ``lam`` / ``gamma``).
    """

    xp: Any

    def upload(self, arrays: Any) -> Any: ...

    def softmax(self, ptr: Any, x: Any) -> Any: ...

    def softmax_vjp(self, ptr: Any, a: Any, grad_a: Any) -> Any: ...

    def sparsemax(self, ptr: Any, x: Any, gamma: Any) -> Any: ...

    def sparsemax_vjp(self, ptr: Any, x: Any, a: Any, gamma: Any, grad_a: Any) -> tuple: ...

    def fused(self, graph: Any, s: Any, lam: Any, gamma: Any, with_sparsemax: bool) -> tuple: ...

    def fused_vjp(
        self, ptr: Any, fused: Any, weights: Any, label: Any, bnd: Any, gamma: Any, grad_out: Any
    ) -> tuple: ...


@runtime_checkable
class PoolingLayer(Protocol):
    """The attention-pooling layer after its linear maps, one kernel call per direction: standardise,
    map (by name: ``"softmax"``, ``"sparsemax"``, ``"gfusedmax"``) and pool every (head, graph)
    problem; ``layer_forward`` writes the pooled output and returns ``(state, status, residual)``,
    ``layer_backward`` writes the scores' and projections' gradients and returns the per-problem
    ``(dL/dlam, dL/dgamma)``. Softmax takes the linear map's ``bias`` (added where the kernel reads
    ``scores``) and reports a non-finite graph sum of scores as ``status`` None."""

    def layer_forward(
        self, mapping: str, norm: bool, graph: Any, scores: Any, proj: Any, p0: int, bounds: Any, lam: Any,
        gamma: Any, out: Any, bias: Any = None,
    ) -> tuple: ...  # fmt: skip

    def layer_backward(
        self, mapping: str, norm: bool, ptr: Any, proj: Any, p0: int, bounds: Any, gamma: Any, grad_out: Any,
        state: Any, grad_scores: Any, grad_proj: Any, bias: Any = None,
    ) -> tuple: ...  # fmt: skip


@runtime_checkable
class PatternDriver(Protocol):
    """A sequence pattern's in-CSR, built as count -> scan -> fill over its rows: ``build(arrays,
    indptr_dtype, index_dtype) -> (indptr, indices)`` from the record
    :class:`~gglspeedup.attention.sequence.patterns.SequencePattern` prepares (``xp`` arrays)."""

    xp: Any

    def build(self, arrays: Any, indptr_dtype: Any, index_dtype: Any) -> tuple: ...


@runtime_checkable
class AttentionOps(Protocol):
    """The fused attention passes over one attention graph for one call (``repeats`` sequences of
    its rows, ``heads`` x ``depth`` features), on torch tensors: each returns new tensors (nothing
    is ``(E, H, D)``). ``scores``: the edge scores ``(repeats * E, H)`` (softmax, exp or raw);
    ``spmm`` / ``spmm_t``: propagation along the graph and its transpose (with the edges'
    gradient); ``transpose_weights``: edge values into the out-CSR's order and back;
    ``score_grad``: the scores' backward and the queries' gradient; ``colsum``: every key's
    out-degree; ``sources``: every edge's key row."""

    repeats: int
    num_edges: int

    def scores(self, q: Any, k: Any, pad: Any, mode: int, edges: Any = None) -> Any: ...

    def spmm(self, weights: Any, x: Any, *args: Any, **kwargs: Any) -> Any: ...

    def spmm_t(self, weights: Any, g: Any, *args: Any, **kwargs: Any) -> Any: ...

    def transpose_weights(self, weights: Any, edges: Any = None, back: bool = False) -> Any: ...

    def score_grad(self, attn: Any, grad: Any, pad: Any, mode: int, k: Any, edges: Any = None) -> Any: ...

    def colsum(self, weights: Any, heads: int) -> Any: ...

    def sources(self) -> Any: ...

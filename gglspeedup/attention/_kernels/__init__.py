"""Kernels of :mod:`gglspeedup.attention`: one body per problem or row, compiled for the CPU and
for CUDA. Kernels see arrays, records and scalars only: no validation, no framework imports.

Pooling (one problem = one graph of a batch and one head): ``fused_lasso`` (the exact graph fused
lasso: decomposition by maximum flows, closed-form group values, certificate, group-average
backward), ``sparsemax`` (softmax and sparsemax forward and backward), ``pooling_steps`` (one
(head, graph) problem's step, run by both devices), ``pooling_cpu`` / ``pooling_cuda`` (their
drivers, on the shared allocations of ``pooling_driver``; the CPU's parallel regions run under
:mod:`gglspeedup._parallel`'s lock) and ``pooling_structure`` (a batch's undirected edge lists and connected components,
built once per batch structure).

Sequence attention (one body per query row): ``pattern_rows`` (sequence attention patterns: count
and fill one query row), ``pattern_cpu`` / ``pattern_cuda`` (their drivers), ``diffusion_rows``
(the rows of the fused attention kernels: scores and softmax, propagation, transposed propagation
with edge gradients) and ``diffusion_cpu`` / ``diffusion_cuda`` (their drivers).
"""

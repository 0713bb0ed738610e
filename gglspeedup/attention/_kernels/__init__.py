"""Kernels of :mod:`gglspeedup.attention`: one body per problem, compiled for the CPU and for CUDA.

Pooling (one problem = one graph of a batch and one head): ``fused_lasso`` (the exact graph fused
lasso: decomposition by maximum flows, closed-form group values, certificate, group-average
backward), ``sparsemax`` (softmax and sparsemax forward and backward), ``pooling_cpu`` /
``pooling_cuda`` (their drivers) and ``pooling_structure`` (a batch's undirected edge lists and
connected components, built once per batch structure). Kernels see arrays, records and scalars
only: no validation, no framework imports.
"""

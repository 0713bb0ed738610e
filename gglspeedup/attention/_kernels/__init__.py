"""Kernels of :mod:`gglspeedup.attention`: one body per row, compiled for the CPU and for CUDA.

``pattern_rows`` (sequence attention patterns: count and fill one query row), ``pattern_cpu`` /
``pattern_cuda`` (their drivers), ``diffusion_rows`` (the rows of the fused attention kernels:
scores and softmax, propagation, transposed propagation with edge gradients) and
``diffusion_cpu`` / ``diffusion_cuda`` (their drivers). Kernels see arrays and scalars only: no
validation, no framework imports.
"""

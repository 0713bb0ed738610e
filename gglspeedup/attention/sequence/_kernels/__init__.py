"""Kernels of :mod:`gglspeedup.attention.sequence`: one body per query row, compiled for the CPU
and for CUDA. Kernels see arrays, records and scalars only: no validation, no framework imports;
only this room imports them (``tests/test_layout.py``).

- ``pattern_rows``: count and fill one query row of a sequence attention pattern (the GPU's fill;
  ``pattern_bits``: the CPU's, through a key bitmap, the same rows);
  ``pattern_driver``: what the two pattern drivers share (count -> scan -> fill);
  ``pattern_cpu`` / ``pattern_cuda``: their builds (and the host prologue: per-sequence states,
  global tokens);
- ``diffusion_rows``: the rows of the fused attention kernels (scores and softmax, propagation,
  transposed propagation with edge gradients), with ``lanes`` (dot products in fixed-order vector
  lanes); ``diffusion_cpu`` / ``diffusion_cuda``: their launches.
"""

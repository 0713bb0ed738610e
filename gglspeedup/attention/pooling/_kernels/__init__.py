"""Kernels of :mod:`gglspeedup.attention.pooling`: one body per (head, graph) problem, compiled for
the CPU and for CUDA. Kernels see arrays, records and scalars only: no validation, no framework
imports; only this room imports them (``tests/test_layout.py``).

- ``fused_lasso`` (with ``max_flow``): the exact graph fused lasso (decomposition by maximum flows,
  closed-form group values, certificate, group-average backward);
- ``sparsemax``: softmax and sparsemax forward and backward;
- ``steps``: one (head, graph) problem's step, run by both devices;
- ``driver`` / ``cpu`` / ``cuda``: the drivers (the shared allocations of ``driver``'s
  :class:`~.driver.PoolingDriverBase`; the CPU one's parallel regions run under
  :mod:`gglspeedup._parallel`'s lock), the CPU driver also running the layer's one-kernel path
  (``layer``: standardise, map and pool per problem; ``softmax_layer``: the softmax layer's
  problem in fewer passes);
- ``structure``: a batch's undirected edge lists and connected components, built once per batch
  structure.
"""

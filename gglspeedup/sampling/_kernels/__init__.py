"""Sampling kernels and their drivers: see DESIGN.md, "Sampling".

- :mod:`.records`: the two records every kernel takes, :class:`GraphArrays` (the placed graph)
  and :class:`SampleOptions` (replace, weighted, has_edge_ids, ...).
- :mod:`.rng`: a typed relation's RNG state; the counter-based draws themselves (splitmix64 hash
  of seed, batch key, hop, node, draw) are :mod:`gglspeedup._rng`'s, shared with every kernel.
- :mod:`.rows`: one body per row (count, fill, finish), compiled for both targets.
- :mod:`.draws`: the draw primitives :mod:`.rows` and :mod:`.exclusion` share (bisection, the
  inverse-CDF search, Floyd's algorithm, the successive-sampling checks).
- :mod:`.cpu`: :class:`~.cpu.CPUDriver` and its ``@njit(parallel=True, cache=True)`` hop kernel.
- :mod:`.blocks`: the CPU hop kernels' shared scaffolding (prefix sum, buffers, blocks of rows).
- :mod:`.cuda`: :class:`~.cuda.CUDADriver` and its ``@cuda.jit`` kernels (imported only for a
  CUDA sampler).
- :mod:`.reindex`: the GPU relabel (hash table, atomic first position, ordering pass).

Both drivers have one interface: built once per sampler from the placed graph, the options and
the seed, then ``driver.sample_all(seeds, fanouts, key) -> (n_id, hops)`` with ``hops`` seed hop
first, each ``(edge_index, e_id, (num_sources, num_targets))``. Kernels see only arrays, records
and scalars: no validation, no framework imports.
"""

from .records import GraphArrays, SampleOptions, no_exclusions

__all__ = ["GraphArrays", "SampleOptions", "no_exclusions"]

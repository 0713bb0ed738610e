"""Sampling kernels: see DESIGN.md, "Sampling".

- :mod:`.rng`: the counter-based RNG (splitmix64 hash of seed, batch key, hop, node, draw).
- :mod:`.rows`: one body per row (count, fill, finish), compiled for both targets.
- :mod:`.cpu`: ``@njit(parallel=True, cache=True)`` hop driver and the dense relabel map.
- :mod:`.cuda`: ``@cuda.jit`` drivers and launchers (imported only for a CUDA sampler).
- :mod:`.reindex`: the GPU relabel (hash table, atomic first position, ordering pass).

Kernels see only arrays and scalars: no validation, no framework imports.
"""

__all__: list[str] = []

"""Sampling kernels and their drivers: see DESIGN.md, "Sampling".

- :mod:`.records`: the records every kernel and driver takes: :class:`GraphArrays` (the placed
  graph), :class:`SampleOptions` (replace, weighted, has_edge_ids, a call's exclusions, times,
  hop rule and disjoint stride), ``HopPlan`` and ``DegreeTable`` (typed), ``Drawn`` (what a
  driver returns), and the virtual ids of disjoint calls.
- :mod:`.rng`: a typed relation's RNG state; the counter-based draws themselves (splitmix64 hash
  of seed, batch key, hop, node, draw) are :mod:`gglspeedup._rng`'s, shared with every kernel.
- :mod:`.rows`: one body per row (count, fill, finish; a temporal row's window), compiled for
  both targets; :mod:`.draws`: the draw primitives :mod:`.rows` and :mod:`.exclusion` share
  (bisection, the inverse-CDF search, Floyd's algorithm, the successive-sampling checks);
  :mod:`.time_rows`: rows sorted by time once per temporal sampler (the check and the sort).
- :mod:`.cpu`: :class:`~.cpu.CPUDriver` and its ``@njit(parallel=True, cache=True)`` hop kernel;
  :mod:`.blocks`: the CPU hop kernels' shared scaffolding (prefix sum, buffers, blocks of rows);
  :mod:`.disjoint`: the CPU per-tree hops (disjoint and temporal sampling).
- :mod:`.typed`: :class:`~.typed.TypedCPUDriver` and its typed hop kernel; :mod:`.typed_hops`:
  the host side of a typed hop both typed drivers share.
- :mod:`.cuda`: :class:`~.cuda.CUDADriver` and its ``@cuda.jit`` kernels, :mod:`.cuda_typed`:
  :class:`~.cuda_typed.TypedCUDADriver`, :mod:`.reindex`: the GPU relabel (hash table, atomic
  first position, ordering pass), :mod:`.cuda_links`: link negatives and exclusions on a GPU
  (imported only for a CUDA sampler).
- :mod:`.links`: link negatives and the excluded positions on the CPU; :mod:`.exclusion`: the
  rows that skip a link batch's excluded edges.
- :mod:`.remote`: :class:`~.remote.RemoteDriver` and :class:`~.remote.TypedRemoteDriver`, the
  drivers' contract with each hop's rows drawn by their owners (:mod:`gglspeedup.service`);
  :mod:`.remote_rows`: the owner's side (a partition's rows, drawn by the local row bodies);
  :mod:`.remote_relabel`: the trainer's side (route the targets, relabel the answers).

Every driver speaks one written contract (:mod:`gglspeedup.sampling.drivers`): built once per
sampler from the placed graph, the options and the seed, then ``driver.sample(seeds, fanouts,
key, options=None) -> Drawn(n_id, hops, batch)`` with ``hops`` seed hop first, each untyped one
``(edge_index, e_id, (num_sources, num_targets))``; everything a call switches on is a field of
``options``. Kernels see only arrays, records and scalars: no validation, no framework imports.
"""

from .records import GraphArrays, SampleOptions, no_exclusions

__all__ = ["GraphArrays", "SampleOptions", "no_exclusions"]

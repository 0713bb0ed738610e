"""Gather kernels of the feature store. No validation happens here.

- :mod:`.gather`: the CPU row gathers (rows as unsigned words, prefetched, streamed stores for
  large outputs);
- :mod:`.gather_cuda`: the CUDA gather (device-cache rows and pinned host rows, read over UVA,
  in one launch);
- :mod:`.disk`: cold reads of a memory-mapped table (ask the kernel for every page a gather will
  touch before touching any).
"""

"""Samplers and feature stores for several devices, built once and shared with spawned processes.

:class:`MultiDeviceSampler` and :class:`MultiDeviceFeature` keep their host arrays (graph, feature
table, cache order) in shared memory (:mod:`gglspeedup._shared`), so pickling one sends a few
hundred bytes of names and options, never the data (inputs memory-mapped from files, e.g.
``CSRGraph.load(path, mmap=True)`` or ``np.load(path, mmap_mode="r")``, travel as the file's path
and are not copied at all: the page cache is shared): pass them straight to
``torch.multiprocessing.spawn(fn, args=(sampler, feature))`` or ``paddle.distributed.spawn``.
Device state (a :class:`~gglspeedup.NeighborSampler` / :class:`~gglspeedup.FeatureStore` per
rank) is built lazily, in the process that first uses rank ``r``, on ``devices[r]``.

>>> sampler = MultiDeviceSampler(graph, ["cuda:0", "cuda:1"], [25, 10])    # doctest: +SKIP
>>> feature = MultiDeviceFeature(x, ["cuda:0", "cuda:1"], cache_size="1G", graph=graph)  # doctest: +SKIP
>>> def run(rank, sampler, feature):                                     # doctest: +SKIP
...     n_id, adjs = sampler.sample(seeds_of(rank), rank)
...     rows = feature.rank(rank)[n_id]
>>> torch.multiprocessing.spawn(run, args=(sampler, feature), nprocs=2)  # doctest: +SKIP
"""

from __future__ import annotations

from ._common import rank_seed
from .feature import MultiDeviceFeature
from .sampler import MultiDeviceSampler

__all__ = ["MultiDeviceSampler", "MultiDeviceFeature", "rank_seed"]

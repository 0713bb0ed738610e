"""MultiDeviceSampler: one NeighborSampler per device over one graph in shared memory."""

from __future__ import annotations

import threading

import numpy as np

from .._shared import share
from ..device import to_numpy
from ..graph import CSRGraph, as_csr_graph
from ..protocols import Sampler
from ..sampling.types import SampleOutput
from ..validation import check_bool, check_fanouts, check_int
from ._common import _check_devices, _PerProcessState, rank_seed

__all__ = ["MultiDeviceSampler"]


class MultiDeviceSampler(_PerProcessState):
    """One :class:`~gglspeedup.NeighborSampler` per device over one shared graph.

    Parameters
    ----------
    graph : CSRGraph or scipy sparse matrix
        Copied once into shared memory (host arrays), then read by every rank without copies
        on the CPU; a CUDA rank moves it to its device (``placement`` option) when first used.
    devices : list of devices
        ``devices[r]`` is rank ``r``'s device: ``["cuda:0", "cuda:1"]``, or ``["cpu", "cpu"]``
        (one CPU process per rank).
    fanouts : list of int
        Neighbours per hop, seed hop first (see :class:`~gglspeedup.NeighborSampler`).
    seed : int
        Rank ``r`` samples with seed :func:`rank_seed(seed, r) <rank_seed>`.
    **sampler_options
        ``replace``, ``weighted``, ``placement``: passed to every rank's sampler.

    Notes
    -----
    Output is a pure function of ``(seed, rank, key, seeds)``: the parent and a spawned child
    calling ``sample(seeds, rank, key)`` get identical arrays. Without ``key`` each rank's sampler
    uses and advances its own counter in the calling process.
    """

    def __init__(self, graph, devices, fanouts, *, seed=0, **sampler_options):
        from ..sampling.common import PLACEMENTS
        from ..sampling.sampler import check_not_bipartite

        graph = check_not_bipartite(as_csr_graph(graph).to("cpu"))
        self.devices = _check_devices(devices)
        unknown = set(sampler_options) - {"replace", "weighted", "placement"}
        if unknown:
            raise TypeError(f"unknown sampler option(s) {sorted(unknown)}; known: replace, weighted, placement")
        placement = sampler_options.get("placement", "auto")
        if placement not in PLACEMENTS:  # here, not in each rank's first sample (in a spawned child)
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
        if placement not in ("auto", "host") and not all(d.is_cuda for d in self.devices):
            raise ValueError(f"placement {placement!r} needs CUDA devices; CPU ranks read the graph from shared memory")
        if placement == "host" and any(d.is_cuda for d in self.devices):
            raise ValueError("placement 'host' is for CPU ranks; CUDA ranks take 'auto', 'device' or 'pinned'")
        # The checks every rank's NeighborSampler would run, once, here.
        for flag in ("replace", "weighted"):
            check_bool(flag, sampler_options.get(flag, False))
        if sampler_options.get("weighted", False) and graph.weights is None:
            raise ValueError("weighted=True needs a graph with weights (CSRGraph(..., weights=w))")
        self.fanouts = check_fanouts(fanouts)
        self.seed = check_int("seed", seed, minimum=0, below=2**64)
        self.options = dict(sampler_options)
        self._arrays = {
            name: share(getattr(graph, name))
            for name in ("indptr", "indices", "edge_ids", "weights", "node_order")  # a reordered graph's ids too
            if getattr(graph, name) is not None
        }
        self._local_state()

    _PICKLED = ("devices", "fanouts", "seed", "options", "_arrays")

    def _local_state(self) -> None:
        self._lock = threading.Lock()
        self._graph = None
        self._samplers = {}

    @property
    def graph(self) -> CSRGraph:
        """The shared graph (host arrays viewing shared memory; no copy)."""
        if self._graph is None:
            arrays = {name: handle.array for name, handle in self._arrays.items()}
            self._graph = CSRGraph(arrays.pop("indptr"), arrays.pop("indices"), _checked=True, **arrays)
        return self._graph

    def sampler(self, rank: int) -> Sampler:
        """Rank ``rank``'s :class:`~gglspeedup.NeighborSampler`, built on first use in this process."""
        return self._per_rank("_samplers", rank, self._new_sampler)

    def _new_sampler(self, rank: int, device) -> Sampler:
        from ..sampling import NeighborSampler

        return NeighborSampler(self.graph, self.fanouts, seed=rank_seed(self.seed, rank), device=device, **self.options)

    def rank(self, rank: int) -> Sampler:
        """Rank ``rank``'s sampler as a :class:`gglspeedup.protocols.Sampler` (``sample(seeds,
        key=None)``), e.g. for a :class:`~gglspeedup.NodeLoader` in that rank's process; the
        counterpart of :meth:`MultiDeviceFeature.rank`. Same object as :meth:`sampler`, so also a
        :class:`gglspeedup.protocols.LinkSampler` for a :class:`~gglspeedup.LinkLoader`."""
        return self.sampler(rank)

    def set_fanouts(self, fanouts) -> MultiDeviceSampler:
        """Use ``fanouts`` from now on in this process (the seed API's ``set_size``); returns self.

        Checked like the constructor's. Ranks already built here keep their device state and
        their batch counters (:meth:`NeighborSampler.with_fanouts`), so calling this every epoch
        does not replay earlier batches. Fanouts set before pickling travel with the object; a
        call in a spawned child changes that child's copy only.
        """
        checked = check_fanouts(fanouts)
        with self._lock:
            self.fanouts = checked
            self._samplers = {rank: s.with_fanouts(checked) for rank, s in self._samplers.items()}
        return self

    def sample(self, seeds, rank: int, key=None) -> SampleOutput:
        """Sample ``seeds`` on ``devices[rank]``; see :meth:`gglspeedup.NeighborSampler.sample`."""
        return self.sampler(rank).sample(seeds, key=key)

    def sample_scattered(self, seeds, key=None) -> list:
        """Split one batch across all devices (one process): ``outputs[r]`` sampled on ``devices[r]``.

        ``seeds`` (1-D, host or device) is cut into ``num_devices`` contiguous chunks whose sizes
        differ by at most one (``numpy.array_split``); chunk ``r`` is sampled by rank ``r`` with
        ``key``, so ``outputs[r]`` equals ``sample(chunk_r, r, key)`` and its arrays already live on
        ``devices[r]``, where a replica of the model can consume them without a round trip through
        device 0. Returns a list of :class:`~gglspeedup.SampleOutput`, in rank order.
        """
        if isinstance(seeds, (list, tuple)) and len(seeds) == 0:
            seeds = np.empty(0, np.int64)  # as sample() takes it (NumPy reads [] as float64)
        host = to_numpy(seeds)
        if host.ndim != 1:
            raise ValueError(f"seeds must be 1-D, got shape {host.shape}")
        chunks = np.array_split(host, self.num_devices)
        return [self.sample(chunk, rank, key=key) for rank, chunk in enumerate(chunks)]

    def __repr__(self) -> str:
        devices = [str(d) for d in self.devices]
        return (
            f"MultiDeviceSampler(devices={devices}, fanouts={self.fanouts}, seed={self.seed}, "
            f"num_nodes={len(self._arrays['indptr'].array) - 1}, built_ranks={sorted(self._samplers)})"
        )

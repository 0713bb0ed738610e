"""The GPU driver: ``@cuda.jit`` kernels over the shared row bodies, and the per-hop launcher.

One thread per target row (blocks of 128 threads on a real GPU) runs exactly the row bodies the
CPU driver runs, so draws are identical. Per hop: count kernel -> device ``cumsum`` -> fill kernel
-> :func:`.reindex.relabel`. Arrays are CuPy on a real GPU (passed to numba through
``__cuda_array_interface__``) and NumPy under the simulator. A graph placed in pinned host memory
(numba mapped arrays) is read by the same kernels over PCIe (UVA).
"""

from __future__ import annotations

import warnings

import numpy as np
from numba import cuda

from .records import GraphArrays, SampleOptions, graph_arrays
from .reindex import relabel
from .rng import hop_state, row_state
from .rows import row_count, row_fill, row_finish

__all__ = ["CUDADriver", "THREADS_PER_BLOCK"]

THREADS_PER_BLOCK = 128
_SIM_THREADS_PER_BLOCK = 32  # the simulator pays ~1 ms per thread, idle ones included


@cuda.jit(cache=True)
def _count_kernel(graph, options, n_id, k, counts):
    i = cuda.grid(1)
    if i < n_id.shape[0]:
        counts[i + 1] = row_count(graph, options, n_id[i], k)


@cuda.jit(cache=True)
def _fill_kernel(graph, options, n_id, k, hop_state_, offsets, e_id, col, dst):
    i = cuda.grid(1)
    if i < n_id.shape[0]:
        node = n_id[i]
        start = offsets[i]
        count = offsets[i + 1] - start
        row_fill(graph, options, node, k, row_state(hop_state_, node), count, e_id, start)
        row_finish(graph, options, e_id, col, start, start + count)
        for q in range(start, start + count):
            dst[q] = i


def _make_launcher(simulated: bool):
    block = _SIM_THREADS_PER_BLOCK if simulated else THREADS_PER_BLOCK

    def launch(kernel, n, *args):
        if n == 0:
            return
        threads = min(block, n) if simulated else block
        blocks = (n + threads - 1) // threads
        if simulated:
            with warnings.catch_warnings():  # NumPy scalar uint64 wrap-around in the RNG
                warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
                kernel[blocks, threads](*args)
        else:
            kernel[blocks, threads](*args)

    return launch


def _kernel_record(record):
    """``record`` with its CuPy arrays as numba device-array views (no copy).

    numba types a kernel argument that *is* a CuPy array through ``__cuda_array_interface__``,
    but not one inside a tuple; numba's own device arrays (and mapped host arrays, and NumPy
    arrays under the simulator) type anywhere.
    """
    return type(record)._make(
        cuda.as_cuda_array(value)
        if hasattr(value, "__cuda_array_interface__") and not isinstance(value, np.ndarray)
        else value
        for value in record
    )


class CUDADriver:
    """Samples on one CUDA device (real or simulated) for one sampler.

    Parameters
    ----------
    graph : CSRGraph
        Already placed on ``device`` (device or pinned memory).
    options : SampleOptions
    seed : int
    device : Device
    weight_tables : callable, optional
        ``weight_tables(indptr, weights) -> (live, cum)`` on host arrays (the CPU kernel); used
        once, here, for weighted samplers. The tables go where the graph is.
    """

    def __init__(self, graph, options: SampleOptions, seed: int, device, weight_tables=None):
        from ...device import pinned_empty, to_numpy

        self.device, self.options, self.seed = device, options, int(seed)
        xp = device.xp
        tables = None
        if options.weighted:
            tables = weight_tables(to_numpy(graph.indptr), to_numpy(graph.weights))
            if graph.placement == "pinned":
                pinned = tuple(pinned_empty(t.shape, t.dtype) for t in tables)
                for target, table in zip(pinned, tables):
                    target[...] = table
                tables = pinned
            else:
                with device:
                    tables = tuple(xp.array(t) for t in tables)
        with device:
            arrays = graph_arrays(graph, tables, lambda dtype: xp.zeros(1, dtype=dtype))
        self.graph: GraphArrays = _kernel_record(arrays)
        self._launch = _make_launcher(device.simulated)

    @property
    def weight_tables(self):
        """``(live, cum)`` of a weighted sampler, where the graph lives, else ``None``."""
        return (self.graph.live, self.graph.cum) if self.options.weighted else None

    def sample_all(self, seeds, fanouts, key: int):
        """Sample every hop; returns ``(n_id, [(edge_index, e_id, size), ...])``, seed hop first.

        ``seeds`` is a checked int64 host or device array; outputs are arrays of ``device.xp``.
        """
        device, graph, options, launch = self.device, self.graph, self.options, self._launch
        xp = device.xp
        with device:
            n_id = xp.ascontiguousarray(xp.asarray(seeds), dtype=np.int64)
            hops = []
            for hop, k in enumerate(fanouts):
                num_targets = int(n_id.shape[0])
                counts = xp.zeros(num_targets + 1, dtype=np.int64)
                launch(_count_kernel, num_targets, graph, options, n_id, k, counts)
                offsets = xp.cumsum(counts)
                num_edges = int(offsets[-1])  # sync: the hop's edge count sizes its outputs
                edge_index = xp.empty((2, num_edges), dtype=np.int64)
                e_id = xp.empty(num_edges, dtype=np.int64)
                if num_edges:
                    col = xp.empty(num_edges, dtype=np.int64)
                    launch(
                        _fill_kernel,
                        num_targets,
                        graph,
                        options,
                        n_id,
                        k,
                        hop_state(self.seed, key, hop),
                        offsets,
                        e_id,
                        col,
                        edge_index[1],
                    )
                    n_id = relabel(xp, launch, n_id, col, edge_index[0])
                hops.append((edge_index, e_id, (int(n_id.shape[0]), num_targets)))
        return n_id, hops

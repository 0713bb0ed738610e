"""GPU drivers: ``@cuda.jit`` kernels over the shared row bodies, and the per-hop launcher.

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

from .reindex import relabel
from .rng import hop_state, row_state
from .rows import row_count, row_fill, row_finish

__all__ = ["sample_all", "THREADS_PER_BLOCK"]

THREADS_PER_BLOCK = 128
_SIM_THREADS_PER_BLOCK = 32  # the simulator pays ~1 ms per thread, idle ones included


@cuda.jit(cache=True)
def _count_kernel(indptr, live, weighted, n_id, k, replace, counts):
    i = cuda.grid(1)
    if i < n_id.shape[0]:
        counts[i + 1] = row_count(indptr, live, n_id[i], k, replace, weighted)


@cuda.jit(cache=True)
def _fill_kernel(indptr, indices, edge_ids, has_edge_ids, weights, cum, weighted, n_id, k, replace,
                 hop_state_, offsets, e_id, col, dst):
    i = cuda.grid(1)
    if i < n_id.shape[0]:
        node = n_id[i]
        start = offsets[i]
        count = offsets[i + 1] - start
        state = row_state(hop_state_, node)
        row_fill(indptr, weights, cum, node, k, replace, weighted, state, count, e_id, start)
        row_finish(indices, edge_ids, has_edge_ids, e_id, col, start, start + count)
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


def _nonempty(xp, array, dtype):
    """``array``, or a one-element placeholder where kernels need an array but never read it."""
    if array is None or array.shape[0] == 0:
        return xp.zeros(1, dtype=dtype)
    return array


def sample_all(graph, tables, device, seeds, fanouts, replace, weighted, seed, key):
    """Sample every hop on ``device``; returns ``(n_id, [(edge_index, e_id, size), ...])`` seed hop first.

    ``graph`` is already placed on ``device`` (device or pinned memory), and so are ``tables``
    (``(live, cum)`` from ``cpu.weight_tables`` for weighted sampling, else ``None``); ``seeds``
    is a validated int64 host or device array.
    """
    xp = device.xp
    launch = _make_launcher(device.simulated)
    with device:
        n_id = xp.ascontiguousarray(xp.asarray(seeds), dtype=np.int64)
        indptr, indices = graph.indptr, _nonempty(xp, graph.indices, np.int64)
        edge_ids = _nonempty(xp, graph.edge_ids, np.int64)
        has_edge_ids = graph.edge_ids is not None
        weights = _nonempty(xp, graph.weights, np.float64)
        live, cum = tables if tables is not None else (xp.zeros(1, np.int64), xp.zeros(1, np.float64))
        cum = _nonempty(xp, cum, np.float64)
        hops = []
        for hop, k in enumerate(fanouts):
            num_targets = int(n_id.shape[0])
            counts = xp.zeros(num_targets + 1, dtype=np.int64)
            launch(_count_kernel, num_targets, indptr, live, weighted, n_id, k, replace, counts)
            offsets = xp.cumsum(counts)
            num_edges = int(offsets[-1])  # sync: the hop's edge count sizes its outputs
            edge_index = xp.empty((2, num_edges), dtype=np.int64)
            e_id = xp.empty(num_edges, dtype=np.int64)
            if num_edges:
                col = xp.empty(num_edges, dtype=np.int64)
                launch(_fill_kernel, num_targets, indptr, indices, edge_ids, has_edge_ids, weights, cum, weighted,
                       n_id, k, replace, hop_state(seed, key, hop), offsets, e_id, col, edge_index[1])
                n_id = relabel(xp, launch, n_id, col, edge_index[0])
            hops.append((edge_index, e_id, (int(n_id.shape[0]), num_targets)))
    return n_id, hops

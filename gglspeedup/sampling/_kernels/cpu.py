"""CPU drivers: ``@njit(parallel=True, cache=True)`` loops over the shared row bodies.

One call per hop does the whole hop: count (parallel over targets), prefix sum, fill (parallel),
then relabel the sampled neighbours into ``n_id`` (serial, first-appearance order) through a
dense ``global id -> local id`` map owned by the caller. The map holds -1 everywhere between
batches; :func:`map_seeds` fills it for the seeds and :func:`reset_map` clears exactly the
entries a batch touched, so a batch costs O(sampled edges), not O(num_nodes).
"""

from __future__ import annotations

import threading

import numba
import numpy as np
from llvmlite import binding as _llvm
from llvmlite import ir
from numba import njit, prange
from numba.core import cgutils, types
from numba.extending import intrinsic

from ..._threading import prefer_tbb
from .rng import hop_state, row_state
from .rows import row_count, row_fill, row_finish, row_weight_table

__all__ = ["sample_all", "sample_hop", "weight_tables", "map_seeds", "reset_map", "KERNEL_LOCK", "PARALLEL_MIN_WORK"]



prefer_tbb()  # before any parallel launch: see gglspeedup._threading

# Numba's parallel regions are not meant to be entered from several Python threads at once;
# kernels release the GIL (nogil) so a prefetching thread still overlaps with training.
KERNEL_LOCK = threading.Lock()
_ROWS_PER_BLOCK = 256
# A hop drawing fewer edges than this runs on one thread: entering a parallel region costs
# microseconds on an idle machine but a scheduler time slice per barrier on a busy one.
PARALLEL_MIN_WORK = 1 << 16
# Serial loops over random ids prefetch this many iterations ahead.
_PREFETCH_DISTANCE = 16
_ROW_PREFETCH = 4  # rows ahead in the fill loop (measured best of 4 / 8 / none)
# The intrinsic's mangled name follows the pointer mode: opaque from LLVM 16 on (llvmlite
# >= 0.45), typed up to LLVM 14; LLVM 15 builds could be either, so they skip the hint.
_PREFETCH_NAME = {True: "llvm.prefetch.p0", False: "llvm.prefetch.p0i8"}.get(
    _llvm.llvm_version_info[0] >= 16 if _llvm.llvm_version_info[0] != 15 else None
)


@intrinsic
def _prefetch(typingctx, array, index):
    """Hint the CPU to fetch ``array[index]`` into cache (LLVM ``prefetch``; no effect on results)."""

    def codegen(context, builder, signature, args):
        if _PREFETCH_NAME is None:
            return context.get_dummy_value()
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, view, [args[1]], wraparound=False)
        byte_pointer = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32]), _PREFETCH_NAME
        )
        # rw = 1 (write), locality = 3 (keep in all cache levels), cache type = 1 (data)
        builder.call(function, [builder.bitcast(pointer, byte_pointer), int32(1), int32(3), int32(1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen


def sample_all(graph_arrays, seeds, fanouts, replace, weighted, seed, key, local_map):
    """Sample every hop on the CPU; returns ``(n_id, [(edge_index, e_id, size), ...])`` seed hop first.

    ``graph_arrays`` is ``(indptr, indices, edge_ids, has_edge_ids, weights, live, cum)`` with
    placeholders for absent arrays (``live``/``cum`` from :func:`weight_tables` when weighted); ``local_map`` (int32/int64, num_nodes, all -1) is returned all -1 unless
    an exception escapes (then the caller must drop it).
    """
    indptr, indices, edge_ids, has_edge_ids, weights, live, cum = graph_arrays
    hops = []
    threads = numba.get_num_threads()
    with KERNEL_LOCK:
        try:
            n_id = map_seeds(seeds, local_map)
            for hop, k in enumerate(fanouts):
                num_targets = len(n_id)
                work = num_targets * (k if k > 0 else 16)
                numba.set_num_threads(threads if work >= PARALLEL_MIN_WORK else 1)
                n_id, edge_index, e_id = sample_hop(
                    indptr, indices, edge_ids, has_edge_ids, weights, live, cum, weighted, n_id, k,
                    replace, hop_state(seed, key, hop), local_map,
                )
                hops.append((edge_index, e_id, (len(n_id), num_targets)))
        finally:
            numba.set_num_threads(threads)
        reset_map(n_id, local_map)
    return n_id, hops


@njit(parallel=True, cache=True, nogil=True)
def weight_tables(indptr, weights):
    """``(live, cum)`` for weighted sampling: int64 (num_nodes,) live-edge counts per row and
    float64 (num_edges,) running weight sums within each row (see ``rows.row_weight_table``)."""
    num_nodes = indptr.shape[0] - 1
    live = np.empty(num_nodes, np.int64)
    cum = np.empty(weights.shape[0], np.float64)
    for node in prange(num_nodes):
        row_weight_table(indptr, weights, node, live, cum)
    return live, cum


@njit(cache=True, nogil=True)
def map_seeds(seeds, local_map):
    """Enter the seeds in ``local_map`` (first occurrence wins); return them as int64 n_id."""
    n_id = np.empty(seeds.shape[0], np.int64)
    for i in range(seeds.shape[0]):
        g = seeds[i]
        n_id[i] = g
        if local_map[g] < 0:
            local_map[g] = i
    return n_id


@njit(cache=True, nogil=True)
def reset_map(n_id, local_map):
    """Clear the entries of ``local_map`` that ``n_id`` set (back to -1)."""
    n = n_id.shape[0]
    for i in range(n):
        if i + _PREFETCH_DISTANCE < n:
            _prefetch(local_map, n_id[i + _PREFETCH_DISTANCE])
        local_map[n_id[i]] = -1


@njit(parallel=True, cache=True, nogil=True)
def sample_hop(indptr, indices, edge_ids, has_edge_ids, weights, live, cum, weighted, n_id, k, replace, hop_state_,
               local_map):
    """Sample one hop for every target in ``n_id`` and extend ``n_id`` with the new nodes.

    Returns ``(n_id_next, edge_index, e_id)``: ``n_id_next`` (int64, ``n_id`` then new nodes in
    order of first appearance), ``edge_index`` (int64, shape (2, E): local source, local
    target), ``e_id`` (int64, shape (E,)). ``local_map`` must already map every node of
    ``n_id`` to its first position and is updated with the new nodes.
    """
    num_targets = n_id.shape[0]
    offsets = np.empty(num_targets + 1, np.int64)
    offsets[0] = 0
    for i in prange(num_targets):
        offsets[i + 1] = row_count(indptr, live, n_id[i], k, replace, weighted)
    for i in range(num_targets):
        offsets[i + 1] += offsets[i]
    num_edges = offsets[num_targets]

    edge_index = np.empty((2, num_edges), np.int64)
    e_id = np.empty(num_edges, np.int64)
    col = np.empty(num_edges, np.int64)
    # Rows in blocks: each block draws its rows' positions, then gathers their neighbours in one
    # tight loop whose loads are independent (they overlap, unlike loads inside the row loop).
    num_blocks = (num_targets + _ROWS_PER_BLOCK - 1) // _ROWS_PER_BLOCK
    for block in prange(num_blocks):
        lo = block * _ROWS_PER_BLOCK
        hi = min(lo + _ROWS_PER_BLOCK, num_targets)
        for i in range(lo, hi):
            if i + _ROW_PREFETCH < hi:  # a row's draws hide little: fetch later rows' offsets now
                _prefetch(indptr, n_id[i + _ROW_PREFETCH])
            node = n_id[i]
            start = offsets[i]
            count = offsets[i + 1] - start
            state = row_state(hop_state_, node)
            row_fill(indptr, weights, cum, node, k, replace, weighted, state, count, e_id, start)
            for q in range(start, start + count):
                edge_index[1, q] = i
        row_finish(indices, edge_ids, has_edge_ids, e_id, col, offsets[lo], offsets[hi])

    n_id_next = np.empty(num_targets + num_edges, np.int64)
    n_id_next[:num_targets] = n_id
    size = num_targets
    for q in range(num_edges):
        if q + _PREFETCH_DISTANCE < num_edges:  # the map reads are the serial loop's misses
            _prefetch(local_map, col[q + _PREFETCH_DISTANCE])
        g = col[q]
        v = local_map[g]
        if v < 0:
            v = size
            local_map[g] = size
            n_id_next[size] = g
            size += 1
        edge_index[0, q] = v
    return n_id_next[:size], edge_index, e_id

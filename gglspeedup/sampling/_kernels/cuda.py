"""The GPU driver: ``@cuda.jit`` kernels over the shared row bodies, one stream, few syncs.

One thread per target row runs exactly the row bodies the CPU driver runs, so draws are identical.
Every launch goes through :func:`gglspeedup._launch.launch` (CuPy's current stream, counted), and
the host reads device values only through :func:`gglspeedup._launch.to_host` (counted syncs).

A hop with fanout ``k >= 0`` is *bounded*: a row yields at most ``k`` edges, so its outputs are
sized ``T * k`` up front (row ``i`` owns slots ``i*k ..``) and the hop costs three launches and
**one** sync:

1. :func:`_fill_insert_kernel` counts, draws and finishes each row into its padded slots and
   inserts its target and neighbours into the relabel hash table (:mod:`.reindex`);
2. :func:`~.reindex.flag_kernel` marks first occurrences of new nodes; ``cumsum`` of the counts
   and of the flags (device);
3. one device-to-host read of ``(edges, new nodes)`` sizes the outputs;
4. :func:`~.reindex.compact_kernel` packs the edges and writes the new nodes into ``n_id``.

A hop with ``k == -1`` (every neighbour) counts first (:func:`_count_kernel`, a ``cumsum`` and one
sync for the edge count), then fills packed slots directly: four launches and two syncs. Arrays
are CuPy on a real GPU (numba views without copies) and NumPy under the simulator. A graph placed
in pinned host memory is read by the same kernels over PCIe (UVA).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..._integrity import corrupt_indices_error
from ..._launch import device_view, launch_rows, to_host
from ..._rng import hop_state, row_state
from ...validation import BYTES_PER_DRAW, check_draws
from .cpu import SMALL_OUTPUT
from .records import Drawn, GraphArrays, SampleOptions, from_virtual, graph_arrays, to_virtual, with_markers
from .reindex import compact_kernel, flag_kernel, hop_arrays, insert
from .rows import row_finish, row_window, split, window_count, window_fill

__all__ = ["CUDADriver"]


@cuda.jit(cache=True)
def _count_kernel(graph, options, n_id, k, counts):
    i = cuda.grid(1)
    if i < n_id.shape[0]:
        node, tree = split(options, n_id[i])
        start, end = row_window(graph, options, node, tree)
        counts[i + 1] = window_count(graph, options, node, start, end, k)


@cuda.jit(cache=True)
def _fill_insert_kernel(
    graph, options, n_id, lo, k, hop_state_, padded, offsets, counts, pos, col, dst, keys, first, slot_of, mask, corrupt
):
    """Node ``i`` of ``n_id`` enters the table; a target (``i >= lo``, row ``j = i - lo``) also
    draws into its slots (padded: ``j*k ..``, packed: ``offsets[j] ..``), finishes them
    (neighbours in ``col``, edge ids in ``pos``) and enters its neighbours. ``lo = 0`` expands
    every node; the start of the last hop's new nodes expands those only (PyG's rule). In
    disjoint sampling (``options.stride > 0``) ids are virtual (``tree * stride + node``): a row
    draws for its node in its tree's window, and its neighbours enter as ids of its tree. A
    neighbour id outside ``[0, num_nodes)`` (a corrupt graph) sets ``corrupt[0]``, which the host
    reads with the hop's sizes before any kernel uses the ids as indices."""
    i = cuda.grid(1)
    num_known = n_id.shape[0]
    if i < num_known:
        vid = n_id[i]
        slot_of[i] = insert(keys, first, vid, i, mask)
        if i >= lo:
            j = i - lo
            node, tree = split(options, vid)
            window_start, window_end = row_window(graph, options, node, tree)
            if padded:
                count = window_count(graph, options, node, window_start, window_end, k)
                counts[j + 1] = count
                start = j * k
            else:
                start = offsets[j]
                count = offsets[j + 1] - start
            state = row_state(hop_state_, node)
            window_fill(graph, options, node, window_start, window_end, k, state, count, pos, start)
            row_finish(graph, options, pos, col, start, start + count)
            base = tree * options.stride
            num_nodes = graph.indptr.shape[0] - 1
            for q in range(start, start + count):
                if col[q] < 0 or col[q] >= num_nodes:  # entered in the table (harmless), flagged
                    corrupt[0] = 1
                col[q] += base
                slot_of[num_known + q] = insert(keys, first, col[q], num_known + q, mask)
                if not padded:
                    dst[q] = i
            if padded:
                for q in range(start + count, start + k):
                    slot_of[num_known + q] = -1


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
    times : array, optional
        A temporal sampler's time per CSR position, where the graph is (``SampleOptions.times``).

    Disjoint sampling (``options.stride > 0``) runs the same kernels over virtual ids, which they
    split (:func:`.rows.split`); the caller passes and gets back real ids.
    """

    def __init__(self, graph, options: SampleOptions, seed: int, device, weight_tables=None, times=None):
        from ...device import array_module, pinned_empty, to_numpy

        self.device, self.seed = device, int(seed)
        xp = device.xp
        tables = None
        with device:
            if options.weighted:
                tables = weight_tables(to_numpy(graph.indptr), to_numpy(graph.weights))
                if graph.placement == "pinned":
                    pinned = tuple(pinned_empty(t.shape, t.dtype) for t in tables)
                    for target, table in zip(pinned, tables):
                        target[...] = table
                    tables = pinned
                else:
                    tables = tuple(xp.array(t) for t in tables)
            arrays = graph_arrays(graph, tables, lambda dtype: xp.zeros(1, dtype=dtype))
            self.graph: GraphArrays = device_view(arrays)  # numba views, made once
            self._placeholder = xp.zeros(1, dtype=np.int64)
            self.options = device_view(with_markers(options, times))
        self._csr = (graph.indptr, graph.indices)  # CuPy or pinned NumPy arrays, for rows_ascending
        self._rows_ascending = None  # computed on the first link batch
        # Without replacement no row yields more edges than the longest row, so a bounded hop
        # sizes its slots with k at most one past it (``fanouts=[10**9]`` asks for every
        # neighbour, not for 10**9 slots per target): every row still sees ``count < k`` and
        # draws exactly what it draws for the caller's ``k``.
        with device:
            indptr = graph.indptr
            longest = to_host(array_module(indptr).diff(indptr).max()) if indptr.shape[0] > 1 else 0  # sync: once
            self._slot_limit = None if options.replace else int(longest) + 1

    @property
    def weight_tables(self):
        """``(live, cum)`` of a weighted sampler, where the graph lives, else ``None``."""
        return (self.graph.live, self.graph.cum) if self.options.weighted else None

    def negatives(
        self, sources, count: int, *, fixed: bool, width: int, strict: bool, key: int, space=None, eligible=None
    ):
        """``(src, dst, stayed)`` device arrays: ``count`` negatives of batch ``key`` (``space``:
        ``(num_sources, num_targets, row_base)``, default the whole graph; ``eligible``: temporal
        negatives, a :class:`.links.NegativeTimes` of device arrays)."""
        from .cuda_links import draw_negatives
        from .links import negative_inputs

        state, space, eligible = negative_inputs(self.seed, key, space, self.graph.indptr.shape[0] - 1, eligible)
        with self.device:
            sources = self._placeholder if sources is None else sources
            return draw_negatives(self.device, self.graph, state, space, sources, fixed, width, strict, count, eligible)

    def excluded_positions(self, sources, targets):
        """Sorted, distinct CSR positions of every edge ``sources[i] -> targets[i]`` (device array)."""
        from .cuda_links import match_positions
        from .exclusion import rows_ascending

        with self.device:
            if self._rows_ascending is None:
                indptr, indices = self._csr
                from ...device import array_module

                self._rows_ascending = rows_ascending(array_module(indices), indptr, indices)
            return match_positions(self.device, self.graph, sources, targets, self._rows_ascending)

    def sample(self, seeds, fanouts, key: int, options: SampleOptions | None = None) -> Drawn:
        """As :meth:`.cpu.CPUDriver.sample`: ``seeds`` a checked int64 host or device array,
        outputs arrays of ``device.xp``. Disjoint calls (``options.stride > 0``) run the same
        kernels over virtual ids, which they split."""
        xp = self.device.xp
        with self.device:
            options = self._record(options)
            n_id = xp.ascontiguousarray(xp.asarray(seeds), dtype=np.int64)
            corrupt = xp.zeros(1, dtype=np.int64)  # set by a kernel meeting an id outside the graph
            stride = options.stride
            if stride:
                n_id = to_virtual(xp, n_id, stride)
            hops = []
            lo = 0
            for hop, k in enumerate(fanouts):
                num_known = int(n_id.shape[0])
                # the same draws (see __init__): T * k slots that fit
                bounded = k if k < 0 or self._slot_limit is None else min(k, self._slot_limit)
                self._check_slots(num_known - lo, k, bounded, hop)
                n_id, edge_index, e_id = self._hop(n_id, lo, bounded, hop_state(self.seed, key, hop), options, corrupt)
                hops.append((edge_index, e_id, (int(n_id.shape[0]), num_known)))
                if options.expand_new:
                    lo = num_known
            batch = None
            if stride:
                n_id, batch = from_virtual(n_id, stride)
        return Drawn(n_id, hops, batch)

    def _record(self, options):
        """The call's record as the kernels take it: the driver's own (its numba views made once),
        or ``options`` with a disjoint call's tree times uploaded and every array viewed."""
        if options is None or options is self.options:
            return self.options
        seed_time = options.seed_time
        if not isinstance(seed_time, np.generic) and not hasattr(seed_time, "__cuda_array_interface__"):
            options = options._replace(seed_time=self.device.xp.asarray(seed_time))
        return device_view(options)

    @property
    def num_edges(self) -> int:
        return int(self._csr[1].shape[0])

    def corrupt_error(self, spans=None) -> ValueError:
        """The error for a kernel that met a neighbour id outside the graph (a corrupt folder):
        :func:`gglspeedup._integrity.corrupt_indices_error` over ``spans`` (default: every
        position bound by the node count)."""
        if spans is None:
            spans = [(0, self.num_edges, self.graph.indptr.shape[0] - 1, "")]
        return corrupt_indices_error(self._csr[1], spans)

    def _check_slots(self, num_targets: int, k: int, bounded: int, hop: int) -> None:
        """Refuse, before its kernels, a hop of fanout ``k`` whose ``num_targets * bounded`` slots
        (``bounded``: the slots a target takes, see :meth:`sample`) cannot fit in the device's free
        memory (host memory under the simulator), as the CPU driver refuses its hops
        (``cpu.check_hop_output``): ``fanouts=[10**6], replace=True`` over 20,000 seeds raised
        numpy's MemoryError (CuPy's ``OutOfMemoryError`` on a GPU) instead of naming the fanout."""
        slots = num_targets * bounded
        if bounded <= 0 or slots * BYTES_PER_DRAW < SMALL_OUTPUT:
            return
        free, memory = None, ""  # the simulator: the host's available memory
        if not self.device.simulated:
            import cupy

            with self.device:
                free, memory = int(cupy.cuda.runtime.memGetInfo()[0]), "GPU "
        check_draws(f"fanouts[{hop}]", k, slots, f"at hop {hop} ({num_targets} targets)", free, memory)

    def _hop(self, n_id, lo: int, k: int, state, options, corrupt):
        device, graph, xp = self.device, self.graph, self.device.xp
        num_known = int(n_id.shape[0])
        num_targets = num_known - lo
        padded = k >= 0
        counts = xp.zeros(num_targets + 1, dtype=np.int64)
        if padded:
            offsets, slots = counts, num_targets * k
        else:
            launch_rows(_count_kernel, device, num_targets, graph, options, n_id[lo:], k, counts)
            offsets = xp.cumsum(counts)
            slots = int(to_host(offsets[-1:])[0]) if num_targets else 0  # sync: the hop's edge count
        if slots == 0:
            return n_id, xp.empty((2, 0), dtype=np.int64), xp.empty(0, dtype=np.int64)
        capacity, keys, first, slot_of, pos, col = hop_arrays(xp, num_known, slots)
        edge_index = None if padded else xp.empty((2, slots), dtype=np.int64)
        dst = self._placeholder if padded else edge_index[1]
        launch_rows(
            _fill_insert_kernel,
            device,
            num_known,
            graph,
            options,
            n_id,
            lo,
            k,
            state,
            padded,
            offsets,
            counts,
            pos,
            col,
            dst,
            keys,
            first,
            slot_of,
            capacity - 1,
            corrupt,
        )
        flags = xp.empty(slots, dtype=np.int64)
        launch_rows(flag_kernel, device, slots, slot_of, first, num_known, flags)
        ranks = xp.cumsum(flags)
        # The hop's sizes come back with the corrupt-id flag in the same read: no sync of its own.
        if padded:
            offsets = xp.cumsum(counts)
            sizes = to_host(xp.stack((offsets[-1], ranks[-1], corrupt[0])))  # sync: edges, new nodes
            num_edges, num_new, bad = (int(v) for v in sizes)
            if bad:
                raise self.corrupt_error()
            edge_index = xp.empty((2, num_edges), dtype=np.int64)
            e_id = xp.empty(num_edges, dtype=np.int64)
        else:
            num_new, bad = (int(v) for v in to_host(xp.stack((ranks[-1], corrupt[0]))))  # sync: next n_id's size
            if bad:
                raise self.corrupt_error()
            e_id = pos
        n_id_next = xp.empty(num_known + num_new, dtype=np.int64)
        n_id_next[:num_known] = n_id
        launch_rows(
            compact_kernel,
            device,
            slots,
            num_known,
            lo,
            max(k, 1),
            padded,
            offsets,
            pos,
            col,
            slot_of,
            first,
            ranks,
            edge_index[0],
            edge_index[1],
            e_id,
            n_id_next,
        )
        return n_id_next, edge_index, e_id

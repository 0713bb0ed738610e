"""The CPU driver: ``@njit(parallel=True, cache=True)`` loops over the shared row bodies.

One call per hop does the whole hop: count (parallel over targets), prefix sum, fill (parallel),
then relabel the sampled neighbours into ``n_id`` (serial, first-appearance order) through a
dense ``global id -> local id`` map. A batch stores local id ``i`` as ``epoch + i``, its *epoch*
being one past every value an earlier batch stored (``-1`` before any), so an entry below the epoch
is unseen and nothing is cleared between batches: a batch costs O(sampled edges), not
O(num_nodes), and no pass over its ``n_id`` (clearing one cost 7% of a batch). :class:`CPUDriver`
owns the graph's records and a pool of such maps (:class:`MapPool`), one per concurrent call.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit, prange

from ..._hugepages import huge_empty
from ..._integrity import corrupt_indices_error
from ..._interrupt import interruptible
from ..._intrinsics import prefetch
from ..._parallel import kernel_threads, read_only
from ..._rng import hop_state, row_state
from ..._stop import stop_requested
from ...validation import BYTES_PER_DRAW, available_memory, check_draws
from .blocks import block_rows, draw_buffers, row_blocks
from .disjoint import sample_tree_hop, split_virtual
from .exclusion import row_flagged, rows_ascending
from .links import draw_negatives, match_positions, negative_inputs
from .records import (
    Drawn,
    GraphArrays,
    SampleOptions,
    graph_arrays,
    to_virtual,
    with_markers,
    without_exclusions,
)
from .rows import row_count, row_count_unexcluded, row_fill_split, row_finish, row_weight_table

__all__ = [
    "CPUDriver",
    "MapPool",
    "sample_hop",
    "weight_tables",
    "map_seeds",
    "LONG_WORK",
    "hop_work",
    "check_hop_output",
]

# Kernels run in gglspeedup._parallel's regions: one lock for every kernel family, and a hop drawing
# fewer edges than PARALLEL_MIN["draws"] on one thread. They release the GIL (nogil), so a
# prefetching thread still overlaps with training.
# Serial loops over random ids prefetch this many iterations ahead.
_PREFETCH_DISTANCE = 16
_ROW_PREFETCH = 4  # rows ahead in the fill loop (measured best of 4 / 8 / none)
# A hop drawing at least this many edges (about 0.1 s on two cores) runs as an interruptible call
# (gglspeedup._interrupt): its kernel polls a stop flag, so Ctrl-C ends it within a block of rows.
LONG_WORK = 1 << 21
# A hop's output below this many bytes is not checked against the memory available.
SMALL_OUTPUT = 1 << 28


class CPUDriver:
    """Samples on the CPU for one sampler: the graph's records, built once, and relabel maps.

    Parameters
    ----------
    graph : CSRGraph
        Host-placed, already checked.
    options : SampleOptions
    seed : int
        The sampler's seed (hop states hash ``(seed, key, hop)``).
    times : array, optional
        A temporal sampler's time per CSR position (rows sorted by it): ``SampleOptions.times``.

    The driver is thread-safe: each call takes a map from the pool (or makes one) and returns it
    clean; compiled kernels run one at a time (:data:`gglspeedup._parallel.KERNEL_LOCK`) and
    release the GIL.
    """

    def __init__(self, graph, options: SampleOptions, seed: int, times=None):
        tables = weight_tables(graph.indptr, graph.weights) if options.weighted else None
        # Read-only views throughout (gglspeedup._parallel.read_only): one variant, mapped or not.
        arrays = graph_arrays(graph, tables, lambda dtype: np.zeros(1, dtype))
        self.graph: GraphArrays = GraphArrays(*map(read_only, arrays))
        self.options = with_markers(options, read_only(times))
        self.seed = int(seed)
        self.num_nodes, self.num_edges = graph.num_nodes, graph.num_edges
        self.maps = MapPool(graph.num_nodes)
        self._rows_ascending = None  # computed on the first link batch

    @property
    def weight_tables(self):
        """``(live, cum)`` of a weighted sampler (see :func:`weight_tables`), else ``None``."""
        return (self.graph.live, self.graph.cum) if self.options.weighted else None

    def corrupt_error(self) -> ValueError:
        """The error for a kernel that met a neighbour id outside the graph (a corrupt folder)."""
        return corrupt_indices_error(self.graph.indices, [(0, self.num_edges, self.num_nodes, "")])

    def sample(self, seeds: np.ndarray, fanouts, key: int, options: SampleOptions | None = None) -> Drawn:
        """Sample every hop of a batch (:class:`gglspeedup.sampling.drivers.Driver`).

        ``seeds`` is a checked int64 host array, ``fanouts`` checked ints (seed hop first),
        ``key`` the batch key; ``options`` replaces the driver's record for this call (a link
        batch's exclusions, the hop rule ``expand_new``, a disjoint call's ``stride`` and
        ``seed_time``). Returns :class:`~.records.Drawn` ``(n_id, hops, batch)``, hops seed hop
        first as ``(edge_index, e_id, (len(n_id) after, len(n_id) before))``: target positions
        index ``n_id`` under either hop rule.
        """
        options = self.options if options is None else options
        if options.stride:
            return self._sample_trees(seeds, fanouts, key, options)
        plain = without_exclusions(options)
        # Local ids stay below len(seeds) + num_nodes: the seeds, then each node once.
        local_map, epoch = self.maps.acquire(len(seeds))
        hops = []
        # Ctrl-C is handled between hops, and inside a long hop's kernel (gglspeedup._interrupt);
        # leaving the block raises KeyboardInterrupt after this frame has dropped its arrays.
        with interruptible() as guard:
            with kernel_threads() as region:
                n_id = map_seeds(seeds, local_map, epoch)
                first = 0  # the first target's position in n_id
                for hop, k in enumerate(fanouts):
                    num_targets = len(n_id)
                    work = hop_work(self.graph.indptr, n_id, first, k)
                    check_hop_output(self.graph.indptr, n_id, first, k, hop, work, options.replace)
                    region.fit(work)
                    state = hop_state(self.seed, key, hop)
                    args = (self.graph, options, n_id, k, state, local_map, epoch, first, plain)
                    result = guard.run(sample_hop, *args) if work >= LONG_WORK else sample_hop(*args)
                    if guard.stopping():
                        break
                    n_id, edge_index, e_id, corrupt = result
                    if corrupt:  # the map holds entries past n_id's: dropped below, not pooled
                        raise self.corrupt_error()
                    hops.append((edge_index, e_id, (len(n_id), num_targets)))
                    if options.expand_new:
                        first = num_targets
                if guard.stopping():  # the map may hold entries past n_id's: it is dropped, not pooled
                    n_id = hops = local_map = result = args = None
                    return None
        self.maps.release(local_map, epoch + len(n_id))  # an exception above drops the map instead
        return Drawn(n_id, hops)

    def _sample_trees(self, seeds: np.ndarray, fanouts, key: int, options: SampleOptions) -> Drawn:
        """Disjoint sampling (:mod:`.disjoint`): every seed its own tree, numbered by virtual ids
        (``options.stride``) inside this call only."""
        stride = options.stride
        hops = []
        with kernel_threads() as region:
            n_id = np.ascontiguousarray(to_virtual(np, seeds, stride), dtype=np.int64)
            first = 0
            for hop, k in enumerate(fanouts):
                num_targets = len(n_id)
                region.fit((num_targets - first) * (k if k > 0 else 16))
                n_id, edge_index, e_id, corrupt = sample_tree_hop(
                    self.graph, options, n_id, k, hop_state(self.seed, key, hop), first
                )
                if corrupt:
                    raise self.corrupt_error()
                hops.append((edge_index, e_id, (len(n_id), num_targets)))
                if options.expand_new:
                    first = num_targets
        n_id, batch = split_virtual(n_id, stride)
        return Drawn(n_id, hops, batch)

    def negatives(
        self, sources, count: int, *, fixed: bool, width: int, strict: bool, key: int, space=None, eligible=None
    ):
        """``(src, dst, stayed)``: ``count`` negatives of batch ``key`` (:func:`.links.draw_negatives`;
        ``sources`` are the positives' sources when ``fixed``; ``space`` ``(num_sources,
        num_targets, row_base)`` defaults to the whole graph; ``eligible`` a
        :class:`.links.NegativeTimes` for temporal negatives)."""
        state, space, eligible = negative_inputs(self.seed, key, space, self.num_nodes, eligible)
        out_src, out_dst = np.empty(count, np.int64), np.empty(count, np.int64)
        stayed = np.empty(count, np.int8)
        if count:
            with kernel_threads(count * (4 if strict else 1)):
                draw_negatives(
                    self.graph, state, space, sources, fixed, width, strict, eligible, out_src, out_dst, stayed
                )
        return out_src, out_dst, stayed

    def excluded_positions(self, sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Sorted, distinct CSR positions of every edge ``sources[i] -> targets[i]``."""
        if self._rows_ascending is None:
            self._rows_ascending = rows_ascending(np, self.graph.indptr, self.graph.indices)
        # Each lookup is a binary search (or a scan) of a hub's row: a chain of cache misses worth
        # about 64 drawn edges, so a batch of 1024 pairs already runs on every thread.
        with kernel_threads(len(sources) * 64):
            return match_positions(self.graph, sources, targets, self._rows_ascending)


class MapPool:
    """Dense relabel maps of ``size`` entries (node id -> ``epoch +`` position; an entry below the
    batch's epoch is unseen), reused across calls and threads. Both CPU drivers keep one (the
    typed driver's over the typed id space).

    A call takes a map and its epoch (:meth:`acquire`) and gives the map back with the next epoch,
    one past every value it stored (:meth:`release`); a map whose stored values are not known (an
    exception, an interrupt) is dropped instead. A map is cleared to -1 only when the next batch's
    ids could pass its dtype's largest value: every 2**31 / (ids per batch) batches at worst.
    """

    def __init__(self, size: int):
        self.size = int(size)
        self.dtype = np.dtype(np.int32 if self.size < 2**30 else np.int64)
        self.free: list[tuple[np.ndarray, int]] = []
        self._lock = threading.Lock()

    def acquire(self, seeds: int) -> tuple[np.ndarray, int]:
        """``(map, epoch)`` for a batch of ``seeds`` seed ids: its local ids then stay below
        ``seeds + size`` (the seeds, then each node at most once)."""
        limit = int(np.iinfo(self.dtype).max)
        if seeds + self.size > limit:
            raise ValueError(f"seeds must hold at most {limit - self.size} ids per batch here, got {seeds}")
        with self._lock:
            local_map, epoch = self.free.pop() if self.free else (None, 0)
        if local_map is None:
            local_map = np.full(max(self.size, 1), -1, dtype=self.dtype)
        elif epoch + seeds + self.size > limit:  # the ids would pass the dtype: start again from -1
            local_map.fill(-1)
            epoch = 0
        return local_map, epoch

    def release(self, local_map: np.ndarray, epoch: int) -> None:
        """Return ``local_map``, every value it holds below ``epoch``."""
        with self._lock:
            self.free.append((local_map, int(epoch)))


def check_hop_output(indptr, n_id, first: int, k: int, hop: int, work: int, replace: bool) -> None:
    """Refuse, before its kernel, a hop whose output cannot fit in the memory available now:
    ``work`` draws bound it with replacement; without, each target draws at most its degree,
    which is summed (only for a hop that fails the first test). A hop whose output stays under
    :data:`SMALL_OUTPUT` is not checked (reading the memory available costs 17 us, a batch's
    hops about 5 ms)."""
    need = work * BYTES_PER_DRAW
    if need < SMALL_OUTPUT or need <= (available_memory() or need):
        return
    num_targets = len(n_id) - first
    where = f"at hop {hop} ({num_targets} targets)"
    if k >= 0 and not replace:
        targets = n_id[first:]
        work = min(work, int(np.sum(indptr[targets + 1] - indptr[targets])))
    check_draws(f"fanouts[{hop}]", k, work, where)


def hop_work(indptr, n_id, first: int, k: int) -> int:
    """About how many edges a hop over the targets ``n_id[first:]`` draws: ``k`` per target, or
    (``k < 0``) their degrees summed."""
    if k >= 0:
        return (len(n_id) - first) * k
    targets = n_id[first:]
    return int(np.sum(indptr[targets + 1] - indptr[targets]))


def weight_tables(indptr, weights):
    """``(live, cum)`` for weighted sampling: int64 (num_nodes,) live-edge counts per row and
    float64 (num_edges,) running weight sums within each row (see ``rows.row_weight_table``).
    Allocated here rather than inside the kernel, so NumPy's huge-page advice covers them
    (:mod:`gglspeedup._hugepages`): they are read at random, 8 bytes per edge."""
    live = huge_empty(indptr.shape[0] - 1, np.int64)
    cum = huge_empty(weights.shape[0], np.float64)
    _fill_weight_tables(indptr, weights, live, cum)
    return live, cum


@njit(parallel=True, cache=True, nogil=True)
def _fill_weight_tables(indptr, weights, live, cum):
    for node in prange(live.shape[0]):
        row_weight_table(indptr, weights, node, live, cum)


@njit(cache=True, nogil=True)
def map_seeds(seeds, local_map, epoch):
    """Enter the seeds in ``local_map`` as ``epoch + i`` (first occurrence wins; entries below
    ``epoch`` are unseen); return them as int64 n_id."""
    n_id = np.empty(seeds.shape[0], np.int64)
    for i in range(seeds.shape[0]):
        g = seeds[i]
        n_id[i] = g
        if local_map[g] < epoch:
            local_map[g] = epoch + i
    return n_id


@njit(parallel=True, cache=True, nogil=True)
def sample_hop(graph, options, n_id, k, hop_state_, local_map, epoch, first, plain, stop_flag=None):
    """Sample one hop for the targets ``n_id[first:]`` and extend ``n_id`` with the new nodes.

    Returns ``(n_id_next, edge_index, e_id, corrupt)``: ``n_id_next`` (int64, ``n_id`` then new
    nodes in order of first appearance), ``edge_index`` (int64, shape (2, E): local source, local
    target, both positions in ``n_id_next``), ``e_id`` (int64, shape (E,)); ``corrupt`` is true
    when a neighbour id read from ``graph.indices`` lay outside ``[0, num_nodes)`` (a corrupt
    graph: the relabel stopped there, the output is partial; see :mod:`gglspeedup._integrity`).
    ``local_map`` must
    already map every node of ``n_id`` to ``epoch +`` its first position (an entry below ``epoch``
    is unseen) and is updated with the new nodes.
    ``first = 0`` expands every node; the position where the last hop's new nodes start expands
    those only (PyG's rule). ``plain`` is ``options`` without its exclusions
    (:func:`.records.without_exclusions`): the count and every row that holds no excluded edge run
    with it, so they run the plain ``sample()`` bodies, the exclusion paths compiled out (run with
    a link batch's record instead, the hop measured 10-13% slower). ``stop_flag`` (optional, a
    uint8 flag of one element) is polled per block of rows and per relabelled edge: once set, the
    kernel returns early with partial output and ``local_map`` holding some of the hop's nodes
    (see :mod:`gglspeedup._interrupt`).
    """
    indptr = graph.indptr
    num_known = n_id.shape[0]
    num_targets = num_known - first  # targets n_id[first + i], indexed (a slice would type as layout 'A')
    offsets = np.empty(num_targets + 1, np.int64)
    offsets[0] = 0
    for i in prange(num_targets):
        offsets[i + 1] = row_count_unexcluded(graph, plain, n_id[first + i], k)
    for i in range(num_targets):
        if row_flagged(options, n_id[first + i]):  # a link batch's row with excluded edges: recount it
            offsets[i + 1] = row_count(graph, options, n_id[first + i], k)  # (a constant False otherwise)
        offsets[i + 1] += offsets[i]
    num_edges = offsets[num_targets]

    edge_index = np.empty((2, num_edges), np.int64)
    e_id, col = draw_buffers(num_edges)
    for block in prange(row_blocks(num_targets)):  # rows in blocks: see .blocks
        if stop_requested(stop_flag):
            continue
        lo, hi = block_rows(block, num_targets)
        for i in range(lo, hi):
            if i + _ROW_PREFETCH < hi:  # a row's draws hide little: fetch later rows' offsets now
                prefetch(indptr, n_id[first + i + _ROW_PREFETCH])
            node = n_id[first + i]
            start = offsets[i]
            count = offsets[i + 1] - start
            row_fill_split(graph, options, plain, node, k, row_state(hop_state_, node), count, e_id, start)
            for q in range(start, start + count):
                edge_index[1, q] = first + i
        row_finish(graph, options, e_id, col, offsets[lo], offsets[hi])

    n_id_next = np.empty(num_known + num_edges, np.int64)
    n_id_next[:num_known] = n_id
    size = num_known
    num_nodes = np.uint64(indptr.shape[0] - 1)
    corrupt = False
    for q in range(num_edges):
        if stop_requested(stop_flag):
            break
        if q + _PREFETCH_DISTANCE < num_edges:  # the map reads are the serial loop's misses
            prefetch(local_map, col[q + _PREFETCH_DISTANCE])
        g = col[q]
        if np.uint64(g) >= num_nodes:  # a corrupt graph (loaded unverified): never an index
            corrupt = True
            break
        v = local_map[g] - epoch
        if v < 0:
            v = size
            local_map[g] = epoch + size
            n_id_next[size] = g
            size += 1
        edge_index[0, q] = v
    return n_id_next[:size], edge_index, e_id, corrupt

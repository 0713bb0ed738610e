"""Out-of-core CSR construction: graphs whose edge list does not fit in memory, built from chunks.

:func:`build_csr` reads its edges in two kinds of pass over the source. The first counts every
row's degree (checking every id, naming the chunk and position of the first bad one). Then the
rows are cut into *buckets* whose edges fit in the ``memory`` budget, and each bucket is one more
pass: the edges of its rows are scattered into a buffer of that size, in the order the source gives
them, and the buffer is appended to the output file. Memory is the budget plus O(num_nodes) (the
degree counts, ``indptr``), whatever the edge count; the output is written front to back into a
graph folder (:mod:`gglspeedup._storage`) under a temporary name and renamed into place at the end,
so a failed or interrupted build leaves nothing at ``path`` that loads.

A source that can be read only once (a generator, a gzipped CSV) is copied to a scratch folder
beside ``path`` on the first pass (as int32 pairs when ids fit) and re-read from there.
"""

from __future__ import annotations

import errno
import os
import shutil

import numpy as np
from numba import njit

from .._csr_build import blocks_for, permuted_indptr
from .._csr_kernels import compact_rows, count_rows, sort_unique_rows
from .._intrinsics import prefetch
from .._reorder import check_order_name, degree_order, inverse_order
from .._replace import check_parent, check_replaceable, temporary_path
from .._storage import FolderWriter
from ..device import parse_size
from ..graph import CSRGraph
from ..validation import check_bool, check_int, check_weights, index_dtype
from ._sources import Chunk, as_source

__all__ = ["build_csr", "BUILD_ORDERS"]

BUILD_ORDERS = ("degree",)  # the orders an out-of-core build can count in its first pass


def build_csr(
    source,
    path,
    num_nodes=None,
    *,
    direction="in",
    memory="2G",
    keep_edge_ids=False,
    weights=None,
    dtype=None,
    overwrite=True,
    reorder=None,
    _unique_rows=False,
) -> CSRGraph:
    """Build a :class:`~gglspeedup.CSRGraph` at the folder ``path`` from edges in chunks, out of core.

    Parameters
    ----------
    source
        The edges, in order: an iterable of ``(2, k)`` integer arrays (``[sources; targets]``, any
        ``k``, a generator too), a list of ``.npy`` files holding such arrays (read piece by piece,
        never mapped whole), or an OGB raw folder (one holding ``edge.csv.gz`` or ``raw/edge.csv.gz``,
        ``src,dst`` per line).
    path : str or path
        Where the graph folder goes, written under a temporary name and renamed into place. It
        may be new, an empty folder or (``overwrite=True``) a graph this library saved, which is
        replaced atomically; anything else raises ``FileExistsError`` before the first pass.
    num_nodes : int, optional
        Number of nodes; default: the largest id plus one.
    direction : {"in", "out"}
        As in :meth:`CSRGraph.from_edge_index`: ``"in"``, row ``v`` lists the sources of edges
        into ``v``.
    memory : int or str
        Bytes of buffer for the edges being sorted (``"2G"``, see :func:`~gglspeedup.parse_size`);
        the build holds this plus O(num_nodes) (two int64 arrays of degrees per thread and
        ``indptr``) plus one slice of the source. A lower budget means more passes over the source.
    keep_edge_ids : bool
        Store each edge's position in the source as its edge id (int32 while the count fits);
        default ``False``: ``e_id`` are CSR positions.
    weights
        Edge weights in the same chunking as ``source`` (an iterable of 1-D float arrays or a list
        of ``.npy`` files), finite and ``>= 0``.
    dtype : np.int32, np.int64 or None
        Index width (default: int32 while ids fit).
    overwrite : bool
        Replace a graph saved at ``path`` earlier (default); ``False`` refuses it too.
    reorder : {None, "degree"}
        Renumber the nodes while building (default ``None``: the source's ids). ``"degree"``:
        by descending count in ``indices`` (how often a sampler reads each row; ties by id), so
        the rows read most sit together. Measured on a 584M-edge power-law graph: about 3% less
        sampling CPU time, within the noise in wall time (BENCHMARKS.md, "Node order"). The order
        is counted in the first pass and costs O(num_nodes) more memory, no extra pass. The
        graph keeps it (``graph.node_order``, new id -> source id, saved in the folder with its
        checksum): its ids are the new ones, and ``graph.new_ids`` / ``graph.original_ids`` /
        ``graph.rows_in_order`` map ids, features and labels between the two numberings.

    Returns
    -------
    CSRGraph
        The graph at ``path``, memory-mapped; the same arrays as
        ``CSRGraph.from_edge_index(all_edges, num_nodes, direction, keep_edge_ids=...)`` (with
        ``reorder``: as ``from_edge_index(..., reorder=...)``, the edges renumbered, rows in
        source order).

    Raises
    ------
    ValueError
        for a ``reorder`` that is not ``None`` or ``"degree"`` (before anything is read); naming
        the chunk and position of the first bad edge (a negative id, an id
        ``>= num_nodes``, a chunk that is not ``(2, k)`` integers, ragged or of unequal
        ``(src, dst)``, a weight that is not finite and ``>= 0``, weights chunked differently
        from the edges), or a re-iterable source that gives other edges on a later pass than on
        the first; nothing is left at ``path``.
    FileNotFoundError, NotADirectoryError, PermissionError
        naming ``path`` when its parent folder does not exist, is not a folder or cannot be
        written (before anything is read; no folder is created for it).
    FileExistsError
        naming ``path`` when something stands there that this library did not write (a folder or
        file of the user's, the working directory), or a saved graph with ``overwrite=False``.
    OSError
        when writing fails (a full disk), naming the array being written; nothing is left at
        ``path``.
    """
    if direction not in ("in", "out"):
        raise ValueError(f"direction must be 'in' or 'out', got {direction!r}")
    keep_edge_ids = check_bool("keep_edge_ids", keep_edge_ids)
    budget = parse_size(memory, "memory")
    if budget < 1 << 20:
        raise ValueError(f"memory must be at least 1 MiB, got {memory!r}")
    if num_nodes is not None:
        num_nodes = check_int("num_nodes", num_nodes, minimum=0)
        from ..validation import check_allocation

        check_allocation("num_nodes", num_nodes, 8 * (1 + blocks_for(1 << 62)))
    if dtype is not None:
        index_dtype(0, dtype)  # the type check now; the width check once num_nodes is known
    overwrite = check_bool("overwrite", overwrite)
    reorder = check_order_name("reorder", reorder, BUILD_ORDERS)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike naming a folder, got {type(path).__name__}")
    given, path = path, os.path.abspath(os.fspath(path))
    check_parent(path, given=given)  # both before a pass over the source, not after
    check_replaceable(path, overwrite=overwrite, given=given)
    scratch = temporary_path(path, "scratch")
    edges = as_source("source", source)
    weight_source = None if weights is None else as_source("weights", weights, kind="weights")
    # A slice of the source (two int64 rows and the kernels' temporaries) takes at most 1/16 of the budget.
    for src in (edges, weight_source):
        if src is not None:
            src.slice_edges = int(max(1 << 12, min(src.slice_edges, budget // 256)))
    try:
        counts, reads, num_nodes, num_edges, edges, weight_source = _count_pass(
            edges, weight_source, num_nodes, direction, scratch, reorder is not None
        )
        width = index_dtype(num_nodes, dtype)
        indptr = np.empty(num_nodes + 1, np.int64)
        _indptr_from_counts(counts, indptr)
        del counts
        order = rank = None
        if reorder is not None:
            order = degree_order(reads)
            del reads
            rank = inverse_order(order).astype(width)  # read per edge: the narrow copy halves its footprint
            indptr = permuted_indptr(indptr, order)
        meta = {"num_nodes": num_nodes, "num_src_nodes": num_nodes, "num_edges": num_edges}
        with FolderWriter(path, "CSRGraph", meta, overwrite=overwrite, given=given) as out:
            _write_rows(out, edges, weight_source, indptr, width, keep_edge_ids, budget, direction, _unique_rows, rank)
            if order is not None:
                out.add("node_order", order)
        return CSRGraph.load(path, mmap=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _count_pass(edges, weight_source, num_nodes, direction, scratch, count_reads):
    """Degrees per row (per thread), with ``count_reads`` how often each node appears in
    ``indices`` (else ``None``), the node and edge counts, and re-readable sources."""
    blocks = blocks_for(1 << 62)
    capacity = num_nodes if num_nodes is not None else 0
    counts = np.zeros((blocks, capacity), np.int64)
    reads = np.zeros((blocks, capacity), np.int64) if count_reads else None
    largest = -1
    num_edges = 0
    # A one-pass source is copied during this pass; edges and weights are copied together when
    # either is, so their chunks stay aligned on the later passes.
    one_pass = not edges.reiterable or (weight_source is not None and not weight_source.reiterable)
    spill = edges.spill_to(scratch) if one_pass else None
    weight_spill = weight_source.spill_to(scratch, "w") if one_pass and weight_source is not None else None
    weight_chunks = iter(weight_source.chunks()) if weight_source is not None else None
    for chunk in edges.chunks():
        rows, cols = _rows_cols(chunk, direction)
        if num_nodes is None and chunk.size:
            low = int(min(rows.min(), cols.min()))
            if low < 0:
                _raise_bad(chunk, direction, rows, cols, None)
            largest = max(largest, int(max(rows.max(), cols.max())))
            if largest >= capacity:  # grow (doubling): O(num_nodes) in all
                capacity = _grown_capacity(chunk, rows, cols, largest, capacity, blocks * (1 + count_reads))
                grown = np.zeros((blocks, capacity), np.int64)
                grown[:, : counts.shape[1]] = counts
                counts = grown
                if reads is not None:
                    grown = np.zeros((blocks, capacity), np.int64)
                    grown[:, : reads.shape[1]] = reads
                    reads = grown
        bound = capacity if num_nodes is None else num_nodes
        bad = int(count_rows(rows, cols, np.int64(bound), np.int64(bound), counts))
        if bad >= 0:
            _raise_bad(chunk, direction, rows, cols, num_nodes, bad)
        if reads is not None:  # every id was checked just above: only the counting is left
            count_rows(cols, None, np.int64(bound), np.int64(bound), reads)
        if weight_chunks is not None:
            weight_chunk = _next_weights(weight_chunks, chunk)
            _check_weight_chunk(weight_chunk, chunk)
            if weight_spill is not None:
                weight_spill.add(weight_chunk.data)
        if spill is not None:
            spill.add(chunk.data)
        num_edges += chunk.size
    if weight_chunks is not None and next(weight_chunks, None) is not None:
        raise ValueError("weights holds more chunks than source")
    if num_nodes is None:
        num_nodes = largest + 1
        counts = counts[:, :num_nodes]
    if reads is not None:
        reads = reads[:, :num_nodes].sum(axis=0)
    edges = spill.finish() if spill is not None else edges
    weight_source = weight_spill.finish() if weight_spill is not None else weight_source
    return counts, reads, num_nodes, num_edges, edges, weight_source


def _grown_capacity(chunk: Chunk, rows, cols, largest: int, capacity: int, count_rows_per_node: int) -> int:
    """The degree counts' new length (doubling) once ``largest`` is past ``capacity``, or a
    ``ValueError`` naming the edge whose id (``num_nodes`` not given: the largest id sets it) sizes
    them past this machine's memory, before NumPy's bare ``MemoryError``."""
    from ..validation import check_allocation

    bytes_each = 8 * (1 + count_rows_per_node)  # the count rows, then indptr
    try:
        check_allocation("num_nodes", largest + 1, bytes_each)
    except ValueError as error:
        position = int(np.argmax((rows == largest) | (cols == largest)))
        where = f"source chunk {chunk.index}, edge {chunk.offset + position} (edge {chunk.start + position} overall)"
        raise ValueError(
            f"{where} = {chunk.data[:, position].tolist()}: with num_nodes not given the largest id sets it, "
            f"and {error}"
        ) from None
    try:
        check_allocation("num_nodes", 2 * capacity, bytes_each)
    except ValueError:
        return largest + 1  # doubling would not fit, the exact size does
    return max(largest + 1, 2 * capacity)


def _rows_cols(chunk: Chunk, direction: str):
    return (chunk.data[1], chunk.data[0]) if direction == "in" else (chunk.data[0], chunk.data[1])


def _raise_bad(chunk: Chunk, direction, rows, cols, num_nodes, position=None):
    if position is None:
        position = int(np.argmax((rows < 0) | (cols < 0)))
    pair = chunk.data[:, position].tolist()
    where = (
        f"source chunk {chunk.index}, edge {chunk.offset + position} (edge {chunk.start + position} overall) = {pair}"
    )
    if min(pair) < 0:
        raise ValueError(f"{where} has a negative node id")
    raise ValueError(f"{where} is out of range for num_nodes = {num_nodes}")


def _next_weights(weight_chunks, chunk: Chunk):
    weight_chunk = next(weight_chunks, None)
    if weight_chunk is None:
        raise ValueError(f"weights has fewer chunks than source: none for source chunk {chunk.index}")
    return weight_chunk


def _check_weight_chunk(weight_chunk: Chunk, chunk: Chunk) -> None:
    if weight_chunk.data.shape != (chunk.size,):
        raise ValueError(
            f"weights chunk {weight_chunk.index} has shape {weight_chunk.data.shape}, but source chunk "
            f"{chunk.index} holds {chunk.size} edges"
        )
    try:
        check_weights(weight_chunk.data)
    except ValueError as error:
        raise ValueError(f"weights chunk {weight_chunk.index}: {error}") from None


@njit(cache=True, nogil=True)
def _indptr_from_counts(counts, indptr):
    indptr[0] = 0
    for v in range(counts.shape[1]):
        total = 0
        for t in range(counts.shape[0]):
            total += counts[t, v]
        indptr[v + 1] = indptr[v] + total


def _buckets(indptr: np.ndarray, capacity: int):
    """Row ranges ``[r0, r1)`` whose edges fit in ``capacity`` (a single row may exceed it)."""
    num_rows = indptr.shape[0] - 1
    r0 = 0
    while r0 < num_rows:
        r1 = int(np.searchsorted(indptr, indptr[r0] + capacity, side="right")) - 1
        r1 = min(num_rows, max(r1, r0 + 1))
        yield r0, r1
        r0 = r1


def _write_rows(out, edges, weight_source, indptr, width, keep_edge_ids, budget, direction, unique_rows, rank):
    num_rows, num_edges = indptr.shape[0] - 1, int(indptr[-1])
    id_dtype = np.dtype(np.int32 if num_edges <= np.iinfo(np.int32).max else np.int64)
    weight_dtype = None if weight_source is None else weight_source.dtype
    per_edge = width.itemsize + (id_dtype.itemsize if keep_edge_ids else 0)
    per_edge += 0 if weight_dtype is None else weight_dtype.itemsize
    # A renumbered slice (two more rows of the index width) takes its share of the budget too.
    slice_bytes = (16 + (2 * width.itemsize if rank is not None else 0)) * edges.slice_edges
    capacity = max(1, (budget - slice_bytes) // per_edge)
    known = None if unique_rows else num_edges
    writers = {"indices": out.open("indices", width, None if known is None else (known,))}
    if keep_edge_ids:
        writers["edge_ids"] = out.open("edge_ids", id_dtype, (num_edges,))
    if weight_dtype is not None:
        writers["weights"] = out.open("weights", weight_dtype, (num_edges,))
    lengths = np.empty(num_rows, np.int64) if unique_rows else None
    kept = 0
    for r0, r1 in _buckets(indptr, capacity):
        e0, e1 = int(indptr[r0]), int(indptr[r1])
        cursor = indptr[r0:r1] - e0
        buffer = np.empty(e1 - e0, width)
        ids = np.empty(e1 - e0 if keep_edge_ids else 1, id_dtype)
        values = np.empty(e1 - e0, weight_dtype) if weight_dtype is not None else np.zeros(1, np.float32)
        limits = indptr[r0 + 1 : r1 + 1] - e0  # where each row's slice of the bucket ends
        weight_chunks = iter(weight_source.chunks()) if weight_source is not None else None
        for chunk in edges.chunks():
            rows, cols = _rows_cols(chunk, direction)
            if rank is not None:
                rows, cols = _renumbered(rank, rows, chunk), _renumbered(rank, cols, chunk)
            w = next(weight_chunks, None) if weight_chunks is not None else None
            if weight_chunks is not None and (w is None or w.data.shape != (chunk.size,)):
                raise _changed_source(chunk)
            bad = _scatter_bucket(
                rows, cols, np.int64(r0), np.int64(r1), cursor, limits, np.int64(num_rows), buffer, ids,
                keep_edge_ids, np.int64(chunk.start), values if w is None else w.data, values, w is not None,
            )  # fmt: skip
            if bad >= 0:
                raise _changed_source(chunk, bad)
        if not np.array_equal(cursor, limits):  # rows left short: their slots would hold np.empty's bytes
            raise _changed_source(None)
        if unique_rows:
            bucket_indptr = indptr[r0 : r1 + 1] - e0
            lengths[r0:r1] = sort_unique_rows(bucket_indptr, buffer)
            compact = np.zeros(r1 - r0 + 1, np.int64)
            np.cumsum(lengths[r0:r1], out=compact[1:])
            buffer = compact_rows(bucket_indptr, buffer, compact)
            kept += int(compact[-1])
        _write(writers["indices"], buffer)
        if keep_edge_ids:
            _write(writers["edge_ids"], ids)
        if weight_dtype is not None:
            _write(writers["weights"], values)
    if unique_rows:
        final = np.zeros(num_rows + 1, np.int64)
        np.cumsum(lengths, out=final[1:])
        indptr = final
        out.meta["num_edges"] = kept
    out.add("indptr", indptr)


def _write(writer, array) -> None:
    try:
        writer.write(array)
    except OSError as error:
        if error.errno == errno.ENOSPC:
            raise OSError(error.errno, f"build_csr: the disk is full while writing {writer.name!r}") from error
        raise


def _renumbered(rank, ids, chunk):
    if ids.size and (ids.min() < 0 or ids.max() >= rank.shape[0]):  # rank[-1] would wrap
        raise _changed_source(chunk, int(np.argmax((ids < 0) | (ids >= rank.shape[0]))))
    return rank[ids]


def _changed_source(chunk, position=None) -> ValueError:
    """The error for a re-iterable source that gave other edges (or weights) on a later pass than
    on the counting pass: the buckets are cut from the first pass's counts, so its edges no longer fit."""
    where = ""
    if chunk is not None and position is not None:
        where = f"source chunk {chunk.index}, edge {chunk.offset + position} (edge {chunk.start + position} overall): "
    elif chunk is not None:
        where = f"source chunk {chunk.index}: "
    return ValueError(
        f"{where}the source gave other edges on a later pass than on the first (its rows' counts or ids "
        "changed): a re-iterable source must give the same edges, in the same chunks, each time it is read"
    )


@njit(cache=True, nogil=True)
def _scatter_bucket(
    rows, cols, r0, r1, cursor, limits, bound, buffer, ids, keep_ids, id_base, weights_in, weights_out, weighted
):
    """Append the edges of rows ``[r0, r1)`` to their rows' slices of the bucket, in source order.
    Returns the position of the first edge that does not fit its row's slice (``limits``) or whose
    neighbour is outside ``[0, bound)`` (a source that changed since the counting pass), else -1."""
    n = rows.shape[0]
    for e in range(n):
        if e + 16 < n:
            ahead = rows[e + 16] - r0
            if 0 <= ahead < r1 - r0:
                prefetch(cursor, ahead)
        r = rows[e]
        if r0 <= r < r1:
            p = cursor[r - r0]
            c = cols[e]
            if p >= limits[r - r0] or c < 0 or c >= bound:
                return e
            cursor[r - r0] = p + 1
            buffer[p] = c
            if keep_ids:
                ids[p] = id_base + e
            if weighted:
                weights_out[p] = weights_in[e]
    return -1

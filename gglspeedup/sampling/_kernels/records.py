"""The two records every sampling kernel takes: the graph's arrays and the sampling options.

Kernels and row bodies receive a :class:`GraphArrays` and a :class:`SampleOptions` instead of
loose arrays and flags, so a new sampling option is a new field here plus the row bodies that
read it (:mod:`.rows`); no kernel or driver signature changes. Both are named tuples: Numba
compiles them (``@njit`` and ``@cuda.jit``) as plain structs whose fields cost nothing to read.

Absent arrays are one-element placeholders (kernels need an array of the right type, never read
it), made once by the driver that owns the record (:mod:`.cpu`, :mod:`.cuda`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "GraphArrays",
    "SampleOptions",
    "Drawn",
    "HopPlan",
    "DegreeTable",
    "DEGREE_CAP",
    "degree_table",
    "graph_arrays",
    "no_exclusions",
    "with_markers",
    "without_exclusions",
    "check_tree_count",
    "to_virtual",
    "from_virtual",
]


class GraphArrays(NamedTuple):
    """A placed graph as the kernels read it (every field a 1-D array where the driver runs).

    indptr : int64 (num_nodes + 1,)
    indices : int64 (num_edges,)
    edge_ids : int64 (num_edges,), or a placeholder when the graph has none (``e_id`` is then the
        CSR position; see ``SampleOptions.has_edge_ids``)
    weights : float32/float64 (num_edges,), or a placeholder for an unweighted sampler
    live : int64 (num_nodes,): edges of weight > 0 per row (weighted samplers), else a placeholder
    cum : float64 (num_edges,): running weight sum within each row (weighted), else a placeholder
    """

    indptr: Any
    indices: Any
    edge_ids: Any
    weights: Any
    live: Any
    cum: Any


class HopPlan(NamedTuple):
    """What a typed driver runs the hops with, per relation (the graph's edge-type order): its
    source and target type indices, row and edge bases in the stacked CSR, fanouts (R, hops) and
    RNG keys (:func:`.rng.edge_type_key`). Host arrays, built once per fanout setting
    (:func:`gglspeedup.sampling.plan.hop_plan`); the per-hop helpers are in :mod:`.typed_hops`."""

    src_type: np.ndarray  # int64 (R,)
    dst_type: np.ndarray  # int64 (R,)
    row_base: np.ndarray  # int64 (R,)
    edge_base: np.ndarray  # int64 (R,)
    fanouts: np.ndarray  # int64 (R, hops)
    keys: np.ndarray  # uint64 (R,)


class SampleOptions(NamedTuple):
    """What every row of every hop is drawn with, and how a call walks the hops: the one options
    record of a sampler and its driver (DESIGN.md, "one driver per device").

    replace : draw with replacement (exactly ``k`` draws for a row with an edge)
    weighted : draw proportionally to ``GraphArrays.weights`` (``live`` / ``cum`` are real)
    has_edge_ids : report ``GraphArrays.edge_ids[p]`` as ``e_id`` instead of the position ``p``
    excluded : int64 array of the sorted CSR positions rows must never draw (a link batch's
        positive pairs), or :func:`no_exclusions` (an int8 scalar marker) when the call
        excludes nothing. The two are different types, so the kernels of plain sampling are
        compiled without any exclusion code (:mod:`.exclusion`).
    excluded_rows : uint8 array of ``2 ** ROW_FILTER_BITS`` flags, set at the hash slot of every
        row that holds an excluded position (:func:`.exclusion.row_filter`), so most rows skip
        the binary search; the marker when ``excluded`` is.

    times : int64 or float64 array of one time per CSR position (a temporal sampler's rows are
        sorted by it, ascending), or the :func:`no_exclusions` marker for a sampler without times
        (the window bodies of :mod:`.rows` then compile to the whole row)
    seed_time : a temporal call's time per tree (the dtype of ``times``), or the marker
    last : temporal strategy ``"last"``: a row takes its ``k`` latest eligible edges
    stride : int: 0 for shared sampling; > 0 for disjoint sampling, every seed its own tree. The
        drivers then number a tree's nodes with *virtual* ids, ``tree * stride + node``
        (``stride`` the node count, or a typed graph's largest node-type count: every tree its own
        copy of the graph), which the kernels split (:func:`.rows.split`); callers pass and get
        back real ids (:func:`to_virtual`, :func:`from_virtual`).
    expand_new : the hop rule: ``False`` for ``expand="all"`` (hop ``h + 1`` draws for every node
        in ``n_id``), ``True`` for ``expand="new"`` (only for the nodes first reached at hop
        ``h``: PyG's rule). Read by the drivers' hop loops, never by a row body.

    ``replace``, ``weighted``, ``has_edge_ids``, ``times``, ``last`` are fixed for a sampler's
    lifetime (the driver's :attr:`options`); a call swaps in its own ``excluded`` /
    ``excluded_rows`` (a link batch), ``seed_time``, ``stride`` and ``expand_new``
    (``options._replace``), as the sampler's ``expand`` and ``disjoint`` may change between calls.
    """

    replace: bool
    weighted: bool
    has_edge_ids: bool
    excluded: Any = None
    excluded_rows: Any = None
    times: Any = None
    seed_time: Any = None
    last: bool = False
    stride: int = 0
    expand_new: bool = False


class Drawn(NamedTuple):
    """What a driver's ``sample`` returns (DESIGN.md; :mod:`gglspeedup.sampling.drivers`).

    n_id : the sampled nodes, seeds first, then new nodes in order of first appearance: an int64
        array (untyped), or one per node type in the graph's order (typed); real ids, never virtual
    hops : one record per hop, seed hop first: ``(edge_index, e_id, (num_sources, num_targets))``
        (untyped) or a :class:`.typed_hops.TypedHop` (typed)
    batch : disjoint calls: each row's tree (the position of its seed, over the types in order
        for a typed call), shaped as ``n_id``; ``None`` for shared sampling
    """

    n_id: Any
    hops: list
    batch: Any = None


# A degree at or above this is not stored in a DegreeTable: the count reads it from indptr.
DEGREE_CAP = int(np.iinfo(np.uint16).max)


class DegreeTable(NamedTuple):
    """Every (relation, target node) row's drawable edges, node-major: the rows of one node's
    relations (those whose target type is its type) are adjacent, so a typed hop's count reads a
    cache line per target node, not an ``indptr`` line per (node, relation) (WordNet's second hop:
    95k targets over 61 relations, 10% of them with an edge). Built once per typed driver
    (:func:`degree_table`).

    degrees : uint16 (rows,): ``min(available edges, DEGREE_CAP)`` (weighted: edges of weight > 0)
    base, stride : int64 (R,): relation ``r``'s row of node ``v`` is ``degrees[base[r] + v * stride[r]]``
    """

    degrees: Any
    base: Any
    stride: Any


def degree_table(indptr, live, weighted: bool, dst_type, row_base, type_counts) -> DegreeTable:
    """The :class:`DegreeTable` of a stacked typed CSR: relation ``r`` (target type ``dst_type[r]``)
    holds rows ``row_base[r] ..`` of ``type_counts[dst_type[r]]`` nodes; ``live`` (per row) is read
    for a weighted sampler."""
    dst_type = np.asarray(dst_type, np.int64)
    type_counts = np.asarray(type_counts, np.int64)
    slot = np.zeros(len(dst_type), np.int64)  # r's place among the relations of its target type
    per_type = np.zeros(len(type_counts), np.int64)
    for r, t in enumerate(dst_type):
        slot[r] = per_type[t]
        per_type[t] += 1
    type_start = np.concatenate(([0], np.cumsum(type_counts * per_type)))
    base = type_start[dst_type] + slot
    stride = per_type[dst_type]
    degrees = np.empty(int(type_start[-1]), np.uint16)
    for r, t in enumerate(dst_type):
        first, count = int(row_base[r]), int(type_counts[t])
        available = live[first : first + count] if weighted else np.diff(indptr[first : first + count + 1])
        degrees[base[r] :: stride[r]][:count] = np.minimum(available, DEGREE_CAP)
    return DegreeTable(degrees, base, stride)


def no_exclusions():
    """The ``SampleOptions.excluded`` (and ``excluded_rows``) marker meaning "nothing excluded": an
    int8 scalar, a type of its own (see :mod:`.exclusion`). A scalar, not an array: the CPU row
    bodies are calls that take and release a reference to every array of their records, per row,
    and two more arrays made plain ``sample()`` 22% more instructions per batch."""
    return np.int8(0)


def with_markers(options: SampleOptions, times=None) -> SampleOptions:
    """A driver's own record: ``options`` with the :func:`no_exclusions` marker in every per-call
    array field (``excluded``, ``excluded_rows``, ``seed_time``) and ``times`` (the marker when
    ``None``): the record plain ``sample()`` calls run with."""
    marker = no_exclusions()
    return options._replace(
        excluded=marker,
        excluded_rows=marker,
        seed_time=marker,
        times=marker if times is None else times,
        stride=0,
        expand_new=False,
    )


def without_exclusions(options: SampleOptions) -> SampleOptions:
    """``options`` with the :func:`no_exclusions` marker for ``excluded`` and ``excluded_rows``
    (``options`` itself when it excludes nothing): what the CPU hop kernels run the rows that hold
    no excluded edge with, so those rows draw through the plain bodies."""
    if isinstance(options.excluded, np.generic):
        return options
    marker = no_exclusions()
    return options._replace(excluded=marker, excluded_rows=marker)


def graph_arrays(graph, tables, placeholder) -> GraphArrays:
    """The :class:`GraphArrays` of a placed ``graph`` (a :class:`~gglspeedup.CSRGraph`).

    ``tables`` is ``(live, cum)`` for weighted sampling, else ``None``; ``placeholder(dtype)``
    makes a one-element array where the kernels will run, standing in for every absent array
    (and for an empty ``indices`` or ``cum``: kernels index arrays that must not be empty). An
    empty array's placeholder keeps its dtype, so a graph without edges takes the kernel variants
    of a graph of its index width (an int64 stand-in compiled every hop kernel again for it).
    """

    def present(array, dtype):
        if array is None:
            return placeholder(dtype)
        return placeholder(array.dtype) if array.shape[0] == 0 else array

    live, cum = tables if tables is not None else (None, None)
    return GraphArrays(
        indptr=graph.indptr,
        indices=present(graph.indices, np.int64),
        edge_ids=present(graph.edge_ids, np.int64),
        weights=present(graph.weights, np.float64),
        live=present(live, np.int64),
        cum=present(cum, np.float64),
    )


def check_tree_count(trees: int, stride: int) -> None:
    """Refuse a disjoint batch whose virtual ids (``tree * stride + node``) would not fit in int64."""
    if trees * stride >= 2**62:
        raise ValueError(
            f"a disjoint batch of {trees} seeds over {stride} nodes exceeds the 2**62 virtual ids the "
            "drivers number trees' nodes with; sample fewer seeds per batch"
        )


def to_virtual(xp, seeds, stride: int, first: int = 0):
    """The virtual ids of ``seeds`` (one tree each, numbered from ``first``): int64 ``(first + i) *
    stride + seeds[i]`` of the seeds' array module ``xp``; refused (:func:`check_tree_count`)
    where they would not fit."""
    check_tree_count(first + len(seeds), stride)
    trees = xp.arange(len(seeds), dtype=np.int64)
    if first:
        trees += first
    return trees * stride + seeds


def from_virtual(n_id, stride: int) -> tuple:
    """``(node ids, trees)`` of virtual ids ``n_id`` (:func:`to_virtual`)."""
    batch = n_id // stride
    return n_id - batch * stride, batch

"""``service.partition``: cut a graph into partitions a server each (see DESIGN.md, "Service").

The folder it writes is described in :mod:`.book` (the book) and :mod:`._layout` (a part). Every
argument is checked before anything is written; the folder is written under a temporary name and
renamed into place, so a failed or interrupted partition leaves nothing at ``path``.
"""

from __future__ import annotations

import os

import numpy as np

from .._replace import check_replaceable
from .._storage import FolderWriter
from ._layout import local_rows, range_assignment, relations_of, write_part
from ._metis import import_pymetis, metis_assignment, metis_bytes
from .book import BOOK_KIND, PartitionBook

__all__ = ["partition", "METHODS", "times_digest"]

METHODS = ("metis", "range")


def partition(
    graph,
    path,
    num_parts,
    *,
    features=None,
    labels=None,
    method: str = "metis",
    node_time=None,
    edge_time=None,
    memory="2G",
) -> PartitionBook:
    """Cut ``graph`` into ``num_parts`` partitions and write them, with a partition book, to ``path``.

    Parameters
    ----------
    graph : CSRGraph, HeteroGraph or scipy sparse matrix
        A memory-mapped graph (``CSRGraph.load(path)``) is read piece by piece, out of core.
    path : str or os.PathLike
        A folder to create (or an empty one); its parent must exist.
    num_parts : int
        In ``[1, number of nodes]``.
    features, labels : array (N, ...) or dict node type -> array, optional
        Rows by node id (a typed graph's by type: ``{type: x}``, types left out have none); each
        partition stores its nodes' rows. Memory-mapped tables are read in pieces.
    method : {"metis", "range"}
        ``"metis"``: METIS (``pymetis``, the ``service`` extra) balancing nodes and edges, small
        edge cut, every part non-empty (a part METIS leaves empty takes the lowest id of the part
        with the most nodes); it holds the graph in memory (about 64 bytes per edge, checked against
        ``memory``). ``"range"``: contiguous id ranges balanced by nodes plus edges, for graphs
        METIS cannot hold.
    node_time, edge_time : optional
        As :class:`~gglspeedup.NeighborSampler`'s (dicts per type for a typed graph): each row is
        stored sorted by time, as a temporal sampler sorts it, with one time per entry, so the
        partition serves temporal sampling (and only that: untimed rows keep the graph's order).
    memory : int or str
        The bytes a piece of rows or feature rows may take while it is written (``"2G"``,
        ``parse_size``'s grammar).

    Returns
    -------
    PartitionBook

    Raises
    ------
    TypeError
        a graph of another kind, tables or times that are not numeric arrays, bfloat16 tables.
    ValueError
        ``num_parts`` outside ``[1, nodes]``, an unknown ``method``, tables of the wrong length or
        node type, ``path`` existing and not an empty folder (or a symbolic link, or the working
        directory), METIS past ``memory``.
    ImportError
        ``method="metis"`` without ``pymetis``.
    """
    from ..device import parse_size
    from ..validation import check_int

    rel = relations_of(_check_graph(graph))
    num_parts = check_int("num_parts", num_parts, minimum=1)
    if num_parts > max(rel.num_nodes, 1) or rel.num_nodes == 0:
        raise ValueError(f"num_parts must be in [1, number of nodes = {rel.num_nodes}], got {num_parts}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    budget = parse_size(memory, "memory")
    if budget < 1 << 20:
        raise ValueError(f"memory must be at least 1 MiB, got {budget} bytes")
    path = _check_path(path)
    tables = _check_tables("features", features, rel, "x") | _check_tables("labels", labels, rel, "y")
    times = _check_times(rel, node_time, edge_time)
    if method == "metis":
        import_pymetis()
        need = metis_bytes(rel.num_nodes, rel.num_edges)
        if need > budget:
            raise ValueError(
                f"method='metis' holds the graph in memory (about {need / 2**30:.3g} GiB for {rel.num_edges} edges), "
                f"more than memory = {budget / 2**30:.3g} GiB: raise memory or use method='range'"
            )
        part = metis_assignment(rel, num_parts)
    else:
        part = range_assignment(rel.degrees(), num_parts)
    return _write(path, rel, part, num_parts, method, tables, times, budget)


def _check_graph(graph):
    from ..graph import CSRGraph, as_csr_graph
    from ..heterograph import HeteroGraph

    if isinstance(graph, HeteroGraph):
        return graph
    if not isinstance(graph, CSRGraph):
        try:
            graph = as_csr_graph(graph)
        except TypeError:
            raise TypeError(
                f"graph must be a CSRGraph, HeteroGraph or scipy sparse matrix, got {type(graph).__name__}"
            ) from None
    if graph.num_src_nodes != graph.num_nodes:
        raise ValueError("graph is bipartite (num_src_nodes != num_nodes): partition it as a relation of a HeteroGraph")
    return graph


def _check_path(path) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    path = os.path.abspath(os.fspath(path))
    if os.path.lexists(path) and (not os.path.isdir(path) or os.listdir(path)):
        raise ValueError(f"path {path!r} exists and is not an empty folder: partition into a new one")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"cannot partition into {path!r}: folder {parent!r} does not exist")
    try:  # the writer's own refusals (a link to an empty folder, the working directory), now, by name
        check_replaceable(path, overwrite=False)
    except FileExistsError as error:
        raise ValueError(f"path: {error}") from None
    return path


def _check_tables(name: str, tables, rel, prefix: str) -> dict:
    """``{array name: (type index, table)}`` of ``features`` / ``labels``, checked."""
    from ..device import reject_meta, to_numpy

    if tables is None:
        return {}
    if rel.typed:
        if not isinstance(tables, dict):
            raise TypeError(f"{name} of a typed graph must be a dict node type -> array, got {type(tables).__name__}")
        given = tables
    else:
        if isinstance(tables, dict):
            raise TypeError(f"{name} of an untyped graph must be an array, got a dict")
        given = {None: tables}
    out = {}
    for node_type, table in given.items():
        where = name if node_type is None else f"{name}[{node_type!r}]"
        if rel.typed and node_type not in rel.node_types:
            raise ValueError(f"{name} names node type {node_type!r}, which the graph does not have")
        t = 0 if node_type is None else rel.node_types.index(node_type)
        reject_meta(where, table)
        if "bfloat16" in str(getattr(table, "dtype", "")):  # FeatureStore takes them; a part's .npy cannot say so
            raise TypeError(
                f"{where} holds bfloat16, which a partition cannot store (its .npy files would read back as raw "
                f"2-byte records): cast it to float32 or float16 first"
            )
        if isinstance(table, list):
            try:
                table = np.asarray(table)
            except ValueError as error:  # ragged rows
                raise TypeError(f"{where} must be a numeric array with one row per node, got a list: {error}") from None
        array = table if isinstance(table, np.ndarray) else to_numpy(table)
        if array.dtype.kind not in "biuf" or array.ndim < 1:
            raise TypeError(f"{where} must be a numeric array with one row per node, got dtype {array.dtype}")
        if array.shape[0] != rel.counts[t]:
            raise ValueError(f"{where} must have one row per node ({rel.counts[t]}), got {array.shape[0]}")
        out[f"{prefix}_{t}"] = (t, array)
    return out


class _Times:
    """Times per entry of a temporal partition: ``of(r, positions, entries)`` for relation ``r``."""

    def __init__(self, kind: str, dtype, per_type: dict, rel):
        from ..sampling.temporal import earliest

        self.kind, self.dtype, self.per_type, self.rel = kind, np.dtype(dtype), per_type, rel
        self.earliest = earliest(dtype)

    def of(self, r: int, positions, entries):
        rel = self.rel
        key = (rel.src_type[r] if self.kind == "node" else r) if rel.typed else 0
        values = self.per_type.get(key)
        if values is None:
            return np.full(positions.shape[0], self.earliest, self.dtype)
        if self.kind == "node":
            return np.asarray(values[entries], self.dtype)
        ids = np.asarray(rel.edge_ids[positions]) if rel.edge_ids is not None else positions - rel.edge_base[r]
        return np.asarray(values[ids], self.dtype)


def _check_times(rel, node_time, edge_time):
    """The :class:`_Times` of ``node_time`` / ``edge_time`` (checked as the samplers check them), or None."""
    from ..heterograph import check_edge_type
    from ..sampling.temporal import common_dtype, time_array

    if node_time is None and edge_time is None:
        return None
    if node_time is not None and edge_time is not None:
        raise ValueError("give node_time or edge_time, not both (a sampler filters by one kind of time)")
    kind, given = ("node", node_time) if node_time is not None else ("edge", edge_time)
    name = f"{kind}_time"
    if rel.typed:
        if not isinstance(given, dict):
            raise TypeError(f"{name} of a typed graph must be a dict (type -> times), got {type(given).__name__}")
        items = given.items()
    else:
        items = [(None, given)]
    per_type = {}
    for key, values in items:
        if kind == "node":
            if rel.typed and key not in rel.node_types:
                raise ValueError(f"node_time names node type {key!r}, which the graph does not have")
            t = rel.node_types.index(key) if rel.typed else 0
            where = name if key is None else f"node_time[{key!r}]"
            per_type[t] = time_array(where, values, rel.counts[t], "node")
        else:
            if rel.typed:  # a (src_type, name, dst_type) tuple of str, as the typed sampler checks it
                key = check_edge_type(key, rel.edge_types, "edge_time's key")
            r = rel.edge_types.index(key) if rel.typed else 0
            where = name if key is None else f"edge_time[{key!r}]"
            per_type[r] = _check_edge_time(where, time_array(where, values), rel, r)
    dtype = common_dtype(per_type.values())
    per_type = {k: v.astype(dtype, copy=False) for k, v in per_type.items()}
    return _Times(kind, dtype, per_type, rel)


def _check_edge_time(where: str, values: np.ndarray, rel, r: int) -> np.ndarray:
    """Refuse edge times that do not cover relation ``r``'s reported edge ids."""
    first, stop = rel.edge_base[r], rel.edge_base[r + 1]
    if rel.edge_ids is None:
        if values.shape[0] != stop - first:
            raise ValueError(f"{where} must have one entry per edge ({stop - first}), got {values.shape[0]}")
        return values
    ids = np.asarray(rel.edge_ids[first:stop])
    if ids.size and (int(ids.max()) >= values.shape[0] or int(ids.min()) < 0):
        raise ValueError(f"{where} must have one entry per edge id (ids up to {int(ids.max())}), got {values.shape[0]}")
    return values


def times_digest(per_type: dict) -> str:
    """A digest of checked times (``{type or relation index: array}``): what a sampler compares."""
    import xxhash

    digest = xxhash.xxh3_64()
    for key in sorted(per_type):
        array = np.ascontiguousarray(per_type[key])
        digest.update(f"{key}:{array.dtype.str}:{array.shape[0]};".encode())
        digest.update(memoryview(array).cast("B"))
    return digest.hexdigest()


def _write(path: str, rel, part: np.ndarray, num_parts: int, method: str, tables: dict, times, budget: int):
    part_dtype = np.int16 if num_parts <= np.iinfo(np.int16).max else np.int32
    local, sizes = local_rows(part, rel.type_offsets, num_parts)
    degrees = rel.degrees()
    edges = np.bincount(part, weights=degrees, minlength=num_parts).astype(np.int64)
    meta = {
        "num_parts": num_parts,
        "method": method,
        "typed": rel.typed,
        "num_nodes": list(rel.counts) if rel.typed else rel.num_nodes,
        "num_edges": [rel.edge_base[r + 1] - rel.edge_base[r] for r in range(rel.num_relations)]
        if rel.typed
        else rel.num_edges,
        "node_types": None if not rel.typed else list(rel.node_types),
        "edge_types": None if not rel.typed else [list(et) for et in rel.edge_types],
        "weighted": rel.weights is not None,
        "temporal": None if times is None else times.kind,
        "time_dtype": None if times is None else times.dtype.str,
        "time_digest": None if times is None else times_digest(times.per_type),
        "index_dtype": rel.id_dtype.str,
        "edge_id_dtype": rel.edge_id_dtype().str,
        "tables": {name: {"dtype": a.dtype.str, "shape": list(a.shape[1:])} for name, (_, a) in tables.items()},
        "part_sizes": [
            {"nodes": int(sizes[:, p].sum()), "edges": int(edges[p]), "per_type": sizes[:, p].tolist()}
            for p in range(num_parts)
        ],
    }
    with FolderWriter(path, BOOK_KIND, meta) as out:
        out.add("part", part.astype(part_dtype))
        out.add("local", local.astype(np.int32 if sizes.max(initial=0) < 2**31 else np.int64))
        if times is not None and times.kind == "node":
            for t, values in times.per_type.items():
                out.add("node_time" if not rel.typed else f"node_time_{t}", values)
        del local
        order = np.argsort(part, kind="stable")  # every node, part by part, ascending ids within each
        bounds = np.concatenate(([0], np.cumsum(np.bincount(part, minlength=num_parts))))
        for p in range(num_parts):
            mine = order[bounds[p] : bounds[p + 1]]
            owned = [_of_type(mine, rel.type_offsets, t) for t in range(len(rel.counts))]
            part_meta = {"part": p, "num_parts": num_parts, "typed": rel.typed}
            write_part(out.tmp, f"part{p}", part_meta, rel, owned, tables, times, budget)
    return PartitionBook.load(path)


def _of_type(flat_ids: np.ndarray, type_offsets: np.ndarray, t: int) -> np.ndarray:
    """The ids of type ``t`` among ascending flat ids, as that type's ids."""
    lo, hi = np.searchsorted(flat_ids, type_offsets[t : t + 2])
    return flat_ids[lo:hi] - type_offsets[t]

"""Typed loaders' parts: typed batches, typed seeds and labels, feature rows per node type.

:class:`~gglspeedup.NodeLoader` and :class:`~gglspeedup.LinkLoader` switch to their typed mode
for a typed sampler (:class:`gglspeedup.protocols.HeteroSampler`, e.g. a
:class:`~gglspeedup.HeteroNeighborSampler`: ``num_nodes`` a dict node type -> count). Seeds are
then a dict node type -> ids, iterated as one list of ``(type, id)`` in the sampler's node-type
order (shuffled across types, as DGL's ``DataLoader`` does with dict seeds); features are a dict
node type -> rows (an array or a :class:`~gglspeedup.protocols.FeatureSource` per type, ``None``
or left out for a type without features) or a typed store (a ``HeteroFeatureStore``:
``gather({type: ids}) -> {type: rows}``). Batches are :class:`HeteroBatch` /
:class:`HeteroLinkBatch`: PyG's ``x_dict`` / ``edge_index_dict`` shape of things, hop by hop.
"""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

import numpy as np

from .._pool import BufferPool
from ..heterograph import check_edge_type
from ..validation import check_ids_in_range, int_array
from ._base import check_indexable, gather_rows, pool_for, trusted_ids

__all__ = [
    "HeteroBatch",
    "HeteroLinkBatch",
    "TypedFeatures",
    "typed_num_nodes",
    "is_typed_seeds",
    "check_typed_seeds",
    "check_typed_labels",
    "check_typed_link",
    "split_seeds",
    "typed_sizes",
]


class _HeteroBatchFields(NamedTuple):
    x: dict
    y: Any
    adjs: list
    n_id: dict
    batch_size: dict
    num_sampled_nodes: dict
    num_sampled_edges: dict


class HeteroBatch(_HeteroBatchFields):
    """One typed mini-batch, in the loader's backend.

    x : dict node type -> tensor, shape (N_t, F_t)
        Feature rows of ``n_id[t]`` for every node type with features (types without features
        have no entry; the model embeds them).
    y : dict node type -> tensor, shape (batch_size[t], ...), or None
        Labels of each seed type's seeds (``labels[t][seeds of t]``), for the types ``labels``
        names; ``None`` without labels.
    adjs : list over hops, outermost first, of dict edge type -> Adj
        As :class:`~gglspeedup.HeteroSampleOutput`'s: ``edge_index[0]`` into ``n_id[src_type]``,
        ``edge_index[1]`` into ``n_id[dst_type]``.
    n_id : dict node type -> tensor, int64, shape (N_t,)
        Local ids per node type; ``n_id[t][:batch_size[t]]`` are the batch's seeds of type ``t``.
    batch_size : dict node type -> int
        Seeds of each of the loader's seed types in this batch (``0`` for a type the batch lacks).
    num_sampled_nodes, num_sampled_edges : dict
        As :class:`~gglspeedup.HeteroSampleOutput`'s (PyG's per-hop counts, seed hop first).
    batch : dict node type -> tensor, int64, or None
        An attribute, not a field (the batch unpacks as before): a disjoint or temporal sampler's
        tree of each row of ``n_id[t]``; ``None`` for shared sampling.
    """

    batch = None  # an attribute, not a field: see the docstring


class _HeteroLinkBatchFields(NamedTuple):
    x: dict
    adjs: list
    n_id: dict
    pair_index: Any
    labels: Any
    negative_targets: Any
    num_false_negatives: Any
    batch_size: int
    edge_type: tuple
    num_sampled_nodes: dict
    num_sampled_edges: dict


class HeteroLinkBatch(_HeteroLinkBatchFields):
    """One typed link mini-batch (pairs of one edge type), in the loader's backend.

    x, adjs, n_id, num_sampled_nodes, num_sampled_edges : as :class:`HeteroBatch`'s; the seeds
        are the distinct endpoints of every returned pair (sources in ``n_id[edge_type[0]]``,
        targets in ``n_id[edge_type[2]]``).
    pair_index : tensor, int64, shape (2, P)
        Row 0: positions in ``n_id[edge_type[0]]``, row 1 in ``n_id[edge_type[2]]``: the batch's
        pairs, then negative pairs.
    labels, negative_targets, num_false_negatives, batch_size
        As :class:`~gglspeedup.loader.LinkBatch`'s (``batch_size``: pairs of the loader's array).
    edge_type : tuple (src_type, name, dst_type)
        The pairs' edge type.
    batch : dict node type -> tensor, int64, or None
        An attribute, not a field (the batch unpacks as before): a disjoint or temporal sampler's
        tree of each row of ``n_id[t]``; ``None`` for shared sampling.
    """

    batch = None  # an attribute, not a field: see the docstring


def typed_num_nodes(sampler) -> dict | None:
    """The typed sampler's ``num_nodes`` (node type -> count), or ``None`` for an untyped one."""
    count = getattr(sampler, "num_nodes", None)
    return dict(count) if isinstance(count, dict) else None


def is_typed_seeds(seeds) -> bool:
    """Whether ``seeds`` are typed: a dict, or a ``(node_type, ids)`` pair."""
    return isinstance(seeds, dict) or (isinstance(seeds, tuple) and len(seeds) == 2 and isinstance(seeds[0], str))


def check_typed_seeds(seeds, num_nodes: dict) -> tuple[tuple, np.ndarray]:
    """``(seed_types, items)``: the seed types in the sampler's node-type order and a (2, S) int64
    array, row 0 each seed's position in ``seed_types``, row 1 its id, type after type.

    Raises ``TypeError`` (not a dict, non-integer ids), ``ValueError`` (an empty dict, an unknown
    type, ids not 1-D) or ``IndexError`` (an id outside ``[0, num_nodes[type])``)."""
    if isinstance(seeds, tuple) and len(seeds) == 2 and isinstance(seeds[0], str):
        seeds = {seeds[0]: seeds[1]}
    if not isinstance(seeds, dict):
        raise TypeError(
            f"a typed sampler needs seeds as a dict node type -> ids (or a (node_type, ids) pair), "
            f"got {type(seeds).__name__}"
        )
    if not seeds:
        raise ValueError("seeds must name at least one node type, got an empty dict")
    for node_type in seeds:
        if node_type not in num_nodes:
            raise ValueError(
                f"seeds names node type {node_type!r}, which the sampler does not know; its node types: "
                f"{list(num_nodes)}"
            )
    seed_types = tuple(t for t in num_nodes if t in seeds)
    columns = []
    for position, node_type in enumerate(seed_types):
        name = f"seeds[{node_type!r}]"
        ids = check_ids_in_range(
            name, int_array(name, seeds[node_type], beyond=IndexError), num_nodes[node_type], what="num_nodes"
        )
        columns.append(np.stack((np.full(len(ids), position, np.int64), ids)))
    return seed_types, np.ascontiguousarray(np.concatenate(columns, axis=1))


def check_typed_labels(labels, seed_types: tuple, num_nodes: dict) -> dict | None:
    """``labels`` as a dict node type -> array with one entry per node of that type; one array
    stands for the only seed type. Raises ``TypeError`` / ``ValueError`` naming the type."""
    if labels is None:
        return None
    if not isinstance(labels, dict):
        if len(seed_types) != 1:
            raise TypeError(
                f"labels must be a dict node type -> array when the seeds have several types {list(seed_types)}, "
                f"got {type(labels).__name__}"
            )
        labels = {seed_types[0]: labels}
    out = {}
    for node_type, array in labels.items():
        if node_type not in num_nodes:
            raise ValueError(
                f"labels names node type {node_type!r}, which the sampler does not know; its node types: "
                f"{list(num_nodes)}"
            )
        from ._base import label_array

        array = label_array(f"labels[{node_type!r}]", array)
        if array.ndim < 1:
            raise ValueError(f"labels[{node_type!r}] must be an array indexed by node id, got shape {array.shape}")
        if array.shape[0] != num_nodes[node_type]:
            raise ValueError(
                f"labels[{node_type!r}] must have one entry per {node_type!r} node ({num_nodes[node_type]}), "
                f"got shape {tuple(array.shape)}"
            )
        out[node_type] = array
    return out


def check_typed_link(sampler, num_nodes: dict, pairs: np.ndarray, edge_type, reverse_edge_type, exclude) -> dict:
    """The typed options of a link loader (``edge_type``, ``reverse_edge_type``) after checking
    them against the sampler's graph (any edge type between known node types for a sampler
    without a ``graph``) and ``pairs`` against the endpoint types, as ``sample_links`` will."""
    from ..sampling.hetero_links import check_reverse_rule

    known = getattr(getattr(sampler, "graph", None), "edge_types", None)

    def edge_type_of(value, name):
        if known is not None:
            return check_edge_type(value, known, name)
        value = check_edge_type(value, [tuple(value)] if isinstance(value, (tuple, list)) else [], name)
        for node_type in (value[0], value[2]):
            if node_type not in num_nodes:
                raise ValueError(f"{name} {value!r} names node type {node_type!r}, which the sampler does not know")
        return value

    edge_type = edge_type_of(edge_type, "edge_type")
    src, _, dst = edge_type
    check_ids_in_range("pairs[0]", pairs[0], num_nodes[src], what=f"num_nodes[{src!r}]")
    check_ids_in_range("pairs[1]", pairs[1], num_nodes[dst], what=f"num_nodes[{dst!r}]")
    if reverse_edge_type is not None:
        reverse_edge_type = edge_type_of(reverse_edge_type, "reverse_edge_type")
    check_reverse_rule(edge_type, reverse_edge_type, exclude)
    return {"edge_type": edge_type, "reverse_edge_type": reverse_edge_type}


def split_seeds(items: np.ndarray, seed_types: tuple) -> dict:
    """A batch's (2, B) ``items`` as a dict seed type -> int64 ids (every seed type, maybe empty),
    each type's seeds in batch order."""
    return {t: np.ascontiguousarray(items[1][items[0] == position]) for position, t in enumerate(seed_types)}


def typed_sizes(n_id: dict, adjs: list) -> tuple[int, int]:
    """``(nodes, edges)`` of a typed sample: summed over node types, and over hops and edge types."""
    nodes = sum(int(ids.shape[0]) for ids in n_id.values())
    edges = sum(int(adj.edge_index.shape[1]) for layer in adjs for adj in layer.values())
    return nodes, edges


def _rows_of(table) -> int | None:
    shape = getattr(table, "shape", None)
    if shape is not None and not isinstance(shape, dict) and len(shape) >= 1:
        if isinstance(shape[0], (int, np.integer)):
            return int(shape[0])
    return None


def _parameters(method) -> set:
    try:
        return set(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return set()


class TypedFeatures:
    """Feature rows per node type for a typed loader: ``gather(n_id dict) -> {type: rows}``.

    ``features`` is a dict node type -> array or feature source (``None``: no features), each
    type gathered as an untyped loader gathers (recycled host buffers, the range check skipped for
    a :class:`~gglspeedup.FeatureStore`), or a typed store: anything with ``gather(dict)`` (a
    ``HeteroFeatureStore``), asked for its ``feature_types`` (else its ``shape`` dict's types, else
    every node type), with per-type ``out`` buffers and ``check=False`` when its ``gather`` takes
    them and its ``shape`` dict shows every row is there. Row counts must equal ``num_nodes[type]``.
    """

    def __init__(self, features, num_nodes: dict, max_buffers: int):
        self.num_nodes = num_nodes
        self._store = None
        self._sources, self._pools, self._options = {}, {}, {}
        if isinstance(features, dict):
            self._from_dict(features, max_buffers)
        elif callable(getattr(features, "gather", None)) and not isinstance(getattr(features, "shape", None), tuple):
            self._from_store(features, max_buffers)
        else:
            raise TypeError(
                "a typed sampler needs typed features: a dict node type -> array or FeatureStore (None for a type "
                f"without features) or a HeteroFeatureStore, got {type(features).__name__}"
            )

    @property
    def pools(self) -> list:
        return list(self._pools.values())

    def _check_type(self, node_type) -> None:
        if node_type not in self.num_nodes:
            raise ValueError(
                f"features names node type {node_type!r}, which the sampler does not know; its node types: "
                f"{list(self.num_nodes)}"
            )

    def _check_rows(self, node_type, rows) -> None:
        if rows is not None and rows != self.num_nodes[node_type]:
            raise ValueError(
                f"features[{node_type!r}] has {rows} rows but the sampler's num_nodes[{node_type!r}] = "
                f"{self.num_nodes[node_type]}; they must match"
            )

    def _from_dict(self, features: dict, max_buffers: int) -> None:
        for node_type, table in features.items():
            self._check_type(node_type)
            if table is None:
                continue
            check_indexable(f"features[{node_type!r}]", table)
            self._check_rows(node_type, _rows_of(table))
            self._sources[node_type] = table
            pool = pool_for(table, max_buffers)
            if pool is not None:
                self._pools[node_type] = pool
            self._options[node_type] = trusted_ids(self.num_nodes[node_type], table)
        self.types = tuple(self._sources)

    def _from_store(self, store, max_buffers: int) -> None:
        shape, dtype = getattr(store, "shape", None), getattr(store, "dtype", None)
        shape = shape if isinstance(shape, dict) else None
        types = getattr(store, "feature_types", None)
        types = tuple(types) if types is not None else tuple(shape) if shape is not None else tuple(self.num_nodes)
        for node_type in types:
            self._check_type(node_type)
            if shape is not None and node_type in shape:
                self._check_rows(node_type, int(shape[node_type][0]))
        self._store, self.types = store, types
        accepts = _parameters(store.gather)
        if shape is not None and all(t in shape for t in types) and "check" in accepts:
            self._options = {"check": False}  # every row of every type is there
        host = getattr(getattr(store, "device", None), "xp", None) is np
        if max_buffers and host and "out" in accepts and shape is not None and isinstance(dtype, dict):
            for node_type in types:
                if node_type in shape and node_type in dtype and len(shape[node_type]) == 2:
                    self._pools[node_type] = BufferPool(shape[node_type][1], dtype[node_type], max_buffers)

    def gather(self, n_id: dict) -> dict:
        """``{type: rows of n_id[type]}`` for every type with features, in :attr:`types` order."""
        # an empty type takes no pooled buffer (its empty view would hold one for nothing)
        pools = {t: pool for t, pool in self._pools.items() if len(n_id[t])}
        if self._store is None:
            return {t: gather_rows(self._sources[t], n_id[t], pools.get(t), self._options[t]) for t in self.types}
        ids = {t: n_id[t] for t in self.types}
        if not self._pools:
            return self._store.gather(ids, **self._options)
        out = {t: pool.take(len(ids[t])) for t, pool in pools.items()}
        return self._store.gather(ids, out=out, **self._options)

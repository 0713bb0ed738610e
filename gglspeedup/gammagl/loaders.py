"""NodeNeighborLoader / LinkNeighborLoader: GammaGL's loaders over ``gammagl.data.Graph`` /
``HeteroGraph``, with gglspeedup sampling and GammaGL's own batch builder.

Each batch is built exactly as GammaGL builds it: the sampled ``(node, row, col, edge)``
(:mod:`._flat`) go to GammaGL's ``filter_graph`` / ``filter_hetero_graph``, which copy the graph
and slice every node attribute by ``node`` and every edge attribute by ``edge``; node batches then
carry ``batch_size`` (on the input node type for a ``HeteroGraph``), link batches
``edge_label_index`` (local positions) and ``edge_label``. Building one imports GammaGL.

Differences from GammaGL's, deliberate: hop ``h + 1`` samples every node sampled so far (seeds
included), gglspeedup's rule, where GammaGL expands only the nodes new at hop ``h``, so a node's
edges can come from more than one hop; ``directed=False`` (a ``Graph``) really adds every edge
between sampled nodes (GammaGL 0.5.0 ignores it); link negatives are independent uniform pairs
(GammaGL's repeat one random pair ``int(B * neg_sampling_ratio)`` times); shuffling and draws are
keyed by ``seed`` (runs replay exactly).

gglspeedup only: ``neighbor_sampler=`` takes a ready gglspeedup sampler (a service cluster's
``cluster.sampler(...)``, whose graph lives on its servers) and ``node_attrs=`` node attributes
gathered by id from any source (``cluster.features()``, ``cluster.labels``); the ``graph`` then
needs no edges or attributes of its own (``Graph(num_nodes=N)``), and the batches equal those of
the same loader over the whole graph.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import backends
from ..graph import CSRGraph
from ..loader import BaseLoader
from ..validation import check_bool, check_ids_in_range, int_array
from ._common import gammagl_device, host_array, loader_options, node_ids, ready_sampler_seed, sampler_fanouts
from ._flat import check_node_attrs, flat_hetero_sample, flat_sample, gather_node_attrs, induced_edges, link_queries
from ._tlx import require_gammagl

__all__ = ["NodeNeighborLoader", "LinkNeighborLoader"]


class _GraphLoader(BaseLoader):
    """What both loaders share: GammaGL's graph, our sampler over it, TensorLayerX conversion."""

    _COUNTERS = ("seeds",)

    def _build(self, owner, graph, num_neighbors, replace, directed, neighbor_sampler, kwargs, prefetch, seed, device):
        from ..heterograph import HeteroGraph as OurHeteroGraph
        from ..sampling import HeteroNeighborSampler
        from ..sampling import NeighborSampler as Sampler

        # checked before GammaGL is imported: bool("no") was True, so directed="no" sampled directed
        directed = check_bool("directed", directed)
        require_gammagl(owner)
        from gammagl.data import Graph, HeteroGraph

        options = loader_options(owner, kwargs)
        num_neighbors = sampler_fanouts(num_neighbors)  # [] (no hops): batches of the seeds alone
        self.graph, self.directed = graph, directed
        if neighbor_sampler is None:  # a given one has its own seed and device (ready_sampler_seed)
            seed, device = 0 if seed is None else seed, gammagl_device("cpu" if device is None else device)
        if not isinstance(graph, (Graph, HeteroGraph)):
            raise TypeError(f"{owner} needs a gammagl.data.Graph or HeteroGraph, got {type(graph).__name__}")
        self.is_hetero = isinstance(graph, HeteroGraph)
        self._given = neighbor_sampler is not None
        self._ours = None  # the local graph: the sampler's, or directed=False's induced edges
        if self.is_hetero:
            self.node_types, self.edge_types = graph.metadata()
            if not self.directed:
                raise NotImplementedError(f"{owner}: directed=False on a HeteroGraph is not supported")
        self._skeleton = False  # a given sampler and a graph without edges: n_id, e_id, edge_index set here
        if self._given:
            sampler = _given_sampler(owner, graph, neighbor_sampler, num_neighbors, self.is_hetero)
            seed = ready_sampler_seed(owner, sampler, seed, device)
            if check_bool("replace", replace) and not sampler.replace:  # False is the default: the sampler's own
                raise ValueError(
                    f"{owner}: replace=True, but the given sampler samples without replacement; a ready sampler "
                    "draws as it was built: build it with replace=True or leave replace out"
                )
            stores = [graph[et] for et in graph.metadata()[1]] if self.is_hetero else [graph]
            self._skeleton = all(getattr(store, "edge_index", None) is None for store in stores)
            if self.is_hetero:  # the graph's edges may be absent: the sampler's types
                self.node_types, self.edge_types = list(sampler.graph.node_types), list(sampler.graph.edge_types)
            elif not self.directed:
                if getattr(graph, "edge_index", None) is None:
                    raise NotImplementedError(
                        f"{owner}: directed=False with a given neighbor_sampler needs the graph's edge_index "
                        "(the edges between sampled nodes are read from it)"
                    )
                self._ours = CSRGraph.from_edge_index(_edge_index(graph), num_nodes=int(graph.num_nodes))
        elif self.is_hetero:
            relations = {et: _edge_index(graph[et], f"graph[{et!r}].edge_index") for et in self.edge_types}
            counts = {t: int(graph[t].num_nodes) for t in self.node_types}
            self._ours = OurHeteroGraph(relations, counts)
            sampler = HeteroNeighborSampler(self._ours, num_neighbors, replace=replace, seed=seed, device=device)
        else:
            self._ours = CSRGraph.from_edge_index(_edge_index(graph), num_nodes=int(graph.num_nodes))
            sampler = Sampler(self._ours, num_neighbors, replace=replace, seed=seed, device=device)
        self._setup(
            sampler,
            None,
            options["batch_size"],
            options["shuffle"],
            options["drop_last"],
            prefetch,
            None,  # converted here: GammaGL's batch builder wants TensorLayerX tensors
            seed,
            reuse_buffers=False,
            typed=True,  # no feature source: GammaGL's builder slices the graph's attributes
        )

    def _set_node_attrs(self, owner, node_attrs) -> None:
        counts = self.sampler.num_nodes
        counts = dict(counts) if self.is_hetero else int(counts)
        self._node_attrs = check_node_attrs(owner, node_attrs, self.node_types if self.is_hetero else None, counts)

    def _subgraph(self, out) -> tuple:
        """``(node, row, col, edge)`` as TensorLayerX tensors (dicts for a HeteroGraph), and the
        ``node_attrs`` rows of ``node`` (name -> tensor, or name -> node type -> tensor)."""
        if self.is_hetero:
            arrays = flat_hetero_sample(out, self.node_types, self.edge_types)
        else:
            arrays = flat_sample(out)
            if not self.directed:
                arrays = (arrays[0], *induced_edges(self._ours, arrays[0]))
        rows = gather_node_attrs(self._node_attrs, arrays[0])
        if self._skeleton:  # the ids GammaGL's slicing cannot give
            rows["n_id"] = arrays[0]
        return backends.to("tlx", arrays), backends.to("tlx", rows)

    def _with_node_attrs(self, batch, rows, row, col, edge):
        """``batch`` with the gathered ``node_attrs`` set on it (on each node type's store); with a
        given sampler and a ``graph`` without edges also ``n_id``, ``e_id`` and ``edge_index``."""
        import tensorlayerx as tlx

        if self._skeleton:
            if self.is_hetero:
                stores = [(batch[t], row[t], col[t], edge[t]) for t in self.edge_types]
            else:
                stores = [(batch, row, col, edge)]
            for store, source, target, ids in stores:
                store.edge_index, store.e_id = tlx.stack([source, target], axis=0), ids
        for name, value in rows.items():
            if self.is_hetero:
                for node_type, tensor in value.items():
                    setattr(batch[node_type], name, tensor)
            else:
                setattr(batch, name, value)
        return batch

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NodeNeighborLoader(_GraphLoader):
    """``gammagl.loader.NodeNeighborLoader`` with gglspeedup sampling.

    Parameters
    ----------
    graph : gammagl.data.Graph or HeteroGraph
    num_neighbors : list of int, or dict edge type -> list
        Neighbours per hop, seed hop first (``-1``: all); a list applies to every edge type.
        ``[]`` (or ``[]`` for every edge type), no hops, gives GammaGL's batches of the seeds
        alone, without edges.
    input_nodes_type : tensor, str or (str, tensor), optional
        GammaGL's seeds: ``None`` (every node), a bool mask or ids; for a ``HeteroGraph`` the node
        type or ``(node type, mask or ids)``.
    replace : bool
        Sample with replacement.
    directed : bool
        ``False`` adds every edge between sampled nodes (``Graph`` only).
    is_sorted : bool
        Accepted (GammaGL's hint that ``edge_index`` is sorted; nothing to sort here).
    neighbor_sampler : gglspeedup NeighborSampler / HeteroNeighborSampler, optional
        gglspeedup only: a ready sampler draws the batches instead of one built over ``graph``'s
        edges (e.g. a service cluster's ``cluster.sampler(...)``), with ``num_neighbors`` as its
        fanouts (``with_fanouts``) and its own ``seed``, ``replace`` and ``device`` (``seed=`` or
        ``device=`` other than the sampler's, or ``replace=True`` beside a sampler without
        replacement, raises ``ValueError``); ``graph``
        must have its node counts, and needs no edges. Given a ``graph`` without edges (no
        ``edge_index``: ``Graph(num_nodes=N)``), each batch carries ``edge_index`` and also ``n_id``
        (the sampled nodes' global ids, per node type) and ``e_id`` (each edge's id, per edge
        type), which GammaGL's slicing has nothing to take from. ``directed=False`` reads the edges
        between sampled nodes from ``graph``'s ``edge_index`` (``NotImplementedError`` without
        one). GammaGL's own sampler objects raise ``NotImplementedError``.
    batch_size, shuffle, drop_last
        TensorLayerX ``DataLoader`` options, as GammaGL's.
    node_attrs : dict, optional
        gglspeedup only: node attribute name -> a source of rows by node id (``source[ids]``: an
        array, a :class:`~gglspeedup.FeatureStore`, ``cluster.features()``, ``cluster.labels``);
        for a ``HeteroGraph`` name -> node type -> source. Each batch gets the rows of its nodes
        as that attribute, set after GammaGL's slicing (replacing a sliced one of the same name).
    prefetch, seed, device
        gglspeedup only: batches built ahead on a background thread; the key of shuffles and
        draws (``None``: 0, or a given sampler's own seed); where sampling runs (``-1``: the CPU;
        ``None``: the CPU, or a given sampler's own device).

    Yields ``Graph`` / ``HeteroGraph`` batches as GammaGL's: attributes sliced, ``edge_index`` local,
    ``batch_size`` the seed count (``batch[input_type].batch_size`` for a ``HeteroGraph``).
    """

    def __init__(
        self,
        graph,
        num_neighbors,
        input_nodes_type=None,
        replace: bool = False,
        directed: bool = True,
        is_sorted: bool = False,
        neighbor_sampler=None,
        *,
        node_attrs=None,
        prefetch: int = 0,
        seed: int | None = None,
        device=None,
        **kwargs,
    ):
        owner = type(self).__name__
        self._build(owner, graph, num_neighbors, replace, directed, neighbor_sampler, kwargs, prefetch, seed, device)
        self._set_node_attrs(owner, node_attrs)
        counts = dict(self.sampler.num_nodes) if self.is_hetero else None
        num_nodes = int(graph.num_nodes) if counts is None else 0
        self.input_type, self._seeds = _input_nodes(input_nodes_type, num_nodes, counts)
        self._num_items = len(self._seeds)

    def _items_in_order(self, permutation):
        return self._seeds if permutation is None else self._seeds[permutation]

    def _make_batch(self, epoch: int, index: int, seeds):
        from gammagl.loader.utils import filter_graph, filter_hetero_graph

        start = time.perf_counter()
        key = self._key(epoch, index)
        out = self.sampler.sample({self.input_type: seeds} if self.is_hetero else seeds, key=key)
        sampled = time.perf_counter()
        (node, row, col, edge), rows = self._subgraph(out)
        if self.is_hetero:
            batch = filter_hetero_graph(self.graph, node, row, col, edge, {})
            batch[self.input_type].batch_size = len(seeds)
        else:
            batch = filter_graph(self.graph, node, row, col, edge, None)
            batch.batch = None
            batch.batch_size = len(seeds)
        self._timed(start, sampled, sampled, seeds=len(seeds))
        return self._with_node_attrs(batch, rows, row, col, edge)


class LinkNeighborLoader(_GraphLoader):
    """``gammagl.loader.LinkNeighborLoader`` with gglspeedup sampling (a ``Graph``).

    Parameters
    ----------
    graph : gammagl.data.Graph
        A ``HeteroGraph`` raises ``NotImplementedError`` (GammaGL 0.5.0 samples links of a
        ``Graph`` only).
    num_neighbors : list of int
        As :class:`NodeNeighborLoader`'s (``[]``: the endpoints alone).
    edge_label_index : tensor (2, E), optional
        The pairs to iterate (default: the graph's edges).
    edge_label : tensor (E, ...), optional
        Their labels (default: zeros, float32).
    replace, directed, is_sorted, neighbor_sampler, node_attrs
        As :class:`NodeNeighborLoader`.
    neg_sampling_ratio : float
        ``int(B * ratio)`` uniform negative pairs per batch of ``B``; the positives' labels then
        become ``edge_label + 1`` and the negatives' 0 (GammaGL's rule).
    batch_size, shuffle, drop_last, prefetch, seed, device
        As :class:`NodeNeighborLoader`.

    Yields ``Graph`` batches as GammaGL's: the endpoints' neighbourhood sliced from the graph,
    ``edge_label_index`` (local positions, (2, B')) and ``edge_label``. The endpoints are the
    batch's seeds, in ascending id order.
    """

    def __init__(
        self,
        graph,
        num_neighbors,
        edge_label_index=None,
        edge_label=None,
        replace: bool = False,
        directed: bool = True,
        neg_sampling_ratio: float = 0.0,
        neighbor_sampler=None,
        is_sorted: bool = False,
        *,
        node_attrs=None,
        prefetch: int = 0,
        seed: int | None = None,
        device=None,
        **kwargs,
    ):
        owner = type(self).__name__
        self._build(owner, graph, num_neighbors, replace, directed, neighbor_sampler, kwargs, prefetch, seed, device)
        if self.is_hetero:
            raise NotImplementedError(
                f"{owner} over a HeteroGraph is not supported (GammaGL 0.5.0 has none either); "
                "use gglspeedup.LinkLoader(HeteroNeighborSampler(...), ..., edge_type=...)"
            )
        self._set_node_attrs(owner, node_attrs)
        num_nodes = int(self.sampler.num_nodes)
        self._pairs = _edge_index(graph) if edge_label_index is None else _label_pairs(edge_label_index, num_nodes)
        if edge_label is None:
            self._labels = np.zeros(self._pairs.shape[1], dtype=np.float32)
        else:
            self._labels = host_array("edge_label", edge_label)
            if self._labels.shape[:1] != (self._pairs.shape[1],):
                raise ValueError(
                    f"edge_label must have one entry per pair ({self._pairs.shape[1]}), got shape {self._labels.shape}"
                )
        self.neg_sampling_ratio = _check_ratio(neg_sampling_ratio)
        self._num_items = self._pairs.shape[1]

    def _items_in_order(self, permutation):
        positions = np.arange(self._num_items, dtype=np.int64)
        return positions if permutation is None else positions[permutation]

    def _make_batch(self, epoch: int, index: int, positions):
        from gammagl.loader.utils import filter_graph

        start = time.perf_counter()
        key = self._key(epoch, index)
        rng = np.random.default_rng([self.seed, key])  # the negatives of batch `key`
        seeds, edge_label_index, edge_label = link_queries(
            self._pairs[:, positions], self._labels[positions], self.neg_sampling_ratio, self.sampler.num_nodes, rng
        )
        out = self.sampler.sample(seeds, key=key)
        sampled = time.perf_counter()
        (node, row, col, edge), rows = self._subgraph(out)
        batch = filter_graph(self.graph, node, row, col, edge, None)
        batch.edge_label_index, batch.edge_label = backends.to("tlx", (edge_label_index, edge_label))
        self._timed(start, sampled, sampled, seeds=len(seeds))
        return self._with_node_attrs(batch, rows, row, col, edge)


def _label_pairs(edge_label_index, num_nodes: int | None = None) -> np.ndarray:
    """``edge_label_index`` as a host int64 (2, E) array (checked as :func:`~gglspeedup.validation.int_array`
    checks ids): float or bool ids raise ``TypeError``, as ids do everywhere here (a float tensor
    raised ``ValueError``), another shape ``ValueError``; with ``num_nodes``, an id outside
    ``[0, num_nodes)`` ``IndexError`` naming it (the sampler named "seeds", on the first batch)."""
    pairs = int_array(
        "edge_label_index",
        host_array("edge_label_index", edge_label_index),
        ndim=2,
        expected="must hold integer node ids",
    )
    if pairs.shape[0] != 2:
        raise ValueError(f"edge_label_index must be an integer (2, E) tensor, got shape {pairs.shape}")
    if num_nodes is not None:
        for side in (0, 1):
            check_ids_in_range(f"edge_label_index[{side}]", pairs[side], num_nodes, what="num_nodes")
    return pairs


def _check_ratio(value) -> float:
    """``neg_sampling_ratio`` as a float: a finite number >= 0. ``inf`` passed a ``>= 0`` check and
    raised OverflowError in ``int(B * ratio)`` on the first batch; a string or ``None`` raised
    ``float()``'s unnamed error."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError(f"neg_sampling_ratio must be a number, got {value!r}")
    try:
        ratio = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"neg_sampling_ratio must be a number, got {value!r}") from None
    if not (math.isfinite(ratio) and ratio >= 0.0):
        raise ValueError(f"neg_sampling_ratio must be a finite number >= 0, got {value!r}")
    return ratio


def _edge_index(store, name: str = "edge_index") -> np.ndarray:
    """A GammaGL graph's (or edge store's) ``edge_index`` as a host (2, E) int64 array: float or
    bool ids raise ``TypeError`` (``astype`` truncated ``[[0.7], [1.9]]`` to the edge 0 -> 1)."""
    edge_index = getattr(store, "edge_index", None)
    if edge_index is None:
        return np.empty((2, 0), dtype=np.int64)
    return int_array(name, host_array(name, edge_index), ndim=2)


def _input_nodes(value, num_nodes: int, node_counts: dict | None = None) -> tuple:
    """GammaGL's ``input_nodes_type`` as ``(input node type or None, int64 seed ids)``, checked here
    (GammaGL's ``get_input_nodes_index`` read a NumPy bool mask as the ids 0 and 1, truncated float
    ids, took a mask of the wrong length, and failed on a list or an unknown node type with an
    unnamed ``AttributeError`` / ``TypeError``).

    A ``Graph`` (``node_counts`` None, ``num_nodes`` nodes): ``None`` (every node), a bool mask or
    integer ids, as ``NeighborSampler``'s ``node_idx``. A ``HeteroGraph`` (``node_counts``: node
    type -> count): a node type, or ``(node type, None / mask / ids)``.
    """
    if node_counts is None:
        return None, node_ids("input_nodes_type", value, num_nodes)
    if isinstance(value, str):
        node_type, ids = value, None
    elif isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], str):
        node_type, ids = value
    else:
        raise TypeError(
            "input_nodes_type over a HeteroGraph must be a node type or (node type, mask or ids), "
            f"got {type(value).__name__}"
        )
    if node_type not in node_counts:
        raise ValueError(f"input_nodes_type names node type {node_type!r}; the graph's are {sorted(node_counts)}")
    return node_type, node_ids(f"input_nodes_type[{node_type!r}]", ids, node_counts[node_type])


def _given_sampler(owner: str, graph, sampler, num_neighbors, hetero: bool):
    """``sampler`` (a gglspeedup sampler of ``graph``'s kind and node counts) drawing ``num_neighbors``."""
    from ..sampling import HeteroNeighborSampler, NeighborSampler

    kind = HeteroNeighborSampler if hetero else NeighborSampler
    if not isinstance(sampler, kind):
        raise NotImplementedError(
            f"{owner}: neighbor_sampler must be None or a gglspeedup {kind.__name__} (e.g. a service cluster's "
            f"cluster.sampler(...)) for a {'HeteroGraph' if hetero else 'Graph'}, got {type(sampler).__name__}"
        )
    if hetero:
        counts = {t: int(graph[t].num_nodes) for t in graph.metadata()[0]}
        expected = {t: int(n) for t, n in sampler.num_nodes.items()}
    else:
        counts, expected = int(graph.num_nodes), int(sampler.num_nodes)
    if counts != expected:
        raise ValueError(f"{owner}: graph has {counts} nodes, neighbor_sampler's graph {expected}; they must agree")
    return sampler.with_fanouts(num_neighbors)

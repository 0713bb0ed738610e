"""Sampler: gglspeedup's neighbour samplers behind PyG's ``torch_geometric.sampler.BaseSampler``.

``sample_from_nodes`` / ``sample_from_edges`` return PyG's ``SamplerOutput`` /
``HeteroSamplerOutput`` filled as PyG's own ``NeighborSampler`` fills them (see
:mod:`gglspeedup.pyg.outputs`), so PyG's ``NodeLoader`` / ``LinkLoader``, ``filter_data``,
``trim_to_layer`` and ``to_hetero`` models run unchanged. What is sampled follows PyG's rule
(``expand="new"``): hop ``h + 1`` draws neighbours only of the nodes first reached at hop ``h``,
so no edge comes twice and ``num_sampled_nodes`` / ``num_sampled_edges`` are hop-ordered as PyG's;
a draw depends only on ``(seed, batch key, hop, node)``, identical on every device. PyG's
``subgraph_type`` (``"bidirectional"``: every sampled edge with its reverse, PyG's own
``to_bidirectional``; ``"induced"``: every edge among the sampled nodes) and
``sample_direction="backward"`` (along out-edges) are applied here.
"""

from __future__ import annotations

import math
import threading

import torch
from torch_geometric.sampler import BaseSampler, EdgeSamplerInput, NegativeSampling, NodeSamplerInput
from torch_geometric.sampler.base import NumNeighbors

from ..heterograph import HeteroGraph
from ..sampling import HeteroNeighborSampler, NeighborSampler
from ..validation import check_bool, check_fanouts
from .graphs import NO_EDGES, forward_name, graph_of, with_empty_relation
from .outputs import binary_labels, hetero_sampler_output, link_metadata, pair_batch, sampler_output
from .subgraphs import SUBGRAPH_TYPES, finish_output, weighted_negatives
from .times import times_of

__all__ = ["Sampler", "graph_of"]  # graph_of: from .graphs, kept here for callers

_EXCLUDES = (None, "self", "reverse")


class Sampler(BaseSampler):
    """PyG's ``BaseSampler`` over :class:`~gglspeedup.NeighborSampler` (untyped graphs) or
    :class:`~gglspeedup.HeteroNeighborSampler` (typed graphs).

    Parameters
    ----------
    data
        What to sample from: a ``(FeatureStore, GraphStore)`` pair (any PyG stores; ours hand over
        their graph as is), a :class:`~gglspeedup.pyg.GraphStore`, a ``Data`` / ``HeteroData`` (no
        edges is fine), a :class:`~gglspeedup.CSRGraph` / :class:`~gglspeedup.HeteroGraph`, or a
        ready ``NeighborSampler`` / ``HeteroNeighborSampler`` (then ``num_neighbors`` may be left
        out; it is used with ``expand`` set to this sampler's).
    num_neighbors : list of int, dict edge type -> list, or PyG's ``NumNeighbors``
        Neighbours per hop, seed hop first (``-1``: all). A dict must cover every edge type unless
        a ``NumNeighbors(values, default=...)`` gives the rest (PyG's rule).
    replace, weighted, seed, device, placement
        As :class:`~gglspeedup.NeighborSampler`; ``device="cuda"`` samples on the GPU and returns
        CUDA tensors.
    exclude : {None, "self", "reverse"}
        Link batches only: ``None`` (PyG's behaviour) keeps every edge; ``"self"`` removes the
        positive pairs' own edges ``source -> target`` from every sampled hop, ``"reverse"`` also
        ``target -> source`` (see :meth:`gglspeedup.NeighborSampler.sample_links`); with
        ``sample_direction="backward"`` only ``"reverse"`` (or ``None``).
    reverse_edge_types : dict edge type -> edge type, optional
        Typed graphs with ``exclude="reverse"``: the relation holding each edge type's reverse
        edges. By default ``(dst, "rev_" + name, src)`` (PyG's ``ToUndirected``), else the one
        relation from ``dst`` to ``src``.
    strict_negatives : bool
        Redraw negatives that are graph edges (PyG draws them approximately, keeping such edges).
    subgraph_type : {"directional", "bidirectional", "induced"}
        PyG's: the sampled edges as drawn; with each one's reverse among the sampled nodes too
        (``num_sampled_*`` then ``None``, as PyG); every edge between sampled nodes (not with
        ``disjoint`` or times: ``ValueError``, as PyG).
    sample_direction : {"forward", "backward"}
        ``"backward"`` samples along out-edges (PyG's option): over the transposed graph, with
        each edge reported ``source -> target`` as stored.
    weight_attr : str, optional
        Edge weights for weighted sampling: an edge attribute of the ``Data`` / ``HeteroData``
        (implies ``weighted``; a ``HeteroData``'s edge types without it are drawn uniformly, as
        pyg-lib draws them). A store pair raises ``NotImplementedError`` as in PyG; its graph
        samples weighted with ``weighted=True`` when it was built from a weighted graph.
    expand : {"new", "all"}
        ``"new"`` is PyG's hop rule (the default here); ``"all"`` gglspeedup's layer blocks.
    disjoint : bool
        PyG's: every seed (every endpoint of a link batch) grows its own subgraph and
        ``SamplerOutput.batch`` says whose each node is (link batches: the pair, PyG's
        ``batch % num_pos``).
    time_attr : str, optional
        PyG's temporal sampling (implies ``disjoint``): the node or edge times of ``data`` under
        that name (:mod:`gglspeedup.pyg.times`); seeds at ``input_time`` (``NodeSamplerInput.time``,
        ``EdgeSamplerInput.time``) or, with node times, at their own.
    node_time, edge_time
        The times themselves, as :class:`~gglspeedup.NeighborSampler` takes them (for data without
        attributes: a gglspeedup graph).
    temporal_strategy : {"uniform", "last"}
        With times (ignored without, as PyG).

    Notes
    -----
    Batch keys: each call uses the next key (0, 1, 2, ...). gglspeedup.pyg's loaders number each
    epoch's batches on from the last (:meth:`start_epoch`), so batch ``i`` of an epoch gets the same
    key with or without ``num_workers``, persistent or not (worker ``w`` of ``W`` takes batches
    ``w, w + W, ...`` of every epoch). A
    plain PyG loader with ``num_workers > 0`` restarts its workers every epoch; their keys then also
    carry the epoch's base seed (``torch.manual_seed`` makes it reproducible). ``batch`` is filled
    for disjoint (and temporal) samplers, ``None`` otherwise. Negatives are
    uniform, or drawn from ``NegativeSampling``'s ``src_weight`` / ``dst_weight`` (keyed by the
    sampler's seed and the batch key); binary negatives number ``ceil(amount * num_pos)``, as
    PyG's, so a fractional ``amount`` samples no seeds PyG would not.
    """

    def __init__(
        self,
        data,
        num_neighbors=None,
        *,
        replace=False,
        weighted=False,
        seed=0,
        device="cpu",
        placement="auto",
        exclude=None,
        reverse_edge_types=None,
        strict_negatives=False,
        subgraph_type="directional",
        sample_direction="forward",
        weight_attr=None,
        expand="new",
        disjoint=False,
        time_attr=None,
        node_time=None,
        edge_time=None,
        temporal_strategy="uniform",
    ):
        if exclude not in _EXCLUDES:
            raise ValueError(f"exclude must be one of {_EXCLUDES}, got {exclude!r}")
        subgraph_type = str(getattr(subgraph_type, "value", subgraph_type))
        if subgraph_type not in SUBGRAPH_TYPES:
            raise ValueError(f"subgraph_type must be one of {SUBGRAPH_TYPES}, got {subgraph_type!r}")
        if sample_direction not in ("forward", "backward"):
            raise ValueError(f"sample_direction must be 'forward' or 'backward', got {sample_direction!r}")
        self.subgraph_type, self.backward = subgraph_type, sample_direction == "backward"
        if self.backward and exclude == "self":  # over the transposed graph it would keep out target -> source
            raise NotImplementedError(
                "exclude='self' with sample_direction='backward': use exclude='reverse' (keeps out both directions)"
            )
        # PyG takes num_neighbors=[] (the seeds alone): one hop drawing nothing, then left out.
        self.zero_hops = _no_hops(num_neighbors)
        if self.zero_hops:
            num_neighbors = [0]
        if isinstance(data, (NeighborSampler, HeteroNeighborSampler)):
            if self.backward or weight_attr is not None:
                raise ValueError("sample_direction='backward' and weight_attr need data, not a ready sampler")
            fanouts = None if num_neighbors is None else _fanouts(num_neighbors, data.graph)
            self.sampler = data.with_fanouts(data.fanouts if fanouts is None else fanouts)
            self.sampler.expand = expand if expand in ("new", "all") else _bad_expand(expand)
            self.sampler.disjoint = self.sampler.disjoint or check_bool("disjoint", disjoint)
            self._times = None  # the ready sampler's own
        else:
            if num_neighbors is None:
                raise TypeError("num_neighbors is required unless data is a ready gglspeedup sampler")
            graph = graph_of(data, weight_attr, self.backward)
            if time_attr is not None:
                if self.backward:
                    raise NotImplementedError("Temporal Sampling not yet supported for backward sampling")
                node_time, edge_time = times_of(data, time_attr, isinstance(graph, HeteroGraph))
            timed = node_time is not None or edge_time is not None
            kind = HeteroNeighborSampler if isinstance(graph, HeteroGraph) else NeighborSampler
            self.sampler = kind(
                graph,
                _fanouts(num_neighbors, graph),
                replace=replace,
                weighted=check_bool("weighted", weighted) or weight_attr is not None,
                seed=seed,
                device=device,
                placement=placement,
                expand=expand,
                disjoint=disjoint,
                node_time=node_time,
                edge_time=edge_time,
                temporal_strategy=temporal_strategy if timed else "uniform",
            )
            self._times = {"node_time": node_time, "edge_time": edge_time}
        _check_induced(self.subgraph_type, self.sampler.disjoint)
        self.exclude = exclude
        self.reverse_edge_types = dict(reverse_edge_types or {})
        self.strict_negatives = check_bool("strict_negatives", strict_negatives)
        self._base = self._count = self._span = self._epochs = 0
        self._lock = threading.Lock()
        self._with_edge_type: dict = {}  # edge type the graph lacks -> sampler over graph + it, empty

    @property
    def is_hetero(self) -> bool:
        return isinstance(self.sampler, HeteroNeighborSampler)

    @property
    def num_nodes(self):
        """Node count, or node type -> count."""
        return self.sampler.num_nodes

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self, 'sampler', None)!r}, exclude={getattr(self, 'exclude', None)!r})"

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_lock"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def start_epoch(self, num_batches: int) -> None:
        """Give the next ``num_batches`` calls the keys ``base .. base + num_batches - 1``, in order
        of the loader's batches, whether they run in this process or in ``num_workers`` workers
        forked after this call (gglspeedup.pyg's loaders call it as an epoch starts); persistent
        workers, forked in an earlier epoch, count this epoch's batches on from the ``num_batches``
        of the epoch they were forked in."""
        with self._lock:
            self._base += max(self._count, self._span)  # past every key this process or its workers used
            self._span, self._count, self._epochs = int(num_batches), 0, self._epochs + 1

    def next_key(self) -> int:
        """The batch key of the next call (and advance the count)."""
        with self._lock:
            count, self._count = self._count, self._count + 1
        info = torch.utils.data.get_worker_info()
        if info is None:
            return self._base + count
        epoch, mine = 0, len(range(info.id, self._span, info.num_workers))  # this worker's batches per epoch
        if self._epochs and mine:  # persistent workers keep counting past the epoch they were forked in
            epoch, count = divmod(count, mine)
        key = self._base + epoch * self._span + count * info.num_workers + info.id  # batch i: worker i % W
        if self._epochs == 0:  # a plain PyG loader: fresh workers restart from the parent's count each epoch
            key += ((info.seed - info.id) & 0xFFFFFFFF) << 32  # so this epoch's (random) base seed tells them apart
        return key

    # ------------------------------------------------------------------ PyG's BaseSampler API
    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs):
        """Sample the neighbourhood of ``index.node`` (of ``index.input_type`` for typed graphs), at
        ``index.time`` for a temporal sampler; ``metadata`` is ``(input_id, time)`` as PyG's."""
        key = self.next_key()
        metadata = (index.input_id, index.time)
        time = index.time if self.sampler.temporal else None  # PyG ignores seed times without time_attr
        if index.input_type is None:
            if self.is_hetero:
                raise ValueError("a typed graph needs typed seeds: input_nodes=(node_type, ids)")
            out = sampler_output(self.sampler.sample(index.node, key=key, seed_time=time), metadata)
        else:
            if not self.is_hetero:
                raise ValueError(f"seeds of node type {index.input_type!r} given to an untyped graph's sampler")
            seed_time = None if time is None else {index.input_type: time}
            sampled = self.sampler.sample({index.input_type: index.node}, key=key, seed_time=seed_time)
            out = hetero_sampler_output(sampled, metadata)
        return finish_output(self, out)

    def sample_from_edges(self, index: EdgeSamplerInput, neg_sampling=None):
        """Sample the neighbourhood of the pairs ``(index.row, index.col)`` and their negatives.

        ``metadata`` is PyG's: ``(input_id, edge_label_index, edge_label, edge_label_time)`` without
        negatives or with binary ones (local pair positions, positives then negatives; labels the
        given ones or ones, then zeros), ``(input_id, src_index, dst_pos_index, dst_neg_index,
        seed_time)`` for triplets (``dst_neg_index`` of shape (B, amount), squeezed when amount
        is 1). Disjoint: every endpoint its own subgraph, seeds in PyG's order (sources, targets,
        then triplet negatives draw by draw) and ``batch`` the pair of each node (PyG's
        ``batch % num_pos``); ``index.time`` the pairs' times for a temporal sampler.
        """
        neg = NegativeSampling.cast(neg_sampling)
        time = index.time if self.sampler.temporal else None
        num_pos = int(index.row.numel())
        if tuple(index.row.shape) != tuple(index.col.shape):
            raise ValueError(
                f"the pairs' sources and targets differ in shape: row {tuple(index.row.shape)}, col "
                f"{tuple(index.col.shape)}"
            )
        mode, per_pair, num_neg = None, 1, 0
        if neg is not None:
            num_neg = math.ceil(num_pos * neg.amount)
            mode = "binary" if neg.is_binary() else "triplet"
            per_pair = math.ceil(neg.amount)
        pairs = torch.stack([index.row, index.col])
        key = self.next_key()
        options = dict(strict_negatives=self.strict_negatives, exclude=self.exclude, key=key, pair_time=time)
        sampler, edge_type = self.sampler, None
        if index.input_type is not None:
            if not self.is_hetero:
                raise ValueError(f"pairs of edge type {index.input_type!r} given to an untyped graph's sampler")
            edge_type = tuple(index.input_type)
            if self.backward:
                raise NotImplementedError("sample_direction='backward' link batches on a typed graph")
            sampler = self._sampler_with(edge_type)
            options.update(edge_type=edge_type, reverse_edge_type=self._reverse(edge_type))
        elif self.is_hetero:
            raise ValueError("a typed graph needs typed pairs: edge_label_index=(edge_type, pairs)")
        weighted = neg is not None and (neg.src_weight is not None or neg.dst_weight is not None)
        if weighted:  # drawn here, then sampled as extra pairs
            out, negative_targets = weighted_negatives(self, sampler, pairs, neg, mode, per_pair, num_neg, options)
        else:
            if mode == "binary" and num_neg:  # PyG's count: ceil(amount * num_pos), not ceil(amount) per pair
                options.update(total_negatives=num_neg)
            out = sampler.sample_links(pairs, negatives=mode, num_negatives=per_pair, **options)
            negative_targets = out.negative_targets
        result = hetero_sampler_output(out) if edge_type is not None else sampler_output(out)
        if result.batch is not None:
            result.batch = pair_batch(out, edge_type, num_pos, sampler.graph)
        if mode == "binary":
            edge_label, num_pairs = binary_labels(index.label, num_pos, num_neg), num_pos + num_neg
        else:
            edge_label, num_pairs = index.label, num_pos
        label_time = index.time
        if label_time is not None and mode == "binary":  # PyG's times of the negatives: pair j % num_pos's
            label_time = label_time.repeat(1 + math.ceil(neg.amount))[:num_pairs]
        result.metadata = link_metadata(
            index.input_id, out.pair_index, negative_targets, num_pairs, edge_label, mode == "triplet", label_time
        )
        return finish_output(self, result)

    def _sampler_with(self, edge_type):
        """The sampler for link batches of ``edge_type``: ours, or (an edge type the graph lacks,
        e.g. held-out links) one over the graph plus that edge type without edges."""
        graph = self.sampler.graph
        if edge_type in graph.edge_types:
            return self.sampler
        if edge_type not in self._with_edge_type:
            sampler = self.sampler
            wider = with_empty_relation(graph.to("cpu"), edge_type)
            fanouts = {et: sampler.fanouts.get(et, [0] * sampler.num_hops) for et in wider.edge_types}
            times = self._times or {}
            if sampler.temporal and not any(v is not None for v in times.values()):
                raise NotImplementedError(
                    f"link batches of edge type {edge_type!r}, which the graph lacks, on a ready temporal sampler"
                )
            self._with_edge_type[edge_type] = HeteroNeighborSampler(
                wider,
                fanouts,
                replace=sampler.replace,
                weighted=sampler.weighted,
                seed=sampler.seed,
                device=sampler.device,
                placement=sampler.placement,
                expand=sampler.expand,
                disjoint=sampler.disjoint,
                node_time=times.get("node_time"),
                edge_time=times.get("edge_time"),
                temporal_strategy=sampler.timeline.strategy if sampler.temporal else "uniform",
            )
        return self._with_edge_type[edge_type]

    def _reverse(self, edge_type):
        """The relation holding ``edge_type``'s reverse edges (``exclude="reverse"`` only)."""
        if self.exclude != "reverse":
            return None
        if edge_type in self.reverse_edge_types:
            return tuple(self.reverse_edge_types[edge_type])
        src, name, dst = edge_type
        if src == dst:
            return None  # the relation itself holds both directions
        edge_types = [et for et in self.sampler.graph.edge_types if et[1] != NO_EDGES]
        if (dst, f"rev_{name}", src) in edge_types:
            return (dst, f"rev_{name}", src)
        backwards = [et for et in edge_types if et[0] == dst and et[2] == src]
        if len(backwards) == 1:
            return backwards[0]
        raise ValueError(
            f"exclude='reverse' on {edge_type!r}: cannot tell which relation from {dst!r} to {src!r} holds the "
            f"reverse edges (candidates: {backwards}); pass reverse_edge_types={{{edge_type!r}: ...}}"
        )


def _fanouts(num_neighbors, graph):
    """``num_neighbors`` (a list, a dict, PyG's ``NumNeighbors``) as our samplers take it."""
    if isinstance(graph, HeteroGraph) and (isinstance(num_neighbors, (dict, NumNeighbors))):
        if not isinstance(num_neighbors, NumNeighbors):
            num_neighbors = NumNeighbors(num_neighbors)
        # Keyed as the user names the relations: a backward sampler's graph renames each one
        # (reverse_name), which PyG's NumNeighbors cannot key (it splits edge types at '__').
        edge_types = list(graph.edge_types)
        names = [forward_name(edge_type) for edge_type in edge_types]
        values = NumNeighbors(num_neighbors.values, num_neighbors.default).get_values(names)
        return {edge_type: values[name] for edge_type, name in zip(edge_types, names)}
    if isinstance(num_neighbors, NumNeighbors):
        if isinstance(num_neighbors.values, dict):
            raise ValueError("num_neighbors per edge type needs a typed graph")
        return check_fanouts(list(num_neighbors.values), name="num_neighbors")
    if isinstance(num_neighbors, dict):
        raise ValueError("num_neighbors per edge type needs a typed graph")
    return check_fanouts(num_neighbors, name="num_neighbors")  # errors name PyG's argument, not ours


def _no_hops(num_neighbors) -> bool:
    values = num_neighbors.values if isinstance(num_neighbors, NumNeighbors) else num_neighbors
    return isinstance(values, (list, tuple)) and len(values) == 0


def _check_induced(subgraph_type: str, disjoint: bool) -> None:
    """PyG refuses disjoint (and so temporal) sampling of induced subgraphs: every edge among the
    sampled nodes would join the trees, and a node reached by several trees would get its edges in
    the first one only."""
    if subgraph_type == "induced" and disjoint:
        raise ValueError(
            "subgraph_type='induced' (directed=False) does not go with disjoint or temporal sampling (as in PyG): "
            "each tree's edges would be mixed with the others'"
        )


def _bad_expand(expand):
    raise ValueError(f"expand must be one of ('new', 'all'), got {expand!r}")

"""Sampler: gglspeedup's neighbour samplers behind PyG's ``torch_geometric.sampler.BaseSampler``.

``sample_from_nodes`` / ``sample_from_edges`` return PyG's ``SamplerOutput`` /
``HeteroSamplerOutput`` filled as PyG's own ``NeighborSampler`` fills them (see
:mod:`gglspeedup.pyg.outputs`), so PyG's ``NodeLoader`` / ``LinkLoader``, ``filter_data``,
``trim_to_layer`` and ``to_hetero`` models run unchanged. Two differences in what is sampled, both
gglspeedup's contract (docs/DESIGN.md, "Sampling"): hop ``h + 1`` draws neighbours of *every* node
sampled so far (seeds included), not only of the nodes new at hop ``h``, so a seed's edges come
from every hop; and a draw depends only on ``(seed, batch key, hop, node)``, identical on every
device.
"""

from __future__ import annotations

import math
import threading

import torch
from torch_geometric.sampler import BaseSampler, EdgeSamplerInput, NegativeSampling, NodeSamplerInput
from torch_geometric.sampler.base import NumNeighbors

from ..graph import CSRGraph
from ..heterograph import HeteroGraph
from ..sampling import HeteroNeighborSampler, NeighborSampler
from .outputs import binary_labels, hetero_sampler_output, link_metadata, sampler_output

__all__ = ["Sampler", "graph_of"]

_EXCLUDES = (None, "self", "reverse")


class Sampler(BaseSampler):
    """PyG's ``BaseSampler`` over :class:`~gglspeedup.NeighborSampler` (untyped graphs) or
    :class:`~gglspeedup.HeteroNeighborSampler` (typed graphs).

    Parameters
    ----------
    data
        What to sample from: a ``(FeatureStore, GraphStore)`` pair (any PyG stores; ours hand over
        their graph as is), a :class:`~gglspeedup.pyg.GraphStore`, a ``Data`` / ``HeteroData``, a
        :class:`~gglspeedup.CSRGraph` / :class:`~gglspeedup.HeteroGraph`, or a ready
        ``NeighborSampler`` / ``HeteroNeighborSampler`` (then ``num_neighbors`` may be left out).
    num_neighbors : list of int, dict edge type -> list, or PyG's ``NumNeighbors``
        Neighbours per hop, seed hop first (``-1``: all). A dict must cover every edge type unless
        a ``NumNeighbors(values, default=...)`` gives the rest (PyG's rule).
    replace, weighted, seed, device, placement
        As :class:`~gglspeedup.NeighborSampler`; ``device="cuda"`` samples on the GPU and returns
        CUDA tensors.
    exclude : {None, "self", "reverse"}
        Link batches only: ``None`` (PyG's behaviour) keeps every edge; ``"self"`` removes the
        positive pairs' own edges ``source -> target`` from every sampled hop, ``"reverse"`` also
        ``target -> source`` (see :meth:`gglspeedup.NeighborSampler.sample_links`).
    reverse_edge_types : dict edge type -> edge type, optional
        Typed graphs with ``exclude="reverse"``: the relation holding each edge type's reverse
        edges. By default ``(dst, "rev_" + name, src)`` (PyG's ``ToUndirected``), else the one
        relation from ``dst`` to ``src``.
    strict_negatives : bool
        Redraw negatives that are graph edges (PyG draws them approximately, keeping such edges).

    Notes
    -----
    Batch keys: each call uses the next key (0, 1, 2, ...). gglspeedup.pyg's loaders number each
    epoch's batches on from the last (:meth:`start_epoch`), so batch ``i`` of an epoch gets the same
    key with or without ``num_workers`` (worker ``w`` of ``W`` takes batches ``w, w + W, ...``). A
    plain PyG loader with ``num_workers > 0`` restarts its workers every epoch; their keys then also
    carry the epoch's base seed (``torch.manual_seed`` makes it reproducible). ``batch`` is ``None``
    (``disjoint`` sampling is not supported), and temporal sampling is not supported. Negative
    sampling is uniform (``NegativeSampling`` weights are not supported); binary negatives with a
    fractional ``amount`` draw ``ceil(amount)`` per pair and return the first
    ``ceil(amount * num_pos)``, as PyG does.
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
    ):
        if exclude not in _EXCLUDES:
            raise ValueError(f"exclude must be one of {_EXCLUDES}, got {exclude!r}")
        if isinstance(data, (NeighborSampler, HeteroNeighborSampler)):
            self.sampler = data if num_neighbors is None else data.with_fanouts(_fanouts(num_neighbors, data.graph))
        else:
            if num_neighbors is None:
                raise TypeError("num_neighbors is required unless data is a ready gglspeedup sampler")
            graph = graph_of(data)
            kind = HeteroNeighborSampler if isinstance(graph, HeteroGraph) else NeighborSampler
            self.sampler = kind(
                graph,
                _fanouts(num_neighbors, graph),
                replace=replace,
                weighted=weighted,
                seed=seed,
                device=device,
                placement=placement,
            )
        self.exclude = exclude
        self.reverse_edge_types = dict(reverse_edge_types or {})
        self.strict_negatives = bool(strict_negatives)
        self._base = self._count = self._span = self._epochs = 0
        self._lock = threading.Lock()

    @property
    def is_hetero(self) -> bool:
        return isinstance(self.sampler, HeteroNeighborSampler)

    @property
    def num_nodes(self):
        """Node count, or node type -> count."""
        return self.sampler.num_nodes

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sampler!r}, exclude={self.exclude!r})"

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
        forked after this call (gglspeedup.pyg's loaders call it as an epoch starts)."""
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
        key = self._base + count * info.num_workers + info.id  # batch i goes to worker i % num_workers
        if self._epochs == 0:  # a plain PyG loader: fresh workers restart from the parent's count each epoch
            key += ((info.seed - info.id) & 0xFFFFFFFF) << 32  # so this epoch's (random) base seed tells them apart
        return key

    # ------------------------------------------------------------------ PyG's BaseSampler API
    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs):
        """Sample the neighbourhood of ``index.node`` (of ``index.input_type`` for typed graphs);
        ``metadata`` is ``(input_id, time)`` as PyG's."""
        _no_time(index.time)
        key = self.next_key()
        metadata = (index.input_id, index.time)
        if index.input_type is None:
            if self.is_hetero:
                raise ValueError("a typed graph needs typed seeds: input_nodes=(node_type, ids)")
            return sampler_output(self.sampler.sample(index.node, key=key), metadata)
        if not self.is_hetero:
            raise ValueError(f"seeds of node type {index.input_type!r} given to an untyped graph's sampler")
        return hetero_sampler_output(self.sampler.sample({index.input_type: index.node}, key=key), metadata)

    def sample_from_edges(self, index: EdgeSamplerInput, neg_sampling=None):
        """Sample the neighbourhood of the pairs ``(index.row, index.col)`` and their negatives.

        ``metadata`` is PyG's: ``(input_id, edge_label_index, edge_label, edge_label_time)`` without
        negatives or with binary ones (local pair positions, positives then negatives; labels the
        given ones or ones, then zeros), ``(input_id, src_index, dst_pos_index, dst_neg_index,
        seed_time)`` for triplets (``dst_neg_index`` of shape (B, amount), squeezed when amount
        is 1).
        """
        _no_time(index.time)
        neg = NegativeSampling.cast(neg_sampling)
        num_pos = int(index.row.numel())
        mode, per_pair, num_neg = None, 1, 0
        if neg is not None:
            if neg.src_weight is not None or neg.dst_weight is not None:
                raise NotImplementedError(
                    "gglspeedup draws negatives uniformly: NegativeSampling weights are not supported"
                )
            num_neg = math.ceil(num_pos * neg.amount)
            mode = "binary" if neg.is_binary() else "triplet"
            per_pair = math.ceil(neg.amount)
        pairs = torch.stack([index.row, index.col])
        options = dict(
            negatives=mode,
            num_negatives=per_pair,
            strict_negatives=self.strict_negatives,
            exclude=self.exclude,
            key=self.next_key(),
        )
        if index.input_type is None:
            if self.is_hetero:
                raise ValueError("a typed graph needs typed pairs: edge_label_index=(edge_type, pairs)")
            out = self.sampler.sample_links(pairs, **options)
            result = sampler_output(out)
        else:
            if not self.is_hetero:
                raise ValueError(f"pairs of edge type {index.input_type!r} given to an untyped graph's sampler")
            edge_type = tuple(index.input_type)
            out = self.sampler.sample_links(
                pairs, edge_type=edge_type, reverse_edge_type=self._reverse(edge_type), **options
            )
            result = hetero_sampler_output(out)
        if mode == "binary":
            edge_label, num_pairs = binary_labels(index.label, num_pos, num_neg), num_pos + num_neg
        else:
            edge_label, num_pairs = index.label, num_pos
        result.metadata = link_metadata(
            index.input_id, out.pair_index, out.negative_targets, num_pairs, edge_label, mode == "triplet"
        )
        return result

    def _reverse(self, edge_type):
        """The relation holding ``edge_type``'s reverse edges (``exclude="reverse"`` only)."""
        if self.exclude != "reverse":
            return None
        if edge_type in self.reverse_edge_types:
            return tuple(self.reverse_edge_types[edge_type])
        src, name, dst = edge_type
        if src == dst:
            return None  # the relation itself holds both directions
        edge_types = self.sampler.graph.edge_types
        if (dst, f"rev_{name}", src) in edge_types:
            return (dst, f"rev_{name}", src)
        backwards = [et for et in edge_types if et[0] == dst and et[2] == src]
        if len(backwards) == 1:
            return backwards[0]
        raise ValueError(
            f"exclude='reverse' on {edge_type!r}: cannot tell which relation from {dst!r} to {src!r} holds the "
            f"reverse edges (candidates: {backwards}); pass reverse_edge_types={{{edge_type!r}: ...}}"
        )


def graph_of(data):
    """The gglspeedup graph (:class:`~gglspeedup.CSRGraph` or :class:`~gglspeedup.HeteroGraph`)
    of a sampler's ``data`` argument."""
    from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData

    from .graph_store import graph_from_pyg_store

    if isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[1], GraphStore):
        if not isinstance(data[0], FeatureStore):
            raise TypeError(f"data must be a (FeatureStore, GraphStore) pair, got a {type(data[0]).__name__} first")
        data = data[1]
    if isinstance(data, GraphStore):
        return graph_from_pyg_store(data)
    if isinstance(data, HeteroData):
        return HeteroGraph.from_pyg(data)
    if isinstance(data, Data):
        return CSRGraph.from_edge_index(data.edge_index, num_nodes=data.num_nodes)
    if isinstance(data, HeteroGraph):
        return data
    try:
        from ..graph import as_csr_graph

        return as_csr_graph(data)
    except TypeError:
        raise TypeError(
            "data must be a (FeatureStore, GraphStore) pair, a GraphStore, a Data / HeteroData, a CSRGraph / "
            f"HeteroGraph or a gglspeedup sampler, got {type(data).__name__}"
        ) from None


def _fanouts(num_neighbors, graph):
    """``num_neighbors`` (a list, a dict, PyG's ``NumNeighbors``) as our samplers take it."""
    if isinstance(graph, HeteroGraph) and (isinstance(num_neighbors, (dict, NumNeighbors))):
        if not isinstance(num_neighbors, NumNeighbors):
            num_neighbors = NumNeighbors(num_neighbors)
        return NumNeighbors(num_neighbors.values, num_neighbors.default).get_values(list(graph.edge_types))
    if isinstance(num_neighbors, NumNeighbors):
        if isinstance(num_neighbors.values, dict):
            raise ValueError("num_neighbors per edge type needs a typed graph")
        return list(num_neighbors.values)
    if isinstance(num_neighbors, dict):
        raise ValueError("num_neighbors per edge type needs a typed graph")
    return num_neighbors


def _no_time(time) -> None:
    if time is not None:
        raise NotImplementedError("gglspeedup.pyg.Sampler does not sample temporally (input time given)")

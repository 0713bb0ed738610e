"""The sampler's output records, shared by the loader, the backends and the multi-GPU layer.

Hop order, the same in every record here: ``adjs`` lists the hops outermost first (GammaGL / PyG
v1), so ``adjs[-1]`` targets the seeds; ``fanouts``, ``num_sampled_nodes`` and
``num_sampled_edges`` run seed hop first (PyG), ``num_sampled_nodes`` with the seeds as entry 0.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, NamedTuple, TypeVar

__all__ = ["Adj", "SampleOutput", "LinkSampleOutput", "HeteroSampleOutput", "HeteroLinkSampleOutput", "hop_adjs"]


class Adj(NamedTuple):
    """One hop of a sampled neighbourhood (PyG / GammaGL ``Adj``).

    edge_index : int64 array, shape (2, E)
        Row 0: the sampled neighbour (source), a position in ``n_id[:size[0]]``.
        Row 1: the target, a position in ``n_id[:size[1]]``.
    e_id : int64 array, shape (E,)
        The sampled edges: positions in ``graph.indices``, or the graph's ``edge_ids``.
    size : tuple (num_sources, num_targets) of Python ints
    """

    edge_index: Any
    e_id: Any
    size: tuple

    def to(self, backend: str) -> Adj:
        """This hop with its arrays converted zero-copy to ``backend`` ("torch", "paddle", ...)."""
        from .. import backends

        return backends.to(backend, self)

    # The original gglspeedup's names.
    def cp2torch(self) -> Adj:
        return self.to("torch")

    def cp2tf(self) -> Adj:
        return self.to("tensorflow")

    def cp2paddle(self) -> Adj:
        return self.to("paddle")


_Record = TypeVar("_Record", bound="_Output")


class _Output:
    """``to`` of every sampler output record."""

    __slots__ = ()

    def to(self: _Record, backend: str) -> _Record:
        """This output with every array converted zero-copy to ``backend``."""
        from .. import backends

        return backends.to(backend, self)


class _LinkOutput(_Output):
    """What both link records share beside ``to``: their last fields (:func:`_link_fields`) and
    ``batch_size``."""

    __slots__ = ()

    @property
    def batch_size(self) -> int:
        """Number of returned pairs ``P`` (positives and negative pairs)."""
        return int(self.pair_index.shape[1])


def _link_fields(name: str, neighbourhood: tuple) -> type:
    """A named tuple of the ``neighbourhood`` fields, then the fields of every link record:
    ``pair_index``, ``labels``, ``negative_targets``, ``num_false_negatives`` and ``batch`` (the
    last three default to ``None``)."""
    fields = (*neighbourhood, "pair_index", "labels", "negative_targets", "num_false_negatives", "batch")
    return namedtuple(name, fields, defaults=(None, None, None))


def hop_adjs(hops) -> list:
    """``adjs`` (outermost hop first) of an untyped driver's ``hops`` (seed hop first, each
    ``(edge_index, e_id, size)``: :class:`gglspeedup.sampling.drivers.Driver`)."""
    return [Adj(edge_index, e_id, size) for edge_index, e_id, size in reversed(hops)]


class _SampleFields(NamedTuple):
    n_id: Any
    adjs: list


class SampleOutput(_Output, _SampleFields):
    """A sampled multi-hop neighbourhood; unpacks as ``n_id, adjs``.

    n_id : int64 array, shape (N,)
        Global ids of every node touched; ``n_id[:batch_size]`` are the seeds, in order
        (duplicates kept), then new nodes in order of first appearance.
    adjs : list of :class:`Adj`, outermost hop first, so ``adjs[-1]`` targets the seeds.
    batch : int64 array, shape (N,), or None
        Disjoint (and temporal) sampling: for each row of ``n_id``, the position of its seed (its
        tree); a node reached from two seeds has a row in each tree. ``None`` for shared sampling.
        An attribute, not a field: the output still unpacks as ``n_id, adjs``.
    """

    batch = None

    def __new__(cls, n_id, adjs, batch=None):
        out = super().__new__(cls, n_id, adjs)
        if batch is not None:
            out.batch = batch
        return out

    @property
    def batch_size(self) -> int:
        """Number of seeds (the targets of the last ``Adj``)."""
        return int(self.adjs[-1].size[1]) if self.adjs else len(self.n_id)


class LinkSampleOutput(_LinkOutput, _link_fields("_LinkFields", ("n_id", "adjs"))):
    """A link batch: the pairs, their labels, and the sampled neighbourhood of their endpoints.

    n_id : int64 array, shape (N,)
        Global ids; ``n_id[:num_endpoints]`` are the distinct endpoints of every returned pair
        (then triplet negatives), in order of first appearance; the rest as in :class:`SampleOutput`.
    adjs : list of :class:`Adj`, outermost hop first (as :class:`SampleOutput`'s).
    pair_index : int64 array, shape (2, P)
        Local positions in ``n_id`` of every returned pair's (source, target): the ``B`` given
        pairs first, then the negative pairs (``"binary"``, ``"per_source"``). ``n_id[pair_index]``
        equals the global pairs.
    labels : array, shape (P,)
        The given labels (or float32 ones) for the positives, then zeros for the negatives.
    negative_targets : int64 array, shape (B, num_negatives), or None
        ``"triplet"`` mode: local positions of each positive's negative targets.
    num_false_negatives : int or None
        With ``strict_negatives``: how many negatives are still graph edges after the redraws
        (``None`` when negatives were not checked).
    batch : int64 array, shape (N,), or None
        Disjoint (and temporal) sampling: each row's tree. Every endpoint of every returned pair
        (sources, then targets, then triplet negatives: no deduplication) is a seed of its own,
        so ``pair_index`` is ``[0 .. P - 1; P .. 2P - 1]``. ``None`` for shared sampling.
    """

    __slots__ = ()

    @property
    def sample_output(self) -> SampleOutput:
        """The neighbourhood as a :class:`SampleOutput` ``(n_id, adjs)`` (with ``batch``)."""
        return SampleOutput(self.n_id, self.adjs, self.batch)


class _HeteroSampleFields(NamedTuple):
    n_id: Any
    adjs: list
    num_sampled_nodes: dict
    num_sampled_edges: dict


class HeteroSampleOutput(_Output, _HeteroSampleFields):
    """A sampled typed neighbourhood (:class:`~gglspeedup.HeteroNeighborSampler`).

    n_id : dict node type -> int64 array
        Local ids per node type: that type's seeds first (in order, duplicates kept), then the
        nodes new at each hop in order of first appearance (relations in the graph's order, then
        targets, then draws). Every node type of the graph has an entry (maybe empty).
    adjs : list over hops, outermost first, of dict edge type -> :class:`Adj`
        ``edge_index[0]`` indexes ``n_id[src_type]``, ``edge_index[1]`` indexes ``n_id[dst_type]``;
        ``size == (src_type nodes in n_id after that hop, dst_type targets of that hop)``; ``e_id``
        are the relation's edge ids. Every edge type has an entry at every hop (maybe empty).
    num_sampled_nodes : dict node type -> list of ``len(fanouts) + 1`` ints
        The type's seeds, then its nodes new at each hop, seed hop first (PyG's convention).
    num_sampled_edges : dict edge type -> list of ``len(fanouts)`` ints, seed hop first.
    batch : dict node type -> int64 array, or None
        Disjoint (and temporal) sampling: each row's tree, numbered over every type's seeds in the
        graph's node-type order. An attribute, not a field (the output unpacks in four).
    """

    batch = None

    def __new__(cls, n_id, adjs, num_sampled_nodes, num_sampled_edges, batch=None):
        out = super().__new__(cls, n_id, adjs, num_sampled_nodes, num_sampled_edges)
        if batch is not None:
            out.batch = batch
        return out

    @property
    def batch_size(self) -> dict:
        """Seeds per node type (``num_sampled_nodes[t][0]``)."""
        return {t: counts[0] for t, counts in self.num_sampled_nodes.items()}


class HeteroLinkSampleOutput(
    _LinkOutput,
    _link_fields("_HeteroLinkFields", ("n_id", "adjs", "num_sampled_nodes", "num_sampled_edges", "edge_type")),
):
    """A typed link batch: pairs of one edge type, their labels and the typed neighbourhood.

    n_id, adjs, num_sampled_nodes, num_sampled_edges : as :class:`HeteroSampleOutput`; the
        seeds are the distinct sources (in ``n_id[edge_type[0]]``) and targets (in
        ``n_id[edge_type[2]]``) of every returned pair, then triplet negatives, in order of first
        appearance (one type's sources and targets share its list when both ends have that type).
    edge_type : the ``(src_type, name, dst_type)`` of the pairs
    pair_index : int64 (2, P): row 0 positions in ``n_id[src_type]``, row 1 in ``n_id[dst_type]``
    labels, negative_targets, num_false_negatives, batch : as :class:`LinkSampleOutput`
        (``batch`` a dict per node type, trees numbered sources first, then targets and triplet
        negatives; with one node type at both ends one list, as untyped)
    """

    __slots__ = ()

    @property
    def sample_output(self) -> HeteroSampleOutput:
        """The neighbourhood as a :class:`HeteroSampleOutput` (with ``batch``)."""
        return HeteroSampleOutput(self.n_id, self.adjs, self.num_sampled_nodes, self.num_sampled_edges, self.batch)

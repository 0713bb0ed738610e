"""The contracts the parts of gglspeedup speak to each other through (``typing.Protocol``).

Anything with these methods plugs in, gglspeedup's classes or a user's own:

- :class:`Sampler`: ``sample(seeds, key=None) -> SampleOutput``. :class:`~gglspeedup.NeighborSampler`,
  a :class:`~gglspeedup.MultiDeviceSampler` rank (``sampler.sampler(rank)``), or a user sampler.
  The loader, the ``"presample"`` cache policy and the multi-device layer take one.
- :class:`LinkSampler`: ``sample_links(pairs, labels=None, *, ..., key=None) -> LinkSampleOutput``,
  what :class:`~gglspeedup.LinkLoader` takes (a :class:`~gglspeedup.NeighborSampler` is one).
- :class:`HeteroSampler` / :class:`HeteroLinkSampler`: their typed variants
  (:class:`~gglspeedup.HeteroNeighborSampler` is both): seeds per node type, ``num_nodes`` a dict
  node type -> count. A loader given a sampler whose ``num_nodes`` is a dict runs typed.
- :class:`FeatureSource`: ``gather(ids, out=None)``, ``source[ids]`` and ``stats()``.
  :class:`~gglspeedup.FeatureStore`, :class:`~gglspeedup.MultiDeviceFeature` (and its
  ``feature.rank(r)`` views) and :class:`~gglspeedup.distributed.DistFeature` are feature sources;
  the loader gathers each batch's rows from one (into recycled buffers when ``gather`` writes into
  ``out``), and indexes plain arrays as ``features[n_id]``.

All are ``runtime_checkable``: ``isinstance(obj, Sampler)`` checks that the methods exist (not
their signatures), which is how the loader and the policies reject a wrong argument early. A typed
sampler has the same method names as an untyped one, so ``isinstance`` cannot tell them apart:
``num_nodes`` (a dict, or an int) does.

>>> import gglspeedup as gg
>>> graph = gg.CSRGraph([0, 1, 2], [1, 0])
>>> isinstance(gg.NeighborSampler(graph, [1]), Sampler), isinstance(graph, Sampler)
(True, False)
>>> typed = gg.HeteroGraph({("a", "to", "b"): [[0], [0]]}, {"a": 1, "b": 1})
>>> isinstance(gg.HeteroNeighborSampler(typed, [1]), HeteroSampler), isinstance(graph, HeteroSampler)
(True, False)
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .sampling.types import HeteroLinkSampleOutput, HeteroSampleOutput, LinkSampleOutput, SampleOutput

__all__ = ["Sampler", "LinkSampler", "HeteroSampler", "HeteroLinkSampler", "FeatureSource"]


@runtime_checkable
class Sampler(Protocol):
    """Samples the multi-hop neighbourhood of a batch of seed nodes.

    ``sample(seeds, key=None)`` returns a :class:`~gglspeedup.SampleOutput` ``(n_id, adjs)`` that
    keeps DESIGN.md's sampling contract: ``n_id[:len(seeds)] == seeds``, ``adjs`` outermost hop
    first. ``key`` replays batch ``key`` (``None``: the sampler's own counter). Samplers may also
    expose ``device`` and ``num_nodes``; the loader reads them when present.
    """

    def sample(self, seeds: Any, key: int | None = None) -> SampleOutput: ...


@runtime_checkable
class LinkSampler(Protocol):
    """Samples the neighbourhood of node pairs for link prediction.

    ``sample_links(pairs, labels=None, *, negatives=None, num_negatives=1, strict_negatives=False,
    exclude="self", key=None, total_negatives=None)`` returns a :class:`~gglspeedup.LinkSampleOutput` that keeps
    DESIGN.md's link-prediction contract. :class:`~gglspeedup.LinkLoader` takes one.
    """

    def sample_links(self, pairs: Any, labels: Any = None, **options: Any) -> LinkSampleOutput: ...


@runtime_checkable
class HeteroSampler(Protocol):
    """Samples the typed multi-hop neighbourhood of seeds given per node type.

    ``sample({node_type: seeds}, key=None)`` returns a :class:`~gglspeedup.HeteroSampleOutput`
    that keeps DESIGN.md's typed-graph contract (``n_id`` a dict node type -> ids, that type's
    seeds first; ``adjs`` a list over hops, outermost first, of dict edge type -> ``Adj``).
    ``num_nodes`` (node type -> count) is required: the loader checks seeds, labels and feature
    rows against it. ``device`` and ``graph`` (for its ``edge_types``) are read when present.
    """

    num_nodes: dict

    def sample(self, seeds: dict, key: int | None = None) -> HeteroSampleOutput: ...


@runtime_checkable
class HeteroLinkSampler(Protocol):
    """Samples the typed neighbourhood of node pairs of one edge type for link prediction.

    ``sample_links(pairs, labels=None, *, edge_type, negatives=None, num_negatives=1,
    strict_negatives=False, exclude="self", reverse_edge_type=None, key=None)`` returns a
    :class:`~gglspeedup.HeteroLinkSampleOutput`; ``num_nodes`` as for :class:`HeteroSampler`.
    :class:`~gglspeedup.LinkLoader` takes one with ``edge_type``.
    """

    num_nodes: dict

    def sample_links(self, pairs: Any, labels: Any = None, **options: Any) -> HeteroLinkSampleOutput: ...


@runtime_checkable
class FeatureSource(Protocol):
    """Feature rows by node id.

    ``gather(ids, out=None)`` returns ``x[ids]`` (written into ``out`` when given, a buffer of the
    source's row shape and dtype), ``source[ids]`` is ``gather(ids)``, and ``stats()`` returns a
    dict of lookup counters (at least ``"lookups"``).
    """

    def gather(self, ids: Any, out: Any = None) -> Any: ...

    def __getitem__(self, ids: Any) -> Any: ...

    def stats(self) -> dict: ...

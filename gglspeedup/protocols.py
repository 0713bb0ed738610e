"""The contracts the parts of gglspeedup speak to each other through (``typing.Protocol``).

Anything with these methods plugs in, gglspeedup's classes or a user's own:

- :class:`Sampler`: ``sample(seeds, key=None) -> SampleOutput``. :class:`~gglspeedup.NeighborSampler`,
  a :class:`~gglspeedup.MultiDeviceSampler` rank (``sampler.sampler(rank)``), or a user sampler.
  The loader, the ``"presample"`` cache policy and the multi-device layer take one.
- :class:`LinkSampler`: ``sample_links(pairs, labels=None, *, ..., key=None) -> LinkSampleOutput``,
  what :class:`~gglspeedup.LinkLoader` takes (a :class:`~gglspeedup.NeighborSampler` is one).
- :class:`FeatureSource`: ``gather(ids, out=None)``, ``source[ids]`` and ``stats()``.
  :class:`~gglspeedup.FeatureStore`, :class:`~gglspeedup.MultiDeviceFeature` (and its
  ``feature.rank(r)`` views) and :class:`~gglspeedup.distributed.DistFeature` are feature sources;
  the loader gathers each batch's rows from one (into recycled buffers when ``gather`` writes into
  ``out``), and indexes plain arrays as ``features[n_id]``.

Both are ``runtime_checkable``: ``isinstance(obj, Sampler)`` checks that the methods exist (not
their signatures), which is how the loader and the policies reject a wrong argument early.

>>> import gglspeedup as gg
>>> graph = gg.CSRGraph([0, 1, 2], [1, 0])
>>> isinstance(gg.NeighborSampler(graph, [1]), Sampler), isinstance(graph, Sampler)
(True, False)
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .sampling.types import LinkSampleOutput, SampleOutput

__all__ = ["Sampler", "LinkSampler", "FeatureSource"]


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
    exclude="self", key=None)`` returns a :class:`~gglspeedup.LinkSampleOutput` that keeps
    DESIGN.md's link-prediction contract. :class:`~gglspeedup.LinkLoader` takes one.
    """

    def sample_links(self, pairs: Any, labels: Any = None, **options: Any) -> LinkSampleOutput: ...


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

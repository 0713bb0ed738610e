"""The sampler's output records, shared by the loader, the backends and the multi-GPU layer."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Adj", "SampleOutput", "LinkSampleOutput"]


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


class SampleOutput(NamedTuple):
    """A sampled multi-hop neighbourhood; unpacks as ``n_id, adjs``.

    n_id : int64 array, shape (N,)
        Global ids of every node touched; ``n_id[:batch_size]`` are the seeds, in order
        (duplicates kept), then new nodes in order of first appearance.
    adjs : list of :class:`Adj`, outermost hop first, so ``adjs[-1]`` targets the seeds.
    """

    n_id: Any
    adjs: list

    @property
    def batch_size(self) -> int:
        """Number of seeds (the targets of the last ``Adj``)."""
        return int(self.adjs[-1].size[1]) if self.adjs else len(self.n_id)

    def to(self, backend: str) -> SampleOutput:
        """This output with every array converted zero-copy to ``backend``."""
        from .. import backends

        return backends.to(backend, self)


class LinkSampleOutput(NamedTuple):
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
    """

    n_id: Any
    adjs: list
    pair_index: Any
    labels: Any
    negative_targets: Any = None
    num_false_negatives: Any = None

    @property
    def batch_size(self) -> int:
        """Number of returned pairs ``P`` (positives and negative pairs)."""
        return int(self.pair_index.shape[1])

    @property
    def sample_output(self) -> SampleOutput:
        """The neighbourhood as a :class:`SampleOutput` ``(n_id, adjs)``."""
        return SampleOutput(self.n_id, self.adjs)

    def to(self, backend: str) -> LinkSampleOutput:
        """This output with every array converted zero-copy to ``backend``."""
        from .. import backends

        return backends.to(backend, self)

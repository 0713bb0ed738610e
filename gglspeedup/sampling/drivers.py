"""The sampling drivers' contract (``typing.Protocol``), as :mod:`gglspeedup.protocols` writes the samplers'.

A sampler checks its arguments, then hands every batch to the one driver it built at construction
for its device (DESIGN.md, "one driver per device"). Two families, one signature:

- :class:`Driver` (untyped): :class:`~._kernels.cpu.CPUDriver`, :class:`~._kernels.cuda.CUDADriver`,
  and the service's :class:`~._kernels.remote.RemoteDriver` (rows drawn by partition servers);
- :class:`TypedDriver` (typed): :class:`~._kernels.typed.TypedCPUDriver`,
  :class:`~._kernels.cuda_typed.TypedCUDADriver`, :class:`~._kernels.remote.TypedRemoteDriver`.

``driver.sample(seeds, fanouts, key, options=None) -> Drawn(n_id, hops, batch)``. Everything a call
switches on is a field of the one options record (:class:`SampleOptions`), never an argument:
the sampler's lifetime flags (``replace``, ``weighted``, ``has_edge_ids``, ``times``, ``last``:
the driver's own :attr:`Driver.options`), and the call's own, swapped in with
``options._replace(...)``:

- ``expand_new``: the hop rule (the sampler's ``expand``: ``"all"`` or ``"new"``);
- ``stride``: ``0`` for shared sampling, else a disjoint call (every seed its own tree) and the
  stride of its virtual ids. Virtual ids stay inside the driver: the caller passes real seeds and
  gets real ``n_id`` back, with ``batch`` (each row's tree);
- ``seed_time``: a temporal call's time per tree;
- ``excluded`` / ``excluded_rows``: a link batch's excluded edges (:meth:`Driver.excluded_positions`).

A new sampling option is a record field and the row bodies that read it; the drivers pass the
record through, so no signature here changes (CONTRIBUTING.md, "How to add a sampling option").
Drivers are thread-safe, and shared by a sampler's ``with_fanouts`` clones (which is why the
fanouts are an argument).

A hop is two halves, which the local drivers fuse into one kernel and the service splits across
processes: *draw* the target rows (each row's draws depend only on ``(seed, key, hop, node)``, the
row and the record: the row bodies of :mod:`._kernels.rows`), then *relabel* the drawn neighbours
into ``n_id`` in order of first appearance. Both halves fit the CPU family as methods with this
contract's arguments, for a server that holds rows and a trainer that holds ``n_id``:
``draw(targets, fanouts, key, hop, options) -> (counts, nbrs, e_id)`` (each target's draws in
row order, no relabel; ``options.seed_time`` and the exclusions per call, as here) and
``relabel(n_id, first, counts, nbrs, e_id) -> hop`` (this contract's hop record). The service's
partition servers draw that way (``OwnedRows.draw``: :mod:`._kernels.remote_rows`) and its
remote drivers relabel that way (:mod:`._kernels.remote_relabel`), each half the local kernels'
own loop, so its batches are the local drivers' bit for bit.

>>> import numpy as np, gglspeedup as gg
>>> from gglspeedup.sampling._kernels.cpu import CPUDriver
>>> driver = CPUDriver(gg.CSRGraph([0, 1, 2], [1, 0]), SampleOptions(False, False, False), seed=0)
>>> isinstance(driver, Driver)
True
>>> n_id, hops, batch = driver.sample(np.array([0, 0]), [1], key=0)  # shared sampling: no batch
>>> n_id.tolist(), hops[0][0].tolist(), batch
([0, 0, 1], [[2, 2], [0, 1]], None)
>>> trees = driver.options._replace(stride=2)  # disjoint: each seed its own tree (virtual ids inside)
>>> n_id, hops, batch = driver.sample(np.array([0, 0]), [1], key=0, options=trees)
>>> n_id.tolist(), batch.tolist()
([0, 0, 1, 1], [0, 1, 0, 1])
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ._kernels.records import Drawn, HopPlan, SampleOptions

__all__ = ["Driver", "TypedDriver", "Drawn", "SampleOptions", "HopPlan"]


@runtime_checkable
class Driver(Protocol):
    """Samples untyped batches on one device for one sampler.

    ``options``: the sampler's record (markers in every per-call field: :func:`~._kernels.records.with_markers`).
    """

    options: SampleOptions

    def sample(self, seeds: Any, fanouts: Any, key: int, options: SampleOptions | None = None) -> Drawn:
        """Every hop of one batch.

        ``seeds``: checked int64 ids (a host array, or the device's for a GPU driver);
        ``fanouts``: checked ints, seed hop first; ``key``: the batch key (draws depend on
        ``(seed, key, hop, node)`` only); ``options``: this call's record (``None``: the driver's).
        Returns ``Drawn(n_id, hops, batch)``: ``n_id`` int64 (seeds first, then first
        appearance), ``hops`` seed hop first, each ``(edge_index, e_id, (len(n_id) after,
        len(n_id) before))`` with ``edge_index`` (2, E) positions in ``n_id``, and ``batch`` each
        row's tree for a disjoint call (``options.stride > 0``), else ``None``.
        """
        ...

    def negatives(
        self, sources: Any, count: int, *, fixed: bool, width: int, strict: bool, key: int, space=None, eligible=None
    ) -> tuple:
        """``(src, dst, stayed)``: ``count`` link negatives of batch ``key``, keyed by ``(seed, key,
        position, draw)`` (:func:`~._kernels.links.draw_negatives`: ``fixed`` keeps ``sources``,
        ``width`` negatives per source; ``strict`` redraws graph edges, ``stayed`` flags those
        left; ``space`` ``(num_sources, num_targets, row_base)`` defaults to the whole graph;
        ``eligible`` the nodes existing at each negative's time)."""
        ...

    def excluded_positions(self, sources: Any, rows: Any) -> Any:
        """What ``options.excluded`` holds for excluding every edge ``sources[i] -> rows[i]``
        (all parallel copies): their sorted, distinct CSR positions."""
        ...


@runtime_checkable
class TypedDriver(Protocol):
    """Samples typed batches (a :class:`~gglspeedup.HeteroGraph`'s stacked CSR) on one device:
    :class:`Driver`'s methods, with ``seeds`` one int64 array per node type (the graph's order),
    ``fanouts`` the sampler's :class:`HopPlan` (per relation: types, stacked bases, fanouts, RNG
    keys) and ``sample`` returning ``n_id`` (and ``batch``) one array per node type and one
    :class:`~._kernels.typed_hops.TypedHop` per hop (each relation's (2, E_r) block of a flat buffer).
    Link batches name rows of the stacked CSR (``rows``, ``space``'s ``row_base``)."""

    options: SampleOptions

    def sample(self, seeds: list, fanouts: HopPlan, key: int, options: SampleOptions | None = None) -> Drawn: ...

    def negatives(
        self, sources: Any, count: int, *, fixed: bool, width: int, strict: bool, key: int, space=None, eligible=None
    ) -> tuple: ...

    def excluded_positions(self, sources: Any, rows: Any) -> Any: ...

"""The sampling and feature service: partitions served by Ray actors (see DESIGN.md, "Service").

A graph too large for one machine is cut into partitions (:func:`partition`), each a folder of the
CSR rows of the nodes it owns (neighbour and edge ids global), their feature rows and labels, and a
partition book (node -> partition, local row). Servers (:func:`serve`, Ray actors) map partitions
in O(1) and answer plain requests (arrays and scalars): one hop's draws for a batch of their rows,
drawn by the same CPU row bodies as a local hop, and feature rows and labels by id. A trainer's
``cluster.sampler(...)`` asks every owning server at once, once per hop, and relabels on its side,
so a batch equals ``NeighborSampler(graph, ...).sample(...)`` bit for bit however the graph was cut;
``cluster.features(...)`` is a feature store whose fallback tier is remote.

The rooms:

- :mod:`.errors`: :class:`ServerUnavailable`, the one failure a client sees.
- :mod:`._transport`: the :class:`Transport` contract (requests to groups of servers, in parallel,
  with a deadline) and its in-process form, :class:`LocalTransport`.
"""

from __future__ import annotations

from .errors import ServerUnavailable

__all__ = ["ServerUnavailable"]

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
- :mod:`.partitioning` (with :mod:`._layout`, :mod:`._metis`): :func:`partition`; :mod:`.book`:
  :class:`PartitionBook`.
- :mod:`.server`: :class:`PartServer`, what answers a group's requests (the message spec).
- :mod:`.sampler`: :class:`RemoteSampler` and :class:`RemoteHeteroSampler`, the trainer's side.
- :mod:`.cluster`: :func:`serve` and :class:`Cluster` (servers as Ray actors, :mod:`._actors`,
  :mod:`._ray`), over :class:`RayTransport` (:mod:`._ray_transport`: deadlines, retries, named
  failures); :mod:`.features`: :class:`RemoteFeatureStore`, the remote feature tier, and
  :mod:`.labels`: :class:`RemoteLabels` (both through :mod:`._rows`); :mod:`.netns`: a private
  network namespace (Ray on loopback only, for tests); ``python -m gglspeedup.service serve PATH``
  (:mod:`.__main__`).
"""

from __future__ import annotations

from .errors import ServerUnavailable

__all__ = [
    "ServerUnavailable",
    "partition",
    "PartitionBook",
    "PartServer",
    "LocalTransport",
    "RemoteSampler",
    "RemoteHeteroSampler",
    "serve",
    "Cluster",
    "ServerInfo",
    "RayTransport",
    "RemoteFeatureStore",
    "RemoteLabels",
]

_LAZY = {
    "partition": ("partitioning", "partition"),
    "PartitionBook": ("book", "PartitionBook"),
    "PartServer": ("server", "PartServer"),
    "LocalTransport": ("_transport", "LocalTransport"),
    "RemoteSampler": ("sampler", "RemoteSampler"),
    "RemoteHeteroSampler": ("sampler", "RemoteHeteroSampler"),
    "serve": ("cluster", "serve"),
    "Cluster": ("cluster", "Cluster"),
    "ServerInfo": ("cluster", "ServerInfo"),
    "RayTransport": ("_ray_transport", "RayTransport"),
    "RemoteFeatureStore": ("features", "RemoteFeatureStore"),
    "RemoteLabels": ("labels", "RemoteLabels"),
}


def __getattr__(name):
    # Loaded on first use: partition needs SciPy (and pymetis), the samplers Numba.
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

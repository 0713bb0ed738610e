"""Rank seeds, the device / rank checks and the pickling rule shared by the multi-device sampler and feature."""

from __future__ import annotations

import os

from .._splitmix import GAMMA, MASK
from ..device import as_device
from ..validation import check_int

__all__ = ["rank_seed"]


def rank_seed(seed: int, rank: int) -> int:
    """The :class:`~gglspeedup.NeighborSampler` seed of ``rank``: ``(seed + rank * 0x9E3779B97F4A7C15) mod 2**64``.

    Rank 0 therefore samples exactly like ``NeighborSampler(graph, fanouts, seed=seed)``; other
    ranks get independent streams (the sampler hashes its seed with splitmix64, whose stream
    advances by this same golden-ratio step).
    """
    return (int(seed) + int(rank) * int(GAMMA)) & MASK


def _check_devices(devices) -> list:
    # bytes and dicts have a length too: b"cpu" read as cuda:99, cuda:112, cuda:117, a dict as its keys
    if isinstance(devices, (str, bytes, int, dict)) or not hasattr(devices, "__len__"):
        raise TypeError(
            f"devices must be a list of devices (e.g. ['cuda:0', 'cuda:1'] or ['cpu', 'cpu']), got {devices!r}"
        )
    if len(devices) == 0:
        raise ValueError("devices must name at least one device, got an empty list")
    return [as_device(d) for d in devices]


def _check_rank(rank, num_devices: int) -> int:
    rank = check_int("rank", rank)
    if not 0 <= rank < num_devices:
        raise IndexError(f"rank must be in [0, {num_devices}) (one rank per device), got {rank}")
    return rank


class _PerProcessState:
    """Pickling for objects handed to worker processes: the attributes named in ``_PICKLED`` travel
    (shared-memory handles, options); everything :meth:`_local_state` sets (locks, per-rank
    samplers or stores built lazily in the worker) is rebuilt on arrival, never sent."""

    _PICKLED: tuple = ()

    def _local_state(self) -> None:
        raise NotImplementedError

    def __getstate__(self):
        return {name: getattr(self, name) for name in self._PICKLED}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local_state()

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    def _per_rank(self, cache: str, rank, build):
        """Rank ``rank``'s entry of the dict attribute ``cache``, made on first use in this process by
        ``build(rank, device)`` (under the lock, on the rank's device); a device this process
        cannot use raises naming both."""
        rank = _check_rank(rank, self.num_devices)
        with self._lock:
            built = getattr(self, cache)  # read under the lock: set_fanouts may replace the dict
            if rank not in built:
                device = self.devices[rank]
                try:
                    device.check_available()
                except RuntimeError as error:
                    raise RuntimeError(f"rank {rank} (pid {os.getpid()}): {error}") from None
                built[rank] = build(rank, device)
            return built[rank]

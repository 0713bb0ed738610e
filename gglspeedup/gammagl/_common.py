"""What the GammaGL drop-ins share: GammaGL's DataLoader options, input conversion, devices."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..device import as_device, to_numpy
from ..validation import check_ids_in_range, check_int, int_array, list_array

__all__ = [
    "loader_options",
    "host_array",
    "node_ids",
    "gammagl_device",
    "no_hops",
    "sampler_fanouts",
    "ready_sampler_seed",
]

# tensorlayerx.dataflow.DataLoader's options that change what a loader yields, and the value that
# leaves them off. GammaGL's loaders pass **kwargs straight to it.
_UNSUPPORTED = {
    "num_workers": 0,
    "sampler": None,
    "batch_sampler": None,
    "collate_fn": None,
    "worker_init_fn": None,
    "persistent_workers": False,
}
# DataLoader options that only matter with worker processes: accepted, as GammaGL accepts them.
_WORKER_ONLY = {"time_out": 0, "prefetch_factor": 2}


def loader_options(owner: str, kwargs: dict) -> dict:
    """``batch_size``, ``shuffle``, ``drop_last`` from GammaGL's DataLoader ``kwargs``.

    Options GammaGL's DataLoader has and the drop-ins do not raise ``NotImplementedError`` naming
    the option (``num_workers > 0``: sampling already runs on parallel threads, and ``prefetch=``
    overlaps it with training); unknown options raise ``TypeError`` as the DataLoader would.
    """
    kwargs = dict(kwargs)
    options = {
        "batch_size": kwargs.pop("batch_size", 1),
        "shuffle": kwargs.pop("shuffle", False),
        "drop_last": kwargs.pop("drop_last", False),
    }
    for name, off in _UNSUPPORTED.items():
        if name in kwargs:
            value = kwargs.pop(name)
            if value is not off and value != off:
                hint = " (sampling runs on parallel threads already; prefetch=2 overlaps it with training)"
                raise NotImplementedError(
                    f"{owner}: the DataLoader option {name}={value!r} is not supported by gglspeedup's "
                    f"drop-in{hint if name == 'num_workers' else ''}"
                )
    for name in _WORKER_ONLY:
        kwargs.pop(name, None)
    if kwargs:
        raise TypeError(f"{owner} got unexpected keyword argument(s) {sorted(kwargs)}")
    return options


def host_array(name: str, value: Any) -> np.ndarray:
    """A host NumPy array of ``value`` (a tensor of any framework, an array, a list or a range); a
    ragged list raises ``ValueError`` naming ``name`` (:func:`~gglspeedup.validation.list_array`)."""
    if isinstance(value, range):
        return np.arange(value.start, value.stop, value.step, dtype=np.int64)
    if isinstance(value, (list, tuple)):
        return list_array(name, value)
    return to_numpy(value)


def node_ids(name: str, value: Any, num_nodes: int) -> np.ndarray:
    """Seed node ids from GammaGL's ``node_idx`` / ``input_nodes``: ``None`` (every node), a bool
    mask of ``num_nodes`` entries, or integer ids (any shape, flattened as GammaGL flattens them)."""
    if value is None:
        return np.arange(num_nodes, dtype=np.int64)
    array = host_array(name, value)
    if array.dtype == np.bool_:
        if array.ndim != 1 or array.shape[0] != num_nodes:
            raise ValueError(
                f"{name} as a bool mask must have shape ({num_nodes},) (one entry per node), got {array.shape}"
            )
        return np.flatnonzero(array).astype(np.int64)
    ids = int_array(
        name,
        np.ascontiguousarray(array).reshape(-1),
        expected="must be a bool mask or integer node ids",
        beyond=IndexError,
    )
    return check_ids_in_range(name, ids, num_nodes, what="num_nodes")


def gammagl_device(device):
    """A :class:`~gglspeedup.Device`, reading GammaGL's ``-1`` as the CPU (the original names' rule,
    :func:`gglspeedup.compat.as_compat_device`: a CUDA device this machine lacks raises now)."""
    from ..compat import as_compat_device

    return as_compat_device(device)


def no_hops(num_neighbors: Any) -> bool:
    """Whether ``num_neighbors`` / ``sample_lists`` asks for no hops, as GammaGL reads it: ``[]``
    (or an empty tuple / 1-D array), or a dict of edge type -> ``[]`` (``{}`` included). GammaGL's
    batches are then the seeds alone: no edges, every sampled node a seed."""
    if isinstance(num_neighbors, dict):
        return all(no_hops(hops) and not isinstance(hops, dict) for hops in num_neighbors.values())
    if isinstance(num_neighbors, np.ndarray):
        return num_neighbors.ndim == 1 and num_neighbors.size == 0
    return isinstance(num_neighbors, (list, tuple)) and len(num_neighbors) == 0


def sampler_fanouts(num_neighbors: Any) -> Any:
    """``num_neighbors`` as gglspeedup's samplers take it. No hops (:func:`no_hops`), which they
    refuse, becomes one hop drawing nothing (``[0]``, per edge type for a non-empty dict): its batch holds
    the seeds alone (``n_id`` the seeds as given) and one record without edges, which
    ``NeighborSampler`` drops (GammaGL's ``adjs`` is then ``[]``) and the graph loaders' flat
    ``(node, row, col, edge)`` has no trace of. Anything else is returned as it is, for the
    sampler to check."""
    if not no_hops(num_neighbors):
        return num_neighbors
    if isinstance(num_neighbors, dict) and num_neighbors:
        return {edge_type: [0] for edge_type in num_neighbors}
    return [0]


def ready_sampler_seed(owner: str, sampler, seed, device) -> int:
    """The seed of a loader given a ready ``sampler``: the sampler's own, which draws the batches
    (and keys the loader's shuffle, so the batches equal those of the same loader built over the
    whole graph with that seed). ``seed`` / ``device`` left out (``None``) take the sampler's;
    another value than the sampler's raises ``ValueError`` naming it, where it was ignored."""
    own = int(sampler.seed)
    if seed is not None and check_int("seed", seed, minimum=0) != own:
        raise ValueError(
            f"{owner}: seed={seed!r} is not the given sampler's own seed ({own}); a ready sampler draws "
            f"with its own seed: leave seed out or pass {own}"
        )
    minus_one = isinstance(device, (int, np.integer)) and not isinstance(device, bool) and device == -1
    if device is not None and as_device("cpu" if minus_one else device) != sampler.device:  # parsed, not opened
        raise ValueError(
            f"{owner}: device={device!r} is not the given sampler's device ({sampler.device}); a ready "
            "sampler samples on its own device: leave device out or build the sampler there"
        )
    return own

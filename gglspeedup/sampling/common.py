"""What both samplers share: batch keys, argument checks, placement (see DESIGN.md, "Sampling")."""

from __future__ import annotations

import threading

import numpy as np

from ..device import as_device_array, on_gpu, reject_meta, to_numpy
from ..validation import check_bool, check_draws, check_int, ints_beyond_int64, list_array
from ._kernels.records import check_tree_count

__all__ = [
    "check_flags",
    "BatchKeys",
    "EXPANDS",
    "PLACEMENTS",
    "check_seeds",
    "check_expand",
    "check_not_bipartite",
    "check_replace_fanouts",
    "check_last",
    "check_weight_sums",
    "check_tree_count",
    "place_like",
    "resolve_placement",
]

PLACEMENTS = ("auto", "device", "pinned", "host")
_UINT64_LIMIT = 1 << 64
_DEVICE_FIT_FRACTION = 0.5  # "auto" keeps the graph in GPU memory below this share of free memory


class BatchKeys:
    """The batch-key counter both samplers keep (``_key``, guarded by ``_lock``)."""

    def _next_key(self, key) -> int:
        """``key`` checked, or the counter's next value (advancing it) when ``key`` is None."""
        if key is None:
            with self._lock:
                key, self._key = self._key, self._key + 1
            return key
        return check_int("key", key, minimum=0, below=_UINT64_LIMIT)

    def _continue_keys(self, clone) -> None:
        """Give ``clone`` a lock of its own and this sampler's counter value."""
        clone._lock = threading.Lock()
        with self._lock:
            clone._key = self._key


def check_not_bipartite(graph):
    """``graph``, refused when bipartite (``num_src_nodes != num_nodes``): an untyped sampler makes
    each hop's sampled sources the next hop's targets, rows a bipartite relation does not have."""
    if graph.num_src_nodes != graph.num_nodes:
        raise ValueError(
            f"graph is bipartite (num_src_nodes = {graph.num_src_nodes}, num_nodes = {graph.num_nodes}): an "
            "untyped sampler makes each hop's sampled sources the next hop's targets, which a bipartite "
            "relation's source ids are not; sample it as a relation of a HeteroGraph (HeteroNeighborSampler)"
        )
    return graph


def check_weight_sums(graph) -> None:
    """Raise ``ValueError`` naming the first row of ``graph`` (a CSRGraph; a typed graph's stacked
    one) whose weights, each finite, sum past float64's range: weighted draws read each row's
    running sum, and an infinite one draws wrongly (``[1e308, 1e308, 1.0]`` always drew the last
    edge). O(num_edges), once, at construction; the tables are built only when the total is large."""
    weights = to_numpy(graph.weights)
    if weights.size == 0 or float(np.sum(weights, dtype=np.float64)) < np.finfo(np.float64).max / 2:
        return  # no row's running sum comes near the range, whatever the rounding
    from ._kernels.cpu import weight_tables

    indptr = to_numpy(graph.indptr)
    _live, cum = weight_tables(indptr, weights)  # the running sums the kernels read
    infinite = np.isinf(cum)
    if infinite.any():
        row = int(np.searchsorted(indptr, int(np.argmax(infinite)), side="right")) - 1
        raise ValueError(
            f"weights of row {row} sum past the float64 range (inf): weighted sampling draws from each "
            "row's running sum of its weights; scale the weights down"
        )


def check_last(strategy: str, weighted: bool) -> None:
    if strategy == "last" and weighted:
        raise ValueError("temporal_strategy='last' takes the latest edges and does not draw by weight (weighted=True)")


def place_like(graph, array):
    """``array`` (host) where ``graph``'s arrays live: the device's memory, page-locked host
    memory (a graph placed ``"pinned"``), or as it is on the host."""
    if not graph.device.is_cuda:
        return array
    if graph.placement == "pinned":
        from ..device import pinned_empty

        pinned = pinned_empty(array.shape, array.dtype)
        pinned[...] = array
        return pinned
    with graph.device:
        return graph.device.xp.asarray(array)


EXPANDS = ("all", "new")


def check_replace_fanouts(fanouts, replace: bool, name: str = "fanouts") -> None:
    """With replacement a row draws exactly ``k`` edges: refuse a ``k`` whose output for a single
    target would not fit in memory (``fanouts=[10**12]``), at construction."""
    if replace:
        for hop, k in enumerate(fanouts):
            check_draws(f"{name}[{hop}]", k, k, "for every target (replace=True)")


def check_expand(expand) -> str:
    """``expand`` checked: ``"all"`` (every node so far, layer blocks) or ``"new"`` (PyG's rule)."""
    if expand not in EXPANDS:
        raise ValueError(f"expand must be one of {EXPANDS}, got {expand!r}")
    return expand


def resolve_placement(device, placement: str, graph, weighted: bool) -> str:
    """The placement a sampler on ``device`` uses for ``graph`` (a CSRGraph; a typed graph's
    stacked one): ``"auto"`` is ``"device"`` when the graph, with a weighted sampler's two tables
    (8 bytes per row and per edge), takes less than half the free GPU memory, else ``"pinned"``;
    a clear error for a placement the device cannot take."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    if not device.is_cuda:
        if placement not in ("auto", "host"):
            raise ValueError(
                f"placement {placement!r} needs a CUDA device; a CPU sampler reads the graph from host memory"
            )
        return "host"
    if placement == "host":
        raise ValueError("placement 'host' is for CPU samplers; on a CUDA device use 'device' or 'pinned'")
    if placement != "auto":
        return placement
    if device.simulated:
        return "device"
    import cupy

    with device:
        free = cupy.cuda.runtime.memGetInfo()[0]
    needed = graph.nbytes + (8 * (graph.num_nodes + graph.num_edges) if weighted else 0)
    return "device" if needed < _DEVICE_FIT_FRACTION * free else "pinned"


def check_seeds(seeds, num_nodes: int, device, name: str = "seeds"):
    """``seeds`` as a contiguous int64 1-D array (host, or ``device``'s for GPU input), every id in
    ``[0, num_nodes)``; ``name`` names the argument in errors."""
    if seeds is None:
        raise TypeError(f"{name} must be a 1-D integer array, got None")
    reject_meta(name, seeds)
    seeds_on_gpu = on_gpu(seeds)
    if seeds_on_gpu and not device.is_cuda:
        raise ValueError(
            f"{name} live on a GPU but this sampler runs on {device}; pass host seeds "
            "(e.g. seeds.cpu() / cupy.asnumpy(seeds)) or build the sampler with device='cuda'"
        )
    given = seeds
    if seeds_on_gpu:
        seeds = as_device_array(seeds, device)
    else:
        if isinstance(seeds, (list, tuple)) and len(seeds) == 0:
            seeds = np.empty(0, np.int64)
        seeds = list_array(name, seeds) if isinstance(seeds, (list, tuple)) else to_numpy(seeds)
    dtype = seeds.dtype
    if dtype.kind not in "iu":
        seeds = ints_beyond_int64(given)  # [2**70]: out of range, though NumPy reads no integer dtype
        if seeds is None:
            what = "bool" if dtype.kind == "b" else str(dtype)
            raise TypeError(f"{name} must hold integers (int32 or int64), got dtype {what}")
    if seeds.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(seeds.shape)}")
    xp = np if isinstance(seeds, np.ndarray) else device.xp
    if seeds.size:
        if seeds.dtype == np.int64:  # one comparison: a negative id read as uint64 lies past every num_nodes
            bad = seeds.view(np.uint64) >= np.uint64(num_nodes)
        else:
            bad = (seeds < 0) | (seeds >= num_nodes)
        if xp is np:
            out_of_range = bool(bad.any())
        else:
            from .._launch import to_host

            out_of_range = bool(to_host(bad.any()))  # sync: the one device read of a GPU batch's seeds
        if out_of_range:
            position = int(xp.argmax(bad))
            raise IndexError(
                f"{name} must lie in [0, num_nodes = {num_nodes}): {name}[{position}] = {int(seeds[position])}"
            )
    return xp.ascontiguousarray(seeds, dtype=np.int64)


def check_flags(expand, replace, weighted, disjoint) -> tuple:
    """Both samplers' switches, checked in their order: ``(expand, replace, weighted, disjoint)``."""
    expand = check_expand(expand)
    replace, weighted = check_bool("replace", replace), check_bool("weighted", weighted)
    return expand, replace, weighted, check_bool("disjoint", disjoint)

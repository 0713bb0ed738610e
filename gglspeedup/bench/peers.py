"""Peer samplers measured beside ours: a vectorised NumPy reference, DGL and PyG.

Each peer is an optional import, never a dependency. :func:`prepare` returns a
:class:`Contender` (``convert`` a seed batch to the peer's type outside the clock, ``sample`` a
converted batch and return the number of sampled edges over all hops, ``sync`` before a clock
read) or raises :class:`PeerUnavailable` with the reason, which the table prints.

The NumPy and DGL peers sample with the same hop semantics as :class:`gglspeedup.NeighborSampler`:
``fanouts[0]`` applies to the seeds, each target draws ``min(k, deg)`` distinct in-neighbours
uniformly, and the targets of the next hop are every node reached so far, the seeds included
(DGL's blocks keep their destination nodes among their sources). PyG's sampler expands only the
nodes that are new at each hop, so it samples fewer edges per batch; edges/s stays comparable and
the table's edges/batch column shows the difference.

``scripts/install_peers.sh`` installs DGL and PyG into the venv without touching torch.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..device import as_device
from ..sampling.types import Adj, SampleOutput

__all__ = ["PEERS", "PeerUnavailable", "PeersMissing", "Contender", "prepare", "numpy_sample", "why_unavailable"]

PEERS = ("numpy", "dgl", "pyg")


class PeerUnavailable(RuntimeError):
    """A peer cannot run here (not installed, no native sampler, wrong device); the text says why."""


class PeersMissing(PeerUnavailable, ValueError):
    """Every peer the user named with ``--peers`` is missing, found before any graph was built: a
    ``ValueError`` too, as the commands' other bad options (:func:`._options.check_peers`)."""


@dataclass
class Contender:
    """A prepared sampler: ``sample(convert(seeds))`` returns the sampled edge count."""

    name: str
    version: str
    sample: Callable[[Any], int]
    convert: Callable[[np.ndarray], Any] = lambda seeds: seeds
    sync: Callable[[], None] = lambda: None
    note: str = ""


def prepare(name: str, graph, fanouts, *, seed: int = 0, device="cpu") -> Contender:
    """The peer ``name`` (one of :data:`PEERS`) set up on ``graph`` (a host ``CSRGraph``)."""
    if name not in PEERS:
        raise ValueError(f"peer must be one of {PEERS}, got {name!r}")
    return {"numpy": _prepare_numpy, "dgl": _prepare_dgl, "pyg": _prepare_pyg}[name](
        graph, list(fanouts), seed, as_device(device)
    )


# ---------------------------------------------------------------------------------- NumPy
def _owner(counts, xp):
    """``[0]*counts[0] + [1]*counts[1] + ...`` (CuPy's ``repeat`` takes no array of counts)."""
    if xp is np:
        return np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    ends = xp.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0  # sync
    return xp.searchsorted(ends, xp.arange(total, dtype=np.int64), side="right")


def _ranks(counts, xp):
    """(owner, rank within the owner's run) of every element of the runs ``counts`` describe."""
    owner = _owner(counts, xp)
    starts = xp.cumsum(counts) - counts
    return owner, xp.arange(len(owner), dtype=np.int64) - starts[owner]


def _sorted_unique(values, xp):
    """Sorted distinct values (NumPy 2's hash-based ``unique`` is far slower on these keys)."""
    values = xp.sort(values)
    keep = xp.ones(len(values), dtype=bool)
    keep[1:] = values[1:] != values[:-1]
    return values[keep]


def _sample_hop(indptr, targets, fanout, rng, xp):
    """Edge positions drawn for ``targets`` (grouped by target, in target order) and counts."""
    starts = indptr[targets]
    degree = indptr[targets + 1] - starts
    take = degree if fanout < 0 else xp.minimum(degree, fanout)
    out_start = xp.cumsum(take) - take
    positions = xp.empty(int(take.sum()), dtype=np.int64)  # sync

    # Rows that keep every neighbour.
    rows = xp.nonzero(take == degree)[0]
    owner, rank = _ranks(degree[rows], xp)
    positions[out_start[rows][owner] + rank] = starts[rows][owner] + rank

    # Rows a little longer than the fanout: sort random keys per row, keep the first k.
    rows = xp.nonzero((take < degree) & (degree <= 4 * fanout))[0]
    if len(rows):
        owner, rank = _ranks(degree[rows], xp)
        keys = rng.random(len(owner))
        order = xp.lexsort(xp.stack([keys, owner.astype(np.float64)]))
        keep = rank < fanout  # sorted slot ranks equal the original ones: rows stay in place
        picked = rank[order][keep]
        owner = owner[keep]
        positions[out_start[rows][owner] + rank[keep]] = starts[rows][owner] + picked

    # Long rows (hubs): draw with replacement, drop repeats, redraw what is missing. Each kept
    # draw is uniform over the positions not yet kept, so the set is a uniform k-subset.
    rows = xp.nonzero(degree > 4 * fanout)[0] if fanout > 0 else rows[:0]
    if len(rows):
        row_degree = degree[rows]
        scale = int(row_degree.max())  # sync
        kept = xp.empty(0, dtype=np.int64)
        need = xp.full(len(rows), fanout, dtype=np.int64)
        while True:
            owner = _owner(need, xp)
            draws = (rng.random(len(owner)) * row_degree[owner]).astype(np.int64)
            kept = _sorted_unique(xp.concatenate([kept, owner * scale + draws]), xp)
            need = fanout - xp.bincount(kept // scale, minlength=len(rows))
            if not bool((need > 0).any()):  # sync
                break
        owner, rank = kept // scale, kept % scale
        slot = xp.arange(len(kept), dtype=np.int64) - owner * fanout
        positions[out_start[rows][owner] + slot] = starts[rows][owner] + rank
    return positions, take


def numpy_sample(indptr, indices, fanouts, seeds, rng, edge_ids=None, xp=np) -> SampleOutput:
    """Multi-hop uniform neighbour sampling in vectorised NumPy (or CuPy with ``xp=cupy``).

    The reference peer: same hop semantics and output layout as
    :meth:`gglspeedup.NeighborSampler.sample`, different random draws.

    Parameters
    ----------
    indptr, indices : int64 arrays, shapes (N + 1,), (E,)
        The CSR graph; row ``v`` lists the in-neighbours of ``v``.
    fanouts : list of int
        Positive ints or -1 (all neighbours); ``fanouts[0]`` applies to the seeds.
    seeds : int64 array, shape (B,)
    rng : ``numpy.random.Generator`` (or CuPy's)
    edge_ids : int64 array, shape (E,), optional
        Reported as ``e_id`` instead of CSR positions.

    Returns
    -------
    SampleOutput
        ``n_id[:B] == seeds``; ``adjs`` outermost hop first.
    """
    n_id = xp.asarray(seeds, dtype=np.int64)
    adjs = []
    for fanout in fanouts:
        targets = n_id
        positions, take = _sample_hop(indptr, targets, fanout, rng, xp)
        neighbours = indices[positions]
        num_old = len(n_id)
        joined = xp.concatenate([n_id, neighbours])
        unique, first, inverse = xp.unique(joined, return_index=True, return_inverse=True)
        new = xp.nonzero(first >= num_old)[0]
        new = new[xp.argsort(first[new])]  # new nodes in order of first appearance
        local = first.copy()  # a node already in n_id maps to its first position there
        local[new] = num_old + xp.arange(len(new), dtype=np.int64)
        n_id = xp.concatenate([n_id, unique[new]])
        source = local[inverse.reshape(-1)[num_old:]]
        target = _owner(take, xp)
        e_id = positions if edge_ids is None else edge_ids[positions]
        adjs.append(Adj(xp.stack([source, target]), e_id, (len(n_id), len(targets))))
    return SampleOutput(n_id, adjs[::-1])


def _prepare_numpy(graph, fanouts, seed, device) -> Contender:
    xp, name, sync = np, "numpy", lambda: None
    if device.is_cuda and not device.simulated:
        device.check_available()
        import cupy

        xp, name, sync = cupy, "cupy", lambda: cupy.cuda.get_current_stream().synchronize()
    graph = graph.to(device) if xp is not np else graph
    rng = xp.random.default_rng(seed)
    indptr, indices = graph.indptr, graph.indices

    def sample(seeds) -> int:
        out = numpy_sample(indptr, indices, fanouts, seeds, rng, xp=xp)
        return sum(int(adj.e_id.shape[0]) for adj in out.adjs)

    return Contender(
        "numpy",
        f"{name} {xp.__version__}",
        sample,
        convert=lambda s: xp.asarray(s),
        sync=sync,
        note="vectorised reference",
    )


# ---------------------------------------------------------------------------------- torch helpers
def _torch_device(device):
    import torch

    if not device.is_cuda:
        return torch.device("cpu"), (lambda: None)
    if device.simulated or not torch.cuda.is_available():
        raise PeerUnavailable(f"torch {torch.__version__} has no CUDA device for {device}")
    return torch.device("cuda", device.index), torch.cuda.synchronize


# ---------------------------------------------------------------------------------- DGL
class _GraphBoltTolerantLoader(importlib.abc.Loader):
    """Runs ``dgl/graphbolt/__init__.py`` but survives its native-library load failing.

    DGL 2.1.0 ships GraphBolt libraries for torch 2.0-2.2 only and raises at import on any other
    torch, although the classic sampler we measure never uses GraphBolt. The load is the last
    statement of that file, so catching its error leaves the module complete.
    """

    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        try:
            self.inner.exec_module(module)
        except (ImportError, OSError, RuntimeError) as error:
            if "load_graphbolt" not in [frame.name for frame in traceback.extract_tb(error.__traceback__)]:
                raise
            module.GRAPHBOLT_LOAD_ERROR = str(error)


class _GraphBoltTolerantFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != "dgl.graphbolt":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _GraphBoltTolerantLoader(spec.loader)
        return spec


def import_dgl():
    """``import dgl`` with the GraphBolt load made non-fatal (see the loader above)."""
    if "dgl" not in sys.modules and not any(isinstance(f, _GraphBoltTolerantFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _GraphBoltTolerantFinder())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torchdata's deprecation banner
            import dgl
    except ImportError as error:
        raise PeerUnavailable(f"dgl does not import ({error}); run scripts/install_peers.sh") from None
    return dgl


def _prepare_dgl(graph, fanouts, seed, device) -> Contender:
    dgl = import_dgl()
    import torch

    torch_device, sync = _torch_device(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a memory-mapped graph is read-only; DGL only reads it
        indptr = torch.from_numpy(np.asarray(graph.indptr))
        indices = torch.from_numpy(np.asarray(graph.indices, dtype=np.int64))  # DGL: indptr's dtype
    # Our rows list in-neighbours, which is DGL's CSC (destination-major) layout.
    dgl_graph = dgl.graph(("csc", (indptr, indices, torch.empty(0, dtype=torch.int64))), num_nodes=graph.num_nodes)
    try:
        dgl_graph = dgl_graph.formats("csc").to(torch_device)
    except Exception as error:  # a CPU-only DGL build raises its own DGLError here
        raise PeerUnavailable(f"dgl {dgl.__version__} cannot sample on {device}: {error}") from None
    dgl.seed(seed)
    # DGL lists fanouts per layer, input layer first, so its last fanout applies to the seeds.
    sampler = dgl.dataloading.NeighborSampler(list(reversed(fanouts)))

    def sample(seeds) -> int:
        _, _, blocks = sampler.sample_blocks(dgl_graph, seeds)
        return sum(int(block.num_edges()) for block in blocks)

    threads = dgl.utils.get_num_threads()
    return Contender(
        "dgl",
        f"dgl {dgl.__version__}",
        sample,
        convert=lambda s: torch.from_numpy(s).to(torch_device),
        sync=sync,
        note=f"NeighborSampler.sample_blocks, {threads} threads",
    )


# ---------------------------------------------------------------------------------- PyG
def _import_pyg_sampler():
    """``torch_geometric`` with a native neighbour sampler (pyg-lib or torch-sparse), or
    :class:`PeerUnavailable` saying what is missing."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch_geometric
            import torch_geometric.typing as pyg_typing
    except ImportError as error:
        raise PeerUnavailable(f"torch_geometric does not import ({error})") from None
    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        raise PeerUnavailable("needs pyg-lib or torch-sparse (PyG has no pure-Python neighbour sampler)")
    return torch_geometric


def why_unavailable(name: str) -> str | None:
    """Why the peer ``name`` (one of :data:`PEERS`) cannot run here, or ``None`` when its library
    imports: the check a bench command makes before it builds any graph (imports only)."""
    try:
        {"numpy": lambda: np, "dgl": import_dgl, "pyg": _import_pyg_sampler}[name]()
    except PeerUnavailable as error:
        return str(error)
    return None


def _prepare_pyg(graph, fanouts, seed, device) -> Contender:
    torch_geometric = _import_pyg_sampler()
    if device.is_cuda:
        raise PeerUnavailable("PyG's NeighborSampler samples on the CPU only")
    import torch
    from torch_geometric.data import Data
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    indptr = np.asarray(graph.indptr)
    target = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(indptr))
    edge_index = torch.from_numpy(np.stack([np.asarray(graph.indices), target]))
    data = Data(edge_index=edge_index, num_nodes=graph.num_nodes)
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "without pyg-lib is deprecated"
        # is_sorted: edges are grouped by target already, so PyG builds its CSC without a sort.
        sampler = NeighborSampler(data, num_neighbors=list(fanouts), is_sorted=True)
    backend = "pyg-lib" if torch_geometric.typing.WITH_PYG_LIB else "torch-sparse"

    def sample(seeds) -> int:
        out = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=seeds))
        return int(out.row.numel())

    return Contender(
        "pyg",
        f"torch_geometric {torch_geometric.__version__}",
        sample,
        convert=lambda s: torch.from_numpy(s),
        note=f"NeighborSampler via {backend}",
    )

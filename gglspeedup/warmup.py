"""``python -m gglspeedup warmup``: compile the CPU kernels once, ahead of the first epoch.

The CPU kernels are Numba functions compiled on first use and cached on disk (``cache=True``), so
only the first process that uses one pays its compile (seconds per kernel *variant*: one per
combination of argument types, e.g. a gather of 4-byte against 8-byte words, a graph with edge ids
against one without, a short hop against a long, interruptible one); later processes load it
(under a second). This runs every path the main job, the loaders and the demos take, on small
inputs, so that first process is this command instead of a training run::

    python -m gglspeedup warmup                 # everything (see PARTS)
    python -m gglspeedup warmup --parts sample,gather

From an empty cache on an idle 2-core machine the full run took 96 s of wall time and 180 s of CPU
in its two processes (README, "What to expect"); a second run loads everything from the cache in
about 4 s. A graph loaded memory-mapped samples with the variants compiled here for one in memory
(the kernels get read-only views of what they only read: ``gglspeedup._parallel.read_only``).

Where the cache goes is Numba's choice, made per kernel: beside the package's sources
(``__pycache__``) when that folder is writable, else the user cache folder
(``$XDG_CACHE_HOME/numba``, by default ``~/.cache/numba``), so a package installed read-only
still caches; ``NUMBA_CACHE_DIR`` overrides both. The cache is keyed by the source files, the
argument types and the CPU, so run this once per environment and machine, after installing or
upgrading.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

__all__ = ["warmup", "PARTS", "main", "compiled_kernels"]

PARTS = ("sample", "gather", "link", "hetero", "temporal", "disk", "attention")

# A hop whose work (targets x fanout) reaches this runs as an interruptible call, whose kernel
# polls a stop flag: a variant of its own (the sampling drivers' LONG_WORK). One seed with this
# fanout takes that path on any graph.
_LONG_FANOUT = 1 << 21
# A gather writing this many bytes or more runs the parallel kernel (the feature kernels'
# SERIAL_BYTES), fewer the serial one.
_PARALLEL_BYTES = 1 << 20
_ROWS = 64  # rows of the warm-up tables


def _graph(keep_edge_ids: bool = True):
    """A small random graph with float64 weights, built as the datasets build theirs (int32 ids)."""
    from .graph import CSRGraph

    rng = np.random.default_rng(0)
    edges = rng.integers(0, 64, size=(2, 512))
    return CSRGraph.from_edge_index(edges, num_nodes=64, weights=rng.random(512) + 0.1, keep_edge_ids=keep_edge_ids)


def _sample(graph) -> None:
    """Every sampler option the demos and loaders use: with and without replacement and weights,
    ``-1`` fanouts, graphs with and without edge ids, PyG's hop rule and disjoint trees, and the
    long (interruptible) hops of large batches."""
    from .graph import CSRGraph
    from .sampling import NeighborSampler

    seeds = np.arange(8)
    for replace in (False, True):
        for weighted in (False, True):
            NeighborSampler(graph, [3, -1], replace=replace, weighted=weighted).sample(seeds)
    for each in (graph, _graph(keep_edge_ids=False)):
        NeighborSampler(each, [3, -1]).sample(seeds)
        NeighborSampler(each, [_LONG_FANOUT]).sample(seeds[:1])
    NeighborSampler(graph, [3, 2], expand="new").sample(seeds)  # gglspeedup.pyg's hop rule
    NeighborSampler(graph, [3, 2], disjoint=True).sample(seeds)
    with tempfile.TemporaryDirectory(prefix="gglspeedup-warmup-") as folder:
        # A graph saved without edge ids and loaded memory-mapped, as train_sage_papers_like.py
        # samples its graph: its arrays are read-only, and so are the views the CPU drivers hand
        # the kernels of a graph in memory (_parallel.read_only), so this loads the variants above.
        _graph(keep_edge_ids=False).save(os.path.join(folder, "graph"))
        mapped = CSRGraph.load(os.path.join(folder, "graph"))
        NeighborSampler(mapped, [3, -1]).sample(seeds)
        NeighborSampler(mapped, [_LONG_FANOUT]).sample(seeds[:1])
        del mapped  # the mapping closes before the folder goes


def _gather() -> None:
    """In-memory gathers of 4- and 8-byte row words (float32 rows of odd and even widths: Cora's
    1,433, WordNet's 256), by the serial and the parallel kernel, into new and reused buffers."""
    from .feature import FeatureStore

    for dim in (3, 4):
        _gathers(FeatureStore(np.zeros((_ROWS, dim), dtype=np.float32)))


def _gathers(store) -> None:
    """A small gather (the serial kernel) and one of ``_PARALLEL_BYTES`` (the parallel one)."""
    rng = np.random.default_rng(2)
    for count in (4, -(-_PARALLEL_BYTES // store.row_bytes)):
        ids = rng.integers(0, len(store), count)
        store[ids]
        store.gather(ids, out=np.empty((count, store.dim), dtype=store.dtype))


def _edges(csr, count: int) -> np.ndarray:
    """``count`` of ``csr``'s edges as (source, target) pairs, shape (2, count): positive pairs
    that really are edges, so exclusion has edges to exclude (the kernels' exclusion variant)."""
    indptr = np.asarray(csr.indptr)
    targets = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))[:count]
    return np.stack([np.asarray(csr.indices[:count], dtype=np.int64), targets])


def _link(graph) -> None:
    from .sampling import NeighborSampler

    pairs = _edges(graph, 3)
    # The demos' graphs keep edge ids; the synthetic ones (--graph powerlaw:..., the benches) do not.
    for each in (graph, _graph(keep_edge_ids=False)):
        sampler = NeighborSampler(each, [3, 2])
        for negatives in (None, "binary", "per_source", "triplet"):
            for exclude in ("self", "reverse", None):
                sampler.sample_links(pairs, negatives=negatives, exclude=exclude)
        # a large link batch: long hops excluding the batch's edges
        NeighborSampler(each, [_LONG_FANOUT]).sample_links(pairs[:, :1], negatives="binary", exclude="reverse")


def _typed_graph(keep_edge_ids: bool):
    """Three relations over two node types, from edge indexes (int32 edge ids) or from CSRGraphs
    without edge ids (as ``load_wordnet`` builds its relations)."""
    from .graph import CSRGraph
    from .heterograph import HeteroGraph

    rng = np.random.default_rng(1)
    relations = {}
    for edge_type in (("a", "to", "b"), ("b", "to", "a"), ("b", "self", "b")):
        edges = rng.integers(0, 16, size=(2, 64))
        relations[edge_type] = (
            edges if keep_edge_ids else CSRGraph.from_edge_index(edges, num_nodes=16, keep_edge_ids=False)
        )
    return HeteroGraph(relations, {"a": 16, "b": 16})


def _hetero(graph) -> None:
    """Typed sampling as the WordNet demos run it: relations with and without edge ids, short and
    long hops, link batches excluding both directions of their edges, disjoint trees."""
    from .sampling import HeteroNeighborSampler

    links = {"edge_type": ("a", "to", "b"), "negatives": "binary", "exclude": "reverse"}
    for keep_edge_ids in (True, False):
        typed = _typed_graph(keep_edge_ids)
        pairs = _edges(typed[("a", "to", "b")], 2)
        for fanouts, count in (([3, -1], 2), ([_LONG_FANOUT], 1)):
            sampler = HeteroNeighborSampler(typed, fanouts)
            sampler.sample({"b": np.arange(count)})
            if keep_edge_ids:
                sampler.sample_links(pairs[:, :count], reverse_edge_type=("b", "to", "a"), **links)
    HeteroNeighborSampler(typed, [3, 2], disjoint=True).sample({"b": np.arange(4)})


def _temporal(graph) -> None:
    """Temporal sampling as the UC Irvine demo and ``gglspeedup.pyg`` run it: int64 node or edge
    times (as the bundled data), both strategies, nodes and links."""
    from .sampling import NeighborSampler

    rng = np.random.default_rng(3)
    seeds = np.arange(8)
    node_time = rng.integers(0, 100, graph.num_nodes)
    edge_time = rng.integers(0, 100, graph.num_edges)
    for times in ({"node_time": node_time}, {"edge_time": edge_time}):
        for strategy in ("uniform", "last"):
            sampler = NeighborSampler(graph, [3, 2], temporal_strategy=strategy, **times)
            sampler.sample(seeds, seed_time=np.full(len(seeds), 50))
            sampler.sample_links(_edges(graph, 2), negatives="binary", pair_time=np.array([50, 60]))


def _disk() -> None:
    """A table on disk as ``train_sage_papers_like.py`` reads its features: float16, mapped
    read-only by ``FeatureStore.from_npy``, with and without a RAM cache."""
    from .feature import FeatureStore

    with tempfile.TemporaryDirectory(prefix="gglspeedup-warmup-") as folder:
        path = os.path.join(folder, "x.npy")
        np.save(path, np.zeros((_ROWS, 128), dtype=np.float16))
        for cache_size in (0, 8 * 128 * 2):
            _gathers(FeatureStore.from_npy(path, cache_size=cache_size, policy=np.arange(_ROWS)))


def _attention() -> None:
    """Attention pooling (softmax, sparsemax, gfusedmax; forward and backward) and Diffuser's
    attention graph + diffusion, as ``attention_pooling_tu.py`` and ``diffuser_listops.py`` run
    them; skipped without PyTorch (their only callers need it)."""
    try:
        import torch
    except ImportError:
        return
    from .attention import AttentionPooling, SequencePattern, diffusion_attention

    torch.manual_seed(0)
    ptr = torch.tensor([0, 5, 9])
    edge_index = torch.tensor([[0, 1, 2, 5, 6], [1, 2, 3, 6, 7]])
    for mapping in ("softmax", "sparsemax", "gfusedmax"):
        pool = AttentionPooling(4, 3, mapping)
        pool(torch.randn(9, 4), ptr, edge_index).sum().backward()
        with torch.no_grad():
            pool(torch.randn(9, 4), ptr, edge_index)
    pattern = SequencePattern(4, 2, 1)
    lengths = np.array([16, 12])  # each sequence its own length, as the ListOps demo batches them
    for step in (0, None):  # training (fresh random keys per step) and evaluation
        q, k, v = (torch.randn(2, 16, 2, 4, requires_grad=True) for _ in range(3))
        graph = pattern.csc(16, batch=2, step=step, lengths=lengths)
        diffusion_attention(q, k, v, graph, hops=2, alpha=0.1).sum().backward()


# Parts that sample (they take the small graph).
_SAMPLING = ("sample", "link", "hetero", "temporal")
# The parts ``main`` runs in its own process when it starts a second one for the rest. Two
# processes may save variants of one kernel at once (``_numba_cache`` locks each save), so the
# split is for balance: from an empty cache, under load, sample + link + hetero + temporal took
# 755 s against gather + disk + attention's 585 s; temporal (94 s of it) runs last in the second
# process, after these have cached the kernels it shares with them.
_FIRST_PROCESS = ("sample", "link", "hetero")
_RUNNERS = {
    "sample": _sample,
    "link": _link,
    "hetero": _hetero,
    "temporal": _temporal,
    "gather": _gather,
    "disk": _disk,
    "attention": _attention,
}


def _check_parts(parts) -> list:
    parts = list(parts)
    unknown = [part for part in parts if part not in _RUNNERS]
    if unknown:
        raise ValueError(f"parts must be some of {list(PARTS)}, got {unknown}")
    return parts


def warmup(parts=PARTS, verbose: bool = False) -> dict:
    """Run ``parts`` (some of :data:`PARTS`) on small inputs, in this process; seconds per part.

    Compiles (or loads from the cache) every kernel variant those paths use on the CPU:
    neighbour sampling with and without replacement and weights, ``-1`` fanouts, graphs with and
    without edge ids (in memory and memory-mapped), hops short and long enough to run
    interruptibly; feature gathers of 4- and 8-byte row words by the serial and the parallel
    kernels, a table on disk with and without a RAM cache; link sampling with each kind of
    negatives and exclusion; typed, temporal and disjoint sampling; attention pooling and
    diffusion (with PyTorch installed).
    """
    parts = _check_parts(parts)
    graph = _graph() if any(part in _SAMPLING for part in parts) else None
    seconds = {}
    for part in parts:
        start = time.perf_counter()
        _RUNNERS[part](graph) if part in _SAMPLING else _RUNNERS[part]()
        seconds[part] = time.perf_counter() - start
        if verbose:
            print(f"warmup {part}: {seconds[part]:.1f} s", flush=True)
    return seconds


def _start_other_process(parts: list):
    """``python -m gglspeedup warmup --parts PARTS --jobs 1`` started in the background (its
    lines go to this process's stdout), or ``None`` without parts."""
    if not parts:
        return None
    import subprocess
    import sys

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "gglspeedup", "warmup", "--parts", ",".join(parts), "--jobs", "1"]
    return subprocess.Popen(command, env=env)


def compiled_kernels() -> dict:
    """Every disk-cached Numba kernel of gglspeedup loaded in this process: ``"module.name"`` ->
    the set of its compiled signatures (as text). Comparing two snapshots shows what a piece of
    code compiled (or loaded from the cache) in between; the tests prove with it that after
    :func:`warmup` a training epoch adds nothing."""
    import gc

    from numba.core.dispatcher import Dispatcher

    kernels: dict = {}
    for obj in gc.get_objects():
        if isinstance(obj, Dispatcher) and getattr(obj, "_cache", None) is not None:
            function = obj.py_func
            module = getattr(function, "__module__", "") or ""
            if module.startswith("gglspeedup") and type(obj._cache).__name__ != "NullCache":
                signatures = kernels.setdefault(f"{module}.{function.__qualname__}", set())
                signatures.update(str(signature) for signature in obj.signatures)
    return kernels


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gglspeedup warmup", description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, some of {', '.join(PARTS)}")
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes: 2 runs sample, link and hetero in this one and the rest in a second one, "
        "side by side (default: 2 with two cores or more, else 1)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    try:
        parts = _check_parts(part.strip() for part in args.parts.split(",") if part.strip())
    except ValueError as error:  # _check_parts names the argument of warmup(); here it is --parts
        parser.error(f"--{error}")
    if not parts:  # --parts '' compiled nothing and said "warmup of  done"
        parser.error(f"--parts must name at least one of {', '.join(PARTS)}, got {args.parts!r}")
    import numba  # noqa: F401  (a Python without it stops here, before a second process starts)

    start, cpu = time.perf_counter(), time.process_time()
    here = [part for part in parts if part in _FIRST_PROCESS or args.jobs == 1]
    rest = [part for part in parts if part not in here]
    other = _start_other_process(sorted(rest, key=lambda part: part in _SAMPLING))  # temporal last
    try:
        warmup(here, verbose=True)
    except BaseException:  # Ctrl-C or a failure here: the other process stops too
        if other is not None:
            other.terminate()
            other.wait()
        raise
    status = 0 if other is None else other.wait()
    if status:
        print(f"warmup: the process compiling {[p for p in parts if p not in here]} failed (exit {status})")
        return status
    print(
        f"warmup of {', '.join(parts)} done in {time.perf_counter() - start:.1f} s "
        f"({time.process_time() - cpu + _children_cpu():.1f} s of CPU): Numba's cache now holds these kernels"
    )
    return 0


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the second warm-up process)."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime

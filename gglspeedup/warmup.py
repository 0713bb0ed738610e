"""``python -m gglspeedup warmup``: compile the CPU kernels once, ahead of the first epoch.

The CPU kernels are Numba functions compiled on first use and cached on disk (``cache=True``), so
only the first process that uses one pays its compile (seconds per kernel, about 8 s of CPU for a
sampler plus a feature store); later processes load it (under a second). This runs the common
paths on tiny inputs, so that first process is this command instead of a training run::

    python -m gglspeedup warmup                 # sampling, feature gathers, link and typed sampling
    python -m gglspeedup warmup --parts sample,gather

Where the cache goes is Numba's choice, made per kernel: beside the package's sources
(``__pycache__``) when that folder is writable, else the user cache folder
(``$XDG_CACHE_HOME/numba``, by default ``~/.cache/numba``), so a package installed read-only
still caches; ``NUMBA_CACHE_DIR`` overrides both. The cache is keyed by the source files, the
argument types and the CPU, so run this once per environment and machine, after installing or
upgrading.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

__all__ = ["warmup", "PARTS", "main"]

PARTS = ("sample", "gather", "link", "hetero")


def _graph():
    from .graph import CSRGraph

    rng = np.random.default_rng(0)
    return CSRGraph.from_edge_index(rng.integers(0, 64, size=(2, 512)), num_nodes=64, weights=rng.random(512) + 0.1)


def _sample(graph) -> None:
    from .sampling import NeighborSampler

    seeds = np.arange(8)
    for replace in (False, True):
        for weighted in (False, True):
            NeighborSampler(graph, [3, -1], replace=replace, weighted=weighted).sample(seeds)


def _gather(graph) -> None:
    from .feature import FeatureStore

    ids = np.array([5, 0, 5, 63])
    for dtype in (np.float32, np.float64, np.float16, np.int64):
        store = FeatureStore(np.zeros((graph.num_nodes, 4), dtype=dtype), graph=graph)
        store[ids]
        store.gather(ids, out=np.empty((len(ids), 4), dtype=dtype))


def _link(graph) -> None:
    from .sampling import NeighborSampler

    sampler = NeighborSampler(graph, [3, 2])
    pairs = np.array([[0, 1, 2], [3, 4, 5]])
    for negatives in (None, "binary", "per_source", "triplet"):
        for exclude in ("self", "reverse", None):
            sampler.sample_links(pairs, negatives=negatives, exclude=exclude)


def _hetero(graph) -> None:
    from .heterograph import HeteroGraph
    from .sampling import HeteroNeighborSampler

    rng = np.random.default_rng(1)
    typed = HeteroGraph(
        {
            ("a", "to", "b"): rng.integers(0, 16, size=(2, 64)),
            ("b", "to", "a"): rng.integers(0, 16, size=(2, 64)),
            ("b", "self", "b"): rng.integers(0, 16, size=(2, 64)),
        },
        {"a": 16, "b": 16},
    )
    sampler = HeteroNeighborSampler(typed, [3, -1])
    sampler.sample({"b": np.arange(4)})
    sampler.sample_links(np.array([[0, 1], [2, 3]]), edge_type=("a", "to", "b"), negatives="binary")


_RUNNERS = {"sample": _sample, "gather": _gather, "link": _link, "hetero": _hetero}


def warmup(parts=PARTS, verbose: bool = False) -> dict:
    """Run ``parts`` (some of :data:`PARTS`) on tiny inputs; seconds per part.

    Compiles (or loads from the cache) every kernel those paths use on the CPU: neighbour
    sampling with and without replacement and weights, ``-1`` fanouts, feature gathers of the
    common dtypes, link sampling with each kind of negatives and exclusion, typed sampling.
    """
    unknown = [part for part in parts if part not in _RUNNERS]
    if unknown:
        raise ValueError(f"parts must be some of {list(PARTS)}, got {unknown}")
    graph = _graph()
    seconds = {}
    for part in parts:
        start = time.perf_counter()
        _RUNNERS[part](graph)
        seconds[part] = time.perf_counter() - start
        if verbose:
            print(f"warmup {part}: {seconds[part]:.2f} s", flush=True)
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gglspeedup warmup", description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, some of {', '.join(PARTS)}")
    args = parser.parse_args(argv)
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    seconds = warmup(parts, verbose=True)
    print(f"warmup done in {sum(seconds.values()):.2f} s (Numba's cache now holds these kernels)")
    return 0

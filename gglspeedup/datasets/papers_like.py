"""``papers-like``: a synthetic graph of ogbn-papers100M's shape, built out of core.

ogbn-papers100M has 111,059,956 nodes and 1,615,685,872 edges (14.55 per node). ``papers-like:N``
is :func:`~gglspeedup.datasets.synthetic_powerlaw` with ``N`` nodes and a mean degree of 14.6
before repeated pairs are dropped (14.56 stored edges per node at 2M nodes), streamed through
:func:`~gglspeedup.datasets.build_csr` into a cached graph folder, so the full shape (about 1.6B
edges, 6.5 GB of int32 indices) is generated without ever holding its edge list. Features for it
are written to a ``.npy`` file chunk by chunk (:func:`papers_like_features`) and read back through
:meth:`~gglspeedup.FeatureStore.from_npy`.

The cache folder is ``$GGLSPEEDUP_CACHE`` or ``~/.cache/gglspeedup``; a graph already there (a
complete folder: builds appear only when finished) is memory-mapped instead of rebuilt.
"""

from __future__ import annotations

import os

import numpy as np

from .._replace import temporary_path
from ..validation import check_bool, check_int

__all__ = [
    "PAPERS_NODES",
    "PAPERS_DEGREE",
    "cache_folder",
    "load_papers_like",
    "papers_like_features",
    "papers_like_labels",
]

PAPERS_NODES = 111_059_956
PAPERS_DEGREE = 14.6
_FEATURE_CHUNK = 1 << 20  # rows generated and written at a time


def cache_folder() -> str:
    """Where generated datasets are kept: ``$GGLSPEEDUP_CACHE`` or ``~/.cache/gglspeedup``."""
    return os.environ.get("GGLSPEEDUP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gglspeedup")


def load_papers_like(
    num_nodes: int = PAPERS_NODES, seed: int = 0, *, folder=None, memory="2G", rebuild=False, reorder=None
):
    """The ``papers-like`` graph with ``num_nodes`` nodes: ``(graph, built)``, ``graph`` a
    memory-mapped :class:`~gglspeedup.CSRGraph` and ``built`` whether this call built it (else it
    was found in ``folder``, default :func:`cache_folder`). ``reorder="degree"``: the same graph
    renumbered hubs first (``build_csr(..., reorder=)``; its own folder, ``...-degree``), its
    ``node_order`` mapping back to the ids of the graph without ``reorder``."""
    num_nodes = check_int("num_nodes", num_nodes, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    rebuild = check_bool("rebuild", rebuild)  # "no" would rebuild (hours at the full size)
    from .._reorder import check_order_name
    from .build import BUILD_ORDERS

    reorder = check_order_name("reorder", reorder, BUILD_ORDERS)
    folder = cache_folder() if folder is None else os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"papers-like-{num_nodes}-{seed}" + (f"-{reorder}" if reorder else ""))
    if os.path.isdir(path) and not rebuild:
        from ..graph import CSRGraph

        try:
            return CSRGraph.load(path), False
        except ValueError:
            pass  # an unreadable cache entry is rebuilt
    from .synthetic import synthetic_powerlaw

    return synthetic_powerlaw(num_nodes, PAPERS_DEGREE, seed=seed, out=path, memory=memory, reorder=reorder), True


def papers_like_labels(num_nodes: int, *, num_classes: int = 172, seed: int = 0) -> np.ndarray:
    """The int64 ``(num_nodes,)`` labels :func:`papers_like_features` draws for the same arguments
    (so a cached feature file's labels can be had again without rewriting the file)."""
    return _labels(num_nodes, num_classes, seed)[0]


def _labels(num_nodes, num_classes, seed) -> tuple:
    """``(labels, rng)``: the labels and the generator that draws the features after them."""
    num_nodes = check_int("num_nodes", num_nodes, minimum=1)
    num_classes = check_int("num_classes", num_classes, minimum=1)
    rng = np.random.default_rng([check_int("seed", seed, minimum=0), 4])
    return rng.integers(0, num_classes, size=num_nodes, dtype=np.int64), rng


def papers_like_features(
    path, num_nodes: int, dim: int = 128, *, num_classes: int = 172, seed: int = 0, dtype=np.float16, overwrite=False
):
    """Write a ``(num_nodes, dim)`` feature table to the ``.npy`` file ``path`` chunk by chunk and
    return ``(path, labels)``: noise plus a class centroid per row (as
    :func:`~gglspeedup.datasets.synthetic_features`), ``num_classes`` uniform labels (papers100M
    has 172; :func:`papers_like_labels`). Memory: one chunk of rows, whatever ``num_nodes`` is. The
    file is written under a temporary name and renamed when complete.

    A file already at ``path`` raises ``FileExistsError`` naming it (a ``.npy`` of the user's
    cannot be told from one written here), unless ``overwrite=True``."""
    dim = check_int("dim", dim, minimum=1)
    labels, rng = _labels(num_nodes, num_classes, seed)
    num_nodes = labels.shape[0]
    centroids = rng.standard_normal((num_classes, dim), dtype=np.float32)
    path = os.fspath(path)
    overwrite = check_bool("overwrite", overwrite)
    _refuse_existing(path, overwrite)
    tmp = temporary_path(os.path.join(os.path.dirname(path) or ".", os.path.basename(path)), "tmp", ".npy")
    try:
        with open(tmp, "xb") as handle:  # plain writes: no mapping, so written rows never count as ours
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False}
            np.lib.format.write_array_header_1_0(handle, {**header, "shape": (num_nodes, dim)})
            for start in range(0, num_nodes, _FEATURE_CHUNK):
                stop = min(num_nodes, start + _FEATURE_CHUNK)
                rows = rng.standard_normal((stop - start, dim), dtype=np.float32)
                rows += centroids[labels[start:stop]]
                handle.write(rows.astype(dtype).tobytes())
        _refuse_existing(path, overwrite)  # again: the write may have taken minutes
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path, labels


def _refuse_existing(path: str, overwrite: bool) -> None:
    if not overwrite and os.path.lexists(path):
        raise FileExistsError(
            f"{path!r} already exists: papers_like_features writes a new file (overwrite=True replaces it)"
        )

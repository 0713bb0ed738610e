"""Synthetic graphs, features, labels and splits for benchmarks and demos.

Everything here is deterministic for a given ``seed`` (NumPy's PCG64 stream), so two benchmark runs
measure the same graph.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._csr_kernels import compact_rows, sort_unique_rows
from .._threading import prefer_tbb
from ..graph import CSRGraph
from ..validation import check_allocation, check_int

prefer_tbb()  # before any parallel launch: see gglspeedup._threading

__all__ = ["synthetic_powerlaw", "synthetic_features", "synthetic_labels", "random_split"]

_CHUNK = 1 << 22  # endpoints drawn per step: bounds the float64 temporaries to ~32 MiB each


def _check_count(name: str, value, minimum: int = 0) -> int:
    return check_int(name, value, minimum=minimum)


def _check_seed(seed) -> int:
    return check_int("seed", seed, minimum=0, expected="a non-negative int")


def synthetic_powerlaw(
    num_nodes: int, avg_degree: float, seed: int = 0, exponent: float = 2.5, *, out=None, memory="2G", reorder=None
) -> CSRGraph:
    """A symmetric Chung-Lu style power-law graph, built directly in CSR form.

    ``num_nodes * avg_degree / 2`` undirected edges are drawn with both endpoints chosen with
    probability proportional to a weight ``w_i = (i + 1) ** (-1 / (exponent - 1))`` (so degrees
    follow a power law with that exponent); node ids are then shuffled so that degree does not
    follow id order. Each edge is stored in both directions; self loops and repeated edges are
    dropped, so the graph is simple and ``num_edges`` is a little below
    ``num_nodes * avg_degree`` (repeats concentrate between hubs).

    Parameters
    ----------
    num_nodes : int
        Number of nodes (>= 1).
    avg_degree : float
        Target mean degree before repeated edges are dropped (>= 0).
    seed : int
        Seed of the NumPy PCG64 stream; the same seed gives the same graph.
    exponent : float
        Power-law exponent of the degree distribution, > 2 (2.5 by default; social and
        co-purchase graphs lie between 2 and 3).

    Returns
    -------
    CSRGraph
        int64 ``indptr`` (num_nodes + 1,) and ``indices`` (num_edges,), int32 while the ids fit
        (as every :class:`~gglspeedup.CSRGraph`), each row sorted ascending;
        ``v`` in row ``u`` if and only if ``u`` in row ``v``.

    out : str or path, optional
        Build the graph out of core into this folder instead of in memory: the pairs are drawn
        in chunks and streamed into :func:`~gglspeedup.datasets.build_csr` (rows sorted and
        deduplicated bucket by bucket), so the edge list is never held; the result is the same
        graph, memory-mapped from ``out``. A graph saved at ``out`` earlier is replaced; anything
        else there raises ``FileExistsError`` (as ``build_csr``).
    memory : int or str
        With ``out``: the build's buffer budget (see ``build_csr``).
    reorder : {None, "degree"}
        With ``out``: renumber the nodes as ``build_csr(..., reorder=)`` does, by how often each
        node was drawn (repeated pairs included, so hubs first; ties by id); the graph keeps the
        order (``node_order``: new id -> the id this generator gives without ``reorder``).

    Notes
    -----
    Built in one pass over the drawn pairs (count, fill, sort and deduplicate each row in
    parallel with Numba), never as a per-edge Python loop: 2,000,000 nodes with
    ``avg_degree=32`` (63.7M stored edges) take about 15 s and 1.4 GiB peak memory on 2 cores.
    """
    num_nodes = _check_count("num_nodes", num_nodes, minimum=1)
    if isinstance(avg_degree, bool) or not isinstance(avg_degree, (int, float, np.integer, np.floating)):
        raise TypeError(f"avg_degree must be a number, got {avg_degree!r}")
    if not np.isfinite(avg_degree) or avg_degree < 0:
        raise ValueError(f"avg_degree must be a finite number >= 0, got {avg_degree!r}")
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float, np.integer, np.floating)):
        raise TypeError(f"exponent must be a number, got {exponent!r}")
    if not np.isfinite(exponent) or exponent <= 2:
        raise ValueError(f"exponent must be a finite number > 2, got {exponent!r}")
    seed = _check_seed(seed)
    if reorder is not None and out is None:
        raise ValueError(f"reorder={reorder!r} needs out= (the out-of-core build); got out=None")
    num_pairs = int(num_nodes * float(avg_degree) / 2)
    check_allocation("num_nodes", num_nodes, 24)  # the id shuffle, degree counts and indptr
    if out is not None:
        from .build import build_csr

        pairs = PowerlawPairs(num_nodes, num_pairs, seed, float(exponent))
        return build_csr(pairs, out, num_nodes, memory=memory, reorder=reorder, _unique_rows=True)
    check_allocation("num_nodes * avg_degree", num_pairs, 40)  # two int64 endpoints, draws and a fill per pair
    rng = np.random.default_rng(seed)
    src = np.empty(num_pairs, dtype=np.int64)
    dst = np.empty(num_pairs, dtype=np.int64)
    alpha = 1.0 / (float(exponent) - 1.0)
    uniform = np.empty(min(num_pairs, _CHUNK), dtype=np.float64)
    for out in (src, dst):
        for start in range(0, num_pairs, _CHUNK):
            chunk = out[start : start + _CHUNK]
            draws = uniform[: len(chunk)]
            rng.random(out=draws)
            _powerlaw_endpoints_into(draws, chunk, num_nodes, alpha)
    shuffle = rng.permutation(num_nodes)
    _relabel(src, shuffle)
    _relabel(dst, shuffle)

    counts = _count_endpoints(src, dst, num_nodes)
    indptr = np.cumsum(counts)  # counts[0] == 0, so indptr[0] == 0
    indices = _fill_rows(src, dst, indptr)
    del src, dst
    lengths = sort_unique_rows(indptr, indices)
    compact_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(lengths, out=compact_indptr[1:])
    indices = compact_rows(indptr, indices, compact_indptr)
    return CSRGraph(compact_indptr, indices)


class PowerlawPairs:
    """The edges of :func:`synthetic_powerlaw` as a re-iterable stream of ``(2, k)`` chunks, both
    directions of every pair but self loops (duplicates kept: the builder drops them).

    The draws are the in-memory generator's, taken chunk by chunk: the sources are the first
    ``num_pairs`` doubles of ``default_rng(seed)``'s PCG64 stream, the targets the next
    ``num_pairs`` (the same stream advanced, ``PCG64.advance``), and the id shuffle the
    permutation drawn after both; so both paths build the same graph.
    """

    reiterable = True

    def __init__(self, num_nodes: int, num_pairs: int, seed: int, exponent: float):
        self.num_nodes, self.num_pairs, self.seed = num_nodes, num_pairs, seed
        self.alpha = 1.0 / (exponent - 1.0)
        shuffle = self._generator(2 * num_pairs).permutation(num_nodes)
        self.shuffle = shuffle.astype(np.int32) if num_nodes <= np.iinfo(np.int32).max else shuffle

    def _generator(self, skip: int) -> np.random.Generator:
        bits = np.random.PCG64(self.seed)  # what default_rng(seed) wraps
        bits.advance(skip)  # one 64-bit step per double drawn
        return np.random.Generator(bits)

    def __iter__(self):
        for u, v in self.endpoints(_CHUNK, reuse=False):
            keep = u != v
            u, v = u[keep], v[keep]
            yield np.stack((np.concatenate((u, v)), np.concatenate((v, u))))

    def endpoints(self, chunk: int = _CHUNK, *, reuse: bool = True):
        """The drawn pairs as ``(sources, targets)`` id arrays of up to ``chunk`` pairs each, self
        loops included, one direction: the same pairs whatever ``chunk`` is. ``reuse=True`` writes
        every chunk into the same two arrays (use each before taking the next)."""
        sources, targets = self._generator(0), self._generator(self.num_pairs)
        draws = np.empty(max(1, min(self.num_pairs, chunk)), dtype=np.float64)
        buffers = [np.empty(len(draws), self.shuffle.dtype) for _ in range(2)]
        for start in range(0, self.num_pairs, chunk):
            count = min(chunk, self.num_pairs - start)
            ends = []
            for generator, buffer in zip((sources, targets), buffers):
                generator.random(out=draws[:count])
                ids = buffer[:count] if reuse else np.empty(count, self.shuffle.dtype)
                _powerlaw_endpoints_into(draws[:count], ids, self.num_nodes, self.alpha)
                _relabel(ids, self.shuffle)
                ends.append(ids)
            yield ends[0], ends[1]


@njit(parallel=True, cache=True)
def _powerlaw_endpoints_into(uniform, out, num_nodes, alpha):
    # Inverse CDF of the density x ** -alpha on [1, num_nodes + 1): node floor(x) - 1 is drawn with
    # probability ~ (node + 1) ** -alpha.
    beta = 1.0 - alpha
    top = (num_nodes + 1.0) ** beta - 1.0
    inverse = 1.0 / beta
    for i in prange(len(uniform)):
        node = np.int64((uniform[i] * top + 1.0) ** inverse) - 1
        out[i] = min(max(node, 0), num_nodes - 1)  # guards the rounding at the upper end


@njit(parallel=True, cache=True)
def _relabel(ids, mapping):
    for i in prange(len(ids)):
        ids[i] = mapping[ids[i]]


@njit(cache=True)
def _count_endpoints(src, dst, num_nodes):
    counts = np.zeros(num_nodes + 1, dtype=np.int64)
    for i in range(len(src)):
        if src[i] != dst[i]:
            counts[src[i] + 1] += 1
            counts[dst[i] + 1] += 1
    return counts


@njit(cache=True)
def _fill_rows(src, dst, indptr):
    cursor = indptr[:-1].copy()
    indices = np.empty(indptr[-1], dtype=np.int64)
    for i in range(len(src)):
        u, v = src[i], dst[i]
        if u != v:
            indices[cursor[u]] = v
            cursor[u] += 1
            indices[cursor[v]] = u
            cursor[v] += 1
    return indices


def synthetic_labels(num_nodes: int, num_classes: int = 16, seed: int = 0) -> np.ndarray:
    """Uniform random class labels, int64 ``(num_nodes,)`` in ``[0, num_classes)``.

    Pair them with ``synthetic_features(..., labels=y)`` so the features carry the class signal.
    """
    num_nodes = _check_count("num_nodes", num_nodes)
    num_classes = _check_count("num_classes", num_classes, minimum=1)
    rng = np.random.default_rng([_check_seed(seed), 1])
    return rng.integers(0, num_classes, size=num_nodes, dtype=np.int64)


def synthetic_features(num_nodes: int, dim: int = 128, seed: int = 0, labels=None, signal: float = 1.0) -> np.ndarray:
    """Random float32 features ``(num_nodes, dim)``, C-contiguous.

    Standard normal noise; with ``labels`` (int array ``(num_nodes,)``), each row also gets
    ``signal`` times a random unit-variance centroid of its class, so a model can learn the labels
    from the features (a Gaussian mixture; ``signal=1.0`` gives a task that is learnable but not
    trivial).
    """
    num_nodes = _check_count("num_nodes", num_nodes)
    dim = _check_count("dim", dim, minimum=1)
    rng = np.random.default_rng([_check_seed(seed), 2])
    x = rng.standard_normal((num_nodes, dim), dtype=np.float32)
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (num_nodes,) or labels.dtype.kind not in "iu":
            raise ValueError(f"labels must be an int array of shape ({num_nodes},), got {labels.dtype} {labels.shape}")
        if labels.size and labels.min() < 0:
            raise ValueError(f"labels must be >= 0, got {labels.min()}")
        num_classes = int(labels.max()) + 1 if labels.size else 0
        centroids = rng.standard_normal((num_classes, dim), dtype=np.float32)
        x += np.float32(signal) * centroids[labels]
    return x


def random_split(num_nodes: int, fractions=(0.6, 0.2, 0.2), seed: int = 0) -> dict[str, np.ndarray]:
    """A random train/val/test split: dict of ascending int64 node-id arrays, disjoint.

    ``fractions`` gives the train, val and test shares (non-negative, summing to at most 1).
    """
    num_nodes = _check_count("num_nodes", num_nodes)
    try:
        shares = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):  # "abc": float("a")'s message named no argument
        shares = ()
    # not (... >= 0) also refuses nan, which int() below would have failed on unnamed
    if len(shares) != 3 or not all(f >= 0 for f in shares) or not sum(shares) <= 1 + 1e-9:
        raise ValueError(f"fractions must be three shares >= 0 summing to <= 1, got {fractions!r}")
    fractions = shares
    order = np.random.default_rng([_check_seed(seed), 3]).permutation(num_nodes)
    n_train = int(fractions[0] * num_nodes)
    n_val = int(fractions[1] * num_nodes)
    n_test = min(round(fractions[2] * num_nodes), num_nodes - n_train - n_val)
    bounds = np.cumsum([0, n_train, n_val, n_test])
    return {
        name: np.sort(order[bounds[i] : bounds[i + 1]]).astype(np.int64)
        for i, name in enumerate(("train", "val", "test"))
    }

"""Attention patterns over token sequences: an implicit rule that emits an in-CSR, never an L x L matrix.

A :class:`SequencePattern` holds the rule (window, random keys, global tokens, seed); its
:meth:`~SequencePattern.csc` builds the :class:`~gglspeedup.attention.AttentionGraph` of a batch of
sequences: row ``b * seq_len + i`` lists the keys query token ``i`` of sequence ``b`` attends to
(sorted), in one count pass, a scan and one fill pass, parallel over rows, on the CPU or a GPU.
Memory is O(edges); sequences of 64k tokens build on a laptop.

>>> pattern = SequencePattern(window=4, num_random=1, num_global=1, seed=0)
>>> graph = pattern.csc(12, batch=2, step=0)
>>> graph.num_nodes, graph.indptr.dtype.name, graph.indices.dtype.name
(24, 'int32', 'int32')
>>> pattern.csc(12) is pattern.csc(12)     # fixed patterns (step=None) are built once and kept
True
"""

from __future__ import annotations

import functools
import threading
from typing import Any, NamedTuple

import numpy as np

from ..._splitmix import MASK
from ...device import as_device
from ...validation import available_memory, check_bool, check_int, int_array
from .._pickling import RemadeOnLoad
from .graph import AttentionGraph

__all__ = ["SequencePattern", "LAYOUTS", "RANDOM_MODES"]

LAYOUTS = ("diffuser", "sliding")
RANDOM_MODES = ("uniform", "power_law")
_FIXED_KEY = MASK  # the step key of fixed patterns (step=None); steps are 0 .. 2**63 - 1
_COUNT_LIMIT = 2**61  # window, num_random, num_global: their sum stays below 2**63 (int64)
_CHECK_MEMORY_FROM = 256 << 20  # bytes of a build from which the memory available is read (17 us a read)


class _Arrays(NamedTuple):
    """What the kernels read (see ``_kernels/pattern_rows.py``)."""

    lengths: Any  # int64 (S,) tokens per sequence
    seq_len: int  # rows per sequence
    gptr: Any  # int64 (S + 1,) global tokens of sequence s: gids[gptr[s]:gptr[s+1]]
    gids: Any  # int64, sorted per sequence
    layout: int
    half: int
    num_random: int
    mode: int
    cdf: Any  # float64 (max length,) power-law distance table (one zero otherwise)
    states: Any  # uint64 (S,) per-sequence RNG states
    num_rows: int


@functools.cache
def pattern_driver(device):
    """The pattern driver of a :class:`~gglspeedup.device.Device` (one per device, made once;
    the contract: :class:`gglspeedup.attention._drivers.PatternDriver`)."""
    if device.is_cuda:
        from ._kernels.pattern_cuda import CUDAPatternDriver

        return CUDAPatternDriver(device)
    from ._kernels.pattern_cpu import CPUPatternDriver

    return CPUPatternDriver()


def _sequence_states(seed: int, key: int, count: int, same: bool) -> np.ndarray:
    """uint64 state of each sequence: the samplers' ``hop_state(seed, key, s)`` (s = 0 for all when
    ``same``)."""
    from ..._rng import hop_states  # (imports Numba: not at this module's import)

    sequences = np.zeros(count, np.uint64) if same else np.arange(count, dtype=np.uint64)
    return hop_states(seed, key, sequences)


class SequencePattern(RemadeOnLoad, remake={"_lock": threading.Lock, "_cache": dict}):
    """The rule of a sparse attention pattern over sequences of tokens.

    Pickle / ``copy.deepcopy`` (a model holding its pattern) take the rule without the lock, and
    without the cache (its graphs are a pure function of the rule: rebuilt on first use).

    Parameters
    ----------
    window : int
        Even, >= 2. ``layout="diffuser"``: chunks of ``h = window // 2`` tokens and a query sees
        its own chunk and both neighbours (``|key // h - query // h| <= 1``, Diffuser's
        overlapping blocks); ``layout="sliding"``: a true band ``|key - query| <= h``.
    num_random : int
        Random keys per query, drawn without replacement among the keys that are neither in its
        window nor global (all of them when fewer are left).
    num_global : int
        Global tokens per sequence, drawn uniformly from ``[window, length)`` as Diffuser does:
        they attend to every token and every token attends to them.
    layout : {"diffuser", "sliding"}
    random : {"uniform", "power_law"}
        ``"power_law"``: a random key at distance ``d`` has weight ``d ** -exponent`` (the
        fractional-attention idea as a sampler): long-range keys, more of them near.
    exponent : float
        In ``(0, 4]``, for ``random="power_law"``.
    seed : int
        The RNG key: draws are a pure function of ``(seed, step, sequence, query)``.
    compat : None or "diffuser"
        ``"diffuser"`` reproduces Diffuser's own pattern bit for bit (its NumPy ``RandomState``
        draws over a ``max_len`` matrix and the prefix rule for shorter sequences; see
        :mod:`gglspeedup.attention.sequence._diffuser_compat`). Layout "diffuser", uniform, fixed (``step=None``).
    max_len : int
        The longest ``window``; with ``compat="diffuser"``, Diffuser's fixed matrix size (4096) and
        the longest sequence (its ``max_len x max_len`` cells are shuffled once: 4 bytes a cell,
        8 past 2**31 cells, refused by name when more than the memory available).
    device : str or Device
        Where patterns are built and live: ``"cpu"`` or ``"cuda:<i>"`` (the same edges).
    """

    def __init__(
        self,
        window: int = 64,
        num_random: int = 64,
        num_global: int = 64,
        *,
        layout: str = "diffuser",
        random: str = "uniform",
        exponent: float = 1.0,
        seed: int = 0,
        compat: str | None = None,
        max_len: int = 4096,
        device: Any = "cpu",
    ):
        # counts travel as int64 through the kernels, and window + num_random + num_global with them
        below = {"below": _COUNT_LIMIT, "expected": "an int in [0, 2**61)"}
        self.window = check_int("window", window, minimum=2, below=_COUNT_LIMIT, expected="an even int in [2, 2**61)")
        if self.window % 2:
            raise ValueError(f"window must be even (chunks of window // 2 tokens), got {window}")
        self.num_random = check_int("num_random", num_random, minimum=0, **below)
        self.num_global = check_int("num_global", num_global, minimum=0, **below)
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if random not in RANDOM_MODES:
            raise ValueError(f"random must be one of {RANDOM_MODES}, got {random!r}")
        if isinstance(exponent, bool) or not isinstance(exponent, (int, float, np.floating, np.integer)):
            raise TypeError(f"exponent must be a float, got {type(exponent).__name__}")
        if not 0.0 < float(exponent) <= 4.0:
            raise ValueError(f"exponent must lie in (0, 4], got {exponent}")
        self.layout, self.random, self.exponent = layout, random, float(exponent)
        self.seed = check_int("seed", seed, minimum=0, below=2**64)
        if compat not in (None, "diffuser"):
            raise ValueError(f"compat must be None or 'diffuser', got {compat!r}")
        self.compat = compat
        self.max_len = check_int("max_len", max_len, minimum=1)
        if self.window > self.max_len:
            raise ValueError(f"window must be <= max_len = {self.max_len} (or raise max_len), got {window}")
        if compat == "diffuser":
            if layout != "diffuser" or random != "uniform":
                raise ValueError("compat='diffuser' needs layout='diffuser' and random='uniform'")
            if self.max_len % (self.window // 2):
                raise ValueError(f"max_len must be a multiple of window // 2 = {self.window // 2}, got {max_len}")
            if self.max_len * self.num_random > self.max_len**2:
                raise ValueError("compat='diffuser' draws max_len * num_random cells of a max_len**2 matrix: too many")
            if self.num_global > self.max_len - self.window:
                raise ValueError(f"num_global must be <= max_len - window = {self.max_len - self.window}")
        self.device = as_device(device).check_available()
        self._cache: dict = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        extra = f", compat={self.compat!r}, max_len={self.max_len}" if self.compat else ""
        return (
            f"SequencePattern(window={self.window}, num_random={self.num_random}, num_global={self.num_global}, "
            f"layout={self.layout!r}, random={self.random!r}, exponent={self.exponent}, seed={self.seed}{extra}, "
            f"device='{self.device}')"
        )

    # -- building ---------------------------------------------------------------------------
    def csc(
        self,
        seq_len: int,
        batch: int = 1,
        step: int | None = None,
        lengths=None,
        *,
        shared: bool = False,
        index_dtype=None,
    ) -> AttentionGraph:
        """The in-CSR (rows = query tokens) of ``batch`` sequences of ``seq_len`` positions.

        Parameters
        ----------
        seq_len : int
            Positions per sequence (rows per sequence in the graph).
        batch : int
            Sequences. Node ``b * seq_len + i`` is token ``i`` of sequence ``b``.
        step : int or None
            ``None``: the fixed pattern, the same for every sequence and every call (built once,
            then returned from a cache at no cost; with ``lengths`` it is rebuilt per call). An int
            ``>= 0``: fresh random keys and global tokens per ``(step, sequence)``.
        lengths : array of int, optional
            Each sequence's own length (``<= seq_len``); positions past it are padding: isolated
            nodes without edges, so features keep their ``(batch, seq_len)`` layout.
        shared : bool
            Return one ``seq_len``-node graph that every sequence of the batch uses
            (``graph.batch`` records how many), instead of ``batch`` copies (with ``step``: fresh
            random keys per step, the same for every sequence); needs ``lengths=None``.
        index_dtype : None, numpy.int32 or numpy.int64
            ``None`` picks int32 when the indices fit (``indptr`` too when the edges fit).

        Returns
        -------
        AttentionGraph
        """
        seq_len = check_int("seq_len", seq_len, minimum=1)
        batch = check_int("batch", batch, minimum=1)
        if step is not None:
            step = check_int("step", step, minimum=0, below=2**63)
        shared = check_bool("shared", shared)  # a string such as "no" is not read as true
        if shared and lengths is not None:
            raise ValueError("shared=True needs lengths=None (one pattern for every sequence of the batch)")
        if lengths is not None:
            lengths = int_array("lengths", lengths)
            if lengths.shape[0] != batch:
                raise ValueError(f"lengths must have batch = {batch} entries, got {lengths.shape[0]}")
            if lengths.size and (lengths.min() < 1 or lengths.max() > seq_len):
                bad = int(np.argmax((lengths < 1) | (lengths > seq_len)))
                raise ValueError(f"lengths must lie in [1, seq_len = {seq_len}]: lengths[{bad}] = {lengths[bad]}")
        if self.compat == "diffuser":
            if step is not None:
                raise ValueError("compat='diffuser' patterns are fixed: step must be None")
            if seq_len > self.max_len:
                raise ValueError(f"seq_len must be <= max_len = {self.max_len} with compat='diffuser', got {seq_len}")
        if index_dtype is not None and _dtype_or_none(index_dtype) not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise TypeError(f"index_dtype must be None, numpy.int32 or numpy.int64, got {index_dtype!r}")
        rows = seq_len if shared else seq_len * batch
        if index_dtype is not None and np.dtype(index_dtype) == np.int32 and rows >= 2**31:
            raise ValueError(f"index_dtype int32 cannot hold {rows} nodes (>= 2**31); use numpy.int64")
        key = None
        if step is None and lengths is None:  # per-batch lengths vary: not worth keeping
            key = (seq_len, batch, None if lengths is None else lengths.tobytes(), shared, index_dtype)
            with self._lock:
                cached = self._cache.get(key)
            if cached is not None:
                return cached
        self._check_memory(seq_len, batch, shared)
        graph = self._build(seq_len, batch, step, lengths, shared, index_dtype)
        if key is not None:
            with self._lock:
                graph = self._cache.setdefault(key, graph)
        return graph

    def _check_memory(self, seq_len: int, batch: int, shared: bool) -> None:
        """Raise ``ValueError`` naming ``max_len`` (Diffuser's shuffle) or what sizes the CSR
        (``seq_len`` and ``batch``; ``seq_len`` alone for a shared pattern) when a build
        would need more than the memory available now (NumPy would raise a bare ``MemoryError``,
        or the system kill the process). Upper bounds, in bytes of host memory; the memory
        available is read only for builds of 256 MiB or more."""
        checks = []
        if self.compat == "diffuser":
            cells = self.max_len**2
            width = 4 if cells < 2**31 else 8
            codes = 32 * self.max_len * (2 * self.window + self.num_random + 2 * self.num_global)  # int64 copies
            what = f"Diffuser's max_len x max_len cells are shuffled once, {width} bytes each"
            checks.append((f"max_len = {self.max_len} needs", cells * width + codes, what, "lower max_len"))
        count = 1 if shared else batch
        rows = count * seq_len
        per_row = min(self.window + 1 + self.num_random + self.num_global, seq_len)
        num_global = min(self.num_global, seq_len)
        edges = rows * per_row + count * num_global * seq_len  # as _edge_bound, before any array exists
        csr = 0 if self.device.is_cuda and not self.device.simulated else 8 * (rows + 1 + edges)  # on the host
        if not shared:
            asked, advice = f"seq_len = {seq_len} and batch = {batch} need", "lower batch or seq_len"
            what = f"{count} sequence{'s' if count != 1 else ''} of {seq_len} tokens, up to {edges} edges"
        else:  # shared: one sequence's pattern, whatever the batch
            asked, advice = f"seq_len = {seq_len} needs", "lower seq_len"
            what = f"one shared pattern of {seq_len} tokens, up to {edges} edges"
        checks.append((asked, 8 * count * (5 + num_global) + csr, what, advice))
        for asked, need, what, advice in checks:
            if need < _CHECK_MEMORY_FROM:
                continue
            available = available_memory()
            if available and need > available:
                raise ValueError(
                    f"{asked} up to {need / 2**30:.1f} GiB ({what}), more than the "
                    f"{available / 2**30:.1f} GiB of memory available; {advice}"
                )

    def _build(self, seq_len, batch, step, lengths, shared, index_dtype) -> AttentionGraph:
        count = 1 if shared else batch
        if lengths is None:
            lengths = np.full(count, seq_len, np.int64)
        if self.compat == "diffuser":
            return self._build_compat(seq_len, batch, lengths, shared, index_dtype)
        same = step is None
        states = _sequence_states(self.seed, _FIXED_KEY if same else step, count, same)
        from ._kernels.pattern_cpu import draw_globals

        gptr, gids = draw_globals(states, lengths, self.window, self.num_global)
        mode = 0 if self.random == "uniform" else 1
        cdf = np.zeros(1, np.float64)
        if mode == 1:
            distance = np.arange(seq_len, dtype=np.float64)
            weight = np.where(distance > self.window // 2, np.maximum(distance, 1.0) ** -self.exponent, 0.0)
            cdf = np.cumsum(weight)
        rows = count * seq_len
        # the index width needs the edge bound only near 2**31: a cruder one first (Python ints)
        upper = rows * (
            min(self.window + 1 + self.num_random + self.num_global, seq_len) + min(self.num_global, seq_len)
        )
        if upper >= 2**31:
            upper = self._edge_bound(lengths, np.diff(gptr))
        index_dtype = _pick(index_dtype, rows, "nodes")
        indptr_dtype = np.int32 if upper < 2**31 and index_dtype == np.int32 else np.int64
        xp = self.device.xp
        arrays = _Arrays(
            *(xp.asarray(a) for a in (lengths, seq_len, gptr, gids)),
            0 if self.layout == "diffuser" else 1,
            self.window // 2,
            self.num_random,
            mode,
            xp.asarray(cdf),
            xp.asarray(states),
            rows,
        )._replace(seq_len=seq_len)
        indptr, indices = pattern_driver(self.device).build(arrays, indptr_dtype, index_dtype)
        return AttentionGraph(
            indptr, indices, seq_len, batch, shared, lengths if count == batch else None, gptr, gids, self.device,
            _check=False,  # correct by construction: no O(E) scan (and no GPU sync) per step
        )  # fmt: skip

    def _edge_bound(self, lengths, gcount) -> int:
        """An upper bound on the edge count (index width is chosen before building)."""
        per_row = min(self.window + 1 + self.num_random + self.num_global, int(lengths.max(initial=0)))
        return int(np.sum(lengths * np.minimum(per_row, lengths)) + np.sum(gcount * lengths))

    def _build_compat(self, seq_len, batch, lengths, shared, index_dtype) -> AttentionGraph:
        from ._diffuser_compat import diffuser_pattern, diffuser_prefix

        full = diffuser_pattern(self.max_len, self.window, self.num_random, self.num_global, self.seed)
        parts = [diffuser_prefix(full, int(n)) for n in lengths]
        count = lengths.shape[0]
        rows = count * seq_len
        total = sum(int(p[0][-1]) for p in parts)
        index_dtype = _pick(index_dtype, rows, "nodes")
        indptr_dtype = np.int32 if total < 2**31 and index_dtype == np.int32 else np.int64
        indptr = np.zeros(rows + 1, np.int64)
        indices = np.empty(total, index_dtype)
        gptr = np.zeros(count + 1, np.int64)
        offset = 0
        for s, (ptr, idx, glob) in enumerate(parts):
            n = ptr.shape[0] - 1
            indptr[s * seq_len + 1 : s * seq_len + n + 1] = ptr[1:] + offset
            indptr[s * seq_len + n + 1 : (s + 1) * seq_len + 1] = ptr[-1] + offset
            indices[offset : offset + idx.shape[0]] = idx + s * seq_len
            offset += idx.shape[0]
            gptr[s + 1] = gptr[s] + glob.shape[0]
        gids = np.concatenate([p[2] for p in parts]) if count else np.zeros(0, np.int64)
        xp = self.device.xp
        return AttentionGraph(
            xp.asarray(indptr.astype(indptr_dtype)),
            xp.asarray(indices),
            seq_len,
            batch,
            shared,
            lengths if count == batch else None,
            gptr,
            gids.astype(np.int64),
            self.device,
            _check=False,
        )


def _dtype_or_none(value):
    """``np.dtype(value)``, or None where NumPy reads no dtype in it (``"bogus"``: refused by name)."""
    try:
        return np.dtype(value)
    except TypeError:
        return None


def _pick(index_dtype, rows: int, what: str):
    if index_dtype is None:
        return np.int32 if rows < 2**31 else np.int64
    return np.dtype(index_dtype).type

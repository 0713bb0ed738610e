"""Counter-based, stateless random numbers shared by every sampling kernel.

A draw is a pure function of ``(seed, batch key, hop, node, draw index)``: the host folds
``(seed, key, hop)`` into one 64-bit *hop state* (:func:`hop_state`), every row folds its node id
in (:func:`row_state`), and draw ``i`` of a row is ``mix64(row_state + (i + 1) * GAMMA)``
(splitmix64). No state lives between calls, so the output cannot depend on thread count, launch
shape or the order in which rows are processed.

Every constant and mixed operand is a ``np.uint64``: compiled code (Numba's typing rules) and the
CUDA simulator (NumPy's promotion rules) then compute the same bits. Under the simulator the
multiplications raise NumPy's harmless "overflow encountered in scalar multiply" warning.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..._rng import GAMMA, draw, mix64, row_state, uniform_01, uniform_below
from ..._splitmix import MASK, splitmix64
from ..._splitmix import mix64 as _mix64

__all__ = [
    "GAMMA",
    "mix64",
    "hop_state",
    "edge_type_key",
    "relation_state",
    "relation_states",
    "row_state",
    "draw",
    "uniform_below",
    "uniform_01",
]


def hop_state(seed: int, key: int, hop: int) -> np.uint64:
    """The 64-bit state shared by all rows of one hop of one batch (computed on the host).

    Python integers (mod 2**64) keep this free of NumPy overflow warnings; kernels receive the
    result as a ``np.uint64`` scalar.
    """
    gamma = int(GAMMA)
    state = splitmix64(int(seed) + gamma)
    state = splitmix64((state ^ (int(key) & MASK)) + gamma)
    state = splitmix64((state ^ (int(hop) & MASK)) + gamma)
    return np.uint64(state)


def edge_type_key(edge_type) -> int:
    """A 64-bit key of a typed graph's edge type ``(src_type, name, dst_type)``: the first 8
    bytes (little-endian) of the BLAKE2b hash of the three names joined by the unit separator (0x1F). It
    depends on the names only, so adding or reordering relations leaves other relations' draws
    unchanged, in every process (unlike Python's salted ``hash``)."""
    digest = hashlib.blake2b("\x1f".join(edge_type).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def relation_state(hop_state_, edge_key: int) -> np.uint64:
    """The state of one relation's rows within a hop: :func:`hop_state` folded with the edge
    type's key (:func:`edge_type_key`), so typed draws depend on ``(seed, key, hop, edge type,
    node)``."""
    gamma = int(GAMMA)
    return np.uint64(splitmix64((int(hop_state_) ^ (int(edge_key) & MASK)) + gamma))


def relation_states(hop_state_, edge_keys: np.ndarray) -> np.ndarray:
    """:func:`relation_state` of every key in ``edge_keys`` (uint64 array), as a uint64 array:
    the same bits, one array operation (arrays wrap silently, as the scalar form's Python ints)."""
    return _mix64((np.uint64(hop_state_) ^ edge_keys) + GAMMA)

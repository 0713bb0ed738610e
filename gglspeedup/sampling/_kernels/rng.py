"""A typed graph's relations in the counter-based draws: typed draws depend on ``(seed, key, hop,
edge type, node)``.

The draws themselves (:func:`~gglspeedup._rng.hop_state`, ``row_state``, ``draw``, ...) are the
package's, in :mod:`gglspeedup._rng`; this module folds an edge type's key into a hop state.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..._rng import GAMMA
from ..._splitmix import MASK, splitmix64
from ..._splitmix import mix64 as _mix64

__all__ = ["edge_type_key", "relation_state", "relation_states"]


def edge_type_key(edge_type) -> int:
    """A 64-bit key of a typed graph's edge type ``(src_type, name, dst_type)``: the first 8
    bytes (little-endian) of the BLAKE2b hash of the three names joined by the unit separator (0x1F). It
    depends on the names only, so adding or reordering relations leaves other relations' draws
    unchanged, in every process (unlike Python's salted ``hash``)."""
    digest = hashlib.blake2b("\x1f".join(edge_type).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def relation_state(hop_state_, edge_key: int) -> np.uint64:
    """The state of one relation's rows within a hop: :func:`~gglspeedup._rng.hop_state` folded with the edge
    type's key (:func:`edge_type_key`), so typed draws depend on ``(seed, key, hop, edge type,
    node)``."""
    gamma = int(GAMMA)
    return np.uint64(splitmix64((int(hop_state_) ^ (int(edge_key) & MASK)) + gamma))


def relation_states(hop_state_, edge_keys: np.ndarray) -> np.ndarray:
    """:func:`relation_state` of every key in ``edge_keys`` (uint64 array), as a uint64 array:
    the same bits, one array operation (arrays wrap silently, as the scalar form's Python ints)."""
    return _mix64((np.uint64(hop_state_) ^ edge_keys) + GAMMA)

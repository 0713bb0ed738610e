"""Moved to :mod:`gglspeedup.attention.sequence.layers` (attention in two rooms, issue 41); this path
keeps its public names (and ``LayerIndexError``) for existing imports."""

from .sequence.layers import *  # noqa: F403
from .sequence.layers import LayerIndexError, __all__  # noqa: F401

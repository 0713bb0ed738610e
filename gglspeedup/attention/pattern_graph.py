"""Moved to :mod:`gglspeedup.attention.sequence.graph` (attention in two rooms, issue 41); this path keeps
its public names for existing imports."""

from .sequence.graph import *  # noqa: F403
from .sequence.graph import __all__  # noqa: F401

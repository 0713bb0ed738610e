"""Moved to :mod:`gglspeedup.attention.sequence.sharded` (attention in two rooms, issue 41); this path keeps
its public names for existing imports."""

from .sequence.sharded import *  # noqa: F403
from .sequence.sharded import __all__  # noqa: F401

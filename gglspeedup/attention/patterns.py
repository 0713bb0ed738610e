"""Moved to :mod:`gglspeedup.attention.sequence.patterns` (attention in two rooms, issue 41); this path keeps
its public names for existing imports."""

from .sequence.patterns import *  # noqa: F403
from .sequence.patterns import __all__  # noqa: F401

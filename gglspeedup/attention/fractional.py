"""Moved to :mod:`gglspeedup.attention.sequence.fractional` (attention in two rooms, issue 41); this path keeps
its public names for existing imports."""

from .sequence.fractional import *  # noqa: F403
from .sequence.fractional import __all__  # noqa: F401

"""Moved to :mod:`gglspeedup.attention.pooling.layers` (attention in two rooms, issue 41); this path keeps
its public names for existing imports."""

from .pooling.layers import *  # noqa: F403
from .pooling.layers import __all__  # noqa: F401

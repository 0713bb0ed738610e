"""Moved to :mod:`gglspeedup.attention.pooling.batch` (attention in two rooms, issue 41); this path keeps
its public names for existing imports."""

from .pooling.batch import *  # noqa: F403
from .pooling.batch import __all__  # noqa: F401

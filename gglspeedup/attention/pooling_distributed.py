"""Moved to :mod:`gglspeedup.attention.pooling.distributed` (attention in two rooms, issue 41); this path keeps
its public names for existing imports."""

from .pooling.distributed import *  # noqa: F403
from .pooling.distributed import __all__  # noqa: F401

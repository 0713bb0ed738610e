"""Moved to :mod:`gglspeedup.attention.sequence.diffusion` (attention in two rooms, issue 41); this path keeps
its public names for existing imports."""

from .sequence.diffusion import *  # noqa: F403
from .sequence.diffusion import __all__  # noqa: F401

"""Torch layers of the attention models, under the seed models' names, in one module.

Import them from :mod:`gglspeedup.attention` (``from gglspeedup.attention import
FastFlexAddAttention``, loaded on first use); this module gathers them by family for code that wants
every layer at once (it imports torch). The layers are defined in :mod:`.pooling_modules`
(attpool2's attention pooling over graph batches) and :mod:`.diffuser_modules` (Diffuser's
sequence attention); the name lists are theirs, not copies.
"""

from . import diffuser_modules, pooling_modules
from .diffuser_modules import *  # noqa: F403 - re-exported by name below
from .pooling_modules import *  # noqa: F403 - re-exported by name below

POOLING_LAYERS = list(pooling_modules.__all__)
DIFFUSER_LAYERS = list(diffuser_modules.__all__)

__all__ = [*POOLING_LAYERS, *DIFFUSER_LAYERS]

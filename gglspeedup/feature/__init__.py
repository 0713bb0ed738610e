"""Feature rows by node id: a GPU cache of the hottest rows in front of pinned host memory.

:class:`FeatureStore` is the public entry point; :mod:`gglspeedup.feature.policies` chooses which
rows are cached. See DESIGN.md, "Features".
"""

from .store import FeatureStore

__all__ = ["FeatureStore"]

"""Moved to ``gglspeedup.attention.pooling._layer`` (the layer's CPU path, run by the CPU pooling
driver) in issue 41 (attention in two rooms); this path keeps :func:`pool_layer` for existing
imports."""

from .pooling._layer import pool_layer

__all__ = ["pool_layer"]

"""Gather kernels of the feature store (see :mod:`.gather`). No validation happens here."""

"""Transparent huge pages for large host arrays (Linux), and a switch to measure them.

Random reads over a large array (a graph's ``indices``, a feature table, a relabel map) miss the
TLB on most accesses with 4 KiB pages; a 2 MiB page covers 512 times more. Linux gives huge pages
to anonymous memory that asked for them (``madvise(MADV_HUGEPAGE)``) when
``/sys/kernel/mm/transparent_hugepage/enabled`` is ``madvise`` or ``always``. NumPy already asks
for every allocation of 4 MiB or more (``numpy._core.multiarray._set_madvise_hugepage``, on by
default on Linux), so the arrays gglspeedup allocates with NumPy (graphs built in memory, loads
with ``mmap=False``, feature caches, relabel maps) have them. What does not:

- memory-mapped files (``CSRGraph.load(..., mmap=True)``, ``FeatureStore.from_npy``): the page
  cache uses 4 KiB pages; ``load(mmap=False)`` reads a graph into (huge-paged) memory instead;
- arrays Numba allocates inside compiled code (NRT's ``malloc``, no advice): the large one
  built once per sampler, the weighted-sampling tables, is allocated here instead.

:func:`huge_empty` allocates with the advice forced on or off, so ``bench scale`` can measure the
same data both ways in one run.
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["huge_empty", "numpy_hugepages"]


@contextlib.contextmanager
def numpy_hugepages(enabled: bool):
    """NumPy's huge-page advice set to ``enabled`` inside the block (restored after)."""
    try:
        from numpy._core import multiarray
    except ImportError:  # pragma: no cover - NumPy < 2
        from numpy.core import multiarray
    previous = multiarray._set_madvise_hugepage(bool(enabled))
    try:
        yield
    finally:
        multiarray._set_madvise_hugepage(previous)


def huge_empty(shape, dtype, *, huge: bool = True) -> np.ndarray:
    """An uninitialised NumPy array allocated with the huge-page advice on (``huge=False``: off)."""
    with numpy_hugepages(huge):
        return np.empty(shape, dtype)

"""Arrays that tell their owner when the last view of them is gone.

NumPy points every view's ``base`` at the first array up the chain that owns its memory or whose
``base`` is no array, skipping plain views, so a finaliser on a view fires as soon as that view
is dropped, however many views *of* it live on. Twice that released memory still in use: the
page-locked ranges of :mod:`gglspeedup._pinned` (unlocked while kernels read them; found on an
H200) and the loaders' recycled output buffers of :mod:`gglspeedup._pool` (handed to the next
batch while a column or row slice of the last one was still held). :func:`leased` returns an
array made from a :class:`Lease`'s array interface instead: its ``base`` is the lease, every view
of it of any dtype or shape keeps the lease alive, and the release runs when the lease is
collected.
"""

from __future__ import annotations

import weakref

import numpy as np

__all__ = ["Lease", "leased"]


class Lease:
    """Holds ``array`` and exposes its memory through the array interface (module notes)."""

    __slots__ = ("__array_interface__", "__weakref__", "_array")

    def __init__(self, array: np.ndarray):
        self._array = array
        self.__array_interface__ = array.__array_interface__


def leased(array: np.ndarray, release, *args) -> np.ndarray:
    """``array``'s memory as a new array; ``release(*args)`` runs once neither it nor any view of
    it is referenced any more."""
    lease = Lease(array)
    weakref.finalize(lease, release, *args)
    out = np.asarray(lease)
    # The array interface spells dtypes NumPy does not know by name (ml_dtypes' bfloat16) as raw
    # bytes ("<V2"): view them back as the array's own dtype (a view keeps the lease as its base).
    return out if out.dtype == array.dtype else out.view(array.dtype)

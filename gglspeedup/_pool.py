"""Recycled host output buffers for loaders: warm pages instead of fresh ones for every batch.

Gathering a batch's feature rows into freshly allocated host memory pays a page fault per 4 KiB
the first time each page is written; the same gather into a buffer written before runs at the
warm-buffer speed (BENCHMARKS.md: 0.24-0.44 of the copy ceiling fresh, 0.67-0.80 warm). A
:class:`BufferPool` hands out row-slices of a few large, 64-byte aligned buffers and takes a
buffer back only when **nothing references the slice it handed out any more**: the slice is
weak-referenced, and its finaliser returns the buffer once the caller (and every tensor sharing
the slice's memory through DLPack, autograd included) has let go. A batch the caller keeps is
therefore never overwritten; when every pooled buffer is still held, the pool hands out fresh
memory instead of waiting.
"""

from __future__ import annotations

import threading

import numpy as np

from ._lease import leased
from .device import aligned_empty

__all__ = ["BufferPool"]

_GROWTH = 1.25  # a new buffer holds this many times the rows asked for, so later batches fit


class BufferPool:
    """At most ``max_buffers`` reusable host buffers of rows ``(capacity, dim)`` of ``dtype``.

    ``take(rows)`` returns a C-contiguous ``(rows, dim)`` array: a slice of a free pooled buffer
    big enough, else of a new pooled buffer (while fewer than ``max_buffers`` exist), else fresh
    unpooled memory. Thread-safe: the producer thread takes, any thread's garbage collection
    returns.
    """

    def __init__(self, dim: int, dtype, max_buffers: int):
        self.dim, self.dtype, self.max_buffers = int(dim), np.dtype(dtype), int(max_buffers)
        self._free: list[np.ndarray] = []
        self._count = 0  # pooled buffers in existence (free or handed out)
        self._lock = threading.Lock()
        self.stats = {"reused": 0, "allocated": 0, "unpooled": 0}

    def take(self, rows: int) -> np.ndarray:
        rows = int(rows)
        with self._lock:
            buffer = self._pop_fitting(rows)
            if buffer is not None:
                self.stats["reused"] += 1
            elif self._count < self.max_buffers or self._free:
                if self._free:  # every free buffer is too small: replace the smallest
                    self._free.sort(key=len)
                    self._free.pop(0)
                    self._count -= 1
                buffer = aligned_empty((max(1, int(rows * _GROWTH)), self.dim), self.dtype)
                self._count += 1
                self.stats["allocated"] += 1
            else:
                self.stats["unpooled"] += 1
                return aligned_empty((rows, self.dim), self.dtype)
        # every view of the batch (a column, the seed rows, a reshape) keeps the buffer out of the
        # pool, not only the array handed out (gglspeedup._lease)
        return leased(buffer[:rows], self._give_back, buffer)

    def _pop_fitting(self, rows: int):
        best = None
        for position, buffer in enumerate(self._free):
            if len(buffer) >= rows and (best is None or len(buffer) < len(self._free[best])):
                best = position
        return None if best is None else self._free.pop(best)

    def _give_back(self, buffer: np.ndarray) -> None:
        with self._lock:
            self._free.append(buffer)

    @property
    def free(self) -> int:
        """Pooled buffers not referenced by any handed-out batch right now."""
        with self._lock:
            return len(self._free)

"""Numba's parallel regions: the one kernel lock, and when a region runs on more than one thread.

Every CPU kernel family (sampling, the feature gather, attention pooling, attention patterns and the
fused attention passes) enters its parallel regions through this module, so they share one policy:

- :data:`KERNEL_LOCK`. Numba's parallel regions are not meant to be entered from several Python
  threads at once (the workqueue layer aborts, the others oversubscribe the cores), and the kernels
  release the GIL: a loader's sampling thread and the trainer's pooling or attention call take the
  lock in turn. Serial kernels (the small batches' twins) enter no region and take no lock.
- :data:`PARALLEL_MIN`, the threshold policy. Entering a parallel region costs microseconds on an
  idle machine but a scheduler time slice per barrier on a busy one (GNU OpenMP's waits cost about
  20 ms a launch at load average 6), more than a small call's whole work. So a call runs on every
  Numba thread only from a minimum of work, counted in its own unit: the thresholds differ because
  a drawn edge, a multiply-add and a fused-lasso node cost different amounts, not because the rule
  does. :func:`pays` reads it.
- :class:`kernel_threads`, the region itself: holds the lock, fits Numba's thread count (of the
  calling thread) to each call's work, and restores it on the way out.
- :func:`read_only`, the arguments' flag. Numba compiles a kernel apart for every mix of read-only
  and writable arrays, and a graph or table loaded memory-mapped is read-only: the drivers hand
  kernels every array they only read (a graph's, a feature table) as a read-only view, so data in
  memory and the same data mapped run one compiled variant, the one the warm-up takes.

Importing this module imports Numba (the kernel modules import it; ``import gglspeedup`` does not)
and makes a pip-installed TBB loadable first (:func:`gglspeedup._threading.prefer_tbb`).

>>> from gglspeedup._parallel import kernel_threads, pays
>>> pays(1 << 16, "draws"), pays(100, "draws")
(True, False)
>>> with kernel_threads(100, "draws") as region:   # one thread: too little work for a region
...     region.current
1
"""

from __future__ import annotations

import contextlib
import threading
import types

import numba
import numpy as np

from ._threading import prefer_tbb

__all__ = [
    "KERNEL_LOCK",
    "PARALLEL_MIN",
    "pays",
    "lock_for",
    "kernel_threads",
    "use_threads",
    "parallel_and_serial",
    "read_only",
]

prefer_tbb()  # before any parallel launch: see gglspeedup._threading

KERNEL_LOCK = threading.Lock()

# Work from which a parallel region pays for itself on a busy 2-core machine, per unit of work.
PARALLEL_MIN = {
    # edges a sampling hop draws (a typed hop's -1 fanout counted as 16 a row), negatives drawn (4
    # each when strict), excluded-edge lookups (64 each: a binary search of a hub's row), the keys of
    # an attention pattern build (about 64 a row)
    "draws": 1 << 16,
    # edge x head x dim products of a fused attention pass
    "products": 1 << 20,
    # node x head entries of a pooling map and of every backward (softmax, sparsemax, fused lasso)
    "pooling": 1 << 15,
    # node x head entries of a fused-lasso forward (maximum flows: far more work per entry)
    "fused": 2048,
    # output bytes of a feature gather (~0.1 ms per MiB serial)
    "bytes": 1 << 20,
}

_NO_LOCK = contextlib.nullcontext()


def pays(work: int, unit: str) -> bool:
    """Whether a call of ``work`` units of ``unit`` (a key of :data:`PARALLEL_MIN`) runs in parallel."""
    return work >= PARALLEL_MIN[unit]


def lock_for(parallel: bool):
    """The context a kernel with a serial twin runs in: :data:`KERNEL_LOCK` when it runs the
    parallel one (``parallel``, from :func:`pays`), else nothing to hold."""
    return KERNEL_LOCK if parallel else _NO_LOCK


def use_threads(threads: int) -> int:
    """Set the calling thread's Numba thread count to ``threads``, at most Numba's pool
    (``NUMBA_NUM_THREADS``); returns the count set. For a thread that stands for a share of the
    cores (a server process's connection thread): Numba's count is per calling thread, and
    :class:`kernel_threads` then runs a call that pays on this count."""
    count = max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(count)
    return count


class kernel_threads:
    """``with kernel_threads(work, unit) as region:`` hold :data:`KERNEL_LOCK` and run on every Numba
    thread when ``work`` pays for a region (:func:`pays`), else on one; a loop of kernel calls
    (a batch's hops) opens it without ``work`` and calls :meth:`fit` before each. Numba's thread
    count of the calling thread is restored on exit.

    Attributes
    ----------
    threads : int
        The calling thread's Numba thread count on entry (what a call that pays runs on).
    current : int
        The count the last :meth:`fit` set (``threads`` before any).
    """

    __slots__ = ("current", "threads", "unit", "work")

    def __init__(self, work: int | None = None, unit: str = "draws"):
        self.work, self.unit = work, unit

    def __enter__(self) -> kernel_threads:
        KERNEL_LOCK.acquire()
        try:
            self.threads = self.current = numba.get_num_threads()
            if self.work is not None:
                self.fit(self.work, self.unit)
        except BaseException:
            KERNEL_LOCK.release()
            raise
        return self

    def fit(self, work: int, unit: str = "draws") -> int:
        """Set the thread count for the next call of ``work`` units of ``unit``; returns it."""
        count = self.threads if work >= PARALLEL_MIN[unit] else 1
        if count != self.current:  # numba.set_num_threads costs microseconds: only when it changes
            numba.set_num_threads(count)
            self.current = count
        return count

    def __exit__(self, *exc) -> bool:
        try:
            if self.current != self.threads:
                numba.set_num_threads(self.threads)
        finally:
            KERNEL_LOCK.release()
        return False


def parallel_and_serial(loop):
    """``(parallel, serial)``: ``loop``, a plain function whose outer loop is a ``prange``, compiled
    with and without ``parallel=True`` (both cached, ``nogil``), so a caller can skip the parallel
    region where :func:`kernel_threads` gives one thread (entering a region costs a scheduler time
    slice on a busy machine, more than a small call's whole work). The serial one compiles a copy
    named ``<name>_serial``: Numba's cache tells functions apart by name, not by their flags."""
    serial = types.FunctionType(loop.__code__, loop.__globals__, f"{loop.__name__}_serial", loop.__defaults__)
    serial.__qualname__ = f"{loop.__qualname__}_serial"
    return numba.njit(parallel=True, cache=True, nogil=True)(loop), numba.njit(cache=True, nogil=True)(serial)


def read_only(array):
    """``array`` as a read-only view when it is a writable NumPy array, else ``array`` itself (the
    module's notes: one compiled variant for data in memory and mapped)."""
    if not isinstance(array, np.ndarray) or not array.flags.writeable:
        return array
    view = array.view()
    view.flags.writeable = False
    return view

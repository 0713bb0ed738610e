"""Numba's on-disk kernel cache, made safe for processes that compile at the same time.

Numba saves a compiled overload in two files (``numba/core/caching.py``,
``IndexDataCacheFile.save``): it reads the kernel's index, names the new data file by counting the
index's entries (``<kernel>.1.nbc``, ``.2.nbc``, ...), writes the index, then the data file. Two
processes compiling *different* overloads of one kernel at once (a float32 and a float64 layer,
DDP ranks or test workers on a cold cache) can both read the same index and both pick ``.1.nbc``:
the index then drops one of them or maps one signature to the other's machine code, which every
later process that loads that overload would run (``tests/test_numba_cache.py`` makes two savers
race: without the lock one entry is lost).

:func:`install` (run by ``import gglspeedup``; it does not import Numba) makes each save one
critical section across processes: an exclusive ``flock`` on ``<index>.lock`` beside the index,
held while the index is read, the name picked and both files written. Loads take no lock: a load
that finds an index entry whose data file is not written yet gets nothing and compiles, as Numba
already allows. Where ``fcntl`` is missing (Windows) or the lock file cannot be made, saves run
as Numba wrote them.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import os
import sys

try:
    import fcntl
except ImportError:  # Windows: Numba's own behaviour
    fcntl = None

__all__ = ["install", "locked_save", "index_lock"]

_MODULE = "numba.core.caching"


@contextlib.contextmanager
def index_lock(index_path: str):
    """An exclusive ``flock`` on ``<index_path>.lock``, held for the block: what every save of that
    index takes (and ``tests/cold_cache.py``'s merge of one cache into another). Raises
    ``OSError`` before the block where the lock file cannot be made."""
    fd = os.open(index_path + ".lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def locked_save(save):
    """``IndexDataCacheFile.save`` run under :func:`index_lock` of its index."""

    @functools.wraps(save)
    def locked(self, key, data):
        lock = index_lock(self._index_path)
        try:
            lock.__enter__()
        except OSError:  # an unwritable cache folder: Numba's save reports or skips it itself
            return save(self, key, data)
        try:
            return save(self, key, data)
        finally:
            lock.__exit__(None, None, None)

    locked.gglspeedup_locked = True
    return locked


def _patch(caching) -> None:
    cls = caching.IndexDataCacheFile
    if not getattr(cls.save, "gglspeedup_locked", False):
        cls.save = locked_save(cls.save)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``numba.core.caching`` is imported, lets the other finders find
    it and patches the module right after it executes."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _MODULE:
            return None
        sys.meta_path.remove(self)  # one use; and no recursion into this finder
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch  # this module's own loader instance
        return spec


@functools.cache
def install() -> bool:
    """Lock Numba's cache saves across processes (now if Numba's caching module is loaded, else
    when it is); False where ``fcntl`` is missing."""
    if fcntl is None:
        return False
    caching = sys.modules.get(_MODULE)
    if caching is not None:
        _patch(caching)
    else:
        sys.meta_path.insert(0, _PatchOnImport())
    return True

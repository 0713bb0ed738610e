"""The file behind a memory-mapped feature table, checked before each read.

A table from ``np.load(path, mmap_mode="r")`` or ``np.memmap`` reads its rows straight from the
file's pages. :func:`backing_file` finds the file once (walking the array's ``base`` chain to the
``np.memmap``) and records what the file was then: its inode, size and modification time.

- If the file shrinks on disk (``os.truncate``, a partial rewrite), touching a page past the new
  end kills the process with SIGBUS. :func:`check_backing` (one ``stat``, about 1 us) raises
  ``OSError`` naming the file when it no longer holds the mapped bytes.
- If the file is rewritten in place (same inode: ``np.save`` over it, a writer opening it
  ``"r+b"``), the mapping shows the new bytes while a cache built from the old ones still holds
  them: a gather would return old cached rows beside new mapped ones. :func:`check_unchanged`
  (the same one ``stat``) raises :class:`FileChangedError` when the size or the modification time
  moved since the table was opened.

A file *replaced* at the same path (a new file renamed over it, or the old one deleted) is not a
change of the mapped file: the mapping keeps the old inode, and its bytes, alive.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

__all__ = ["Backing", "CACHED", "FileChangedError", "backing_file", "check_backing", "check_unchanged"]


class FileChangedError(OSError, RuntimeError):
    """The file behind a memory-mapped feature table changed on disk after the table was opened.

    An ``OSError`` (a file's state) and a ``RuntimeError``; the message names the file and what
    moved. Reload the table (e.g. ``FeatureStore.from_npy(path, ...)``) to read the new contents.
    """


class Backing(NamedTuple):
    path: str
    needed: int  # bytes the mapping reaches: offset + mapped size
    inode: int  # the file the mapping holds (a replaced file at the same path is not this one)
    size: int  # the file's size when the table was opened
    mtime_ns: int  # its modification time then


def backing_file(array) -> Backing | None:
    """The memory-mapped file behind ``array`` (a NumPy array or a view of one), else ``None``."""
    seen = 0
    while isinstance(array, np.ndarray) and seen < 64:
        if isinstance(array, np.memmap) and getattr(array, "filename", None):
            try:
                stat = os.stat(array.filename)
            except OSError:
                return None
            needed = int(array.offset) + int(array.nbytes)
            return Backing(os.fspath(array.filename), needed, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        array, seen = array.base, seen + 1
    return None


def _current(backing: Backing):
    """The file's ``stat`` when it is still the mapped one, else ``None`` (gone, or replaced)."""
    try:
        stat = os.stat(backing.path)
    except FileNotFoundError:
        return None  # unlinked: the mapping keeps the old inode alive, reads stay valid
    return stat if stat.st_ino == backing.inode else None


def _shrunk(backing: Backing, size: int) -> str:
    return (
        f"the feature table's file {backing.path!r} shrank to {size} bytes but the table maps "
        f"{backing.needed}: reading it would crash the process (SIGBUS); restore the file or reload the table"
    )


def check_backing(backing: Backing | None) -> None:
    """Raise ``OSError`` naming the file when it is gone or shorter than the mapping (a read would
    then raise SIGBUS); a file replaced at the same path leaves the old mapping valid."""
    if backing is None:
        return
    stat = _current(backing)
    if stat is not None and stat.st_size < backing.needed:
        raise OSError(_shrunk(backing, stat.st_size))


CACHED = "the cache still holds rows of the old contents, so a gather would mix old and new rows"


def check_unchanged(backing: Backing | None, consequence: str = CACHED) -> None:
    """Raise :class:`FileChangedError` naming the file when it was modified in place since
    :func:`backing_file` recorded it (its size or modification time differ; a shrunk file says
    so, as :func:`check_backing` does). ``consequence`` says what reading it now would do.

    A store calls this where its cache is filled and before every gather: one ``stat``.
    """
    if backing is None:
        return
    stat = _current(backing)
    if stat is None:
        return
    if stat.st_size < backing.needed:
        raise FileChangedError(_shrunk(backing, stat.st_size))
    if stat.st_size != backing.size or stat.st_mtime_ns != backing.mtime_ns:
        raise FileChangedError(
            f"{backing.path!r} changed on disk since it was opened (size {backing.size} -> {stat.st_size} bytes, "
            f"modified {(stat.st_mtime_ns - backing.mtime_ns) / 1e9:+.6f} s later): {consequence}. Reload the "
            "table after rewriting the file (FeatureStore.from_npy again), or write new tables to a new path"
        )

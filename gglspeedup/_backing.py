"""The file behind a memory-mapped feature table, checked before each read.

A table from ``np.load(path, mmap_mode="r")`` or ``np.memmap`` reads its rows straight from the
file's pages; if the file shrinks on disk (``os.truncate``, a partial rewrite), touching a page past
the new end kills the process with SIGBUS. :func:`backing_file` finds the file once (walking the
array's ``base`` chain to the ``np.memmap``), and :func:`check_backing` costs one ``stat`` per
gather: it raises ``OSError`` naming the file when it no longer holds the mapped bytes.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

__all__ = ["Backing", "backing_file", "check_backing"]


class Backing(NamedTuple):
    path: str
    needed: int  # bytes the mapping reaches: offset + mapped size
    inode: int  # the file the mapping holds (a replaced file at the same path is not this one)


def backing_file(array) -> Backing | None:
    """The memory-mapped file behind ``array`` (a NumPy array or a view of one), else ``None``."""
    seen = 0
    while isinstance(array, np.ndarray) and seen < 64:
        if isinstance(array, np.memmap) and getattr(array, "filename", None):
            try:
                inode = os.stat(array.filename).st_ino
            except OSError:
                return None
            return Backing(os.fspath(array.filename), int(array.offset) + int(array.nbytes), inode)
        array, seen = array.base, seen + 1
    return None


def check_backing(backing: Backing | None) -> None:
    """Raise ``OSError`` naming the file when it is gone or shorter than the mapping (a read would
    then raise SIGBUS); a file replaced at the same path leaves the old mapping valid."""
    if backing is None:
        return
    try:
        stat = os.stat(backing.path)
    except FileNotFoundError:
        return  # unlinked: the mapping keeps the old inode alive, reads stay valid
    if stat.st_ino == backing.inode and stat.st_size < backing.needed:
        raise OSError(
            f"the feature table's file {backing.path!r} shrank to {stat.st_size} bytes but the table maps "
            f"{backing.needed}: reading it would crash the process (SIGBUS); restore the file or reload the table"
        )

"""Reading the ``.npz`` files shipped in ``gglspeedup/data`` (or a ``root=`` folder's copies).

Every bundled loader reads its file inside :func:`reading`, so a file that is truncated, flipped
or missing a member (a broken download, a disk error, a hand edit) raises one
:class:`DatasetFileError` naming the file and how to get a good copy, instead of ``zipfile``'s,
``zlib``'s or a graph check's message about bytes the caller never saw.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
import zlib

import numpy as np

__all__ = ["DATA_DIR", "DatasetFileError", "bundled_path", "read_members", "reading"]

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


class DatasetFileError(ValueError, OSError):
    """A dataset file that cannot be read: damaged, truncated or missing a member. A
    ``ValueError`` (its contents are bad) and an ``OSError`` (a file's state); the message names
    the file and how to get a good copy."""


# What a damaged file raises somewhere between np.load and the last array built from it.
_DAMAGE = (OSError, ValueError, KeyError, IndexError, EOFError, zipfile.BadZipFile, zlib.error)


def bundled_path(file_name: str, root, converter: str) -> str:
    """``root/file_name`` (``root`` ``None``: the package's data folder); ``FileNotFoundError``
    naming the path and ``converter`` (the tool that writes the file) when it is not there."""
    if root is not None and not isinstance(root, (str, os.PathLike)):  # os.fspath's message names no argument
        raise TypeError(f"root must be a folder path (str or os.PathLike) or None, got {type(root).__name__}")
    path = os.path.join(DATA_DIR if root is None else os.fspath(root), file_name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path!r} not found; write it with {converter} --out")
    return path


@contextlib.contextmanager
def reading(path: str, converter: str):
    """Run the block that reads ``path``; a damaged file raises :class:`DatasetFileError` naming it.

    ``converter`` is the tool that writes the file (``tools/convert_planetoid.py``), named in the
    message together with reinstalling the package (the bundled copies come with it).
    """
    try:
        yield
    except FileNotFoundError:
        raise
    except _DAMAGE as error:
        raise DatasetFileError(
            f"{path!r} is not a readable dataset file: it is damaged or truncated "
            f"({type(error).__name__}: {error}). Reinstall gglspeedup for the bundled copy, or rewrite "
            f"the file with {converter} --out"
        ) from error


def read_members(path: str) -> dict:
    """Every member of the ``.npz`` at ``path``, read into memory (no pickles)."""
    with np.load(path, allow_pickle=False) as data:
        return {member: data[member] for member in data.files}

"""Which paths a writer may replace: never anything it did not write.

Every writer of the package that puts a folder or file at a caller's path (``CSRGraph.save``,
``HeteroGraph.save``, :func:`~gglspeedup.datasets.build_csr`, the ``papers-like`` cache) writes
under a temporary name and renames into place. What already stands at the destination is replaced
only when losing it loses nothing the library did not write (:func:`check_replaceable`):

- nothing is there;
- an empty directory, unless it is the working directory or one of its ancestors (``"."`` and
  ``""`` are never replaced);
- with ``overwrite=True`` (the writers' default), a graph folder gglspeedup wrote: its
  ``header.json`` is ours and the folder holds nothing but the header and the files it lists (a
  file dropped inside by the user makes it not ours), or a saved graph in the older ``.npz``
  format (an archive of nothing but a graph's arrays).

Anything else (a user's folder or file, a symbolic link) raises ``FileExistsError`` naming the
path. The old graph is then removed file by file (the files its header lists, then the empty
folder), never as a tree, so a file that appeared in it meanwhile survives.

>>> import os, tempfile
>>> tmp = tempfile.TemporaryDirectory()
>>> folder = tmp.name
>>> open(os.path.join(folder, "notes.txt"), "w").close()
>>> try:
...     check_replaceable(folder)
... except FileExistsError as error:
...     print(str(error).split(": ")[0].endswith("(it holds notes.txt)"))
True
>>> check_replaceable(os.path.join(folder, "graph"))
'absent'
>>> tmp.cleanup()
"""

from __future__ import annotations

import json
import os
import warnings

__all__ = [
    "ABSENT", "EMPTY", "FOLDER", "NPZ", "check_out_file", "check_parent", "check_replaceable", "folder_files",
    "nearest_folder", "remove_replaced", "temporary_path",
]  # fmt: skip

ABSENT, EMPTY, FOLDER, NPZ = "absent", "empty", "folder", "npz"
_HEADER = "header.json"  # gglspeedup._storage.HEADER (not imported: _storage imports this module)
_FORMAT = "gglspeedup"
_NPZ_MEMBERS = {f"{name}.npy" for name in ("indptr", "indices", "edge_ids", "weights", "num_src_nodes", "meta")}


def _shown(path: str, given) -> str:
    """``path`` as the caller gave it, and absolute when that differs."""
    given = os.fspath(given) if given is not None else path
    return repr(path) if given == path else f"{given!r} ({path})"


def _listing(names, limit: int = 5) -> str:
    names = sorted(names)
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _is_cwd_or_ancestor(path: str) -> bool:
    real, cwd = os.path.realpath(path), os.path.realpath(os.getcwd())
    return cwd == real or cwd.startswith(real.rstrip(os.sep) + os.sep)


def temporary_path(path, tag: str, suffix: str = "") -> str:
    """A new hidden name beside ``path`` for a writer's temporary: ``.{name}.{tag}-{12 hex}{suffix}``,
    ``name`` cut to 200 bytes so that a destination name near the file system's 255-byte limit does
    not make the temporary's name too long (``OSError: File name too long`` before any work)."""
    import uuid

    parent, name = os.path.split(os.fspath(path))
    short = os.fsdecode(os.fsencode(name)[:200])  # surrogate escapes keep a cut character's bytes
    return os.path.join(parent, f".{short}.{tag}-{uuid.uuid4().hex[:12]}{suffix}")


def folder_files(path: str) -> set | None:
    """The file names a graph folder's header lists (the header included), or ``None`` when
    ``path`` holds no readable gglspeedup header."""
    try:
        with open(os.path.join(path, _HEADER), encoding="utf-8") as handle:
            header = json.load(handle)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("format") != _FORMAT or not isinstance(header.get("arrays"), dict):
        return None
    files = {_HEADER}
    for entry in header["arrays"].values():
        file = entry.get("file") if isinstance(entry, dict) else None
        if not isinstance(file, str) or not file or os.path.basename(file) != file:
            return None
        files.add(file)
    return files


def _is_graph_npz(path: str) -> bool:
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return False
    return {"indptr.npy", "indices.npy"} <= names <= _NPZ_MEMBERS


def check_parent(path, *, given=None) -> None:
    """Raise unless the folder that is to hold ``path`` exists, is a folder and can be written
    (a writer creates its temporary folder there): checked before any work, so a long build never
    fails at its end for a typo in the path. ``given`` as in :func:`check_replaceable`.

    Raises
    ------
    FileNotFoundError, NotADirectoryError, PermissionError
        naming ``path`` and its parent folder.
    """
    path = os.path.abspath(os.fspath(path))
    parent, shown = os.path.dirname(path), _shown(path, given)
    if not os.path.isdir(parent):
        what = "is not a folder" if os.path.lexists(parent) else "does not exist"
        error = NotADirectoryError if os.path.lexists(parent) else FileNotFoundError
        raise error(f"cannot write {shown}: its parent folder {parent!r} {what}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write {shown}: its parent folder {parent!r} is not writable")


def check_out_file(path) -> None:
    """Raise ``ValueError`` unless ``path`` can take the file a run writes at its end (the bench's
    and the demos' ``--json``): not a folder, in a folder that exists and can be written
    (:func:`check_parent`), not a file that cannot be written. Checked before the run, whose
    minutes of work a traceback at the write lost. The message reads after the option's name:
    ``--json: must name a file, ...`` (argparse: ``argument --json: must name a file, ...``)."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        raise ValueError(f"must name a file, but {path!r} is a folder")
    try:
        check_parent(path)
    except OSError as error:
        raise ValueError(f"must name a file in a folder that exists and can be written: {error}") from None
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise ValueError(f"cannot write {path!r}: the file is not writable")


def nearest_folder(path) -> str:
    """The nearest existing folder at or above ``path``, an output folder that is to be made when
    missing (``os.makedirs`` makes the rest below it): checked before a run, so a file in the way
    is not a traceback at its end. ``NotADirectoryError`` whose argument is that file's path."""
    folder = os.path.abspath(os.fspath(path))
    while not os.path.isdir(folder):
        if os.path.lexists(folder):
            raise NotADirectoryError(folder)
        folder = os.path.dirname(folder)
    return folder


def check_replaceable(path, *, overwrite: bool = True, given=None) -> str:
    """What stands at ``path`` when a writer may replace it: :data:`ABSENT`, :data:`EMPTY` (an
    empty directory), :data:`FOLDER` (a graph folder gglspeedup wrote) or :data:`NPZ` (an older
    ``.npz`` saved graph); see the module docstring for the rules.

    ``given`` is the path as the caller wrote it (for the message; default ``path``).

    Raises
    ------
    FileExistsError
        naming the path, when anything else stands there, when it is the working directory or
        one of its ancestors, or (``overwrite=False``) when it holds a saved graph.
    """
    path = os.path.abspath(os.fspath(path))
    shown = _shown(path, given)
    if _is_cwd_or_ancestor(path):
        raise FileExistsError(
            f"{shown} is the working directory or one of its ancestors: a graph is never written over it; "
            "name a new folder (e.g. 'graph')"
        )
    if not os.path.lexists(path):
        return ABSENT
    if os.path.islink(path):
        raise FileExistsError(f"{shown} is a symbolic link: refusing to replace it (write to a new path)")
    refuse = "refusing to replace it (write to a new path, or remove it yourself)"
    if os.path.isdir(path):
        names = set(os.listdir(path))
        if not names:
            return EMPTY
        ours = folder_files(path)
        if ours is None:
            raise FileExistsError(
                f"{shown} is not a graph folder written by gglspeedup (it holds {_listing(names)}): {refuse}"
            )
        if not names <= ours:
            raise FileExistsError(
                f"{shown} is a graph folder but also holds files its header does not list "
                f"({_listing(names - ours)}): {refuse}"
            )
        odd = [n for n in names if os.path.islink(os.path.join(path, n)) or not os.path.isfile(os.path.join(path, n))]
        if odd:  # a folder or link under a listed name is not what this library writes
            raise FileExistsError(f"{shown} is a graph folder but {_listing(odd)} is not a plain file: {refuse}")
        kind = FOLDER
    elif os.path.isfile(path) and _is_graph_npz(path):
        kind = NPZ
    else:
        raise FileExistsError(f"{shown} exists and is not a saved graph: {refuse}")
    if not overwrite:
        raise FileExistsError(
            f"{shown} already holds a saved graph and overwrite=False: refusing to replace it "
            "(overwrite=True replaces a graph this library wrote)"
        )
    return kind


def remove_replaced(old: str, kind: str) -> None:
    """Remove ``old``, a path :func:`check_replaceable` classed as ``kind``, after it was renamed
    aside: a graph folder file by file (only the files its header lists), then the empty folder.
    What cannot go (a file that appeared meanwhile) stays, with a warning naming where."""
    if kind == NPZ:
        os.unlink(old)
        return
    if kind == FOLDER:
        for name in folder_files(old) or ():
            try:
                os.unlink(os.path.join(old, name))
            except OSError:  # gone already, or no longer a plain file: left for the warning below
                pass
    try:
        os.rmdir(old)
    except OSError:
        warnings.warn(
            f"the replaced graph's folder kept files it did not list; they were left in {old!r}", stacklevel=3
        )

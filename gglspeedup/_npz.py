"""Graphs saved by gglspeedup before graph folders: uncompressed ``.npz`` archives, still read.

:func:`read_npz` maps each member in place when it is stored uncompressed (the ``.npy`` payload's
offset found from the zip's local header), so an old saved graph also loads in O(1) with
``mmap=True``; ``verify=True`` checks the zip CRCs.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["read_npz"]


def read_npz(path, mmap: bool, *, verify: bool = False, what: str = "graph") -> dict[str, np.ndarray]:
    """Arrays of an uncompressed ``.npz`` (the format of gglspeedup before graph folders),
    memory-mapped member by member when ``mmap``; ``verify`` checks every member's zip CRC.

    Raises ``ValueError`` naming ``path`` when it is not a readable ``.npz`` (``what`` names what
    it should hold), an array holds objects, or a member is truncated.
    """
    import zipfile

    try:
        if verify:
            with zipfile.ZipFile(path) as archive:
                broken = archive.testzip()
            if broken is not None:
                raise ValueError(f"member {broken!r} fails its CRC: the file is corrupt")
        return _npz_arrays(path, mmap)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
        raise ValueError(
            f"{os.fspath(path)!r} is not a readable {what} file (one written by {what}.save): {error}"
        ) from None


def _npz_arrays(path, mmap: bool) -> dict[str, np.ndarray]:
    import zipfile

    if not mmap:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    arrays = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                return _npz_arrays(path, mmap=False)
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                read_header = (
                    np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                )
                shape, fortran, dtype = read_header(member)
                header_end = member.tell()
            if dtype.hasobject:
                raise ValueError(f"array {name!r} holds objects; refusing to unpickle")
            claimed = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if claimed > info.file_size - header_end:
                raise ValueError(
                    f"array {name!r} claims shape {shape} ({claimed} bytes) but the file holds "
                    f"{info.file_size - header_end} bytes of it: the file is truncated or corrupt"
                )
            # Local file header: 30 bytes + name + extra field, then the .npy payload.
            with open(path, "rb") as raw:
                raw.seek(info.header_offset + 26)
                name_len, extra_len = np.frombuffer(raw.read(4), dtype="<u2")
            offset = info.header_offset + 30 + int(name_len) + int(extra_len) + header_end
            arrays[name] = np.memmap(
                path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C"
            )
    return arrays

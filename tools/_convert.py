"""What the dataset converters (``tools/convert_*.py``) share: their default folders, the
``--src`` / ``--out`` command line, and writing the compressed arrays beside their licence notice.

A converter imports it by putting its own folder on ``sys.path`` first, so that it loads both when
run as a script and when a test loads the converter by its path.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np

__all__ = ["PACKAGE_DATA", "source_folder", "parse_args", "main", "write"]

_HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DATA = os.path.normpath(os.path.join(_HERE, "..", "gglspeedup", "data"))  # where shipped files go


def source_folder(name: str) -> str:
    """The raw files' usual folder: ``../shared/data/<name>`` beside the repository."""
    return os.path.normpath(os.path.join(_HERE, "..", "..", "shared", "data", name))


def parse_args(argv, description: str, src: tuple[str, str], out: tuple[str, str]) -> argparse.Namespace:
    """``--src`` and ``--out``, each given as ``(default, help)``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--src", default=src[0], help=src[1])
    parser.add_argument("--out", default=out[0], help=out[1])
    return parser.parse_args(argv)


def main(argv, doc: str, convert: Callable[[str, str], list[str]], src: tuple[str, str], out: tuple[str, str]) -> int:
    """A converter's command: ``convert(--src, --out)``, then one ``wrote PATH (N bytes)`` line per
    file written. The description is ``doc``'s first paragraph."""
    args = parse_args(argv, doc.split("\n\n")[0], src, out)
    for path in convert(args.src, args.out):
        print(f"wrote {path} ({os.path.getsize(path):,} bytes)")
    return 0


def write(out: str, files: dict[str, dict], licence_name: str, licence_text: str) -> list[str]:
    """Write ``<out>/<file>`` for each of ``files`` (its arrays, :func:`numpy.savez_compressed`)
    and the licence notice ``<out>/<licence_name>``; return the paths written, the notice last."""
    os.makedirs(out, exist_ok=True)
    written = []
    for name, arrays in files.items():
        path = os.path.join(out, name)
        with open(path, "wb") as handle:  # a handle, so numpy adds no suffix
            np.savez_compressed(handle, **arrays)
        written.append(path)
    path = os.path.join(out, licence_name)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(licence_text)
    written.append(path)
    return written

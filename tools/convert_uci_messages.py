"""Convert KONECT's UC Irvine messages network (opsahl-ucsocial) into the file shipped in the package.

Reads ``out.opsahl-ucsocial`` (one message a line: ``from to weight unix_time``, ids 1-based,
``%`` comment lines first) and ``README.opsahl-ucsocial`` once, and writes
``<out>/uci_messages.npz`` with :func:`numpy.savez_compressed` (plain arrays only, read with
``allow_pickle=False``) plus ``<out>/LICENSE-uci-messages.md`` (the source's licence, CC BY-SA 2.0
DE, its citation and what was derived).

Usage::

    python tools/convert_uci_messages.py --src DIR [--out gglspeedup/data]

``DIR`` holds ``out.opsahl-ucsocial`` and ``README.opsahl-ucsocial`` as KONECT publishes them;
the copy this file was made from is in the GitHub repository ``chengw07/NetWalk`` (commit
``2aef4f3712fabc36e5d57fdcc0ce57ed31797719``, folder ``data/ucsocial/``), e.g.::

    for f in out README; do git -C NetWalk show 2aef4f37:data/ucsocial/$f.opsahl-ucsocial > DIR/$f.opsahl-ucsocial; done

(sha256 of ``out.opsahl-ucsocial``: :data:`SOURCE_SHA256`, checked).

What is derived (``gglspeedup.datasets.load_uci_messages`` reads it): every line is one event
(59,835: repeated messages between two users are kept, each with its own time); ids become
0-based (1,899 users, every id in ``[1, 1899]`` occurs); the weight column (always 1) is dropped;
events are sorted by ``(time, src, dst)`` (stable), so ``time`` ascends.

Stored arrays: ``src``, ``dst`` int16 (E,) (the sender and the receiver), ``time`` int64 (E,)
(Unix seconds, ascending), ``num_nodes`` int64 ().
"""

from __future__ import annotations

import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tools/_convert.py, also when loaded by path
import _convert

DEFAULT_SRC = _convert.source_folder("uci_messages")
DEFAULT_OUT = _convert.PACKAGE_DATA
SOURCE_REPO = "chengw07/NetWalk"
SOURCE_COMMIT = "2aef4f3712fabc36e5d57fdcc0ce57ed31797719"
SOURCE_SHA256 = "72515c16504464736f35498047cf8e163df2e95f89ea3063d48aa367936bd951"
EDGES_FILE = "out.opsahl-ucsocial"
README_FILE = "README.opsahl-ucsocial"
NUM_NODES = 1899  # the header's "% 59835 1899 1899"


def read_uci_messages(src: str, expected_sha256: str | None = SOURCE_SHA256, num_nodes: int = NUM_NODES) -> dict:
    """The arrays described in the module docstring, from ``<src>/out.opsahl-ucsocial``
    (``expected_sha256=None`` skips the check: the tests read a tiny file of the same format)."""
    path = os.path.join(src, EDGES_FILE)
    with open(path, "rb") as handle:
        raw = handle.read()
    digest = hashlib.sha256(raw).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise ValueError(f"{path}: sha256 {digest} is not the published file's {expected_sha256}")
    lines = [line for line in raw.decode("ascii").splitlines() if line.strip() and not line.startswith("%")]
    table = np.array([line.split() for line in lines], dtype=np.int64)
    if table.shape[1] != 4 or not (table[:, 2] == 1).all():
        raise ValueError(f"{path}: expected 'from to 1 time' lines, got shape {table.shape}")
    src_ids, dst_ids, time = table[:, 0] - 1, table[:, 1] - 1, table[:, 3]
    ids = np.unique(np.concatenate((src_ids, dst_ids)))
    if not np.array_equal(ids, np.arange(num_nodes)):
        raise ValueError(f"{path}: user ids are not exactly 1..{num_nodes}")
    order = np.lexsort((dst_ids, src_ids, time))  # by time, then src, then dst
    return {
        "src": src_ids[order].astype(np.int16),
        "dst": dst_ids[order].astype(np.int16),
        "time": time[order],
        "num_nodes": np.int64(num_nodes),
    }


def _license_text(src: str, arrays: dict[str, np.ndarray]) -> str:
    with open(os.path.join(src, README_FILE), encoding="utf-8") as handle:
        readme = handle.read().strip()
    first, last = (np.datetime64(int(t), "s") for t in (arrays["time"][0], arrays["time"][-1]))
    return (
        "# Licence of the bundled UC Irvine messages data\n\n"
        "`uci_messages.npz` is derived by `tools/convert_uci_messages.py` from `out.opsahl-ucsocial`, the\n"
        "KONECT (Koblenz Network Collection) edition of the UC Irvine messages network (Opsahl and\n"
        "Panzarasa, 2009), as copied into the GitHub repository "
        f"{SOURCE_REPO} (commit {SOURCE_COMMIT[:8]}, `data/ucsocial/`).\n"
        f"It holds the {len(arrays['time']):,} messages between {int(arrays['num_nodes']):,} users "
        "(sender, receiver, Unix\n"
        f"time, {first} to {last} UTC), ids 0-based, sorted by time; the weight column (always 1) is\n"
        "dropped. Nothing else is added or removed.\n\n"
        "Licence: Creative Commons Attribution-ShareAlike 2.0 Germany (CC BY-SA 2.0 DE,\n"
        "https://creativecommons.org/licenses/by-sa/2.0/de/), as the source states: the converted file\n"
        "stays under that licence (attribution below; share alike), separate from the project's code licence.\n\n"
        "Cite:\n\n"
        "- T. Opsahl, P. Panzarasa. Clustering in weighted networks. Social Networks 31(2):155-163, 2009.\n"
        "- J. Kunegis. KONECT - The Koblenz Network Collection. Proc. WWW Companion, 1343-1350, 2013.\n\n"
        "The source's README, copied verbatim:\n\n"
        "---\n\n"
        "```\n" + readme + "\n```\n"
    )


def convert(src: str = DEFAULT_SRC, out: str = DEFAULT_OUT, **read_options) -> list[str]:
    """Write ``<out>/uci_messages.npz`` and ``<out>/LICENSE-uci-messages.md``; return the paths
    (``read_options`` go to :func:`read_uci_messages`)."""
    arrays = read_uci_messages(src, **read_options)
    return _convert.write(out, {"uci_messages.npz": arrays}, "LICENSE-uci-messages.md", _license_text(src, arrays))


def main(argv=None) -> int:
    src = (DEFAULT_SRC, "folder with out.opsahl-ucsocial and its README")
    return _convert.main(argv, __doc__, convert, src, (DEFAULT_OUT, "folder to write uci_messages.npz into"))


if __name__ == "__main__":
    sys.exit(main())

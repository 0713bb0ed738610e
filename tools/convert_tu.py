"""Convert the TU graph-classification sets ENZYMES and PROTEINS into the compact files shipped
in the package.

Reads the collection's text format (``DS_A.txt``, ``DS_graph_indicator.txt``,
``DS_graph_labels.txt``, ``DS_node_labels.txt``, ``DS_node_attributes.txt`` when present; 1-based
ids; each folder's README.txt describes it) and writes ``<out>/tu_<name>.npz`` with
:func:`numpy.savez_compressed` (plain arrays only: the package reads it with
``allow_pickle=False``) plus ``<out>/LICENSE-tu.md`` (the source folder's README and what was
derived).

Usage::

    python tools/convert_tu.py [--src ../shared/data/tu] [--out gglspeedup/data]

Stored arrays (nodes in file order, which groups them by graph):

``ptr``             int64 (G + 1,): graph ``g`` holds nodes ``ptr[g] .. ptr[g + 1]``
``edges``           int32 (2, E): each undirected edge once, smaller node id first, sorted
                    (``DS_A.txt`` lists both directions; the loader restores them)
``node_label``      int8 (N,): the node label, shifted to start at 0
``node_attr``       float32 (N, F): the node attributes (ENZYMES: 18; absent for PROTEINS)
``graph_label``     int8 (G,): the class, shifted to start at 0
"""

from __future__ import annotations

import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tools/_convert.py, also when loaded by path
import _convert

NAMES = ("ENZYMES", "PROTEINS")
DEFAULT_SRC = _convert.source_folder("tu")
DEFAULT_OUT = _convert.PACKAGE_DATA


def _read(path, dtype, ndmin=1):
    return np.loadtxt(path, delimiter=",", dtype=dtype, ndmin=ndmin)


def convert(src: str, name: str) -> dict:
    """The stored arrays of one set (see the module docstring), checked."""
    folder = os.path.join(src, name)
    indicator = _read(os.path.join(folder, f"{name}_graph_indicator.txt"), np.int64) - 1
    if np.any(np.diff(indicator) < 0) or indicator[0] != 0:
        raise ValueError(f"{name}: nodes are not grouped by graph in file order")
    num_graphs = int(indicator[-1]) + 1
    ptr = np.concatenate([[0], np.cumsum(np.bincount(indicator, minlength=num_graphs))]).astype(np.int64)
    pairs = _read(os.path.join(folder, f"{name}_A.txt"), np.int64, ndmin=2) - 1
    if not np.array_equal(indicator[pairs[:, 0]], indicator[pairs[:, 1]]):
        raise ValueError(f"{name}: an edge joins two graphs")
    pairs = np.unique(np.sort(pairs[pairs[:, 0] != pairs[:, 1]], axis=1), axis=0)
    node_label = _read(os.path.join(folder, f"{name}_node_labels.txt"), np.int64)
    graph_label = _read(os.path.join(folder, f"{name}_graph_labels.txt"), np.int64)
    arrays = {
        "ptr": ptr,
        "edges": pairs.T.astype(np.int32),
        "node_label": (node_label - node_label.min()).astype(np.int8),
        "graph_label": (graph_label - graph_label.min()).astype(np.int8),
    }
    attributes = os.path.join(folder, f"{name}_node_attributes.txt")
    if os.path.exists(attributes):
        arrays["node_attr"] = _read(attributes, np.float32, ndmin=2)
    if arrays["node_label"].shape[0] != ptr[-1] or arrays["graph_label"].shape[0] != num_graphs:
        raise ValueError(f"{name}: label counts do not match the graph indicator")
    return arrays


def _digest(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]


def main(argv=None) -> int:
    args = _convert.parse_args(
        argv,
        __doc__.splitlines()[0],
        src=(DEFAULT_SRC, "folder holding ENZYMES/ and PROTEINS/ (and README.md)"),
        out=(DEFAULT_OUT, "where tu_<name>.npz and LICENSE-tu.md go"),
    )
    os.makedirs(args.out, exist_ok=True)
    notes = []
    for name in NAMES:
        arrays = convert(args.src, name)
        path = os.path.join(args.out, f"tu_{name.lower()}.npz")
        np.savez_compressed(path, **arrays)
        line = (
            f"{name}: {arrays['ptr'].shape[0] - 1} graphs, {int(arrays['ptr'][-1])} nodes, "
            f"{arrays['edges'].shape[1]} undirected edges, {int(arrays['graph_label'].max()) + 1} classes -> "
            f"{os.path.basename(path)} ({os.path.getsize(path)} bytes)"
        )
        print(line)
        notes.append(f"- {line}")
        for source in sorted(os.listdir(os.path.join(args.src, name))):
            notes.append(f"  - `{name}/{source}` sha256 {_digest(os.path.join(args.src, name, source))}")
    readme = ""
    if os.path.exists(os.path.join(args.src, "README.md")):
        with open(os.path.join(args.src, "README.md")) as handle:
            readme = handle.read()
    licences = []
    for name in NAMES:
        with open(os.path.join(args.src, name, "README.txt")) as handle:
            licences.append(f"## {name}/README.txt\n\n```\n{handle.read().strip()}\n```\n")
    with open(os.path.join(args.out, "LICENSE-tu.md"), "w") as handle:
        handle.write(
            "# TU graph-classification sets shipped with gglspeedup: ENZYMES and PROTEINS\n\n"
            "`tu_enzymes.npz` and `tu_proteins.npz` are derived by `tools/convert_tu.py` from the TU Dortmund "
            "collection's files (Morris et al., \"TUDataset: A collection of benchmark datasets for learning "
            'with graphs", 2020), redistributed for research use; cite the papers named below when you '
            "report results. What was derived: node ids made 0-based and grouped by graph (`ptr`), each "
            "undirected edge stored once (the files list both directions; no self loops occur), node and "
            "graph labels shifted to start at 0, node attributes as float32.\n\n"
            + "\n".join(notes)
            + "\n\n## Source notes\n\n"
            + readme.strip()
            + "\n\n"
            + "\n".join(licences)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

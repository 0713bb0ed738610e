"""Convert the raw Planetoid files (Cora, CiteSeer) into the compact files shipped in the package.

Reads ``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}`` exactly as PyG's ``Planetoid`` reader
does (pickles with ``encoding="latin1"``, CiteSeer's isolated test nodes padded with zero rows, test
rows put back in ``test.index`` order, self loops removed, edges coalesced) and writes
``<out>/<name>.npz`` with :func:`numpy.savez_compressed` (plain arrays only, so the package reads
it with ``allow_pickle=False``) plus ``<out>/LICENSE-planetoid.md``.

Usage::

    python tools/convert_planetoid.py [--src ../shared/data/planetoid] [--out gglspeedup/data]

Stored arrays (all integer; the features are binary, stored as CSR column lists):

``edge_index``  int32 [2, E], coalesced (sorted by source, then target), no self loops
``x_indptr``    int32 [N + 1] and ``x_indices`` int16 [nnz]: row ``i`` of the binary feature
                matrix has ones at ``x_indices[x_indptr[i]:x_indptr[i + 1]]``
``x_shape``     int64 [2]
``y``           int8 [N]
``train_index``, ``val_index``, ``test_index``  int32, ascending
"""

from __future__ import annotations

import io
import os
import pickle
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tools/_convert.py, also when loaded by path
import _convert

NAMES = ("cora", "citeseer")
DEFAULT_SRC = _convert.source_folder("planetoid")
DEFAULT_OUT = _convert.PACKAGE_DATA

# Only the classes the Planetoid pickles are made of may be created while unpickling.
_ALLOWED = {
    ("collections", "defaultdict"),
    ("builtins", "list"),
    ("builtins", "dict"),
    ("__builtin__", "list"),  # Python 2 pickles; Unpickler maps the name after this check
    ("__builtin__", "dict"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("scipy.sparse", "csr_matrix"),
    ("scipy.sparse", "csc_matrix"),
}


class _PlanetoidUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that builds only numpy / scipy.sparse / container objects."""

    def find_class(self, module, name):
        # Old pickles name private scipy modules (scipy.sparse.csr); map them to the public one.
        if re.match(r"^scipy\.sparse\.(_?csr|_?csc)$", module):
            module = "scipy.sparse"
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a Planetoid file")
        return super().find_class(module, name)


def _read(folder: str, name: str, item: str):
    path = os.path.join(folder, f"ind.{name}.{item}")
    if item == "test.index":
        return np.loadtxt(path, dtype=np.int64, ndmin=1)
    with open(path, "rb") as handle:
        out = _PlanetoidUnpickler(io.BytesIO(handle.read()), encoding="latin1").load()
    if item == "graph":
        return out
    return np.asarray(out.todense() if hasattr(out, "todense") else out, dtype=np.float32)


def read_planetoid(folder: str, name: str) -> dict[str, np.ndarray]:
    """The arrays of one Planetoid graph, as PyG's ``read_planetoid_data`` builds them."""
    _x, tx, allx, y, ty, ally, graph, test_index = (
        _read(folder, name, item) for item in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
    )
    train_index = np.arange(len(y), dtype=np.int64)
    val_index = np.arange(len(y), len(y) + 500, dtype=np.int64)
    sorted_test_index = np.sort(test_index)
    if name == "citeseer":
        # Isolated nodes leave gaps in CiteSeer's test ids: pad them with zero rows (as PyG does).
        span = int(test_index.max() - test_index.min()) + 1
        tx_ext = np.zeros((span, tx.shape[1]), dtype=tx.dtype)
        tx_ext[sorted_test_index - test_index.min()] = tx
        ty_ext = np.zeros((span, ty.shape[1]), dtype=ty.dtype)
        ty_ext[sorted_test_index - test_index.min()] = ty
        tx, ty = tx_ext, ty_ext
    features = np.concatenate([allx, tx])
    features[test_index] = features[sorted_test_index]
    labels = np.concatenate([ally, ty]).argmax(axis=1)
    labels[test_index] = labels[sorted_test_index]
    num_nodes = len(labels)

    rows = np.concatenate([np.full(len(v), k, dtype=np.int64) for k, v in graph.items()])
    cols = np.concatenate([np.asarray(v, dtype=np.int64) for v in graph.values()])
    keep = rows != cols  # remove_self_loops, then coalesce (sort by (row, col), drop duplicates)
    keys = np.unique(rows[keep] * num_nodes + cols[keep])
    edge_index = np.stack([keys // num_nodes, keys % num_nodes])

    if not np.isin(features, (0.0, 1.0)).all():
        raise ValueError(f"{name}: features are not binary; the compact format stores only ones")
    rows_nz, cols_nz = np.nonzero(features)
    x_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows_nz, minlength=num_nodes), out=x_indptr[1:])
    return {
        "edge_index": edge_index.astype(np.int32),
        "x_indptr": x_indptr.astype(np.int32),
        "x_indices": cols_nz.astype(np.int16),
        "x_shape": np.asarray(features.shape, dtype=np.int64),
        "y": labels.astype(np.int8),
        "train_index": train_index.astype(np.int32),
        "val_index": val_index.astype(np.int32),
        "test_index": sorted_test_index.astype(np.int32),
    }


def _license_text(src: str) -> str:
    with open(os.path.join(src, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    return (
        "# Licence of the bundled Cora and CiteSeer data\n\n"
        "`cora.npz` and `citeseer.npz` are converted by `tools/convert_planetoid.py` from the raw\n"
        "Planetoid files described below (notice copied verbatim from the source folder's README).\n\n"
        "---\n\n" + readme
    )


def convert(src: str = DEFAULT_SRC, out: str = DEFAULT_OUT, names=NAMES) -> list[str]:
    """Write ``<out>/<name>.npz`` for each name and the licence notice; return the paths written."""
    files = {f"{name}.npz": read_planetoid(src, name) for name in names}
    return _convert.write(out, files, "LICENSE-planetoid.md", _license_text(src))


def main(argv=None) -> int:
    src = (DEFAULT_SRC, "folder with the raw ind.<name>.* files")
    return _convert.main(argv, __doc__, convert, src, (DEFAULT_OUT, "folder to write <name>.npz into"))


if __name__ == "__main__":
    sys.exit(main())

"""Readers for graphs users already have on disk: OGB node-property raw folders and the
GraphSAGE / DGL Reddit files. Both return ``(graph, x, y, split)`` like :func:`load`.

Neither reader unpickles anything: CSV files are parsed as text, ``.npz`` files are read with
``allow_pickle=False``.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import zipfile
import zlib

import numpy as np

from ..graph import CSRGraph

__all__ = ["read_ogb_node", "read_reddit"]


# What a truncated or garbage archive raises deep inside zipfile / gzip / zlib / numpy.
_CORRUPT = (zipfile.BadZipFile, gzip.BadGzipFile, EOFError, zlib.error, ValueError, KeyError, UnicodeDecodeError)


@contextlib.contextmanager
def _reading(path: str, what: str):
    """Re-raise a corrupt file's error as a ``ValueError`` naming ``path`` and what it should be
    (the original error chained as the cause)."""
    try:
        yield
    except _CORRUPT as error:
        raise ValueError(f"{path!r} is not a readable {what}: {type(error).__name__}: {error}") from error


def _read_csv_gz(path: str, dtype, *, ndmin: int = 1) -> np.ndarray:
    """A headerless comma-separated (optionally gzipped) numeric file as an array."""
    opener = gzip.open if path.endswith(".gz") else open
    with _reading(path, "gzipped CSV file" if path.endswith(".gz") else "CSV file"), opener(path, "rb") as handle:
        return np.loadtxt(handle, delimiter=",", dtype=dtype, ndmin=ndmin)


_OGB_RAW = "edge, node-feat and node-label (num-node-list optional), each .csv.gz or .csv"
_OGB_SPLIT = "train, valid and test, each .csv.gz or .csv"


def _holds(folder: str) -> str:
    """What ``folder`` holds, for an error message."""
    if not os.path.isdir(folder):
        return f"{folder!r} does not exist" if not os.path.exists(folder) else f"{folder!r} is not a folder"
    names = sorted(os.listdir(folder))
    shown = names[:12] + (["..."] if len(names) > 12 else [])
    return f"it holds {shown}"


def _find(folder: str, stem: str, required: bool = True, needs: str = _OGB_RAW) -> str | None:
    for suffix in (".csv.gz", ".csv"):
        path = os.path.join(folder, stem + suffix)
        if os.path.isfile(path):
            return path
    if required:
        raise FileNotFoundError(
            f"{os.path.join(folder, stem + '.csv.gz')!r} (or .csv) not found: the folder needs {needs}; "
            f"{_holds(folder)}"
        )
    return None


def read_ogb_node(path: str | os.PathLike, undirected: bool = True, split_scheme: str | None = None):
    """Read an OGB node-property dataset from its raw folder (as downloaded; no OGB package needed).

    For homogeneous datasets with node features and one label column (ogbn-arxiv, ogbn-products,
    ogbn-papers100M); heterogeneous ogbn-mag and feature-less ogbn-proteins are not covered.

    Parameters
    ----------
    path : path
        The dataset folder holding ``raw/`` and ``split/<scheme>/`` (e.g. ``.../ogbn_products``).
        Files read: ``raw/edge.csv.gz`` (``src,dst`` per line), ``raw/node-feat.csv.gz``,
        ``raw/node-label.csv.gz``, ``raw/num-node-list.csv.gz`` when present, and
        ``split/<scheme>/{train,valid,test}.csv.gz`` (one node id per line). Plain ``.csv`` works
        too.
    undirected : bool
        OGB stores undirected graphs (ogbn-products, ogbn-proteins) once per edge; ``True`` adds
        the reverse of every edge, interleaved as OGB's loader does (``add_inverse_edge``), so
        edge ``k`` of the file is stored as edge ids ``2k`` (``src -> dst``) and ``2k + 1``
        (``dst -> src``). Pass ``False`` for directed graphs (ogbn-arxiv, ogbn-papers100M).
    split_scheme : str, optional
        Folder under ``split/`` to read (default: the only one there).

    Returns
    -------
    graph : CSRGraph
        ``from_edge_index(edge_index, num_nodes, direction="in")``; ``edge_ids`` index the
        (doubled, when ``undirected``) edge list.
    x : float32 ndarray, shape (num_nodes, num_features)
    y : int64 ndarray, shape (num_nodes,)
        ``-1`` where the label file has ``nan`` (unlabelled nodes); first column if several. A
        label that is not a whole number >= 0 raises ``ValueError`` naming the file and row.
    split : dict
        ``"train"``, ``"val"`` (OGB's ``valid``), ``"test"``: ascending int64 node ids.
    """
    from ..validation import check_bool

    undirected = check_bool("undirected", undirected)  # "no" would double every edge
    root = os.fspath(path)
    raw = os.path.join(root, "raw")
    if not os.path.isdir(raw):
        raise FileNotFoundError(
            f"{raw!r} not found: path must be an OGB dataset folder with raw/ ({_OGB_RAW}) and "
            f"split/<scheme>/ ({_OGB_SPLIT}); {_holds(root)}"
        )
    edges = _read_csv_gz(_find(raw, "edge"), np.int64, ndmin=2)
    if edges.size and edges.shape[1] != 2:
        raise ValueError(f"{_find(raw, 'edge')!r} must have two columns (src,dst), got {edges.shape[1]}")
    edge_index = edges.reshape(-1, 2).T
    x = _read_csv_gz(_find(raw, "node-feat"), np.float32, ndmin=2)
    y = _labels(_find(raw, "node-label"))
    count_file = _find(raw, "num-node-list", required=False)
    if count_file is not None:
        counts = _read_csv_gz(count_file, np.int64)
        if counts.size == 0 or counts[0] < 0:  # [0] of an empty file was a bare IndexError
            raise ValueError(f"{count_file!r} must hold the node count (an int >= 0), got {counts.tolist()}")
        num_nodes = int(counts[0])
    else:
        num_nodes = len(x)
    if len(x) != num_nodes or len(y) != num_nodes:
        raise ValueError(
            f"{root!r}: node-feat has {len(x)} rows and node-label {len(y)}, expected num_nodes = {num_nodes}"
        )
    if undirected:
        doubled = np.empty((2, 2 * edge_index.shape[1]), dtype=np.int64)
        doubled[:, 0::2] = edge_index
        doubled[:, 1::2] = edge_index[::-1]
        edge_index = doubled
    graph = CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes, direction="in")
    split = _read_ogb_split(os.path.join(root, "split"), split_scheme, num_nodes)
    return graph, x, y, split


def _labels(path: str) -> np.ndarray:
    """The first column of an OGB label file as int64, ``nan`` (unlabelled) as ``-1``; ``ValueError``
    naming the file and row for a label that is not a whole number >= 0 (astype would truncate 2.5
    to 2 and turn inf or 1e20 into int64's smallest value)."""
    labels = _read_csv_gz(path, np.float64, ndmin=2)[:, 0]
    known = ~np.isnan(labels)
    bad = known & ~((labels >= 0) & (labels < 2.0**63) & (labels == np.floor(labels)))
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(f"{path!r}: row {row} holds label {float(labels[row])!r}, not a whole number >= 0 (nor nan)")
    return np.where(known, labels, -1).astype(np.int64)


def _whole(path: str, name: str, values: np.ndarray) -> np.ndarray:
    """Integer ``values`` as int64; float ones only when every value is a whole number in int64's
    range (astype would truncate 2.5 to 2 and turn nan into int64's smallest value), else
    ``ValueError`` naming ``path``, the array and the first bad position."""
    if values.dtype.kind in "iu":
        return values.astype(np.int64)
    if values.dtype.kind != "f":
        raise ValueError(f"{path!r}: its {name} array must hold integers, got dtype {values.dtype}")
    bad = ~((np.abs(values) < 2.0**63) & (values == np.floor(values)))  # nan and inf fail both
    if bad.any():
        position = int(np.argmax(bad))
        raise ValueError(f"{path!r}: {name}[{position}] = {float(values[position])!r} is not a whole number")
    return values.astype(np.int64)


def _read_ogb_split(folder: str, scheme: str | None, num_nodes: int) -> dict[str, np.ndarray]:
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"{folder!r} not found: the OGB dataset folder needs split/<scheme>/ ({_OGB_SPLIT}); "
            f"{_holds(os.path.dirname(folder))}"
        )
    if scheme is None:
        schemes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
        if len(schemes) != 1:
            raise ValueError(f"{folder!r} holds split schemes {schemes}: pick one with split_scheme=")
        scheme = schemes[0]
    split = {}
    for name, stem in (("train", "train"), ("val", "valid"), ("test", "test")):
        ids = np.sort(_read_csv_gz(_find(os.path.join(folder, scheme), stem, needs=_OGB_SPLIT), np.int64))
        if ids.size and (ids[0] < 0 or ids[-1] >= num_nodes):
            raise ValueError(f"split {stem!r} holds node ids outside [0, {num_nodes})")
        split[name] = ids
    return split


def read_reddit(path: str | os.PathLike):
    """Read the GraphSAGE Reddit dataset in DGL's layout (``reddit_data.npz``, ``reddit_graph.npz``).

    Parameters
    ----------
    path : path
        Folder holding ``reddit_data.npz`` (arrays ``feature`` (N, 602), ``label`` (N,),
        ``node_types`` (N,): 1 train, 2 val, 3 test) and ``reddit_graph.npz`` (a
        ``scipy.sparse.save_npz`` adjacency, COO or CSR, entry ``(u, v)`` an edge ``u -> v``).

    Returns
    -------
    graph : CSRGraph
        ``from_edge_index([rows, cols], N, direction="in")`` over the matrix's entries in COO
        order (the Reddit adjacency is symmetric, 114,615,892 entries for the full dataset).
    x : float32 ndarray, shape (N, 602)
    y : int64 ndarray, shape (N,)
    split : dict
        Nodes with ``node_types`` 1, 2, 3 as ``"train"``, ``"val"``, ``"test"`` (ascending int64).
    """
    import scipy.sparse as sp

    root = os.fspath(path)
    data_path = os.path.join(root, "reddit_data.npz")
    graph_path = os.path.join(root, "reddit_graph.npz")
    for file in (data_path, graph_path):
        if not os.path.isfile(file):
            raise FileNotFoundError(
                f"{file!r} not found: path must hold reddit_data.npz (feature, label, node_types) and "
                f"reddit_graph.npz (a scipy.sparse adjacency), DGL's layout; {_holds(root)}"
            )
    with _reading(data_path, ".npz archive of feature, label and node_types"):
        with np.load(data_path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise ValueError("it holds one array, not an .npz archive")
            missing = {"feature", "label", "node_types"} - set(data.files)
            if missing:
                raise KeyError(f"it lacks arrays {sorted(missing)}")
            x = np.ascontiguousarray(data["feature"], dtype=np.float32)
            labels = data["label"]
            node_types = data["node_types"]
    y = _whole(data_path, "label", labels)
    if x.ndim != 2:  # a 1-D feature array came back as x of shape (N,)
        raise ValueError(f"{data_path!r}: its feature array must be 2-D (N, F), got shape {x.shape}")
    with _reading(graph_path, "scipy.sparse .npz adjacency"):
        adjacency = sp.load_npz(graph_path).tocoo()
    num_nodes = len(x)
    if adjacency.shape != (num_nodes, num_nodes) or len(y) != num_nodes or len(node_types) != num_nodes:
        raise ValueError(
            f"{root!r}: adjacency {adjacency.shape}, {len(y)} labels and {len(node_types)} node types "
            f"do not match {num_nodes} feature rows"
        )
    edge_index = np.stack([adjacency.row.astype(np.int64), adjacency.col.astype(np.int64)])
    graph = CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes, direction="in")
    split = {
        name: np.flatnonzero(node_types == code).astype(np.int64)
        for name, code in (("train", 1), ("val", 2), ("test", 3))
    }
    return graph, x, y, split

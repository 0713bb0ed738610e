"""Bundled Planetoid graphs, the converter, synthetic generators, on-disk readers, --dataset specs."""

import gzip
import os
import pickle
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp

from gglspeedup import CSRGraph, datasets

from conftest import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANETOID_SRC = os.path.join(ROOT, "..", "shared", "data", "planetoid")

# name: (nodes, directed edges, features, classes, train, val, test, ones in x, class counts)
PLANETOID = {
    "cora": (2708, 10556, 1433, 7, 140, 500, 1000, 49216, [351, 217, 418, 818, 426, 298, 180]),
    "citeseer": (3327, 9104, 3703, 6, 120, 500, 1000, 105165, [264, 590, 668, 701, 596, 508]),
}


def edge_set(graph):
    """{(source, target)} of a graph whose row v lists the sources of edges into v."""
    targets = np.repeat(np.arange(graph.num_nodes), graph.degree())
    return set(zip(graph.indices.tolist(), targets.tolist()))


def assert_simple_symmetric(graph):
    matrix = graph.to_scipy()
    assert (matrix != matrix.T).nnz == 0, "not symmetric"
    assert matrix.diagonal().sum() == 0, "self loops"
    matrix.sum_duplicates()
    assert matrix.nnz == graph.num_edges, "repeated edges"


def assert_same_dataset(a, b):
    (ga, xa, ya, sa), (gb, xb, yb, sb) = a, b
    for name in ("indptr", "indices", "edge_ids"):
        assert np.array_equal(getattr(ga, name), getattr(gb, name)), name
    assert np.array_equal(xa, xb) and xa.dtype == xb.dtype
    assert np.array_equal(ya, yb)
    assert sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa)


# ---------------------------------------------------------------------------- planetoid
@pytest.mark.parametrize("name", sorted(PLANETOID))
def test_planetoid_counts_match_pyg(name):
    nodes, edges, features, classes, train, val, test, ones, class_counts = PLANETOID[name]
    graph, x, y, split = datasets.load(name)
    assert isinstance(graph, CSRGraph)
    assert (graph.num_nodes, graph.num_edges) == (nodes, edges)
    assert x.shape == (nodes, features) and x.dtype == np.float32 and x.flags.c_contiguous
    assert set(np.unique(x).tolist()) == {0.0, 1.0} and int(x.sum()) == ones
    assert y.dtype == np.int64 and y.shape == (nodes,)
    assert np.bincount(y).tolist() == class_counts and len(class_counts) == classes
    assert [len(split[k]) for k in ("train", "val", "test")] == [train, val, test]
    assert all(split[k].dtype == np.int64 for k in split)
    assert np.array_equal(split["train"], np.arange(train))
    assert np.array_equal(split["val"], np.arange(train, train + 500))
    assert np.all(np.diff(split["test"]) > 0) and split["test"].max() < nodes
    assert not set(split["test"].tolist()) & set(range(train + 500))
    assert_simple_symmetric(graph)


def test_planetoid_graph_is_built_with_in_semantics_from_the_shipped_edge_list():
    graph, *_ = datasets.load("cora")
    with np.load(os.path.join(ROOT, "gglspeedup", "data", "cora.npz"), allow_pickle=False) as data:
        edge_index = data["edge_index"]
    expected = CSRGraph.from_edge_index(edge_index, num_nodes=2708, direction="in")
    assert np.array_equal(graph.indptr, expected.indptr) and np.array_equal(graph.edge_ids, expected.edge_ids)
    assert np.array_equal(edge_index[0, graph.edge_ids], graph.indices)


def test_citeseer_pads_isolated_test_nodes_with_zero_rows():
    _graph, x, _y, split = datasets.load("CiteSeer")
    empty = np.flatnonzero(x.sum(axis=1) == 0)
    assert len(empty) == 15
    assert not set(empty.tolist()) & set(split["test"].tolist())


def test_planetoid_normalized_features():
    _, raw, *_ = datasets.load("cora")
    _, x, *_ = datasets.load("cora", normalize=True)
    assert x.dtype == np.float32
    assert np.allclose(x.sum(axis=1), 1.0)
    assert np.array_equal(x > 0, raw > 0)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(name="pubmed"), ValueError, r"name must be one of \('cora', 'citeseer'\), got 'pubmed'"),
        (dict(name=1), TypeError, r"name must be a str, got int"),
        (dict(name="cora", root="/nonexistent/folder"), FileNotFoundError, r"cora.npz' not found"),
        # os.fspath's "expected str, bytes or os.PathLike object, not int" named no argument
        (dict(name="cora", root=3), TypeError, r"root must be a folder path \(str or os.PathLike\) or None, got int"),
        (dict(name="wordnet", root=b"/data"), TypeError, r"root must be a folder path .* got bytes"),
    ],
)
def test_load_rejects(kwargs, error, message):
    with pytest.raises(error, match=message):
        datasets.load(**kwargs)


def _converter():
    return load_file("tools/convert_planetoid.py")


@pytest.mark.skipif(
    not os.path.isdir(PLANETOID_SRC), reason="the raw Planetoid files (../shared/data/planetoid) are absent"
)
def test_converter_reproduces_the_shipped_files(tmp_path):
    written = _converter().convert(PLANETOID_SRC, str(tmp_path))
    assert sorted(os.path.basename(p) for p in written) == ["LICENSE-planetoid.md", "citeseer.npz", "cora.npz"]
    for name in PLANETOID:
        shipped = os.path.join(ROOT, "gglspeedup", "data", f"{name}.npz")
        assert os.path.getsize(shipped) < 1_000_000
        with np.load(shipped, allow_pickle=False) as old, np.load(tmp_path / f"{name}.npz", allow_pickle=False) as new:
            assert sorted(old.files) == sorted(new.files)
            for key in old.files:
                assert old[key].dtype == new[key].dtype and np.array_equal(old[key], new[key]), key
        assert_same_dataset(datasets.load(name, root=tmp_path), datasets.load(name))
    with (
        open(tmp_path / "LICENSE-planetoid.md", encoding="utf-8") as fresh,
        open(os.path.join(ROOT, "gglspeedup", "data", "LICENSE-planetoid.md"), encoding="utf-8") as shipped,
    ):
        text = fresh.read()
        assert text == shipped.read()
    assert "MIT" in text and "Copyright (c) 2016 Zhilin Yang" in text


def test_converter_refuses_pickles_with_foreign_classes(tmp_path):
    # A pickle that would call os.system must not run: only numpy/scipy/container classes load.
    class Exploit:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    (tmp_path / "ind.cora.x").write_bytes(pickle.dumps(Exploit()))
    with pytest.raises(pickle.UnpicklingError, match=r"refusing to load .*system"):
        _converter()._read(str(tmp_path), "cora", "x")


# ---------------------------------------------------------------------------- synthetic graphs
def _reference_powerlaw(num_nodes, avg_degree, seed, exponent=2.5):
    """Same random draws as synthetic_powerlaw, CSR built by scipy instead of the numba kernels."""
    rng = np.random.default_rng(seed)
    pairs = int(num_nodes * avg_degree / 2)
    beta = 1.0 - 1.0 / (exponent - 1.0)

    def endpoints(uniform):  # inverse CDF of x ** -alpha on [1, num_nodes + 1), in NumPy
        x = (uniform * ((num_nodes + 1.0) ** beta - 1.0) + 1.0) ** (1.0 / beta)
        return np.clip(x.astype(np.int64) - 1, 0, num_nodes - 1)

    src, dst = endpoints(rng.random(pairs)), endpoints(rng.random(pairs))
    shuffle = rng.permutation(num_nodes)
    src, dst = shuffle[src], shuffle[dst]
    keep = src != dst
    rows, cols = np.concatenate([src[keep], dst[keep]]), np.concatenate([dst[keep], src[keep]])
    matrix = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(num_nodes, num_nodes)).tocsr()
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix


@pytest.mark.parametrize("num_nodes, avg_degree, seed", [(1, 4, 0), (2, 3, 0), (50, 6, 1), (400, 10.5, 7)])
def test_synthetic_powerlaw_matches_a_scipy_reference(num_nodes, avg_degree, seed):
    graph = datasets.synthetic_powerlaw(num_nodes, avg_degree, seed=seed)
    expected = _reference_powerlaw(num_nodes, avg_degree, seed)
    assert graph.indptr.dtype == np.int64 and graph.indices.dtype == np.int32  # ids fit: int32
    assert np.array_equal(graph.indptr, expected.indptr)
    assert np.array_equal(graph.indices, expected.indices)
    assert_simple_symmetric(graph)


def test_synthetic_powerlaw_is_deterministic_and_seeded():
    a = datasets.synthetic_powerlaw(300, 8, seed=3)
    b = datasets.synthetic_powerlaw(300, 8, seed=3)
    c = datasets.synthetic_powerlaw(300, 8, seed=4)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert not (np.array_equal(a.indptr, c.indptr) and np.array_equal(a.indices, c.indices))


def test_synthetic_powerlaw_degrees_are_heavy_tailed_and_shuffled():
    graph = datasets.synthetic_powerlaw(20_000, 12, seed=0)
    degree = np.sort(graph.degree())[::-1]
    assert 0.85 * 12 < degree.mean() <= 12  # repeats between hubs are dropped
    assert degree[: len(degree) // 100].sum() > 0.10 * degree.sum()  # top 1% hold >10% of edges
    assert degree[0] > 20 * degree.mean()
    # Ids are shuffled: the 1% lowest ids are not the hubs of the weight sequence.
    low_ids = graph.degree()[: len(degree) // 100]
    assert low_ids.mean() < 3 * degree.mean()


def test_synthetic_powerlaw_edge_cases():
    assert datasets.synthetic_powerlaw(10, 0).num_edges == 0
    assert datasets.synthetic_powerlaw(10, 0).num_nodes == 10
    assert datasets.synthetic_powerlaw(1, 10).num_edges == 0  # only self loops can be drawn
    steep = datasets.synthetic_powerlaw(500, 6, exponent=3.5)
    assert_simple_symmetric(steep)


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((0, 4), {}, ValueError, r"num_nodes must be >= 1, got 0"),
        ((-5, 4), {}, ValueError, r"num_nodes must be >= 1, got -5"),
        ((10.0, 4), {}, TypeError, r"num_nodes must be an int, got float"),
        ((10, -1), {}, ValueError, r"avg_degree must be a finite number >= 0, got -1"),
        ((10, float("nan")), {}, ValueError, r"avg_degree must be a finite number >= 0, got nan"),
        ((10, "4"), {}, TypeError, r"avg_degree must be a number, got '4'"),
        ((10, 4), dict(exponent=2.0), ValueError, r"exponent must be a finite number > 2, got 2.0"),
        ((10, 4), dict(exponent=None), TypeError, r"exponent must be a number, got None"),
        ((10, 4), dict(seed=-1), ValueError, r"seed must be a non-negative int, got -1"),
        ((10, 4), dict(seed=1.5), TypeError, r"seed must be a non-negative int, got 1.5"),
    ],
)
def test_synthetic_powerlaw_rejects(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        datasets.synthetic_powerlaw(*args, **kwargs)


def test_synthetic_labels_and_features():
    y = datasets.synthetic_labels(3000, num_classes=4, seed=2)
    assert y.dtype == np.int64 and y.shape == (3000,) and set(np.unique(y).tolist()) == {0, 1, 2, 3}
    assert np.array_equal(y, datasets.synthetic_labels(3000, num_classes=4, seed=2))
    assert not np.array_equal(y, datasets.synthetic_labels(3000, num_classes=4, seed=3))
    noise = datasets.synthetic_features(3000, 16, seed=2)
    assert noise.dtype == np.float32 and noise.shape == (3000, 16) and noise.flags.c_contiguous
    assert abs(noise.mean()) < 0.05 and abs(noise.std() - 1) < 0.05
    x = datasets.synthetic_features(3000, 16, seed=2, labels=y)
    assert np.array_equal(x, datasets.synthetic_features(3000, 16, seed=2, labels=y))
    # The class signal is there: nearest class mean recovers most labels (chance is 25%).
    means = np.stack([x[y == c].mean(axis=0) for c in range(4)])
    predicted = np.argmin(((x[:, None, :] - means[None]) ** 2).sum(axis=2), axis=1)
    assert (predicted == y).mean() > 0.8
    assert (np.argmin(((noise[:, None, :] - means[None]) ** 2).sum(axis=2), axis=1) == y).mean() < 0.35


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: datasets.synthetic_labels(10, num_classes=0), ValueError, r"num_classes must be >= 1, got 0"),
        (lambda: datasets.synthetic_labels(-1), ValueError, r"num_nodes must be >= 0, got -1"),
        (lambda: datasets.synthetic_features(10, 0), ValueError, r"dim must be >= 1, got 0"),
        (
            lambda: datasets.synthetic_features(10, 4, labels=np.zeros(9, np.int64)),
            ValueError,
            r"labels must be an int array of shape \(10,\)",
        ),
        (
            lambda: datasets.synthetic_features(2, 4, labels=np.array([0, -1])),
            ValueError,
            r"labels must be >= 0, got -1",
        ),
        (
            lambda: datasets.random_split(10, (0.8, 0.2, 0.2)),
            ValueError,
            r"fractions must be three shares >= 0 summing to <= 1",
        ),
        (lambda: datasets.random_split(10, (0.5, 0.5)), ValueError, r"fractions must be three shares"),
        # int(nan) / float("a") raised with messages naming no argument
        (lambda: datasets.random_split(10, (np.nan, 0.2, 0.2)), ValueError, r"fractions must be three shares"),
        (lambda: datasets.random_split(10, "abc"), ValueError, r"fractions must be three shares .*got 'abc'"),
        (lambda: datasets.random_split(10, (0.2, 0.2, np.inf)), ValueError, r"fractions must be three shares"),
    ],
)
def test_synthetic_helpers_reject(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_random_split():
    split = datasets.random_split(1001, seed=5)
    sizes = [len(split[k]) for k in ("train", "val", "test")]
    assert sizes == [600, 200, 200]
    together = np.concatenate(list(split.values()))
    assert len(np.unique(together)) == 1000 and together.max() < 1001
    assert all(np.all(np.diff(split[k]) > 0) and split[k].dtype == np.int64 for k in split)
    again = datasets.random_split(1001, seed=5)
    assert all(np.array_equal(split[k], again[k]) for k in split)
    assert [len(v) for v in datasets.random_split(10, (1.0, 0.0, 0.0)).values()] == [10, 0, 0]


# ---------------------------------------------------------------------------- OGB reader
def _write_csv_gz(path, rows, fmt):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wt") as handle:
        for row in rows:
            handle.write(fmt(row) + "\n")


def _write_ogb(root, *, num_node_list=True, schemes=("sales_ranking",)):
    edges = np.array([[0, 1], [1, 2], [3, 0], [2, 2], [0, 1]])  # a self loop and a repeat
    x = np.arange(6 * 3, dtype=np.float32).reshape(6, 3) / 4
    labels = [3, 0, "nan", 1, 2, 0]
    raw = os.path.join(root, "raw")
    _write_csv_gz(os.path.join(raw, "edge.csv.gz"), edges, lambda r: f"{r[0]},{r[1]}")
    _write_csv_gz(os.path.join(raw, "node-feat.csv.gz"), x, lambda r: ",".join(repr(float(v)) for v in r))
    _write_csv_gz(os.path.join(raw, "node-label.csv.gz"), labels, str)
    if num_node_list:
        _write_csv_gz(os.path.join(raw, "num-node-list.csv.gz"), [6], str)
    for scheme in schemes:
        for stem, ids in (("train", [4, 0, 1]), ("valid", [3]), ("test", [5])):
            _write_csv_gz(os.path.join(root, "split", scheme, f"{stem}.csv.gz"), ids, str)
    return edges, x


@pytest.mark.parametrize("num_node_list", [True, False])
def test_read_ogb_node_undirected(tmp_path, num_node_list):
    edges, x_expected = _write_ogb(str(tmp_path), num_node_list=num_node_list)
    graph, x, y, split = datasets.read_ogb_node(tmp_path)
    assert graph.num_nodes == 6 and graph.num_edges == 2 * len(edges)  # node 5 is isolated, kept
    assert np.array_equal(x, x_expected) and x.dtype == np.float32
    assert y.tolist() == [3, 0, -1, 1, 2, 0] and y.dtype == np.int64
    assert {k: v.tolist() for k, v in split.items()} == {"train": [0, 1, 4], "val": [3], "test": [5]}
    # File edge k is stored as ids 2k (src -> dst) and 2k + 1 (dst -> src).
    targets = np.repeat(np.arange(6), graph.degree())
    for position, e in enumerate(graph.edge_ids.tolist()):
        u, v = edges[e // 2] if e % 2 == 0 else edges[e // 2][::-1]
        assert (graph.indices[position], targets[position]) == (u, v)
    assert np.array_equal(graph.to_scipy().toarray(), graph.to_scipy().toarray().T)


def test_read_ogb_node_directed_and_scheme_choice(tmp_path):
    edges, _ = _write_ogb(str(tmp_path), schemes=("time", "random"))
    with pytest.raises(ValueError, match=r"holds split schemes \['random', 'time'\]: pick one"):
        datasets.read_ogb_node(tmp_path)
    graph, *_ = datasets.read_ogb_node(tmp_path, undirected=False, split_scheme="time")
    expected = CSRGraph.from_edge_index(edges.T, num_nodes=6)
    assert np.array_equal(graph.indices, expected.indices) and np.array_equal(graph.edge_ids, expected.edge_ids)


@pytest.mark.filterwarnings("ignore:.*(input contained no data|Empty input file):UserWarning")  # np.loadtxt's
def test_read_ogb_node_rejects_broken_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"raw' not found: path must be an OGB dataset folder"):
        datasets.read_ogb_node(tmp_path)
    _write_ogb(str(tmp_path))
    _write_csv_gz(str(tmp_path / "raw" / "num-node-list.csv.gz"), [7], str)
    with pytest.raises(ValueError, match=r"node-feat has 6 rows and node-label 6, expected num_nodes = 7"):
        datasets.read_ogb_node(tmp_path)
    for counts in ([], [-6]):  # empty: a bare IndexError
        _write_csv_gz(str(tmp_path / "raw" / "num-node-list.csv.gz"), counts, str)
        with pytest.raises(ValueError, match=r"num-node-list\.csv\.gz' must hold the node count \(an int >= 0\)"):
            datasets.read_ogb_node(tmp_path)
    with pytest.raises(TypeError, match=r"undirected must be a bool \(True or False\), got str 'no'"):
        datasets.read_ogb_node(tmp_path, undirected="no")  # bool("no"): every edge doubled
    _write_csv_gz(str(tmp_path / "raw" / "num-node-list.csv.gz"), [6], str)
    # labels were cast with astype: 2.5 read as 2, inf and 1e20 as int64's smallest value
    for label in ("2.5", "inf", "1e20", "-3"):
        _write_csv_gz(str(tmp_path / "raw" / "node-label.csv.gz"), [3, 0, "nan", label, 2, 0], str)
        with pytest.raises(ValueError, match=r"node-label\.csv\.gz': row 3 holds label .*, not a whole number >= 0"):
            datasets.read_ogb_node(tmp_path)
    _write_csv_gz(str(tmp_path / "raw" / "node-label.csv.gz"), [3, 0, "nan", 1, 2, 0], str)
    _write_csv_gz(str(tmp_path / "split" / "sales_ranking" / "test.csv.gz"), [9], str)
    with pytest.raises(ValueError, match=r"split 'test' holds node ids outside \[0, 6\)"):
        datasets.read_ogb_node(tmp_path)
    _write_csv_gz(str(tmp_path / "raw" / "edge.csv.gz"), [(0, 1, 2)], lambda r: ",".join(map(str, r)))
    with pytest.raises(ValueError, match=r"must have two columns \(src,dst\), got 3"):
        datasets.read_ogb_node(tmp_path)
    _write_csv_gz(str(tmp_path / "raw" / "edge.csv.gz"), [(0, 1)], lambda r: ",".join(map(str, r)))
    os.remove(tmp_path / "raw" / "node-feat.csv.gz")
    with pytest.raises(FileNotFoundError, match=r"node-feat.csv.gz' \(or .csv\) not found: the folder needs"):
        datasets.read_ogb_node(tmp_path)


# ---------------------------------------------------------------------------- Reddit reader
def _write_reddit(root, fmt="coo"):
    rng = np.random.default_rng(0)
    n = 12
    upper = sp.random(n, n, density=0.3, random_state=1, format="coo")
    adjacency = ((upper + upper.T) > 0).astype(np.float32)
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    sp.save_npz(os.path.join(root, "reddit_graph.npz"), adjacency.asformat(fmt))
    feature = rng.standard_normal((n, 5)).astype(np.float64)
    label = rng.integers(0, 4, n).astype(np.int32)
    node_types = np.array([1, 1, 2, 3, 1, 2, 3, 3, 1, 1, 2, 3])
    np.savez(os.path.join(root, "reddit_data.npz"), feature=feature, label=label, node_types=node_types)
    return adjacency.tocoo(), feature, label, node_types


@pytest.mark.parametrize("fmt", ["coo", "csr"])
def test_read_reddit(tmp_path, fmt):
    adjacency, feature, label, node_types = _write_reddit(str(tmp_path), fmt)
    graph, x, y, split = datasets.read_reddit(tmp_path)
    assert graph.num_nodes == 12 and graph.num_edges == adjacency.nnz
    assert edge_set(graph) == set(zip(adjacency.row.tolist(), adjacency.col.tolist()))
    assert x.dtype == np.float32 and np.array_equal(x, feature.astype(np.float32))
    assert y.dtype == np.int64 and np.array_equal(y, label)
    for name, code in (("train", 1), ("val", 2), ("test", 3)):
        assert split[name].tolist() == np.flatnonzero(node_types == code).tolist()


def test_read_reddit_rejects_broken_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"reddit_data.npz' not found"):
        datasets.read_reddit(tmp_path)
    _write_reddit(str(tmp_path))
    np.savez(tmp_path / "reddit_data.npz", feature=np.zeros((12, 2)), label=np.zeros(12))
    with pytest.raises(ValueError, match=r"lacks arrays \['node_types'\]"):
        datasets.read_reddit(tmp_path)
    np.savez(tmp_path / "reddit_data.npz", feature=np.zeros((11, 2)), label=np.zeros(11), node_types=np.ones(11))
    with pytest.raises(ValueError, match=r"adjacency \(12, 12\), 11 labels and 11 node types do not match 11"):
        datasets.read_reddit(tmp_path)
    np.savez(tmp_path / "reddit_data.npz", feature=np.zeros((12, 2)), label=np.array([{}] * 12), node_types=np.ones(12))
    with pytest.raises(ValueError, match=r"allow_pickle=False"):  # never unpickles
        datasets.read_reddit(tmp_path)
    # a float label was cast with astype (2.5 read as 2, nan as int64's smallest value); a 1-D feature
    # array came back as an x of shape (12,)
    for label, shown in [
        (np.full(12, 2.5), r"label\[0\] = 2\.5 is not"),
        (np.full(12, np.nan), r"label\[0\] = nan is not"),
        (np.array(["1"] * 12), r"its label array must hold integers, got dtype <U1"),
    ]:
        np.savez(tmp_path / "reddit_data.npz", feature=np.zeros((12, 2)), label=label, node_types=np.ones(12))
        with pytest.raises(ValueError, match=r"reddit_data\.npz': " + shown):
            datasets.read_reddit(tmp_path)
    np.savez(tmp_path / "reddit_data.npz", feature=np.zeros(12), label=np.zeros(12), node_types=np.ones(12))
    with pytest.raises(ValueError, match=r"its feature array must be 2-D \(N, F\), got shape \(12,\)"):
        datasets.read_reddit(tmp_path)
    np.savez(tmp_path / "reddit_data.npz", feature=np.zeros((12, 2)), label=np.arange(12.0), node_types=np.ones(12))
    assert datasets.read_reddit(tmp_path)[2].tolist() == list(range(12))  # whole floats are labels


# ---------------------------------------------------------------------------- --dataset specs
def test_parse_dataset_spec_planetoid_and_powerlaw():
    assert_same_dataset(datasets.parse_dataset_spec("Cora"), datasets.load("cora"))
    graph, x, y, split = datasets.parse_dataset_spec("powerlaw:2k:6")
    assert graph.num_nodes == 2000 and x.shape == (2000, 128) and x.dtype == np.float32
    assert y.dtype == np.int64 and y.min() >= 0 and y.max() == 15
    assert [len(split[k]) for k in ("train", "val", "test")] == [1200, 400, 400]
    assert_same_dataset((graph, x, y, split), datasets.parse_dataset_spec("powerlaw:2000:6"))
    expected = datasets.synthetic_powerlaw(2000, 6, seed=0)
    assert np.array_equal(graph.indices, expected.indices)
    _, x_small, y_small, _ = datasets.parse_dataset_spec("powerlaw:300:4", feature_dim=8, num_classes=3, seed=1)
    assert x_small.shape == (300, 8) and y_small.max() == 2


def test_parse_dataset_spec_names_feature_dim_and_num_classes_before_building():
    for options, error, message in [
        (dict(feature_dim=0), ValueError, r"^feature_dim must be >= 1, got 0"),  # was "dim must be >= 1"
        (dict(feature_dim=2.0), TypeError, r"^feature_dim must be an int, got float 2.0"),
        (dict(num_classes=0), ValueError, r"^num_classes must be >= 1, got 0"),
    ]:
        for spec, builder in [("powerlaw:1000:4", "synthetic_powerlaw"), ("igbh-like:100", "synthetic_igbh")]:
            module = "synthetic" if builder == "synthetic_powerlaw" else "synthetic_hetero"
            with (
                pytest.raises(error, match=message),
                mock.patch(f"gglspeedup.datasets.{module}.{builder}", side_effect=AssertionError("built first")),
            ):
                datasets.parse_dataset_spec(spec, **options)


def test_parse_dataset_spec_readers(tmp_path):
    _write_ogb(str(tmp_path / "ogb"))
    os.makedirs(tmp_path / "reddit")
    _write_reddit(str(tmp_path / "reddit"))
    assert_same_dataset(
        datasets.parse_dataset_spec(f"ogb:{tmp_path / 'ogb'}"), datasets.read_ogb_node(tmp_path / "ogb")
    )
    assert_same_dataset(
        datasets.parse_dataset_spec(f"reddit:{tmp_path / 'reddit'}"), datasets.read_reddit(tmp_path / "reddit")
    )


@pytest.mark.parametrize(
    "spec, error, message",
    [
        (
            "pubmed",
            ValueError,
            r"dataset spec must be 'cora', 'citeseer', 'powerlaw:N:D', 'ogb:PATH' or 'reddit:PATH', got 'pubmed'",
        ),
        ("cora:extra", ValueError, r"got 'cora:extra'"),
        ("powerlaw:100", ValueError, r"dataset spec 'powerlaw:100': expected 'powerlaw:NUM_NODES:AVG_DEGREE'"),
        ("powerlaw:100:4:7", ValueError, r"expected 'powerlaw:NUM_NODES:AVG_DEGREE'"),
        (
            "powerlaw:many:4",
            ValueError,
            r"dataset spec 'powerlaw:many:4': NUM_NODES must be a number like 2000000 or 2M",
        ),
        ("powerlaw:100:x", ValueError, r"dataset spec 'powerlaw:100:x': AVG_DEGREE must be a number, got 'x'"),
        ("powerlaw:0:4", ValueError, r"NUM_NODES must be >= 1 and AVG_DEGREE > 0"),
        ("powerlaw:100:-2", ValueError, r"NUM_NODES must be >= 1 and AVG_DEGREE > 0"),
        ("powerlaw:100:inf", ValueError, r"AVG_DEGREE > 0 \(and finite\)"),  # was int(inf): OverflowError
        ("powerlaw:100:1e400", ValueError, r"AVG_DEGREE > 0 \(and finite\)"),
        ("powerlaw:1.5:4", ValueError, r"NUM_NODES must be a whole number, got '1.5'"),  # was rounded to 2
        ("igbh-like:2.5", ValueError, r"NUM_PAPERS must be a whole number, got '2.5'"),
        ("ogb:", ValueError, r"dataset spec must be 'ogb:PATH', got 'ogb:'"),
        ("reddit:/nonexistent", FileNotFoundError, r"reddit_data.npz' not found"),
        (None, TypeError, r"dataset spec must be a str, got NoneType"),
    ],
)
def test_parse_dataset_spec_rejects(spec, error, message):
    with pytest.raises(error, match=message):
        datasets.parse_dataset_spec(spec)


def test_spec_counts_are_exact_and_whole():
    from gglspeedup.datasets.spec import parse_spec

    assert parse_spec("powerlaw:1.1M:4").num_nodes == 1_100_000  # decimal scales, no float residue
    assert parse_spec("powerlaw:2.5k:4:3", graph_only=True)[3:] == (2500, 4, 3)
    with pytest.raises(ValueError, match=r"SEED must be a whole number, got '1\.5'"):
        parse_spec("powerlaw:100:4:1.5", graph_only=True)
    with pytest.raises(ValueError, match=r"NUM_NODES must be a whole number, got '1\.2'"):
        parse_spec("papers-like:1.2", graph_only=True)


def test_datasets_all_resolves():
    assert all(callable(getattr(datasets, name)) for name in datasets.__all__)
    assert set(datasets.__all__) <= set(dir(datasets))
    with pytest.raises(AttributeError, match=r"has no attribute 'nothing'"):
        datasets.nothing  # noqa: B018


# ------------------------------------------------ corrupt files name themselves (issue 26, C18)
def _corrupt(path, how):
    data = open(path, "rb").read()
    with open(path, "wb") as handle:
        handle.write(data[: len(data) // 2] if how == "truncated" else b"garbage, not an archive" * 4)


@pytest.mark.parametrize("how", ["truncated", "garbage"])
@pytest.mark.parametrize("name", ["reddit_data.npz", "reddit_graph.npz"])
def test_read_reddit_names_a_corrupt_file(tmp_path, name, how):
    _write_reddit(str(tmp_path))
    path = os.path.join(str(tmp_path), name)
    _corrupt(path, how)
    with pytest.raises(ValueError, match="is not a readable") as info:
        datasets.read_reddit(tmp_path)
    assert path in str(info.value) and info.value.__cause__ is not None


@pytest.mark.parametrize("how", ["truncated", "garbage"])
@pytest.mark.parametrize("stem", ["edge", "node-feat", "node-label"])
def test_read_ogb_node_names_a_corrupt_file(tmp_path, stem, how):
    _write_ogb(str(tmp_path))
    path = os.path.join(str(tmp_path), "raw", f"{stem}.csv.gz")
    _corrupt(path, how)
    with pytest.raises(ValueError, match="is not a readable gzipped CSV file") as info:
        datasets.read_ogb_node(tmp_path)
    assert path in str(info.value) and info.value.__cause__ is not None

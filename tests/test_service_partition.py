"""service.partition, the partition book and the partition server's rows / labels / info (issue 40)."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup._shared import file_backed
from gglspeedup._storage import read_folder
from gglspeedup.service import PartitionBook, PartServer, partition

METHODS = ["range", "metis"]


def _graph(num_nodes=60, num_edges=400, seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    return gg.CSRGraph.from_edge_index(rng.integers(0, num_nodes, (2, num_edges)), num_nodes=num_nodes, **kwargs)


def _typed(seed=0):
    rng = np.random.default_rng(seed)
    relations = {
        ("author", "writes", "paper"): rng.integers(0, 12, (2, 50)) % [[9], [12]],
        ("paper", "cites", "paper"): rng.integers(0, 12, (2, 40)),
        ("paper", "rev_writes", "author"): rng.integers(0, 12, (2, 30)) % [[12], [9]],
    }
    return gg.HeteroGraph(relations, {"author": 9, "paper": 12, "venue": 3})


def _part_rows(folder, part):
    return read_folder(os.path.join(folder, f"part{part}"), kind="Partition")[1]


@pytest.mark.parametrize("method", METHODS)
def test_service_partition_parts_hold_every_row_once_with_global_ids(tmp_path, method):
    graph = _graph()
    book = partition(graph, tmp_path / "p", 3, method=method)
    assert book.num_parts == 3 and book.method == method
    seen = np.zeros(graph.num_nodes, np.int64)
    for p in range(3):
        arrays = _part_rows(tmp_path / "p", p)
        nodes = book.nodes(p)
        assert (np.diff(nodes) > 0).all()
        assert (book.part_of(nodes) == p).all() and (book.local_of(nodes) == np.arange(len(nodes))).all()
        seen[nodes] += 1
        for row, v in enumerate(nodes):
            lo, hi = arrays["indptr"][row], arrays["indptr"][row + 1]
            a, b = graph.indptr[v], graph.indptr[v + 1]
            assert arrays["indices"][lo:hi].tolist() == graph.indices[a:b].tolist()
            assert arrays["edge_ids"][lo:hi].tolist() == graph.edge_ids[a:b].tolist()
        assert arrays["indices"].dtype == np.int32
    assert (seen == 1).all()
    assert sum(size["nodes"] for size in book.part_sizes) == graph.num_nodes
    assert sum(size["edges"] for size in book.part_sizes) == graph.num_edges


def test_service_partition_reports_csr_positions_without_edge_ids(tmp_path):
    graph = _graph(keep_edge_ids=False)
    book = partition(graph, tmp_path / "p", 2, method="range")
    for p in range(2):
        arrays = _part_rows(tmp_path / "p", p)
        positions = np.concatenate([np.arange(graph.indptr[v], graph.indptr[v + 1]) for v in book.nodes(p)])
        assert arrays["edge_ids"].tolist() == positions.tolist()


def test_service_partition_range_parts_are_contiguous_and_balanced(tmp_path):
    graph = _graph(num_nodes=300, num_edges=3000)
    book = partition(graph, tmp_path / "p", 4, method="range")
    assert (np.diff(np.asarray(book.part)) >= 0).all()
    weights = [size["nodes"] + size["edges"] for size in book.part_sizes]
    assert max(weights) - min(weights) <= 2 * (graph.degree().max() + 1)


def test_service_partition_metis_balances_nodes_plus_edges(tmp_path):
    graph = _graph(num_nodes=2000, num_edges=20000)
    book = partition(graph, tmp_path / "p", 3, method="metis")
    weights = np.array([size["nodes"] + size["edges"] for size in book.part_sizes])
    assert weights.max() <= 1.1 * weights.mean()


@pytest.mark.parametrize("typed", [False, True])
def test_service_partition_metis_leaves_no_part_empty_near_the_node_count(tmp_path, typed):
    # METIS alone left 9-10 of these 19-20 parts empty (the typed graph's 24 nodes: 6-8 of 23-24)
    graph = _typed() if typed else _graph(num_nodes=20, num_edges=40)
    num_nodes = 24 if typed else 20
    for num_parts in (num_nodes - 1, num_nodes):
        book = partition(graph, tmp_path / f"p{num_parts}", num_parts, method="metis")
        sizes = [size["nodes"] for size in book.part_sizes]
        assert min(sizes) >= 1 and sum(sizes) == num_nodes
        again = partition(graph, tmp_path / f"q{num_parts}", num_parts, method="metis")
        assert again.part.tolist() == book.part.tolist()


def test_service_partition_metis_fills_an_empty_part_from_the_largest_one_lowest_id_first():
    from gglspeedup.service._metis import fill_empty_parts

    # parts 1 and 3 empty: part 1 takes node 0 (part 0 holds 3 nodes), then parts 0 and 2 hold 2
    # each and part 3 takes the lowest id of the lower one, node 1
    part = fill_empty_parts(np.array([0, 0, 0, 2, 2], np.int64), 4)
    assert part.tolist() == [1, 3, 0, 2, 2]
    assert fill_empty_parts(np.array([1, 0, 1], np.int64), 2).tolist() == [1, 0, 1]


@pytest.mark.parametrize("method", METHODS)
def test_service_partition_rows_and_labels_served_exactly(tmp_path, method):
    graph = _graph()
    rng = np.random.default_rng(1)
    x = rng.normal(size=(graph.num_nodes, 5)).astype(np.float32)
    y = rng.integers(0, 7, graph.num_nodes)
    book = partition(graph, tmp_path / "p", 3, features=x, labels=y, method=method)
    for group in ([0], [1, 2]):
        server = PartServer(tmp_path / "p", group, warm=False)
        ids = np.concatenate([book.nodes(p) for p in group])
        ids = rng.permutation(np.concatenate([ids, ids[:3]]))
        rows = server.handle("rows", {"ids": ids.astype(np.int32), "node_type": None})["values"]
        assert rows.dtype == x.dtype and np.array_equal(rows, x[ids])
        labels = server.handle("labels", {"ids": ids, "node_type": None})["values"]
        assert np.array_equal(labels, y[ids])
        assert server.handle("rows", {"ids": ids[:0], "node_type": None})["values"].shape == (0, 5)
        info = server.handle("info", {})
        assert info["parts"].tolist() == group and info["pid"] == os.getpid()
        assert info["nodes"].tolist() == [book.part_sizes[p]["nodes"] for p in group]


def test_service_partition_typed_rows_per_node_type(tmp_path):
    graph = _typed()
    x = {"author": np.arange(18.0).reshape(9, 2), "paper": np.arange(36).reshape(12, 3)}
    book = partition(graph, tmp_path / "p", 2, features=x, labels={"paper": np.arange(12) * 10}, method="metis")
    assert book.typed and book.num_nodes == {"author": 9, "paper": 12, "venue": 3}
    server = PartServer(tmp_path / "p", [0, 1], warm=False)
    for node_type, table in x.items():
        ids = np.arange(book.count(node_type))[::-1]
        assert np.array_equal(server.handle("rows", {"ids": ids, "node_type": node_type})["values"], table[ids])
    assert server.handle("labels", {"ids": np.array([4, 0]), "node_type": "paper"})["values"].tolist() == [40, 0]
    with pytest.raises(ValueError, match="no features of node type 'venue'"):
        server.handle("rows", {"ids": np.array([0]), "node_type": "venue"})
    total = 0
    for p in range(2):
        arrays = _part_rows(tmp_path / "p", p)
        for t, node_type in enumerate(book.node_types):
            assert (book.part_of(arrays[f"nodes_{t}"], node_type) == p).all()
        total += arrays["indices"].shape[0]
    assert total == sum(graph.num_edges.values())


def test_service_partition_server_refuses_ids_it_does_not_own(tmp_path):
    graph = _graph()
    book = partition(graph, tmp_path / "p", 2, features=np.zeros((graph.num_nodes, 1)), method="range")
    server = PartServer(tmp_path / "p", [0], warm=False)
    other = book.nodes(1)[:2]
    with pytest.raises(ValueError, match="owned by partition 1"):
        server.handle("rows", {"ids": other, "node_type": None})
    with pytest.raises(IndexError):
        server.handle("rows", {"ids": np.array([graph.num_nodes]), "node_type": None})
    with pytest.raises(ValueError, match="method must be one of"):
        server.handle("nope", {})
    with pytest.raises(ValueError, match="parts"):
        PartServer(tmp_path / "p", [0, 0], warm=False)
    with pytest.raises(ValueError, match="parts\\[0\\]"):
        PartServer(tmp_path / "p", [2], warm=False)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_parts": 0}, ValueError, "num_parts must be >= 1"),
        ({"num_parts": 61}, ValueError, "num_parts must be in"),
        ({"num_parts": 2.0}, TypeError, "num_parts must be an int"),
        ({"features": np.zeros((59, 2))}, ValueError, "features must have one row per node"),
        ({"labels": np.zeros(61)}, ValueError, "labels must have one row per node"),
        ({"features": np.array(["a"] * 60)}, TypeError, "features must be a numeric array"),
        ({"labels": [[1, 2], [3]] * 30}, TypeError, "labels must be a numeric array with one row per node, got a list"),
        ({"method": "random"}, ValueError, "method must be one of"),
        ({"node_time": np.zeros(5)}, ValueError, "node_time must have one entry per node"),
        ({"node_time": np.zeros(60), "edge_time": np.zeros(400)}, ValueError, "not both"),
        ({"memory": "1K"}, ValueError, "memory must be at least"),
        ({"memory": "lots"}, ValueError, "memory must be a number with an optional K/M/G/T unit"),  # was "size must"
        ({"memory": -1}, ValueError, "memory must be >= 0 bytes"),
        ({"memory": True}, TypeError, "memory must be a str like '512M'"),
        ({"memory": "200M", "method": "metis", "num_parts": 2, "big": True}, ValueError, "method='range'"),
    ],
)
def test_service_partition_refuses_bad_input_before_writing(tmp_path, kwargs, error, match):
    kwargs = dict(kwargs)
    graph = _graph(num_nodes=4_000_000, num_edges=4_000_000) if kwargs.pop("big", False) else _graph()
    kwargs.setdefault("num_parts", 2)
    target = tmp_path / "p"
    with pytest.raises(error, match=match):
        partition(graph, target, **kwargs)
    assert not target.exists() and os.listdir(tmp_path) == []


def test_service_partition_refuses_bfloat16_tables_by_name(tmp_path):
    # FeatureStore takes bfloat16 tables, a part's .npy reads them back as raw 2-byte records: a
    # torch table failed inside torch ("Got unsupported ScalarType BFloat16"), a NumPy one was
    # "not a numeric array"
    ml_dtypes = pytest.importorskip("ml_dtypes")
    torch = pytest.importorskip("torch")
    graph = _graph()
    for table in (np.ones((60, 2), ml_dtypes.bfloat16), torch.ones(60, 2, dtype=torch.bfloat16)):
        with pytest.raises(TypeError, match="features holds bfloat16, which a partition cannot store"):
            partition(graph, tmp_path / "p", 2, features=table, method="range")
    with pytest.raises(TypeError, match=r"labels\['paper'\] holds bfloat16"):
        partition(_typed(), tmp_path / "p", 2, labels={"paper": torch.ones(12, dtype=torch.bfloat16)}, method="range")
    assert os.listdir(tmp_path) == []


def test_service_partition_refuses_a_link_to_an_empty_folder_and_the_working_directory_by_name(tmp_path, monkeypatch):
    # both passed the path check, then the folder writer raised FileExistsError (not the
    # documented ValueError) once the partitioning was done
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"path: '.*link' is a symbolic link: refusing to replace it"):
        partition(_graph(), tmp_path / "link", 2, method="range")
    assert (tmp_path / "link").is_symlink() and os.listdir(tmp_path / "empty") == []
    assert sorted(os.listdir(tmp_path)) == ["empty", "link"]
    monkeypatch.chdir(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"path: '.*empty' is the working directory"):
        partition(_graph(), ".", 2, method="range")
    assert os.listdir(tmp_path / "empty") == []


def test_service_partition_refuses_an_existing_non_empty_path(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="exists and is not an empty folder"):
        partition(_graph(), tmp_path / "p", 2, method="range")
    assert os.listdir(tmp_path / "p") == ["keep.txt"]
    (tmp_path / "empty").mkdir()
    assert partition(_graph(), tmp_path / "empty", 2, method="range").num_parts == 2
    with pytest.raises(TypeError, match="graph must be"):
        partition(np.zeros((3, 3)), tmp_path / "q", 1)
    with pytest.raises(TypeError, match="features of a typed graph must be a dict"):
        partition(_typed(), tmp_path / "q", 1, features=np.zeros((9, 2)), method="range")
    with pytest.raises(ValueError, match="names node type 'nope'"):
        partition(_typed(), tmp_path / "q", 1, features={"nope": np.zeros(3)}, method="range")
    # an edge time's key that is no tuple: named (was Python's "'int' object is not iterable")
    with pytest.raises(TypeError, match=r"edge_time's key must be a \(src_type, name, dst_type\) tuple of str, got 5"):
        partition(_typed(), tmp_path / "q", 1, edge_time={5: np.zeros(40)}, method="range")
    with pytest.raises(ValueError, match=r"edge_time's key \('paper', 'cites', 'author'\) is not an edge type"):
        partition(_typed(), tmp_path / "q", 1, edge_time={("paper", "cites", "author"): np.zeros(40)}, method="range")
    assert not (tmp_path / "q").exists()


def test_service_partition_failed_write_leaves_nothing(tmp_path, monkeypatch):
    from gglspeedup.service import _layout

    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(*args, **kwargs)

    real = _layout.write_part
    monkeypatch.setattr("gglspeedup.service.partitioning.write_part", failing)
    with pytest.raises(OSError, match="disk full"):
        partition(_graph(), tmp_path / "p", 3, method="range")
    assert os.listdir(tmp_path) == []


def test_service_partition_book_loads_in_constant_time_and_checks_its_kind(tmp_path):
    graph = _graph()
    partition(graph, tmp_path / "p", 2, method="range")
    book = PartitionBook.load(tmp_path / "p", verify=True)
    assert isinstance(book.part, np.memmap) and book.num_nodes == graph.num_nodes
    # it named "Partition.load", which does not exist
    with pytest.raises(ValueError, match=r"not a saved PartitionBook: .* one part of a partitioned folder: load"):
        PartitionBook.load(tmp_path / "p" / "part0")
    with pytest.raises(ValueError, match=r"holds a saved PartitionBook; use gglspeedup\.service\.PartitionBook\.load"):
        gg.CSRGraph.load(tmp_path / "p")
    with pytest.raises(FileNotFoundError):
        PartitionBook.load(tmp_path / "missing")
    with pytest.raises(ValueError, match="node_type must be None"):
        book.part_of([0], "paper")
    assert PartitionBook.load(tmp_path / "p", verify=np.bool_(False)).num_parts == 2
    for flag in (1, 0, "no", None):  # read as truthy or falsy, as CSRGraph.load once read "no"
        with pytest.raises(TypeError, match=f"verify must be a bool \\(True or False\\), got {type(flag).__name__}"):
            PartitionBook.load(tmp_path / "p", verify=flag)


def _edit_header(folder, edit):
    header = json.loads((folder / "header.json").read_text())
    edit(header["meta"])
    (folder / "header.json").write_text(json.dumps(header))


def test_service_partition_book_and_server_refuse_a_folder_whose_headers_disagree_by_name(tmp_path):
    # the header holds no checksum of its own: an edited or foreign one raised KeyError('num_parts'),
    # a book saying 30 nodes over a 20-entry part.npy sampled seed 25 from memory past its end, a
    # table dtype edited to float32 had the float64 rows cast silently, a part folder from another
    # partitioning was served as this one's
    graph = _graph(num_nodes=20, num_edges=60)
    x = np.random.default_rng(0).random((20, 3))
    partition(graph, tmp_path / "other", 3, features=x, method="metis")
    for name, edit in [
        ("no_num_parts", lambda meta: meta.pop("num_parts")),
        ("text_num_parts", lambda meta: meta.update(num_parts="3")),
        ("more_parts", lambda meta: meta.update(num_parts=4)),
        ("typed", lambda meta: meta.update(typed=True)),
        ("sizes", lambda meta: meta["part_sizes"][1].pop("per_type")),
    ]:
        partition(graph, tmp_path / name, 3, features=x, method="range")
        _edit_header(tmp_path / name, edit)
        with pytest.raises(ValueError, match=f"'.*{name}': its header does not describe a partitioned folder"):
            PartitionBook.load(tmp_path / name)
    partition(graph, tmp_path / "more_nodes", 3, features=x, method="range")
    _edit_header(tmp_path / "more_nodes", lambda meta: meta.update(num_nodes=30))
    with pytest.raises(
        ValueError, match=r"part must be an integer array with one entry per node \(30\), got .* \(20,\)"
    ):
        PartitionBook.load(tmp_path / "more_nodes")
    partition(graph, tmp_path / "cast", 3, features=x, method="range")
    _edit_header(tmp_path / "cast", lambda meta: meta["tables"]["x_0"].update(dtype="<f4"))
    PartitionBook.load(tmp_path / "cast")  # the book alone cannot tell: its server does, when made
    with pytest.raises(
        ValueError, match=r"part0': the book says x_0 is dtype float32 shape \(\d+, 3\), got dtype float64"
    ):
        PartServer(tmp_path / "cast", [0], warm=False, verify=False)
    partition(graph, tmp_path / "swapped", 3, features=x, method="range")
    shutil.rmtree(tmp_path / "swapped" / "part1")
    shutil.copytree(tmp_path / "other" / "part2", tmp_path / "swapped" / "part1")  # checksums pass
    with pytest.raises(ValueError, match=r"part1' is not partition 1 of the book's 3 \(untyped\): .* part 2 of 3"):
        PartServer(tmp_path / "swapped", [1], warm=False)
    assert PartServer(tmp_path / "swapped", [0, 2], warm=False).parts == (0, 2)


def _mapped_from(array, folder):
    """The file ``array``'s bytes are mapped from, if it is a view of a memory-mapped file."""
    handle = file_backed(array)
    return None if handle is None else os.path.relpath(handle.name, folder)


@pytest.mark.parametrize("typed", [False, True])
def test_service_partition_book_and_server_pickle_as_paths_and_map_again(tmp_path, typed):
    rng = np.random.default_rng(4)
    if typed:
        graph = _typed()
        times = {t: rng.integers(0, 9, n) for t, n in graph.num_nodes.items()}
    else:
        graph = _graph(num_nodes=20_000, num_edges=60_000)
        times = rng.integers(0, 9, graph.num_nodes)
    book = partition(graph, tmp_path / "p", 2, method="range", node_time=times)
    clone = pickle.loads(pickle.dumps(book))
    assert len(pickle.dumps(book)) < 2000 + len(pickle.dumps(book.meta))  # no array's bytes
    for t in graph.node_types if typed else [None]:
        suffix = f"_{graph.node_types.index(t)}" if typed else ""
        assert _mapped_from(clone.node_time(t), tmp_path / "p") == f"node_time{suffix}.npy"
        assert np.array_equal(clone.node_time(t), book.node_time(t))
        ids = np.arange(book.count(t))
        assert np.array_equal(clone.part_of(ids, t), book.part_of(ids, t))
        assert np.array_equal(clone.local_of(ids, t), book.local_of(ids, t))
    for name in ("part", "local"):
        assert _mapped_from(getattr(clone, name), tmp_path / "p") == f"{name}.npy"
        assert getattr(clone, name).dtype == getattr(book, name).dtype
    server = PartServer(tmp_path / "p", [1], warm=False)
    again = pickle.loads(pickle.dumps(server))
    assert len(pickle.dumps(server)) < 1000 and again.parts == (1,)
    assert _mapped_from(again.arrays[0]["indices"], tmp_path / "p") == os.path.join("part1", "indices.npy")


@pytest.mark.parametrize("method", METHODS)
def test_service_partition_of_a_memory_mapped_graph_in_pieces_equals_in_memory(tmp_path, method):
    rng = np.random.default_rng(4)
    graph = _graph(num_nodes=3000, num_edges=60000, seed=4)
    graph.save(tmp_path / "g")
    mapped = gg.CSRGraph.load(tmp_path / "g")
    x = rng.normal(size=(3000, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    x_mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    times = rng.integers(0, 100, 60000)
    partition(graph, tmp_path / "a", 3, features=x, method=method, edge_time=times, memory="64M")
    # 1 MiB pieces: about 14,500 entries and 4,000 feature rows each, so every part is written in several
    # (METIS holds the graph itself: its budget must cover that, about 4 MB here)
    memory = "1M" if method == "range" else "8M"
    partition(mapped, tmp_path / "b", 3, features=x_mapped, method=method, edge_time=times, memory=memory)
    for p in range(3):
        a, b = _part_rows(tmp_path / "a", p), _part_rows(tmp_path / "b", p)
        assert a.keys() == b.keys()
        for name in a:
            assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), name

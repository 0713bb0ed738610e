"""datasets.build_csr: out-of-core builds equal from_edge_index, from every kind of source, under
tight memory budgets; failures name the chunk and leave nothing that loads."""

import errno
import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup import _storage
from gglspeedup.datasets import build_csr

NUM_NODES = 3000


def _edges(num_edges=60_000, seed=0):
    return np.random.default_rng(seed).integers(0, NUM_NODES, size=(2, num_edges))


def _chunks(edges, size=7_919):
    return [edges[:, i : i + size] for i in range(0, edges.shape[1], size)]


def _same(graph, reference):
    for name in ("indptr", "indices", "edge_ids", "weights"):
        a, b = getattr(graph, name), getattr(reference, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert np.array_equal(np.asarray(a), np.asarray(b)) and a.dtype == b.dtype, name


@pytest.mark.parametrize("kind", ["arrays", "generator", "npy", "npy-fortran", "csv"])
@pytest.mark.parametrize("direction", ["in", "out"])
def test_every_source_kind_builds_what_from_edge_index_builds(tmp_path, kind, direction):
    edges = _edges()
    chunks = _chunks(edges)
    if kind == "generator":
        source = (c for c in chunks)
    elif kind.startswith("npy"):
        source = []
        for i, chunk in enumerate(chunks):
            np.save(tmp_path / f"c{i}.npy", np.asfortranarray(chunk) if kind == "npy-fortran" else chunk)
            source.append(tmp_path / f"c{i}.npy")
    elif kind == "csv":
        (tmp_path / "ogb" / "raw").mkdir(parents=True)
        with gzip.open(tmp_path / "ogb" / "raw" / "edge.csv.gz", "wt") as handle:
            handle.write("".join(f"{u},{v}\n" for u, v in edges.T))
        source = tmp_path / "ogb"
    else:
        source = chunks
    graph = build_csr(source, tmp_path / "g", direction=direction, memory="1M", keep_edge_ids=True)
    reference = gg.CSRGraph.from_edge_index(edges, num_nodes=int(edges.max()) + 1, direction=direction)
    _same(graph, reference)
    assert sorted(p for p in os.listdir(tmp_path) if p.startswith(".")) == []  # scratch and temporaries gone


@pytest.mark.parametrize("memory", ["1M", "64M"])
def test_weights_edge_ids_and_widths_follow_the_edges(tmp_path, memory):
    edges = _edges(seed=1)
    weights = np.random.default_rng(2).random(edges.shape[1]).astype(np.float32)
    graph = build_csr(
        _chunks(edges), tmp_path / "g", NUM_NODES, memory=memory, keep_edge_ids=True,
        weights=(w for w in _chunks(weights[None])[::1] for w in [w[0]]), dtype=np.int64,
    )  # fmt: skip
    reference = gg.CSRGraph.from_edge_index(edges, NUM_NODES, weights=weights, dtype=np.int64)
    _same(graph, reference)
    assert graph.num_nodes == NUM_NODES and graph.weights.dtype == np.float32


def test_empty_sources_and_trailing_isolated_nodes(tmp_path):
    graph = build_csr([np.zeros((2, 0), np.int64)], tmp_path / "g", num_nodes=5)
    assert graph.indptr.tolist() == [0] * 6 and graph.num_edges == 0
    graph = build_csr([np.array([[0], [1]])], tmp_path / "h", num_nodes=4)
    assert graph.indptr.tolist() == [0, 0, 1, 1, 1]


def test_synthetic_out_of_core_graph_is_the_in_memory_graph(tmp_path):
    memory_graph = gg.datasets.synthetic_powerlaw(5000, 6.0, seed=7)
    disk_graph = gg.datasets.synthetic_powerlaw(5000, 6.0, seed=7, out=tmp_path / "p", memory="1M")
    _same(disk_graph, memory_graph)
    assert gg.CSRGraph.load(tmp_path / "p", verify=True).num_edges == memory_graph.num_edges


@pytest.mark.parametrize(
    "break_it, message",
    [
        (lambda c: c[3].__setitem__((1, 17), NUM_NODES + 1), r"source chunk 3, edge 17 \(edge 23774 overall\) = "),
        (lambda c: c[2].__setitem__((0, 5), -4), r"source chunk 2, edge 5 .* has a negative node id"),
        (
            lambda c: c.__setitem__(1, c[1][:1]),
            r"source chunk 1 must be a \(2, k\) integer array, got int64 \(1, 7919\)",
        ),
        (
            lambda c: c.__setitem__(4, c[4].astype(float)),
            r"source chunk 4 must be a \(2, k\) integer array, got float64",
        ),
    ],
)
def test_a_bad_chunk_is_named_and_leaves_the_old_graph(tmp_path, break_it, message):
    build_csr([np.array([[0], [1]])], tmp_path / "g", num_nodes=NUM_NODES)  # a graph already there
    chunks = [c.copy() for c in _chunks(_edges(seed=3))]
    break_it(chunks)
    with pytest.raises(ValueError, match=message):
        build_csr(chunks, tmp_path / "g", num_nodes=NUM_NODES, memory="1M")
    assert gg.CSRGraph.load(tmp_path / "g", verify=True).num_edges == 1
    assert os.listdir(tmp_path) == ["g"]


@pytest.mark.parametrize("reorder", [None, "degree"])
def test_an_id_too_large_for_memory_is_named_when_num_nodes_is_not_given(tmp_path, reorder):
    # The largest id sizes the degree counts: NumPy's bare MemoryError ("Unable to allocate 14.6 TiB")
    # or "array is too big" came first, naming no edge.
    chunks = [np.array([[0, 1], [1, 0]]), np.array([[2, 0, 1], [0, 2**62, 2]])]
    with pytest.raises(
        ValueError,
        match=r"source chunk 1, edge 1 \(edge 3 overall\) = \[0, 4611686018427387904\]: "
        r"with num_nodes not given the largest id sets it, and num_nodes = 4611686018427387905 needs",
    ):
        build_csr(chunks, tmp_path / "g", reorder=reorder)
    assert os.listdir(tmp_path) == []


def test_bad_weights_are_named(tmp_path):
    chunks = _chunks(_edges())
    weights = [np.ones(c.shape[1]) for c in chunks]
    weights[2][9] = np.nan
    with pytest.raises(ValueError, match=r"weights chunk 2: weights must be finite and >= 0: weights\[9\] = nan"):
        build_csr(chunks, tmp_path / "g", weights=weights)
    with pytest.raises(ValueError, match=r"weights chunk 1 has shape \(3,\), but source chunk 1 holds 7919 edges"):
        build_csr(chunks, tmp_path / "g", weights=[weights[0], np.ones(3)])
    with pytest.raises(ValueError, match=r"weights has fewer chunks than source"):
        build_csr(chunks, tmp_path / "g", weights=weights[:2])
    assert not (tmp_path / "g").exists()


def test_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match=r"wrap it in a list"):
        build_csr(_edges(), tmp_path / "g")
    with pytest.raises(ValueError, match=r"memory must be at least 1 MiB"):
        build_csr([], tmp_path / "g", memory=10)
    with pytest.raises(ValueError, match=r"direction must be 'in' or 'out'"):
        build_csr([], tmp_path / "g", direction="up")
    with pytest.raises(FileNotFoundError, match=r"holds no edge.csv.gz"):
        build_csr(tmp_path, tmp_path / "g")
    with pytest.raises(ValueError, match=r"num_nodes = 10000000000000 needs"):
        build_csr([], tmp_path / "g", num_nodes=10**13)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "edge.csv").write_text("1,2\n3,x\n")
    with pytest.raises(ValueError, match=r"lines 1..2 must each hold two integers"):
        build_csr(tmp_path / "o", tmp_path / "g")


@pytest.mark.parametrize(
    "source, message",
    [
        (
            [np.array([[0, 1], [1, 2]]), [[0, 1, 2], [1]]],
            r"source chunk 1 .*: its \(src, dst\) rows have unequal lengths 3 and 1 \(shapes \(3,\) and \(1,\)\)",
        ),
        ([(np.array([0, 1]), np.array([1]))], r"source chunk 0 .*: its \(src, dst\) rows have unequal lengths 2 and 1"),
        ([[[0, 1], [1], [2, 2]]], r"source chunk 0 .*, got a ragged list of rows of lengths 2, 1, 2"),
    ],
    ids=["ragged list", "unequal tuple", "three ragged rows"],
)
def test_ragged_chunks_and_unequal_pairs_name_the_chunk(tmp_path, source, message):
    with pytest.raises(ValueError, match=message):
        build_csr(source, tmp_path / "g")
    with pytest.raises(ValueError, match=r"weights chunk 0 must be a 1-D float array, got a ragged list"):
        build_csr([np.array([[0, 1], [1, 2]])], tmp_path / "g", weights=[[[1.0], [2.0, 3.0]]])
    assert os.listdir(tmp_path) == []


def test_build_never_replaces_what_it_did_not_write(tmp_path, monkeypatch):
    def untouched():  # a one-pass source: refused before the first pass reads it
        raise AssertionError("the source was read")
        yield

    results = tmp_path / "results"
    results.mkdir()
    np.save(results / "x.npy", np.arange(4))
    for target, message in [
        (results, r"'.*results' is not a graph folder written by gglspeedup \(it holds x\.npy\)"),
        (results / "x.npy", r"x\.npy' exists and is not a saved graph"),
    ]:
        with pytest.raises(FileExistsError, match=message):
            build_csr(untouched(), target, num_nodes=3)
    monkeypatch.chdir(results)
    for target in ("", "."):
        with pytest.raises(FileExistsError, match=r"is the working directory"):
            build_csr([np.array([[0], [1]])], target)
    assert os.listdir(tmp_path) == ["results"] and os.listdir(results) == ["x.npy"]
    assert np.array_equal(np.load(results / "x.npy"), np.arange(4))
    build_csr([np.array([[0], [1]])], tmp_path / "g", num_nodes=2)
    with pytest.raises(FileExistsError, match=r"already holds a saved graph and overwrite=False"):
        build_csr([np.array([[1], [0]])], tmp_path / "g", num_nodes=2, overwrite=False)
    assert build_csr([np.array([[1], [0]])], tmp_path / "g", num_nodes=2).indices.tolist() == [1]  # ours: replaced


def test_a_name_near_the_file_systems_limit_builds(tmp_path):
    # Its scratch folder ('.{name}.scratch-{12 hex}', for a one-pass source) and temporary were too long.
    graph = build_csr((c for c in _chunks(_edges(5_000))), tmp_path / ("g" * 250), memory="1M")
    assert graph.num_edges == 5_000 and os.listdir(tmp_path) == ["g" * 250]


def test_a_bad_parent_folder_is_refused_before_the_source_is_read(tmp_path):
    def untouched():  # a one-pass source: it used to create the missing folder on its first pass
        raise AssertionError("the source was read")
        yield

    (tmp_path / "file").write_text("x")
    for target, error, message in [
        (tmp_path / "missing" / "g", FileNotFoundError, r"its parent folder '.*missing' does not exist"),
        (tmp_path / "file" / "g", NotADirectoryError, r"its parent folder '.*file' is not a folder"),
    ]:
        for source in (untouched(), [np.array([[0], [1]])]):
            with pytest.raises(error, match=r"^cannot write '.*g': " + message):
                build_csr(source, target, num_nodes=2)
    if os.geteuid() != 0:  # root writes anywhere
        (tmp_path / "locked").mkdir(mode=0o555)
        with pytest.raises(PermissionError, match=r"its parent folder '.*locked' is not writable"):
            build_csr(untouched(), tmp_path / "locked" / "g", num_nodes=2)
    assert sorted(os.listdir(tmp_path)) == sorted(["file"] + (["locked"] if os.geteuid() != 0 else []))
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize("failure", ["disk full", "interrupt"])
def test_a_failing_build_leaves_nothing_that_loads(tmp_path, monkeypatch, failure):
    def source():
        yield from _chunks(_edges(seed=4))
        if failure == "interrupt":
            raise KeyboardInterrupt

    if failure == "disk full":
        original = _storage.ArrayWriter.write

        def full(self, piece):
            if self.name == "indices":
                raise OSError(errno.ENOSPC, "No space left on device")
            original(self, piece)

        monkeypatch.setattr(_storage.ArrayWriter, "write", full)
    with pytest.raises(KeyboardInterrupt if failure == "interrupt" else OSError) as caught:
        build_csr(source(), tmp_path / "g", memory="1M")
    if failure == "disk full":
        assert "disk is full while writing 'indices'" in str(caught.value)
    assert os.listdir(tmp_path) == []


class _Drifting:
    """A source that says it is re-iterable but gives other edges after the counting pass."""

    reiterable = True

    def __init__(self, first, later):
        self.first, self.later, self.passes = first, later, 0

    def __iter__(self):
        self.passes += 1
        return iter(self.first if self.passes == 1 else self.later)


@pytest.mark.parametrize("reorder", [None, "degree"])
@pytest.mark.parametrize(
    "later",
    [
        lambda e: [np.vstack([e[0], np.full_like(e[1], 7)])] * 3,  # more edges into one row than counted
        lambda e: [e[:, :5]],  # fewer: the rows' other slots would keep np.empty's bytes
        lambda e: [np.vstack([e[0] % 7 + 3_000, e[1]])],  # as many per row, but an id out of range
    ],
    ids=["more", "fewer", "out-of-range"],
)
def test_a_source_that_changes_after_the_counting_pass_is_refused(tmp_path, later, reorder):
    # It used to corrupt the heap (more: written past the bucket, the process aborted) or save
    # a "verified" graph holding uninitialised ids (fewer) or ids >= num_nodes.
    edges = _edges(20_000, seed=6)
    build_csr([np.array([[0], [1]])], tmp_path / "g", num_nodes=NUM_NODES)  # a graph already there
    source = _Drifting([edges], later(edges))
    with pytest.raises(ValueError, match=r"the source gave other edges on a later pass than on the first"):
        build_csr(source, tmp_path / "g", num_nodes=NUM_NODES, memory="1M", reorder=reorder)
    assert source.passes >= 2 and os.listdir(tmp_path) == ["g"]
    assert gg.CSRGraph.load(tmp_path / "g", verify=True).num_edges == 1


def test_weights_that_change_after_the_counting_pass_are_refused(tmp_path):
    edges = _edges(20_000, seed=7)
    weights = _Drifting([np.ones(edges.shape[1])], [np.ones(3)])
    with pytest.raises(ValueError, match=r"source chunk 0: the source gave other edges on a later pass"):
        build_csr([edges], tmp_path / "g", num_nodes=NUM_NODES, weights=weights)
    assert os.listdir(tmp_path) == []


_MEASURE = """
import json, os, resource, sys
import numpy as np
import gglspeedup as gg
from gglspeedup.datasets import build_csr
folder = sys.argv[1]
build_csr([np.array([[0, 1], [1, 0]])], os.path.join(folder, 'warm'), memory='1M')  # compile first
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith('.npy'))
graph = build_csr(files, os.path.join(folder, 'g'), num_nodes=int(sys.argv[2]), memory=sys.argv[3])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"grew": (after - before) * 1024, "edges": graph.num_edges}))
"""


def test_a_build_stays_within_its_memory_budget(tmp_path):
    # 6M edges in int64 on disk (96 MB), built with an 8 MiB budget: the process may grow by the
    # budget plus its O(num_nodes) arrays (two per-thread count rows, indptr: 3 x 8 bytes a node)
    # and a small allowance for the interpreter, never by anything the size of the edge list.
    rng = np.random.default_rng(5)
    num_nodes = 100_000
    for i in range(6):
        np.save(tmp_path / f"part{i}.npy", rng.integers(0, num_nodes, size=(2, 1_000_000)))
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(tmp_path), str(num_nodes), "8M"],
        capture_output=True, text=True, check=True, env={**os.environ, "NUMBA_NUM_THREADS": "2"},
    )  # fmt: skip
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["edges"] == 6_000_000
    allowed = (8 << 20) + 4 * 8 * num_nodes + (24 << 20)
    assert report["grew"] < allowed, report

"""CSRGraph: constructors, content checks, round trips, permutation, placement and persistence."""

import os
import re

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from gglspeedup import CSRGraph
from gglspeedup.graph import as_csr_graph

from conftest import DEVICES, to_host


def rows_of(graph):
    """Each row's neighbour list, in stored order (host lists)."""
    indptr, indices = to_host(graph.indptr), to_host(graph.indices)
    return [indices[indptr[v] : indptr[v + 1]].tolist() for v in range(graph.num_nodes)]


def reference_rows(src, dst, num_nodes):
    """Row v = sources of edges into v, in input order (the "in" semantics, by brute force)."""
    rows = [[] for _ in range(num_nodes)]
    ids = [[] for _ in range(num_nodes)]
    for e, (u, v) in enumerate(zip(src, dst)):
        rows[v].append(int(u))
        ids[v].append(e)
    return rows, ids


# ---------------------------------------------------------------------------- construction
def test_constructor_stores_int64_indptr_int32_indices_and_reports_sizes():
    graph = CSRGraph(np.array([0, 2, 3, 3], np.int32), np.array([1, 2, 0], np.int32))
    assert graph.indptr.dtype == np.int64 and graph.indices.dtype == np.int32 == graph.index_dtype
    assert (graph.num_nodes, graph.num_edges) == (3, 3)
    assert graph.degree().tolist() == [2, 1, 0]
    assert graph.degree().dtype == np.int64
    assert graph.edge_ids is None and graph.weights is None
    assert graph.nbytes == 4 * 8 + 3 * 4  # 8 (N + 1) + 4 E
    assert repr(graph) == "CSRGraph(num_nodes=3, num_edges=3, device=cpu, placement='host')"


def test_constructor_accepts_lists_unsigned_and_torch_tensors():
    torch = pytest.importorskip("torch")
    expected = CSRGraph([0, 1, 2], [1, 0])
    for indptr, indices in [
        (np.array([0, 1, 2], np.uint32), np.array([1, 0], np.uint64)),
        (torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([1, 0])),
        ((0, 1, 2), (1, 0)),
    ]:
        graph = CSRGraph(indptr, indices)
        assert graph.indptr.tolist() == expected.indptr.tolist()
        assert graph.indices.tolist() == expected.indices.tolist()


def test_index_width_follows_the_data_and_int32_input_is_not_copied():
    indptr, indices = np.array([0, 1, 2]), np.array([1, 0], np.int32)
    graph = CSRGraph(indptr, indices)
    assert np.shares_memory(graph.indptr, indptr) and np.shares_memory(graph.indices, indices)
    narrowed = CSRGraph(indptr, indices.astype(np.int64))  # ids fit: int64 input narrowed to int32
    assert narrowed.indices.dtype == np.int32 and narrowed.indices.tolist() == [1, 0]
    wide = np.array([1, 0])
    forced = CSRGraph(indptr, wide, edge_ids=[5, 6], dtype=np.int64)  # dtype forces int64, no copy
    assert forced.indices.dtype == forced.edge_ids.dtype == np.int64 and np.shares_memory(forced.indices, wide)
    assert CSRGraph(indptr, indices, dtype=np.int64).indices.dtype == np.int64


def test_index_dtype_is_checked():
    with pytest.raises(TypeError, match=r"dtype must be np.int32, np.int64 or None"):
        CSRGraph([0, 1], [0], dtype=np.float32)
    with pytest.raises(ValueError, match=r"dtype=int32 cannot index 4294967296 nodes"):
        CSRGraph([0, 0], [], num_src_nodes=2**32, dtype=np.int32)
    assert CSRGraph([0, 0], [], num_src_nodes=2**32).indices.dtype == np.int64  # ids past 2**31: int64


def test_edge_ids_and_weights_kept_with_their_dtypes():
    graph = CSRGraph([0, 2, 2], [1, 1], num_nodes=2, edge_ids=[7, 9], weights=np.array([0.5, 0.0], np.float32))
    assert graph.edge_ids.tolist() == [7, 9] and graph.edge_ids.dtype == np.int32
    big = CSRGraph([0, 2, 2], [1, 1], edge_ids=[7, 2**40])  # user ids that need int64 stay int64
    assert big.edge_ids.dtype == np.int64 and big.edge_ids.tolist() == [7, 2**40]
    assert graph.weights.dtype == np.float32 and graph.weights.tolist() == [0.5, 0.0]
    assert CSRGraph([0, 1], [0], weights=[3]).weights.dtype == np.float64
    assert "edge_ids, weights" in repr(graph)


def test_empty_graphs():
    assert CSRGraph([0], []).num_nodes == 0
    graph = CSRGraph([0, 0, 0], np.array([], np.int32))
    assert (graph.num_nodes, graph.num_edges) == (2, 0)
    assert CSRGraph.from_edge_index([[], []]).num_nodes == 0
    assert CSRGraph.from_edge_index(np.zeros((2, 0), np.int64), num_nodes=4).degree().tolist() == [0] * 4


def test_ids_above_2_31_are_never_truncated():
    # 2**32 + 1 would wrap to the valid id 1 if stored as int32; it must be rejected instead.
    with pytest.raises(ValueError, match=r"indices\[0\] = 4294967297"):
        CSRGraph([0, 1, 1], [2**32 + 1])
    with pytest.raises(ValueError, match=r"out of range for num_nodes = 2"):
        CSRGraph.from_edge_index([[0, 2**32 + 1], [1, 0]], num_nodes=2)
    big = np.array([2**31 + 5], np.int64)
    assert CSRGraph([0, 1], [0], edge_ids=big).edge_ids[0] == 2**31 + 5


BAD_CONSTRUCTIONS = [
    (dict(indptr=None, indices=[0]), TypeError, r"indptr must be an integer array, got None"),
    (dict(indptr=[0.0, 1.0], indices=[0]), TypeError, r"indptr must hold integers .* float64"),
    (dict(indptr=[False, True], indices=[0]), TypeError, r"indptr must hold integers, got dtype bool"),
    (dict(indptr=[0, 1], indices=["a"]), TypeError, r"indices must hold integers"),
    (dict(indptr=[0, 1], indices=[2**70]), ValueError, r"indices\[0\] = 1180591620717411303424 does not fit in int64"),
    (dict(indptr=[[0, 1]], indices=[0]), ValueError, r"indptr must be 1-D, got shape \(1, 2\)"),
    (dict(indptr=[0, 1], indices=[[0]]), ValueError, r"indices must be 1-D"),
    (dict(indptr=[], indices=[]), ValueError, r"indptr must have at least one entry"),
    (dict(indptr=[0, 1], indices=[0], num_nodes=2), ValueError, r"num_nodes = 2 does not match len\(indptr\) - 1 = 1"),
    (dict(indptr=[0, 1], indices=[0], num_nodes=1.0), TypeError, r"num_nodes must be an int, got float"),
    (dict(indptr=[0, 1], indices=[0], num_nodes=True), TypeError, r"num_nodes must be an int"),
    (dict(indptr=[0, 1], indices=[0], num_nodes=-1), ValueError, r"num_nodes must be >= 0, got -1"),
    (dict(indptr=[1, 1], indices=[0]), ValueError, r"indptr\[0\] must be 0, got 1"),
    (dict(indptr=[0, 1, 1], indices=[0, 1]), ValueError, r"indptr\[-1\] must equal len\(indices\) = 2, got 1"),
    (dict(indptr=[0, 2, 1, 3], indices=[0, 1, 2]), ValueError, r"non-decreasing: indptr\[2\] = 1 < indptr\[1\] = 2"),
    (dict(indptr=[0, 2, 3], indices=[0, -1, 1]), ValueError, r"indices\[1\] = -1"),
    (dict(indptr=[0, 2, 3], indices=[0, 1, 2]), ValueError, r"\[0, num_nodes = 2\): indices\[2\] = 2"),
    (
        dict(indptr=[0, 1], indices=np.array([2**64 - 1], np.uint64)),
        ValueError,
        r"indices\[0\] = 18446744073709551615 does not fit in int64",
    ),
    (
        dict(indptr=[0, 2], indices=[0, 0], edge_ids=[0]),
        ValueError,
        r"edge_ids must have one entry per edge \(2\), got 1",
    ),
    (
        dict(indptr=[0, 2], indices=[0, 0], weights=[1.0]),
        ValueError,
        r"weights must have one entry per edge \(2\), got 1",
    ),
    (dict(indptr=[0, 2], indices=[0, 0], edge_ids=[0.5, 1.5]), TypeError, r"edge_ids must hold integers"),
    (
        dict(indptr=[0, 2], indices=[0, 0], weights=[1.0, -0.5]),
        ValueError,
        r"weights must be finite and >= 0: weights\[1\] = -0.5",
    ),
    (dict(indptr=[0, 2], indices=[0, 0], weights=[np.nan, 1.0]), ValueError, r"weights\[0\] = nan"),
    (dict(indptr=[0, 2], indices=[0, 0], weights=[1.0, np.inf]), ValueError, r"weights\[1\] = inf"),
    (
        dict(indptr=[0, 2], indices=[0, 0], weights=[True, False]),
        TypeError,
        r"weights must be a float array, got dtype bool",
    ),
    (dict(indptr=[0, 2], indices=[0, 0], weights=["a", "b"]), TypeError, r"weights must be a float array"),
    (dict(indptr=[0, 2], indices=[0, 0], weights=[[1.0, 2.0]]), ValueError, r"weights must be 1-D, got shape \(1, 2\)"),
]


@pytest.mark.parametrize("kwargs, error, message", BAD_CONSTRUCTIONS, ids=[m for _, _, m in BAD_CONSTRUCTIONS])
def test_constructor_rejects_bad_input(kwargs, error, message):
    with pytest.raises(error, match=message):
        CSRGraph(**kwargs)


BAD_EDGE_INDEX = [
    (dict(edge_index=[0, 1]), ValueError, r"edge_index must be 2-D, got shape \(2,\)"),
    (
        dict(edge_index=[[0, 1], [1, 0], [0, 0]]),
        ValueError,
        r"edge_index must have shape \[2, num_edges\], got \(3, 2\)",
    ),
    (dict(edge_index=[[0.0], [1.0]]), TypeError, r"edge_index must hold integers"),
    (dict(edge_index=None), TypeError, r"edge_index must be an integer array, got None"),
    (dict(edge_index=[[0, 1], [1, 0]], direction="both"), ValueError, r"direction must be 'in' or 'out', got 'both'"),
    (dict(edge_index=[[0, 1, 2], [1, -3, 0]]), ValueError, r"edge_index\[:, 1\] has a negative node id"),
    (
        dict(edge_index=[[0, 1, 5], [1, 0, 0]], num_nodes=3),
        ValueError,
        r"edge_index\[:, 2\] = \[5, 0\] is out of range for num_nodes = 3",
    ),
    (dict(edge_index=[[0, 1], [1, 0]], num_nodes="2"), TypeError, r"num_nodes must be an int"),
    (
        dict(edge_index=[[0, 1], [1, 0]], weights=[1.0]),
        ValueError,
        r"weights must have one entry per edge \(2\), got 1",
    ),
    (dict(edge_index=[[0, 1], [1, 0]], weights=[1.0, -1.0]), ValueError, r"weights must be finite and >= 0"),
]


@pytest.mark.parametrize("kwargs, error, message", BAD_EDGE_INDEX, ids=[m for _, _, m in BAD_EDGE_INDEX])
def test_from_edge_index_rejects_bad_input(kwargs, error, message):
    with pytest.raises(error, match=message):
        CSRGraph.from_edge_index(**kwargs)


def test_from_scipy_rejects_bad_input():
    with pytest.raises(TypeError, match=r"matrix must be a scipy sparse matrix, got ndarray"):
        CSRGraph.from_scipy(np.eye(3))
    with pytest.raises(ValueError, match=r"matrix must be square .* got shape \(2, 3\)"):
        CSRGraph.from_scipy(sp.csr_matrix((2, 3)))
    with pytest.raises(ValueError, match=r"weights must be finite and >= 0"):
        CSRGraph.from_scipy(sp.csr_matrix(np.array([[0.0, -1.0], [1.0, 0.0]])), weighted=True)
    with pytest.raises(TypeError, match=r"weighted must be a bool \(True or False\), got str 'no'"):
        CSRGraph.from_scipy(sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]])), weighted="no")


def test_as_csr_graph():
    graph = CSRGraph([0, 1, 2], [1, 0])
    assert as_csr_graph(graph) is graph
    converted = as_csr_graph(sp.coo_matrix(([1.0, 1.0], ([0, 1], [1, 0])), shape=(2, 2)))
    assert converted.indices.tolist() == [1, 0]
    with pytest.raises(TypeError, match=r"graph must be a CSRGraph or a scipy sparse matrix, got list"):
        as_csr_graph([[0, 1], [1, 0]])


# ---------------------------------------------------------------------------- from_edge_index
def test_from_edge_index_in_and_out_semantics():
    edge_index = np.array([[0, 0, 2, 1], [1, 2, 1, 1]])  # 0->1, 0->2, 2->1, 1->1 (self loop)
    graph_in = CSRGraph.from_edge_index(edge_index, num_nodes=4)
    assert rows_of(graph_in) == [[], [0, 2, 1], [0], []]
    assert graph_in.edge_ids.tolist() == [0, 2, 3, 1]
    graph_out = CSRGraph.from_edge_index(edge_index, num_nodes=4, direction="out")
    assert rows_of(graph_out) == [[1, 2], [1], [1], []]
    assert graph_out.edge_ids.tolist() == [0, 1, 3, 2]


def test_duplicates_self_loops_and_trailing_isolated_nodes_are_kept():
    edge_index = np.array([[0, 0, 1, 1], [1, 1, 1, 0]], np.int32)
    graph = CSRGraph.from_edge_index(edge_index, num_nodes=6)
    assert graph.num_nodes == 6 and graph.num_edges == 4
    assert rows_of(graph) == [[1], [0, 0, 1], [], [], [], []]
    assert CSRGraph.from_edge_index(edge_index).num_nodes == 2  # inferred: max id + 1


def test_from_edge_index_weights_follow_their_edges():
    edge_index = np.array([[0, 1, 2], [2, 2, 0]])
    graph = CSRGraph.from_edge_index(edge_index, weights=np.array([0.25, 0.5, 2.0], np.float32))
    assert graph.weights.dtype == np.float32
    assert graph.weights.tolist() == [2.0, 0.25, 0.5]
    assert graph.weights.tolist() == np.array([0.25, 0.5, 2.0])[graph.edge_ids].tolist()


edge_lists = st.integers(1, 12).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=40),
    )
)


@settings(max_examples=60, deadline=None)
@given(edge_lists, st.sampled_from([np.int32, np.int64]))
def test_from_edge_index_matches_scipy_and_brute_force(case, dtype):
    num_nodes, edges = case
    src = np.array([u for u, _ in edges], dtype=dtype)
    dst = np.array([v for _, v in edges], dtype=dtype)
    edge_index = np.stack([src, dst]) if edges else np.zeros((2, 0), dtype)
    graph = CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes)
    rows, ids = reference_rows(src, dst, num_nodes)
    assert rows_of(graph) == rows
    assert graph.edge_ids.tolist() == [e for row in ids for e in row]
    # scipy: entry (v, u) counts the edges u -> v; duplicates add up.
    ones = np.ones(len(edges))
    expected_in = sp.coo_matrix((ones, (dst, src)), shape=(num_nodes, num_nodes)).toarray()
    assert np.array_equal(graph.to_scipy().toarray(), expected_in)
    graph_out = CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes, direction="out")
    assert np.array_equal(graph_out.to_scipy().toarray(), expected_in.T)
    # from_scipy(to_scipy()) keeps the structure (scipy sums duplicates only on request).
    assert np.array_equal(CSRGraph.from_scipy(graph.to_scipy()).indices, graph.indices)


def test_from_scipy_keeps_rows_and_weights():
    matrix = sp.coo_matrix(([1.0, 2.0, 3.0], ([2, 0, 2], [0, 1, 1])), shape=(3, 3))
    graph = CSRGraph.from_scipy(matrix, weighted=True)
    assert rows_of(graph) == [[1], [], [0, 1]]
    assert graph.weights.tolist() == [2.0, 1.0, 3.0]
    assert CSRGraph.from_scipy(matrix).weights is None
    assert np.array_equal(graph.to_scipy().toarray(), matrix.toarray())


def test_from_scipy_keeps_every_coo_entry_as_an_edge():
    # A multigraph as COO: duplicate (row, col) entries are separate edges, weights per entry,
    # exactly as from_edge_index reads the same entries (tocsr() would sum them).
    row, col = np.array([2, 0, 2, 0, 1, 2]), np.array([1, 1, 1, 2, 0, 1])
    data = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    expected = CSRGraph.from_edge_index(
        np.stack([row, col]), num_nodes=3, direction="out", weights=data, keep_edge_ids=False
    )
    for matrix in (sp.coo_matrix((data, (row, col)), shape=(3, 3)), sp.coo_array((data, (row, col)), shape=(3, 3))):
        graph = CSRGraph.from_scipy(matrix, weighted=True)
        assert graph.indptr.tolist() == expected.indptr.tolist() == [0, 2, 3, 6]
        assert graph.indices.tolist() == expected.indices.tolist() == [1, 2, 0, 1, 1, 1]
        assert graph.weights.tolist() == expected.weights.tolist() == [2.0, 4.0, 5.0, 1.0, 3.0, 6.0]
        assert graph.edge_ids is None and CSRGraph.from_scipy(matrix).weights is None
    # CSR and CSC with repeated columns keep every stored entry too, in stored order.
    csr = sp.csr_matrix((data[[1, 3, 4, 0, 2, 5]], expected.indices, expected.indptr), shape=(3, 3))
    for matrix in (csr, csr.tocsc()):
        graph = CSRGraph.from_scipy(matrix, weighted=True)
        assert graph.indptr.tolist() == [0, 2, 3, 6] and graph.indices.tolist() == [1, 2, 0, 1, 1, 1]
        assert graph.weights.tolist() == [2.0, 4.0, 5.0, 1.0, 3.0, 6.0]


# ---------------------------------------------------------------------------- permute
def _random_graph(rng, num_nodes=30, num_edges=120, weighted=True):
    edge_index = rng.integers(0, num_nodes, size=(2, num_edges))
    weights = rng.random(num_edges) if weighted else None
    return CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes, weights=weights), edge_index


def test_permute_relabels_edges_and_inverse_restores(rng):
    graph, edge_index = _random_graph(rng)
    order = rng.permutation(graph.num_nodes)
    permuted, perm = graph.permute(order)
    assert perm.dtype == np.int64 and np.array_equal(perm[order], np.arange(graph.num_nodes))
    assert np.array_equal(permuted.degree(), graph.degree()[order])
    # Edge e (u -> v) of the input is now perm[u] -> perm[v], in row perm[v], with its id and weight.
    for new_v in range(permuted.num_nodes):
        start, end = permuted.indptr[new_v], permuted.indptr[new_v + 1]
        for position in range(start, end):
            e = permuted.edge_ids[position]
            assert permuted.indices[position] == perm[edge_index[0, e]]
            assert perm[edge_index[1, e]] == new_v
    assert np.array_equal(permuted.weights, graph.weights[np.argsort(graph.edge_ids)][permuted.edge_ids])
    restored, inverse = permuted.permute(perm)
    assert np.array_equal(inverse, order)
    for name in ("indptr", "indices", "edge_ids", "weights"):
        assert np.array_equal(getattr(restored, name), getattr(graph, name)), name


def test_permute_without_edge_ids_records_positions(rng):
    graph = CSRGraph.from_scipy(sp.random(20, 20, density=0.2, random_state=1, format="csr"))
    permuted, perm = graph.permute(rng.permutation(20))
    assert np.array_equal(graph.indices[permuted.edge_ids], np.argsort(perm)[permuted.indices])
    restored, _ = permuted.permute(perm)
    assert np.array_equal(restored.edge_ids, np.arange(graph.num_edges))
    assert np.array_equal(restored.indices, graph.indices)


def test_permute_identity_and_empty():
    graph = CSRGraph([0, 1, 2, 2], [1, 0])
    same, perm = graph.permute(np.arange(3))
    assert perm.tolist() == [0, 1, 2] and same.indices.tolist() == [1, 0]
    empty, perm = CSRGraph([0], []).permute([])
    assert empty.num_nodes == 0 and perm.size == 0


@pytest.mark.parametrize(
    "order, message",
    [
        ([0, 1], r"order must have num_nodes = 3 entries, got 2"),
        ([0, 1, 3], r"order\[2\] = 3 is out of range \[0, 3\)"),
        ([0, -1, 2], r"order\[1\] = -1 is out of range"),
        ([0, 1, 1], r"order must be a permutation of range\(3\): node 2 is missing"),
        ([[0, 1, 2]], r"order must be 1-D"),
    ],
)
def test_permute_rejects_bad_orders(order, message):
    with pytest.raises(ValueError, match=message):
        CSRGraph([0, 1, 2, 2], [1, 0]).permute(order)


# ---------------------------------------------------------------------------- placement
def test_to_cpu_returns_self_and_rejects_bad_placements():
    graph = CSRGraph([0, 1, 2], [1, 0])
    assert graph.to("cpu") is graph and graph.to() is graph
    with pytest.raises(ValueError, match=r"placement 'pinned' needs a CUDA device, got device cpu"):
        graph.to("cpu", placement="pinned")
    with pytest.raises(ValueError, match=r"placement must be one of \('host', 'pinned', 'device'\), got 'gpu'"):
        graph.to("cpu", placement="gpu")
    with pytest.raises(ValueError, match=r"device must look like 'cpu', 'cuda'"):
        graph.to("tpu")


def test_to_places_every_array_and_round_trips(device):
    graph = CSRGraph.from_edge_index([[0, 1, 2, 2], [1, 2, 0, 1]], num_nodes=4, weights=[1.0, 2.0, 3.0, 4.0])
    placements = ["device", "pinned", "host"] if device != "cpu" else ["host"]
    for placement in placements:
        placed = graph.to(device, placement=placement)
        assert str(placed.device) == device and placed.placement == placement
        assert placed.to(device, placement=placement) is placed
        for name in ("indptr", "indices", "edge_ids", "weights"):
            assert np.array_equal(to_host(getattr(placed, name)), getattr(graph, name)), name
            assert to_host(getattr(placed, name)).dtype == getattr(graph, name).dtype
        if placement == "pinned":  # host arrays the GPU reads directly: page-locked, aligned
            assert all(
                isinstance(placed.indices, np.ndarray) and a.ctypes.data % 64 == 0
                for a in (placed.indptr, placed.indices, placed.edge_ids, placed.weights)
            )
        assert (placed.num_nodes, placed.num_edges) == (4, 4)
        assert placed.degree().tolist() == graph.degree().tolist()
        back = placed.to("cpu")
        assert back.device.type == "cpu" and back.placement == "host"
        assert np.array_equal(back.indices, graph.indices)
        assert f"device={device}, placement={placement!r}" in repr(placed)


@pytest.mark.parametrize("device", [DEVICES[1]])
def test_device_placement_is_a_copy_and_is_the_cuda_default(device):
    graph = CSRGraph([0, 1, 2], [1, 0])
    placed = graph.to(device)
    assert placed.placement == "device" and placed.device.is_cuda
    assert not np.shares_memory(to_host(placed.indices), graph.indices)
    pinned = graph.to(device, placement="pinned")
    assert pinned.to(device).placement == "device"
    permuted, _perm = placed.permute([1, 0])
    assert permuted.device.type == "cpu" and permuted.indices.tolist() == [1, 0]


# ---------------------------------------------------------------------------- persistence
@pytest.mark.parametrize("mmap", [True, False])
def test_save_load_round_trip(tmp_path, rng, mmap):
    graph, _ = _random_graph(rng)
    path = tmp_path / "graph.npz"
    graph.save(path)
    loaded = CSRGraph.load(path, mmap=mmap)
    for name in ("indptr", "indices", "edge_ids", "weights"):
        assert np.array_equal(getattr(loaded, name), getattr(graph, name)), name
        assert getattr(loaded, name).dtype == getattr(graph, name).dtype
    if mmap:
        assert not loaded.indices.flags.writeable  # read-only pages of the file, not a parsed copy
        assert isinstance(loaded.indices.base, np.memmap)


def test_save_load_plain_and_empty_graphs(tmp_path):
    for graph in (CSRGraph([0, 1, 2], [1, 0]), CSRGraph([0], []), CSRGraph([0, 0, 0], [])):
        graph.save(tmp_path / "g.npz")
        loaded = CSRGraph.load(tmp_path / "g.npz")
        assert loaded.indptr.tolist() == graph.indptr.tolist()
        assert loaded.indices.tolist() == graph.indices.tolist()
        assert loaded.edge_ids is None and loaded.weights is None


def test_save_from_device_graph(tmp_path, device):
    graph = CSRGraph([0, 1, 2], [1, 0], edge_ids=[5, 6]).to(device)
    graph.save(tmp_path / "g.npz")
    loaded = CSRGraph.load(tmp_path / "g.npz")
    assert loaded.edge_ids.tolist() == [5, 6] and loaded.device.type == "cpu"


def test_save_keeps_every_user_file_and_names_the_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("results")
    np.save("results/x.npy", np.arange(3))
    np.save("features.npy", np.ones((2, 2)))
    graph = CSRGraph([0, 1, 2], [1, 0])
    for path, message in [
        ("results", r"^'results' \(.*results\) is not a graph folder written by gglspeedup \(it holds x\.npy\)"),
        (".", r"^'\.' \(.*\) is the working directory"),
        ("", r"^'' \(.*\) is the working directory"),
        ("features.npy", r"^'features\.npy' \(.*features\.npy\) exists and is not a saved graph"),
    ]:
        with pytest.raises(FileExistsError, match=message):
            graph.save(path)
    assert sorted(os.listdir()) == ["features.npy", "results"] and os.listdir("results") == ["x.npy"]
    assert np.load("results/x.npy").tolist() == [0, 1, 2] and np.load("features.npy").shape == (2, 2)
    graph.save("graph")
    graph.save("graph")  # a graph this library wrote: replaced
    assert CSRGraph.load("graph").indices.tolist() == [1, 0]


def test_load_reads_compressed_files_and_checks_content(tmp_path):
    np.savez_compressed(tmp_path / "c.npz", indptr=np.array([0, 1, 2]), indices=np.array([1, 0]))
    assert CSRGraph.load(tmp_path / "c.npz").indices.tolist() == [1, 0]
    np.savez(tmp_path / "bad.npz", indptr=np.array([0, 1, 2]), indices=np.array([1, 7]))
    with pytest.raises(ValueError, match=r"indices\[1\] = 7"):
        CSRGraph.load(tmp_path / "bad.npz")


@pytest.mark.parametrize("mmap", [True, False])
def test_load_rejects_foreign_files(tmp_path, mmap):
    np.savez(tmp_path / "other.npz", indptr=np.array([0, 1]))
    with pytest.raises(ValueError, match=r"is not a saved CSRGraph: missing \['indices'\]"):
        CSRGraph.load(tmp_path / "other.npz", mmap=mmap)
    np.savez(tmp_path / "objects.npz", indptr=np.array([0, 1]), indices=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ValueError, match=r"pickle|objects"):
        CSRGraph.load(tmp_path / "objects.npz", mmap=mmap)


def _npy(array, claimed_shape) -> bytes:
    """A .npy member whose header claims ``claimed_shape`` over ``array``'s bytes."""
    import io

    buffer = io.BytesIO()
    header = {"descr": array.dtype.str, "fortran_order": False, "shape": claimed_shape}
    np.lib.format.write_array_header_1_0(buffer, header)
    buffer.write(array.tobytes())
    return buffer.getvalue()


@pytest.mark.parametrize("mmap", [True, False])
def test_load_names_the_file_for_truncated_and_foreign_files(tmp_path, mmap):
    import zipfile

    np.savez(tmp_path / "g.npz", indptr=np.array([0, 2, 3]), indices=np.array([1, 0, 0]))  # the old format
    data = (tmp_path / "g.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.npz").write_text("not an archive")
    with zipfile.ZipFile(tmp_path / "long.npz", "w") as archive:  # a header claiming 1000 entries over 3
        archive.writestr("indptr.npy", _npy(np.array([0, 2, 3]), (3,)))
        archive.writestr("indices.npy", _npy(np.array([1, 0, 0]), (1000,)))
    for name in ("cut.npz", "text.npz", "long.npz"):
        path = tmp_path / name
        with pytest.raises(ValueError, match=rf"{re.escape(repr(str(path)))} is not a readable CSRGraph file"):
            CSRGraph.load(path, mmap=mmap)
    if mmap:
        with pytest.raises(ValueError, match=r"'indices' claims shape \(1000,\) \(8000 bytes\) but the file holds 24"):
            CSRGraph.load(tmp_path / "long.npz", mmap=True)
    with pytest.raises(FileNotFoundError):
        CSRGraph.load(tmp_path / "missing.npz", mmap=mmap)


def test_from_edge_index_accepts_framework_tensors():
    torch = pytest.importorskip("torch")
    edge_index = torch.tensor([[0, 2, 1], [1, 1, 0]], dtype=torch.int32)
    graph = CSRGraph.from_edge_index(edge_index, num_nodes=torch.tensor(3).item())
    assert rows_of(graph) == [[1], [0, 2], []]
    assert graph.indices.dtype == np.int32

"""Bad inputs at the public surfaces (issue 26, parts B and C): each gets a clear error naming the
argument before any kernel runs, never a crash, a wrong answer or another library's error."""

import numpy as np
import pytest

import gglspeedup as gg

from conftest import to_host


@pytest.fixture(scope="module")
def small():
    edge_index = np.array([[1, 2, 3, 0, 2, 4, 5, 1], [0, 0, 1, 2, 3, 3, 4, 5]])
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=6)


def _typed():
    return gg.HeteroGraph(
        {("a", "to", "b"): [[0, 1, 2], [0, 1, 1]], ("b", "back", "a"): [[0, 1], [0, 2]]}, {"a": 3, "b": 2}
    )


# ------------------------------------------------------------- B13: loaders check up front
def test_node_loader_refuses_a_feature_table_shorter_than_the_graph(small):
    sampler = gg.NeighborSampler(small, [2])
    with pytest.raises(ValueError, match=r"features has 4 rows.*num_nodes = 6"):
        gg.NodeLoader(sampler, np.zeros((4, 2), np.float32), [0, 1], 2, backend=None)
    with pytest.raises(ValueError, match="features has 4 rows"):
        gg.LinkLoader(sampler, np.zeros((4, 2), np.float32), [[0], [1]], 2, backend=None)


@pytest.mark.parametrize("labels", [3, "y", {"a": 3}, 2.5])
def test_node_loader_labels_that_are_not_arrays_raise_a_type_error_naming_labels(small, labels):
    sampler = gg.NeighborSampler(small, [2])
    with pytest.raises(TypeError, match="labels"):
        gg.NodeLoader(sampler, np.zeros((6, 2), np.float32), [0, 1], 2, labels=labels, backend=None)


def test_typed_node_loader_label_that_is_not_an_array_names_its_type():
    sampler = gg.HeteroNeighborSampler(_typed(), [1])
    features = {"a": np.zeros((3, 1), np.float32), "b": np.zeros((2, 1), np.float32)}
    with pytest.raises(TypeError, match=r"labels\['a'\]"):
        gg.NodeLoader(sampler, features, {"a": [0]}, 2, labels={"a": 3}, backend=None)


# -------------------------------------------------------- B14: link labels and empty triplets
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_sample_links_refuses_non_finite_labels(small, bad):
    labels = np.array([1.0, bad])
    with pytest.raises(ValueError, match=r"labels must be finite.*labels\[1\]"):
        gg.NeighborSampler(small, [2]).sample_links([[0, 1], [1, 2]], labels)
    with pytest.raises(ValueError, match=r"labels must be finite"):
        gg.HeteroNeighborSampler(_typed(), [1]).sample_links([[0, 1], [0, 1]], labels, edge_type=("a", "to", "b"))
    with pytest.raises(ValueError, match=r"labels must be finite"):
        gg.LinkLoader(gg.NeighborSampler(small, [2]), np.zeros((6, 1)), [[0, 1], [1, 2]], 2, labels=labels)


def test_triplets_on_zero_pairs_give_an_empty_matrix(small):
    out = gg.NeighborSampler(small, [2]).sample_links(np.empty((2, 0), np.int64), negatives="triplet", num_negatives=3)
    assert to_host(out.negative_targets).shape == (0, 3)
    typed = gg.HeteroNeighborSampler(_typed(), [1]).sample_links(
        np.empty((2, 0), np.int64), edge_type=("a", "to", "b"), negatives="triplet", num_negatives=2
    )
    assert to_host(typed.negative_targets).shape == (0, 2)


# ------------------------------------------------------------------ C17: huge negative counts
def test_a_negative_count_no_memory_holds_is_refused_by_name(small):
    with pytest.raises(ValueError, match="num_negatives = 1000000000000"):
        gg.NeighborSampler(small, [2]).sample_links([[0], [1]], negatives="binary", num_negatives=10**12)
    with pytest.raises(ValueError, match="num_negatives"):
        gg.HeteroNeighborSampler(_typed(), [1]).sample_links(
            [[0], [0]], edge_type=("a", "to", "b"), negatives="triplet", num_negatives=10**12
        )


# ------------------------------------------------------------- B10: bipartite untyped graphs
@pytest.mark.parametrize("num_nodes, num_src_nodes", [(1000, 10**8), (3, 10)])
def test_untyped_samplers_refuse_a_bipartite_graph_at_construction(num_nodes, num_src_nodes):
    edge_index = np.array([[5, 9, 2], [0, 1, 2]])
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes, num_src_nodes=num_src_nodes)
    with pytest.raises(ValueError, match="graph is bipartite"):
        gg.NeighborSampler(graph, [10, 10])
    with pytest.raises(ValueError, match="graph is bipartite"):
        gg.MultiDeviceSampler(graph, ["cpu"], [10, 10])


def test_a_typed_relation_view_is_refused_by_the_untyped_sampler():
    relation = _typed()[("a", "to", "b")]  # 2 target rows, sources of type "a" (3 nodes)
    with pytest.raises(ValueError, match="graph is bipartite"):
        gg.NeighborSampler(relation, [2])


# ------------------------------------------------------- B12: typed gather into its own table
def test_typed_gather_refuses_an_out_that_overlaps_a_table():
    tables = {"a": np.arange(12, dtype=np.float32).reshape(6, 2), "b": np.ones((3, 2), np.float32)}
    store = gg.HeteroFeatureStore(tables)
    with pytest.raises(ValueError, match=r"out\['a'\] overlaps the feature table of 'a'"):
        store.gather({"a": [5, 4]}, out={"a": tables["a"][:2]})
    with pytest.raises(ValueError, match=r"out\['b'\] overlaps the feature table of 'a'"):
        store.gather({"a": [0], "b": [1, 2]}, out={"b": tables["a"][2:4]})
    shared = np.empty((2, 2), np.float32)
    with pytest.raises(ValueError, match="overlap"):
        store.gather({"a": [0, 1], "b": [0, 1]}, out={"a": shared, "b": shared})
    assert np.array_equal(tables["a"], np.arange(12, dtype=np.float32).reshape(6, 2))  # nothing written
    fine = store.gather({"a": [5, 4]}, out={"a": np.empty((2, 2), np.float32)})
    assert fine["a"].tolist() == [[10.0, 11.0], [8.0, 9.0]]


# ------------------------------------------------------------------- B15: flags and counts
@pytest.mark.parametrize("normalize", ["no", 1, None])
def test_datasets_load_refuses_a_normalize_that_is_not_a_bool(normalize):
    with pytest.raises(TypeError, match="normalize"):
        gg.datasets.load("cora", normalize=normalize)


def test_compat_layers_name_device_list_and_num_ranks(small):
    with pytest.raises(TypeError, match="device_list"):
        gg.Multi_CGPUFeature(0, "cpu")
    with pytest.raises(ValueError, match="device_list"):
        gg.Multi_CGPUFeature(0, [])
    with pytest.raises(TypeError, match="num_ranks"):
        gg.MultiGPUSampler("cpu", small, num_ranks=2.7)
    with pytest.raises(ValueError, match="num_ranks"):
        gg.MultiGPUSampler("cpu", small, num_ranks=-2)


# ----------------------------------------------------- B16: a memory-mapped table that shrinks
_SHRINK = """
import os, sys
import numpy as np
import gglspeedup as gg
path = sys.argv[1]
np.save(path, np.arange(4096 * 64, dtype=np.float32).reshape(4096, 64))
table = np.load(path, mmap_mode="r")
store = gg.FeatureStore(table)
assert store.gather([4095])[0, 0] == 4095 * 64
graph = gg.CSRGraph.from_edge_index(np.array([[1], [0]]), num_nodes=4096)
loader = gg.NodeLoader(gg.NeighborSampler(graph, [1]), table, [4095], 1, backend=None, shuffle=False)
os.truncate(path, 4096)
for name, read in (("store", lambda: store.gather([4095])), ("loader", lambda: next(iter(loader)))):
    try:
        read()
    except OSError as error:
        assert path in str(error) and "shrank" in str(error), error
        print(name, "refused")
"""


def test_a_gather_from_a_memory_mapped_table_whose_file_shrank_raises_naming_the_file(tmp_path):
    import subprocess
    import sys

    path = str(tmp_path / "x.npy")
    result = subprocess.run([sys.executable, "-c", _SHRINK, path], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]  # SIGBUS would be -7
    assert result.stdout.split("\n")[:2] == ["store refused", "loader refused"]


# ------------------------------------------------------------------ C19: bfloat16 round trips
def test_backends_hand_torch_bfloat16_to_numpy_as_ml_dtypes_bfloat16():
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    tensor = torch.arange(6, dtype=torch.bfloat16).view(2, 3)
    array = gg.backends.to("numpy", tensor)
    assert array.dtype.name == "bfloat16" and array.astype(np.float32).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert array.ctypes.data == tensor.data_ptr()  # the same bits, no copy
    back = gg.backends.from_(tensor[:, 1])  # a strided view comes back as its values
    assert back.dtype.name == "bfloat16" and back.astype(np.float32).tolist() == [1, 4]


# ----------------------------------------------------------------------- C20: torch's meta device
def test_meta_tensors_are_refused_naming_the_argument_and_the_meta_device(small):
    torch = pytest.importorskip("torch")
    meta = torch.empty(4, 2, device="meta")
    with pytest.raises(TypeError, match=r"x \(the feature table\) is a tensor on torch's 'meta' device"):
        gg.FeatureStore(meta)
    with pytest.raises(TypeError, match="ids is a tensor on torch's 'meta' device"):
        gg.FeatureStore(np.zeros((4, 2), np.float32)).gather(torch.zeros(2, dtype=torch.long, device="meta"))
    with pytest.raises(TypeError, match="seeds is a tensor on torch's 'meta' device"):
        gg.NeighborSampler(small, [2]).sample(torch.zeros(2, dtype=torch.long, device="meta"))
    with pytest.raises(TypeError, match="pairs is a tensor on torch's 'meta' device"):
        gg.NeighborSampler(small, [2]).sample_links(torch.zeros(2, 2, dtype=torch.long, device="meta"))
    with pytest.raises(TypeError, match="edge_index is a tensor on torch's 'meta' device"):
        gg.CSRGraph.from_edge_index(torch.zeros(2, 3, dtype=torch.long, device="meta"), num_nodes=4)


# ------------------------------------------------------- C21: threading layer chosen at import
_LAYER = """
import sys, warnings
warnings.simplefilter("error")
import gglspeedup as gg
assert "numba" not in sys.modules  # choosing the layer imports no Numba
import numba
import numpy as np
numba.set_num_threads(1)  # a user bounding threads before the first sample
graph = gg.CSRGraph.from_edge_index(np.array([[1, 2], [0, 0]]), num_nodes=3)
gg.NeighborSampler(graph, [2]).sample([0])
print(numba.threading_layer())
"""

_LATE = """
import warnings
import numba
numba.set_num_threads(1)  # Numba launched (OpenMP: TBB is not loadable yet) before gglspeedup
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import gglspeedup
    import gglspeedup.sampling._kernels.cpu  # the kernel modules ask again: still one warning
print(numba.threading_layer(), len(caught), caught[0].message if caught else "")
"""


def _tbb_available():
    import os
    import sys

    return sys.platform.startswith("linux") and os.path.exists(os.path.join(sys.prefix, "lib", "libtbb.so.12"))


@pytest.mark.skipif(not _tbb_available(), reason="needs the tbb package (a core dependency on Linux x86-64)")
def test_threads_set_before_the_first_sample_still_run_on_tbb_and_a_late_import_warns_once():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    result = subprocess.run([sys.executable, "-c", _LAYER], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "tbb"
    result = subprocess.run([sys.executable, "-c", _LATE], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    layer, count, message = result.stdout.strip().split(" ", 2)
    assert layer == "omp" and count == "1" and "NUMBA_THREADING_LAYER=tbb" in message

"""SequencePattern: rows are window + globals + random keys exactly, on the CPU and the simulated GPU."""

import sys
import types
import warnings

import numpy as np
import pytest

from gglspeedup._config import cuda_sim_enabled
from gglspeedup.attention import AttentionGraph, SequencePattern
from gglspeedup.device import DeviceUnavailableError, gpu_available

from conftest import to_host


def rows_of(graph):
    indptr, indices = to_host(graph.indptr), to_host(graph.indices)
    return [indices[indptr[r] : indptr[r + 1]] for r in range(indptr.shape[0] - 1)]


def expected_fixed(layout, window, i, n, globals_):
    """Window keys and global keys of a non-global query ``i`` (the deterministic part of its row)."""
    h = window // 2
    if layout == "diffuser":
        keys = {x for x in range(n) if abs(x // h - i // h) <= 1}
    else:
        keys = {x for x in range(n) if abs(x - i) <= h}
    return keys | set(globals_)


def check_graph(graph, pattern, seq_len, lengths):
    rows = rows_of(graph)
    count = len(lengths)
    for s in range(count):
        n = lengths[s]
        globals_ = set(graph.globals_of(s).tolist())
        assert all(pattern.window <= g < n for g in globals_)
        assert len(globals_) == min(pattern.num_global, max(0, n - pattern.window))
        for i in range(seq_len):
            row = rows[s * seq_len + i] - s * seq_len
            if i >= n:
                assert row.size == 0  # padding positions are isolated
                continue
            assert np.all(np.diff(row) > 0), "rows are sorted, no repeated key"
            assert row.min() >= 0 and row.max() < n
            fixed = expected_fixed(pattern.layout, pattern.window, i, n, globals_)
            if i in globals_ or n - len(fixed) <= pattern.num_random:
                assert row.tolist() == list(range(n))
            else:
                assert fixed <= set(row.tolist())
                assert len(row) == len(fixed) + pattern.num_random


@pytest.mark.parametrize("layout", ["diffuser", "sliding"])
@pytest.mark.parametrize("random", ["uniform", "power_law"])
def test_rows_are_window_globals_and_random_keys(layout, random):
    pattern = SequencePattern(window=8, num_random=5, num_global=3, layout=layout, random=random, seed=3)
    lengths = [60, 37, 9, 12]
    graph = pattern.csc(60, batch=4, step=2, lengths=lengths)
    check_graph(graph, pattern, 60, lengths)
    fixed = pattern.csc(60, batch=2)
    check_graph(fixed, pattern, 60, [60, 60])


def test_fixed_pattern_is_the_same_for_every_sequence_and_cached():
    pattern = SequencePattern(window=4, num_random=2, num_global=1, seed=5)
    graph = pattern.csc(20, batch=3)
    rows = rows_of(graph)
    for s in (1, 2):
        for i in range(20):
            assert np.array_equal(rows[s * 20 + i] - s * 20, rows[i])
    assert pattern.csc(20, batch=3) is graph
    shared = pattern.csc(20, batch=3, shared=True)
    assert shared.num_nodes == 20 and shared.repeats == 3
    assert np.array_equal(to_host(shared.indices), to_host(graph.indices)[: shared.num_edges])


def test_steps_and_sequences_draw_fresh_keys_and_repeat_with_the_seed():
    make = lambda seed: SequencePattern(window=4, num_random=3, num_global=1, seed=seed)  # noqa: E731
    a, b = make(1).csc(40, batch=2, step=7), make(1).csc(40, batch=2, step=7)
    assert np.array_equal(to_host(a.indices), to_host(b.indices))
    c = make(1).csc(40, batch=2, step=8)
    d = make(2).csc(40, batch=2, step=7)
    assert not np.array_equal(to_host(a.indices), to_host(c.indices))
    assert not np.array_equal(to_host(a.indices), to_host(d.indices))
    rows = rows_of(a)
    assert any(not np.array_equal(rows[i], rows[40 + i] - 40) for i in range(40))  # sequences differ


def test_cpu_and_simulated_gpu_build_the_same_pattern(device):
    for kwargs in ({}, {"layout": "sliding"}, {"random": "power_law", "exponent": 1.5}):
        options = dict(window=4, num_random=3, num_global=2, seed=11, **kwargs)
        cpu = SequencePattern(**options).csc(18, batch=2, step=4, lengths=[18, 11])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            other = SequencePattern(device=device, **options).csc(18, batch=2, step=4, lengths=[18, 11])
        assert np.array_equal(to_host(cpu.indptr), to_host(other.indptr))
        assert np.array_equal(to_host(cpu.indices), to_host(other.indices))


def test_rows_of_few_keys_a_word_and_of_many_are_read_off_alike(device):
    # The CPU reads a row off its key bitmap around the window (written as a run): a few bits a
    # word without a branch (the row's keys a word and two more, 4 to 16: 4 at 300 tokens, 7 at
    # 40, 16 with 60 draws a row at 200), then a loop per bit; the last word of a row is read by
    # the loop alone (so nothing lands in the next row's slots). All must give the rule's rows and
    # the GPU's.
    for seq_len, num_random, num_global in ((300, 3, 2), (40, 3, 2), (200, 60, 9)):
        options = dict(window=4, num_random=num_random, num_global=num_global, seed=13)
        cpu = SequencePattern(**options).csc(seq_len, batch=2, step=6, lengths=[seq_len, seq_len - 7])
        check_graph(cpu, SequencePattern(**options), seq_len, [seq_len, seq_len - 7])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            other = SequencePattern(device=device, **options).csc(
                seq_len, batch=2, step=6, lengths=[seq_len, seq_len - 7]
            )
        assert np.array_equal(to_host(cpu.indptr), to_host(other.indptr))
        assert np.array_equal(to_host(cpu.indices), to_host(other.indices))


def test_cpu_rows_write_only_their_own_slots(monkeypatch):
    # Blocks of rows are filled on different threads, so a row must write nothing past its own last
    # slot (the next row's first may belong to another thread's block; the branch-free reads of the
    # key bitmap write one slot ahead). Filling the rows last to first, each after the row after
    # it is written, must then give the build's rows: any write past a row would land on written keys.
    from numba import njit

    from gglspeedup.attention.sequence._kernels import pattern_bits, pattern_cpu

    @njit
    def fill_backwards(rows, indptr, out, words):
        lengths, seq_len, gptr, gids, layout, half, num_random, mode, cdf, states = rows
        gbits = np.zeros((lengths.shape[0], words), np.uint64)
        pattern_bits.globals_bits(gptr, gids, gbits)
        bitmap = np.empty(words, np.uint64)
        for r in range(indptr.shape[0] - 2, -1, -1):
            pattern_bits.row_fill_bits(
                lengths, seq_len, layout, half, num_random, mode, cdf, states, r, indptr[r], indptr[r + 1], out,
                gbits, bitmap,
            )  # fmt: skip

    for seq_len, num_random, num_global in ((1100, 64, 16), (200, 60, 9), (300, 3, 2)):
        pattern = SequencePattern(window=64 if seq_len > 1000 else 4, num_random=num_random, num_global=num_global)
        lengths = [seq_len, seq_len - 63, seq_len // 2]
        captured = []
        real = pattern_cpu.fill_rows

        def spy(rows, indptr, out, words, real=real, captured=captured):
            captured.append((rows, indptr.copy(), words))
            real(rows, indptr, out, words)

        monkeypatch.setattr(pattern_cpu, "fill_rows", spy)
        graph = pattern.csc(seq_len, batch=3, step=9, lengths=lengths)
        monkeypatch.setattr(pattern_cpu, "fill_rows", real)
        rows, indptr, words = captured[0]
        out = np.full(graph.num_edges, -1, graph.indices.dtype)
        fill_backwards(rows, indptr, out, words)
        assert np.array_equal(out, graph.indices)
        check_graph(graph, pattern, seq_len, lengths)


def test_index_types_follow_the_size():
    graph = SequencePattern(window=4, num_random=1, num_global=1).csc(16, batch=2)
    assert graph.indices.dtype == np.int32 and graph.indptr.dtype == np.int32
    wide = SequencePattern(window=4, num_random=1, num_global=1).csc(16, batch=2, index_dtype=np.int64)
    assert wide.indices.dtype == np.int64 and np.array_equal(wide.indices, graph.indices)


def test_transpose_lists_each_edge_once_by_key():
    graph = SequencePattern(window=4, num_random=2, num_global=1, seed=2).csc(15, batch=2, step=0)
    tindptr, queries, edges = graph.transpose()
    indptr, indices = graph.indptr, graph.indices
    assert np.array_equal(np.sort(edges), np.arange(graph.num_edges))
    for x in range(graph.num_nodes):
        span = slice(tindptr[x], tindptr[x + 1])
        assert np.all(indices[edges[span]] == x)
        assert np.all(np.diff(queries[span]) > 0)
        for q, e in zip(queries[span], edges[span]):
            assert indptr[q] <= e < indptr[q + 1]


def test_hand_offs_share_the_rows():
    torch = pytest.importorskip("torch")
    graph = SequencePattern(window=4, num_random=2, num_global=1).csc(12, batch=2)
    csr = graph.to_torch_csr()
    dense = csr.to_dense()
    for y, row in enumerate(rows_of(graph)):
        assert torch.nonzero(dense[y]).flatten().tolist() == row.tolist()
    pyg = pytest.importorskip("torch_geometric")
    edge_index = graph.to_pyg()
    assert isinstance(edge_index, pyg.EdgeIndex) and edge_index.is_sorted_by_col
    assert edge_index[0].tolist() == graph.indices.tolist()


def test_to_torch_csr_takes_one_value_per_edge_and_refuses_other_lengths_by_name():
    # the tensor is made with check_invariants=False: one value short was read past the end
    # (a product with it returned garbage), one too many and a (num_edges, 2) matrix were taken
    torch = pytest.importorskip("torch")
    graph = SequencePattern(window=4, num_random=2, num_global=1).csc(12, batch=2, step=3)
    values = torch.arange(1, graph.num_edges + 1, dtype=torch.float64)
    dense = graph.to_torch_csr(values).to_dense()
    for y, row in enumerate(rows_of(graph)):
        start = int(graph.indptr[y])
        assert dense[y, row].tolist() == values[start : start + row.shape[0]].tolist()
    expected = rf"^values must have one value per edge, shape \(num_edges,\) = \({graph.num_edges},\), got "
    for bad in (values[:-1], torch.ones(graph.num_edges + 1), torch.ones(graph.num_edges, 2), torch.tensor(1.0)):
        with pytest.raises(ValueError, match=expected):
            graph.to_torch_csr(bad)
    with pytest.raises(TypeError, match=r"^values must be a torch.Tensor \(num_edges,\), got ndarray"):
        graph.to_torch_csr(values.numpy())


def test_to_dgl_hands_over_the_csc_arrays_without_a_sort(monkeypatch):
    torch = pytest.importorskip("torch")
    calls = {}
    fake = types.ModuleType("dgl")
    fake.graph = lambda data, num_nodes: calls.update(data=data, num_nodes=num_nodes) or "graph"
    monkeypatch.setitem(sys.modules, "dgl", fake)
    graph = SequencePattern(window=4, num_random=2, num_global=1).csc(12, batch=2)
    assert graph.to_dgl() == "graph"
    kind, (indptr, indices, edge_ids) = calls["data"]
    assert kind == "csc" and calls["num_nodes"] == 24 and edge_ids.numel() == 0
    assert indices.data_ptr() == torch.from_numpy(graph.indices).data_ptr()  # the same memory
    assert indptr.tolist() == graph.indptr.tolist()


def test_hand_offs_to_a_framework_that_does_not_import_name_what_to_install(monkeypatch):
    # raised ModuleNotFoundError "No module named 'torch_geometric'" / "'dgl'", naming no install
    pytest.importorskip("torch")
    graph = SequencePattern(window=4, num_random=2, num_global=1).csc(12, batch=2)
    monkeypatch.setitem(sys.modules, "torch_geometric", None)  # import fails as when not installed
    monkeypatch.setitem(sys.modules, "dgl", None)
    with pytest.raises(
        ImportError, match=r"^AttentionGraph.to_pyg needs torch_geometric \(PyG\), .*gglspeedup\[pyg\]$"
    ):
        graph.to_pyg()
    with pytest.raises(ImportError, match=r"^AttentionGraph.to_dgl needs DGL, which does not import .*pip install dgl"):
        graph.to_dgl()


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"window": 5}, ValueError, "window must be even"),
        ({"window": 0}, ValueError, "window"),
        ({"num_random": -1}, ValueError, "num_random"),
        ({"layout": "band"}, ValueError, "layout"),
        ({"random": "zipf"}, ValueError, "random"),
        ({"exponent": 0.0, "random": "power_law"}, ValueError, "exponent"),
        ({"compat": "longformer"}, ValueError, "compat"),
        ({"compat": "diffuser", "layout": "sliding"}, ValueError, "compat='diffuser'"),
        ({"window": 1.5}, TypeError, "window"),
    ],
)
def test_bad_pattern_arguments_name_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        SequencePattern(**kwargs)


def test_bad_csc_arguments_name_the_argument():
    pattern = SequencePattern(window=4, num_random=1, num_global=1)
    with pytest.raises(ValueError, match="lengths must lie in"):
        pattern.csc(10, batch=2, step=0, lengths=[10, 11])
    with pytest.raises(ValueError, match="lengths must have batch"):
        pattern.csc(10, batch=2, step=0, lengths=[10])
    with pytest.raises(ValueError, match="seq_len"):
        pattern.csc(0)
    with pytest.raises(ValueError, match="step"):
        pattern.csc(10, step=-1)
    with pytest.raises(ValueError, match="shared=True"):
        pattern.csc(10, batch=2, lengths=[3, 4], shared=True)
    with pytest.raises(ValueError, match="index_dtype int32 cannot hold"):
        pattern.csc(2**16, batch=2**15, index_dtype=np.int32)
    with pytest.raises(TypeError, match="index_dtype"):
        pattern.csc(10, index_dtype=np.float32)
    compat = SequencePattern(window=4, num_random=1, num_global=1, compat="diffuser", max_len=32)
    with pytest.raises(ValueError, match="step must be None"):
        compat.csc(16, step=1)
    with pytest.raises(ValueError, match="max_len"):
        compat.csc(64)


def test_csc_refuses_a_non_bool_shared_and_an_unreadable_index_dtype_by_name():
    # shared="no" was read as true (one shared graph instead of batch copies); index_dtype="bogus"
    # raised NumPy's own "data type 'bogus' not understood", naming no argument
    pattern = SequencePattern(window=4, num_random=1, num_global=1)
    for shared in ("no", 1, None):
        with pytest.raises(TypeError, match=r"^shared must be a bool \(True or False\)"):
            pattern.csc(10, batch=2, shared=shared)
    assert pattern.csc(10, batch=2, shared=np.bool_(True)) is pattern.csc(10, batch=2, shared=True)
    assert pattern.csc(10, batch=2, shared=np.bool_(True)).num_nodes == 10
    with pytest.raises(TypeError, match=r"^index_dtype must be None, numpy.int32 or numpy.int64, got 'bogus'"):
        pattern.csc(10, index_dtype="bogus")


def test_globals_of_takes_a_sequence_of_the_batch_and_refuses_others_by_name():
    # -1 gave an empty list, 1.5 sequence 1's, and one past the batch NumPy's bare IndexError
    pattern = SequencePattern(window=4, num_random=1, num_global=2, seed=1)
    for graph in (pattern.csc(12, batch=3, step=2), pattern.csc(12, batch=3), pattern.csc(12, batch=3, shared=True)):
        lists = [graph.globals_of(s).tolist() for s in range(3)]
        assert lists == [graph.globals_of(np.int64(s)).tolist() for s in range(3)]
        assert all(len(positions) == 2 for positions in lists)
        for sequence in (-1, 3):
            with pytest.raises(IndexError, match=rf"^sequence must be an int in \[0, 3\), got {sequence}"):
                graph.globals_of(sequence)
        with pytest.raises(TypeError, match=r"^sequence must be an int, got float 1.5"):
            graph.globals_of(1.5)
    stepped = pattern.csc(12, batch=3, step=2)
    assert len({tuple(stepped.globals_of(s).tolist()) for s in range(3)}) > 1  # fresh globals per sequence


@pytest.mark.parametrize("copy_of", ["pickle", "deepcopy"])
def test_patterns_and_graphs_pickle_and_deep_copy(copy_of):
    # their locks made pickle, copy.deepcopy and so a deep copy of a model holding its pattern fail
    import copy
    import pickle

    def again(obj):
        return pickle.loads(pickle.dumps(obj)) if copy_of == "pickle" else copy.deepcopy(obj)

    pattern = SequencePattern(window=4, num_random=2, num_global=1, layout="sliding", seed=7)
    graph = pattern.csc(12, batch=2, step=3)
    graph.transpose()
    fixed = pattern.csc(12)
    other = again(pattern)
    assert repr(other) == repr(pattern)
    rebuilt = other.csc(12, batch=2, step=3)
    assert np.array_equal(rebuilt.indptr, graph.indptr) and np.array_equal(rebuilt.indices, graph.indices)
    assert other.csc(12) is other.csc(12) and np.array_equal(other.csc(12).indices, fixed.indices)
    copied = again(graph)
    assert np.array_equal(copied.indices, graph.indices)
    assert copied.globals_of(1).tolist() == graph.globals_of(1).tolist()
    for mine, theirs in zip(copied.transpose(), graph.transpose()):
        assert np.array_equal(to_host(mine), to_host(theirs))


@pytest.mark.parametrize("copy_of", ["pickle", "deepcopy", "copy"])
def test_the_locked_attention_structures_copy_through_one_mixin(copy_of):
    # GraphBatch, SequencePattern and AttentionGraph each had their own __getstate__ / __setstate__;
    # one mixin now leaves out the lock and the caches each names and makes them anew on loading
    import copy
    import pickle

    from gglspeedup.attention import graph_batch
    from gglspeedup.attention._pickling import RemadeOnLoad

    copies = {"pickle": lambda obj: pickle.loads(pickle.dumps(obj)), "deepcopy": copy.deepcopy, "copy": copy.copy}
    pattern = SequencePattern(window=4, num_random=1, num_global=0, layout="sliding", seed=3)
    graph = pattern.csc(8)  # fills the pattern's cache
    batch = graph_batch(sizes=[2, 1, 2], edge_index=[np.array([[0, 1]]), [], np.array([[1, 0]])])
    batch.placed("cpu", lambda: batch.arrays)  # fills the batch's per-device copies
    remade = [(pattern, {"_lock", "_cache"}), (graph, {"_lock"}), (batch, {"_lock", "_placed"})]
    for obj, names in remade:
        assert isinstance(obj, RemadeOnLoad)
        assert set(obj.__getstate__()) == set(vars(obj)) - names
        other = copies[copy_of](obj)
        assert type(other) is type(obj) and set(vars(other)) == set(vars(obj))
        assert type(other._lock) is type(obj._lock) and other._lock is not obj._lock and not other._lock.locked()
        for name in names - {"_lock"}:
            assert getattr(obj, name) and getattr(other, name) == {}
        assert repr(other) == repr(obj)


def test_attention_graph_is_exported():
    assert isinstance(SequencePattern(window=4, num_random=0, num_global=0).csc(4), AttentionGraph)


def test_a_window_past_max_len_names_window_not_max_len():
    with pytest.raises(ValueError, match=r"^window must be <= max_len = 4096") as error:
        SequencePattern(window=10**12)
    assert "got 1000000000000" in str(error.value)
    with pytest.raises(ValueError, match=r"^window must be <= max_len = 8 \(or raise max_len\), got 16"):
        SequencePattern(window=16, max_len=8)
    assert SequencePattern(window=16, max_len=16).max_len == 16


@pytest.mark.parametrize("name", ["num_random", "num_global", "window"])
def test_counts_from_2_to_the_61_are_refused_by_name(name):
    value = 10**30 if name != "window" else 2**62
    with pytest.raises(ValueError, match=rf"^{name} must be an (even )?int in \[\d, 2\*\*61\), got {value}"):
        SequencePattern(**{name: value, "max_len": 2**63})
    # the largest accepted counts build (draws stop at the keys a row has)
    pattern = SequencePattern(window=4, num_random=2**61 - 1, num_global=2**61 - 1, seed=3)
    rows = rows_of(pattern.csc(12, batch=2, step=0))
    assert all(row.tolist() == list(range(s * 12, s * 12 + 12)) for s in (0, 1) for row in rows[s * 12 : s * 12 + 12])


def test_builds_past_the_memory_available_are_refused_naming_the_argument(monkeypatch):
    from gglspeedup.attention.sequence import patterns

    monkeypatch.setattr(patterns, "available_memory", lambda: 64 * 2**30)
    compat = SequencePattern(window=4, num_random=1, num_global=1, compat="diffuser", max_len=2**17)
    with pytest.raises(ValueError, match=r"^max_len = 131072 needs up to 128\.\d GiB .* 64\.0 GiB of memory available"):
        compat.csc(8)
    plain = SequencePattern()
    both = r"^seq_len = 1000 and batch = 100000000000 need up to \d+\.\d GiB \(100000000000 sequences of 1000 tokens"
    with pytest.raises(ValueError, match=both + r", up to \d+ edges\), more than the 64\.0 GiB .*; lower batch or "):
        plain.csc(1000, batch=10**11)
    with pytest.raises(ValueError, match=both):
        plain.csc(1000, batch=10**11, step=4)
    # seq_len alone past the memory: it was "batch = 1 needs ...", naming the one argument that was small
    with pytest.raises(ValueError, match=r"^seq_len = 1000000000 and batch = 1 need up to \d+\.\d GiB \(1 sequence of"):
        plain.csc(10**9)
    with pytest.raises(ValueError, match=r"^seq_len = 1000000000 needs up to .*\(one shared pattern of 1000000000 "):
        plain.csc(10**9, batch=4, shared=True)
    with pytest.raises(ValueError, match=r"^seq_len = 1000000000 needs .*; lower seq_len$"):
        plain.csc(10**9, batch=1, shared=True)
    # a shared pattern is one sequence's, whatever the batch; a small build does not read the memory
    monkeypatch.setattr(patterns, "available_memory", lambda: pytest.fail("read the memory for a small build"))
    assert plain.csc(1000, batch=10**11, shared=True).num_nodes == 1000
    assert SequencePattern(window=4, num_random=1, num_global=1, compat="diffuser", max_len=64).csc(8).num_nodes == 8


def test_the_memory_refusal_holds_against_the_machines_real_memory():
    with pytest.raises(ValueError, match=r"^seq_len = 1000 and batch = 100000000000 need up to \d+\.\d GiB"):
        SequencePattern().csc(1000, batch=10**11)


def hand_built(indptr, indices, seq_len, **kwargs):
    kwargs.setdefault("batch", 1)
    kwargs.setdefault("shared", False)
    return AttentionGraph(np.asarray(indptr), np.asarray(indices), seq_len, **kwargs)


def test_a_hand_built_attention_graph_is_checked_at_construction():
    ok = hand_built([0, 2, 3, 3], [0, 2, 1], 3)
    assert (ok.num_nodes, ok.num_edges, ok.indptr.dtype, ok.globals_of(0).tolist()) == (3, 3, np.int64, [])
    assert (
        ok.device.type == "cpu"
        and hand_built([0, 1], np.array([0], np.int32), 1, device="cpu").indices.dtype == np.int32
    )
    with pytest.raises(IndexError, match=r"^indices\[2\] = 1000000 is out of range \[0, num_nodes = 3\)"):
        hand_built([0, 2, 3, 3], [0, 2, 10**6], 3)
    with pytest.raises(IndexError, match=r"^indices\[0\] = -1 is out of range"):
        hand_built([0, 1, 1, 1], [-1], 3)
    with pytest.raises(ValueError, match=r"^indptr must not decrease: indptr\[2\] = 1 < indptr\[1\] = 2"):
        hand_built([0, 2, 1, 3], [0, 1, 2], 3)
    # duplicate and unsorted keys within a row were accepted, although each row is documented sorted
    strict = r"^indices must be strictly increasing within each row \(sorted keys, no duplicates\): "
    with pytest.raises(ValueError, match=strict + r"row 0 has a duplicate key, indices\[0\] = 0 then indices\[1\] = 0"):
        hand_built([0, 2, 3], [0, 0, 1], 2)
    with pytest.raises(ValueError, match=strict + r"row 2 has keys out of order, indices\[2\] = 3 then"):
        hand_built([0, 1, 1, 4, 4], [3, 0, 3, 1], 4)  # row 1 empty; a row may start below the last one's end
    assert hand_built([0, 2, 2, 4, 5], np.array([2, 3, 0, 1, 0], np.int32), 4).num_edges == 5
    with pytest.raises(ValueError, match=r"^indptr must run from 0 to num_edges = len\(indices\) = 2"):
        hand_built([0, 1, 2, 3], [0, 1], 3)
    with pytest.raises(ValueError, match=r"^indptr must run from 0"):
        hand_built([1, 1, 2, 2], [0], 3)
    with pytest.raises(ValueError, match=r"^indptr must have num_nodes \+ 1 = 7 entries \(seq_len \* batch = 6"):
        hand_built([0, 1, 2, 3], [0, 1, 2], 3, batch=2)
    with pytest.raises(TypeError, match=r"^indices must hold integers"):
        hand_built([0, 1], [0.0], 1)
    with pytest.raises(ValueError, match=r"^indptr must be 1-D"):
        hand_built([[0, 1]], [0], 1)
    with pytest.raises(TypeError, match=r"^shared must be a bool"):
        hand_built([0, 1], [0], 1, shared="no")
    with pytest.raises(ValueError, match=r"^global_ids"):
        hand_built([0, 1], [0], 1, global_ptr=np.array([0, 1]), global_ids=np.array([5]))
    with pytest.raises(ValueError, match=r"^lengths must lie in"):
        hand_built([0, 1], [0], 1, lengths=np.array([2]))


@pytest.mark.skipif(cuda_sim_enabled() or gpu_available(), reason="a CUDA device is usable here")
def test_a_hand_built_graph_on_a_cuda_device_this_machine_lacks_names_the_device():
    # raised ModuleNotFoundError "No module named 'cupy'" where SequencePattern(device="cuda:0") names the device
    with pytest.raises(DeviceUnavailableError, match=r"^device cuda:0 requested but no usable CUDA GPU"):
        hand_built([0, 1], [0], 1, device="cuda:0")


def test_pattern_builds_skip_the_check_and_still_pass_it():
    from gglspeedup.attention.sequence.graph import _check_graph

    for kwargs in ({}, {"lengths": [9, 12]}, {"shared": True}):
        graph = SequencePattern(window=4, num_random=2, num_global=1, seed=2).csc(12, batch=2, step=1, **kwargs)
        _check_graph(graph)
    compat = SequencePattern(window=4, num_random=1, num_global=1, compat="diffuser", max_len=32).csc(16, batch=2)
    _check_graph(compat)

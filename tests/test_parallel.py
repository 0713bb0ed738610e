"""One kernel lock and one parallel-region policy (gglspeedup._parallel) for every CPU kernel family."""

import numba
import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup import _parallel
from gglspeedup._parallel import KERNEL_LOCK, PARALLEL_MIN, kernel_threads, pays


def test_pays_reads_each_units_threshold():
    for unit, minimum in PARALLEL_MIN.items():
        assert pays(minimum, unit) and not pays(minimum - 1, unit)
    with pytest.raises(KeyError):
        pays(1, "edges")  # a unit without a threshold is a bug, not a guess


def test_kernel_threads_runs_small_work_on_one_thread_and_restores_the_count():
    threads = numba.get_num_threads()
    with kernel_threads(PARALLEL_MIN["draws"] - 1, "draws") as region:
        assert KERNEL_LOCK.locked()
        assert numba.get_num_threads() == 1 == region.current
        assert region.fit(PARALLEL_MIN["products"], "products") == threads == numba.get_num_threads()
        assert region.fit(0) == 1 == numba.get_num_threads()
    assert numba.get_num_threads() == threads and not KERNEL_LOCK.locked()


def test_kernel_threads_sets_numbas_count_only_when_it_changes(monkeypatch):
    threads = numba.get_num_threads()
    calls = []
    real = _parallel.numba.set_num_threads
    monkeypatch.setattr(_parallel.numba, "set_num_threads", lambda n: (calls.append(n), real(n)))
    with kernel_threads(PARALLEL_MIN["draws"], "draws") as region:  # pays: the count stays
        region.fit(PARALLEL_MIN["draws"] + 1)
    assert calls == [] and numba.get_num_threads() == threads
    with kernel_threads(0) as region:  # one thread, kept over a second small call, then restored
        region.fit(1)
    assert calls == ([1, threads] if threads > 1 else []) and numba.get_num_threads() == threads


def test_kernel_threads_releases_the_lock_and_restores_the_count_when_its_body_raises():
    threads = numba.get_num_threads()
    with pytest.raises(RuntimeError), kernel_threads(0):
        raise RuntimeError("a kernel failed")
    assert numba.get_num_threads() == threads and not KERNEL_LOCK.locked()
    with pytest.raises(KeyError), kernel_threads(0, "no such unit"):  # raised on entry: nothing kept
        pass
    assert not KERNEL_LOCK.locked()


def _record(monkeypatch, module, name, calls):
    """Replace ``module.name`` by a wrapper that notes whether the kernel lock is held when it runs."""
    kernel = getattr(module, name)

    def recorded(*args, **kwargs):
        calls.append(KERNEL_LOCK.locked())
        return kernel(*args, **kwargs)

    monkeypatch.setattr(module, name, recorded)


def _graph():
    return gg.CSRGraph.from_edge_index(np.random.default_rng(0).integers(0, 50, (2, 400)), num_nodes=50)


def _sampling(monkeypatch, calls):
    from gglspeedup.sampling._kernels import cpu

    _record(monkeypatch, cpu, "sample_hop", calls)
    gg.NeighborSampler(_graph(), [3, 2]).sample(np.arange(5))


def _typed_sampling(monkeypatch, calls):
    from gglspeedup.sampling._kernels import typed

    _record(monkeypatch, typed, "sample_typed_hop", calls)
    edge_index = np.random.default_rng(1).integers(0, 20, (2, 100))
    graph = gg.HeteroGraph({("a", "to", "a"): edge_index}, {"a": 20})
    gg.HeteroNeighborSampler(graph, [3, 2]).sample({"a": np.arange(4)})


def _gather(monkeypatch, calls):
    from gglspeedup.feature._kernels import gather

    monkeypatch.setitem(PARALLEL_MIN, "bytes", 0)  # the parallel driver even for a small batch
    _record(monkeypatch, gather, "gather_cpu", calls)
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    assert np.array_equal(gg.FeatureStore(x)[np.array([3, 1, 3])], x[[3, 1, 3]])


def _pooling(monkeypatch, calls):
    from gglspeedup.attention import softmax_numpy
    from gglspeedup.attention.pooling._kernels import cpu as pooling_cpu

    monkeypatch.setitem(PARALLEL_MIN, "pooling", 0)
    kernel, serial = pooling_cpu._KERNELS["softmax"]

    def recorded(*args):
        calls.append(KERNEL_LOCK.locked())
        return kernel(*args)

    monkeypatch.setitem(pooling_cpu._KERNELS, "softmax", (recorded, serial))
    softmax_numpy(np.arange(5.0), sizes=[2, 3])


def _pooling_layer(monkeypatch, calls):
    torch = pytest.importorskip("torch")
    from gglspeedup.attention import AttentionPooling
    from gglspeedup.attention.pooling._kernels import layer as pooling_layer

    monkeypatch.setitem(PARALLEL_MIN, "pooling", 0)
    _record(monkeypatch, pooling_layer, "plain_forward_flat", calls)  # softmax's kernel
    AttentionPooling(3, 2)(torch.ones(5, 3), sizes=[2, 3])


def _fused_pooling_layer(monkeypatch, calls):
    torch = pytest.importorskip("torch")
    from gglspeedup.attention import AttentionPooling
    from gglspeedup.attention.pooling._kernels import layer as pooling_layer

    monkeypatch.setitem(PARALLEL_MIN, "fused", 0)
    _record(monkeypatch, pooling_layer, "forward_flat", calls)  # gfusedmax's kernel
    AttentionPooling(3, 2, "gfusedmax")(torch.ones(5, 3), sizes=[2, 3], edge_index=[[0, 2], [1, 3]])


def _pattern(monkeypatch, calls):
    from gglspeedup.attention import SequencePattern
    from gglspeedup.attention.sequence._kernels import pattern_cpu

    _record(monkeypatch, pattern_cpu, "fill_rows", calls)
    SequencePattern(window=2, num_random=1, num_global=1).csc(8, step=0)


def _diffusion(monkeypatch, calls):
    torch = pytest.importorskip("torch")
    from gglspeedup.attention import SequencePattern, diffusion_attention
    from gglspeedup.attention.sequence._kernels import diffusion_cpu

    _record(monkeypatch, diffusion_cpu, "scores", calls)
    q = torch.ones(1, 8, 1, 2, dtype=torch.float64)
    diffusion_attention(q, q, q, SequencePattern(window=2, num_random=1, num_global=1).csc(8), hops=1)


FAMILIES = {
    "sampling": _sampling,
    "typed_sampling": _typed_sampling,
    "gather": _gather,
    "pooling": _pooling,
    "pooling_layer": _pooling_layer,
    "fused_pooling_layer": _fused_pooling_layer,
    "pattern": _pattern,
    "diffusion": _diffusion,
}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_cpu_kernel_family_runs_its_parallel_regions_under_the_one_lock(monkeypatch, family):
    calls = []
    FAMILIES[family](monkeypatch, calls)
    assert calls and all(calls)  # the kernel ran, each time holding gglspeedup._parallel.KERNEL_LOCK
    assert not KERNEL_LOCK.locked()


def test_the_lock_is_the_only_kernel_lock():
    # the families' former locks (sampling's and attention pooling's) are gone, not kept beside it
    from gglspeedup.sampling._kernels import cpu

    assert not hasattr(cpu, "KERNEL_LOCK")
    assert _parallel.KERNEL_LOCK is KERNEL_LOCK

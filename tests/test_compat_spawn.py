"""The original names on the CPU: a seed script written for GPUs runs with only its devices changed."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import gglspeedup as gg
from gglspeedup import _config
from gglspeedup.compat import CGPUFeature, GPUSampler, HostArray, Multi_CGPUFeature, MultiGPUSampler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED_SCRIPT = os.path.join(ROOT, "demos", "seed_multigpu_spawn.py")
# The GPU lines of the seed script and their CPU edit: nothing else changes.
GPU_TO_CPU = {
    "ml_sp = MultiGPUSampler(1, csr)": "ml_sp = MultiGPUSampler(-1, csr)",
    'multi_feat = Multi_CGPUFeature(1, [0, 1], ".1G", csr)': 'multi_feat = Multi_CGPUFeature(1, [-1, -1], ".1G", csr)',
}
no_gpu = pytest.mark.skipif(_config.HAS_CUDA, reason="a CUDA device (or the simulator) is usable here")


@pytest.fixture
def seed_csr():
    rng = np.random.default_rng(3)
    edge_index = rng.integers(0, 40, size=(2, 200))
    return sp.csr_matrix((np.ones(200), (edge_index[0], edge_index[1])), shape=(40, 40))


@pytest.mark.slow
def test_seed_spawn_script_runs_on_cpu_ranks_with_only_the_devices_changed(tmp_path):
    torch = pytest.importorskip("torch")
    with open(SEED_SCRIPT) as handle:
        text = handle.read()
    for gpu_line, cpu_line in GPU_TO_CPU.items():
        assert text.count(gpu_line) == 1, gpu_line
        text = text.replace(gpu_line, cpu_line)
    script = tmp_path / "seed_multigpu_spawn_cpu.py"
    script.write_text(text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    env.update(NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    command = [sys.executable, str(script), "--epochs", "8", "--batch-size", "16", "--nprocs", "3"]
    # 3 ranks for 2 listed feature devices: CPU ranks are not counted; the folder the docstring's
    # `--out results/` names is made (each rank's write into a missing one was a traceback)
    command += ["--out", str(tmp_path / "results")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads((tmp_path / "results" / f"rank{rank}.json").read_text()) for rank in range(3)]
    for result in results:
        assert result["device"] == "cpu"
        assert result["rows_match"]  # feat[dst_node] through toDlpack() equals x[all_node]
        assert result["last_loss"] < result["first_loss"]
        assert result["test_accuracy"] > 0.6  # 7 classes; the largest holds 32% of the test nodes
    accuracies = [result["test_accuracy"] for result in results]
    assert max(accuracies) - min(accuracies) < 0.05  # one model (gradients averaged), ranks' own samples
    assert torch is not None


def test_minus_one_is_the_cpu_for_every_seed_name(seed_csr):
    x = np.arange(40 * 3, dtype=np.float32).reshape(40, 3)
    assert GPUSampler(-1, seed_csr).device == gg.Device("cpu")
    feature = CGPUFeature(seed_csr, -1, "1K").from_cpu_tensor(x)
    np.testing.assert_array_equal(feature[np.array([5, 0, 5])], x[[5, 0, 5]])
    assert MultiGPUSampler(-1, seed_csr).device == gg.Device("cpu")
    assert [str(d) for d in Multi_CGPUFeature(0, [-1, -1], "1K", seed_csr).device_list] == ["cpu", "cpu"]


def test_cpu_multi_gpu_sampler_serves_as_many_ranks_as_asked(seed_csr):
    sampler = MultiGPUSampler("cpu", seed_csr)
    sampler.set_size([3, 2])
    seeds = np.array([1, 7, 7, 30])
    outputs = {rank: sampler.sample(seeds, rank) for rank in (3, 0, 1)}
    reference = gg.MultiDeviceSampler(gg.CSRGraph.from_scipy(seed_csr), ["cpu"] * 4, [3, 2])
    for rank, out in outputs.items():
        np.testing.assert_array_equal(out.n_id, reference.sample(seeds, rank, key=0).n_id)
    with pytest.raises(ValueError, match="rank must be >= 0"):
        sampler.sample(seeds, -1)
    with pytest.raises(IndexError, match="rank must be in"):
        MultiGPUSampler("cpu", seed_csr, num_ranks=2).sample(seeds, 2)  # an explicit count is a bound


def test_cpu_multi_gpu_sampler_serves_a_huge_rank_without_a_device_per_rank_below_it(seed_csr):
    import pickle

    from gglspeedup.multigpu import rank_seed

    sampler = MultiGPUSampler("cpu", seed_csr)
    size = len(pickle.dumps(sampler))
    seeds = np.array([1, 7, 7, 30])
    rank = 2**40  # the device list grew to rank + 1 entries: a MemoryError
    out = sampler.sample(seeds, rank)
    reference = gg.NeighborSampler(gg.CSRGraph.from_scipy(seed_csr), [25, 10], seed=rank_seed(0, rank))
    np.testing.assert_array_equal(out.n_id, reference.sample(seeds, key=0).n_id)
    assert len(pickle.dumps(sampler)) == size  # the rank built here does not travel
    sampler.set_size([2])  # reaches the ranks built beyond the device list too
    np.testing.assert_array_equal(
        sampler.sample(seeds, rank).n_id, reference.with_fanouts([2]).sample(seeds, key=1).n_id
    )


def test_cpu_outputs_answer_to_dlpack_with_the_same_elements(seed_csr):
    torch = pytest.importorskip("torch")
    from torch.utils.dlpack import from_dlpack

    x = np.random.default_rng(0).random((40, 5), dtype=np.float32)
    feature = CGPUFeature(seed_csr, "cpu", "0").from_cpu_tensor(x)
    all_node, _ = GPUSampler("cpu", seed_csr).sample(np.array([4, 9]))
    assert isinstance(all_node, HostArray) and isinstance(feature[all_node], HostArray)
    nodes = from_dlpack(all_node.toDlpack())
    rows = from_dlpack(feature[all_node].toDlpack())
    assert nodes.dtype == torch.int64
    np.testing.assert_array_equal(nodes.numpy(), np.asarray(all_node))
    np.testing.assert_array_equal(rows.numpy(), x[np.asarray(all_node)])
    strided = np.arange(20, dtype=np.int64)[1::2].view(HostArray)  # not contiguous, not aligned: copied
    np.testing.assert_array_equal(from_dlpack(strided.toDlpack()).numpy(), np.arange(1, 20, 2))


def test_to_dlpack_carries_bfloat16_bits_exactly_and_refuses_swapped_bytes_by_name(seed_csr, monkeypatch):
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from torch.utils.dlpack import from_dlpack

    # bfloat16 rows (a bfloat16 table's) reach torch as bfloat16 with the same bits: nan, -0.0 and
    # the largest finite value included, from a contiguous array and from a strided one (copied).
    values = np.array([1.5, -2.0, np.nan, -0.0, 3.3895e38, 1e-40] * 2, dtype=ml_dtypes.bfloat16)
    for array in (values, values[::2]):
        tensor = from_dlpack(array.view(HostArray).toDlpack())
        assert tensor.dtype == torch.bfloat16
        np.testing.assert_array_equal(tensor.view(torch.int16).numpy(), array.view(np.int16))
    x = torch.arange(40 * 2, dtype=torch.bfloat16).reshape(40, 2) / 7
    rows = from_dlpack(CGPUFeature(seed_csr, "cpu", "0").from_cpu_tensor(x)[np.array([3, 0, 3])].toDlpack())
    assert rows.dtype == torch.bfloat16 and torch.equal(rows, x[[3, 0, 3]])
    # Swapped bytes and dtypes DLPack has no code for: a TypeError naming the dtype (NumPy's
    # BufferError named neither), before any copy.
    for array, match in [
        (np.arange(5, dtype=">i4"), r"dtype >i4: its bytes are swapped \(big-endian\)"),
        (np.linspace(0, 1, 6).astype(">f8")[::2], r"dtype >f8: its bytes are swapped"),
        (np.array(["a", "b"]), r"dtype <U1: DLPack carries bool"),
    ]:
        with pytest.raises(TypeError, match=match):
            array.view(HostArray).toDlpack()
    # Without torch nothing exports a bfloat16 capsule: said by name, not NumPy's BufferError.
    monkeypatch.setattr(_config, "HAS_TORCH", False)
    with pytest.raises(TypeError, match="bfloat16 HostArray needs torch"):
        values.view(HostArray).toDlpack()


@no_gpu
@pytest.mark.parametrize(
    "build",
    [
        lambda csr: GPUSampler(0, csr),
        lambda csr: CGPUFeature(csr, 0, "0.1G"),
        lambda csr: MultiGPUSampler(1, csr),
        lambda csr: Multi_CGPUFeature(1, [0, 1], "0.1G", csr),
    ],
    ids=["GPUSampler", "CGPUFeature", "MultiGPUSampler", "Multi_CGPUFeature"],
)
def test_gpu_devices_without_a_gpu_raise_the_device_error(seed_csr, build):
    with pytest.raises(gg.DeviceUnavailableError, match="no usable CUDA GPU"):
        build(seed_csr)

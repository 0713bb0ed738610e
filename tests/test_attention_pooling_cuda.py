"""The pooling kernels give the same bits on every device: forward outputs, groups, boundary
counts and certificate residuals, and every gradient (CPU vs the CUDA kernels, on the simulator
in CI). Batches are tiny: the simulator runs each (graph, head) problem as Python."""

import numpy as np
import pytest

from gglspeedup.attention import fused_lasso_numpy, gfusedmax_numpy, softmax_numpy, sparsemax_numpy

from conftest import assert_same_bits


def tiny_batch():
    rng = np.random.default_rng(4)
    sizes = np.array([0, 1, 4, 6, 5])
    edges = [
        np.zeros((0, 2), np.int64),
        np.zeros((0, 2), np.int64),
        np.zeros((0, 2), np.int64),  # edgeless
        np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 0], [1, 0], [2, 2]]),
        np.array([[0, 1], [0, 2], [0, 3], [0, 4], [3, 4]]),
    ]
    scores = np.round(rng.standard_normal((int(sizes.sum()), 2)), 1)  # ties included
    return sizes, edges, scores


def same(a, b, device):
    if a is None or b is None:
        assert a is None and b is None
    else:
        assert_same_bits(device, b, a)


def test_gfusedmax_is_bit_identical_across_devices(device):
    sizes, edges, scores = tiny_batch()
    grad = np.linspace(-1.0, 1.0, scores.size).reshape(scores.shape)
    for lam in ([0.3, 0.0], [2.0, 0.07]):
        runs = [
            gfusedmax_numpy(
                scores, sizes=sizes, edge_index=edges, lam=np.array(lam), gamma=np.array([0.9, 1.7]), device=d
            )
            for d in ("cpu", device)
        ]
        for name in ("output", "fused", "groups", "boundary", "residual"):
            same(getattr(runs[0], name), getattr(runs[1], name), device)
        for mine, theirs in zip(runs[0].vjp(grad), runs[1].vjp(grad)):
            same(mine, theirs, device)


def test_fused_lasso_softmax_and_sparsemax_are_bit_identical_across_devices(device):
    sizes, edges, scores = tiny_batch()
    grad = np.cos(np.arange(scores.size)).reshape(scores.shape)
    pairs = [
        (fused_lasso_numpy(scores, sizes=sizes, edge_index=edges, lam=0.45, device=d) for d in ("cpu", device)),
        (sparsemax_numpy(scores, sizes=sizes, gamma=0.6, device=d) for d in ("cpu", device)),
        (softmax_numpy(scores, sizes=sizes, device=d) for d in ("cpu", device)),
    ]
    for cpu, other in pairs:
        same(cpu.output, other.output, device)
        for mine, theirs in zip(cpu.vjp(grad), other.vjp(grad)):
            same(mine, theirs, device)


@pytest.mark.cuda
def test_simulated_kernels_run_the_cuda_driver():
    from gglspeedup import _config
    from gglspeedup.attention.pooling._kernels.cuda import CUDAPoolingDriver
    from gglspeedup.attention.pooling.numpy_maps import driver_for
    from gglspeedup.device import as_device

    if not _config.HAS_CUDA:
        pytest.skip("no CUDA GPU and the CUDA simulator is off")
    assert isinstance(driver_for(as_device("cuda:0")), CUDAPoolingDriver)

"""The attention drivers speak their written contracts (gglspeedup.attention._drivers), on each device."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gglspeedup.attention import SequencePattern  # noqa: E402
from gglspeedup.attention._drivers import AttentionOps, PatternDriver, PoolingDriver, PoolingLayer  # noqa: E402
from gglspeedup.attention.pooling._state import driver_for  # noqa: E402
from gglspeedup.attention.sequence._ops import CPUGraphOps, CUDAGraphOps, graph_ops  # noqa: E402
from gglspeedup.attention.sequence._validate import check_inputs  # noqa: E402
from gglspeedup.attention.sequence.patterns import pattern_driver  # noqa: E402
from gglspeedup.device import as_device  # noqa: E402


def test_every_attention_driver_speaks_its_contract(device):
    device = as_device(device)
    assert isinstance(driver_for(device), PoolingDriver)
    assert isinstance(pattern_driver(device), PatternDriver)
    assert driver_for(device) is driver_for(device) and pattern_driver(device) is pattern_driver(device)  # once
    graph = SequencePattern(window=2, num_random=1, num_global=1, device=device).csc(6, batch=2)
    ops = graph_ops(graph, 1, 2, 3)
    assert isinstance(ops, AttentionOps) and isinstance(ops, CUDAGraphOps if device.is_cuda else CPUGraphOps)
    assert ops.work == graph.num_edges * 2 * 3  # the products of a pass (sizes its threads)
    if not device.is_cuda:
        assert isinstance(driver_for(device), PoolingLayer)  # the layer's one-kernel path: the CPU's


def test_the_contracts_refuse_what_lacks_their_methods():
    for contract in (PoolingDriver, PoolingLayer, PatternDriver, AttentionOps):
        assert not isinstance(object(), contract)
    assert not isinstance(pattern_driver(as_device("cpu")), PoolingDriver)


def test_the_validator_only_checks_and_the_caller_builds_the_executor():
    graph = SequencePattern(window=2, num_random=1, num_global=1).csc(6, batch=2)
    q = torch.zeros(2, 6, 1, 4, dtype=torch.float64)
    checked = check_inputs(q, q, q, graph, None, 1, 0.1, 0.0)
    assert checked[:5] == (2, 6, 1, 4, None) and checked[5] == 1  # repeats, not an executor
    shared = SequencePattern(window=2, num_random=1, num_global=1).csc(6, batch=2, shared=True)
    assert check_inputs(q, q, q, shared, None, 1, 0.1, 0.0)[5] == 2
    assert np.isscalar(checked[5])

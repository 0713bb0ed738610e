"""Pooling split at graph boundaries: the partition, two gloo processes whose summed gradients
equal one process's, and parts on several devices of one process."""

import numpy as np
import pytest

from gglspeedup.attention import partition_graphs, split_batch

from conftest import free_port, init_gloo

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
mp = pytest.importorskip("torch.multiprocessing")

SIZES = [5, 1, 8, 0, 6, 3, 9, 4]


def batch_data():
    rng = np.random.default_rng(0)
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    edges = [np.stack(np.nonzero(np.triu(rng.random((n, n)), 1) > 0.6), axis=-1) for n in SIZES]
    x = torch.tensor(rng.standard_normal((ptr[-1], 6)))
    targets = torch.tensor(rng.standard_normal((len(SIZES), 4)))
    return ptr, edges, x, targets


def model():
    from gglspeedup.attention import AttentionPooling

    torch.manual_seed(0)
    return AttentionPooling(6, 4, "gfusedmax", heads=2, lam=0.4, learn_lam=True, learn_gamma=True).double()


def single_process_gradients():
    ptr, edges, x, targets = batch_data()
    layer = model()
    x = x.clone().requires_grad_()
    ((layer(x, ptr, edges) - targets) ** 2).sum().backward()
    return x.grad, {name: p.grad for name, p in layer.named_parameters()}


@pytest.mark.parametrize("parts", [1, 2, 3, 8, 12])
def test_partition_cuts_whole_graphs_balanced_by_nodes(parts):
    ptr = np.concatenate([[0], np.cumsum(SIZES)])
    bounds = partition_graphs(ptr, parts)
    assert bounds[0] == 0 and bounds[-1] == len(SIZES) and np.all(np.diff(bounds) >= 0)
    nodes = np.diff(ptr[bounds])
    assert nodes.sum() == ptr[-1]
    # each cut is the graph boundary nearest to its share of the nodes
    for r in range(1, parts):
        target = ptr[-1] * r / parts
        assert abs(ptr[bounds[r]] - target) == np.abs(ptr - target).min()


def _rank_gradients(rank, world_size, port, out):
    from gglspeedup.attention import sum_gradients

    torch.set_num_threads(1)
    init_gloo(rank, world_size, port, 120)
    try:
        ptr, edges, x, targets = batch_data()
        part = split_batch(ptr, edges, rank=rank, world_size=world_size)
        layer = model()
        rows = x[part.nodes[0] : part.nodes[1]].clone().requires_grad_()
        pooled = layer(rows, part.ptr, part.edge_index)
        ((pooled - targets[part.graphs[0] : part.graphs[1]]) ** 2).sum().backward()
        sum_gradients(layer)
        torch.save(
            {"x": rows.grad, "nodes": part.nodes, **{n: p.grad for n, p in layer.named_parameters()}},
            f"{out}/rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_gloo_ranks_give_the_single_process_gradients(tmp_path):
    # The reference first: it compiles the pooling kernels into Numba's on-disk cache, which the
    # spawned ranks then load instead of each compiling them again (minutes on a cold cache).
    x_grad, expected = single_process_gradients()
    mp.spawn(_rank_gradients, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    assert ranks[0]["nodes"][1] == ranks[1]["nodes"][0] and 0 < ranks[0]["nodes"][1] < x_grad.shape[0]
    for name, grad in expected.items():
        for rank in ranks:
            torch.testing.assert_close(rank[name], grad, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(torch.cat([rank["x"] for rank in ranks]), x_grad, atol=1e-12, rtol=1e-10)


def test_parts_on_several_devices_equal_one_device():
    from gglspeedup.attention import pool_across_devices

    ptr, edges, x, targets = batch_data()
    x_grad, expected = single_process_gradients()
    layer = model()
    x = x.clone().requires_grad_()
    pooled = pool_across_devices(layer, x, ptr, edges, devices=["cpu", "cpu", "cpu"])
    ((pooled - targets) ** 2).sum().backward()
    torch.testing.assert_close(x.grad, x_grad, atol=1e-12, rtol=1e-10)
    for name, parameter in layer.named_parameters():
        torch.testing.assert_close(parameter.grad, expected[name], atol=1e-12, rtol=1e-10)

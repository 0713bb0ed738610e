"""Row-sharded diffusion attention over gloo on 2 CPU processes equals the single-process result."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from gglspeedup.attention import SequencePattern, diffusion_attention  # noqa: E402
from gglspeedup.attention.sequence.sharded import ShardPlan, row_bounds, sharded_diffusion_attention  # noqa: E402

from conftest import free_port, init_gloo  # noqa: E402

B, L, H, D = 2, 24, 2, 3


def inputs():
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(B * L, H, D, generator=generator, dtype=torch.float64) for _ in range(3))
    pad = torch.zeros(B * L, dtype=torch.bool)
    pad[L + 20 :] = True
    upstream = torch.randn(B * L, H, D, generator=generator, dtype=torch.float64)
    return q, k, v, pad, upstream


def pattern():
    return SequencePattern(window=4, num_random=3, num_global=2, seed=9).csc(L, batch=B, step=1)


def _worker(rank, world, port, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        q, k, v, pad, upstream = inputs()
        plan = ShardPlan(pattern(), rank, world)  # every rank builds the same pattern: nothing sent
        plan.exchange_requests(None)
        lo, hi = plan.lo, plan.hi
        local = [t[lo:hi].clone().requires_grad_() for t in (q, k, v)]
        out = sharded_diffusion_attention(*local, plan, hops=3, key_padding_mask=pad[lo:hi])
        (out * upstream[lo:hi]).sum().backward()
        queue.put((rank, out.detach().numpy(), [t.grad.numpy() for t in local]))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_gloo_ranks_match_one_process():
    world = 2
    # The one-process reference first: it compiles the diffusion kernels into Numba's on-disk
    # cache, which the spawned ranks then load instead of each compiling them again (both at once).
    q, k, v, pad, upstream = inputs()
    tensors = [t.reshape(B, L, H, D).clone().requires_grad_() for t in (q, k, v)]
    full = diffusion_attention(*tensors, pattern(), hops=3, key_padding_mask=pad.reshape(B, L))
    (full * upstream.reshape(B, L, H, D)).sum().backward()
    full = full.detach().reshape(B * L, H, D).numpy()
    grads = [t.grad.reshape(B * L, H, D).numpy() for t in tensors]
    # A plan's rows are int64 where the pattern's are int32 (other kernel variants): one rank
    # holding every row, here on a one-process group, compiles those too, and equals the reference.
    init_gloo(0, 1, free_port(), 60)
    try:
        one = ShardPlan(pattern(), 0, 1)
        one.exchange_requests(None)
        local = [t.clone().requires_grad_() for t in (q, k, v)]
        out = sharded_diffusion_attention(*local, one, hops=3, key_padding_mask=pad)
        (out * upstream).sum().backward()
    finally:
        dist.destroy_process_group()
    assert np.array_equal(out.detach().numpy(), full)
    for mine, theirs in zip(local, grads):
        np.testing.assert_allclose(mine.grad.numpy(), theirs, rtol=1e-12, atol=1e-12)
    context = mp.get_context("spawn")
    queue = context.Queue()
    port = free_port()
    processes = [context.Process(target=_worker, args=(rank, world, port, queue)) for rank in range(world)]
    for process in processes:
        process.start()
    results = dict((r, (o, g)) for r, o, g in (queue.get(timeout=300) for _ in range(world)))
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    bounds = row_bounds(B * L, world)
    for rank in range(world):
        lo, hi = bounds[rank], bounds[rank + 1]
        out, local_grads = results[rank]
        assert np.array_equal(out, full[lo:hi])  # the forward is the same arithmetic, row for row
        for mine, theirs in zip(local_grads, grads):
            np.testing.assert_allclose(mine, theirs[lo:hi], rtol=1e-12, atol=1e-12)


def test_no_hops_give_a_new_tensor_as_one_process_does():
    # hops=0 returned the caller's v itself (diffusion_attention returns a copy): an in-place
    # operation on the output changed v, or raised "a leaf Variable that requires grad is being used
    # in an in-place operation"
    q, k, v, _, _ = inputs()
    v.requires_grad_()
    init_gloo(0, 1, free_port(), 60)
    try:
        plan = ShardPlan(pattern(), 0, 1)
        plan.exchange_requests(None)
        out = sharded_diffusion_attention(q, k, v, plan, hops=0)
    finally:
        dist.destroy_process_group()
    assert out is not v and torch.equal(out, v)
    out.mul_(2.0)  # the output is the caller's to change
    out.sum().backward()
    assert torch.equal(v.grad, torch.full_like(v, 2.0))


def test_a_plan_reads_only_what_its_rows_point_at():
    graph = pattern()
    plan = ShardPlan(graph, 0, 2)
    keys = graph.indices[graph.indptr[plan.lo] : graph.indptr[plan.hi]]
    assert set(plan.remote.tolist()) == {int(x) for x in keys if not plan.lo <= x < plan.hi}
    with pytest.raises(ValueError, match="shared=False"):
        ShardPlan(SequencePattern(window=4, num_random=1, num_global=1).csc(8, batch=2, shared=True), 0, 2)


def test_a_plan_names_a_rank_outside_the_world_and_a_graph_of_another_type():
    # rank -1 of 2 made a plan of rows 48 .. 0 (no error), rank 2 of 2 and world 0 raised NumPy's
    # bare IndexError, a float rank NumPy's "only integers ... are valid indices"
    graph = pattern()
    assert (ShardPlan(graph, np.int64(1), 2).lo, ShardPlan(graph, 1, 2).hi) == (24, 48)
    for rank, world, error, match in (
        (-1, 2, ValueError, r"^rank must be an int in \[0, 2\), got -1"),
        (2, 2, ValueError, r"^rank must be an int in \[0, 2\), got 2"),
        (0, 0, ValueError, r"^world must be >= 1, got 0"),
        (1.0, 2, TypeError, r"^rank must be an int, got float 1.0"),
    ):
        with pytest.raises(error, match=match):
            ShardPlan(graph, rank, world)
    with pytest.raises(TypeError, match=r"^graph must be an AttentionGraph \(SequencePattern.csc\), got str"):
        ShardPlan("graph", 0, 1)


def test_bad_sharded_inputs_name_the_argument_before_anything_is_fetched():
    # hops = -1, alpha = 5 and integer q, k, v were computed with; a key_padding_mask one row short
    # was read past its end by the kernels
    q, k, v, pad, _ = inputs()
    init_gloo(0, 1, free_port(), 60)
    try:
        plan = ShardPlan(pattern(), 0, 1)
        plan.exchange_requests(None)
        expected = sharded_diffusion_attention(q, k, v, plan, hops=2, alpha=0.25, key_padding_mask=pad)
        numpy_scalars = {"hops": np.int64(2), "alpha": np.float32(0.25)}
        assert torch.equal(sharded_diffusion_attention(q, k, v, plan, **numpy_scalars, key_padding_mask=pad), expected)
        for kwargs, error, match in (
            ({"hops": -1}, ValueError, r"^hops must be >= 0, got -1"),
            ({"hops": 2.5}, TypeError, r"^hops must be an int, got float 2.5"),
            ({"alpha": 5.0}, ValueError, r"^alpha must be a float in \[0, 1\], got 5.0"),
            ({"alpha": float("nan")}, ValueError, r"^alpha must be a float in \[0, 1\], got nan"),
            ({"alpha": "0.1"}, TypeError, r"^alpha must be a float in \[0, 1\], got str '0.1'"),
            ({"key_padding_mask": pad[:-1]}, ValueError, r"^key_padding_mask must have shape \(local rows,\) = \(48"),
            ({"key_padding_mask": pad.double()}, TypeError, r"^key_padding_mask must be a bool torch.Tensor"),
        ):
            with pytest.raises(error, match=match):
                sharded_diffusion_attention(q, k, v, plan, **kwargs)
        with pytest.raises(TypeError, match=r"^q must be float32 or float64, got torch.int64"):
            sharded_diffusion_attention(q.long(), k.long(), v.long(), plan)
        with pytest.raises(TypeError, match=r"^q, k and v must have one dtype"):
            sharded_diffusion_attention(q, k.float(), v, plan)
        with pytest.raises(TypeError, match=r"^q must be a torch.Tensor, got ndarray"):
            sharded_diffusion_attention(q.numpy(), k, v, plan)
        with pytest.raises(ValueError, match=r"^q, k and v must hold this rank's 48 rows with one shape"):
            sharded_diffusion_attention(q[None], k[None], v[None], plan)
    finally:
        dist.destroy_process_group()

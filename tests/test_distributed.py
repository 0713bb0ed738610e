"""DistFeature over torch.distributed (gloo on loopback), partitions, autograd and failures.

Spawned runs cost a torch import per process, so each spawned worker runs a whole battery of
checks; a failed check raises in the child and ``mp.spawn`` re-raises it here with its traceback.
"""

import datetime
import time

import numpy as np
import pytest

from gglspeedup import CSRGraph
from gglspeedup.distributed import hash_partition, range_partition

from conftest import free_port, init_gloo

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
mp = pytest.importorskip("torch.multiprocessing")

NUM_NODES = 37


def _global_table(dtype=np.float32, row_shape=(3,)):
    rng = np.random.default_rng(7)
    return (rng.standard_normal((NUM_NODES, *row_shape)) * 100).astype(dtype)


def _ring_graph():
    src = np.arange(NUM_NODES)
    dst = (src * 5 + 1) % NUM_NODES
    extra = np.stack([np.zeros(NUM_NODES - 1, np.int64), np.arange(1, NUM_NODES)])  # node 0: hub
    edge_index = np.concatenate([np.stack([src, dst]), extra[::-1]], axis=1)
    return CSRGraph.from_edge_index(edge_index, num_nodes=NUM_NODES)


# ---------------------------------------------------------------------- partitions (no processes)
@pytest.mark.parametrize("num_nodes, world_size", [(10, 3), (9, 3), (2, 4), (0, 2), (5, 1)])
def test_range_partition_is_contiguous_and_balanced(num_nodes, world_size):
    part = range_partition(num_nodes, world_size)
    assert part.dtype == np.int64 and part.shape == (num_nodes,)
    assert np.all(np.diff(part) >= 0)
    counts = np.bincount(part, minlength=world_size)
    assert counts.max() - counts.min() <= 1 and counts.sum() == num_nodes


def test_hash_partition_is_deterministic_balanced_and_seeded():
    part = hash_partition(30_000, 3, seed=1)
    assert np.array_equal(part, hash_partition(30_000, 3, seed=1))
    assert not np.array_equal(part, hash_partition(30_000, 3, seed=2))
    counts = np.bincount(part, minlength=3)
    assert counts.min() > 9_500 and counts.max() < 10_500  # 10k expected, sd ~82
    assert part.min() >= 0 and part.max() < 3


@pytest.mark.parametrize(
    "args, error", [((5, 0), ValueError), ((-1, 2), ValueError), ((5.0, 2), TypeError), ((5, True), TypeError)]
)
def test_partition_helpers_reject_bad_arguments(args, error):
    with pytest.raises(error):
        range_partition(*args)
    with pytest.raises(error):
        hash_partition(*args)


def test_hash_partition_refuses_a_seed_outside_0_to_2_64_by_name():
    # the seed was taken modulo 2**64: -1 gave seed 2**64 - 1's owners, 2**64 + 5 seed 5's
    assert np.array_equal(hash_partition(100, 3, seed=2**64 - 1), hash_partition(100, 3, seed=np.uint64(2**64 - 1)))
    for seed in (-1, 2**64, 2**64 + 5):
        with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*64\)"):
            hash_partition(100, 3, seed=seed)
    with pytest.raises(TypeError, match="seed"):
        hash_partition(100, 3, seed=1.0)


def test_dist_feature_needs_an_initialised_process_group():
    from gglspeedup.distributed import DistFeature

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistFeature(np.zeros((2, 1), np.float32), range_partition(2, 1))


# ---------------------------------------------------------------------- one rank, in process
@pytest.fixture
def world_of_one():
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    init_gloo(0, 1, free_port(), 60)
    yield
    dist.destroy_process_group()


def test_dist_feature_single_rank_validates_before_any_exchange(world_of_one):
    from gglspeedup.distributed import DistFeature

    x = _global_table()
    part = range_partition(NUM_NODES, 1)
    feat = DistFeature(x, part)
    assert feat.shape == (NUM_NODES, 3) and len(feat) == NUM_NODES
    ids = np.array([5, 5, 0, 36, 2])
    np.testing.assert_array_equal(feat[ids].numpy(), x[ids])
    assert feat[[]].shape == (0, 3)
    with pytest.raises(IndexError, match=r"ids\[1\] = 37"):
        feat[[0, NUM_NODES]]
    with pytest.raises(IndexError, match="-1"):
        feat[[-1]]
    with pytest.raises(TypeError, match="integers"):
        feat[np.array([1.0])]
    with pytest.raises(ValueError, match="1-D"):
        feat[np.zeros((2, 2), np.int64)]
    with pytest.raises(ValueError, match="partition values"):
        DistFeature(x, np.full(NUM_NODES, 1))
    with pytest.raises(ValueError, match="one row per node"):
        DistFeature(x[:-1], part)
    with pytest.raises(TypeError, match="partition must be an integer"):
        DistFeature(x, part.astype(np.float64))
    with pytest.raises(ValueError, match="graph="):
        DistFeature(x, part, cache_size="1K")
    with pytest.raises(ValueError, match="learnable"):
        DistFeature(torch.nn.Parameter(torch.from_numpy(x)), part, cache_size="1K", graph=_ring_graph())
    with pytest.raises(TypeError, match="cache_policy must hold integers"):  # was truncated to [1, 2]
        DistFeature(x, part, cache_size="1K", cache_policy=np.array([1.7, 2.2]))
    with pytest.raises(TypeError, match="cache_policy must hold integers, got dtype bool"):
        DistFeature(x, part, cache_size="1K", cache_policy=np.array([True, False]))
    out = torch.empty((2, 3), dtype=torch.float32)
    assert feat.gather([4, 1], out=out) is out and out.numpy().tolist() == x[[4, 1]].tolist()
    with pytest.raises(TypeError, match=r"dtype torch\.float32, got torch\.int64"):  # copy_ truncated the rows
        feat.gather([4, 1], out=torch.empty((2, 3), dtype=torch.int64))
    with pytest.raises(TypeError, match=r"out must be a torch\.Tensor"):
        feat.gather([4, 1], out=np.empty((2, 3), np.float32))


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.uint32, np.uint64, ">f4", ">i8", np.bool_, np.complex64])
def test_dist_feature_rows_of_every_dtype_equal_the_global_gather(world_of_one, dtype):
    # gloo refuses int16 and unsigned 16/32/64-bit tensors: every lookup raised "a peer rank died";
    # big-endian rows raised torch's own byte-order ValueError at construction
    from gglspeedup.distributed import DistFeature

    values = np.random.default_rng(3).integers(0, 2**15, (NUM_NODES, 2, 3))
    x = values.astype(dtype)
    feat = DistFeature(x, range_partition(NUM_NODES, 1))
    for ids in (np.array([5, 5, 0, 36, 2]), np.array([], np.int64), np.arange(NUM_NODES)[::-1]):
        rows = feat[ids].numpy()
        assert rows.dtype == np.dtype(dtype).newbyteorder("=") and rows.shape == (len(ids), 2, 3)
        np.testing.assert_array_equal(rows, x[ids])


def test_dist_feature_refuses_a_0d_array_of_local_rows_by_its_shape(world_of_one):
    from gglspeedup.distributed import DistFeature

    with pytest.raises(ValueError, match=r"local_rows must have at least 1 dimension.*got shape \(\)"):
        DistFeature(np.array(1.0), range_partition(1, 1))  # was made 1-D: "got 1 rows" for one owned node


# ---------------------------------------------------------------------- spawned ranks
def _check_lookups(rank, world_size, port):
    from gglspeedup.distributed import DistFeature

    init_gloo(rank, world_size, port, 30)
    try:
        rng = np.random.default_rng(100 + rank)
        for part in (range_partition(NUM_NODES, world_size), hash_partition(NUM_NODES, world_size, seed=3)):
            for x in (_global_table(np.float32, (3,)), _global_table(np.int64, (2, 2)), _global_table(np.int16)):
                feat = DistFeature(x[part == rank], part)
                remote = np.flatnonzero(part != rank)
                cases = {
                    "random": rng.integers(0, NUM_NODES, 50),
                    "repeated": np.array([4, 4, 4, 11, 4, 0, 0]),
                    "empty": np.array([], dtype=np.int64),
                    "all-remote": rng.permutation(remote)[: 9 + rank],
                    "rank-sized": np.arange(rank * 3),  # uneven sizes, rank 0 asks for nothing
                }
                for name, ids in cases.items():
                    rows = feat[torch.from_numpy(ids)]
                    assert rows.dtype == torch.from_numpy(x).dtype, name
                    np.testing.assert_array_equal(rows.numpy(), x[ids], err_msg=name)
        # remote-row cache: the hottest remote rows (hub 0, then degree order) served locally.
        part = range_partition(NUM_NODES, world_size)
        x = _global_table()
        graph = _ring_graph()
        feat = DistFeature(x[part == rank], part, cache_size=4 * 3 * 4, graph=graph)
        assert feat.stats()["cached_rows"] == 4
        ids = rng.integers(0, NUM_NODES, 64)
        np.testing.assert_array_equal(feat[ids].numpy(), x[ids])
        hits = feat.stats()["cache_hits"]
        assert feat[np.array([0, 0])].numpy().tolist() == x[[0, 0]].tolist()  # a collective: every rank
        assert feat.stats()["cache_hits"] - hits == (0 if rank == 0 else 2)  # rank 0 owns the hub
        wide = _global_table(np.float64).view(np.uint64)  # every bit pattern, exchanged and cached as bytes
        feat = DistFeature(wide[part == rank], part, cache_size=4 * 3 * 8, graph=graph)
        np.testing.assert_array_equal(feat[ids].numpy(), wide[ids])
        assert feat.stats()["cache_hits"] > 0 or rank == 0
        # learnable rows: gradients reach the owners and equal the single-process reference.
        part = hash_partition(NUM_NODES, world_size, seed=11)
        table = torch.from_numpy(_global_table(np.float64))
        weight = torch.nn.Parameter(table[torch.from_numpy(part == rank)].clone())
        feat = DistFeature(weight, part)
        reference = table.clone().requires_grad_(True)
        reference_loss = 0
        for r in range(world_size):  # every rank's batch, as one process would see them all
            ids_r = torch.from_numpy(np.random.default_rng(500 + r).integers(0, NUM_NODES, 20 + 5 * r))
            coef_r = torch.from_numpy(np.random.default_rng(900 + r).standard_normal((len(ids_r), 3)))
            reference_loss = reference_loss + ((reference[ids_r] ** 2) * coef_r).sum()
            if r == rank:
                my_ids, my_coef = ids_r, coef_r
        rows = feat[my_ids]
        assert rows.requires_grad
        torch.testing.assert_close(rows.detach(), table[my_ids], rtol=0, atol=0)
        ((rows**2) * my_coef).sum().backward()
        reference_loss.backward()
        expected = reference.grad[torch.from_numpy(part == rank)]
        torch.testing.assert_close(weight.grad, expected, rtol=1e-12, atol=1e-12)
        assert float(weight.grad.abs().sum()) > 0
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [3])
def test_dist_feature_matches_global_gather_and_autograd_reference(world_size):
    mp.spawn(_check_lookups, args=(world_size, free_port()), nprocs=world_size, join=True)


def _raise_on_rank_one(rank, world_size, port):
    from gglspeedup.distributed import DistFeature

    init_gloo(rank, world_size, port, 30)
    part = range_partition(NUM_NODES, world_size)
    x = _global_table()
    feat = DistFeature(x[part == rank], part)
    if rank == 1:
        raise ValueError("rank 1 gives up on purpose")
    try:
        feat[np.arange(NUM_NODES)]
        feat[np.arange(NUM_NODES)]
    except RuntimeError as error:
        if "a peer rank died" not in str(error):
            raise
        # rank 0 saw its peer go: it waits to be terminated, so that the run's one failure is rank
        # 1's own. mp.spawn names whichever failed exit it sees first; raising here raced rank 1's
        # error, and returning did too (gloo's loop thread, still holding the broken pair, aborts
        # the exiting process with SIGABRT).
        time.sleep(30)


def test_a_rank_that_raises_makes_the_run_fail_naming_it():
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException, match=r"(?s)Process 1 terminated.*rank 1 gives up on purpose"):
        mp.spawn(_raise_on_rank_one, args=(2, free_port()), nprocs=2, join=True)
    assert time.monotonic() - start < 60


def _absent_rank_one(rank, world_size, port):
    from gglspeedup.distributed import DistFeature

    init_gloo(rank, world_size, port, 60)  # generous rendezvous; the lookup's group is short
    group = dist.new_group(list(range(world_size)), timeout=datetime.timedelta(seconds=4))
    part = range_partition(NUM_NODES, world_size)
    feat = DistFeature(_global_table()[part == rank], part, group=group)
    if rank == 1:
        time.sleep(120)  # never joins the lookup; the harness kills it once rank 0 fails
        return
    started = time.monotonic()
    try:
        feat[np.arange(NUM_NODES)]
    except RuntimeError as error:
        elapsed = time.monotonic() - started
        raise RuntimeError(f"rank 0 failed after {elapsed:.1f} s: {error}") from None
    raise AssertionError("rank 0's lookup returned although rank 1 never joined it")


def test_a_rank_that_never_arrives_fails_the_others_within_the_group_timeout():
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException, match=r"(?s)Process 0 terminated.*DistFeature on rank 0 of 2"):
        mp.spawn(_absent_rank_one, args=(2, free_port()), nprocs=2, join=True)
    assert time.monotonic() - start < 90


def _outside_the_group(rank, world_size, port):
    from gglspeedup.distributed import DistFeature

    init_gloo(rank, world_size, port, 30)
    try:
        group = dist.new_group([0, 2])  # every rank makes the group; rank 1 is not in it
        part = range_partition(NUM_NODES, 2)
        x = _global_table()
        if rank == 1:  # torch's rank and size outside a group are -1: "ranks in [0, world_size = -1)"
            with pytest.raises(ValueError, match=r"this process \(rank 1\) is not in group"):
                DistFeature(x[:0], part, group=group)
        else:
            feat = DistFeature(x[part == dist.get_rank(group)], part, group=group)
            ids = np.arange(NUM_NODES)[::-1]
            np.testing.assert_array_equal(feat[ids].numpy(), x[ids])
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_a_process_outside_the_group_is_refused_by_name():
    mp.spawn(_outside_the_group, args=(3, free_port()), nprocs=3, join=True)

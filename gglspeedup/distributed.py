"""Node features partitioned across processes or machines, gathered over ``torch.distributed``.

Every rank keeps the rows of the nodes it owns (``partition[v] == rank``) and the full graph
topology; ``dist_feature[ids]`` returns rows equal to the global ``x[ids]`` by exchanging ids and
rows with ``all_to_all_single`` (gloo on CPU, NCCL on GPU; uneven splits are fine). Gathers are
autograd-aware, so ``local_rows`` may be a learnable ``torch.nn.Parameter`` (node embeddings):
gradients of the gathered rows travel back to the owning ranks and accumulate there.

Every lookup (and every backward through one) is a collective: all ranks of the group must call
it the same number of times, in the same order, each with its own ids (possibly none). A rank that
dies, raises or never arrives makes the others fail with a ``RuntimeError`` naming this library's
exchange after the process group's timeout (``init_process_group(..., timeout=...)``) instead of
hanging; set a short timeout when a quick failure matters.

>>> import torch.distributed as dist                                  # doctest: +SKIP
>>> dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))  # doctest: +SKIP
>>> part = range_partition(x.shape[0], dist.get_world_size())         # doctest: +SKIP
>>> feat = DistFeature(x[part == dist.get_rank()], part)              # doctest: +SKIP
>>> rows = feat[n_id]                                                 # doctest: +SKIP
"""

from __future__ import annotations

import functools
import zlib

import numpy as np

from ._splitmix import GAMMA, mix64
from .device import parse_size, to_numpy
from .validation import check_int, int_array

__all__ = ["DistFeature", "range_partition", "hash_partition"]


def _check_partition_args(num_nodes, world_size) -> tuple[int, int]:
    return check_int("num_nodes", num_nodes, minimum=0), check_int("world_size", world_size, minimum=1)


def range_partition(num_nodes: int, world_size: int) -> np.ndarray:
    """Contiguous blocks: rank ``r`` owns one block of consecutive ids (sizes differ by <= 1).

    Returns
    -------
    partition : int64 array, shape (num_nodes,)
        ``partition[v]`` is the owning rank, non-decreasing in ``v``.

    >>> range_partition(5, 2).tolist()
    [0, 0, 0, 1, 1]
    """
    num_nodes, world_size = _check_partition_args(num_nodes, world_size)
    sizes = np.full(world_size, num_nodes // world_size, dtype=np.int64)
    sizes[: num_nodes % world_size] += 1
    return np.repeat(np.arange(world_size, dtype=np.int64), sizes)


def hash_partition(num_nodes: int, world_size: int, seed: int = 0) -> np.ndarray:
    """Owner by a SplitMix64 hash of ``(v, seed)``: balanced in expectation, no locality.
    ``seed`` is an int in ``[0, 2**64)``, as the samplers' (``ValueError`` outside it).

    Returns
    -------
    partition : int64 array, shape (num_nodes,)
        ``partition[v] = splitmix64(v + seed * 0x9E3779B97F4A7C15) % world_size``.
    """
    num_nodes, world_size = _check_partition_args(num_nodes, world_size)
    seed = check_int("seed", seed, minimum=0, below=2**64)  # as the samplers': never wrapped
    with np.errstate(over="ignore"):
        z = mix64(np.arange(num_nodes, dtype=np.uint64) + np.uint64(seed) * GAMMA)
    return (z % np.uint64(world_size)).astype(np.int64)


def _bytes(rows):
    """``rows`` as bytes, a row each: exact for every dtype (gloo refuses int16 and uint16-64, index_put uint16-64)."""
    import torch

    return rows.contiguous().reshape(len(rows), int(np.prod(rows.shape[1:]))).view(torch.uint8)


class _Plan:
    """Who sends what to whom for one lookup (kept by autograd for the reverse exchange)."""

    __slots__ = ("order", "recv_index", "recv_splits", "send_splits")

    def __init__(self, order, send_splits, recv_splits, recv_index):
        self.order = order  # positions of the (miss) ids, sorted by owner
        self.send_splits = send_splits  # ids this rank asks of each rank
        self.recv_splits = recv_splits  # ids each rank asks of this rank
        self.recv_index = recv_index  # local row numbers this rank serves, by asking rank


@functools.cache
def _gather_function():
    import torch

    class _DistGather(torch.autograd.Function):
        """Rows of ``local_rows`` asked for by every rank; backward sends gradients back home."""

        @staticmethod
        def forward(ctx, local_rows, feature, plan):
            ctx.feature, ctx.plan, ctx.shape = feature, plan, local_rows.shape
            return feature._exchange_rows(local_rows.detach(), plan)

        @staticmethod
        def backward(ctx, grad):
            feature, plan = ctx.feature, ctx.plan
            send = grad.contiguous()[plan.order] if len(plan.order) else grad[:0]
            received = feature._all_to_all(
                send, output_splits=plan.recv_splits, input_splits=plan.send_splits, what="gradient rows"
            )
            grad_local = torch.zeros(ctx.shape, dtype=grad.dtype, device=grad.device)
            grad_local.index_add_(0, plan.recv_index, received)  # repeated ids sum
            return grad_local, None, None

    return _DistGather


class DistFeature:
    """Rows of a node feature table partitioned across the ranks of a process group.

    Parameters
    ----------
    local_rows : torch.Tensor or array, shape (num_local, *row_shape)
        The rows of the nodes this rank owns, in ascending global id order. A tensor that
        requires grad (e.g. a ``torch.nn.Parameter``) makes lookups differentiable. Exchanges
        run on its device (CPU tensors for gloo, CUDA tensors for NCCL).
    partition : int array, shape (num_nodes,)
        ``partition[v]`` is the rank owning node ``v``; identical on every rank (checked).
        See :func:`range_partition` and :func:`hash_partition`.
    group : torch.distributed.ProcessGroup, optional
        The group to exchange over (default: the world). Ranks below are ranks in this group.
    cache_size : int or str, optional
        Byte budget (``"64M"``) for a local copy of the hottest *remote* rows, fetched once at
        construction; lookups serve them locally and exchange only the rest. Needs a graph
        (hot = highest degree) or ``cache_policy`` (an order array, hottest first). Not allowed
        with learnable rows (a copy would go stale).
    cache_policy : int array, optional
        Node ids, hottest first, for the cache.
    graph : CSRGraph, optional
        The (replicated) topology; degree order picks the cached rows.

    Notes
    -----
    Construction is a collective (it checks that every rank agrees on the partition, row shape
    and dtype, and fills the cache). Each lookup is one count exchange, one id exchange and one
    row exchange; each backward is one more row exchange.

    Typed: dicts ``{node_type: local_rows}`` (``None``: no features) and ``{node_type: partition}``
    give a :class:`~gglspeedup.feature.HeteroFeatureSource` over one ``DistFeature`` per type,
    ``feat[{type: ids}] -> {type: rows}``; each lookup runs every type's exchange in sorted type
    order (ranks may ask for different types). ``cache_size`` is one budget for every type's
    remote rows (``cache_policy``: typed orders, else degree per byte over a ``HeteroGraph``).
    """

    collective = True  # lookups are collectives: loaders keep them on one producer thread (workers=1)

    def __new__(cls, local_rows=None, *args, **kwargs):
        if isinstance(local_rows, dict):
            return _typed_dist_feature(cls, local_rows, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, local_rows, partition, group=None, *, cache_size=0, cache_policy=None, graph=None):
        import torch
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("DistFeature needs torch.distributed initialised: call init_process_group first")
        self.group, self.rank, self.world_size = group, dist.get_rank(group), dist.get_world_size(group)
        if self.rank < 0:  # torch's rank and size outside the group: -1 ("ranks in [0, world_size = -1)")
            raise ValueError(f"this process (rank {dist.get_rank()}) is not in group: only the group's ranks hold rows")
        if not isinstance(local_rows, torch.Tensor):  # in native byte order, all torch holds; 0-d stays 0-d
            array = np.asarray(to_numpy(local_rows), order="C")
            local_rows = torch.from_numpy(array.astype(array.dtype.newbyteorder("="), copy=False))
        if local_rows.ndim < 1:
            raise ValueError(
                f"local_rows must have at least 1 dimension (rows first), got shape {tuple(local_rows.shape)}"
            )
        self.local_rows = local_rows
        self.device = local_rows.device
        self.partition = self._check_partition(partition)
        owned = np.flatnonzero(self.partition == self.rank)
        if len(owned) != local_rows.shape[0]:
            raise ValueError(
                f"local_rows must hold one row per node owned by rank {self.rank} "
                f"({len(owned)} nodes with partition == {self.rank}), got {local_rows.shape[0]} rows"
            )
        self._check_agreement()
        # local_index[v]: row of v in its owner's local_rows (owners list rows in ascending id order).
        order = np.argsort(self.partition, kind="stable")
        starts = np.concatenate(([0], np.cumsum(np.bincount(self.partition, minlength=self.world_size))))
        local_index = np.empty(self.num_nodes, dtype=np.int64)
        local_index[order] = np.arange(self.num_nodes, dtype=np.int64) - starts[self.partition[order]]
        self._owner = torch.from_numpy(self.partition).to(self.device)
        self._local_index = torch.from_numpy(local_index).to(self.device)
        self._cache_slot = self._cache_rows = None
        self._lookups = self._cached_lookups = 0
        self._build_cache(cache_size, cache_policy, graph)

    # ------------------------------------------------------------------ construction helpers
    def _check_partition(self, partition) -> np.ndarray:
        partition = int_array("partition", partition, expected="must be an integer array (rank per node)")
        bad = (partition < 0) | (partition >= self.world_size)
        if bad.any():
            position = int(np.argmax(bad))
            raise ValueError(
                f"partition values must be ranks in [0, world_size = {self.world_size}): "
                f"partition[{position}] = {partition[position]}"
            )
        return partition

    def _check_agreement(self) -> None:
        import torch
        import torch.distributed as dist

        rows = self.local_rows
        weights = np.arange(1, self.num_nodes + 1, dtype=np.uint64) % np.uint64(1_000_003)
        with np.errstate(over="ignore"):
            checksum = int((self.partition.astype(np.uint64) * weights).sum() % np.uint64(2**61 - 1))
        dtype_code = sum(ord(c) << (8 * i) for i, c in enumerate(str(rows.dtype)[-7:]))
        row_shape = list(rows.shape[1:])[:4] + [0] * (4 - min(4, rows.ndim - 1))
        mine = torch.tensor([self.num_nodes, checksum, dtype_code, rows.ndim, *row_shape], dtype=torch.int64)
        mine = mine.to(self.device)
        everyone = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(everyone, mine, group=self.group)
        everyone = torch.stack([t.cpu() for t in everyone])
        for column, what in (
            (0, "partition length"),
            (1, "partition contents"),
            (2, "local_rows dtype"),
            (3, "local_rows ndim"),
            (slice(4, 8), "local_rows row shape"),
        ):
            values = everyone[:, column]
            if not bool((values == values[0]).all()):
                raise ValueError(
                    f"ranks disagree on {what}: every rank must pass the same partition and rows of the "
                    f"same shape and dtype (rank {self.rank} of {self.world_size} sees {everyone.tolist()})"
                )

    def _build_cache(self, cache_size, cache_policy, graph) -> None:
        import torch

        budget = parse_size(cache_size, "cache_size")
        if budget == 0:
            return
        if self.local_rows.requires_grad:
            raise ValueError("cache_size must be 0 for learnable local_rows (cached copies would go stale)")
        if cache_policy is not None:
            order = int_array("cache_policy", cache_policy)  # float ids were truncated by astype
            if order.size and (order.min() < 0 or order.max() >= self.num_nodes):
                raise ValueError(f"cache_policy must be 1-D node ids in [0, {self.num_nodes})")
        elif graph is not None:
            if graph.num_nodes != self.num_nodes:
                raise ValueError(f"graph has {graph.num_nodes} nodes, partition has {self.num_nodes}")
            order = np.argsort(-graph.degree(), kind="stable")
        else:
            raise ValueError("cache_size > 0 needs graph= (degree order) or cache_policy= (an order array)")
        row_bytes = max(1, self.local_rows[:1].element_size() * int(np.prod(self.local_rows.shape[1:])))
        remote = order[self.partition[order] != self.rank]
        _, first = np.unique(remote, return_index=True)
        hot = remote[np.sort(first)][: budget // row_bytes]
        rows = self._gather(torch.from_numpy(hot).to(self.device), use_cache=False)  # collective
        slot = np.full(self.num_nodes, -1, dtype=np.int64)
        slot[hot] = np.arange(len(hot), dtype=np.int64)
        self._cache_slot = torch.from_numpy(slot).to(self.device)
        self._cache_rows = rows

    # ------------------------------------------------------------------ properties
    @property
    def num_nodes(self) -> int:
        return len(self.partition)

    @property
    def shape(self) -> tuple:
        return (self.num_nodes, *self.local_rows.shape[1:])

    @property
    def dtype(self):
        return self.local_rows.dtype

    def __len__(self) -> int:
        return self.num_nodes

    def __repr__(self) -> str:
        cached = 0 if self._cache_rows is None else len(self._cache_rows)
        return (
            f"DistFeature(rank={self.rank}, world_size={self.world_size}, shape={self.shape}, "
            f"dtype={self.dtype}, local_rows={self.local_rows.shape[0]}, cached_remote_rows={cached})"
        )

    def stats(self) -> dict:
        """Lookups so far and how many ids the remote-row cache served."""
        return {
            "lookups": self._lookups,
            "cache_hits": self._cached_lookups,
            "cached_rows": 0 if self._cache_rows is None else len(self._cache_rows),
        }

    # ------------------------------------------------------------------ lookup
    def __getitem__(self, ids):
        """Rows equal to the global ``x[ids]``: a tensor of shape ``(len(ids), *row_shape)``."""
        return self._gather(self._check_ids(ids), use_cache=True)

    def gather(self, ids, out=None):
        """``self[ids]``, copied into the tensor ``out`` (shape ``(len(ids), *row_shape)``) when
        given (the :class:`gglspeedup.protocols.FeatureSource` interface). A collective, like
        every lookup. With ``out``, gradients do not flow back to learnable rows."""
        import torch

        rows = self[ids]  # the collective first: a bad out on one rank must not leave the others waiting
        if out is None:
            return rows
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor on {self.device}, got {type(out).__name__}")
        if tuple(out.shape) != tuple(rows.shape):
            raise ValueError(f"out must have shape {tuple(rows.shape)}, got {tuple(out.shape)}")
        if out.dtype != rows.dtype:  # copy_ would cast silently (float rows truncated into an int buffer)
            raise TypeError(f"out must have the rows' dtype {rows.dtype}, got {out.dtype}")
        out.copy_(rows.detach())
        return out

    def _check_ids(self, ids):
        import torch

        if not isinstance(ids, torch.Tensor):
            ids = torch.from_numpy(int_array("ids", ids, beyond=IndexError))
        elif ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TypeError(f"ids must be integers, got dtype {ids.dtype}")
        if ids.ndim != 1:
            raise ValueError(f"ids must be 1-D, got shape {tuple(ids.shape)}")
        ids = ids.to(device=self.device, dtype=torch.int64)
        if len(ids) and (bool((ids < 0).any()) or bool((ids >= self.num_nodes).any())):  # sync
            bad = (ids < 0) | (ids >= self.num_nodes)
            position = int(bad.nonzero()[0, 0])
            raise IndexError(f"ids[{position}] = {int(ids[position])} is out of range [0, {self.num_nodes})")
        return ids

    def _gather(self, ids, use_cache: bool):
        import torch

        self._lookups += len(ids)
        hit = None
        if use_cache and self._cache_slot is not None:
            slot = self._cache_slot[ids]
            hit = slot >= 0
            self._cached_lookups += int(hit.sum())  # sync
            miss_ids = ids[~hit]
        else:
            miss_ids = ids
        plan = self._plan(miss_ids)
        if self.local_rows.requires_grad and torch.is_grad_enabled():
            fetched = _gather_function().apply(self.local_rows, self, plan)
        else:
            fetched = self._exchange_rows(self.local_rows.detach(), plan)
        if hit is None:
            return fetched
        out = torch.empty((len(ids), *self.local_rows.shape[1:]), dtype=self.dtype, device=self.device)
        _bytes(out)[hit] = _bytes(self._cache_rows[slot[hit]])
        _bytes(out)[~hit] = _bytes(fetched)
        return out

    def _plan(self, ids) -> _Plan:
        import torch

        owner = self._owner[ids]
        order = torch.argsort(owner, stable=True)
        send_counts = torch.bincount(owner, minlength=self.world_size)
        recv_counts = self._all_to_all(send_counts, output_rows=self.world_size, what="id counts")
        send_splits = send_counts.tolist()  # sync
        recv_splits = recv_counts.tolist()  # sync
        asked = self._local_index[ids[order]]
        recv_index = self._all_to_all(asked, output_splits=recv_splits, input_splits=send_splits, what="ids")
        return _Plan(order, send_splits, recv_splits, recv_index)

    def _exchange_rows(self, local_rows, plan: _Plan):
        import torch

        served = local_rows[plan.recv_index]
        rows = self._all_to_all(served, output_splits=plan.send_splits, input_splits=plan.recv_splits, what="rows")
        out = torch.empty_like(rows)
        _bytes(out)[plan.order] = _bytes(rows)
        return out

    def _all_to_all(self, tensor, output_rows=None, output_splits=None, input_splits=None, what="data"):
        """``tensor``'s rows (``input_splits`` to each rank) exchanged for ``output_rows`` rows
        (default: ``sum(output_splits)``) from the ranks, naming ``what`` if a peer fails."""
        import torch
        import torch.distributed as dist

        if output_rows is None:
            output_rows = int(sum(output_splits))
        tensor = tensor.contiguous()
        output = torch.empty((output_rows, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
        try:
            dist.all_to_all_single(_bytes(output), _bytes(tensor), output_splits, input_splits, group=self.group)
        except RuntimeError as error:
            raise RuntimeError(
                f"DistFeature on rank {self.rank} of {self.world_size}: exchanging {what} failed; a peer "
                "rank died, raised, or did not join this lookup within the process group's timeout "
                f"({type(error).__name__}: {error})"
            ) from error
        return output


def _typed_dist_feature(cls, local_rows: dict, partition, group=None, *, cache_size=0, cache_policy=None, graph=None):
    """One ``cls`` per node type with rows, behind a collective :class:`HeteroFeatureSource`."""
    import torch
    import torch.distributed as dist

    from .feature.hetero import HeteroFeatureSource

    if not isinstance(partition, dict):
        raise TypeError(f"typed local_rows (a dict) need partition as a dict node type -> partition, got {partition!r}")
    featured = sorted(t for t, rows in local_rows.items() if rows is not None)
    if any(t not in partition for t in featured):
        raise ValueError(f"partition must have an entry for every node type with rows: {featured}")
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("DistFeature needs torch.distributed initialised: call init_process_group first")
    names = torch.tensor([zlib.crc32("\0".join(featured).encode())], dtype=torch.int64)
    everyone = [torch.empty_like(names) for _ in range(dist.get_world_size(group))]
    dist.all_gather(everyone, names, group=group)  # every rank must build (and later ask) the same types
    if any(int(t) != int(names) for t in everyone):
        raise ValueError(f"ranks disagree on the node types with rows; this rank has {featured}")
    plan, budget = {t: (None, 0) for t in featured}, parse_size(cache_size, "cache_size")
    if budget:
        plan = _typed_cache(local_rows, partition, featured, dist.get_rank(group), budget, cache_policy, graph)
    sources = dict.fromkeys(local_rows)
    for t in featured:
        sources[t] = cls(local_rows[t], partition[t], group, cache_size=plan[t][1], cache_policy=plan[t][0])
    return HeteroFeatureSource(sources, collective=True)


def _typed_cache(local_rows, partition, featured, rank, budget, cache_policy, graph) -> dict:
    """Node type -> (remote ids to cache, their bytes or 1): one budget split over the rows this
    rank does not own. Every type gets at least 1 byte, so every rank joins every type's cache
    exchange (a collective), with no rows where the split gave it none."""
    from .feature.hetero_policies import plan_cache

    if cache_policy is None and graph is None:
        raise ValueError("cache_size > 0 needs graph= (degree order) or cache_policy= (typed orders)")
    owner = {t: int_array(f"partition[{t!r}]", partition[t]) for t in featured}
    row_bytes = {}  # as DistFeature counts them, from dtype and shape (a rank may own no rows of a type)
    for t in featured:
        rows = local_rows[t]
        size = rows.element_size() if hasattr(rows, "element_size") else np.dtype(rows.dtype).itemsize
        row_bytes[t] = max(1, size * int(np.prod(rows.shape[1:])))
    skip = {t: o == rank for t, o in owner.items()}
    cached = plan_cache(cache_policy, graph, {t: len(o) for t, o in owner.items()}, row_bytes, budget, skip=skip)
    return {t: (ids, max(1, len(ids) * row_bytes[t])) for t, ids in cached.items()}

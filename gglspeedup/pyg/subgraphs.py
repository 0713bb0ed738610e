"""PyG's sampler options applied to a sampled batch: subgraph types, direction, weighted negatives.

- ``subgraph_type="bidirectional"``: PyG's own ``SamplerOutput.to_bidirectional`` (every sampled
  edge with its reverse among the sampled nodes; ``num_sampled_*`` become ``None``, as PyG's);
- ``subgraph_type="induced"`` (PyG's ``directed=False``): every edge of the graph between two
  sampled nodes, target by target in ``n_id`` order (``num_sampled_edges`` ``None``);
- ``sample_direction="backward"``: the sampler ran over the transposed graph, so each edge's
  ends swap back (and a typed relation gets its own name back);
- ``NegativeSampling`` with ``src_weight`` / ``dst_weight``: negatives drawn from those weights
  with a generator keyed by the sampler's seed and the batch key, then sampled as extra pairs.
"""

from __future__ import annotations

import numpy as np
import torch

from ..device import to_numpy
from .graphs import NO_EDGES, forward_name

__all__ = ["SUBGRAPH_TYPES", "finish_output", "induced_edges", "weighted_negatives"]

SUBGRAPH_TYPES = ("directional", "bidirectional", "induced")


def finish_output(sampler, out):
    """``out`` (a ``SamplerOutput`` / ``HeteroSamplerOutput`` of ``sampler``'s batch) with the
    sampler's ``subgraph_type`` and direction applied and placeholder relations left out."""
    typed = isinstance(out.row, dict)
    if typed:
        _drop_placeholders(out)
    if sampler.zero_hops:  # num_neighbors=[]: the one empty hop drawn is not reported
        if typed:
            out.num_sampled_nodes = {t: counts[:1] for t, counts in out.num_sampled_nodes.items()}
            out.num_sampled_edges = {et: [] for et in out.num_sampled_edges}
        else:
            out.num_sampled_nodes, out.num_sampled_edges = out.num_sampled_nodes[:1], []
    if sampler.subgraph_type == "induced":
        _induce(sampler.sampler.graph, out, typed)
    if sampler.backward:
        _swap_back(out, typed)
    if sampler.subgraph_type == "bidirectional":
        metadata = out.metadata
        out = out.to_bidirectional()
        out.metadata = metadata
    return out


def _drop_placeholders(out) -> None:
    for edge_type in [et for et in out.row if et[1] == NO_EDGES]:
        for field in (out.row, out.col, out.edge, out.num_sampled_edges):
            if field is not None:
                field.pop(edge_type, None)


def _swap_back(out, typed: bool) -> None:
    if not typed:
        out.row, out.col = out.col, out.row
        return
    renamed = {}
    for field in ("row", "col", "edge", "num_sampled_edges"):
        values = getattr(out, field)
        if values is not None:
            renamed[field] = {forward_name(et): value for et, value in values.items()}
    renamed["row"], renamed["col"] = renamed["col"], renamed["row"]
    for field, values in renamed.items():
        setattr(out, field, values)


def induced_edges(graph, n_src, n_dst):
    """``(row, col, e_id)`` int64: every edge of the CSRGraph ``graph`` (rows targets) from a node
    of ``n_src`` to a node of ``n_dst``, as positions (first occurrence) in those id arrays, target
    by target in ``n_dst`` order, a target's edges in row order."""
    indptr, indices = to_numpy(graph.indptr), to_numpy(graph.indices)
    n_src, n_dst = to_numpy(n_src).astype(np.int64), to_numpy(n_dst).astype(np.int64)
    _, first_dst = np.unique(n_dst, return_index=True)
    targets = np.sort(first_dst)  # each distinct target once, at its first position
    starts, counts = indptr[n_dst[targets]], np.diff(indptr)[n_dst[targets]]
    total = int(counts.sum())
    col = np.repeat(targets, counts)
    offsets = np.repeat(np.cumsum(counts) - counts, counts)
    positions = np.repeat(starts, counts) + np.arange(total, dtype=np.int64) - offsets
    sources = indices[positions].astype(np.int64)
    values, first_src = np.unique(n_src, return_index=True)
    where = np.searchsorted(values, sources)
    where = np.minimum(where, max(len(values) - 1, 0))
    keep = values[where] == sources if len(values) else np.zeros(total, bool)
    e_id = positions if graph.edge_ids is None else to_numpy(graph.edge_ids)[positions]
    return first_src[where[keep]].astype(np.int64), col[keep].astype(np.int64), np.asarray(e_id[keep], np.int64)


def _induce(graph, out, typed: bool) -> None:
    device = out.node.device if not typed else next(iter(out.node.values())).device
    if not typed:
        row, col, e_id = induced_edges(graph, out.node.cpu(), out.node.cpu())
        out.row, out.col, out.edge = (torch.from_numpy(a).to(device) for a in (row, col, e_id))
        out.num_sampled_edges = None
        return
    empty = torch.empty(0, dtype=torch.long)
    for edge_type in graph.edge_types:
        if edge_type[1] == NO_EDGES:
            continue
        src, _, dst = edge_type
        if src not in out.node or dst not in out.node:
            out.row[edge_type] = out.col[edge_type] = out.edge[edge_type] = empty.to(device)
            continue
        arrays = induced_edges(graph[edge_type], out.node[src].cpu(), out.node[dst].cpu())
        out.row[edge_type], out.col[edge_type], out.edge[edge_type] = (torch.from_numpy(a).to(device) for a in arrays)
    out.num_sampled_edges = None


def weighted_negatives(sampler, inner, pairs, neg, mode: str, per_pair: int, num_neg: int, options: dict):
    """Sample a link batch whose negatives come from ``neg.src_weight`` / ``neg.dst_weight``:
    returns ``(link output with pair_index cut to the pairs PyG returns, negative_targets)``."""
    if options.get("pair_time") is not None:
        raise NotImplementedError("NegativeSampling src_weight / dst_weight with temporal link batches")
    key = options["key"]
    edge_type = options.get("edge_type")
    num_nodes = inner.num_nodes
    if edge_type is None:
        num_src = num_dst = int(num_nodes)
    else:
        num_src, num_dst = int(num_nodes[edge_type[0]]), int(num_nodes[edge_type[2]])
    generator = np.random.default_rng([int(inner.seed), int(key) & 0xFFFFFFFFFFFFFFFF, 0x9E6])
    src_p = _probabilities(neg.src_weight, num_src, "src_weight")
    dst_p = _probabilities(neg.dst_weight, num_dst, "dst_weight")
    positives = to_numpy(pairs).astype(np.int64)
    count = positives.shape[1]
    if mode == "binary":
        extra_src = generator.choice(num_src, size=num_neg, p=src_p)
        extra_dst = generator.choice(num_dst, size=num_neg, p=dst_p)
    else:
        extra_src = np.repeat(positives[0], per_pair)
        extra_dst = generator.choice(num_dst, size=count * per_pair, p=dst_p)
    if mode == "triplet" and inner.disjoint:
        return _disjoint_triplets(inner, positives, extra_dst.reshape(count, per_pair), options)
    every = np.concatenate([positives, np.stack([extra_src, extra_dst]).astype(np.int64)], axis=1)
    out = inner.sample_links(every, negatives=None, **options)
    if mode == "binary":
        return out, None
    pair_index = out.pair_index
    negative_targets = pair_index[1, count:].reshape(count, per_pair)
    return out._replace(pair_index=pair_index[:, :count]), negative_targets


def _disjoint_triplets(inner, positives, negatives, options: dict):
    """A disjoint triplet batch with given negatives (``(B, amount)``): one tree per source, target
    and negative, in PyG's order (sources, targets, then the negatives draw by draw)."""
    from ..sampling.types import HeteroLinkSampleOutput, LinkSampleOutput

    if options.get("exclude") is not None:
        raise NotImplementedError("exclude with weighted triplet negatives in disjoint mode")
    count, amount = negatives.shape
    targets = np.concatenate([positives[1], negatives.T.reshape(-1)])
    local = np.arange(count, dtype=np.int64)
    edge_type = options.get("edge_type")
    if edge_type is None or edge_type[0] == edge_type[2]:
        seeds = np.concatenate([positives[0], targets])
        pair_index = np.stack([local, count + local])
        negative_targets = 2 * count + np.arange(count * amount, dtype=np.int64).reshape(amount, count).T
    else:
        seeds = {edge_type[0]: positives[0], edge_type[2]: targets}
        pair_index = np.stack([local, local])
        negative_targets = count + np.arange(count * amount, dtype=np.int64).reshape(amount, count).T
    labels = np.ones(count, np.float32)
    if edge_type is None:
        out = inner.sample(seeds, key=options["key"])
        return LinkSampleOutput(out.n_id, out.adjs, pair_index, labels, batch=out.batch), negative_targets
    if not isinstance(seeds, dict):
        seeds = {edge_type[0]: seeds}
    out = inner.sample(seeds, key=options["key"])
    typed = HeteroLinkSampleOutput(
        out.n_id, out.adjs, out.num_sampled_nodes, out.num_sampled_edges, edge_type, pair_index, labels, batch=out.batch
    )
    return typed, negative_targets


def _probabilities(weight, count: int, name: str):
    if weight is None:
        return None
    weight = to_numpy(weight).astype(np.float64, copy=False)
    if weight.ndim != 1 or len(weight) != count:
        raise ValueError(f"NegativeSampling {name} must have one entry per node ({count}), got shape {weight.shape}")
    if not np.isfinite(weight).all() or (weight < 0).any() or weight.sum() <= 0:
        raise ValueError(f"NegativeSampling {name} must be finite, non-negative and not all zero")
    return weight / weight.sum()

"""gglspeedup's sampler records as PyG's ``SamplerOutput`` / ``HeteroSamplerOutput``.

PyG's records list one subgraph, hop by hop **seed hop first**: ``node`` the sampled nodes' global
ids (seeds first), ``row`` / ``col`` local positions in ``node`` of each edge's source (the sampled
neighbour) and target, ``edge`` the edges' ids, ``num_sampled_nodes`` (the seeds, then the nodes
new at each hop) and ``num_sampled_edges`` (per hop). gglspeedup's ``adjs`` list hops outermost
first, each ``Adj(edge_index, e_id, size)`` with ``edge_index[0]`` the source and
``edge_index[1]`` the target, both positions in ``n_id``: so the conversion reverses the hops and
concatenates them, and the counts come from each hop's ``size``. Arrays reach torch zero-copy
(:func:`gglspeedup.backends.to`); only the edges are copied, into ``row`` / ``col`` / ``edge``
over every hop (see :func:`hop_edges`).

>>> import numpy as np
>>> import gglspeedup as gg
>>> graph = gg.CSRGraph.from_edge_index([[1, 2, 3, 0], [0, 0, 1, 2]], num_nodes=4)
>>> out = sampler_output(gg.NeighborSampler(graph, [2, 1]).sample([0], key=0))
>>> out.node.tolist(), out.num_sampled_nodes, out.num_sampled_edges
([0, 1, 2, 3], [1, 2, 1], [2, 3])
>>> (out.node[out.row] != out.node[out.col]).all().item()  # every edge: neighbour -> target
True
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput

from .. import backends
from ..device import array_module

__all__ = ["sampler_output", "hetero_sampler_output", "hop_edges", "to_torch", "pair_batch", "link_metadata"]


def to_torch(obj):
    """``obj`` (arrays, tuples, dicts of them) as torch tensors sharing their memory."""
    return backends.map_arrays(obj, _torch_leaf)


def _torch_leaf(array):
    # torch.from_numpy is the short way for writeable host arrays of torch's dtypes (a few us per
    # batch less than DLPack); everything else (CuPy, read-only, bfloat16) goes through backends.to.
    if type(array) is np.ndarray and array.flags.writeable and array.dtype.kind in "biuf":
        try:
            return torch.from_numpy(array)
        except TypeError:
            pass
    return backends.to("torch", array)


def hop_edges(adjs: list):
    """``(row, col, e_id)`` of ``adjs`` (outermost hop first) concatenated seed hop first, as
    arrays of the sampler's module. Over several hops ``row`` and ``col`` are the two rows of one
    ``(2, E)`` buffer written by a single concatenation (PyG stacks them in every filter; two rows
    of one buffer stack as fast as two arrays, 52 against 66 us for 87k edges with torch 2.13); a
    single hop's rows are copied (E int64 each) so that the record never holds the sampler's
    output itself."""
    hops = adjs[::-1]
    if not hops:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    xp = array_module(hops[0].edge_index)
    if len(hops) == 1:
        edge_index = hops[0].edge_index
        return xp.array(edge_index[0]), xp.array(edge_index[1]), hops[0].e_id
    edge_index = xp.concatenate([adj.edge_index for adj in hops], axis=1)
    return edge_index[0], edge_index[1], xp.concatenate([adj.e_id for adj in hops])


def sampler_output(out, metadata=None) -> SamplerOutput:
    """A :class:`~gglspeedup.SampleOutput` (or the neighbourhood of a
    :class:`~gglspeedup.LinkSampleOutput`) as PyG's ``SamplerOutput``.

    ``node`` is ``n_id``; ``row`` / ``col`` / ``edge`` the hops' ``edge_index[0]`` /
    ``edge_index[1]`` / ``e_id`` seed hop first; ``num_sampled_nodes`` has ``len(adjs) + 1``
    entries (the seeds, then ``size[0] - size[1]`` of each hop) and ``num_sampled_edges`` one per
    hop; ``batch`` is the output's (disjoint sampling: each node's tree), else ``None``.
    """
    adjs = list(out.adjs)
    hops = adjs[::-1]
    seeds = int(hops[0].size[1]) if hops else int(out.n_id.shape[0])
    node, *edges = to_torch((out.n_id, *hop_edges(adjs)))
    num_sampled_nodes = [seeds] + [int(adj.size[0]) - int(adj.size[1]) for adj in hops]
    num_sampled_edges = [int(adj.e_id.shape[0]) for adj in hops]
    return _record(
        SamplerOutput, node, edges, getattr(out, "batch", None), num_sampled_nodes, num_sampled_edges, metadata
    )


def hetero_sampler_output(out, metadata=None) -> HeteroSamplerOutput:
    """A :class:`~gglspeedup.HeteroSampleOutput` (or a typed link batch's neighbourhood) as PyG's
    ``HeteroSamplerOutput``: per node type ``node``, per edge type ``row`` / ``col`` / ``edge``
    (hops concatenated seed hop first), and the counts as gglspeedup already keeps them (PyG's
    convention: ``num_sampled_nodes[t]`` the seeds then the new nodes per hop, ``num_sampled_edges``
    per hop seed hop first)."""
    node = to_torch(dict(out.n_id))
    row, col, edge = {}, {}, {}
    edge_types = list(out.num_sampled_edges)
    for edge_type in edge_types:
        row[edge_type], col[edge_type], edge[edge_type] = to_torch(hop_edges([layer[edge_type] for layer in out.adjs]))
    batch = getattr(out, "batch", None)
    batch = None if batch is None else dict(batch)
    num_sampled_nodes = {t: list(counts) for t, counts in out.num_sampled_nodes.items()}
    num_sampled_edges = {et: list(counts) for et, counts in out.num_sampled_edges.items()}
    return _record(HeteroSamplerOutput, node, (row, col, edge), batch, num_sampled_nodes, num_sampled_edges, metadata)


def _record(kind, node, edges, batch, num_sampled_nodes, num_sampled_edges, metadata):
    """PyG's ``kind`` (``SamplerOutput`` / ``HeteroSamplerOutput``) of torch ``node`` and
    ``edges`` (``row``, ``col``, ``edge``), the sampler's ``batch`` (or ``None``) and the counts."""
    row, col, edge = edges
    return kind(
        node=node,
        row=row,
        col=col,
        edge=edge,
        batch=None if batch is None else to_torch(batch),
        num_sampled_nodes=num_sampled_nodes,
        num_sampled_edges=num_sampled_edges,
        metadata=metadata,
    )


def link_metadata(
    input_id, pair_index, negative_targets, num_pairs: int, edge_label, triplet: bool, time=None
) -> tuple:
    """PyG's link ``metadata``: ``(input_id, edge_label_index, edge_label, edge_label_time)`` for
    binary / no negatives, ``(input_id, src_index, dst_pos_index, dst_neg_index, seed_time)`` for
    triplets; ``pair_index`` (local pair positions) is cut to the ``num_pairs`` PyG returns;
    ``time`` the pairs' times (``None`` without)."""
    pair_index = to_torch(pair_index)
    if not triplet:
        return (input_id, pair_index[:, :num_pairs], edge_label, time)
    count = int(pair_index.shape[1])
    negatives = to_torch(negative_targets)
    width = negatives.shape[-1] if negatives.dim() == 2 else 1  # no pairs: reshape cannot infer it
    dst_neg_index = negatives.reshape(count, -1 if count else width).squeeze(-1)
    return (input_id, pair_index[0], pair_index[1], dst_neg_index, time)


def pair_batch(out, edge_type, num_pos: int, graph):
    """PyG's ``batch`` of a disjoint link batch: each node's tree as PyG numbers the trees (the seeds
    of the source type, then of the target type, each in order), modulo ``num_pos`` (PyG's
    ``batch % num_pos``: the pair, for the positives and triplet negatives)."""
    modulus = max(num_pos, 1)
    if edge_type is None:
        return to_torch(out.batch) % modulus
    src_type, _, dst_type = edge_type
    seeds = {t: c[0] for t, c in out.num_sampled_nodes.items()}
    ours, first = {}, 0
    for t in graph.node_types:  # gglspeedup numbers trees over the node types in the graph's order
        ours[t] = first
        first += seeds.get(t, 0)
    pyg_first = {src_type: 0} if src_type == dst_type else {src_type: 0, dst_type: seeds.get(src_type, 0)}
    renumber = torch.empty(first, dtype=torch.int64)
    for t, start in pyg_first.items():
        renumber[ours[t] : ours[t] + seeds.get(t, 0)] = torch.arange(start, start + seeds.get(t, 0))
    out_batch = {}
    for t, b in out.batch.items():
        b = to_torch(b)
        out_batch[t] = renumber.to(b.device)[b] % modulus
    return out_batch


def binary_labels(edge_label, num_pos: int, num_neg: int):
    """PyG's labels for binary negatives: the given labels (ones when none), then ``num_neg`` zeros."""
    if edge_label is None:
        edge_label = torch.ones(num_pos)
    size = (num_neg, *tuple(edge_label.size()[1:]))
    return torch.cat([edge_label, edge_label.new_zeros(size)])

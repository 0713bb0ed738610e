"""``NeighborSampler.sample_links``: pairs in, negatives drawn, neighbourhoods without leakage.

See DESIGN.md, "Link prediction". The steps, each on the sampler's device through its driver:

1. check ``pairs`` (2, B), ``labels`` and the options, before any kernel (:mod:`.link_checks`);
2. draw the negatives (:mod:`._kernels.links`: keyed by ``(seed, key, pair position, draw)``);
3. the seeds: the distinct endpoints of the returned pairs (sources, then targets, then triplet
   negatives), in order of first appearance, and every pair's local positions;
4. the excluded edges: every parallel edge ``source -> target`` of a positive pair (and
   ``target -> source`` with ``exclude="reverse"``), as sorted CSR positions in the driver's
   :class:`~._kernels.records.SampleOptions` for this one call, with a small hashed table of the
   rows that hold them (so every other row skips the search);
5. the neighbourhood of the seeds, exactly as :meth:`NeighborSampler.sample` samples it except
   that rows never draw an excluded edge.

:func:`link_batch` takes these steps for the untyped and the typed sampler alike; its hooks
(:class:`UntypedLinks`, :class:`.hetero_links.TypedLinks`) hold what differs between them.
"""

from __future__ import annotations

import numpy as np

from ._kernels.exclusion import row_filter
from .link_checks import check_link_call
from .temporal import tree_times
from .types import LinkSampleOutput, hop_adjs

__all__ = [
    "link_batch",
    "UntypedLinks",
    "first_or_all",
    "first_appearance",
    "link_labels",
    "draw_link_negatives",
    "link_negative_targets",
    "exclusion_options",
    "finish_links",
]


def first_appearance(xp, sequence):
    """``(distinct values in order of first appearance, position of each element among them)``."""
    if sequence.size == 0:
        return sequence, sequence
    values, first, inverse = xp.unique(sequence, return_index=True, return_inverse=True)
    order = xp.argsort(first)
    rank = xp.empty_like(order)
    rank[order] = xp.arange(len(order), dtype=order.dtype)
    return values[order], rank[inverse.reshape(-1)].astype(np.int64)


def link_batch(
    call,
    driver,
    next_key,
    pairs,
    labels,
    negatives,
    num_negatives,
    strict_negatives,
    exclude,
    key,
    pair_time=None,
    check=True,
    total_negatives=None,
):
    """The steps every link call takes (module notes), in order, with ``call`` supplying what
    differs between the untyped and the typed sampler (:class:`UntypedLinks`,
    :class:`~.hetero_links.TypedLinks`): the sampler's public pieces (device, fanouts, the call's
    options record), the pairs' bounds, the pair times' checks, the seeds per node type, the
    excluded rows and the output record. ``driver`` is the sampler's driver
    (:class:`~.drivers.Driver` or :class:`~.drivers.TypedDriver`); ``next_key(key)`` checks
    ``key`` (or draws the sampler's next one) once the arguments are checked, so a refused call
    leaves the sampler's key counter alone. ``total_negatives``: binary negatives drawn in all,
    in place of ``num_negatives * B`` (``sample_links``)."""
    device = call.device
    checked = (labels, negatives, num_negatives, strict_negatives, exclude, check, total_negatives)
    pairs, labels, negatives, num_negatives, strict, exclude, total = check_link_call(
        device, pairs, call.bounds, call.names, *checked
    )
    count = int(pairs.shape[1])
    times = call.check_times(pairs, pair_time, exclude)
    key = next_key(key)
    xp, disjoint = device.xp, call.disjoint
    with device:
        pairs = xp.asarray(pairs)  # host pairs for a GPU sampler: one upload
        times = None if times is None else xp.asarray(times)
        eligible_of = None
        if times is not None:
            eligible_of = lambda negative_pair: call.negative_times(xp, times[negative_pair])  # noqa: E731
        src, dst, extra, stayed, pair_of = draw_link_negatives(
            driver, xp, pairs, negatives, num_negatives, strict, key, disjoint, eligible_of, call.space, total
        )
        num_pairs = int(src.shape[0])
        targets = dst if extra is None else xp.concatenate((dst, extra))
        seeds, local_src, local_dst = call.seeds(xp, src, targets)
        pair_index = xp.stack((local_src, local_dst[:num_pairs]))
        negative_targets = link_negative_targets(
            None if extra is None else local_dst[num_pairs:], count, num_negatives, disjoint
        )
        options = call.options
        if exclude is not None and count:
            options = exclusion_options(driver, xp, options, *call.excluded(xp, pairs, exclude == "reverse"))
        if disjoint and call.temporal:  # (times only come with a timeline: check_times refuses others)
            # every tree the time of its pair: sources, then targets and triplet negatives
            returned = pair_of[:num_pairs]
            target_pairs = returned if extra is None else xp.concatenate((returned, pair_of[num_pairs:]))
            options = options._replace(seed_time=call.tree_time(xp, seeds, times, returned, target_pairs))
        drawn = driver.sample(seeds, call.fanouts, key, options)
        out_labels, false_negatives = finish_links(xp, labels, count, num_pairs, extra, strict, stayed)
    return call.output(seeds, drawn, pair_index, out_labels, negative_targets, false_negatives)


def first_or_all(xp, sequence, disjoint: bool):
    """Seeds of one node type from its link endpoints ``sequence``: every endpoint a tree of its
    own (``disjoint``), else the distinct ones in order of first appearance; with each
    endpoint's local position."""
    if disjoint:
        return sequence, xp.arange(sequence.shape[0], dtype=np.int64)
    return first_appearance(xp, sequence)


class UntypedLinks:
    """:func:`link_batch`'s hooks for :meth:`NeighborSampler.sample_links`, built from the
    sampler's public pieces: its ``device``, ``num_nodes``, ``timeline`` (``None`` without
    times), ``disjoint``, ``fanouts`` and the call's ``options`` record (its hop rule and disjoint
    stride; the link batch adds its exclusions and trees' times)."""

    space = None

    def __init__(self, device, num_nodes: int, timeline, disjoint: bool, fanouts, options):
        self.device, self.timeline, self.disjoint = device, timeline, disjoint
        self.fanouts, self.options = fanouts, options
        self.temporal = timeline is not None
        self.bounds, self.names = (num_nodes, num_nodes), ("num_nodes", "num_nodes")

    def check_times(self, pairs, pair_time, exclude):
        """The pairs' times, checked (None without ``pair_time``): node-time trees take their own
        seed's time, as PyG; edge times need them."""
        timeline = self.timeline
        times = tree_times(timeline, pairs[0], pair_time, self.device, "pair_time") if pair_time is not None else None
        # (without a timeline, tree_times has refused pair_time already)
        if pair_time is None and timeline is not None and timeline.edge_level:
            raise ValueError("pair_time is required: an edge-time sampler filters each tree by its pair's time")
        return times

    def negative_times(self, xp, pair_times):
        return self.timeline.negative_times(xp, pair_times, self.bounds)

    def seeds(self, xp, src, targets):
        seeds, local = first_or_all(xp, xp.concatenate((src, targets)), self.disjoint)
        return seeds, local[: src.shape[0]], local[src.shape[0] :]

    def excluded(self, xp, pairs, reverse: bool):
        """``(sources, rows)`` of the excluded edges ``sources[i] -> rows[i]``."""
        if not reverse:
            return pairs[0], pairs[1]
        return xp.concatenate((pairs[0], pairs[1])), xp.concatenate((pairs[1], pairs[0]))

    def tree_time(self, xp, seeds, times, source_pairs, target_pairs):
        if times is None:
            return tree_times(self.timeline, seeds, None, self.device)
        return times[xp.concatenate((source_pairs, target_pairs))]

    def output(self, seeds, drawn, pair_index, labels, negative_targets, false_negatives) -> LinkSampleOutput:
        n_id, hops, batch = drawn
        return LinkSampleOutput(n_id, hop_adjs(hops), pair_index, labels, negative_targets, false_negatives, batch)


# ---------------------------------------------------------------------------- the shared steps
# link_batch's steps, for both samplers; what differs (the pairs' bounds, the seeds per node type,
# the excluded rows, the run) is in UntypedLinks (here) and hetero_links.TypedLinks.


def draw_link_negatives(
    driver, xp, pairs, negatives, num_negatives, strict, key, disjoint, eligible_of=None, space=None, total=None
):
    """Step 2, the negatives of the checked ``pairs`` (2, B) on the sampler's module ``xp``.

    Returns ``(src, dst, extra, stayed, pair_of)``: the returned pairs' sources and targets (the
    positives, then ``"binary"`` / ``"per_source"`` negatives), the triplet negatives' targets
    (``extra``, ``None`` for other modes), the driver's strict-mode flags, and for every returned
    pair and triplet negative the position of its positive pair. ``eligible_of(negative_pair)``
    gives the driver's ``eligible`` (temporal calls); ``space`` the typed driver's sampling space;
    ``total`` the binary negatives' count when not ``num_negatives * B`` (the draws are keyed by
    position, so a smaller count draws a prefix of the same negatives).
    """
    src, dst = pairs[0], pairs[1]
    count = int(pairs.shape[1])
    extra, stayed, pair_of = None, None, xp.arange(count, dtype=np.int64)
    if negatives is not None and count:
        fixed = negatives != "binary"
        if total is None:
            total = num_negatives * count
        negative_pair = xp.arange(total, dtype=np.int64)
        negative_pair = negative_pair // num_negatives if fixed else negative_pair % count  # binary: PyG's
        eligible = None if eligible_of is None else eligible_of(negative_pair)
        neg_src, neg_dst, stayed = driver.negatives(
            src,
            total,
            fixed=fixed,
            width=num_negatives if fixed else 1,
            strict=strict,
            key=key,
            space=space,
            eligible=eligible,
        )
        if negatives == "triplet":
            extra = neg_dst
            if disjoint:  # trees of the negatives draw by draw (PyG's order: 2B + s * B + i)
                draw_major = xp.arange(total, dtype=np.int64).reshape(count, num_negatives).T.reshape(-1)
                extra, negative_pair = extra[draw_major], negative_pair[draw_major]
        else:
            src, dst = xp.concatenate((src, neg_src)), xp.concatenate((dst, neg_dst))
        pair_of = xp.concatenate((pair_of, negative_pair))  # each returned pair's (or negative's) positive
    elif negatives == "triplet":  # no pairs: a (0, num_negatives) matrix all the same
        extra = xp.empty(0, np.int64)
    return src, dst, extra, stayed, pair_of


def link_negative_targets(local, count: int, num_negatives: int, disjoint: bool):
    """``negative_targets`` (B, num_negatives) from the triplet negatives' local positions
    ``local`` (``None`` without triplets): negative ``s`` of pair ``i`` (disjoint: the tree
    ``2B + s * B + i``)."""
    if local is None:
        return None
    targets = local.reshape(count, num_negatives)
    if disjoint:
        targets = targets.reshape(-1).reshape(num_negatives, count).T
    return targets


def exclusion_options(driver, xp, options, sources, rows):
    """``options`` (the call's record) with every edge ``sources[i] -> rows[i]`` (all parallel
    copies) excluded, or ``options`` itself when the graph holds none; the rows holding them are
    flagged so the others skip the search."""
    positions = driver.excluded_positions(sources, rows)
    if not positions.shape[0]:
        return options
    return options._replace(excluded=positions, excluded_rows=row_filter(xp, rows))


def finish_links(xp, labels, count: int, num_pairs: int, extra, strict: bool, stayed):
    """``(labels, false_negatives)`` of the output: the positives' labels then zeros for the
    returned negatives; with ``strict`` the number of negatives that stayed graph edges."""
    out_labels = link_labels(xp, labels, count, num_pairs - count if extra is None else 0)
    if not strict:
        return out_labels, None
    if stayed is None:
        return out_labels, 0
    from .._launch import to_host

    return out_labels, int(to_host(stayed.sum()))  # sync


def link_labels(xp, labels, positives: int, negatives: int):
    if labels is None:
        out = xp.zeros(positives + negatives, dtype=np.float32)
        out[:positives] = 1
        return out
    labels = xp.asarray(labels)
    if negatives == 0:
        return labels
    return xp.concatenate((labels, xp.zeros(negatives, dtype=labels.dtype)))

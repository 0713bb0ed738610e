"""The maximum flow inside one set of one (graph, head) fused-lasso problem, one body for the CPU
and for CUDA (see :mod:`.fused_lasso` for the problem and the scratch arrays).

Supplies and demands are ``work.exc`` (positive / negative) on the set's nodes (positions
``[a, b)`` of ``work.order``, label ``a`` in ``work.seg``); every undirected edge carries a flow
in ``[-lam, lam]`` (``work.flow``, positive from its smaller endpoint). :func:`max_flow` routes as
much supply to demand as the capacities allow, keeping the flows it is given (a warm start).
Arcs with residual ``<= tol_cap`` count as saturated and excesses ``<= tol_push`` as zero.
"""

from __future__ import annotations

from numba.extending import register_jitable

__all__ = ["max_flow"]


@register_jitable
def _relabel_all(a, b, n0, h, graph, lam, work, tol_cap, tol_push):
    """Exact labels inside the set at ``[a, b)``: residual distances to the nearest demand (a
    breadth-first search back from every demand; ``b - a`` where none is reachable). Resets the
    current arcs and fills the queue of active nodes (excess, a demand reachable), farthest first.
    Returns their number."""
    adj_ptr, adj_nbr, adj_eid, adj_dir = graph.adj_ptr, graph.adj_nbr, graph.adj_eid, graph.adj_dir
    order, seg, level, cursor, queue = work.order, work.seg, work.level, work.cursor, work.queue
    ring, queued, exc, flow = work.ring, work.queued, work.exc, work.flow
    m = b - a
    tail = 0
    for k in range(a, b):
        i = order[h, k]
        cursor[h, i] = adj_ptr[i]
        queued[h, i] = 0
        if exc[h, i] < -tol_push:
            level[h, i] = 0
            queue[h, n0 + tail] = i
            tail += 1
        else:
            level[h, i] = m
    head = 0
    while head < tail:
        x = queue[h, n0 + head]
        head += 1
        next_level = level[h, x] + 1
        for q in range(adj_ptr[x], adj_ptr[x + 1]):
            j = adj_nbr[q]
            if seg[h, j] == a and level[h, j] == m and lam + adj_dir[q] * flow[h, adj_eid[q]] > tol_cap:
                level[h, j] = next_level  # residual capacity j -> x
                queue[h, n0 + tail] = j
                tail += 1
    count = 0
    for t in range(tail - 1, -1, -1):
        i = queue[h, n0 + t]
        if exc[h, i] > tol_push:
            ring[h, n0 + count] = i
            queued[h, i] = 1
            count += 1
    return count


@register_jitable
def max_flow(a, b, n0, h, graph, lam, work, tol_cap, tol_push):
    """A maximum flow inside the set at ``[a, b)`` (label ``a``) from supplies in ``work.exc``
    (positive) to demands (negative): FIFO push-relabel with exact relabelling (a breadth-first
    search back from the demands) at the start and after every ``b - a`` local relabels. Excess
    travels down the labels node by node, so a supply spread thinly over a large set, or one
    large supply feeding many small demands, drains without one search per path. It ends when no
    node with excess can reach a demand (its label reaches ``b - a``)."""
    adj_ptr, adj_nbr, adj_eid, adj_dir = graph.adj_ptr, graph.adj_nbr, graph.adj_eid, graph.adj_dir
    seg, level, cursor = work.seg, work.level, work.cursor
    ring, queued, exc, flow = work.ring, work.queued, work.exc, work.flow
    m = b - a
    while True:
        count = _relabel_all(a, b, n0, h, graph, lam, work, tol_cap, tol_push)
        if count == 0:
            return
        head = 0
        relabels = 0
        while count > 0 and relabels < m:
            u = ring[h, n0 + head]
            head = head + 1 if head + 1 < m else 0
            count -= 1
            queued[h, u] = 0
            end = adj_ptr[u + 1]
            while exc[h, u] > tol_push and level[h, u] < m:
                q = cursor[h, u]
                if q == end:  # no admissible arc left: relabel
                    lowest = m
                    for r in range(adj_ptr[u], end):
                        j = adj_nbr[r]
                        if seg[h, j] == a and lam - adj_dir[r] * flow[h, adj_eid[r]] > tol_cap:
                            lowest = min(lowest, level[h, j] + 1)
                    level[h, u] = lowest
                    cursor[h, u] = adj_ptr[u]
                    relabels += 1
                    continue
                j = adj_nbr[q]
                if seg[h, j] == a and level[h, j] == level[h, u] - 1:
                    e = adj_eid[q]
                    room = lam - adj_dir[q] * flow[h, e]
                    if room > tol_cap:
                        delta = min(exc[h, u], room)
                        flow[h, e] += adj_dir[q] * delta
                        exc[h, u] -= delta
                        exc[h, j] += delta
                        if exc[h, j] > tol_push and queued[h, j] == 0:
                            tail = head + count
                            ring[h, n0 + (tail if tail < m else tail - m)] = j
                            queued[h, j] = 1
                            count += 1
                        if exc[h, u] <= tol_push:
                            break
                cursor[h, u] += 1
            if exc[h, u] > tol_push and level[h, u] < m and queued[h, u] == 0:
                tail = head + count  # interrupted by the relabel budget: keep it queued
                ring[h, n0 + (tail if tail < m else tail - m)] = u
                queued[h, u] = 1
                count += 1
        if count == 0:
            return

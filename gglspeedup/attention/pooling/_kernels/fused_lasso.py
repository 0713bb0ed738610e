"""The exact graph fused lasso of one (graph, head) problem, one body for the CPU and for CUDA.

Problem, on the undirected edges ``E`` of one graph::

    f = argmin_f 1/2 ||f - s||^2 + lam * sum_{(i, j) in E} |f_i - f_j|

Optimality (KKT): there are edge flows ``x_ij = -x_ji`` in ``[-lam, lam]``, equal to ``+lam`` where
``f_i > f_j``, with ``s_i - f_i = sum_j x_ij`` at every node. On a *fused group* ``G`` (connected,
one value) the flows on its boundary are fixed at ``+-lam``, so its value is closed-form::

    f_G = (sum_{i in G} s_i - lam * sum_{i in G} bnd_i) / |G|

where ``bnd_i`` counts node ``i``'s boundary edges, +1 towards a lower group and -1 towards a
higher one. What remains is finding the groups and proving the flows inside them exist.

Algorithm: the decomposition (divide-and-conquer) method for separable problems with a
total-variation penalty (Fujishige; Hochbaum 2001; Bach 2013, sec. 9.1). A set ``G`` with current
value ``alpha = f_G`` gives each member the supply ``b_i = s_i - lam * bnd_i - alpha`` (summing to
zero); a maximum flow inside ``G`` on arcs of capacity ``lam`` routes supplies to demands.

- If every supply is routed, the flow **is** the optimality certificate of ``G`` (dual
  feasibility): ``G`` is final.
- Otherwise the nodes still reachable from unrouted supply form a minimum cut ``S``: every edge
  leaving it is saturated at ``+lam``, and ``S`` must lie above ``alpha``. ``S`` and ``G \\ S``
  are solved again, the cut edges turned into boundary edges (``bnd += 1`` on the ``S`` side,
  ``-= 1`` on the other). The flows inside both halves are kept (warm start).

The maximum flow is a FIFO push-relabel (exact labels from a breadth-first search back from the
demands, redone after every ``|G|`` local relabels), iterative so that it compiles for CUDA; it
beats augmenting paths here because a split leaves a supply spread thinly over the whole set (or
one supply feeding many small demands), which push-relabel drains node by node instead of one
search per path. The minimum cut is then checked to hold no demand (the flow is maximum).
Afterwards final sets are split into their connected components (a disconnected set with one
value is several groups: they move apart under a perturbation), adjacent groups whose values agree within the
tolerance are merged (a tie at the boundary means the edge fuses: its flow lies inside
``[-lam, lam]``), every group gets its closed-form value, and the boundary edges are checked
against the values (the upper side of each cut must not lie below the lower side). A failed
check is retried once with a looser split threshold; if that fails too the status says so and the
host raises.

Floating point enters only through thresholds scaled by ``sc = max|s| + min(lam, 2 sum|s|) *
maxdeg``: arcs with residual ``<= 1e-15 sc`` count as saturated, supplies ``<= 1e-14 sc`` are not
pushed, and a cut splits a set only when it improves the objective's dual by more than
``1e-13 sc (n + 100)``. The remaining supplies are the KKT residual ``r``: the returned values are
the *exact* solution for scores ``s - r`` and, the prox being 1-Lipschitz, lie within ``||r||_2``
of the exact solution for ``s``. ``residual`` reports ``sum |r|`` (zero in exact arithmetic).

The backward follows from the certified structure alone: inside a group ``df_G / ds_i = 1/|G|``
and ``df_G / dlam = -sum_G bnd / |G|``. No output value is ever compared for equality.

Arrays are head-major (``[heads, num_nodes]``, ``[heads, num_edges]``) so each problem's scratch
is contiguous; one problem touches only its graph's slices, so problems run in parallel.
"""

from __future__ import annotations

from collections import namedtuple

from numba.extending import register_jitable

from .max_flow import max_flow

__all__ = [
    "FusedWork",
    "FUSED_WORK_INT_FIELDS",
    "FUSED_WORK_FLOAT_FIELDS",
    "OK",
    "FAILED_CUT",
    "FAILED_ORDER",
    "FAILED_FLOW",
    "fused_lasso_problem",
    "fused_lasso_vjp_problem",
]

OK = 0
FAILED_CUT = 1  # a cut held every node of its set (only rounding could do that)
FAILED_ORDER = 2  # a boundary edge's upper side came out below its lower side
FAILED_FLOW = 3  # the cut reached a demand: the flow was not maximum (only rounding could do that)

# Scratch of one call, every array [heads, num_nodes] except flow ([heads, num_edges]).
FUSED_WORK_INT_FIELDS = ("level", "cursor", "queued", "ring", "queue", "order", "seg", "mark", "stack_a", "stack_b")
FUSED_WORK_FLOAT_FIELDS = ("flow", "exc", "acc")
FusedWork = namedtuple("FusedWork", FUSED_WORK_INT_FIELDS + FUSED_WORK_FLOAT_FIELDS)


@register_jitable
def _reach(h, n0, tail, a, graph, work, lam, tol_cap, tol_push, cut):
    """Breadth-first search inside set ``a`` (``work.seg``) from the marked nodes
    ``work.queue[h, n0 : n0 + tail]``: marks and queues every node it reaches and returns the new
    ``tail``. With ``cut``, only along edges with residual capacity (``lam - flow > tol_cap``
    outwards), and ``-1`` as soon as it reaches a node with demand (``exc < -tol_push``)."""
    adj_ptr, adj_nbr, adj_eid, adj_dir = graph.adj_ptr, graph.adj_nbr, graph.adj_eid, graph.adj_dir
    seg, mark, queue, exc, flow = work.seg, work.mark, work.queue, work.exc, work.flow
    head = 0
    while head < tail:
        x = queue[h, n0 + head]
        head += 1
        for q in range(adj_ptr[x], adj_ptr[x + 1]):
            j = adj_nbr[q]
            if seg[h, j] == a and mark[h, j] == 0 and (not cut or lam - adj_dir[q] * flow[h, adj_eid[q]] > tol_cap):
                if cut and exc[h, j] < -tol_push:
                    return -1
                mark[h, j] = 1
                queue[h, n0 + tail] = j
                tail += 1
    return tail


@register_jitable
def _decompose(g, h, graph, s, lam, bnd, work, tol_cap, tol_push, tol_split):
    """Split the graph's nodes into certified sets (labels in ``work.seg``, boundary counts in
    ``bnd``, cut edges' flows at ``+-lam``). Returns ``(status, sum of |KKT residual|)``."""
    ptr, adj_ptr, adj_nbr, adj_eid, adj_dir = graph.ptr, graph.adj_ptr, graph.adj_nbr, graph.adj_eid, graph.adj_dir
    order, seg, mark, queue, exc, flow = work.order, work.seg, work.mark, work.queue, work.exc, work.flow
    stack_a, stack_b = work.stack_a, work.stack_b
    n0 = ptr[g]
    n1 = ptr[g + 1]
    for k in range(n0, n1):
        i = graph.order0[k]
        order[h, k] = i
        bnd[h, i] = 0
    for e in range(graph.edge_ptr[g], graph.edge_ptr[g + 1]):
        flow[h, e] = 0.0
    top = 0
    for c in range(graph.graph_comp[g], graph.graph_comp[g + 1]):
        a = graph.comp_ptr[c]
        b = graph.comp_ptr[c + 1]
        for k in range(a, b):
            seg[h, order[h, k]] = a
        stack_a[h, n0 + top] = a
        stack_b[h, n0 + top] = b
        top += 1
    residual = 0.0
    while top > 0:
        top -= 1
        a = stack_a[h, n0 + top]
        b = stack_b[h, n0 + top]
        m = b - a
        if m == 1:
            continue  # one node: its value is exact, nothing to route
        total = 0.0
        count = 0
        for k in range(a, b):
            i = order[h, k]
            total += s[h, i]
            count += bnd[h, i]
        alpha = (total - lam * count) / m
        for k in range(a, b):  # supplies, net of the flows kept from the parent set
            i = order[h, k]
            out = 0.0
            for q in range(adj_ptr[i], adj_ptr[i + 1]):
                if seg[h, adj_nbr[q]] == a:
                    out += adj_dir[q] * flow[h, adj_eid[q]]
            exc[h, i] = s[h, i] - lam * bnd[h, i] - alpha - out
        max_flow(a, b, n0, h, graph, lam, work, tol_cap, tol_push)
        # the nodes reachable from unrouted supply: a minimum cut
        tail = 0
        for k in range(a, b):
            i = order[h, k]
            if exc[h, i] > tol_push:
                mark[h, i] = 1
                queue[h, n0 + tail] = i
                tail += 1
            else:
                mark[h, i] = 0
        tail = _reach(h, n0, tail, a, graph, work, lam, tol_cap, tol_push, True)
        if tail < 0:
            return FAILED_FLOW, residual  # an augmenting path is left
        surplus = 0.0
        for t in range(tail):
            surplus += exc[h, queue[h, n0 + t]]
        if tail == 0 or surplus <= tol_split:
            for k in range(a, b):  # certified: what is left is the KKT residual
                residual += abs(exc[h, order[h, k]])
            continue
        if tail == m:
            return FAILED_CUT, residual
        lo = a  # the cut's side first
        hi = b - 1
        while lo <= hi:
            if mark[h, order[h, lo]] == 1:
                lo += 1
            else:
                i = order[h, lo]
                order[h, lo] = order[h, hi]
                order[h, hi] = i
                hi -= 1
        split = a + tail
        for k in range(a, split):  # cut edges become boundary edges, saturated upwards
            i = order[h, k]
            for q in range(adj_ptr[i], adj_ptr[i + 1]):
                j = adj_nbr[q]
                if seg[h, j] == a and mark[h, j] == 0:
                    bnd[h, i] += 1
                    bnd[h, j] -= 1
                    flow[h, adj_eid[q]] = adj_dir[q] * lam
        for k in range(split, b):
            seg[h, order[h, k]] = split
        stack_a[h, n0 + top] = a
        stack_b[h, n0 + top] = split
        top += 1
        stack_a[h, n0 + top] = split
        stack_b[h, n0 + top] = b
        top += 1
    return OK, residual


@register_jitable
def _group_sums(n0, n1, h, values, bnd, label, work):
    """Per group of nodes ``n0 .. n1`` (by its representative ``label``): the sum of ``values`` in
    ``work.acc``, the size in ``work.level`` and the summed boundary counts in ``work.cursor``."""
    acc, size, count = work.acc, work.level, work.cursor
    for i in range(n0, n1):
        r = label[h, i]
        acc[h, r] = 0.0
        size[h, r] = 0
        count[h, r] = 0
    for i in range(n0, n1):
        r = label[h, i]
        acc[h, r] += values[h, i]
        size[h, r] += 1
        count[h, r] += bnd[h, i]


@register_jitable
def _group_values(n0, n1, h, s, lam, bnd, label, work, out):
    """``out[h, i] = f_G`` in closed form for every node (from :func:`_group_sums` of ``s``)."""
    _group_sums(n0, n1, h, s, bnd, label, work)
    acc, size, count = work.acc, work.level, work.cursor
    for i in range(n0, n1):
        if label[h, i] == i:
            acc[h, i] = (acc[h, i] - lam * count[h, i]) / size[h, i]
    for i in range(n0, n1):
        out[h, i] = acc[h, label[h, i]]


@register_jitable
def _find(parent, h, r):
    while parent[h, r] != r:
        parent[h, r] = parent[h, parent[h, r]]
        r = parent[h, r]
    return r


@register_jitable
def _finish(g, h, graph, s, lam, bnd, label, work, out, tol_merge):
    """Final groups: connected components of the certified sets, ties across boundaries merged,
    closed-form values, and the boundary-order check. Returns a status."""
    ptr, edge_u, edge_v = graph.ptr, graph.edge_u, graph.edge_v
    seg, mark, queue, flow, parent = work.seg, work.mark, work.queue, work.flow, work.stack_a
    n0 = ptr[g]
    n1 = ptr[g + 1]
    e0 = graph.edge_ptr[g]
    e1 = graph.edge_ptr[g + 1]
    for i in range(n0, n1):
        mark[h, i] = 0
    for root in range(n0, n1):  # connected components inside each set, labelled by their first node
        if mark[h, root] != 0:
            continue
        mark[h, root] = 1
        queue[h, n0] = root
        tail = _reach(h, n0, 1, seg[h, root], graph, work, lam, 0.0, 0.0, False)
        for t in range(tail):
            label[h, queue[h, n0 + t]] = root
    _group_values(n0, n1, h, s, lam, bnd, label, work, out)
    for i in range(n0, n1):
        parent[h, i] = i
    merged = False
    for e in range(e0, e1):
        ru = _find(parent, h, label[h, edge_u[e]])
        rv = _find(parent, h, label[h, edge_v[e]])
        if ru != rv and abs(out[h, edge_u[e]] - out[h, edge_v[e]]) <= tol_merge:
            parent[h, max(ru, rv)] = min(ru, rv)
            merged = True
    if merged:
        for i in range(n0, n1):
            label[h, i] = _find(parent, h, label[h, i])
            bnd[h, i] = 0
        for e in range(e0, e1):
            u = edge_u[e]
            v = edge_v[e]
            if label[h, u] != label[h, v]:
                up = 1 if flow[h, e] > 0 else -1
                bnd[h, u] += up
                bnd[h, v] -= up
        _group_values(n0, n1, h, s, lam, bnd, label, work, out)
    for e in range(e0, e1):
        u = edge_u[e]
        v = edge_v[e]
        if label[h, u] != label[h, v]:
            gap = out[h, u] - out[h, v] if flow[h, e] > 0 else out[h, v] - out[h, u]
            if gap < -tol_merge:
                return FAILED_ORDER
    return OK


@register_jitable
def fused_lasso_problem(g, h, graph, s, lam, work, out, label, bnd):
    """Solve graph ``g``, head ``h``: ``out[h, i]`` the fused values, ``label[h, i]`` the group
    (named by its smallest node id), ``bnd[h, i]`` the signed boundary counts. Returns
    ``(status, residual)``."""
    ptr, adj_ptr, adj_nbr = graph.ptr, graph.adj_ptr, graph.adj_nbr
    n0 = ptr[g]
    n1 = ptr[g + 1]
    if n1 == n0:
        return OK, 0.0
    if lam == 0.0:  # f = s; the groups are single nodes, bnd the right derivative's signs
        for i in range(n0, n1):
            out[h, i] = s[h, i]
            label[h, i] = i
            count = 0
            for q in range(adj_ptr[i], adj_ptr[i + 1]):
                j = adj_nbr[q]
                if s[h, i] > s[h, j]:
                    count += 1
                elif s[h, i] < s[h, j]:
                    count -= 1
            bnd[h, i] = count
        return OK, 0.0
    largest = 0.0
    total = 0.0
    max_degree = 0
    for i in range(n0, n1):
        largest = max(largest, abs(s[h, i]))
        total += abs(s[h, i])
        max_degree = max(max_degree, adj_ptr[i + 1] - adj_ptr[i])
    sc = largest + min(lam, 2.0 * total) * max_degree
    if sc == 0.0:
        sc = 1.0
    tol_cap = 1e-15 * sc
    tol_push = 1e-14 * sc
    status = OK
    residual = 0.0
    for attempt in range(2):
        tol_split = 1e-13 * sc * (n1 - n0 + 100) * (1.0 if attempt == 0 else 100.0)
        status, residual = _decompose(g, h, graph, s, lam, bnd, work, tol_cap, tol_push, tol_split)
        if status == OK:
            status = _finish(g, h, graph, s, lam, bnd, label, work, out, tol_split)
        if status == OK:
            break
    return status, residual


@register_jitable
def fused_lasso_vjp_problem(g, h, ptr, label, bnd, grad_f, work, grad_s):
    """``grad_s = J^T grad_f`` for graph ``g``, head ``h``: the average of ``grad_f`` over each
    group; returns ``dL/dlam = -sum_G (sum_G grad_f) (sum_G bnd) / |G|``."""
    n0 = ptr[g]
    n1 = ptr[g + 1]
    _group_sums(n0, n1, h, grad_f, bnd, label, work)
    acc, size, count = work.acc, work.level, work.cursor
    grad_lam = 0.0
    for i in range(n0, n1):
        if label[h, i] == i:
            grad_lam -= acc[h, i] * count[h, i] / size[h, i]
    for i in range(n0, n1):
        r = label[h, i]
        grad_s[h, i] = acc[h, r] / size[h, r]
    return grad_lam

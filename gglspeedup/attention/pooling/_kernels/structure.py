"""A graph batch's structure for the pooling kernels, built once per batch structure.

:func:`build_batch_arrays` turns ``ptr`` and a checked global edge index into a
:class:`BatchArrays` record: the undirected simple graph of every graph (self loops dropped,
``(i, j)`` and ``(j, i)`` and repeats merged into one edge, as attpool2's solver reads an edge
list), both directions of it as CSR, and the connected components, listed component after
component inside each graph's node range. The fused-lasso kernel starts every problem from those
components (they never interact) and names each undirected edge by its position, so flows live in
one ``[heads, num_edges]`` array.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

__all__ = ["BatchArrays", "build_batch_arrays"]

BatchArrays = namedtuple(
    "BatchArrays",
    [
        "ptr",  # int64 (B + 1,): graph g holds nodes ptr[g] .. ptr[g + 1]
        "edge_ptr",  # int64 (B + 1,): graph g's undirected edges edge_ptr[g] .. edge_ptr[g + 1]
        "edge_u",  # int64 (E,): smaller endpoint, ascending (u, v) order
        "edge_v",  # int64 (E,): larger endpoint
        "adj_ptr",  # int64 (N + 1,): node i's incident edges adj_ptr[i] .. adj_ptr[i + 1]
        "adj_nbr",  # int64 (2E,): the other endpoint
        "adj_eid",  # int64 (2E,): the undirected edge
        "adj_dir",  # float64 (2E,): +1 where the node is the edge's smaller endpoint (flow u -> v counts positive), -1
        "order0",  # int64 (N,): each graph's nodes, component after component
        "comp_ptr",  # int64 (C + 1,): component c at positions comp_ptr[c] .. comp_ptr[c + 1] of order0
        "graph_comp",  # int64 (B + 1,): graph g's components graph_comp[g] .. graph_comp[g + 1]
    ],
)


@njit(cache=True)
def _simple_edges(src, dst, num_nodes):
    """Sorted unique ``(min, max)`` pairs of the non-loop edges."""
    keys = np.empty(src.shape[0], np.int64)
    count = 0
    for k in range(src.shape[0]):
        u = src[k]
        v = dst[k]
        if u == v:
            continue
        if u > v:
            u, v = v, u
        keys[count] = u * num_nodes + v
        count += 1
    keys = np.sort(keys[:count])
    unique = 0
    for k in range(count):
        if k == 0 or keys[k] != keys[k - 1]:
            keys[unique] = keys[k]
            unique += 1
    edge_u = np.empty(unique, np.int64)
    edge_v = np.empty(unique, np.int64)
    for e in range(unique):
        edge_u[e] = keys[e] // num_nodes
        edge_v[e] = keys[e] - edge_u[e] * num_nodes
    return edge_u, edge_v


@njit(cache=True)
def _adjacency(edge_u, edge_v, num_nodes):
    adj_ptr = np.zeros(num_nodes + 1, np.int64)
    for e in range(edge_u.shape[0]):
        adj_ptr[edge_u[e] + 1] += 1
        adj_ptr[edge_v[e] + 1] += 1
    for i in range(num_nodes):
        adj_ptr[i + 1] += adj_ptr[i]
    fill = adj_ptr[:-1].copy()
    adj_nbr = np.empty(adj_ptr[num_nodes], np.int64)
    adj_eid = np.empty(adj_ptr[num_nodes], np.int64)
    adj_dir = np.empty(adj_ptr[num_nodes], np.float64)
    for e in range(edge_u.shape[0]):
        u = edge_u[e]
        v = edge_v[e]
        adj_nbr[fill[u]] = v
        adj_eid[fill[u]] = e
        adj_dir[fill[u]] = 1.0
        fill[u] += 1
        adj_nbr[fill[v]] = u
        adj_eid[fill[v]] = e
        adj_dir[fill[v]] = -1.0
        fill[v] += 1
    return adj_ptr, adj_nbr, adj_eid, adj_dir


@njit(cache=True)
def _components(ptr, adj_ptr, adj_nbr):
    num_graphs = ptr.shape[0] - 1
    num_nodes = ptr[num_graphs]
    order0 = np.empty(num_nodes, np.int64)
    seen = np.zeros(num_nodes, np.bool_)
    comp_ptr = np.empty(num_nodes + 1, np.int64)
    graph_comp = np.empty(num_graphs + 1, np.int64)
    comps = 0
    tail = 0
    for g in range(num_graphs):
        graph_comp[g] = comps
        for root in range(ptr[g], ptr[g + 1]):
            if seen[root]:
                continue
            comp_ptr[comps] = tail
            comps += 1
            seen[root] = True
            order0[tail] = root
            head = tail
            tail += 1
            while head < tail:
                x = order0[head]
                head += 1
                for q in range(adj_ptr[x], adj_ptr[x + 1]):
                    j = adj_nbr[q]
                    if not seen[j]:
                        seen[j] = True
                        order0[tail] = j
                        tail += 1
    graph_comp[num_graphs] = comps
    comp_ptr[comps] = tail
    return order0, comp_ptr[: comps + 1].copy(), graph_comp


def build_batch_arrays(ptr: np.ndarray, src: np.ndarray, dst: np.ndarray) -> BatchArrays:
    """The :class:`BatchArrays` of a batch (``ptr`` int64, edges as global int64 endpoints already
    checked to lie inside one graph each)."""
    num_nodes = int(ptr[-1])
    edge_u, edge_v = _simple_edges(src, dst, max(num_nodes, 1))
    adj_ptr, adj_nbr, adj_eid, adj_dir = _adjacency(edge_u, edge_v, num_nodes)
    edge_ptr = np.searchsorted(edge_u, ptr).astype(np.int64)
    order0, comp_ptr, graph_comp = _components(ptr, adj_ptr, adj_nbr)
    return BatchArrays(ptr, edge_ptr, edge_u, edge_v, adj_ptr, adj_nbr, adj_eid, adj_dir, order0, comp_ptr, graph_comp)

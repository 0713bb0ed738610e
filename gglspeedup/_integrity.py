"""What a graph loaded without ``verify`` is still checked for, so corrupt bytes never crash.

A graph folder loaded with ``verify=False`` is trusted: its arrays are mapped in O(1) and their
contents are not scanned (a billion-edge ``indices`` would take seconds). Trust covers wrong
answers from a file damaged on disk, not reads outside the graph. Two checks keep every read in
bounds whatever the bytes:

- at load, :func:`check_indptr` (O(num_nodes): 1.2 ms of a 3.6 ms load at 2M nodes) checks that
  ``indptr`` starts at 0, ends at ``len(indices)`` and never decreases, so every CSR position a
  row names is inside ``indices`` (and ``edge_ids``, ``weights``, a temporal sampler's times);
- in the sampling kernels, every neighbour id read from ``indices`` is bounded before it indexes
  anything (a relabel map, ``indptr``): an id outside ``[0, num_src_nodes)`` sets a flag, the
  kernel stops using it, and the driver raises :func:`corrupt_indices_error`, which finds the
  first bad position (a scan, on this error path only) and names it.

>>> import numpy as np
>>> try:
...     check_indptr("g", np.array([0, 2, 1, 3]), 3)
... except ValueError as error:
...     print(str(error).split(";")[0])
'g': indptr[2] = 1 < indptr[1] = 2 (indptr must never decrease)
>>> print(str(corrupt_indices_error(np.array([0, 1, 7, 2]), [(0, 4, 3, "")])).split(";")[0])
graph.indices holds id 7 outside [0, num_src_nodes = 3) at CSR position 2
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_indptr", "corrupt_indices_error", "relation_spans", "CORRUPT_HINT"]

CORRUPT_HINT = "the graph folder is corrupt: load(..., verify=True) checks every array's checksum"
_STEP = 1 << 22  # entries read at a time: memory stays bounded on a mapped billion-row indptr


def check_indptr(where: str, indptr, num_edges: int) -> None:
    """Raise ``ValueError`` naming ``where`` and the first bad position unless ``indptr`` (1-D,
    integer, any length >= 1; memory-mapped is fine) starts at 0, ends at ``num_edges`` and never
    decreases. One vectorised pass, ``_STEP`` entries at a time."""
    if indptr.shape[0] == 0:
        raise ValueError(f"{where!r}: indptr is empty (it needs num_nodes + 1 entries); {CORRUPT_HINT}")
    if int(indptr[0]) != 0:
        raise ValueError(f"{where!r}: indptr[0] = {int(indptr[0])}, not 0; {CORRUPT_HINT}")
    if int(indptr[-1]) != num_edges:
        raise ValueError(f"{where!r}: indptr[-1] = {int(indptr[-1])}, not len(indices) = {num_edges}; {CORRUPT_HINT}")
    for start in range(0, indptr.shape[0] - 1, _STEP):
        block = np.asarray(indptr[start : start + _STEP + 1])
        drops = block[1:] < block[:-1]
        if drops.any():
            p = start + int(np.argmax(drops)) + 1
            raise ValueError(
                f"{where!r}: indptr[{p}] = {int(indptr[p])} < indptr[{p - 1}] = {int(indptr[p - 1])} "
                f"(indptr must never decrease); {CORRUPT_HINT}"
            )


def corrupt_indices_error(indices, spans) -> ValueError:
    """The ``ValueError`` a sampler raises when a kernel met a neighbour id out of range.

    ``indices`` is the graph's (host or device) array; ``spans`` lists ``(first, stop, bound,
    label)``: positions ``[first, stop)`` must hold ids in ``[0, bound)`` (``label``, e.g. a
    relation and its source type, is added to the message). The first position breaking its
    span's bound is named (found by a scan: this is an error path).
    """
    from .device import to_numpy

    for first, stop, bound, label in spans:
        for start in range(int(first), int(stop), _STEP):
            block = to_numpy(indices[start : min(start + _STEP, int(stop))])
            bad = (block < 0) | (block >= bound)
            if bad.any():
                offset = int(np.argmax(bad))
                where = f" ({label}, its edge {start + offset - int(first)})" if label else ""
                return ValueError(
                    f"graph.indices holds id {int(block[offset])} outside [0, num_src_nodes = {bound}) at CSR "
                    f"position {start + offset}{where}; {CORRUPT_HINT}"
                )
    return ValueError(f"graph.indices holds an id outside the graph's nodes; {CORRUPT_HINT}")


def relation_spans(edge_base, src_type, type_counts, num_edges: int, names=None) -> list:
    """The ``spans`` of :func:`corrupt_indices_error` for a stacked typed CSR: relation ``r``'s
    positions ``edge_base[r] ..`` (the next relation's base, or ``num_edges``) hold ids of its
    source type ``src_type[r]``, of which there are ``type_counts[src_type[r]]``. ``names``:
    ``(edge types, node types)`` to name them in the message; else their indices."""
    edge_types, node_types = names if names is not None else (None, None)
    starts = [int(b) for b in edge_base]
    spans = []
    for r, (first, stop, t) in enumerate(zip(starts, [*starts[1:], num_edges], [int(t) for t in src_type])):
        relation = f"relation {edge_types[r]!r}" if edge_types is not None else f"relation {r}"
        source = f"num_nodes[{node_types[t]!r}]" if node_types is not None else f"the node count of type {t}"
        spans.append((first, stop, int(type_counts[t]), f"{relation}: its source ids are bound by {source}"))
    return spans

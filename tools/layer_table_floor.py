"""How little RAM an exact layer-wise pass could hold, against issue 42's "one table + cache + batch".

    python tools/layer_table_floor.py [--graph powerlaw:2000000:32] [--batch-size 8192]

Layer ``l`` reads row ``u`` of the previous layer's table for every node ``v`` that lists ``u`` as
an in-neighbour, and writes row ``v`` of its own table. With batches of consecutive ids, row ``u``
can be dropped only after the batch of its last reader (the largest such ``v``). This prints the
most rows any scheme that frees each input row right after its last reader would hold at once,
input rows still to be read plus output rows written, in tables of ``num_nodes`` rows: ``layerwise``
holds two (the table read and the table written), ``out_dir`` none in anonymous memory.
"""

from __future__ import annotations

import argparse

import numpy as np

from gglspeedup.bench._common import load_graph


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graph", default="powerlaw:2000000:32")
    parser.add_argument("--batch-size", type=int, default=8192)
    args = parser.parse_args(argv)
    graph = load_graph(args.graph)
    graph = graph[0] if isinstance(graph, tuple) else graph
    n = graph.num_nodes
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    readers = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))  # row v reads its in-neighbours
    order = np.argsort(indices, kind="stable")
    sources, readers = indices[order], readers[order]
    starts = np.searchsorted(sources, np.arange(n))
    read = np.diff(np.append(starts, sources.shape[0])) > 0
    last = np.full(n, -1, np.int64)
    last[read] = np.maximum.reduceat(readers, starts[read])
    num_batches = -(-n // args.batch_size)
    freed = np.bincount(last[read] // args.batch_size, minlength=num_batches).cumsum()
    live = [
        int(read.sum()) - (int(freed[k - 1]) if k else 0) + min((k + 1) * args.batch_size, n)
        for k in range(num_batches)
    ]
    peak = int(np.argmax(live))
    print(f"{args.graph}: {n:,} nodes, {indices.shape[0]:,} edges, {num_batches} batches of {args.batch_size}")
    print(f"rows never read: {n - int(read.sum()):,}")
    print(f"peak live rows: {live[peak] / n:.3f} tables, at batch {peak + 1} of {num_batches}")
    for share in (0.5, 0.9, 0.99):
        k = max(int(share * num_batches), 1)
        print(f"input rows no longer read after {share:.0%} of the batches: {freed[k - 1] / n:.3f}")


if __name__ == "__main__":
    main()

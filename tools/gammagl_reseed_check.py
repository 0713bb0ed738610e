"""How many distinct neighbour subsets GammaGL 0.5.0's CPU sampler draws in repeated calls.

GammaGL's ``gammagl/ops/sparse/cpu/sparse_utils.cpp`` (v0.5.0) reseeds the C library's generator
with ``srand(time(0))`` before every draw, so every call within one wall-clock second draws the
same subset. This samples ``k`` of ``degree`` neighbours of one node ``--calls`` times with
GammaGL's ``NeighborSampler`` (``sample_adj``, what its GraphSAGE loop uses) and with
``gglspeedup.gammagl.NeighborSampler`` (a new batch key per call), and counts distinct subsets and
the seconds the calls spanned. Run it in GammaGL's environment::

    TL_BACKEND=torch python tools/gammagl_reseed_check.py --calls 200 --degree 100 --fanout 10
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

os.environ.setdefault("TL_BACKEND", "torch")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--degree", type=int, default=100)
    parser.add_argument("--fanout", type=int, default=10)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds to sleep between calls")
    args = parser.parse_args(argv)
    import tensorlayerx as tlx
    from gammagl.loader import NeighborSampler as GammaGLSampler

    from gglspeedup.gammagl import NeighborSampler

    # node 0 has `degree` in-neighbours 1..degree
    edge_index = np.stack([np.arange(1, args.degree + 1), np.zeros(args.degree, dtype=np.int64)])
    samplers = {
        "gammagl": GammaGLSampler(edge_index=tlx.convert_to_tensor(edge_index), sample_lists=[args.fanout]),
        "gglspeedup": NeighborSampler(edge_index, [args.fanout], backend="torch"),
    }
    results = {}
    for name, sampler in samplers.items():
        subsets, start = set(), time.time()
        for _ in range(args.calls):
            _, n_id, adjs = sampler.sample([0])
            adj = adjs[0] if isinstance(adjs, list) else adjs
            subsets.add(tuple(sorted(np.asarray(n_id)[np.asarray(adj.edge_index[0])].tolist())))
            if args.pause:
                time.sleep(args.pause)
        span = time.time() - start
        results[name] = {"distinct": len(subsets), "calls": args.calls, "seconds": span}
        what = f"{args.fanout}-of-{args.degree} subsets in {args.calls} calls"
        print(f"{name:10s} {len(subsets):4d} distinct {what} ({span:.2f} s)")
    return results


if __name__ == "__main__":
    main()

"""What ``service.partition`` costs on a papers-like graph: wall time and peak memory (issue 40).

Builds (or finds in the cache) ``papers-like:NODES`` (ogbn-papers100M's shape: 14.6 edges per node,
memory-mapped), then partitions it in a fresh child process, so the child's peak resident memory
(``ru_maxrss``) is the partition's alone, and prints one line per method::

    python tools/partition_cost.py --nodes 4000000 --parts 4 --methods range,metis --memory 1G

The graph's pages are dropped from the page cache first only when ``--cold`` is given (it needs
root: ``/proc/sys/vm/drop_caches``). Peak RSS counts mapped file pages the child touched (the
graph's rows are read through its memory map), so it bounds from above what the partition holds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

_CHILD = """
import json, os, resource, sys, time
import gglspeedup as gg
from gglspeedup.service import partition
graph = gg.CSRGraph.load(sys.argv[1])
start = time.perf_counter()
book = partition(graph, sys.argv[2], int(sys.argv[3]), method=sys.argv[4], memory=sys.argv[5])
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
sizes = [s["edges"] for s in book.part_sizes]
print(json.dumps({"seconds": seconds, "peak_bytes": peak, "max_part_edges": max(sizes), "parts": len(sizes)}))
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=4_000_000)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--methods", default="range,metis")
    parser.add_argument("--memory", default="1G")
    parser.add_argument("--out", default=None, help="folder for the partitions (default: a temporary one)")
    parser.add_argument("--cold", action="store_true", help="drop the page cache before each run (root)")
    args = parser.parse_args(argv)

    from gglspeedup.datasets.papers_like import load_papers_like

    start = time.perf_counter()
    graph, built = load_papers_like(args.nodes)
    print(
        f"papers-like:{args.nodes}: {graph.num_nodes} nodes, {graph.num_edges} edges "
        f"({'built' if built else 'cached'} in {time.perf_counter() - start:.1f} s)"
    )
    graph_path = os.path.join(
        os.environ.get("GGLSPEEDUP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gglspeedup"),
        f"papers-like-{args.nodes}-0",
    )
    base = args.out or tempfile.mkdtemp(prefix="partition-cost-")
    for method in args.methods.split(","):
        target = os.path.join(base, f"{method}-{args.parts}")
        shutil.rmtree(target, ignore_errors=True)
        if args.cold:
            subprocess.run(["sync"], check=True)
            with open("/proc/sys/vm/drop_caches", "w") as handle:
                handle.write("3\n")
        result = subprocess.run(
            [sys.executable, "-c", _CHILD, graph_path, target, str(args.parts), method, args.memory],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            print(f"{method}: failed: {result.stderr.strip().splitlines()[-1]}")
            continue
        row = json.loads(result.stdout.strip().splitlines()[-1])
        print(
            f"{method:6s} parts={row['parts']} time={row['seconds']:.1f} s "
            f"peak RSS={row['peak_bytes'] / 2**30:.2f} GiB "
            f"edges/s={graph.num_edges / row['seconds'] / 1e6:.1f} M largest part={row['max_part_edges']} edges"
        )
        shutil.rmtree(target, ignore_errors=True)
    if args.out is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

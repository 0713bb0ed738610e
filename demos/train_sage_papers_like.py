"""GraphSAGE on a papers100M-shaped graph (111M nodes, ~1.6B edges) on one machine, features on disk.

    python demos/train_sage_papers_like.py                        # the full shape (first run builds it)
    python demos/train_sage_papers_like.py --nodes 2000000 --batches 50

Builds (once, out of core, cached) the papers-like graph and a float16 feature table on disk, then
trains GraphSAGE for a fixed number of batches through a prefetching loader, printing throughput
and the process's peak RSS. The code is :mod:`gglspeedup.examples.sage_papers_like`.
"""

import sys

from gglspeedup.examples import sage_papers_like


def main(argv=None) -> dict:
    return sage_papers_like.run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])

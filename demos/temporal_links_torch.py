"""Temporal link prediction in PyTorch on the bundled UC Irvine messages (59,835 timestamped messages).

    python demos/temporal_links_torch.py                       # time respected vs ignored, side by side
    python demos/temporal_links_torch.py --time respect --strategy last --epochs 10

Trains on the first 70% of the messages by time, validates on the next 15%, tests on the last 15%
(ROC-AUC and MRR). ``--time respect`` samples each query's neighbourhoods with
``NeighborSampler(..., edge_time=...)`` and ``seed_time`` just before the query; ``--time ignore``
samples a plain graph of every known message, so it reads the future: it scores higher on
validation and falls short on the test (BENCHMARKS.md has the figures). The code is
:mod:`gglspeedup.examples.temporal_links`.
"""

import sys

from gglspeedup.examples import temporal_links


def main(argv=None) -> dict:
    return temporal_links.run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])

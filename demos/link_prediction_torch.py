"""Link prediction in PyTorch on gglspeedup's LinkLoader: GraphSAGE encoder, dot-product decoder.

    python demos/link_prediction_torch.py                       # Cora, 85/5/10 edge split
    python demos/link_prediction_torch.py --dataset citeseer --runs 3

Training batches carry binary negatives and exclude their own edges (both directions) from the
sampled neighbourhoods; validation and test pairs are scored over full neighbourhoods of the
message graph (training edges only). Prints loss and validation ROC-AUC per epoch, the test
ROC-AUC and throughput, and writes a plot. The code is :mod:`gglspeedup.examples.link_cora`, also
run by ``python -m gglspeedup.demo --task link``.
"""

import sys

from gglspeedup.examples import link_cora


def main(argv=None) -> dict:
    return link_cora.run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])

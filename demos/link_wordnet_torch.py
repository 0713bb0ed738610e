"""Typed link prediction in PyTorch on WordNet 3.0: R-GCN encoder, bilinear decoder, WN18RR-like split.

    python demos/link_wordnet_torch.py                                 # noun hypernyms
    python demos/link_wordnet_torch.py --relation verb:hypernym:verb --runs 3

Held-out edges leave the message graph with their reverses; training batches exclude their own
edges in both directions; the metric is ROC-AUC against filtered corrupted targets. The code is
:mod:`gglspeedup.examples.link_wordnet`.
"""

import sys

from gglspeedup.examples import link_wordnet


def main(argv=None) -> dict:
    return link_wordnet.run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])

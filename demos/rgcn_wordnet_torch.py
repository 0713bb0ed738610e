"""R-GCN on WordNet 3.0 in plain PyTorch on gglspeedup's typed sampler, feature store and loader.

    python demos/rgcn_wordnet_torch.py                   # typed: one weight per relation
    python demos/rgcn_wordnet_torch.py --untyped         # baseline: types erased, one relation
    python demos/rgcn_wordnet_torch.py --runs 3 --out .  # mean test accuracy over 3 seeds, plots

Classifies every synset (noun, verb, adjective, adverb) into its lexicographer file (45 classes)
from the hashed bag of words of its gloss and its typed neighbourhood. Prints loss and accuracies
per epoch, the test accuracy, throughput, and writes a plot. The code is
:mod:`gglspeedup.examples.rgcn_wordnet`.
"""

import sys

from gglspeedup.examples import rgcn_wordnet


def main(argv=None) -> dict:
    return rgcn_wordnet.run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])

"""PyG's heterogeneous recipe on WordNet: an R-GCN built with ``to_hetero``, on gglspeedup's PyG loaders.

    python demos/pyg_rgcn_wordnet.py                    # 10 epochs, fanouts [10, 10]
    python demos/pyg_rgcn_wordnet.py --epochs 1 --runs 3

Classifies every WordNet 3.0 synset into its lexicographer file (45 classes) with PyG's
``to_hetero`` R-GCN over gglspeedup's typed :mod:`gglspeedup.pyg` stores and loaders. The code is
:mod:`gglspeedup.examples.pyg_rgcn_wordnet`.
"""

import sys

from gglspeedup.examples import pyg_rgcn_wordnet


def main(argv=None) -> dict:
    return pyg_rgcn_wordnet.run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])

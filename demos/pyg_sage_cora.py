"""PyG's GraphSAGE example with the loader swapped: gglspeedup samples and gathers, PyG trains.

    python demos/pyg_sage_cora.py                          # node classification on Cora
    python demos/pyg_sage_cora.py --dataset citeseer --runs 3
    python demos/pyg_sage_cora.py --task link              # link prediction on Cora (ROC-AUC)

PyG's ``SAGEConv`` model and training loop; gglspeedup's :mod:`gglspeedup.pyg` stores and loaders
(PyG's own ``NodeLoader`` / ``LinkLoader`` on gglspeedup's sampler). The code is
:mod:`gglspeedup.examples.pyg_sage`.
"""

import sys

from gglspeedup.examples import pyg_sage


def main(argv=None) -> dict:
    return pyg_sage.run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])

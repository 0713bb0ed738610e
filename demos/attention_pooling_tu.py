"""Graph classification on ENZYMES and PROTEINS with attention-pooling readouts, on the CPU.

    python demos/attention_pooling_tu.py                         # both sets, softmax / sparsemax / gfusedmax, 10 folds
    python demos/attention_pooling_tu.py --datasets proteins --mappings gfusedmax --epochs 30
    python demos/attention_pooling_tu.py --max-folds 1 --epochs 2  # a quick look

A small graph-convolution network reads each graph and
:class:`gglspeedup.attention.AttentionPooling` pools it (softmax, sparsemax, or gfusedmax: the
exact graph fused lasso of the scores on the graph's own edges, then sparsemax). 10-fold
cross-validation per data set and map, a progress bar, then a table of accuracy (mean +- std over
folds) and seconds per training epoch, ``tu_pooling.json`` and ``tu_pooling.png`` in ``--out``.
The code is :mod:`gglspeedup.examples.tu_pooling`.
"""

import sys

from gglspeedup.examples import tu_pooling


def main(argv=None) -> list:
    return tu_pooling.run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])

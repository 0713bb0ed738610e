"""GraphSAGE on a 4-part papers-like graph served by 4 Ray actors; its loss curve equals the local run's.

    python demos/service_sage.py                                   # 1M-node papers-like, 4 parts, 4 servers
    python demos/service_sage.py --nodes 200000 --batches 10
    python demos/service_sage.py --address auto                    # the servers on a running Ray cluster

Trains the same model twice with the same seeds: on the whole graph in this process, then through
partition servers (``gglspeedup.service``), and prints both loss curves side by side. The code is
:mod:`gglspeedup.examples.service_sage`.
"""

import sys

from gglspeedup.examples import service_sage


def main(argv=None) -> dict:
    return service_sage.run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])

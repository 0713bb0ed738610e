"""``python -m gglspeedup.bench``: :func:`gglspeedup.bench.main`, whose option checks raise
``ValueError`` naming the option (as the tests call it); on the command line such an error ends
the run as argparse's own errors do: the message and exit status 2, no traceback."""

import sys

from . import main

try:
    status = main()
except ValueError as error:
    command = " ".join(["python -m gglspeedup.bench", *sys.argv[1:2]])
    print(f"{command}: error: {error}", file=sys.stderr)
    status = 2
sys.exit(status)

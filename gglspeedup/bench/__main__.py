"""``python -m gglspeedup.bench``: :func:`gglspeedup.bench.main`, whose option checks raise
``ValueError`` naming the option (as the tests call it); on the command line such an error ends
the run as argparse's own errors do: the message and exit status 2, no traceback. A ``--device
cuda`` without a usable GPU (``DeviceUnavailableError``) prints its message with status 1."""

import sys

from . import main

try:
    status = main()
except ValueError as error:
    command = " ".join(["python -m gglspeedup.bench", *sys.argv[1:2]])
    print(f"{command}: error: {error}", file=sys.stderr)
    status = 2
except RuntimeError as error:  # --device cuda without a usable GPU: its message, status 1, as the demo
    from ..device import DeviceUnavailableError

    if not isinstance(error, DeviceUnavailableError):
        raise
    print(f"{' '.join(['python -m gglspeedup.bench', *sys.argv[1:2]])}: {error}", file=sys.stderr)
    status = 1
sys.exit(status)

"""``python -m gglspeedup.demo``: the README's main job (GraphSAGE on the bundled Cora).

The code lives in :mod:`gglspeedup.examples.sage_cora`; this module keeps the command (and the
``gglspeedup-demo`` console script) short.
"""

from __future__ import annotations

import sys

from ._config import run_command
from .examples.sage_cora import main as _main
from .examples.sage_cora import run

__all__ = ["main", "run"]


def main(argv=None) -> int:
    """Console entry point (``gglspeedup-demo``): run the demo, return its exit status (1 with a
    message naming the environment to use when a core dependency is missing)."""
    return run_command("python -m gglspeedup.demo", _main, argv)


if __name__ == "__main__":
    sys.exit(main())

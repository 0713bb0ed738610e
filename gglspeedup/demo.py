"""``python -m gglspeedup.demo``: the README's main job (GraphSAGE on the bundled Cora).

The code lives in :mod:`gglspeedup.examples.sage_cora`; this module keeps the command (and the
``gglspeedup-demo`` console script) short.
"""

from __future__ import annotations

import sys

from .examples.sage_cora import main, run

__all__ = ["main", "run"]

if __name__ == "__main__":
    sys.exit(main())

"""``argparse`` types for numbers, shared by the benchmarks' and the demos' command lines.

A bad value is a usage error on its flag (``argument --lam: must be >= 0, got '-1'``, exit status
2) instead of the library's error naming its parameter later in the run. Nothing heavy is imported
here: ``python -m gglspeedup.bench X --help`` reads every command's options.

>>> at_least(1)("3"), above(0.0)("0.5")
(3, 0.5)
"""

from __future__ import annotations

import argparse
import math

__all__ = ["at_least", "above"]


def at_least(minimum, kind=int):
    """An ``argparse`` type: ``kind(text)`` when it is ``>= minimum`` (and finite, for a float),
    else a usage error (what a run would otherwise hit later: ``--epochs 0`` failed in ``max()`` of
    no epochs, ``--lam -1`` in the model's constructor, naming its parameter ``lam``)."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {'an int' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number >= {minimum}, got {text!r}")
        if not value >= minimum:  # NaN too
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {text!r}")
        return value

    return parse


def above(minimum):
    """An ``argparse`` type: a finite float ``> minimum`` (a learning rate, a temperature), else a
    usage error on the flag."""

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not (math.isfinite(value) and value > minimum):
            raise argparse.ArgumentTypeError(f"must be a finite number > {minimum}, got {text!r}")
        return value

    return parse

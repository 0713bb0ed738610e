"""``argparse`` types for numbers, devices, dtypes and Ray addresses, shared by the benchmarks', the
demos' and the service's command lines.

A bad value is a usage error on its flag (``argument --lam: must be >= 0, got '-1'``, exit status
2) instead of the library's error naming its parameter later in the run. Nothing heavy is imported
here: ``python -m gglspeedup.bench X --help`` reads every command's options.

>>> at_least(1)("3"), above(0.0)("0.5")
(3, 0.5)
"""

from __future__ import annotations

import argparse
import math

__all__ = ["at_least", "above", "device_text", "numeric_dtype", "address_text"]


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


def device_text(text: str) -> str:
    """An ``argparse`` type: ``text`` when it has a device's form (``cpu``, ``cuda``, ``cuda:N``),
    else a usage error on the flag (``argument --device: ...``), not the library's ``ValueError``
    naming its ``device`` parameter out of the run. Whether the machine has that GPU is checked
    when the run starts."""
    from .device import as_device

    try:
        as_device(text)
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def numeric_dtype(text: str) -> str:
    """An ``argparse`` type: ``text`` when it names a numeric NumPy dtype (float, int, uint, bool:
    what a feature table holds), else a usage error naming the option (an unknown name was NumPy's
    ``TypeError`` traceback out of the run)."""
    import numpy as np

    try:
        kind = np.dtype(text).kind
    except TypeError:
        kind = None
    if kind is None or kind not in "fiub":
        raise argparse.ArgumentTypeError(f"must name a numeric NumPy dtype (e.g. float32, float16, int8), got {text!r}")
    return text


def address_text(text: str) -> str:
    """An ``argparse`` type: a Ray address's form (``auto``, ``host:port``, ``ray://host:port``),
    the text kept, else a usage error on the flag instead of ``serve()``'s ``ValueError`` naming
    its ``address`` parameter. Nothing is connected to: ``serve()`` checks a cluster answers."""
    from .service.cluster import split_address

    try:
        split_address(text, "the address")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text

"""The command-line options several benchmark commands share, and the checks of their values.

One table says how each shared option reads: its type, its usual default and its usual help. A
command names the options it takes, in the order its ``--help`` lists them, and gives its own
default (or ``(default, help)``) where it differs::

    add_common_arguments(parser, *SAMPLING, "device", fanouts="25,10")
    add_common_arguments(parser, "seed", threads=(None, "CPU threads for Numba"))

Nothing heavy is imported here (``python -m gglspeedup.bench X --help`` reads every command's
options).
"""

from __future__ import annotations

from typing import Any

from ..datasets.spec import GRAPH_SPEC_HELP

__all__ = ["COMMON_OPTIONS", "SAMPLING", "add_common_arguments", "check_at_least_one", "check_timing_args"]

# name: (type, default, help); a type None keeps the option's text as given (argparse's default),
# and "{default}" in a help reads the command's default.
COMMON_OPTIONS: dict[str, tuple[type | None, Any, str]] = {
    "graph": (None, "powerlaw:2000000:32", GRAPH_SPEC_HELP),
    "fanouts": (None, "15,10", "comma-separated, seeds' hop first (default {default})"),
    "batch": (int, 1024, "seeds per batch (default {default})"),
    "batches": (int, 20, "timed batches per round (default {default})"),
    "warmup": (int, 3, "untimed batches first (default {default})"),
    "repeats": (int, 3, "timed rounds; the median is reported (default {default})"),
    "dim": (int, 128, "float32 feature width (default {default})"),
    "device": (None, "cpu", "cpu or cuda:N (default {default})"),
    "peers": (None, "dgl", "comma-separated peers from: dgl (default dgl; '' for none)"),
    "seed": (int, 0, "seed of the batches and of every sampler"),
    "threads": (int, None, "CPU threads for Numba / torch"),
}
# The timed sampling commands' first options (sample, link, temporal; hetero without --graph).
SAMPLING = ("graph", "fanouts", "batch", "batches", "warmup", "repeats")


def add_common_arguments(parser, *names: str, **changes: Any) -> None:
    """Add the shared options ``names``, then those in ``changes`` not named, to an ``argparse``
    parser, in that order. A value in ``changes`` is the command's default, or ``(default, help)``
    to replace the table's help too.

    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_common_arguments(parser, *SAMPLING, fanouts="25,10")
    >>> args = parser.parse_args(["--batch", "64"])
    >>> args.graph, args.fanouts, args.batch, args.warmup
    ('powerlaw:2000000:32', '25,10', 64, 3)

    Raises
    ------
    KeyError
        for a name not in :data:`COMMON_OPTIONS`.
    """
    for name in dict.fromkeys([*names, *changes]):
        kind, default, text = COMMON_OPTIONS[name]
        value = changes.get(name, default)
        if isinstance(value, tuple):
            default, text = value
        else:
            default, text = value, text.replace("{default}", str(value))
        typed = {} if kind is None else {"type": kind}
        parser.add_argument(f"--{name.replace('_', '-')}", default=default, help=text, **typed)


def check_at_least_one(args, *options: str) -> None:
    """Raise ``ValueError`` naming the first of ``options`` (``args`` attributes) that is below 1."""
    for option in options:
        value = getattr(args, option)
        if value < 1:
            raise ValueError(f"--{option.replace('_', '-')} must be >= 1, got {value}")


def check_timing_args(args) -> None:
    """The timed-sampling commands' checks: ``--batch``, ``--batches`` and ``--repeats`` >= 1,
    ``--warmup`` >= 0, ``--threads`` unset or >= 1 (``ValueError`` naming the option)."""
    check_at_least_one(args, "batch", "batches", "repeats")
    if args.warmup < 0:
        raise ValueError(f"--warmup must be >= 0, got {args.warmup}")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")

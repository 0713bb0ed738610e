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

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from .._argtypes import at_least, device_text, numeric_dtype
from ..datasets.spec import GRAPH_SPEC_HELP

__all__ = [
    "COMMON_OPTIONS",
    "SAMPLING",
    "PeersOption",
    "add_common_arguments",
    "check_at_least_one",
    "check_timing_args",
    "check_peers",
    "numeric_dtype",
    "device_text",
    "seed_int",
    "positive_int",
]

# name: (type, default, help); a type None keeps the option's text as given (argparse's default), a
# str names a type of this module (defined below), and "{default}" in a help reads the command's default.
COMMON_OPTIONS: dict[str, tuple[type | str | None, Any, str]] = {
    "graph": (None, "powerlaw:2000000:32", GRAPH_SPEC_HELP),
    "fanouts": (None, "15,10", "comma-separated, seeds' hop first (default {default})"),
    "batch": (int, 1024, "seeds per batch (default {default})"),
    "batches": (int, 20, "timed batches per round (default {default})"),
    "warmup": (int, 3, "untimed batches first (default {default})"),
    "repeats": (int, 3, "timed rounds; the median is reported (default {default})"),
    "dim": (int, 128, "float32 feature width (default {default})"),
    "device": ("device_text", "cpu", "cpu or cuda:N (default {default})"),
    "peers": (None, "dgl", "comma-separated peers from: dgl (default dgl; '' for none)"),
    "seed": ("seed_int", 0, "seed of the batches and of every sampler"),
    "threads": ("positive_int", None, "CPU threads for Numba / torch"),
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
        typed = {} if kind is None else {"type": globals()[kind] if isinstance(kind, str) else kind}
        if name == "peers":
            typed["action"] = PeersOption
            parser.set_defaults(peers_given=False)
        parser.add_argument(f"--{name.replace('_', '-')}", default=default, help=text, **typed)


class PeersOption(argparse.Action):
    """``--peers``: stores the text and records that the user named peers (``args.peers_given``),
    which :func:`check_peers` reads: named peers that are all missing stop the run at once."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.peers_given = True


def check_peers(args, wanted: Sequence[str], why_unavailable: Callable[[str], str | None] | None = None) -> dict:
    """Check the peers ``wanted`` before anything is built; ``{name: reason}`` of the missing ones.

    Called by every command that takes ``--peers`` right after its option checks, before it
    loads or generates a graph (which can take minutes and gigabytes). ``why_unavailable(name)``
    returns the reason a peer cannot run, or ``None`` (default: :func:`.peers.why_unavailable`).
    Missing peers are printed at once; the run then measures the others and lists these as
    unavailable. When the user named peers (``--peers``) and none of them can run, there is
    nothing to compare with: a ``ValueError`` naming ``--peers``, each reason and the way out
    (``scripts/install_peers.sh``, or ``--peers ''`` for gglspeedup alone).
    """
    if why_unavailable is None:
        from .peers import why_unavailable
    missing = {}
    for name in wanted:
        reason = why_unavailable(name)
        if reason is not None:
            missing[name] = reason
            print(f"peer {name}: unavailable ({reason}); checked before any graph is built", flush=True)
    if missing and len(missing) == len(wanted) and getattr(args, "peers_given", False):
        from .peers import PeersMissing

        reasons = "; ".join(f"{name}: {reason}" for name, reason in missing.items())
        raise PeersMissing(
            f"--peers {','.join(wanted)}: no named peer can run here ({reasons}). Install the peers with "
            "`bash scripts/install_peers.sh`, or pass --peers '' to measure gglspeedup alone"
        )
    return missing


def check_at_least_one(args, *options: str) -> None:
    """Raise ``ValueError`` naming the first of ``options`` (``args`` attributes) that is below 1."""
    for option in options:
        value = getattr(args, option)
        if value < 1:
            raise ValueError(f"--{option.replace('_', '-')} must be >= 1, got {value}")


def check_timing_args(args) -> None:
    """The timed-sampling commands' checks: ``--batch``, ``--batches`` and ``--repeats`` >= 1,
    ``--warmup`` >= 0 (``ValueError`` naming the option; ``--threads`` is checked by its type,
    :data:`positive_int`)."""
    check_at_least_one(args, "batch", "batches", "repeats")
    if args.warmup < 0:
        raise ValueError(f"--warmup must be >= 0, got {args.warmup}")


def seed_int(text: str) -> int:
    """An ``argparse`` type: a seed, an int >= 0 (NumPy's generators refuse a negative one with
    "expected non-negative integer", which named no option)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an int >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an int >= 0, got {text!r}")
    return value


positive_int = at_least(1)
"""An ``argparse`` type: an int >= 1 (``--threads``: a usage error on the flag, also for commands
that run no :func:`check_timing_args`; ``bench link --threads -1`` started its run)."""

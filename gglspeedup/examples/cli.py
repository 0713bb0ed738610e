"""The demos' command line: ``--dataset``, ``--device``, ``--fanouts``, ``--batch-size``, ...

:func:`build_parser` is the parser every demo starts from (each may add options);
:func:`parse_fanouts` is ``argparse``'s face of :func:`gglspeedup.validation.parse_fanouts` (the
package's one fanout rule); :func:`best_device` and :func:`cpu_threads` pick the defaults.
"""

from __future__ import annotations

import argparse
import os

from .._argtypes import above, at_least, device_text
from .._argtypes import numeric_dtype as numeric_dtype_text
from .._replace import check_out_file, nearest_folder
from ..device import as_device, gpu_available, parse_size
from ..validation import parse_fanouts as _check_fanout_text

__all__ = [
    "build_parser",
    "add_task_option",
    "add_layers_option",
    "NO_TORCH",
    "set_out_default",
    "parse_fanouts",
    "at_least",
    "above",
    "device_text",
    "dropout_fraction",
    "size_text",
    "numeric_dtype_text",
    "out_folder",
    "out_file",
    "best_device",
    "cpu_threads",
]


# What a torch demo says when torch does not import: the wrong Python, most often (README, Quick start).
NO_TORCH = (
    "the demo trains with PyTorch, which this Python cannot import: use the environment scripts/demo.sh "
    "creates (source .venv/bin/activate, or .venv/bin/python), or pip install gglspeedup[torch,demo]"
)


def parse_fanouts(text: str) -> list[int]:
    """``"25,10"`` -> ``[25, 10]`` (seed hop first; ``-1`` takes every neighbour, ``0`` none), or
    an ``argparse`` usage error naming the bad part."""
    try:
        return _check_fanout_text(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"fanouts must be comma-separated ints like 25,10 ({error})") from None


def _checked_text(check):
    """An ``argparse`` type that keeps the text once ``check(text)`` accepts it: a bad cache size,
    device or dataset is a usage error, not a traceback out of the run's set-up."""

    def parse(text):
        try:
            check(text)
        except (TypeError, ValueError) as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return text

    return parse


def _check_out_folder(text) -> None:
    """An output folder (made when missing): nothing on its path may be a file, which made the
    write at the end of a run (after every epoch) a FileExistsError / NotADirectoryError traceback."""
    try:
        nearest_folder(text)
    except NotADirectoryError as error:
        raise ValueError(f"must be a folder (made when missing), but {error.args[0]!r} is a file") from None


out_folder = _checked_text(_check_out_folder)
"""``argparse`` type of the demos' ``--out``: :func:`_check_out_folder`, the text kept."""


out_file = _checked_text(check_out_file)
"""``argparse`` type of the demos' ``--json``, a file written at the end of a run:
:func:`gglspeedup._replace.check_out_file` (the bench's ``--json`` check too), the text kept."""


def _checked_float(check):
    """An ``argparse`` type: ``float(text)`` once ``check(text)`` accepts it."""
    checked = _checked_text(check)
    return lambda text: float(checked(text))


def _check_dropout(text) -> None:
    if not 0 <= float(text) < 1:
        raise ValueError(f"dropout must be in [0, 1), got {text!r}")


dropout_fraction = _checked_float(_check_dropout)
"""``argparse`` type of a ``--dropout``: a float in ``[0, 1)``."""


def _check_lr(text) -> None:
    if not float(text) > 0:
        raise ValueError(f"the learning rate must be > 0, got {text!r}")


def _check_device(text) -> None:
    if text != "auto":
        as_device(text)  # the form only: a CUDA device this machine lacks is named when the run starts


def _check_dataset(text) -> None:
    from ..datasets.spec import parse_spec

    parse_spec(text)  # the form only: nothing is loaded


def size_text(what: str = "the size"):
    """``argparse`` type of a byte size (``0``, ``512M``, ``0.1G``): the text kept, or a usage
    error whose message calls the value ``what`` (not the library's parameter name)."""
    return _checked_text(lambda text: parse_size(text, what))


def best_device() -> str:
    """``"cuda:0"`` when a real GPU is usable (CuPy and numba-cuda both see one), else ``"cpu"``."""
    return "cuda:0" if gpu_available() else "cpu"


def cpu_threads(args) -> int:
    """Threads for the framework's CPU kernels: ``args.threads``, or (0 = auto) every core but one
    when a prefetching loader samples on the CPU next to it (on 2 cores that is 1: two busy
    threads per core make both sides several times slower)."""
    if args.threads > 0:
        return args.threads
    cores = os.cpu_count() or 1
    return max(1, cores - 1) if args.prefetch > 0 else cores


def build_parser(
    description: str,
    *,
    epochs: int = 20,
    fanouts: str = "25,10",
    batch_size: int = 512,
    hidden: int = 256,
    lr: float = 0.01,
    weight_decay: float = 5e-4,
    dropout: float = 0.5,
    dataset: str = "cora",
) -> argparse.ArgumentParser:
    """The demos' common command line (each demo may add its own options)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--dataset",
        default=dataset,
        type=_checked_text(_check_dataset),
        help="cora | citeseer | powerlaw:N:D | ogb:PATH | reddit:PATH (default: %(default)s)",
    )
    parser.add_argument(
        "--device",
        default="auto",
        type=_checked_text(_check_device),
        help="cpu | cuda[:i] | auto (a real GPU when usable, else cpu; default: %(default)s)",
    )
    parser.add_argument(
        "--fanouts",
        type=parse_fanouts,
        default=parse_fanouts(fanouts),
        help=f"neighbours per hop, seed hop first, -1 = all (default: {fanouts})",
    )
    parser.add_argument(
        "--batch-size", type=at_least(1), default=batch_size, help="seeds per batch (default: %(default)s)"
    )
    parser.add_argument(
        "--cache-size",
        default="0",
        type=size_text("the cache size"),
        help="feature rows kept in device memory, in bytes: 0, 512M, 0.1G (default: %(default)s)",
    )
    parser.add_argument("--epochs", type=at_least(1), default=epochs, help="training epochs (default: %(default)s)")
    parser.add_argument("--hidden", type=at_least(1), default=hidden, help="hidden width (default: %(default)s)")
    parser.add_argument(
        "--lr", type=_checked_float(_check_lr), default=lr, help="Adam learning rate (default: %(default)s)"
    )
    parser.add_argument(
        "--weight-decay", type=at_least(0.0, float), default=weight_decay, help="(default: %(default)s)"
    )
    parser.add_argument("--dropout", type=dropout_fraction, default=dropout, help="(default: %(default)s)")
    parser.add_argument("--prefetch", type=at_least(0), default=2, help="batches prepared ahead (default: %(default)s)")
    parser.add_argument(
        "--threads",
        type=at_least(0),
        default=0,
        help="framework CPU threads; 0 = auto: all cores but one, which the prefetching "
        "loader's thread uses (default: %(default)s)",
    )
    parser.add_argument(
        "--seed", type=at_least(0), default=0, help="sampling, shuffling and init seed (default: %(default)s)"
    )
    parser.add_argument("--out", default=None, type=out_folder, help=_out_help(None))
    parser.add_argument("--no-progress", action="store_true", help="hide the tqdm progress bars")
    return parser


def _out_help(folder) -> str:
    where = "no plot" if folder is None else "the current folder" if folder == "." else folder
    return f"folder for the loss/accuracy plot (default: {where})"


def set_out_default(parser: argparse.ArgumentParser, folder) -> argparse.ArgumentParser:
    """Make ``--out`` default to ``folder`` (``None``: no plot), its ``--help`` saying so."""
    for action in parser._actions:
        if action.dest == "out":
            action.default, action.help = folder, _out_help(folder)
    return parser


def add_layers_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--pyg-layers``: PyG's ``SAGEConv`` / ``GATConv`` instead of the demos' own plain-torch
    layers. Off by default, so a run computes the same thing whether or not ``torch_geometric``
    happens to be installed (the two differ in initialisation and arithmetic order)."""
    parser.add_argument(
        "--pyg-layers",
        action="store_true",
        help="use PyG's SAGEConv / GATConv (needs torch_geometric) instead of the built-in plain-torch "
        "layers (default: the built-in ones, whatever is installed)",
    )
    return parser


def add_task_option(parser: argparse.ArgumentParser, default: str) -> argparse.ArgumentParser:
    """``--task node|link``: the main job's choice (``python -m gglspeedup.demo --task link``)."""
    parser.add_argument(
        "--task",
        choices=("node", "link"),
        default=default,
        help="node classification (GraphSAGE, test accuracy) or link prediction (GraphSAGE encoder, "
        "dot-product decoder, test ROC-AUC) (default: %(default)s)",
    )
    return parser

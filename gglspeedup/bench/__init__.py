"""``python -m gglspeedup.bench <command> ...``: side-by-side throughput measurements.

Each command lives in its own module (``gglspeedup.bench.<command>``) exposing
``add_arguments(parser)`` and ``run(args) -> dict``; this file only dispatches. Results print as a
table and, with ``--json PATH``, are written as JSON. Peers (DGL, PyG, NumPy, torch) are measured
in the same process and run as the library, so ratios survive machine noise.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from .._config import run_command

__all__ = ["main", "COMMANDS"]

COMMANDS = {
    "sample": "neighbour sampling: sampled edges/s, ours vs DGL / PyG / NumPy",
    "gather": "feature gather: GB/s per cache ratio vs the tier's copy bandwidth and numpy.take",
    "multi": "multi-process sampling: per-rank throughput and scaling efficiency",
    "link": "link-prediction sampling (negatives, exclusion): sampled edges/s vs DGL's edge sampler",
    "hetero": "typed sampling: sampled edges/s, HeteroNeighborSampler vs DGL's typed sampler and vs untyped",
    "loader": "NodeLoader batches/s and gather GB/s, recycled output buffers vs fresh ones",
    "pyg": "PyG's loaders batches/s: PyG's own sampler vs gglspeedup.pyg's, and the record conversion cost",
    "build": "CSR construction in memory: from_edge_index (parallel counting sort) vs the previous stable argsort",
    "scale": "the papers-like graph out of core: build time and memory, bytes per edge, sampling and disk gathers",
    "gammagl": "GammaGL's GraphSAGE loop: its NeighborSampler vs gglspeedup.gammagl's, sampling to whole epochs",
    "attention": "Diffuser attention: pattern per step, layer fwd+bwd GFLOP/s, peak memory vs Diffuser's DGL code",
    "soak": "leak check: node, link and typed loaders with prefetch for --minutes, RSS every second",
    "inference": "layer-wise full-graph inference: nodes/s and peak memory against the bound, vs DGL's recipe",
    "gpu": "the one-shot GPU check: GPU tests, CPU == GPU, stream races, staging, sampling and gather figures",
    "attention-pooling": "softmax / sparsemax / gfusedmax pooling of graph batches: ms per iteration vs attpool2",
    "temporal": "temporal sampling: edges/s beside plain sampling (sorted and unsorted rows) and pyg-lib's",
    "service": "partition servers on Ray: batches/s vs the local sampler, bytes per batch, failure timings",
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gglspeedup.bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.add_argument("--json", metavar="PATH", help="also write the results as JSON")
        module = f"{__name__}.{name.replace('-', '_')}"  # a hyphenated command lives in an underscored module
        command.set_defaults(_module=module)
        _add_command_arguments(command, module)
    args = parser.parse_args(argv)
    _check_json(args.json)
    return run_command(f"python -m gglspeedup.bench {args.command}", _run, args)


def _check_json(path) -> None:
    """``--json PATH`` checked before the run (:func:`gglspeedup._replace.check_out_file`, the
    demos' ``--json`` check too): a folder, a parent folder that is missing or not writable, or a
    file that cannot be written raises ``ValueError`` naming ``--json``, instead of a traceback at
    the end that loses the minutes of measurements before it."""
    if path is None:
        return
    from .._replace import check_out_file

    try:
        check_out_file(path)
    except ValueError as error:
        raise ValueError(f"--json: {error}") from None


def _run(args) -> int:
    results = importlib.import_module(args._module).run(args)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2, default=str)
        print(f"wrote {args.json}")
    return 0


def _add_command_arguments(parser, module_name):
    # Each command module is imported only for its own arguments (they are small and import
    # nothing heavy at module level); a module not written yet leaves the command without options.
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        return
    module.add_arguments(parser)


if __name__ == "__main__":
    sys.exit(main())

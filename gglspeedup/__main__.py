"""``python -m gglspeedup <command>``: ``warmup`` (compile the CPU kernels ahead of training).

The demo and the benchmarks have commands of their own: ``python -m gglspeedup.demo``,
``python -m gglspeedup.bench``. Run from a Python without the core dependencies (not the
project's ``.venv``), a command prints which environment to use instead of a traceback.
"""

import sys

from ._config import run_command

COMMANDS = {"warmup": "compile the CPU kernels once, so the first epoch does not (see gglspeedup.warmup)"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:
        listing = "\n".join(f"  {name:8s} {text}" for name, text in COMMANDS.items())
        asked = argv[:1] in (["-h"], ["--help"])  # help asked for: stdout and status 0, as argparse does
        # argparse's form: the usage, then what was wrong (an unknown command was not named)
        wrong = f"unknown command {argv[0]!r}" if argv else "a command is required"
        error = "" if asked else f"\n\npython -m gglspeedup: error: {wrong}"
        print(
            f"usage: python -m gglspeedup <command> [options]\n\ncommands:\n{listing}{error}",
            file=None if asked else sys.stderr,
        )
        return 0 if asked else 2
    return run_command(f"python -m gglspeedup {argv[0]}", _warmup, argv[1:])


def _warmup(argv) -> int:
    from . import warmup

    return warmup.main(argv)


if __name__ == "__main__":
    sys.exit(main())
